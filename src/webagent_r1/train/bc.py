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

``train_bc`` runs a ``BCStage``: the loop, the resume point, the policy and optimizer building
and the checkpoints are those of every stage (``train/stage.py``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, Unpack

import torch

from webagent_r1.algos.sft import bc_loss
from webagent_r1.config import Config
from webagent_r1.errors import LoadError
from webagent_r1.progress import Bar
from webagent_r1.rollout.trajectories import Sample, read_trajectories, turn_samples
from webagent_r1.train.batching import (
    collate,
    completion_logprobs,
    micro_batches,
    padding_batch,
    supports_shared_prefix,
)
from webagent_r1.train.dist import Dist, grad_norm_and_clip
from webagent_r1.train.metrics import release_free_memory
from webagent_r1.train.sharding import is_sharded
from webagent_r1.train.stage import Stage
from webagent_r1.types import Trajectory

__all__ = [
    "BCResult",
    "BCStage",
    "batch_indices",
    "bc_backward",
    "heldout_loss",
    "split_demos",
    "successful_demos",
    "train_bc",
]


@dataclass
class BCResult:
    """What a BC run produced."""

    checkpoint: Path
    """The final checkpoint folder (its ``model/`` loads with ``from_pretrained``)."""
    steps: int
    heldout_loss: float | None
    wall_s: float


def successful_demos(path: str | Path) -> list[Trajectory]:
    """The demonstrations of ``path`` that BC clones: successful, with turns, no env error."""
    trajs = [t for t in read_trajectories(path) if t.status != "env_error" and t.turns]
    trajs = [t for t in trajs if t.reward == 1.0]
    if not trajs:
        raise LoadError(f"{path} holds no successful demonstration to clone")
    return trajs


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
    coef: float = 1.0,
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
        coef: weight of the loss (``rl.bc_coef`` beside the M-GRPO loss; BC: 1).

    Returns:
        (this process's share of the weighted loss, its completion tokens).
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
            scale = coef / max(total, 1) if k < len(groups) else 0.0
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


class BCOptions(TypedDict, total=False):
    """The options of ``train_bc``, passed on to ``BCStage`` (defaults there)."""

    resume: bool
    stage_dir: str | Path | None
    progress: bool
    on_step: Callable[[int, dict[str, float]], None] | None


def train_bc(cfg: Config, **options: Unpack[BCOptions]) -> BCResult:
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
    return BCStage(cfg, **options).run_sync()


class BCStage(Stage):
    """The BC stage (``train_bc``): one optimizer step per batch of demonstration turns; the
    held-out loss joins the metrics of the step it follows."""

    eval_joins_step = True

    def __init__(
        self,
        cfg: Config,
        resume: bool = False,
        stage_dir: str | Path | None = None,
        progress: bool = True,
        on_step: Callable[[int, dict[str, float]], None] | None = None,
    ) -> None:
        super().__init__(cfg, cfg.bc, "bc", resume, stage_dir, progress)
        self.on_step = on_step
        self.last_held: float | None = None
        self.bar: Any = None

    async def setup(self) -> None:
        """Demonstrations (split by trajectory), policy, optimizer, resume point, logger."""
        bcfg = self.cfg.bc
        train_t, held_t = split_demos(
            successful_demos(bcfg.data), bcfg.heldout_fraction, self.cfg.seed
        )
        self.train_s = [s for t in train_t for s in turn_samples(t)]
        self.held_s = [s for t in held_t for s in turn_samples(t)]
        self.find_resume_point()
        self.build_policy(str(self.ckpt / "model") if self.ckpt else None, bcfg.lr)
        self.sharded = self.cfg.train.sharding == "fsdp"
        self.restore()
        self.open_logger()

    def heldout(self) -> float | None:
        """The held-out loss of the current weights (None without held-out samples)."""
        tcfg = self.cfg.train
        return heldout_loss(
            self.model, self.held_s, self.pad_id, tcfg.token_budget, self.bf16, tcfg.share_prefix
        )

    async def begin(self) -> None:
        """At step 0, the held-out loss of the start; then the progress bar."""
        dist = self.dist
        # sharded, a forward is a collective: every process measures the held-out loss
        if (dist.main or self.sharded) and self.start == 0:
            held0 = self.heldout()
            if dist.main:
                self.log(
                    0,
                    {
                        "bc/train_samples": len(self.train_s),
                        "bc/heldout_samples": len(self.held_s),
                        "bc/heldout_loss": held0 or 0.0,
                    },
                )
        self.bar = _bar(self.progress and dist.main, self.cfg.bc.steps, self.start, "BC")

    async def step(self, step: int) -> dict[str, float]:
        """The loss gradient of step ``step``'s batch (this process's share), one update."""
        s0 = time.time()
        dist, tcfg, opt = self.dist, self.cfg.train, self.opt
        idx = batch_indices(step, self.cfg.bc.batch_size, len(self.train_s), self.cfg.seed)
        mine = [self.train_s[i] for i in idx[dist.rank :: dist.world]]
        local_tok = sum(len(s.input_ids) - s.prompt_len for s in mine)
        [total_tok] = dist.all_reduce_sum([float(local_tok)])
        opt.zero_grad(set_to_none=True)
        loss, _ = bc_backward(
            self.model,
            mine,
            self.pad_id,
            tcfg.token_budget,
            self.bf16,
            int(total_tok),
            dist=dist,
            share_prefix=tcfg.share_prefix,
        )
        if not self.sharded:  # FSDP has reduce-scattered the gradients in the backward
            dist.all_reduce_grads(self.params)
        [loss] = dist.all_reduce_sum([loss])
        gnorm = grad_norm_and_clip(self.params, tcfg.max_grad_norm)
        opt.step()
        release_free_memory()  # micro-batch shapes change every step: no heap creep
        n_tokens = sum(len(s.input_ids) for s in mine)
        flops = self.flops
        return {
            "train/loss": loss,
            "train/grad_norm": gnorm,
            "train/lr": opt.param_groups[0]["lr"],
            "train/tokens_per_s": n_tokens * dist.world / max(time.time() - s0, 1e-9),
            "train/step_s": time.time() - s0,
            # this process's achieved model FLOP/s and its fraction of the peak
            **flops.metrics("train", flops.samples(mine, train=True), time.time() - s0),
            **self.memory.metrics(),
        }

    async def evaluate(self, step: int) -> dict[str, float]:
        """The held-out loss (kept for the result)."""
        self.last_held = self.heldout()
        return {} if self.last_held is None else {"bc/heldout_loss": self.last_held}

    def report(self, done: int, metrics: dict[str, float]) -> None:
        """``on_step``, then the progress bar."""
        if self.on_step is not None:
            self.on_step(done, metrics)
        if self.bar is not None:
            self.bar.update(advance=1, info=f"loss {metrics['train/loss']:.3f}")

    async def close(self) -> None:
        """The progress bar, then the logger."""
        if self.bar is not None:
            self.bar.close()
        await super().close()

    def result(self, final: Path) -> BCResult:
        """The final checkpoint, the configured steps and the last held-out loss."""
        return BCResult(final, self.cfg.bc.steps, self.last_held, time.time() - self.t0)


def _bar(enabled: bool, total: int, start: int, label: str) -> Any:
    if not enabled or total <= start:
        return None

    return Bar(label, total, start, time_remaining=True)
