#!/usr/bin/env python
"""Device check of the GPU training path, offline, with random models built from configs.

    PYTHONPATH=src python scripts/device_check.py --device cuda --out runs/device-check
    PYTHONPATH=src python scripts/device_check.py --device cpu      # tiny shape only (CI)

Needs only torch, transformers, peft and accelerate plus this repository (no vLLM, no
browser, no network, no model download). Prints one line per check, PASS / FAIL / SKIP with
its numbers, and writes every result to ``<out>/device-check.json``; exits 1 when a check
fails. On CUDA it takes a few minutes (the 3B-shaped model dominates).

Checks:
  models         tiny and (CUDA) Qwen2.5-3B-shaped random models, parameter counts = the plan's
  hf_logprobs    HF engine sampled at T=0.7, in fp32 and under bf16 autocast: engine log-probs
                 vs the trainer's recompute: ratio 1 +- 1e-4 in fp32; under bf16 the
                 mismatch measured (max, mean, p99), its mean within 0.1
  mgrpo_shared   one M-GRPO update with shared prompts and prefix = one row per sample
  dist           Dist on a one-process NCCL (gloo on CPU) group: collectives on the backend's
                 device, a wrong-device tensor refused
  grad_allreduce Dist.all_reduce_grads in place, in buckets: the gradients' own tensors keep
                 the (one-process) sum; on CUDA its extra memory at most one bucket (+5%)
  fsdp           FSDP2 fully_shard (3B shape on CUDA) with bf16 mixed precision: layers
                 compute in bf16 over fp32 shards; an update, a checkpoint, a resume that
                 continues identically
  handover       (CUDA) stage hand-over: after a BC-like 3B update is dropped, free_cuda_memory
                 returns the allocator's blocks (at most 1 GiB left reserved) and an
                 engine-sized share (vllm.gpu_memory_utilization 0.3 of the GPU) is free
  peak_memory    (CUDA) peak memory of a 3B update at the recipe's token budget vs the memory
                 plan (an upper bound: at most 2% above, 25% below)
  throughput     generation and update tokens/s; MFU against the GPU's bf16 peak
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import shutil
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the rollout fakes of the tests (tests/support/tiny.py)
    sys.path.insert(0, str(ROOT))

TOL_RATIO_FP32 = 1e-4
"""Largest |exp(engine log-prob - trainer log-prob) - 1| that passes in fp32: the sampler's
incremental decode and the trainer's full forward differ only in summation order."""
TOL_MEAN_BF16 = 0.1
"""Largest mean of that deviation under bf16 autocast. bf16 keeps 8 bits of mantissa and the
two paths run matrices of different shapes (one new token against a whole sequence), so they
round differently: the fp32 bound checks the bookkeeping (temperature, alignment), and the
bf16 numbers measure the mismatch a run with ``rl.old_logprobs: sampler`` would carry (on a
3B model on a GPU, a few percent a token: the trainer refuses that setting there). The loose
mean bound still fails a bookkeeping error, which moves every token's ratio by tens of
percent."""
PRECS = ("fp32", "bf16")
"""The precisions the engine and the trainer are compared under (bf16: autocast)."""
PLAN_TOL = 0.15
"""Largest relative gap between the memory plan's predicted update peak and the measured
``torch.cuda.max_memory_allocated`` of a small configuration (``plan_small``), either way."""
PLAN_SLACK = (0.02, 0.25)
"""The memory plan is an upper bound: the measured peak of an update may exceed it by at most
2% and fall below it by at most 25%. (The plan adds every gradient to every activation kept
for the backward pass; in the backward the first fill as the second are freed.)"""
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "H800": 989.0, "A100": 312.0, "L40S": 362.0}
"""Dense bf16 peak of a GPU by its name (MFU); others report none."""
RECIPE = "configs/gpu/qwen2.5-3b-r1.yaml"
"""The recipe whose token budget and memory options the 3B checks use."""


def _stand_in_playwright() -> bool:
    """Stand-in ``playwright`` modules when it is not installed (the device image has none).

    The trainer's modules import browser names at import time; this check never opens a
    browser, so any name resolves to a placeholder exception class. Returns whether the
    stand-in was installed.
    """
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:

        def stand_in(attr: str) -> type:
            if attr.startswith("__"):  # module attributes (__file__, __path__ …): none
                raise AttributeError(attr)
            return type(attr, (Exception,), {})

        for name in ("playwright", "playwright.async_api"):
            mod = types.ModuleType(name)
            mod.__getattr__ = stand_in  # type: ignore[method-assign]
            sys.modules[name] = mod
        return True
    return False


