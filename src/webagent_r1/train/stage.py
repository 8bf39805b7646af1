"""What a training stage is: setup, step, evaluate, save, close, and the loop that runs them.

BC (``train/bc.py``) and M-GRPO (``train/rl.py``) are both a ``Stage``: ``run`` owns the parts
of the loop they share (the learning-rate schedule, when to evaluate and to checkpoint, the time
budget, logging and progress, the final checkpoint), and the helpers here build what they
both need in the same way (resume point, seeding, policy, sharding, optimizer, logger,
checkpoint writing). A stage supplies:

- ``setup``: load data, model, optimizer and everything a step uses, resuming when asked;
- ``begin``: what happens once before the first step (an evaluation at step 0);
- ``step``: one optimizer step, returning its metrics;
- ``evaluate``: the stage's evaluation, returning its metrics;
- ``trainer_state``: what a checkpoint records besides weights and optimizer;
- ``report``: progress after a step (a bar, a line);
- ``close``: release what ``setup`` opened;
- ``result``: what the stage returns.

``run`` is a coroutine (M-GRPO awaits rollouts); a stage that never awaits anything, like BC,
runs it with ``run_sync`` and no event loop.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import torch

from webagent_r1.config import Config, to_dict
from webagent_r1.policy.precision import FlopsMeter, autocast_enabled
from webagent_r1.policy.trainable import load_policy
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
from webagent_r1.train.dist import Dist, build_optimizer, lr_factor, trainable_parameters
from webagent_r1.train.fsdp_load import empty_policy, load_sharded_policy
from webagent_r1.train.metrics import MemoryWatch, MetricLogger
from webagent_r1.train.sharding import is_sharded

__all__ = ["Stage", "save_trainer_checkpoint"]


class Stage:
    """One training stage: its folder, policy, optimizer, logger and loop.

    Args:
        cfg: the run's config (as the stage trains with it).
        section: the stage's own config section (``lr``, ``steps``, ``warmup_steps``,
            ``eval_every``: ``cfg.bc`` or ``cfg.rl``).
        name: the stage's folder under ``run_dir`` (used when ``stage_dir`` is None).
        resume: continue from the newest complete checkpoint of the stage folder.
        stage_dir: where checkpoints and metrics go.
        progress: show progress (main process).
    """

    eval_joins_step = False
    """True: an evaluation's metrics go into the row of the step it follows (BC's held-out
    loss); False: they are logged as a row of their own after it (M-GRPO's evaluation)."""

    def __init__(
        self,
        cfg: Config,
        section: Any,
        name: str,
        resume: bool = False,
        stage_dir: str | Path | None = None,
        progress: bool = True,
    ) -> None:
        self.t0 = time.time()
        self.dist = Dist.init(cfg.dist.timeout_min, cfg.dist.grad_bucket_mb)
        self.cfg = cfg
        self.section = section
        self.resume = resume
        self.progress = progress
        self.stage = Path(stage_dir or Path(cfg.run_dir) / name)
        self.ckpt_root = self.stage / "checkpoints"
        self.start = 0
        self.ckpt: Path | None = None
        self.resumed: dict[str, Any] = {}
        self.model: Any = None
        self.tokenizer: Any = None
        self.opt: Any = None
        self.params: list[torch.nn.Parameter] = []
        self.logger: MetricLogger | None = None

    # -- what a stage supplies -----------------------------------------------------------

    async def setup(self) -> None:
        """Build everything the steps use (data, model, optimizer, logger …)."""
        raise NotImplementedError

    async def begin(self) -> None:
        """Run once before the first step (inside ``close``'s protection)."""

    async def step(self, step: int) -> dict[str, float]:
        """Optimizer step ``step`` (0-based, learning rate already set); its metrics."""
        raise NotImplementedError

    async def evaluate(self, step: int) -> dict[str, float]:
        """The stage's evaluation after ``step`` steps; its metrics."""
        return {}

    def trainer_state(self, step: int) -> dict[str, Any]:
        """What a checkpoint at ``step`` records besides the weights and the optimizer."""
        return {"step": step, "rng": rng_state()}

    def report(self, done: int, metrics: dict[str, float]) -> None:
        """Progress after step ``done`` was logged."""

    def over_budget(self, done: int) -> bool:
        """Stop after step ``done`` though steps remain (a time budget)."""
        return False

    async def close(self) -> None:
        """Release what ``setup`` opened (also after an error)."""
        if self.logger is not None:
            self.logger.close()

    def result(self, final: Path) -> Any:
        """What the stage returns, given its final checkpoint."""
        return final

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> Any:
        """Set up, run the remaining steps (evaluating and checkpointing on their cadence),
        close, and return ``result`` of the final checkpoint (the start's when no step ran)."""
        await self.setup()
        steps = self.section.steps
        try:
            await self.begin()
            for step in range(self.start, steps):
                self.set_lr(step)
                metrics = await self.step(step)
                done = step + 1
                last = done == steps or self.over_budget(done)
                evaluate = self.eval_due(done, last)
                if evaluate and self.eval_joins_step:
                    metrics.update(await self.evaluate(done))
                self.log(done, metrics)
                self.report(done, metrics)
                if evaluate and not self.eval_joins_step:
                    self.log(done, await self.evaluate(done))
                if self.checkpoint_due(done, last):
                    self.save(done)
                if last:
                    break
        finally:
            await self.close()
        final = latest_checkpoint(self.ckpt_root)
        if final is None:  # no step to do: the start is the final checkpoint
            self.save(self.start)
            final = latest_checkpoint(self.ckpt_root)
        assert final is not None
        return self.result(final)

    def run_sync(self) -> Any:
        """``run`` without an event loop, for a stage whose methods never await anything.

        Raises:
            RuntimeError: the stage awaited something that suspends.
        """
        coro = self.run()
        try:
            coro.send(None)
        except StopIteration as finished:
            return finished.value
        coro.close()
        raise RuntimeError(f"{type(self).__name__}.run awaited: run it in an event loop")

    def set_lr(self, step: int) -> None:
        """The schedule's learning rate for ``step`` (``train.schedule``, warm-up)."""
        s = self.section
        for g in self.opt.param_groups:
            g["lr"] = s.lr * lr_factor(step, s.warmup_steps, s.steps, self.cfg.train.schedule)

    def eval_due(self, done: int, last: bool) -> bool:
        """Evaluate after step ``done``: every ``eval_every`` steps and after the last."""
        every = self.section.eval_every
        return bool(every and done % every == 0) or last

    def checkpoint_due(self, done: int, last: bool) -> bool:
        """Checkpoint after step ``done``: every ``train.checkpoint_every`` and the last."""
        every = self.cfg.train.checkpoint_every
        return bool(every and done % every == 0) or last

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` at ``step`` (main process)."""
        assert self.logger is not None
        self.logger.log(step, metrics)

    # -- what both stages build alike ----------------------------------------------------

    def find_resume_point(self) -> None:
        """With ``resume``, the newest checkpoint that loads completely (the others are
        named with the reason) and its trainer state."""
        say = print_note if self.dist.main else None
        found = resume_checkpoint(self.ckpt_root, say=say) if self.resume else None
        self.ckpt, self.resumed = found if found is not None else (None, {})

    def build_policy(self, path: str | None, lr: float) -> None:
        """Seed, load the policy from ``path``, shard it (``train.sharding``) and build its
        optimizer; ``flops`` measures the whole (unsharded) model."""
        torch.manual_seed(self.cfg.seed)
        random.seed(self.cfg.seed)
        sharded = self.cfg.train.sharding == "fsdp"
        # sharded: built on the meta device, the weights read by rank 0 only (fsdp_load)
        self.model, self.tokenizer = (empty_policy if sharded else load_policy)(self.cfg, path)
        self.bf16 = autocast_enabled(self.cfg.model)
        if sharded:  # bf16 gathers, fp32 reduce
            self.model = load_sharded_policy(self.cfg, path, self.bf16, model=self.model)
        # whole-model sizes (a sharded parameter counts its full shape)
        self.flops = FlopsMeter(self.model.module if sharded else self.model, self.bf16)
        self.params = trainable_parameters(self.model)
        self.opt = build_optimizer(self.params, lr, self.cfg.train)

    def restore(self) -> None:
        """From the resume point, if any: optimizer, random generators and step."""
        if self.ckpt is None:
            return
        restore_optimizer(self.ckpt, self.resumed, self.model, self.opt)
        set_rng(self.resumed["rng"])
        self.start = int(self.resumed["step"])

    @property
    def pad_id(self) -> int:
        """The tokenizer's padding id (0 when it has none)."""
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else 0

    def open_logger(self) -> None:
        """The metric logger (main process writes) and the memory watch."""
        tcfg, main = self.cfg.train, self.dist.main
        wandb = tcfg.wandb_project if main else None
        self.logger = MetricLogger(self.stage, main, tcfg.tensorboard, wandb, to_dict(self.cfg))
        self.memory = MemoryWatch(enabled=main)

    def save(self, step: int) -> None:
        """Checkpoint ``step`` (a collective: every process calls it)."""
        save_trainer_checkpoint(
            self.ckpt_root,
            step,
            self.model,
            self.tokenizer,
            self.opt,
            self.cfg,
            self.dist,
            self.trainer_state(step),
        )


def save_trainer_checkpoint(
    root: Path,
    step: int,
    model: Any,
    tokenizer: Any,
    opt: Any,
    cfg: Config,
    dist: Dist,
    state: dict[str, Any],
) -> None:
    """Write checkpoint ``step`` of a stage; called by every process.

    Sharded, every process gathers and writes its shard of the optimizer; otherwise the main
    process writes the weights and the whole optimizer state (``state["optimizer"]``) and the
    others wait.

    Args:
        root: the stage's ``checkpoints/`` folder.
        step: the checkpoint's step.
        model: the policy (sharded or not).
        tokenizer: saved next to the model.
        opt: its optimizer.
        cfg: ``train.keep_checkpoints``, ``train.merge_lora_on_save``.
        dist: the training processes.
        state: the trainer state (``Stage.trainer_state``).
    """
    keep = cfg.train.keep_checkpoints
    if is_sharded(model):  # a collective: every process gathers and writes its shard
        save_sharded_checkpoint(root, step, model, opt, tokenizer, state, dist, keep=keep)
        return
    if dist.main:
        state["optimizer"] = opt.state_dict()
        merge = cfg.train.merge_lora_on_save
        save_checkpoint(root, step, model, tokenizer, state, keep=keep, merge_lora=merge)
    dist.barrier()
