"""Trainer throughput and memory: one M-GRPO update against TRL's GRPOTrainer, in one process.

    python benchmarks/trainer.py [--prompts 2] [--group 4] [--prompt-len 512] [--completion-len 64]
                                 [--reps 3] [--no-trl] [--no-recompute] [--no-unshared]
                                 [--rollouts FILE]
    webagent-r1 bench trainer [same options]

Both sides train the same model (the default policy from ``policy.trainable.load_policy``: the
bundled SmolLM2-135M, fp32 master weights, bf16 autocast) on the same synthetic batch: B prompts
x G completions, every prompt P tokens and every completion C tokens (random ids, fixed seed),
binary rewards mixed within each group (member i has reward i mod 2), so every group carries a
gradient. Each side has its own copy of the weights and its own AdamW with the config defaults
(lr 2e-5, betas 0.9/0.99, no weight decay, gradient clipping at 1.0; the for-loop implementation
on CPU).

Sides:

``ours``
    One ``train.rl.mgrpo_update`` call (μ = 1, β = 0) on the ``RLBatch`` that
    ``build_rl_batch`` makes from ``Trajectory``/``Group`` objects holding those ids. π_old is
    ``rl.old_logprobs=sampler``: the completions' stored log-probs, computed once by the same
    model before timing (so the first ratio is 1), which is what TRL does at μ = 1 (it reuses
    the detached log-probs of the loss forward). The whole batch is one micro-batch
    (``train.token_budget`` = B·G·(P+C)), as TRL runs it in one forward. With the default
    ``train.share_prompts=true`` the G completions of a prompt share one row, the prompt
    computed once (``train/batching.py``), so ours does less work than TRL for the same
    update.
``ours_unshared``
    The same call with ``train.share_prompts=false`` and ``train.share_prefix=false``: every
    completion with its own whole copy of the prompt, as TRL lays the batch out (the
    like-for-like comparison of the two update implementations). ``--no-unshared`` leaves it
    out.
``ours_recompute``
    The same call with ``rl.old_logprobs=recompute`` (the trainer's own log-probs, what
    ``auto`` picks under bf16): at μ = 1 the training forward gives π_old (detached), so no
    extra forward runs, as in TRL.
``ours_two_forwards``
    ``ours_recompute`` with π_old from a separate no-grad forward before the training one
    (``mgrpo_update(..., fuse_old=False)``, what μ > 1 needs and what μ = 1 did before).
    ``speedup_fused_old_logprobs`` is its time over ``ours_recompute``'s. ``--no-recompute``
    leaves both recompute sides out.
``trl``
    ``trl.GRPOTrainer`` built on a copy of the same model, with a tiny in-memory dataset and a
    dummy reward function, ``loss_type="grpo"`` (mean over sequences of the per-sequence token
    mean: for single-turn trajectories the same weights as M-GRPO's 1/(G·|τ|·|a|)), β = 0,
    μ = 1, ``bf16=True``, ``use_cpu=True`` and activation checkpointing off (GRPOConfig turns it
    on by default, ``Trainer.train`` would enable it; ours has it off by default, and a comparison
    of the two trainers must not compare recomputation against none). Its optimizer comes from
    ``create_optimizer`` (``optim="adamw_torch"``) and is prepared with the model by
    ``accelerator.prepare`` as in ``Trainer.train``; the bf16 autocast is accelerate's
    (``mixed_precision="bf16"``), the one TRL's ``_get_per_token_logps_and_entropies`` enters.
    One update is what ``Trainer.train`` does per optimizer step: ``training_step`` (TRL's
    ``compute_loss`` on the dict that ``_generate_and_score_completions`` returns:
    ``prompt_ids``, ``prompt_mask``, ``completion_ids``, ``completion_mask``, ``advantages``; no
    ``old_per_token_logps`` at μ = 1; generation is bypassed by handing that dict straight
    through ``_prepare_inputs``), then ``_clip_grad_norm``, ``optimizer.step()`` and
    ``model.zero_grad()``. The advantages fed to it are exactly those ``build_rl_batch``
    computed for ours.

Real rollouts (``--rollouts runs/…/rl/rollouts/step-000001-rank0.jsonl``): instead of the
synthetic batch, the groups of a trajectory file the trainer wrote, multi-turn, with the
sampler's stored log-probs; groups whose rewards are all equal are dropped as in training, and
micro-batches follow ``train.token_budget`` (default 8192 here, the CPU recipe's). TRL is left
out (its GRPOTrainer takes single-turn prompt/completion pairs): this mode measures what
shared prompts save on the prompts rollouts really produce.

Timing: one warm-up update per side (not counted: first-call allocations, AdamW state), then
``reps`` updates per side, alternating (the order flips every repetition) so that load on a
shared machine hits both alike. tokens/s = B·G·(P+C) / wall time of one update (median over
repetitions), counting every prompt once per completion as TRL processes it (with shared
prompts ours runs fewer tokens for the same update, and its tokens/s is that much higher). The
process's CPU time per update (``time.process_time``, all threads) is reported too: on a machine
shared with other work it varies less than wall time (``tokens_per_cpu_s``).

Peak memory: the growth of the process's resident set (RSS) during one update, over the RSS
just before it. Before each measured update the gradients of both models are freed (ours keeps
``.grad`` between updates, TRL's loop frees them: both start without), ``gc.collect()`` runs and
glibc's ``malloc_trim(0)`` returns freed heap pages to the system, so the baseline holds only
weights, optimizer state and the inputs. Two readings: (1) ``peak_rss_mb``: the kernel's exact
high-water mark (``VmHWM`` in ``/proc/self/status``, reset to the current RSS by writing ``5``
to ``/proc/self/clear_refs``, Linux >= 4.0), minus the baseline; (2) ``sampled_peak_rss_mb``:
the largest RSS a background thread saw, polling every 5 ms (psutil, else
``/proc/self/statm``), minus the baseline; it can miss short spikes and is the fallback when
the high-water mark cannot be reset. The ratio uses (1) when available. On CPU torch keeps no
allocation counters, so ``torch_peak_alloc_mb`` is reported only on CUDA
(``torch.cuda.max_memory_allocated`` growth over the update).

Both sides run in the precision ``model.autocast_bf16`` resolves to
(``policy.precision.autocast_enabled``: with ``auto``, the faster of fp32 and bf16 autocast as
timed once on this machine); ``setup.autocast_active`` says which ran, and ``mfu`` each side's
model FLOP/s over the machine's measured peak matmul FLOP/s in that precision.

Prints JSON: per side, update seconds per repetition, tokens/s, peak memory; the ratios
ours / TRL of tokens/s (>= 1: ours not slower) and of peak memory (<= 1: ours not larger), for
ours and for ours_unshared; the speed-up of shared prompts and prefixes (ours / ours_unshared); the
gradient norm of the warm-up update of each side (same weights, same batch: they should agree
up to bf16 rounding, a check that both compute the same loss).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import ctypes
import dataclasses
import gc
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from webagent_r1.config import Config, load_config
from webagent_r1.policy.precision import FlopsMeter, autocast_enabled
from webagent_r1.policy.trainable import load_policy
from webagent_r1.rollout.collect import Group
from webagent_r1.rollout.trajectories import read_trajectories
from webagent_r1.train.batching import collate, completion_logprobs, micro_batches
from webagent_r1.train.dist import build_optimizer, trainable_parameters
from webagent_r1.train.rl import RLBatch, build_rl_batch, mgrpo_update
from webagent_r1.types import Task, Trajectory, Turn

# ---------------------------------------------------------------------------------------------
# Memory


def _rss_bytes() -> int:
    """Current resident set size of this process."""
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_hwm() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _hwm_bytes() -> int | None:
    """VmHWM (peak RSS since the last reset) from /proc/self/status, or None."""
    from webagent_r1.train.metrics import proc_status_bytes

    return proc_status_bytes("VmHWM")


def _malloc_trim() -> None:
    """Hand freed heap pages back to the system (glibc), so the RSS baseline is honest."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakMemory:
    """Peak RSS growth (and CUDA allocation growth) while the ``with`` block runs.

    Args:
        interval_s: polling period of the sampling thread.
    """

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self.base = 0
        self.sampled_peak = 0
        self.hwm_peak: int | None = None
        self.cuda_peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._hwm_ok = False
        self._cuda_base = 0

    def _poll(self) -> None:
        while not self._stop.is_set():
            self.sampled_peak = max(self.sampled_peak, _rss_bytes())
            self._stop.wait(self.interval_s)

    def __enter__(self) -> PeakMemory:
        gc.collect()
        _malloc_trim()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._cuda_base = torch.cuda.memory_allocated()
        self.base = _rss_bytes()
        self.sampled_peak = self.base
        self._hwm_ok = _reset_hwm()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
            self.cuda_peak = torch.cuda.max_memory_allocated() - self._cuda_base
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        self.sampled_peak = max(self.sampled_peak, _rss_bytes())
        hwm = _hwm_bytes() if self._hwm_ok else None
        self.hwm_peak = hwm - self.base if hwm is not None else None

    def result(self) -> dict[str, float | None]:
        """Megabytes: baseline RSS, peak growth (high-water mark, sampled), CUDA growth."""
        mb = 1024 * 1024
        return {
            "base_rss_mb": round(self.base / mb, 1),
            "peak_rss_mb": round(self.hwm_peak / mb, 1) if self.hwm_peak is not None else None,
            "sampled_peak_rss_mb": round((self.sampled_peak - self.base) / mb, 1),
            "torch_peak_alloc_mb": round(self.cuda_peak / mb, 1) if self.cuda_peak else None,
        }