class CheckFailed(AssertionError):
    """A failed check that still reports what it measured (``details``)."""

    def __init__(self, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.details = details


class IdTokenizer:
    """Decodes ids as numbers: the 3B-shaped model has no tokenizer, the engine only decodes."""

    pad_token_id, eos_token_id = 1, 2

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return " ".join(map(str, ids))


class Check:
    """The state the checks share and the results they record."""

    def __init__(self, device: str, out: Path) -> None:
        import torch

        self.device = device
        self.out = out
        self.tmp = Path(tempfile.mkdtemp(prefix="device-check-"))
        self.results: list[dict[str, Any]] = []
        self.cuda = device == "cuda"
        self.gpu = torch.cuda.get_device_name(0) if self.cuda else None
        self.tiny_dir = self.tmp / "tiny"
        self.numbers: dict[str, float] = {}

    def run(self, name: str, fn: Callable[[Check], dict[str, Any] | None]) -> None:
        """Run check ``name``; print and record PASS / FAIL / SKIP with its details."""
        t0 = time.perf_counter()
        try:
            details = fn(self) or {}
            status = "SKIP" if details.pop("skip", False) else "PASS"
        except Exception as e:  # a failed check is reported, the others still run
            details = {
                **getattr(e, "details", {}),
                "error": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc(-3),
            }
            status = "FAIL"
        details["seconds"] = round(time.perf_counter() - t0, 2)
        self.results.append({"check": name, "status": status, **details})
        shown = {k: v for k, v in details.items() if k != "trace"}
        print(f"{status} {name} {json.dumps(shown, default=str)}", flush=True)
        _free(self.cuda)


def _free(cuda: bool) -> None:
    import gc

    import torch

    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


def _cfg(c: Check, model_name: str, *extra: str) -> Any:
    from webagent_r1.config import load_config

    return load_config(
        None,
        [
            f"model.name={model_name}",
            f"model.device={c.device}",
            "model.autocast_bf16=true",
            *extra,
        ],
    )


def _shape_3b() -> Any:
    from webagent_r1.train.memory_plan import KNOWN_SHAPES

    return KNOWN_SHAPES["qwen2.5-3b-instruct"]


def _random_3b(c: Check, dtype: Any = None) -> Any:
    """A Qwen2.5-3B-shaped random model built on the device (no download, no file)."""
    return _random_model(c, _shape_3b(), dtype)


def _random_model(c: Check, s: Any, dtype: Any = None) -> Any:
    """A random Qwen2-style model of shape ``s`` (a ``ModelShape``) built on the device."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    cfg = Qwen2Config(
        vocab_size=s.vocab,
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads,
        tie_word_embeddings=s.tied,
        max_position_embeddings=32768,
        pad_token_id=1,
        eos_token_id=2,
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    with torch.device(c.device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype or torch.float32)
    return model


# ------------------------------------------------------------------------------- checks


def check_models(c: Check) -> dict[str, Any]:
    from tests.support.tiny import make_tiny_model

    from webagent_r1.train.memory_plan import shape_for

    make_tiny_model(c.tiny_dir)
    out: dict[str, Any] = {"tiny_params": shape_for(str(c.tiny_dir)).params}
    if c.cuda:
        model = _random_3b(c)
        n = sum(p.numel() for p in model.parameters())
        assert n == _shape_3b().params, f"3B shape: {n} parameters, the plan says {_shape_3b()}"
        out["qwen3b_params"] = n
        del model
    return out


def _engine_vs_trainer(
    c: Check, model: Any, tok: Any, prompts: list[list[int]], new: int, bf16: bool = True
) -> dict:
    """Sample at T=0.7 with the HF engine (bf16 autocast or fp32); recompute the log-probs as
    the trainer does under the same precision; the ratio of the two per token."""
    import torch

    from webagent_r1.policy.base import SamplingParams
    from webagent_r1.policy.hf import HFEngine, autocast_ctx
    from webagent_r1.rollout.trajectories import turn_samples
    from webagent_r1.train.batching import collate, completion_logprobs
    from webagent_r1.types import Trajectory, Turn

    model.eval()
    engine = HFEngine(model, tok, autocast_bf16=bf16, max_batch_size=len(prompts))
    params = SamplingParams(temperature=0.7, max_new_tokens=new, stop=[], seed=0)
    try:
        if c.cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        comps = engine.generate_sync(prompts, params)
        if c.cuda:
            torch.cuda.synchronize()
        gen_s = time.perf_counter() - t0
    finally:
        engine.close()
    turns = [
        Turn(
            prompt_ids=p,
            completion_ids=comp.token_ids,
            completion_logprobs=comp.logprobs,
            text="",
            action=None,
        )
        for p, comp in zip(prompts, comps, strict=True)
    ]
    traj = Trajectory(task_id="t", group_id=0, turns=turns, reward=1.0, status="done")
    samples = turn_samples(traj)
    mb = collate(samples, list(range(len(samples))), pad_id=1)
    with torch.no_grad():
        trainer = completion_logprobs(model, mb, 0.7, bf16).float().cpu()  # (N,)
    engine_lp = torch.tensor([lp for comp in comps for lp in comp.logprobs])  # (N,)
    ratio = torch.exp(engine_lp - trainer)
    tokens = int(engine_lp.numel())
    dev = next(model.parameters()).device
    dev_ratio = (ratio - 1).abs()
    return {
        "tokens": tokens,
        "max_ratio_dev": float(dev_ratio.max()),
        "mean_ratio_dev": float(dev_ratio.mean()),
        "p99_ratio_dev": float(dev_ratio.quantile(0.99)),
        "over_1e-2": float((dev_ratio > 1e-2).float().mean()),
        "bf16": bf16 and autocast_ctx(dev, True).__class__.__name__ != "nullcontext",
        "gen_tokens_per_s": tokens / max(gen_s, 1e-9),
    }


def check_hf_logprobs(c: Check) -> dict[str, Any]:
    import random

    import torch

    from webagent_r1.policy.hf import load_tokenizer
    from webagent_r1.policy.trainable import load_policy

    rng = random.Random(0)
    model, tok = load_policy(_cfg(c, str(c.tiny_dir)))
    prompts = [[rng.randrange(3, 96) for _ in range(rng.randint(4, 12))] for _ in range(4)]
    tok = load_tokenizer(str(c.tiny_dir))
    out = {f"tiny_{p}": _engine_vs_trainer(c, model, tok, prompts, 16, p == "bf16") for p in PRECS}
    del model
    if c.cuda:
        model = _random_3b(c)
        prompts = [[rng.randrange(3, 150000) for _ in range(256)] for _ in range(8)]
        for p in PRECS:
            out[f"qwen3b_{p}"] = _engine_vs_trainer(
                c, model, IdTokenizer(), prompts, 64, p == "bf16"
            )
        c.numbers["gen_tokens_per_s"] = out["qwen3b_bf16"]["gen_tokens_per_s"]
        del model
    else:
        c.numbers["gen_tokens_per_s"] = out["tiny_bf16"]["gen_tokens_per_s"]
    torch.manual_seed(0)
    for name, r in out.items():
        if name.endswith("fp32"):
            dev, tol, what = r["max_ratio_dev"], TOL_RATIO_FP32, "max"
        else:
            dev, tol, what = r["mean_ratio_dev"], TOL_MEAN_BF16, "mean"
        if dev > tol:
            raise CheckFailed(f"{name}: {what} log-prob ratio deviation {dev:.2e} > {tol}", out)
    return out


def check_mgrpo_shared(c: Check) -> dict[str, Any]:
    import torch
    from tests.support.tiny import shared_prompt_group

    from webagent_r1.policy.trainable import load_policy
    from webagent_r1.train.dist import build_optimizer
    from webagent_r1.train.rl import build_rl_batch, mgrpo_update

    group = shared_prompt_group([1.0, 0.0, 0.0, 1.0, 0.0, 1.0], seed=7, system_len=8)
    runs = {}
    for share in (True, False):
        cfg = _cfg(
            c,
            str(c.tiny_dir),
            "model.autocast_bf16=false",  # an equivalence: fp32, so the two layouts compare
            "rl.lr=0.01",
            "rl.mu=2",
            f"train.share_prompts={share}",
            f"train.share_prefix={share}",
        )
        torch.manual_seed(0)
        model, _ = load_policy(cfg)
        start = [p.detach().clone() for p in model.parameters()]
        opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
        m = mgrpo_update(model, opt, build_rl_batch([copy.deepcopy(group)]), cfg, pad_id=1)
        runs[share] = (m, [p.detach().clone() for p in model.parameters()], start)
    (ms, ps, p0), (m1, p1, _) = runs[True], runs[False]
    step = sum(float((a - b).square().sum()) for a, b in zip(p1, p0, strict=True)) ** 0.5
    diff = sum(float((a - b).square().sum()) for a, b in zip(ps, p1, strict=True)) ** 0.5
    loss_gap = abs(ms["train/loss"] - m1["train/loss"])
    assert loss_gap <= 1e-4 * max(1.0, abs(m1["train/loss"])), f"loss differs by {loss_gap}"
    assert diff < 1e-3 * step, f"updates differ: |shared - rows| {diff:.2e}, step {step:.2e}"
    return {"loss": m1["train/loss"], "loss_gap": loss_gap, "update_gap_rel": diff / step}


def check_dist(c: Check) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from webagent_r1.train.dist import Dist, backend_device

    backend = "nccl" if c.cuda else "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    device = backend_device(str(dist.get_backend()))
    # world=2 only to take the collective path: the group has one process, so each
    # reduction returns the value itself (what matters is that NCCL accepts the tensors)
    d = Dist(rank=0, world=2, device=device)
    sums = d.all_reduce_sum([1.0, 2.5])
    top = d.all_reduce_max(7)
    p = torch.nn.Parameter(torch.zeros(4, device=device))
    p.grad = torch.ones(4, device=device)
    d.all_reduce_grads([p])
    assert sums == [1.0, 2.5] and top == 7 and p.grad.tolist() == [1.0] * 4
    wrong = torch.device("cpu") if c.cuda else torch.device("meta")
    try:
        d.all_reduce_grads([torch.nn.Parameter(torch.zeros(2, device=wrong))])
        refused = False
    except RuntimeError:
        refused = True
    assert refused, f"a tensor on {wrong} was handed to {backend}"
    return {"backend": str(dist.get_backend()), "device": str(device)}


def _rows(n_rows: int, prompt: int, completion: int, vocab: int, seed: int) -> Any:
    """An RLBatch of ``n_rows`` one-turn trajectories (one group of mixed rewards)."""
    import random

    from webagent_r1.rollout.collect import Group
    from webagent_r1.train.rl import build_rl_batch
    from webagent_r1.types import Task, Trajectory, Turn

    rng = random.Random(seed)
    trajs = []
    for i in range(n_rows):
        turn = Turn(
            prompt_ids=[rng.randrange(3, vocab) for _ in range(prompt)],
            completion_ids=[rng.randrange(3, vocab) for _ in range(completion)],
            completion_logprobs=[-1.0] * completion,
            text="",
            action=None,
        )
        trajs.append(
            Trajectory(task_id="t", group_id=0, turns=[turn], reward=float(i % 2), status="done")
        )
    group = Group(Task(task_id="t", sites=[], intent="x", start_url=""), trajs)
    return build_rl_batch([group])


def check_fsdp(c: Check) -> dict[str, Any]:
    import torch

    from webagent_r1.policy.trainable import load_policy

    extra = ("train.sharding=fsdp", "rl.lr=1e-4", "model.autocast_bf16=true")
    if c.cuda:
        cfg = _cfg(c, str(c.tiny_dir), *extra)  # (the 3B model is built, not loaded)

        def fresh() -> Any:
            return _random_3b(c)

        batch = lambda k: _rows(4, 512, 128, 150000, k)  # noqa: E731
    else:
        cfg = _cfg(c, str(c.tiny_dir), *extra)

        def fresh() -> Any:
            torch.manual_seed(0)
            return load_policy(cfg)[0]

        batch = lambda k: _rows(4, 12, 6, 96, k)  # noqa: E731
    # the resumed update must equal the continued one: deterministic kernels, or atomics in
    # the backward pass (embedding gradients) make two identical updates differ
    # (flash and memory-efficient attention accumulate their backward with atomics: the
    # math kernel is the deterministic one)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with sdpa_kernel(SDPBackend.MATH):
            return _fsdp_resume(c, cfg, fresh, batch)
    finally:
        torch.use_deterministic_algorithms(was_deterministic)


def _adam_steps(opt: Any) -> list[float]:
    """The distinct AdamW step counts in ``opt``'s state."""
    return sorted({float(st["step"]) for st in opt.state.values() if "step" in st})


def _fsdp_resume(c: Check, cfg: Any, fresh: Callable[[], Any], batch: Callable) -> dict:

    from webagent_r1.train.dist import build_optimizer
    from webagent_r1.train.rl import mgrpo_update
    from webagent_r1.train.sharding import (
        full_state_dict,
        save_sharded_optimizer,
        shard_model,
    )

    model = shard_model(fresh(), bf16=True)  # as the trainer under bf16: mixed precision
    seen: list[Any] = []
    layer = model.module.get_decoder().layers[0]
    hook = layer.mlp.down_proj.register_forward_pre_hook(lambda m, a: seen.append(m.weight.dtype))
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    m1 = mgrpo_update(model, opt, batch(1), cfg, pad_id=1)
    hook.remove()
    shard_dtypes = sorted({str(p.dtype) for p in model.parameters()})
    n = len(list(model.parameters()))
    watched = range(n) if not c.cuda else (0, n // 2, n - 1)  # (3B: three, on the CPU)

    def snapshot(m: Any) -> list[Any]:
        ps = list(m.parameters())
        return [ps[i].detach().full_tensor().float().cpu().clone() for i in watched]

    after_1 = snapshot(model)
    opt.zero_grad(set_to_none=True)
    # checkpoint: gathered weights (rank 0, CPU) and the sharded optimizer state
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and shutil.disk_usage(shm).free > 40 * 2**30 else c.tmp
    folder = Path(tempfile.mkdtemp(prefix="fsdp-ckpt-", dir=base))
    try:
        # (copied: on one CPU process the gathered tensors are the parameters themselves)
        weights = {k: v.clone() for k, v in full_state_dict(model, all_ranks=False).items()}
        save_sharded_optimizer(model, opt, folder / "optimizer")
        steps_saved = _adam_steps(opt)
        # the run goes on ...
        a = mgrpo_update(model, opt, batch(2), cfg, pad_id=1)
        wa = snapshot(model)
        del model, opt  # (one 3B training state at a time: an 80 GB GPU holds one)
        _free(c.cuda)
        # ... and a resumed one: a new model from the saved weights, the optimizer state
        # loaded into it, the same next update; twice, so that what two runs of one update
        # differ by on this device (kernels that are not bit-reproducible) is measured too
        runs = [
            _resumed_update(cfg, fresh, weights, folder, batch(2), snapshot, c.cuda) for _ in "ab"
        ]
        del weights
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    (b, wb, steps_loaded), (_, wb2, _) = runs
    step = max(float((x - y).abs().max()) for x, y in zip(wa, after_1, strict=True))
    drifts = [float((x - y).abs().max()) for x, y in zip(wa, wb, strict=True)]
    drift = max(drifts)
    rerun = max(float((x - y).abs().max()) for x, y in zip(wb, wb2, strict=True))
    gap = abs(a["train/loss"] - b["train/loss"])
    out = {
        "loss_2": a["train/loss"],
        "loss_2_resumed": b["train/loss"],
        "update_step": step,
        "resume_drift": drift,
        "drift_per_watched": drifts,
        "rerun_drift": rerun,
        "adam_steps_saved": steps_saved,
        "adam_steps_loaded": steps_loaded,
        "layer_dtype": str(seen[0]) if seen else None,
        "shard_dtypes": shard_dtypes,
    }
    if str(seen[0] if seen else None) != "torch.bfloat16" or shard_dtypes != ["torch.float32"]:
        raise CheckFailed("mixed precision: layers must compute in bf16 over fp32 shards", out)
    if not (math.isfinite(m1["train/loss"]) and step > 0):
        raise CheckFailed("the second update changed nothing", out)
    if steps_loaded != steps_saved:
        raise CheckFailed(f"AdamW steps {steps_loaded} after loading, {steps_saved} saved", out)
    if drift > 1e-3 * step:
        raise CheckFailed(f"resumed run drifts by {drift:.2e} (update step {step:.2e})", out)
    if gap > 1e-5 * max(1.0, abs(a["train/loss"])):
        raise CheckFailed(f"losses differ by {gap:.2e}", out)
    return out


def _resumed_update(
    cfg: Any,
    fresh: Callable[[], Any],
    weights: dict,
    folder: Path,
    batch: Any,
    snapshot: Callable,
    cuda: bool,
) -> tuple[dict, list, list[float]]:
    """A model built from ``weights``, sharded, its optimizer loaded from ``folder``, one
    update on ``batch``: (metrics, watched parameters after it, AdamW steps after loading)."""
    from webagent_r1.train.dist import build_optimizer
    from webagent_r1.train.rl import mgrpo_update
    from webagent_r1.train.sharding import load_sharded_optimizer, shard_model

    resumed = fresh()
    resumed.load_state_dict(weights)
    resumed = shard_model(resumed, bf16=True)
    ropt = build_optimizer(list(resumed.parameters()), cfg.rl.lr, cfg.train)
    load_sharded_optimizer(resumed, ropt, folder / "optimizer")
    steps = _adam_steps(ropt)
    m = mgrpo_update(resumed, ropt, batch, cfg, pad_id=1)
    after = snapshot(resumed)
    del resumed, ropt
    _free(cuda)
    return m, after, steps


def check_grad_allreduce(c: Check) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    from webagent_r1.train.dist import Dist, backend_device

    if not dist.is_initialized():
        backend = "nccl" if c.cuda else "gloo"
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    device = backend_device(str(dist.get_backend()))
    bucket_mb = 64 if c.cuda else 1
    # world=2 takes the collective path on the one-process group: the sum is the value itself
    d = Dist(rank=0, world=2, device=device, grad_bucket_mb=bucket_mb)
    # (CUDA: 1.6 GiB of fp32 gradients, 3B's largest tensors and many small ones; CPU: 6 MB)
    scale = 1 if c.cuda else 256
    # plus 32 tensors of 4 MB (CUDA): they fill 64 MB buckets, the copy the plan counts
    sizes = [
        151936 * 2048 // scale,
        *[2048 * 11008 // scale] * 4,
        *[2048 // scale] * 64,
        *[2**20 // scale] * 32,
    ]
    params = [torch.nn.Parameter(torch.zeros(n, device=device)) for n in sizes]
    for i, p in enumerate(params):
        p.grad = torch.full_like(p, float(i % 7))
    grads = [p.grad for p in params]
    if c.cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated() if c.cuda else 0
    d.all_reduce_grads(params)
    out: dict[str, Any] = {"bucket_mb": bucket_mb, "grads_mb": sum(sizes) * 4 / 2**20}
    if c.cuda:
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - before
        out["extra_mb"] = round(extra / 2**20, 1)
        # the plan's term (memory_plan: unsharded on several GPUs, one bucket)
        planned = min(bucket_mb * 2**20, sum(sizes) * 4) / 2**20
        out.update(compare_to_plan(planned, extra / 2**20))
        if not out["within"]:
            raise CheckFailed(
                f"the all-reduce held {extra / 2**20:.0f} MB, the plan {planned:.0f} MB", out
            )
    same = all(p.grad is g for p, g in zip(params, grads, strict=True))
    values = all(float(p.grad[0]) == float(i % 7) for i, p in enumerate(params))
    if not (same and values):
        raise CheckFailed("the gradients were replaced or changed by a one-process sum", out)
    return out


def check_handover(c: Check) -> dict[str, Any]:
    if not c.cuda:
        return {"skip": True, "why": "CUDA only (the caching allocator)"}
    import torch

    from webagent_r1.policy.cuda_memory import GIB, free_cuda_memory

    cfg = _cfg(c, str(c.tiny_dir), "model.device=cuda", "rl.lr=1e-4")
    stage_alloc = _bc_like_update(c, cfg)  # the stage's tensors are gone, its blocks cached
    held = torch.cuda.memory_reserved() / GIB
    lines: list[str] = []
    mem = free_cuda_memory("after a BC-sized stage", lines.append)
    assert mem is not None
    need = 0.3 * mem.total_gib  # vllm.gpu_memory_utilization of the recipes
    out = {
        "stage_peak_gib": round(stage_alloc, 2),
        "reserved_before_gib": round(held, 2),
        "reserved_after_gib": round(mem.reserved_gib, 2),
        "free_gib": round(mem.free_gib, 2),
        "engine_need_gib": round(need, 2),
        "line": lines[0] if lines else None,
    }
    if mem.reserved_gib > 1.0 or mem.free_gib < need:
        raise CheckFailed("the stage's memory was not handed back before the engine", out)
    block = torch.empty(int(need * GIB), dtype=torch.uint8, device="cuda")  # the engine's share
    del block
    return out


def _bc_like_update(c: Check, cfg: Any) -> float:
    """One 3B update with AdamW (a BC stage's state), then everything dropped; its peak GiB."""
    import torch

    from webagent_r1.train.dist import build_optimizer
    from webagent_r1.train.memory_plan import GIB
    from webagent_r1.train.rl import mgrpo_update

    model = _random_3b(c)
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    mgrpo_update(model, opt, _rows(2, 512, 128, 150000, 1), cfg, pad_id=1)
    peak = torch.cuda.max_memory_allocated() / GIB
    del model, opt
    return peak


def check_peak_memory(c: Check) -> dict[str, Any]:
    if not c.cuda:
        return {"skip": True, "why": "CUDA only (the allocator's peak)"}
    import torch

    from webagent_r1.config import load_config
    from webagent_r1.train.memory_plan import GIB, plan_memory

    cfg = load_config(str(ROOT / RECIPE), ["rl.beta=0", "model.device=cuda"])
    before = torch.cuda.memory_allocated() / GIB  # left by earlier checks: should be ~0
    total_gib = torch.cuda.get_device_properties(0).total_memory / GIB
    plan = plan_memory(cfg, 1, total_gib, shape=_shape_3b())
    expected = plan.update_peak - plan.overhead  # the allocator does not see the overhead
    info = {"allocated_before_gib": round(before, 2), "plan_gib": round(expected, 2)}
    try:
        return _peak_memory(c, cfg, expected, info)
    except torch.cuda.OutOfMemoryError as e:
        info["max_allocated_gib"] = round(torch.cuda.max_memory_allocated() / GIB, 2)
        raise CheckFailed(f"out of memory: {str(e).splitlines()[0]}", info) from None


def _peak_memory(c: Check, cfg: Any, expected: float, info: dict[str, Any]) -> dict[str, Any]:
    model = _random_3b(c)
    r = _measure_update(c, model, cfg, vocab=150000)
    c.numbers["update_tokens_per_s"] = r["tokens"] / r["seconds"]
    peak = r["measured_gib"]
    gap = (peak - expected) / expected
    out = {
        **info,
        "measured_gib": round(peak, 2),
        "gap": round(gap, 3),
        "rows": r["rows"],
        "tokens": r["tokens"],
        "loss": r["loss"],
    }
    over, under = PLAN_SLACK
    if not -under <= gap <= over:
        raise CheckFailed(f"peak {peak:.1f} GiB vs plan {expected:.1f} GiB ({gap:+.0%})", out)
    return out


def compare_to_plan(planned: float, measured: float, tol: float = PLAN_TOL) -> dict[str, Any]:
    """The measured memory against the plan's: ``gap`` = measured / planned - 1, ``within``
    when |gap| <= ``tol`` (either unit, the same for both)."""
    if planned <= 0:
        return {"planned": planned, "measured": measured, "gap": None, "within": False}
    gap = measured / planned - 1
    return {
        "planned": round(planned, 3),
        "measured": round(measured, 3),
        "gap": round(gap, 3),
        "within": abs(gap) <= tol,
    }


SMALL = "smollm2-135m-instruct"
"""The small configuration's shape (``plan_small``): the CPU recipe's model, random weights."""


def check_plan_small(c: Check) -> dict[str, Any]:
    """The memory plan's update peak against the measured one for a small configuration:
    SmolLM2-135M-shaped random weights, fp32 master weights under bf16 autocast, gradient
    checkpointing, AdamW, 4,096 tokens; within ``PLAN_TOL``."""
    if not c.cuda:
        return {"skip": True, "why": "CUDA only (the allocator's peak)"}
    import torch

    from webagent_r1.train.memory_plan import GIB, KNOWN_SHAPES, plan_memory

    shape = KNOWN_SHAPES[SMALL]
    cfg = _cfg(
        c,
        SMALL,
        "rl.beta=0",
        "train.token_budget=4096",
        "train.gradient_checkpointing=true",
        "rollout.max_new_tokens=256",
        "observation.max_tokens=1024",
    )
    _free(True)
    total_gib = torch.cuda.get_device_properties(0).total_memory / GIB
    plan = plan_memory(cfg, 1, total_gib, shape=shape)
    expected = plan.update_peak - plan.overhead  # the allocator does not see the overhead
    model = _random_model(c, shape)
    try:
        out = _measure_update(c, model, cfg)
    finally:
        del model
        _free(True)
    out.update(compare_to_plan(expected, out["measured_gib"]))
    out["plan_gib"] = round(expected, 3)
    if not out["within"]:
        raise CheckFailed(
            f"peak {out['measured_gib']:.2f} GiB vs plan {expected:.2f} GiB "
            f"({out['gap']:+.0%}, more than {PLAN_TOL:.0%})",
            out,
        )
    return out


def _measure_update(c: Check, model: Any, cfg: Any, vocab: int | None = None) -> dict[str, Any]:
    """The steady-state peak (GiB) and time of an M-GRPO update of ``model`` at ``cfg``'s
    budget, on random ids below ``vocab`` (default the model's): the first update allocates
    AdamW's moments, the second is measured."""
    import torch

    from webagent_r1.train.dist import build_optimizer
    from webagent_r1.train.memory_plan import GIB, rollout_context
    from webagent_r1.train.rl import mgrpo_update

    if cfg.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    model.train()
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    ctx = rollout_context(cfg)
    n_rows = max(1, cfg.train.token_budget // ctx)
    new = cfg.rollout.max_new_tokens
    vocab = vocab or model.config.vocab_size
    mgrpo_update(model, opt, _rows(n_rows, ctx - new, new, vocab, 1), cfg, pad_id=1)
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    m = mgrpo_update(model, opt, _rows(n_rows, ctx - new, new, vocab, 2), cfg, pad_id=1)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() / GIB
    del opt
    return {
        "measured_gib": round(peak, 3),
        "rows": n_rows,
        "tokens": n_rows * ctx,
        "seconds": round(secs, 3),
        "loss": m["train/loss"],
    }


def check_throughput(c: Check) -> dict[str, Any]:
    params = _shape_3b().params if c.cuda else None
    peak = next((v for k, v in BF16_PEAK_TFLOPS.items() if c.gpu and k in c.gpu), None)
    out: dict[str, Any] = {"gpu": c.gpu, **{k: round(v, 1) for k, v in c.numbers.items()}}
    if params and peak:
        if "update_tokens_per_s" in c.numbers:  # forward + backward: 6 flops per param-token
            out["update_mfu"] = round(
                6 * params * c.numbers["update_tokens_per_s"] / peak / 1e12, 4
            )
        if "gen_tokens_per_s" in c.numbers:
            out["gen_mfu"] = round(2 * params * c.numbers["gen_tokens_per_s"] / peak / 1e12, 4)
    assert c.numbers.get("gen_tokens_per_s", 0) > 0, "no generation was timed"
    return out


CHECKS: dict[str, Callable[[Check], dict[str, Any] | None]] = {
    "models": check_models,
    "hf_logprobs": check_hf_logprobs,
    "mgrpo_shared": check_mgrpo_shared,
    "dist": check_dist,
    "grad_allreduce": check_grad_allreduce,
    "fsdp": check_fsdp,
    "handover": check_handover,
    "peak_memory": check_peak_memory,
    "plan_small": check_plan_small,
    "throughput": check_throughput,
}


def main(argv: list[str] | None = None) -> int:
    """Run the checks; 0 when none failed."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--out", default="runs/device-check", help="folder of device-check.json")
    ap.add_argument("--only", nargs="*", choices=list(CHECKS), help="run these checks only")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # cuBLAS is deterministic only with a fixed workspace, set before its first handle (fsdp)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    stand_in = _stand_in_playwright()
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print('FAIL setup {"error": "--device cuda but torch sees no CUDA device"}')
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    c = Check(args.device, out)
    names = args.only or list(CHECKS)
    if "models" not in names:  # the others need the tiny model folder
        names = ["models", *names]
    try:
        for name in names:
            c.run(name, CHECKS[name])
    finally:
        with contextlib.suppress(Exception):
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        shutil.rmtree(c.tmp, ignore_errors=True)
    failed = [r["check"] for r in c.results if r["status"] == "FAIL"]
    summary = {
        "device": args.device,
        "gpu": c.gpu,
        "torch": torch.__version__,
        "playwright_stand_in": stand_in,
        "passed": [r["check"] for r in c.results if r["status"] == "PASS"],
        "failed": failed,
        "skipped": [r["check"] for r in c.results if r["status"] == "SKIP"],
        "results": c.results,
    }
    (out / "device-check.json").write_text(json.dumps(summary, indent=1, default=str))
    print(
        f"{'FAIL' if failed else 'PASS'} all: {len(summary['passed'])} passed, "
        f"{len(failed)} failed, {len(summary['skipped'])} skipped -> {out / 'device-check.json'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
