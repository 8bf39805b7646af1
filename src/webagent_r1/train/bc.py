"""Behaviour-cloning warm-up: SFT on expert demonstrations (``webagent-r1 sft``).

Demonstrations come from ``webagent-r1 demos``: trajectories whose prompts were built by the
same context compression the policy sees and whose completions are the expert's responses
(rationale in ``<think>``), stored as token ids. Every turn is one sample; the loss is the
negative log-likelihood of the completion tokens (``algos/sft.py``), the prompt is context.

Training is budgeted in optimizer steps (steps and data decide BC, not epochs): step
k takes the next ``bc.batch_size`` samples of a seeded per-epoch shuffle, so the data order
is a function of the step alone and a resumed run sees exactly the batches it would have.
A held-out share of whole trajectories gives the held-out loss.

With ``train.sharding: fsdp`` the policy is sharded over the processes (``train/sharding.py``):
FSDP reduces the gradients, every process runs as many micro-batches as the busiest one, and
checkpoints gather the weights into a Hugging Face folder and keep the optimizer sharded.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from webagent_r1.algos.sft import bc_loss
from webagent_r1.config import Config, to_dict
from webagent_r1.policy.precision import FlopsMeter, autocast_enabled
from webagent_r1.progress import Bar
from webagent_r1.rollout.trajectories import Sample, read_trajectories, turn_samples
from webagent_r1.train.batching import (
    collate,
    completion_logprobs,
    micro_batches,
    padding_batch,
    supports_shared_prefix,
)
from webagent_r1.train.checkpoint import (
    latest_checkpoint,
    print_note,
    restore_optimizer,
    resume_checkpoint,
    rng_state,
    save_checkpoint,
    save_sharded_checkpoint,
    set_rng,
)
from webagent_r1.train.dist import (
    Dist,
    build_optimizer,
    grad_norm_and_clip,
    load_policy,
    lr_factor,
    trainable_parameters,
)
from webagent_r1.train.metrics import MemoryWatch, MetricLogger, release_free_memory
from webagent_r1.train.sharding import is_sharded, shard_model
from webagent_r1.types import Trajectory

__all__ = ["BCResult", "batch_indices", "bc_backward", "heldout_loss", "split_demos", "train_bc"]


@dataclass
class BCResult:
    """What a BC run produced."""

    checkpoint: Path
    """The final checkpoint folder (its ``model/`` loads with ``from_pretrained``)."""
    steps: int
    heldout_loss: float | None
    wall_s: float


def split_demos(
    trajs: list[Trajectory], heldout_fraction: float, seed: int
) -> tuple[list[Trajectory], list[Trajectory]]:
    """(train, held-out) split by whole trajectory, seeded."""
    order = list(range(len(trajs)))
    random.Random(seed).shuffle(order)
    n_held = int(round(len(trajs) * heldout_fraction))
    if heldout_fraction > 0 and len(trajs) > 1:
        n_held = max(1, n_held)
    held = {i for i in order[:n_held]}
    return (
        [t for i, t in enumerate(trajs) if i not in held],
        [t for i, t in enumerate(trajs) if i in held],
    )


def batch_indices(step: int, batch_size: int, n: int, seed: int) -> list[int]:
    """Sample indices of optimizer step ``step``: consecutive slices of per-epoch shuffles."""
    out = []
    perms: dict[int, list[int]] = {}
    for g in range(step * batch_size, (step + 1) * batch_size):
        epoch, pos = divmod(g, n)
        if epoch not in perms:
            perm = list(range(n))
            random.Random(seed * 1_000_003 + epoch).shuffle(perm)
            perms[epoch] = perm
        out.append(perms[epoch][pos])
    return out


def bc_backward(
    model: Any,
    samples: list[Sample],
    pad_id: int,
    token_budget: int,
    autocast_bf16: bool,
    total_tokens: int | None = None,
    grad: bool = True,
    dist: Dist | None = None,
    share_prefix: bool = False,
) -> tuple[float, int]:
    """Accumulate the BC loss gradient of ``samples`` (token-mean over the whole batch).

    Args:
        model: the policy.
        samples: this process's samples of the batch.
        pad_id: padding id.
        token_budget: padded tokens per micro-batch.
        autocast_bf16: bf16 autocast forward.
        total_tokens: completion tokens of the batch over all processes (weights 1/total);
            default: this process's own.
        grad: backpropagate (False: only measure the loss).
        dist: the processes sharing a sharded model: each runs as many micro-batches as the
            busiest (padding ones add nothing); None: this process alone.
        share_prefix: run the prompt prefix of a micro-batch once (``train.share_prefix``;
            applied where ``supports_shared_prefix(model)``).

    Returns:
        (this process's share of the loss, its completion tokens).
    """
    n_tok = sum(len(s.input_ids) - s.prompt_len for s in samples)
    total = total_tokens or n_tok
    loss_sum = 0.0
    groups = micro_batches([len(s.input_ids) for s in samples], token_budget)
    n_mb = (dist or Dist()).all_reduce_max(len(groups)) if is_sharded(model) else len(groups)
    prefix = share_prefix and supports_shared_prefix(model)
    for k in range(n_mb):
        if k < len(groups):
            mb = collate(samples, groups[k], pad_id, prefix)
        else:
            mb = padding_batch(pad_id)
        with torch.set_grad_enabled(grad):
            logp = completion_logprobs(model, mb, autocast_bf16=autocast_bf16)  # (N,)
            scale = 1.0 / max(total, 1) if k < len(groups) else 0.0
            loss = bc_loss(logp, torch.full_like(logp, scale))
        if grad:
            loss.backward()
        loss_sum += float(loss.detach())
    return loss_sum, n_tok


def heldout_loss(
    model: Any,
    samples: list[Sample],
    pad_id: int,
    token_budget: int,
    autocast_bf16: bool,
    share_prefix: bool = False,
) -> float | None:
    """Token-mean NLL of ``samples`` (None when there are none)."""
    if not samples:
        return None
    was_training = model.training
    model.eval()
    try:
        loss, _ = bc_backward(
            model,
            samples,
            pad_id,
            token_budget,
            autocast_bf16,
            grad=False,
            share_prefix=share_prefix,
        )
    finally:
        model.train(was_training)
    return loss


def train_bc(
    cfg: Config,
    resume: bool = False,
    stage_dir: str | Path | None = None,
    progress: bool = True,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
) -> BCResult:
    """Behaviour cloning on ``cfg.bc.data``.

    Args:
        cfg: the run's config (``bc``, ``train``, ``model``, ``seed``).
        resume: continue from the newest complete checkpoint of the stage folder.
        stage_dir: where checkpoints and metrics go (default ``<run_dir>/bc``).
        progress: show a progress bar (main process).
        on_step: called after every optimizer step with (step, metrics).

    Returns:
        The final checkpoint and numbers.

    Raises:
        FileNotFoundError: the demonstration file is missing.
        ValueError: it holds no usable demonstration.
    """
    t0 = time.time()
    dist = Dist.init()
    bcfg, tcfg = cfg.bc, cfg.train
    stage = Path(stage_dir or Path(cfg.run_dir) / "bc")
    ckpt_root = stage / "checkpoints"
    trajs = [t for t in read_trajectories(bcfg.data) if t.status != "env_error" and t.turns]
    trajs = [t for t in trajs if t.reward == 1.0]
    if not trajs:
        raise ValueError(f"{bcfg.data} holds no successful demonstration to clone")
    train_t, held_t = split_demos(trajs, bcfg.heldout_fraction, cfg.seed)
    train_s = [s for t in train_t for s in turn_samples(t)]
    held_s = [s for t in held_t for s in turn_samples(t)]

    start = 0
    # the newest checkpoint that loads completely; the others are named with the reason
    found = resume_checkpoint(ckpt_root, say=print_note if dist.main else None) if resume else None
    ckpt, resumed = found if found is not None else (None, {})
    torch.manual_seed(cfg.seed)
    random.seed(cfg.seed)
    model, tokenizer = load_policy(cfg, str(ckpt / "model") if ckpt else None)
    bf16 = autocast_enabled(cfg.model)
    flops = FlopsMeter(model, bf16)  # before sharding: whole-model sizes
    sharded = tcfg.sharding == "fsdp"
    if sharded:
        model = shard_model(model)
    params = trainable_parameters(model)
    opt = build_optimizer(params, bcfg.lr, tcfg)
    if ckpt is not None:
        state = resumed
        restore_optimizer(ckpt, state, model, opt)
        set_rng(state["rng"])
        start = int(state["step"])
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    logger = MetricLogger(
        stage, dist.main, tcfg.tensorboard, tcfg.wandb_project if dist.main else None, to_dict(cfg)
    )
    memory = MemoryWatch(enabled=dist.main)
    # sharded, a forward is a collective: every process measures the held-out loss
    if (dist.main or sharded) and start == 0:
        held0 = heldout_loss(model, held_s, pad_id, tcfg.token_budget, bf16, tcfg.share_prefix)
        if dist.main:
            logger.log(
                0,
                {
                    "bc/train_samples": len(train_s),
                    "bc/heldout_samples": len(held_s),
                    "bc/heldout_loss": held0 or 0.0,
                },
            )
    last_held: float | None = None
    bar = _bar(progress and dist.main, bcfg.steps, start, "BC")
    try:
        for step in range(start, bcfg.steps):
            s0 = time.time()
            for g in opt.param_groups:
                g["lr"] = bcfg.lr * lr_factor(step, bcfg.warmup_steps, bcfg.steps, tcfg.schedule)
            idx = batch_indices(step, bcfg.batch_size, len(train_s), cfg.seed)
            mine = [train_s[i] for i in idx[dist.rank :: dist.world]]
            local_tok = sum(len(s.input_ids) - s.prompt_len for s in mine)
            [total_tok] = dist.all_reduce_sum([float(local_tok)])
            opt.zero_grad(set_to_none=True)
            loss, _ = bc_backward(
                model,
                mine,
                pad_id,
                tcfg.token_budget,
                bf16,
                int(total_tok),
                dist=dist,
                share_prefix=tcfg.share_prefix,
            )
            if not sharded:  # FSDP has reduce-scattered the gradients in the backward
                dist.all_reduce_grads(params)
            [loss] = dist.all_reduce_sum([loss])
            gnorm = grad_norm_and_clip(params, tcfg.max_grad_norm)
            opt.step()
            release_free_memory()  # micro-batch shapes change every step: no heap creep
            n_tokens = sum(len(s.input_ids) for s in mine)
            metrics = {
                "train/loss": loss,
                "train/grad_norm": gnorm,
                "train/lr": opt.param_groups[0]["lr"],
                "train/tokens_per_s": n_tokens * dist.world / max(time.time() - s0, 1e-9),
                "train/step_s": time.time() - s0,
                # this process's achieved model FLOP/s and its fraction of the peak
                **flops.metrics("train", flops.samples(mine, train=True), time.time() - s0),
                **memory.metrics(),
            }
            done = step + 1
            if bcfg.eval_every and done % bcfg.eval_every == 0 or done == bcfg.steps:
                last_held = heldout_loss(
                    model,
                    held_s,
                    pad_id,
                    tcfg.token_budget,
                    bf16,
                    tcfg.share_prefix,
                )
                if last_held is not None:
                    metrics["bc/heldout_loss"] = last_held
            logger.log(done, metrics)
            if on_step is not None:
                on_step(done, metrics)
            if bar is not None:
                bar.update(advance=1, info=f"loss {loss:.3f}")
            every = tcfg.checkpoint_every
            if (every and done % every == 0) or done == bcfg.steps:
                _save(ckpt_root, done, model, tokenizer, opt, cfg, dist)
    finally:
        if bar is not None:
            bar.close()
        logger.close()
    final = latest_checkpoint(ckpt_root)
    if final is None:  # bc.steps == 0 or nothing left to do: save the start as final
        _save(ckpt_root, start, model, tokenizer, opt, cfg, dist)
        final = latest_checkpoint(ckpt_root)
    assert final is not None
    return BCResult(final, bcfg.steps, last_held, time.time() - t0)


def _save(root: Path, step: int, model: Any, tok: Any, opt: Any, cfg: Config, dist: Dist) -> None:
    if is_sharded(model):  # a collective: every process gathers and writes its shard
        state = {"step": step, "rng": rng_state()}
        save_sharded_checkpoint(
            root, step, model, opt, tok, state, dist, keep=cfg.train.keep_checkpoints
        )
        return
    if dist.main:
        state = {"step": step, "optimizer": opt.state_dict(), "rng": rng_state()}
        save_checkpoint(
            root,
            step,
            model,
            tok,
            state,
            keep=cfg.train.keep_checkpoints,
            merge_lora=cfg.train.merge_lora_on_save,
        )
    dist.barrier()


def _bar(enabled: bool, total: int, start: int, label: str) -> Any:
    if not enabled or total <= start:
        return None

    return Bar(label, total, start, time_remaining=True)