def _cpu_native_bf16() -> bool | None:
    """Whether oneDNN has native bf16 matmuls on this CPU (None: cannot tell)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return None


# ---------------------------------------------------------------------------------------------
# The synthetic batch


def synthetic_groups(
    prompts: int, group: int, prompt_len: int, completion_len: int, vocab: int, seed: int
) -> list[Group]:
    """B groups of G single-turn trajectories with random ids and mixed binary rewards.

    Every member of a group shares its prompt; member i has reward i mod 2, so each group has
    both outcomes (a non-zero advantage). Ids avoid the first 100 (special tokens).
    """
    if group < 2:
        raise ValueError(f"GRPO needs at least 2 completions per prompt (group >= 2), got {group}")
    g = torch.Generator().manual_seed(seed)
    out = []
    for b in range(prompts):
        prompt = torch.randint(100, vocab, (prompt_len,), generator=g).tolist()
        trajs = []
        for i in range(group):
            comp = torch.randint(100, vocab, (completion_len,), generator=g).tolist()
            turn = Turn(
                prompt_ids=prompt,
                completion_ids=comp,
                completion_logprobs=[0.0] * completion_len,
                text="",
                action=None,
            )
            trajs.append(
                Trajectory(task_id=f"bench-{b}", group_id=b, turns=[turn], reward=float(i % 2))
            )
        task = Task(task_id=f"bench-{b}", sites=[], intent="benchmark", start_url="")
        out.append(Group(task, trajs))
    return out


def rollout_groups(path: str) -> list[Group]:
    """The groups of a trajectory file (by ``group_id``, in file order)."""
    by_id: dict[Any, list[Trajectory]] = {}
    for t in read_trajectories(path):
        by_id.setdefault(t.group_id, []).append(t)
    return [
        Group(Task(task_id=str(ts[0].task_id), sites=[], intent="", start_url=""), ts)
        for ts in by_id.values()
    ]


@torch.no_grad()
def _store_logprobs(model: Any, groups: list[Group], cfg: Config, pad_id: int) -> None:
    """Put the model's own log-probs in every turn (π_old for ``old_logprobs=sampler``)."""
    turns = [tr.turns[0] for g in groups for tr in g.trajectories]
    batch = build_rl_batch(groups, cfg.rl.advantage_scale, drop_equal_groups=False)
    samples = batch.samples
    for idx in micro_batches([len(s.input_ids) for s in samples], cfg.train.token_budget):
        mb = collate(samples, idx, pad_id)
        bf16 = autocast_enabled(cfg.model, next(model.parameters()).device)
        lp = completion_logprobs(model, mb, 1.0, bf16).float().cpu()
        for i in idx:
            turns[i].completion_logprobs = lp[mb.sample == i].tolist()


