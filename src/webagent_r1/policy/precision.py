"""Which precision the policy computes in, chosen by measurement, and the machine's peak.

``model.autocast_bf16`` is ``auto`` (the default), ``true`` or ``false``. ``true`` and
``false`` are obeyed as written. ``auto`` on a CUDA GPU means bf16 autocast where the GPU
supports bf16. ``auto`` on a CPU times one forward and backward of the model's own linear
layer shapes in fp32 and under bf16 autocast and uses the faster. A flag in ``/proc/cpuinfo``
does not tell whether PyTorch's kernels are fast: some CPUs that list ``avx512_bf16`` run
autocast slower than fp32, and emulated bf16 on AVX2-only CPUs is several times slower.

The timings are cached per machine in ``$WEBAGENT_R1_HOME/precision.json``, keyed by CPU
model, torch version, thread count and layer shapes, so the choice costs seconds once per
machine and nothing after. The same file caches the peak matmul FLOP/s that model FLOP
utilisation (MFU) is reported against (``peak_flops``).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from webagent_r1.config import ConfigError, ModelConfig, home_dir
from webagent_r1.policy.models import resolve_model

Shapes = tuple[tuple[int, int], ...]
"""(in_features, out_features) of the linear layers timed."""

DEFAULT_SHAPES: Shapes = ((576, 1536), (1536, 576), (576, 576))
"""SmolLM2-135M's MLP and attention projections: used when a model's config is unreadable."""

TIMING_TOKENS = 512
"""Tokens of the timed forward and backward (enough to reach the kernels' steady state)."""


def pick_device(device: str) -> torch.device:
    """'auto' → cuda when available, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


@dataclass
class PrecisionChoice:
    """What ``model.autocast_bf16`` resolved to and why."""

    autocast: bool
    """Whether the policy runs under bf16 autocast."""
    setting: str
    """The configured value: 'auto', 'true' or 'false'."""
    source: str
    """'setting' (true/false as written), 'cuda', 'measured' or 'cache'."""
    fp32_s: float | None = None
    """Seconds of the timed fp32 forward+backward (CPU 'auto' only)."""
    bf16_s: float | None = None
    """Seconds of the same under bf16 autocast (CPU 'auto' only)."""

    def describe(self) -> str:
        """One line for the log."""
        what = "bf16 autocast" if self.autocast else "fp32"
        if self.fp32_s is None or self.bf16_s is None:
            return f"precision: {what} (model.autocast_bf16={self.setting}, {self.source})"
        cached = ", cached" if self.source == "cache" else ""
        return (
            f"precision: {what} (model.autocast_bf16=auto: forward+backward {self.fp32_s:.3f} s "
            f"in fp32, {self.bf16_s:.3f} s under bf16 autocast on {cpu_model()}{cached})"
        )


def setting_name(value: bool | str) -> str:
    """'auto', 'true' or 'false' for a ``model.autocast_bf16`` value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


CPU_FEATURES = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")
"""Flags of /proc/cpuinfo that decide how fast fp32 and bf16 run, fastest first."""


def cpu_features() -> list[str]:
    """Which of ``CPU_FEATURES`` this CPU lists (empty where there is no /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return [c for c in CPU_FEATURES if c in flags]
    except OSError:
        pass
    return []


def machine_name(device: torch.device) -> str:
    """The processor a policy runs on, for a run's record: the GPU's name, or the CPU's model
    with its fastest vector feature ('AMD EPYC (avx512_bf16)'): two CPUs of one model name
    may differ in it, and with it in which precision ``auto`` picks."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    feats = cpu_features()
    return f"{cpu_model()} ({feats[0] if feats else 'no avx2'})"


def run_numerics(mcfg: ModelConfig, device: torch.device | None = None) -> tuple[str, str]:
    """``(numerics, machine)`` of a policy of ``mcfg``: 'cpu, bf16 autocast' or 'cpu, float32'
    (the device, then bf16 autocast or the weights' dtype, ``model.autocast_bf16`` resolved),
    and ``machine_name``. Two runs compared in an experiment should share the first."""
    device = device or pick_device(mcfg.device)
    what = "bf16 autocast" if autocast_enabled(mcfg, device) else mcfg.dtype
    return f"{device.type}, {what}", machine_name(device)


def numerics_record(mcfg: ModelConfig) -> dict[str, str]:
    """``run_numerics`` as the record a run's mark and ``eval.json`` keep:
    ``{"numerics": ..., "machine": ...}``."""
    numerics, machine = run_numerics(mcfg)
    return {"numerics": numerics, "machine": machine}


def cache_path() -> Path:
    """The per-machine cache of timings (``$WEBAGENT_R1_HOME/precision.json``)."""
    return home_dir() / "precision.json"


def _machine_key(kind: str, detail: str) -> str:
    return (
        f"{kind}|{cpu_model()}|torch {torch.__version__}|{torch.get_num_threads()} threads|{detail}"
    )


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):  # absent or unreadable: measured again, rewritten
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, key: str, value: dict[str, Any]) -> None:
    """Add ``key`` to the cache; written atomically so concurrent processes never see half."""
    data = _read_cache(path)
    data[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:  # a read-only home: the measurement is simply not kept
        pass


def model_shapes(name: str) -> Shapes:
    """Linear layer shapes of model ``name`` (registry name or folder), from its config."""
    try:
        with open(Path(resolve_model(name)) / "config.json") as f:
            c = json.load(f)
        h, i = int(c["hidden_size"]), int(c["intermediate_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_SHAPES
    return ((h, i), (i, h), (h, h))


def time_layers(
    shapes: Shapes, autocast: bool, tokens: int = TIMING_TOKENS, reps: int = 3
) -> float:
    """Median seconds of one forward and backward through linear layers of ``shapes`` on the
    CPU, fp32 weights, under bf16 autocast or not (one warm-up run first)."""
    gen = torch.Generator().manual_seed(0)
    layers = [torch.nn.Linear(i, o) for i, o in shapes]
    xs = [torch.randn(tokens, i, generator=gen, requires_grad=True) for i, _ in shapes]

    def once() -> float:
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            outs = [layer(x) for layer, x in zip(layers, xs, strict=True)]
        sum(o.float().sum() for o in outs).backward()
        return time.perf_counter() - t0

    once()
    times = sorted(once() for _ in range(reps))
    return times[len(times) // 2]


def choose_autocast(
    setting: bool | str,
    device: torch.device,
    shapes: Shapes = DEFAULT_SHAPES,
    timer: Callable[[Shapes, bool], float] = time_layers,
    cache: Path | None = None,
) -> PrecisionChoice:
    """Resolve a ``model.autocast_bf16`` value for ``device``.

    Args:
        setting: ``True``, ``False`` or ``'auto'``.
        device: where the policy runs.
        shapes: linear layer shapes to time (CPU ``auto``).
        timer: ``timer(shapes, autocast) -> seconds`` (``time_layers``; tests pass a stub).
        cache: the timings cache (``cache_path()``); None measures without caching.

    Raises:
        ValueError: a setting other than true, false or 'auto'.
    """
    name = setting_name(setting)
    if name not in ("auto", "true", "false"):
        raise ValueError(f"model.autocast_bf16 must be auto, true or false, got {setting!r}")
    if name != "auto":
        return PrecisionChoice(name == "true", name, "setting")
    if device.type == "cuda":
        return PrecisionChoice(torch.cuda.is_bf16_supported(), name, "cuda")
    if device.type != "cpu":
        return PrecisionChoice(False, name, device.type)
    key = _machine_key("autocast", "x".join(f"{i}:{o}" for i, o in shapes))
    hit = _read_cache(cache).get(key) if cache is not None else None
    if isinstance(hit, dict) and {"fp32_s", "bf16_s"} <= hit.keys():
        f, b = float(hit["fp32_s"]), float(hit["bf16_s"])
        return PrecisionChoice(b < f, name, "cache", f, b)
    f, b = timer(shapes, False), timer(shapes, True)
    if cache is not None:
        _write_cache(cache, key, {"fp32_s": f, "bf16_s": b})
    return PrecisionChoice(b < f, name, "measured", f, b)


_resolved: dict[tuple, PrecisionChoice] = {}
_lock = threading.Lock()


def resolve_autocast(mcfg: ModelConfig, device: torch.device | None = None) -> PrecisionChoice:
    """``model.autocast_bf16`` of ``mcfg`` resolved on ``device`` (default: ``model.device``),
    once per process; the first resolution prints its line to stderr."""
    device = device or pick_device(mcfg.device)
    name = setting_name(mcfg.autocast_bf16)
    shapes = model_shapes(mcfg.name) if name == "auto" and device.type == "cpu" else ()
    key = (name, device.type, shapes)
    with _lock:
        if key not in _resolved:
            choice = choose_autocast(
                mcfg.autocast_bf16, device, shapes or DEFAULT_SHAPES, cache=cache_path()
            )
            _resolved[key] = choice
            print(choice.describe(), file=sys.stderr)
        return _resolved[key]


def autocast_enabled(mcfg: ModelConfig, device: torch.device | None = None) -> bool:
    """Whether the policy of ``mcfg`` runs under bf16 autocast (``resolve_autocast``)."""
    return resolve_autocast(mcfg, device).autocast


def sampler_matches_trainer(cfg: Any, device: torch.device | None = None) -> bool:
    """Whether the sampler of ``cfg`` computes its log-probs as the trainer does, so that they
    can serve as π_old: the HF engine in fp32 (fp32 weights, no bf16 autocast); never vLLM,
    which runs in bf16 or fp16. Under bf16 the sampler's incremental decoding and the
    trainer's whole-sequence forward round differently: several percent a token
    (``scripts/device_check.py``)."""
    if cfg.train.generation_engine == "vllm":
        return False
    return cfg.model.dtype == "float32" and not autocast_enabled(cfg.model, device)


def resolve_old_logprobs(cfg: Any, device: torch.device | None = None) -> str:
    """``rl.old_logprobs`` of ``cfg`` on ``device``: 'sampler' or 'recompute'.

    'auto' takes the sampler's log-probs when they equal the trainer's
    (``sampler_matches_trainer``: one forward saved) and recomputes them otherwise.

    Raises:
        ConfigError: 'sampler' where the sampler runs in bf16.
    """
    setting = cfg.rl.old_logprobs
    if setting == "recompute":
        return setting
    exact = sampler_matches_trainer(cfg, device)
    if setting == "auto":
        return "sampler" if exact else "recompute"
    if not exact:
        raise ConfigError(
            "rl.old_logprobs=sampler needs a sampler that computes in fp32 as the trainer "
            "does; under bf16 its log-probs differ from the trainer's by several percent a "
            "token, so the ratio clips noise: use rl.old_logprobs=auto or recompute"
        )
    return setting


# ------------------------------------------------------------------ peak FLOP/s and MFU

PEAK_MATMUL_SIZE = 1024
"""Side of the square matmul timed for the CPU's peak (2·n³ FLOP a run)."""


def time_matmul(autocast: bool, n: int = PEAK_MATMUL_SIZE, reps: int = 5) -> float:
    """Best achieved FLOP/s of an n×n by n×n matmul on the CPU (fp32, or bf16 inputs)."""
    gen = torch.Generator().manual_seed(0)
    dtype = torch.bfloat16 if autocast else torch.float32
    a = torch.randn(n, n, generator=gen).to(dtype)
    b = torch.randn(n, n, generator=gen).to(dtype)
    a @ b  # warm-up
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / max(best, 1e-12)


@dataclass
class Peak:
    """The machine's measured peak matmul FLOP/s in the precision the policy runs in."""

    flops: float
    precision: str
    source: str
    """'measured', 'cache', 'achieved' (the model ran faster than the measured peak:
    ``raise_peak``) or 'none' (a GPU: no peak measured; MFU is not reported)."""


_peaks: dict[tuple, Peak] = {}


def peak_flops(
    autocast: bool,
    device: torch.device,
    timer: Callable[[bool], float] = time_matmul,
    cache: Path | None = None,
) -> Peak:
    """The peak FLOP/s that MFU is reported against: a matmul micro-benchmark on the CPU in
    the policy's precision, cached per machine like the precision timings (``cache`` defaults
    to ``cache_path()``); once per process. On a GPU none is measured (``flops`` 0)."""
    precision = "bf16" if autocast else "fp32"
    if device.type != "cpu":
        return Peak(0.0, precision, "none")
    cache = cache or cache_path()
    key = (precision, str(cache))
    with _lock:
        if key in _peaks:
            return _peaks[key]
        ck = _machine_key("peak", precision)
        hit = _read_cache(cache).get(ck)
        if isinstance(hit, dict) and isinstance(hit.get("flops"), int | float) and hit["flops"] > 0:
            peak = Peak(float(hit["flops"]), precision, "cache")
        else:
            peak = Peak(timer(autocast), precision, "measured")
            _write_cache(cache, ck, asdict(peak) | {"source": "measured"})
        _peaks[key] = peak
        return peak


def raise_peak(peak: Peak, achieved: float, cache: Path | None = None) -> Peak:
    """The peak to report MFU against once the model itself ran at ``achieved`` FLOP/s.

    The matmul micro-benchmark takes a fraction of a second; measured while other work shared
    the cores (a browser, a test run), it reads low, and the cached value would then put MFU
    above 1 in every later run on the machine. A rate the model achieved is a lower bound of
    the peak: above the peak it replaces it, here and in the cache (``source`` 'achieved').
    """
    if peak.flops <= 0 or achieved <= peak.flops:
        return peak
    new = Peak(float(achieved), peak.precision, "achieved")
    cache = cache or cache_path()
    with _lock:
        _peaks[(peak.precision, str(cache))] = new
        _write_cache(cache, _machine_key("peak", peak.precision), asdict(new))
    return new


@dataclass(frozen=True)
class ModelSize:
    """What the FLOP count of a model needs."""

    params: int
    """All parameters."""
    layers: int
    """Decoder layers (0 where the model has no ``config.num_hidden_layers``)."""
    hidden: int
    """Hidden size."""
    through: int
    """Parameters a backward pass runs through: all but the frozen decoder layers below the
    lowest one with a trainable weight (no gradient flows below it)."""
    trainable: int
    """Parameters with a gradient."""
    layers_through: int
    """Decoder layers a backward pass runs through."""
    head: int = 0
    """Parameters of the LM head (the input embeddings when tied): its matmul runs only at the
    positions whose next token is scored, not at every token."""
    head_trainable: bool = False
    """Whether the LM head's weight has a gradient."""


def model_size(model: Any) -> ModelSize:
    """``ModelSize`` of a transformers causal LM as it will train (freezing applied)."""
    cfg = getattr(model, "config", None)
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    layers = getattr(getattr(model, "model", None), "layers", None)
    n_layers = int(getattr(cfg, "num_hidden_layers", 0) or (len(layers) if layers else 0))
    through, layers_through = n, n_layers
    if layers is not None:
        k = next(
            (i for i, la in enumerate(layers) if any(p.requires_grad for p in la.parameters())),
            len(layers),
        )
        through = n - sum(p.numel() for la in layers[:k] for p in la.parameters())
        layers_through = len(layers) - k
    hidden = int(getattr(cfg, "hidden_size", 0) or 0)
    get_head = getattr(model, "get_output_embeddings", None)
    head = get_head() if callable(get_head) else None
    weight = getattr(head, "weight", None)
    head_n = int(weight.numel()) if weight is not None else 0
    head_grad = bool(weight is not None and weight.requires_grad)
    return ModelSize(n, n_layers, hidden, through, trainable, layers_through, head_n, head_grad)


def sequences_flops(
    lengths: list[int], size: ModelSize, train: bool = True, scored: list[int] | None = None
) -> float:
    """Model FLOPs of running sequences of ``lengths`` tokens through a model of ``size``
    with causal attention (a sequence's token i attends to i + 1 keys).

    A forward costs 2 FLOPs per parameter per token for the body, 2 per LM-head parameter per
    scored position (``scored``: how many positions of each sequence are scored, default
    all), and two attention matmuls of 2 · hidden FLOPs per key per layer. A training pass
    adds the backward: gradients of the activations through every parameter a gradient flows
    through and of the trainable weights (2 FLOPs per parameter per token each, the head's at
    scored positions), attention twice its forward in the layers it runs through; for full
    fine-tuning with every position scored that is the usual 6 · parameters · tokens. These
    are the FLOPs of the nominal rows: prompts shared within a micro-batch are computed once,
    so the hardware runs fewer and an MFU from these reads higher.
    """
    tokens = sum(lengths)
    head_tokens = tokens if scored is None else sum(scored)
    keys = sum(n * (n + 1) // 2 for n in lengths)
    body = size.params - size.head
    f = 2.0 * body * tokens + 2.0 * size.head * head_tokens
    f += 4.0 * size.layers * size.hidden * keys
    if train:
        body_through = size.through - size.head
        body_trainable = size.trainable - (size.head if size.head_trainable else 0)
        f += 2.0 * (body_through + body_trainable) * tokens
        f += 2.0 * size.head * (1 + size.head_trainable) * head_tokens
        f += 8.0 * size.layers_through * size.hidden * keys
    return f


class FlopsMeter:
    """Achieved model FLOP/s of training and sampling, and their fraction of the peak (MFU).

    Args:
        model: the policy as it trains (before sharding, so sizes are whole-model).
        autocast: whether it runs under bf16 autocast (the peak is measured in that precision).
    """

    def __init__(self, model: Any, autocast: bool) -> None:
        self.size = model_size(model)
        self.peak = peak_flops(autocast, next(model.parameters()).device)

    def samples(self, samples: list[Any], train: bool = True) -> float:
        """FLOPs of one pass over ``samples`` (``input_ids`` and ``prompt_len``: the LM head
        runs at the completion's positions only)."""
        lengths = [len(s.input_ids) for s in samples]
        scored = [len(s.input_ids) - s.prompt_len for s in samples]
        return sequences_flops(lengths, self.size, train, scored)

    def update(self, batch: Any, rl: Any, fuse_old: bool = True) -> float:
        """FLOPs of an M-GRPO update of ``batch``: ``rl.mu`` training passes, plus a forward
        for π_old when it is recomputed (``rl.old_logprobs`` resolved) in a pass of its own
        (μ > 1, or ``fuse_old`` off: at μ = 1 the training forward gives it), and one of the
        reference model when ``rl.beta`` > 0."""
        separate_old = rl.old_logprobs != "sampler" and (rl.mu > 1 or not fuse_old)
        forwards = separate_old + (rl.beta > 0)
        return rl.mu * self.samples(batch.samples) + forwards * self.samples(batch.samples, False)

    def rollout(self, trajectories: list[Any]) -> float:
        """FLOPs of sampling ``trajectories``: each turn's prompt and completion once (the KV
        cache makes decoding one forward over the sequence), the LM head at each sampled
        token."""
        turns = [t for tr in trajectories for t in tr.turns]
        lengths = [len(t.prompt_ids) + len(t.completion_ids) for t in turns]
        scored = [len(t.completion_ids) for t in turns]
        return sequences_flops(lengths, self.size, train=False, scored=scored)

    def metrics(self, prefix: str, flops: float, seconds: float) -> dict[str, float]:
        """``<prefix>/flops_per_s`` and, where a peak was measured, ``<prefix>/mfu``."""
        rate = flops / max(seconds, 1e-9)
        out = {f"{prefix}/flops_per_s": rate}
        self.peak = raise_peak(self.peak, rate)
        if self.peak.flops > 0:
            out[f"{prefix}/mfu"] = rate / self.peak.flops
        return out