# ---------------------------------------------------------------------------------------------
# The sides: each returns a function doing one update and giving its pre-clip gradient norm


def _ours(
    model: Any, opt: Any, cfg: Config, batch: RLBatch, pad_id: int, fuse_old: bool = True
) -> Callable[[], float]:
    def update() -> float:
        metrics = mgrpo_update(model, opt, batch, cfg, pad_id, fuse_old=fuse_old)
        return float(metrics["train/grad_norm"])

    return update


def _trl(
    model: Any, tokenizer: Any, cfg: Config, batch: RLBatch, group: int, completion_len: int
) -> tuple[Callable[[], float], str]:
    import trl
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    n = len(batch.samples)
    b1, b2 = cfg.train.adam_betas
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="webagent-r1-bench-trl-"),
        per_device_train_batch_size=n,
        gradient_accumulation_steps=1,
        num_generations=group,
        max_completion_length=completion_len,
        num_iterations=1,
        activation_checkpointing=False,  # TRL's default is on; ours is off: compare like with like
        beta=0.0,
        epsilon=cfg.rl.clip_eps,
        loss_type="grpo",
        temperature=1.0,
        # The same precision as ours: autocast only where the hardware has native bf16.
        bf16=autocast_enabled(cfg.model, next(model.parameters()).device),
        use_cpu=not torch.cuda.is_available(),
        optim="adamw_torch",
        learning_rate=cfg.rl.lr,
        adam_beta1=b1,
        adam_beta2=b2,
        weight_decay=cfg.train.weight_decay,
        max_grad_norm=cfg.train.max_grad_norm,
        lr_scheduler_type="constant",
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=lambda completions, **_: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["benchmark"] * n}),
        processing_class=tokenizer,
    )
    # As Trainer.train does before its loop: optimizer, then accelerate's prepare (which
    # also wraps the forward in the bf16 autocast of mixed_precision="bf16").
    trainer.create_optimizer()
    wrapped, trainer.optimizer = trainer.accelerator.prepare(trainer.model, trainer.optimizer)
    trainer.model_wrapped = wrapped
    trainer.current_gradient_accumulation_steps = 1  # set per window by Trainer's loop
    # The dict _generate_and_score_completions returns (μ = 1: no old_per_token_logps).
    device = trainer.accelerator.device
    p = torch.tensor([s.input_ids[: s.prompt_len] for s in batch.samples])  # (n, P)
    c = torch.tensor([s.input_ids[s.prompt_len :] for s in batch.samples])  # (n, C)
    inputs = {
        "prompt_ids": p.to(device),
        "prompt_mask": torch.ones_like(p).to(device),
        "completion_ids": c.to(device),
        "completion_mask": torch.ones_like(c).to(device),
        "advantages": torch.tensor([s.advantage for s in batch.samples]).to(device),  # (n,)
    }
    trainer._prepare_inputs = lambda generation_batch: generation_batch  # generation bypassed

    def update() -> float:
        trainer.training_step(wrapped, inputs, None)
        gn = trainer._clip_grad_norm(wrapped)
        trainer.optimizer.step()
        wrapped.zero_grad()
        return float(gn)

    return update, trl.__version__


# ---------------------------------------------------------------------------------------------


def run(
    prompts: int = 2,
    group: int = 4,
    prompt_len: int = 512,
    completion_len: int = 64,
    reps: int = 3,
    seed: int = 0,
    with_trl: bool | None = None,
    recompute: bool = True,
    overrides: list[str] | None = None,
    progress: bool = True,
    unshared: bool = True,
    rollouts: str | None = None,
) -> dict[str, Any]:
    """Time one update of each side ``reps`` times, alternating, and measure peak memory.

    Args:
        prompts: B, prompts (groups) in the batch.
        group: G, completions per prompt (>= 2).
        prompt_len: P, tokens per prompt.
        completion_len: C, tokens per completion.
        reps: timed updates per side (after one warm-up each).
        seed: seed of the token ids.
        with_trl: include TRL's GRPOTrainer; None: when ``trl`` is installed.
        recompute: also time ours with ``rl.old_logprobs=recompute`` (the project default).
        overrides: config overrides (``section.key=value``) for ours; ``model.autocast_bf16``
            and the ``rl``/``train`` optimisation settings also configure TRL's side.
        progress: print each timed update to stderr.
        unshared: also time ours with ``train.share_prompts=false`` and ``share_prefix=false``.
        rollouts: a trajectory file to take the groups from (then no TRL; B, G, P, C unused).

    Returns:
        ``{"setup": {...}, "ours": {...}, "trl": {...}, "ours_recompute": {...},
        "ratio_tokens_per_s_ours_over_trl": x, "ratio_peak_memory_ours_over_trl": y, ...}``;
        ``trl`` holds ``{"skipped": reason}`` when TRL is not run.
    """
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    have_trl = importlib.util.find_spec("trl") is not None
    if with_trl and not have_trl:
        raise RuntimeError("TRL is not installed: pip install -e '.[bench]' (or pass --no-trl)")
    use_trl = (have_trl if with_trl is None else with_trl) and rollouts is None
    real = rollout_groups(rollouts) if rollouts else None
    n_tokens = prompts * group * (prompt_len + completion_len)
    base = [
        "rl.mu=1",
        "rl.beta=0",
        "rl.drop_equal_groups=true",
        f"rollout.max_new_tokens={completion_len}",
        # one micro-batch, as TRL's one forward; real rollouts: the recipe's budget
        f"train.token_budget={8192 if real else max(64, n_tokens)}",
    ]
    cfg = load_config(None, base + ["rl.old_logprobs=sampler"] + list(overrides or []))
    cfg_re = load_config(None, base + ["rl.old_logprobs=recompute"] + list(overrides or []))
    cfg_un = load_config(
        None,
        base
        + ["rl.old_logprobs=sampler", "train.share_prompts=false", "train.share_prefix=false"]
        + list(overrides or []),
    )
    t0 = time.time()
    model, tokenizer = load_policy(cfg)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    twin = copy.deepcopy(model) if use_trl else None  # TRL patches its model's forward
    if real is not None:
        groups = real  # the sampler's log-probs are stored in the file
    else:
        groups = synthetic_groups(
            prompts, group, prompt_len, completion_len, model.config.vocab_size, seed
        )
        _store_logprobs(model, groups, cfg, pad_id)
    batch = build_rl_batch(groups, cfg.rl.advantage_scale, cfg.rl.drop_equal_groups)
    if real is None:
        assert batch.groups_used == prompts and len(batch.samples) == prompts * group
    elif not batch.samples:
        raise ValueError(f"{rollouts}: no group with mixed rewards (nothing to train on)")
    else:
        n_tokens = sum(len(smp.input_ids) for smp in batch.samples)

    opt = build_optimizer(trainable_parameters(model), cfg.rl.lr, cfg.train)
    sides: dict[str, Callable[[], float]] = {"ours": _ours(model, opt, cfg, batch, pad_id)}
    if unshared:
        sides["ours_unshared"] = _ours(model, opt, cfg_un, batch, pad_id)
    if recompute:
        sides["ours_recompute"] = _ours(model, opt, cfg_re, batch, pad_id)
        sides["ours_two_forwards"] = _ours(model, opt, cfg_re, batch, pad_id, fuse_old=False)
    out: dict[str, Any] = {}
    trl_version = None
    if use_trl:
        sides["trl"], trl_version = _trl(twin, tokenizer, cfg, batch, group, completion_len)
    elif real is not None:
        out["trl"] = {"skipped": "multi-turn rollouts (TRL takes single-turn pairs)"}
    else:
        out["trl"] = {"skipped": "trl not installed (pip install -e '.[bench]')"}
    models = [model] + ([twin] if twin is not None else [])

    def free_grads() -> None:
        for m in models:
            m.zero_grad(set_to_none=True)

    warm_gn: dict[str, float] = {}
    for name, update in sides.items():  # warm-up: first-call allocations, AdamW state
        free_grads()
        warm_gn[name] = update()
    setup_s = time.time() - t0
    times: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    mems: dict[str, list[dict[str, float | None]]] = {k: [] for k in sides}
    order = list(sides)
    for r in range(reps):
        for name in order if r % 2 == 0 else order[::-1]:
            free_grads()
            with PeakMemory() as pm:
                s0, c0 = time.perf_counter(), time.process_time()
                sides[name]()
                dt, dc = time.perf_counter() - s0, time.process_time() - c0
            times[name].append(dt)
            cpu[name].append(dc)
            mems[name].append(pm.result())
            if progress:
                print(
                    f"rep {r + 1}/{reps} {name}: {dt:.2f} s ({dc:.2f} CPU-s), "
                    f"{n_tokens / dt:.0f} tok/s, "
                    f"peak +{pm.result()['peak_rss_mb']} MB",
                    file=sys.stderr,
                    flush=True,
                )
    free_grads()

    def peak(rows: list[dict[str, float | None]], key: str) -> float | None:
        vals = [r[key] for r in rows if r[key] is not None]
        return max(vals) if vals else None  # type: ignore[type-var]

    meter = FlopsMeter(model, autocast_enabled(cfg.model, next(model.parameters()).device))
    side_cfg = {"ours": cfg, "trl": cfg}
    if unshared:
        side_cfg["ours_unshared"] = cfg_un
    if recompute:
        side_cfg["ours_recompute"] = side_cfg["ours_two_forwards"] = cfg_re
    for name in sides:
        med = statistics.median(times[name])
        side_rl = side_cfg[name].rl
        if name == "trl":  # one iteration, π_old the detached current policy: no extra forward
            side_rl = dataclasses.replace(side_rl, mu=1, old_logprobs="sampler")
        flops = meter.update(batch, side_rl, fuse_old=name != "ours_two_forwards")
        out[name] = {
            "update_s": [round(t, 3) for t in times[name]],
            "median_update_s": round(med, 3),
            "tokens_per_s": round(n_tokens / med, 1),
            "flops_per_update": flops,
            "flops_per_s": round(flops / med, 1),
            "mfu": round(flops / med / meter.peak.flops, 4) if meter.peak.flops else None,
            "cpu_s": [round(t, 3) for t in cpu[name]],
            "tokens_per_cpu_s": round(n_tokens / statistics.median(cpu[name]), 1),
            "peak_rss_mb": peak(mems[name], "peak_rss_mb"),
            "sampled_peak_rss_mb": peak(mems[name], "sampled_peak_rss_mb"),
            "torch_peak_alloc_mb": peak(mems[name], "torch_peak_alloc_mb"),
            "base_rss_mb": mems[name][-1]["base_rss_mb"],
            "warmup_grad_norm": round(warm_gn[name], 4),
        }
    if "trl" in sides:
        o, t = out["ours"], out["trl"]
        out["ratio_tokens_per_s_ours_over_trl"] = round(o["tokens_per_s"] / t["tokens_per_s"], 3)
        out["ratio_tokens_per_cpu_s_ours_over_trl"] = round(
            o["tokens_per_cpu_s"] / t["tokens_per_cpu_s"], 3
        )
        key = "peak_rss_mb" if o["peak_rss_mb"] and t["peak_rss_mb"] else "sampled_peak_rss_mb"
        out["ratio_peak_memory_ours_over_trl"] = round(o[key] / max(t[key], 1e-9), 3)
        out["ours_not_slower"] = out["ratio_tokens_per_s_ours_over_trl"] >= 1.0
        out["ours_not_more_memory"] = out["ratio_peak_memory_ours_over_trl"] <= 1.0
        if "ours_unshared" in sides:
            u = out["ours_unshared"]
            out["ratio_tokens_per_s_unshared_over_trl"] = round(
                u["tokens_per_s"] / t["tokens_per_s"], 3
            )
            out["ratio_peak_memory_unshared_over_trl"] = round(u[key] / max(t[key], 1e-9), 3)
    if "ours_unshared" in sides:
        out["speedup_shared_prompts"] = round(
            out["ours"]["tokens_per_s"] / out["ours_unshared"]["tokens_per_s"], 3
        )
    if "ours_two_forwards" in sides:
        out["speedup_fused_old_logprobs"] = round(
            out["ours_two_forwards"]["median_update_s"] / out["ours_recompute"]["median_update_s"],
            3,
        )
    out["setup"] = {
        "rollouts": rollouts,
        "groups_used": batch.groups_used,
        "turn_samples": len(batch.samples),
        "model": cfg.model.name,
        "device": str(next(model.parameters()).device),
        "autocast_bf16": cfg.model.autocast_bf16,
        "prompts": prompts,
        "group": group,
        "prompt_len": prompt_len,
        "completion_len": completion_len,
        "tokens_per_update": n_tokens,
        "reps": reps,
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "trl": trl_version,
        "setup_s": round(setup_s, 1),
        "cpu_native_bf16": _cpu_native_bf16(),
    }
    out["setup"]["peak_flops"] = round(meter.peak.flops, 1)
    out["setup"]["autocast_active"] = autocast_enabled(cfg.model, next(model.parameters()).device)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry: parse ``argv``, run, print JSON."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--prompts", type=int, default=2, help="B, prompts (groups)")
    ap.add_argument("--group", type=int, default=4, help="G, completions per prompt")
    ap.add_argument("--prompt-len", type=int, default=512, help="P, tokens per prompt")
    ap.add_argument("--completion-len", type=int, default=64, help="C, tokens per completion")
    ap.add_argument("--reps", type=int, default=3, help="timed updates per side")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-trl", action="store_true", help="leave TRL out")
    ap.add_argument("--no-recompute", action="store_true", help="leave both recompute sides out")
    ap.add_argument("--no-unshared", action="store_true", help="leave ours_unshared out")
    ap.add_argument("--rollouts", help="take the groups from this trajectory file (no TRL)")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument(
        "overrides",
        nargs="*",
        help="config overrides (section.key=value); model.autocast_bf16 sets both sides",
    )
    a = ap.parse_args(argv)
    out = run(
        a.prompts,
        a.group,
        a.prompt_len,
        a.completion_len,
        a.reps,
        a.seed,
        False if a.no_trl else None,
        not a.no_recompute,
        a.overrides,
        not a.no_progress,
        not a.no_unshared,
        a.rollouts,
    )
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
