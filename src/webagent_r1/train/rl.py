"""M-GRPO training: roll out groups in real browsers, then update on every turn of every episode.

One training step (WebAgent-R1, Sec. 3.2; docs/design.md, "M-GRPO"):

1. sample B tasks from the training split (a seeded function of the step and the curriculum
   state, so a resumed run draws the same tasks; ``rl.curriculum``: uniform, or weighted toward
   templates with mixed outcomes, see ``train/curriculum.py``); with several processes, each
   rolls out its share;
2. roll out G trajectories per task with the asynchronous rollout (``rollout.collect``),
   sampling from the current policy (``train.generation_engine``: the HF engine shares the
   trainer's model object; a vLLM engine holds its own copy);
3. build one sample per turn from the stored ids (never re-tokenised); group-normalised
   advantages (``rl.advantage``: the episode's for every turn, or GiGPO's episode plus
   step-level advantage, ``algos/gigpo.py``); groups whose rewards are all equal carry no
   gradient and are skipped (counted); env-error episodes are never trained on as failures;
   a turn sampled from weights more than ``rl.max_staleness`` updates older than the
   trainer's is dropped (counted) or stops the run (``rl.stale_turns``);
4. compute π_old once (``rl.old_logprobs``: recomputed by the trainer's own forward, or the
   sampler's stored log-probs) and the reference log-probs when β > 0; the whole update runs
   without dropout, so a recomputed π_old gives a ratio of exactly 1 at the first iteration;
   with μ = 1 that is the only iteration, so π_old is not recomputed at all: the training
   forward's own log-probs, detached, are π_old (ratio ``exp(logp - logp.detach())``);
5. μ policy iterations over the batch, each one optimizer step of ``rl.pg_coef`` times the
   clipped surrogate with the chosen normalisation (``algos/mgrpo.py``), gradients
   accumulated over micro-batches, plus ``rl.bc_coef`` times the token-mean NLL (at
   temperature 1) of ``rl.bc_batch_size`` demonstration turns when that is > 0
   (``train/loss`` is the surrogate's alone,
   ``train/bc_loss`` the NLL over ``train/bc_tokens`` tokens; a step whose groups were all
   dropped then updates on it alone and logs no surrogate metrics); ``rl.pg_coef=0`` is the
   control without the policy gradient: steps 2-4 are skipped (nothing they produce reaches
   its updates) and every update is the BC term's alone, the rest of the run unchanged;
6. the engine samples from the updated weights from the next step on: ``WeightSync.push``
   (``train/weight_sync.py``) bumps the shared engine's ``weight_version`` or loads the new
   weights into the vLLM engine; every turn records the version it was sampled from.

With ``train.sharding: fsdp`` the policy is sharded over the processes (``train/sharding.py``);
the HF engine then samples from a full copy of the weights on each process, which
``WeightSync`` refreshes after every update.

Unlike the published code, the update attends over the full prompt each turn was sampled
from (observations included), and μ > 1 is supported so the ratio clip really acts.

``train_rl`` runs an ``RLStage``: the loop, the resume point, the policy and optimizer building
and the checkpoints are those of every stage (``train/stage.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch

from webagent_r1.algos.gigpo import ADVANTAGES, gigpo_advantages
from webagent_r1.algos.mgrpo import NORMALIZERS, group_advantages, mgrpo_loss, turn_count
from webagent_r1.browser import Browser
from webagent_r1.config import Config, ConfigError, RLConfig
from webagent_r1.evaluation.run import evaluate_policy
from webagent_r1.policy.base import SamplingParams, prefill_counts
from webagent_r1.policy.precision import autocast_enabled, resolve_old_logprobs
from webagent_r1.policy.trainable import unwrap_model
from webagent_r1.rollout.collect import (
    Group,
    RolloutStats,
    collect,
    turns_by_outcome,
    turns_by_outcome_metrics,
)
from webagent_r1.rollout.pool import make_env_pool
from webagent_r1.rollout.trajectories import (
    Sample,
    read_trajectories,
    turn_samples,
    write_trajectories,
)
from webagent_r1.sources import task_source
from webagent_r1.stats import pass_at_k
from webagent_r1.tasks.subset import eval_subset
from webagent_r1.train.batching import (
    collate_rows,
    completion_logprobs,
    pack_plan,
    padding_batch,
    supports_shared_prefix,
    supports_shared_prompts,
)
from webagent_r1.train.bc import batch_indices, bc_backward, split_demos, successful_demos
from webagent_r1.train.checkpoint import print_note, rng_state
from webagent_r1.train.curriculum import Curriculum, StepGroups, collect_step, step_tasks
from webagent_r1.train.dist import (
    Dist,
    frozen_copy_dtype,
    grad_norm_and_clip,
    load_reference,
    reference_context,
    trainable_parameters,
    update_rms,
)
from webagent_r1.train.fsdp_load import load_sharded_reference
from webagent_r1.train.metrics import release_free_memory
from webagent_r1.train.sharding import is_sharded
from webagent_r1.train.stage import Stage
from webagent_r1.train.weight_sync import WeightSync, update_then_push
from webagent_r1.types import Task, Trajectory

__all__ = [
    "RLBatch",
    "RLResult",
    "RLStage",
    "StaleTurnsError",
    "bc_term_samples",
    "build_rl_batch",
    "generation_engine",
    "is_stale",
    "mgrpo_update",
    "refuse_stale_turns",
    "step_tasks",
    "train_rl",
]


@dataclass
class RLBatch:
    """The turn samples of one step, with what the loss needs per sample."""

    samples: list[Sample] = field(default_factory=list)
    traj: list[int] = field(default_factory=list)
    """Trajectory index (within this batch) of each sample."""
    trajectories: list[Trajectory] = field(default_factory=list)
    """The trajectories of the used groups: ``trajectories[traj[k]]`` is sample k's."""
    n_traj: int = 0
    """Trajectories contributing samples (G summed over used groups)."""
    groups_used: int = 0
    groups_equal: int = 0
    """Groups skipped because every reward was equal (zero advantage)."""
    groups_small: int = 0
    """Groups with fewer than 2 usable trajectories (env errors, untrainable text)."""
    stale_versions: list[int] = field(default_factory=list)
    """``weight_version`` of every turn left out as stale (``rl.max_staleness``)."""
    step_group_turns: int = 0
    """'gigpo': samples whose turn shares its state with another turn of its group (a step
    group of more than one turn, so a step-level advantage that can be non-zero)."""

    @property
    def turns_stale(self) -> int:
        """Turns left out because their weights were too old (or newer than the trainer's)."""
        return len(self.stale_versions)


class StaleTurnsError(RuntimeError):
    """Turns were sampled from weights other than those ``rl.max_staleness`` allows, and
    ``rl.stale_turns`` is 'error'."""


def is_stale(turn_version: int, version: int, max_staleness: int) -> bool:
    """Whether a turn sampled from weights ``turn_version`` is too far from the trainer's
    ``version``: more than ``max_staleness`` optimizer steps behind, or ahead of it (weights
    the trainer never had)."""
    return not 0 <= version - turn_version <= max_staleness


def train_reward(traj: Trajectory, require_exit: bool) -> float:
    """The reward M-GRPO trains on: the graded one, or 0 when ``require_exit`` and the
    episode ran to the turn limit without ``exit``."""
    return 0.0 if require_exit and traj.status == "max_turns" else float(traj.reward)


def trainable_members(group: Group) -> list[Trajectory]:
    """The members ``build_rl_batch`` trains on: usable (no env error), trainable, with turns."""
    return [t for t in group.usable if t.info.get("trainable", True) and t.turns]


def trained_rewards(group: Group, require_exit: bool) -> list[float]:
    """The rewards ``build_rl_batch`` trains ``group`` on (``trainable_members``)."""
    return [train_reward(t, require_exit) for t in trainable_members(group)]


def build_rl_batch(
    groups: list[Group],
    advantage_scale: str = "std",
    drop_equal_groups: bool = True,
    version: int | None = None,
    max_staleness: int = 0,
    stale_turns: str = "drop",
    advantage: str = "episode",
    step_weight: float = 1.0,
    step_gamma: float = 0.95,
    require_exit: bool = False,
) -> RLBatch:
    """Advantages per group and one sample per turn (``Sample.advantage`` set).

    Trajectories with status ``env_error`` or not trainable (an engine that returned text
    only) are left out; a group needs two usable members to define an advantage.

    Args:
        groups: the step's groups.
        advantage_scale: ``group_advantages``' scale ('std' or 'none').
        drop_equal_groups: skip groups whose rewards are all equal (counted).
        version: the ``weight_version`` of the weights this batch will update; None checks
            no turn's version (nor is a turn without one checked: its engine reports none).
        max_staleness: most optimizer steps a turn's weights may lag ``version``.
        stale_turns: 'drop' leaves a stale turn out (counted in ``turns_stale``; the episode's
            reward still counts in its group's advantages, and its other turns share its
            1/G weight); 'error' raises.
        advantage: 'episode' gives every turn its trajectory's group advantage; 'gigpo' adds
            ``step_weight`` times the step-level advantage of ``algos/gigpo.py`` (turns keyed
            by ``Turn.state_key``; a stale turn still counts in its step group's returns).
        step_weight: 'gigpo': ω, the weight of the step-level advantage.
        step_gamma: 'gigpo': γ, the discount of the step-level returns.
        require_exit: train on a reward of 0 for a trajectory that did not end with ``exit``
            (status ``max_turns``), whatever its graded reward (``rl.reward_requires_exit``).

    Raises:
        StaleTurnsError: a stale turn with ``stale_turns='error'``.
    """
    if stale_turns not in ("drop", "error"):
        raise ValueError(f"stale_turns must be 'drop' or 'error', got {stale_turns!r}")
    if advantage not in ADVANTAGES:
        raise ValueError(f"advantage must be one of {ADVANTAGES}, got {advantage!r}")
    batch = RLBatch()
    for g in groups:
        usable = trainable_members(g)
        if len(usable) < 2:
            batch.groups_small += 1
            continue
        scores = [train_reward(t, require_exit) for t in usable]
        rewards = torch.tensor(scores)
        if drop_equal_groups and bool((rewards == rewards[0]).all()):
            batch.groups_equal += 1
            continue
        if advantage == "gigpo":
            credit = gigpo_advantages(
                scores,
                [[u.state_key for u in t.turns] for t in usable],
                advantage_scale,
                step_weight,
                step_gamma,
            )
            per_turn, grouped = credit.advantages, credit.grouped
        else:
            adv = group_advantages(rewards, advantage_scale)  # (G,)
            per_turn = [[float(adv[i])] * len(t.turns) for i, t in enumerate(usable)]
            grouped = [[False] * len(t.turns) for t in usable]
        batch.groups_used += 1
        for i, traj in enumerate(usable):
            for t, (turn, s) in enumerate(zip(traj.turns, turn_samples(traj), strict=True)):
                v = turn.weight_version
                if version is not None and v is not None and is_stale(v, version, max_staleness):
                    batch.stale_versions.append(v)
                    continue
                s.advantage = per_turn[i][t]
                batch.samples.append(s)
                batch.traj.append(batch.n_traj + i)
                batch.step_group_turns += grouped[i][t]
        batch.n_traj += len(usable)
        batch.trajectories.extend(usable)
    if batch.stale_versions and stale_turns == "error":
        raise StaleTurnsError(_stale_message(batch, batch.turns_stale, version, max_staleness))
    return batch


def _stale_message(batch: RLBatch, n: int, version: int | None, max_staleness: int) -> str:
    """What ``StaleTurnsError`` says: ``n`` stale turns in all, the versions seen here."""
    return (
        f"{n} turn(s) were sampled from weights other than the trainer's version {version} "
        f"allows with rl.max_staleness={max_staleness} (versions seen here: "
        f"{sorted(set(batch.stale_versions))}): raise rl.max_staleness, or set "
        "rl.stale_turns=drop to leave such turns out of the update"
    )


def refuse_stale_turns(batch: RLBatch, rl: RLConfig, version: int, dist: Dist) -> None:
    """Raise ``StaleTurnsError`` on every process alike when any process's batch left out a
    stale turn and ``rl.stale_turns`` is 'error' (one process raising alone would leave the
    others waiting in the update's collectives).

    Args:
        batch: this process's batch (from ``build_rl_batch`` with ``stale_turns='drop'``).
        rl: the ``rl`` config section (``stale_turns``, ``max_staleness``).
        version: the weight version being updated.
        dist: the process group.
    """
    [n] = dist.all_reduce_sum([float(batch.turns_stale)])
    if n and rl.stale_turns == "error":
        raise StaleTurnsError(_stale_message(batch, int(n), version, rl.max_staleness))


def _token_tensors(batch: RLBatch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[int]]:
    """Flat per-token (trajectory, turn, advantage) and each sample's first token index."""
    traj, turn, adv, starts = [], [], [], []
    for s, ti in zip(batch.samples, batch.traj, strict=True):
        n = len(s.input_ids) - s.prompt_len
        starts.append(len(traj))
        traj.extend([ti] * n)
        turn.extend([s.turn_index] * n)
        adv.extend([s.advantage] * n)
    return (
        torch.tensor(traj, dtype=torch.long),
        torch.tensor(turn, dtype=torch.long),
        torch.tensor(adv, dtype=torch.float),
        starts,
    )


def _plan(model: Any, samples: list[Sample], budget: int, share: bool) -> list[list[list[int]]]:
    """Micro-batches of rows (``batching.pack_plan``), sharing prompts where the model can."""
    return pack_plan(samples, budget, share and supports_shared_prompts(model))


def _micro_batch_count(model: Any, groups: list[Any], dist: Dist | None) -> int:
    """Micro-batches to run: this process's, or under sharding the most of any process (each
    forward and backward is then a collective; the extra ones are ``padding_batch``)."""
    if not is_sharded(model):
        return len(groups)
    return (dist or Dist()).all_reduce_max(len(groups))


@torch.no_grad()
def _all_logprobs(
    model: Any,
    samples: list[Sample],
    pad_id: int,
    budget: int,
    temp: float,
    bf16: bool,
    dist: Dist | None = None,
    share: bool = False,
    prefix: bool = False,
) -> torch.Tensor:
    """(N,) log-probs of every completion token of ``samples`` in flat order, no grad."""
    n = sum(len(s.input_ids) - s.prompt_len for s in samples)
    out = torch.zeros(n)
    starts = []
    k = 0
    for s in samples:
        starts.append(k)
        k += len(s.input_ids) - s.prompt_len
    st = torch.tensor(starts, dtype=torch.long)
    groups = _plan(model, samples, budget, share)
    for k in range(_micro_batch_count(model, groups, dist)):
        if k >= len(groups):  # keeps step with the other processes; its result is unused
            completion_logprobs(model, padding_batch(pad_id), temp, bf16)
            continue
        mb = collate_rows(samples, groups[k], pad_id, prefix and supports_shared_prefix(model))
        lp = completion_logprobs(model, mb, temp, bf16).float().cpu()
        out[st[mb.sample] + mb.offset] = lp
    return out


def _old_and_ref_logprobs(
    model: Any,
    ref_model: Any,
    samples: list[Sample],
    cfg: Config,
    pad_id: int,
    temp: float,
    bf16: bool,
    dist: Dist,
    fused: bool = False,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(N,) π_old log-probs of every completion token of ``samples``, and the reference
    policy's when β > 0 (else None), in flat token order. π_old is None when ``fused`` and
    recomputed: the training forward then gives it (``mgrpo_update``, μ = 1).

    Raises:
        ValueError: β > 0 without a reference model.
    """
    rl, tcfg = cfg.rl, cfg.train
    budget, share, prefix = tcfg.token_budget, tcfg.share_prompts, tcfg.share_prefix
    # π_old: the trainer's own forward (so ratio = 1 exactly at the first iteration) or the
    # sampler's log-probs as stored (cheaper; ratios then include sampler numerics).
    old = None
    if rl.old_logprobs == "sampler":
        old = torch.tensor([lp for s in samples for lp in s.old_logprobs], dtype=torch.float)
    elif not fused:  # (sharded, a process without samples still takes part in the forwards)
        old = _all_logprobs(model, samples, pad_id, budget, temp, bf16, dist, share, prefix)
    ref = None
    if rl.beta > 0:
        if ref_model is None:
            raise ValueError("rl.beta > 0 needs a reference model")
        # a sharded reference (fsdp_load) gathers in every forward: every process takes part
        if samples or is_sharded(ref_model):
            with reference_context(model, ref_model), torch.no_grad():  # LoRA: adapters off
                ref = _all_logprobs(
                    ref_model, samples, pad_id, budget, temp, bf16, dist, share, prefix
                )
        ref = ref if samples else None
    return old, ref


def mgrpo_update(
    model: Any,
    optimizer: Any,
    batch: RLBatch,
    cfg: Config,
    pad_id: int,
    dist: Dist | None = None,
    ref_model: Any = None,
    lock: Any = None,
    bc_samples: list[Sample] | None = None,
    fuse_old: bool = True,
) -> dict[str, float]:
    """μ policy iterations of M-GRPO on ``batch`` (this process's share).

    The model runs without dropout throughout (LoRA's included; ``_eval_mode``: eval mode,
    the checkpointing layers excepted) and gets its previous mode back after: π_old and the
    first iteration's π_θ are the same function of the same weights, so the first
    iteration's ratio is exactly 1.

    Args:
        model: the policy (trainable).
        optimizer: its optimizer (learning rate already set for this step).
        batch: from ``build_rl_batch``.
        cfg: ``rl`` (μ, ε, β, normalisation, π_old source, ``pg_coef``, ``bc_coef``), ``train``
            (budget, clipping), ``rollout`` (temperature, max_new_tokens for Dr.GRPO), ``model``.
        pad_id: padding id.
        dist: process group (None: one process).
        ref_model: the frozen reference policy (needed when β > 0).
        lock: held while the weights change (the engine's lock when it shares the model).
        bc_samples: this process's demonstration turns for the behaviour-cloning term
            (``rl.bc_coef`` times their token-mean NLL over all processes, added to every
            iteration's loss); None, or ``rl.bc_coef`` = 0: no BC term.
        fuse_old: π_old from the training forward itself where μ = 1 (False: a separate one).

    Returns:
        ``train/…`` metrics (means over the μ iterations).
    """
    # Dropout off for the whole update, the previous mode restored after: π_old and the first
    # iteration's π_θ are then one deterministic function, so the ratio is exactly 1 there (a
    # fresh dropout mask per forward would make every ratio noise and let the clip act on it).
    with _eval_mode(model):
        dist = dist or Dist()
        rl, tcfg = cfg.rl, cfg.train
        temp = cfg.rollout.temperature if cfg.rollout.temperature > 0 else 1.0
        bf16 = autocast_enabled(cfg.model, next(model.parameters()).device)
        budget = tcfg.token_budget
        share, prefix = tcfg.share_prompts, tcfg.share_prefix
        params = trainable_parameters(model)
        traj_t, turn_t, adv_t, starts = _token_tensors(batch)
        local = [float(batch.n_traj), float(traj_t.numel()), float(turn_count(traj_t, turn_t))]
        g_traj, g_tok, g_turns = dist.all_reduce_sum(local)  # the whole batch, all processes
        metrics: dict[str, float] = {}
        bc_tok = _bc_token_total(bc_samples, rl, dist)  # the BC term's tokens, all processes
        with_bc = bc_tok > 0  # the same on every process
        with_pg = g_tok > 0 and rl.pg_coef > 0  # the surrogate runs (rl.pg_coef=0: the control)
        if not with_pg and not with_bc:
            return {"train/skipped": 1.0}
        samples = batch.samples
        tokens = TokenTensors(old=None, ref=None, adv=adv_t, weights=None)
        groups: list[list[list[int]]] = []  # no M-GRPO tokens: an update of the BC term alone
        if with_pg:
            # once for the whole batch, so micro-batches and processes only split a fixed sum
            counts = (max(int(g_traj), 1), int(g_tok), int(g_turns))  # trajectories, tokens, turns
            weights = _batch_weights(traj_t, turn_t, cfg, *counts) * rl.pg_coef  # (N,)
            old, ref = _old_and_ref_logprobs(
                model, ref_model, samples, cfg, pad_id, temp, bf16, dist, fuse_old and rl.mu == 1
            )
            tokens = TokenTensors(old, ref, adv_t, weights)
            groups = _plan(model, samples, budget, share)
        sums = {"grad_norm": 0.0}
        if with_pg:  # the surrogate's metrics only where it ran
            sums.update({"loss": 0.0, "clip_frac": 0.0, "kl": 0.0, "ratio": 0.0})
        if with_bc:
            sums["bc_loss"] = 0.0
        n_mb = _micro_batch_count(model, groups, dist)
        surrogate = functools.partial(
            _surrogate_backward,
            model,
            samples,
            groups=groups,
            n_mb=n_mb,
            starts=torch.tensor(starts, dtype=torch.long),
            tokens=tokens,
            rl=rl,
            pad_id=pad_id,
            prefix=prefix and supports_shared_prefix(model),
            temp=temp,
            bf16=bf16,
        )
        for _ in range(rl.mu):
            optimizer.zero_grad(set_to_none=True)
            loss_sum, clip_n, kl_n, ratio_n = surrogate()
            bc_part = 0.0
            if with_bc:  # rl.bc_coef x the demonstrations' token-mean NLL, into the same grads
                bc_part = _bc_term_backward(
                    model, bc_samples or [], int(bc_tok), cfg, pad_id, bf16, dist
                )
            if not is_sharded(model):  # FSDP has reduce-scattered the gradients in the backward
                dist.all_reduce_grads(params)
            loss_sum, clip_n, kl_n, ratio_n, bc_sum = dist.all_reduce_sum(
                [loss_sum, clip_n, kl_n, ratio_n, bc_part]
            )
            if with_bc:
                sums["bc_loss"] += bc_sum / rl.bc_coef  # the NLL itself, unweighted
            gn = grad_norm_and_clip(params, tcfg.max_grad_norm)
            with lock if lock is not None else contextlib.nullcontext():
                optimizer.step()
            sums["grad_norm"] += gn
            if with_pg:
                sums["loss"] += loss_sum
                sums["clip_frac"] += clip_n / g_tok
                sums["kl"] += kl_n / g_tok
                sums["ratio"] += ratio_n / g_tok
        for k, v in sums.items():
            metrics[f"train/{'ratio_mean' if k == 'ratio' else k}"] = v / rl.mu
        metrics["train/update_rms"] = update_rms(optimizer, dist)  # of the last of the mu steps
        metrics["train/tokens"] = g_tok
        if with_bc:
            metrics["train/bc_tokens"] = bc_tok
        return metrics


def _batch_weights(
    traj_t: torch.Tensor,
    turn_t: torch.Tensor,
    cfg: Config,
    n_traj: int,
    n_tokens: int,
    n_turns: int,
) -> torch.Tensor:
    """``rl.normalization``'s per-token weights from the whole batch's counts of trajectories,
    tokens and turns over every process."""
    return NORMALIZERS[cfg.rl.normalization](
        traj_t,
        turn_t,
        n_traj=n_traj,
        n_tokens=n_tokens,
        n_turns=n_turns,
        max_tokens=cfg.rollout.max_new_tokens,
    )  # (N,)


def _bc_token_total(samples: list[Sample] | None, rl: RLConfig, dist: Dist) -> float:
    """Completion tokens of the BC term's turns over every process (0: no BC term)."""
    if samples is None or rl.bc_coef <= 0:
        return 0.0
    [total] = dist.all_reduce_sum([float(sum(len(s.input_ids) - s.prompt_len for s in samples))])
    return total


def _bc_term_backward(
    model: Any,
    samples: list[Sample],
    total: int,
    cfg: Config,
    pad_id: int,
    bf16: bool,
    dist: Dist,
) -> float:
    """``rl.bc_coef`` times the token-mean NLL (over ``total`` tokens of every process) of this
    process's demonstration turns, backpropagated into the gradients; its share of the loss."""
    loss, _ = bc_backward(
        model,
        samples,
        pad_id,
        cfg.train.token_budget,
        bf16,
        total,
        dist=dist,
        share_prefix=cfg.train.share_prefix,
        coef=cfg.rl.bc_coef,
    )
    return loss


class TokenTensors(NamedTuple):
    """Per-token tensors of an M-GRPO batch, in the batch's token order (None where the batch
    has no token: an update of the BC term alone)."""

    old: torch.Tensor | None
    """log π_old (None with M-GRPO tokens: the training forward's own log-probs, detached,
    which is π_old when μ = 1)."""
    ref: torch.Tensor | None
    """log π_ref (β > 0)."""
    adv: torch.Tensor
    """Advantages."""
    weights: torch.Tensor | None
    """``rl.normalization``'s weights."""


def _surrogate_backward(
    model: Any,
    samples: list[Sample],
    *,
    groups: list[list[list[int]]],
    n_mb: int,
    starts: torch.Tensor,
    tokens: TokenTensors,
    rl: RLConfig,
    pad_id: int,
    prefix: bool,
    temp: float,
    bf16: bool,
) -> list[float]:
    """One policy iteration's M-GRPO loss gradient over this process's micro-batches
    (``n_mb`` of them: under sharding, padding ones keep step with the other processes).

    Returns:
        [loss, clipped tokens, KL sum, ratio sum] of this process.
    """
    old, ref, adv_t, weights = tokens
    loss_sum, clip_n, kl_n, ratio_n = 0.0, 0.0, 0.0, 0.0
    for k in range(n_mb):
        if k >= len(groups):  # sharded: keep step with the other processes, add nothing
            (completion_logprobs(model, padding_batch(pad_id), temp, bf16).sum() * 0).backward()
            continue
        assert weights is not None  # a token to train on
        mb = collate_rows(samples, groups[k], pad_id, prefix)
        flat = starts[mb.sample] + mb.offset  # (n,) positions in the batch's token order
        logp = completion_logprobs(model, mb, temp, bf16).cpu()  # (n,)
        loss, stats = mgrpo_loss(
            logp,
            # μ = 1 and recomputed: this forward is π_old's, so ratio = exp(logp - logp.detach())
            old[flat] if old is not None else logp.detach(),
            adv_t[flat],
            weights[flat],
            clip_eps=rl.clip_eps,
            beta=rl.beta,
            ref_logp=ref[flat] if ref is not None else None,
        )
        loss.backward()
        n = float(flat.numel())
        loss_sum += float(loss.detach())
        clip_n += stats.clip_frac * n
        kl_n += stats.kl * n
        ratio_n += stats.ratio_mean * n
    return [loss_sum, clip_n, kl_n, ratio_n]


@contextlib.contextmanager
def _eval_mode(model: Any) -> Iterator[None]:
    """``model`` without dropout inside, gradient checkpointing kept; every module's previous
    mode restored after.

    Every module goes to eval mode (dropout layers and attention dropout read their own
    module's flag), except the modules that checkpoint (Hugging Face's
    ``GradientCheckpointingLayer``, or an older model's decoder: ``gradient_checkpointing``
    set), which checkpoint only in training mode (a plain ``model.eval()`` would keep every
    layer's activations for the backward pass). Such a module gets its own flag back only
    when its ``forward`` applies no dropout of its own (Llama, Qwen2 and most current
    decoders); one that does (OPT, Falcon …) stays in eval mode, without
    checkpointing, and a warning says so once.
    """
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    for m, _ in modes:
        if getattr(m, "gradient_checkpointing", False) is not True or not _checkpoints(type(m)):
            continue
        if _own_dropout(type(m)):
            _warn_no_checkpointing(type(m).__name__)
        else:
            m.training = True  # this module only: its children stay in eval mode
    try:
        yield
    finally:
        for m, mode in modes:
            m.training = mode


@functools.cache
def _checkpoints(cls: type) -> bool:
    """Whether modules of ``cls`` do the checkpointing themselves: a Hugging Face
    ``GradientCheckpointingLayer``, or a forward that calls the checkpoint function (older
    decoders); other modules with the attribute (a model holding such layers) need no flag."""
    try:
        # heavy: transformers loads only when this runs
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:  # transformers before the layer class
        GradientCheckpointingLayer = ()  # noqa: N806
    if GradientCheckpointingLayer and issubclass(cls, GradientCheckpointingLayer):
        return True
    try:
        return "_gradient_checkpointing_func" in inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return False


@functools.cache
def _own_dropout(cls: type) -> bool:
    """Whether ``cls.forward`` applies dropout (or layer drop) itself, by its source; True
    when the source cannot be read."""
    try:
        src = inspect.getsource(cls.forward)
    except (OSError, TypeError):
        return True
    return "dropout" in src.lower() or "layerdrop" in src.lower()


@functools.cache
def _warn_no_checkpointing(name: str) -> None:
    print(
        f"warning: {name} applies dropout in its own forward: no gradient checkpointing in "
        "the M-GRPO update (dropout stays off; activations of every layer are kept)",
        file=sys.stderr,
    )


def prefill_metrics(
    before: tuple[int, int] | None, after: tuple[int, int] | None, dist: Any
) -> dict[str, float]:
    """``rollout/prefill_computed_frac``: the step's prompt tokens run through the model over
    those its turns requested, over every process (below 1: shared prefixes, duplicate prompts
    and the prefix cache served the rest). Empty when the engine does not count them."""
    if before is None or after is None:
        return {}
    computed, requested = dist.all_reduce_sum([after[0] - before[0], after[1] - before[1]])
    return {"rollout/prefill_computed_frac": computed / requested} if requested else {}


def generation_engine(cfg: Config, model: Any, tokenizer: Any, source: str | None = None) -> Any:
    """The engine M-GRPO samples with (``train.generation_engine``).

    'hf': an ``HFEngine`` over the trainer's very model object (no copy, no transfer); when
    the trainer's model is sharded (``train.sharding: fsdp``), over a full copy of it loaded
    from ``source``, which the trainer refreshes after every update (``WeightSync``).
    'vllm': a ``VLLMEngine`` on the GPU built from ``model.name``'s files; the trainer pushes
    its own weights into it before the first rollout and after every update.

    Args:
        cfg: the run's config.
        model: the trainer's policy.
        tokenizer: its tokenizer.
        source: the model folder / name the policy was loaded from (default ``model.name``);
            only read for a copy of a sharded model.

    Raises:
        VLLMUnavailableError: 'vllm' without vLLM installed (CUDA GPUs only).
    """
    if cfg.train.generation_engine == "vllm":
        # heavy: webagent_r1.policy.vllm loads only when this runs
        from webagent_r1.policy.vllm import VLLMEngine

        return VLLMEngine(
            cfg.model.name,
            cfg.vllm,
            seed=cfg.seed,
            token_budget=cfg.train.token_budget,
        )
    # heavy: webagent_r1.policy.hf loads only when this runs
    from webagent_r1.policy.hf import HFEngine, load_model

    if is_sharded(model):  # a shard cannot sample: a full copy (weights pushed after updates)
        copy_cfg = dataclasses.replace(
            cfg.model, name=source or cfg.model.name, dtype=frozen_copy_dtype(cfg.model)
        )
        sampler = load_model(copy_cfg).requires_grad_(False)
    else:
        sampler = unwrap_model(model)
    return HFEngine(
        sampler,
        tokenizer,
        autocast_enabled(cfg.model, next(sampler.parameters()).device),
        max_batch_size=cfg.rollout.max_batch_size,
        batch_wait_ms=cfg.rollout.batch_wait_ms,
        batch_wait_fraction=cfg.rollout.batch_wait_fraction,
        prefix_cache_mb=cfg.rollout.prefix_cache_mb if cfg.rollout.prefix_cache else 0.0,
    )


@dataclass
class RLResult:
    """What an M-GRPO run produced."""

    checkpoint: Path
    steps: int
    eval_history: list[dict[str, float]]
    """``eval/…`` metrics of every evaluation, with ``step``."""
    wall_s: float
    """This process's time."""
    stage_s: float
    """The stage's time over all its runs, as ``rl.time_budget_min`` counts it: each earlier
    run's time up to its last checkpoint (work after it is redone, so counted once) and this
    run's, the final evaluation included."""


async def train_rl(
    cfg: Config,
    resume: bool = False,
    stage_dir: str | Path | None = None,
    init: str | None = None,
    progress: bool = True,
) -> RLResult:
    """M-GRPO on the training split of the run's task source (``tasks.source``: the embedded
    suite by default, or MiniWoB++ training seeds), evaluating on a fixed subset of
    ``rl.eval_split``.

    Args:
        cfg: the run's config.
        resume: continue from the newest complete checkpoint of the stage folder.
        stage_dir: checkpoints, metrics and rollouts (default ``<run_dir>/rl``).
        init: model folder to start from (e.g. the BC checkpoint's ``model/``); default
            ``cfg.init_from`` or ``cfg.model.name``. It is also the KL reference.
        progress: progress bars.

    Returns:
        Final checkpoint, evaluation history and wall time.
    """
    return await RLStage(cfg, resume, stage_dir, init, progress).run()


def bc_term_samples(cfg: Config) -> list[Sample]:
    """The demonstration turns of ``rl.bc_coef``'s term: BC's training share of ``bc.data``
    (its successful demonstrations, the held-out ones left out as BC leaves them)."""
    path = Path(cfg.bc.data)
    if not path.is_file():
        raise FileNotFoundError(
            f"rl.bc_coef > 0 needs demonstrations: {path} not found "
            "(make them with `webagent-r1 demos`, or set bc.data)"
        )
    train, _ = split_demos(successful_demos(path), cfg.bc.heldout_fraction, cfg.seed)
    samples = [s for t in train for s in turn_samples(t)]
    if not samples:
        raise ConfigError(
            f"rl.bc_coef > 0: bc.heldout_fraction={cfg.bc.heldout_fraction:g} holds out every "
            f"demonstration of {path}; lower it"
        )
    return samples


class RLStage(Stage):
    """The M-GRPO stage (``train_rl``): a step rolls out groups in browsers and updates on
    them; the evaluation on the fixed subset of ``rl.eval_split`` is logged as a row of its
    own.

    The stage trains with ``cfg.rl_train()`` as its ``train`` section (M-GRPO may train other
    layers than BC). Its time budget (``rl.time_budget_min``) counts the stage's wall time over
    resumes (``prior_s``) and keeps room for one more step and the longest evaluation.
    """

    def __init__(
        self,
        cfg: Config,
        resume: bool = False,
        stage_dir: str | Path | None = None,
        init: str | None = None,
        progress: bool = True,
    ) -> None:
        cfg = dataclasses.replace(cfg, train=cfg.rl_train())  # M-GRPO may train other layers
        super().__init__(cfg, cfg.rl, "rl", resume, stage_dir, progress)
        # π_old: 'auto' (or 'sampler', checked) resolved for the sampler's precision on this
        # process's device (set by Dist.init); every process recomputes if one does (the
        # forwards are collective)
        recompute = self.dist.all_reduce_max(int(resolve_old_logprobs(cfg) == "recompute"))
        old = "recompute" if recompute else "sampler"
        if old != cfg.rl.old_logprobs and self.dist.main:
            print(f"rl.old_logprobs={cfg.rl.old_logprobs}: {old}", file=sys.stderr)
        self.cfg = cfg = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, old_logprobs=old))
        self.section = cfg.rl
        self.start_from = init or cfg.init_from
        self.history: list[dict[str, float]] = []
        # Time budget bookkeeping (survives resume): stage wall time so far, longest evaluation.
        self.prior_s = 0.0
        self.eval_s = 0.0
        self.clock_t0 = time.time()
        self.step_times: list[float] = []
        self.update_times: list[float] = []
        self.curriculum: Curriculum | None = None
        self.bc_samples: list[Sample] = []  # the BC term's demonstration turns (rl.bc_coef)
        self.bc_step: list[Sample] = []  # this process's BC turns of the last update (FLOPs)

    async def setup(self) -> None:
        """The BC term's demonstrations, policy, optimizer, resume point, KL reference,
        engine, logger, tasks and envs."""
        cfg, rl = self.cfg, self.cfg.rl
        # a missing demonstration file fails before the policy loads
        self.bc_samples = bc_term_samples(cfg) if rl.bc_coef > 0 else []
        self.find_resume_point()
        self.policy_from = str(self.ckpt / "model") if self.ckpt else self.start_from
        self.build_policy(self.policy_from, rl.lr)
        self.clock_t0 = time.time()
        self.restore()
        # the KL reference: the LoRA policy with adapters disabled, or a frozen (bf16 on GPU) copy
        # sharded policy: the reference sharded alike (fsdp_load), read by rank 0 only
        self.ref_model = (
            None
            if rl.beta <= 0
            else load_sharded_reference(cfg, self.start_from, self.bf16)
            if is_sharded(self.model)
            else load_reference(cfg, self.start_from, self.model)
        )
        self.engine = generation_engine(cfg, self.model, self.tokenizer, self.policy_from)
        # Each process pushes to its own engine (in-process vLLM, or the HF copy of a sharded
        # model); a shared HF engine only has its version set. A copy starts from the model's
        # files: give it the trainer's weights.
        self.sync = WeightSync(
            self.engine,
            self.model,
            rank=self.dist.rank,
            every_rank=True,
            version=self.start,
            say=print_note if self.dist.main else None,  # the push path, when it changes
        )
        self.open_logger()
        await self.open_tasks()

    def restore(self) -> None:
        """Also the evaluation history and the time budget's clock."""
        super().restore()
        if self.ckpt is not None:
            state = self.resumed
            self.history = list(state.get("eval_history", []))
            self.prior_s = float(state.get("wall_s", 0.0))
            self.eval_s = float(state.get("eval_s", 0.0))

    async def open_tasks(self) -> None:
        """The task source, the curriculum (resumed), the evaluation subset, the env pool."""
        cfg, rl = self.cfg, self.cfg.rl
        self.source = source = task_source(cfg)  # tasks.source: the embedded suite, MiniWoB++ …
        train_tasks = source.tasks("train")
        self.curriculum = Curriculum.from_config(train_tasks, rl, cfg.seed)
        saved_curriculum = self.resumed.get("curriculum")  # absent in older runs' checkpoints
        if saved_curriculum is not None:
            self.curriculum.load_state_dict(saved_curriculum)
        test = source.tasks(rl.eval_split)  # 'val' unless the config fixed 'test'
        self.eval_tasks = eval_subset(test, rl.eval_tasks, cfg.seed)
        # a resumed run evaluates the tasks it started with (the main process reads them),
        # unless rl.eval_tasks changed their number
        ids = _started_subset(self.stage / "eval", test) if self.start and self.dist.main else None
        ids = self.dist.broadcast_object(ids)
        now = [str(t.task_id) for t in self.eval_tasks]
        if ids is not None and len(ids) == len(now) and ids != now:
            by_id = {str(t.task_id): t for t in test}
            self.eval_tasks = [by_id[i] for i in ids]
            if self.dist.main:
                print(
                    f"note: the run's evaluations go on with the {len(ids)} tasks it "
                    "started with (rl/eval/), not the subset this version picks",
                    flush=True,
                )
        local = cfg.rollout.env_pool == "local"
        backend = source.start() if local else None  # Ray workers start their own sites
        self.browser = await Browser.launch(cfg.browser) if local else None
        self.pool = make_env_pool(
            cfg,
            cfg.rollout.max_concurrent_episodes,
            browser=self.browser,
            backend=backend,
            evaluator=source.evaluator,
            count_tokens=self.count_tokens,
            tokenizer_name=self.start_from,
        )
        # Greedy, or k samples per task with the run's seed: every evaluation draws alike, so
        # the first and the last differ by the policy only (paired, common random numbers).
        sampled = rl.eval_samples > 1
        self.eval_params = SamplingParams(
            temperature=rl.eval_temperature if sampled else 0.0,
            top_p=cfg.rollout.top_p if sampled else 1.0,
            max_new_tokens=cfg.rollout.max_new_tokens,
            seed=cfg.seed if sampled else None,
        )

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the policy's tokenizer (no special tokens)."""
        return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def over_budget(self, done: int) -> bool:
        """Would one more step and the final evaluation overrun ``rl.time_budget_min``? (Said
        on the main process when they would.)"""
        rl = self.cfg.rl
        if not rl.time_budget_min or not self.step_times:
            return False
        used = self.prior_s + time.time() - self.clock_t0
        recent = self.step_times[-3:]
        need = 1.1 * sum(recent) / len(recent) + self.eval_s
        stop = bool(self.dist.broadcast_object(used + need > rl.time_budget_min * 60))
        if stop and self.dist.main:
            print(
                f"time budget ({rl.time_budget_min:g} min): stopping after step {done} "
                f"of {rl.steps}",
                flush=True,
            )
        return stop

    def round_fits(self, s0: float, rounds: int) -> bool:
        """May the step starting at ``s0`` roll out one more round? Not when a round (the mean
        of this step's ``rounds``), an update (the recent mean; a round's time before this
        process has timed one) and the final evaluation would overrun ``rl.time_budget_min``
        (the same answer on every process)."""
        rl = self.cfg.rl
        if not rl.time_budget_min:
            return True
        now = time.time()
        used = self.prior_s + now - self.clock_t0
        per_round = (now - s0) / max(rounds, 1)
        recent = self.update_times[-3:]
        update = sum(recent) / len(recent) if recent else per_round
        need = 1.1 * (per_round + update) + self.eval_s
        fits = bool(self.dist.broadcast_object(used + need <= rl.time_budget_min * 60))
        if not fits and self.dist.main:
            print(
                f"time budget ({rl.time_budget_min:g} min): no further round this step",
                flush=True,
            )
        return fits

    def wall(self) -> dict[str, float]:
        """The stage's wall time over resumes and its longest evaluation (checkpointed)."""
        return {"wall_s": self.prior_s + time.time() - self.clock_t0, "eval_s": self.eval_s}

    async def begin(self) -> None:
        """A copy engine gets the trainer's weights; a fresh run evaluates its start."""
        if not self.sync.shared:
            self.log(self.start, await self.sync.push(self.start))
        if self.start == 0:
            self.log(0, await self.evaluate(0))

    async def evaluate(self, step: int) -> dict[str, float]:
        """The policy on the evaluation subset (each process its share), merged over processes;
        kept in the history, its episodes written to ``eval/step-<step>.jsonl``."""
        cfg, rl, dist = self.cfg, self.cfg.rl, self.dist
        e0 = time.time()
        self.model.eval()
        mine = self.eval_tasks[dist.rank :: dist.world]
        report = await evaluate_policy(
            self.engine,
            self.tokenizer,
            mine,
            self.pool,
            cfg.agent,
            self.eval_params,
            cfg.rollout.max_env_retries,
            self.progress and dist.main,
            samples=rl.eval_samples,
        )
        self.model.train()
        m = report.metrics()
        if dist.world > 1:  # combine the shares: success counts per site
            m = _merge_eval(report, dist)
        if rl.eval_samples > 1:
            m.update(_merge_pass_at_k(report, dist, rl.eval_samples))
        self.history.append({"step": step, **m})
        # every process's episodes (each process evaluated tasks rank, rank + world, …)
        shares = dist.gather_object(report.trajectories)
        if shares is not None:
            trajs = interleave_shares(shares, rl.eval_samples)
            write_trajectories(trajs, self.stage / "eval" / f"step-{step:06d}.jsonl")
        self.eval_s = max(self.eval_s, time.time() - e0)
        return m

    async def collect_round(
        self, mine: list[Task], rnd: int, step: int, stats: RolloutStats
    ) -> list[Group]:
        """Groups of ``mine`` in round ``rnd`` of ``step`` (``collect_step``'s rounds)."""
        cfg = self.cfg
        # round 0 keeps the seed of runs before the curriculum; extra rounds get others
        seed = cfg.seed * 7919 + step * 104729 + self.dist.rank + rnd * 15485863
        sp = SamplingParams(
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            max_new_tokens=cfg.rollout.max_new_tokens,
            seed=seed % 2**31,
        )
        return await collect(
            mine,
            cfg.rollout.group_size,
            self.engine,
            self.pool,
            self.tokenizer,
            cfg.agent,
            sp,
            max_concurrent_episodes=cfg.rollout.max_concurrent_episodes,
            max_env_retries=cfg.rollout.max_env_retries,
            progress=self.progress and self.dist.main,
            mode=cfg.rollout.mode,
            stats=stats,
        )

    def update(self, batch: RLBatch, lock: Any, step: int) -> dict[str, float]:
        """``mgrpo_update`` on ``batch`` (with step ``step``'s demonstration turns when
        ``rl.bc_coef`` > 0), then the update's activations freed."""
        bc = None
        if self.bc_samples:
            rl, dist = self.cfg.rl, self.dist
            idx = batch_indices(step, rl.bc_batch_size, len(self.bc_samples), self.cfg.seed)
            bc = [self.bc_samples[i] for i in idx[dist.rank :: dist.world]]
        self.bc_step = bc or []
        out = mgrpo_update(
            self.model,
            self.opt,
            batch,
            self.cfg,
            self.pad_id,
            self.dist,
            self.ref_model,
            lock,
            bc_samples=bc,
        )
        release_free_memory()  # the update's activations, before the next rollout
        return out

    async def step(self, step: int) -> dict[str, float]:
        """Roll out the step's groups, build the batch, update, push the new weights."""
        rl, dist = self.cfg.rl, self.dist
        s0 = time.time()
        stats = RolloutStats()
        prefill0 = prefill_counts(self.engine)
        self.model.eval()
        assert self.curriculum is not None
        # every round's outcomes go into the curriculum's estimates (all processes alike);
        # rl.pg_coef=0 (the control): no rollout, its update is the BC term's alone
        collected = StepGroups()
        if rl.pg_coef > 0:
            collected = await collect_step(
                self.curriculum,
                step,
                rl.tasks_per_step,
                functools.partial(self.collect_round, step=step, stats=stats),
                dist.all_reduce_sum,
                dist.rank,
                dist.world,
                rewards_of=functools.partial(trained_rewards, require_exit=rl.reward_requires_exit),
                may_extend=functools.partial(self.round_fits, s0),
            )
        groups = collected.groups
        self.model.train()
        gen_s = time.time() - s0
        trajs = [t for g in groups for t in g.trajectories]
        rollouts = self.stage / "rollouts" / f"step-{step:06d}-rank{dist.rank}.jsonl"
        write_trajectories(trajs, rollouts)
        batch = build_rl_batch(
            groups,
            rl.advantage_scale,
            rl.drop_equal_groups,
            version=self.sync.version,
            max_staleness=rl.max_staleness,
            advantage=rl.advantage,
            step_weight=rl.step_weight,
            step_gamma=rl.step_gamma,
            require_exit=rl.reward_requires_exit,
        )  # stale turns dropped here; refused below on every process alike
        refuse_stale_turns(batch, rl, self.sync.version, dist)
        # the rollout's KV caches (the HF engine's prefix cache included: the update changes
        # the weights, so it would be dropped anyway), before the update's activations
        clear = getattr(self.engine, "clear_prefix_cache", None)
        if clear is not None:
            clear()
        release_free_memory()
        u0 = time.time()
        lock = self.engine.lock
        update = functools.partial(self.update, batch, lock, step)
        # a sleeping engine (vLLM) frees its GPU memory for the update and takes it back
        metrics = await update_then_push(self.engine, self.sync, self.opt, update, step + 1)
        update_s = time.time() - u0
        self.update_times.append(update_s)
        metrics.update(self.step_metrics(stats, batch, collected, trajs, gen_s, update_s, s0))
        if rl.pg_coef > 0:
            metrics.update(prefill_metrics(prefill0, prefill_counts(self.engine), dist))
        self.step_times.append(time.time() - s0)
        return metrics

    def step_metrics(
        self,
        stats: RolloutStats,
        batch: RLBatch,
        collected: StepGroups,
        trajs: list[Trajectory],
        gen_s: float,
        update_s: float,
        s0: float,
    ) -> dict[str, float]:
        """The step's rollout, batch and curriculum counts over all processes, and timings."""
        rl, opt, flops = self.cfg.rl, self.opt, self.flops
        counts = self.dist.all_reduce_sum(
            [
                stats.episodes - stats.dropped,
                stats.successes,
                batch.groups_used,
                batch.groups_equal,
                batch.groups_small,
                stats.env_errors,
                batch.turns_stale,
                batch.step_group_turns,
                len(batch.samples),
                *turns_by_outcome(trajs),
            ]
        )
        valid, succ, used, equal, small, errs, stale, grouped, trained = counts[:9]
        assert self.curriculum is not None
        metrics = {
            "rollout/success": succ / valid if valid else 0.0,
            # mean turns of the scored episodes, of successes and of failures (env-error
            # attempts and their turns left out; a key absent without any such episode)
            **turns_by_outcome_metrics(counts[9:]),
            "rollout/env_errors": errs,
            "rollout/tokens_per_s": stats.tokens / max(gen_s, 1e-9),
            "rollout/wall_s": gen_s,
            "train/groups_used": used,
            "train/groups_skipped_equal": equal,
            "train/groups_skipped_small": small,
            "train/turns_dropped_stale": stale,
            "train/lr": opt.param_groups[0]["lr"],
            "train/update_s": update_s,
            "train/step_s": time.time() - s0,
            # groups with mixed rewards among all collected; collected but not trained on
            "curriculum/mixed_frac": collected.mixed / max(collected.total, 1),
            "curriculum/discarded": collected.total - used,
            "curriculum/extra_groups": collected.extra,
            "curriculum/rounds": collected.rounds,
            **self.curriculum.metrics(),
            **self.memory.metrics(),
            # this process's achieved model FLOP/s and its fraction of the peak
            **flops.metrics("rollout", flops.rollout(trajs), gen_s),
            # the BC term (rl.bc_coef): one training pass over its turns per policy iteration
            **flops.metrics(
                "train", flops.update(batch, rl) + rl.mu * flops.samples(self.bc_step), update_s
            ),
        }
        if rl.advantage == "gigpo":  # turns whose state recurs in their group
            metrics["train/step_group_turns"] = grouped
            metrics["train/step_group_frac"] = grouped / trained if trained else 0.0
        if rl.pg_coef == 0:  # no rollout ran: no rollout or curriculum figure to log
            metrics = {k: v for k, v in metrics.items() if not k.startswith(("rollout", "curr"))}
            metrics["rollout/skipped"] = 1.0
        return metrics

    def report(self, done: int, metrics: dict[str, float]) -> None:
        """One line per step (main process, with ``progress``)."""
        if not (self.progress and self.dist.main):
            return
        used = metrics["train/groups_used"]
        collected = used + metrics["train/groups_skipped_equal"]
        collected += metrics["train/groups_skipped_small"]
        rounds = int(metrics.get("curriculum/rounds", 1))
        head = (
            "no rollout (rl.pg_coef=0), BC term alone"
            if "rollout/skipped" in metrics
            else f"rollout success {metrics['rollout/success']:.2f}, "
            f"groups used {int(used)}/{int(collected)}"
            + (f" ({rounds} rounds)" if rounds > 1 else "")
        )
        print(
            f"step {done}/{self.cfg.rl.steps}: {head}"
            + f", loss {metrics.get('train/loss', 0.0):+.4f}, "
            f"clip {metrics.get('train/clip_frac', 0.0):.3f}, "
            f"{metrics['train/step_s']:.0f} s",
            flush=True,
        )

    def trainer_state(self, step: int) -> dict[str, Any]:
        """Also the evaluation history, the clock and the curriculum's state."""
        return _trainer_state(step, self.history, self.wall(), self.curriculum)

    async def close(self) -> None:
        """The env pool, the browser, the task source's sites, the engine, the logger."""
        await self.pool.close()
        if self.browser is not None:
            await self.browser.close()
        self.source.stop()
        res = self.engine.close()
        if inspect.isawaitable(res):
            await res
        await super().close()

    def result(self, final: Path) -> RLResult:
        """The final checkpoint, its step, the evaluation history (also written to
        ``eval_history.json``), this process's time and the stage's time over resumes."""
        if self.dist.main:
            (self.stage / "eval_history.json").write_text(json.dumps(self.history, indent=1))
        steps_done = int(json.loads((final / "meta.json").read_text())["step"])
        stage_s = self.wall()["wall_s"]
        return RLResult(final, steps_done, self.history, time.time() - self.t0, stage_s)


def _trainer_state(
    step: int,
    history: list[dict[str, float]],
    wall: dict[str, float] | None = None,
    curriculum: Curriculum | None = None,
) -> dict[str, Any]:
    """What an M-GRPO checkpoint records besides weights and optimizer: step, random
    generators, evaluation history, clock, and the curriculum's success estimates and
    instance use (so a resumed run draws alike)."""
    state: dict[str, Any] = {"step": step, "rng": rng_state(), "eval_history": history}
    state.update(wall or {})
    if curriculum is not None:
        state["curriculum"] = curriculum.state_dict()
    return state


def _merge_pass_at_k(report: Any, dist: Dist, k: int) -> dict[str, float]:
    """Unbiased pass@k (``stats.pass_at_k``) over every rank's tasks (each rank holds whole
    tasks, all k episodes), and how many tasks had no scored episode (all env errors: left
    out of the mean, counted here)."""
    per_task: dict[str, list[int]] = {}
    for task, tr in zip(report.tasks, report.trajectories, strict=True):
        outs = per_task.setdefault(str(task.task_id), [])
        if tr.status != "env_error":
            outs.append(int(tr.reward == 1.0))
    mean, _, unscored = pass_at_k(per_task, k)
    scored = len(per_task) - len(unscored)
    total, n, n_unscored = dist.all_reduce_sum([mean * scored, scored, len(unscored)])
    return {f"eval/pass_at_{k}": total / n if n else 0.0, "eval/unscored_tasks": n_unscored}


def _started_subset(eval_dir: Path, test: list[Task]) -> list[str] | None:
    """The task ids of a resumed run's first evaluation file, in its order, so that every
    evaluation of a run is on the same tasks even when ``eval_subset`` picks others since;
    None without a readable file or when one of its tasks is not in ``test``."""
    files = sorted(eval_dir.glob("step-*.jsonl"))
    if not files:
        return None
    try:
        ids = list(dict.fromkeys(str(t.task_id) for t in read_trajectories(files[0])))
    except (OSError, ValueError):  # a malformed file is a TrajectoryFileError (ValueError)
        return None
    known = {str(t.task_id) for t in test}
    return ids if ids and all(i in known for i in ids) else None


def interleave_shares(shares: list[list[Trajectory]], samples: int) -> list[Trajectory]:
    """The episodes of tasks dealt round-robin to processes, back in the tasks' order.

    Args:
        shares: each process's episodes in rank order; process ``r`` ran the tasks
            ``r, r + world, …`` of the list, ``samples`` episodes each, a task's together.
        samples: episodes per task.

    Returns:
        Every episode, task ``j * world + r`` (process ``r``'s ``j``-th) in place ``j * world
        + r``, each task's episodes in their order.
    """
    chunks = [[s[i : i + samples] for i in range(0, len(s), samples)] for s in shares]
    rounds = max((len(c) for c in chunks), default=0)
    return [tr for j in range(rounds) for c in chunks if j < len(c) for tr in c[j]]


def _merge_eval(report: Any, dist: Dist) -> dict[str, float]:
    by = report.by("site")
    # every process's sites: one whose tasks all fell to another process is still a column
    all_sites = sorted(set().union(*dist.all_gather_object(sorted(by))))
    vals = []
    for s in all_sites:
        ok, n = by.get(s, (0, 0))
        vals += [ok, n]
    scored = [tr for tr in report.trajectories if tr.status != "env_error"]
    own = [sum(tr.reward for tr in scored), len(scored), sum(len(tr.turns) for tr in scored)]
    tot = dist.all_reduce_sum([*own, report.env_errors, *vals])
    ok, n, turns, errors = tot[:4]
    m = {
        "eval/success": ok / n if n else 0.0,
        "eval/episodes": n,
        "eval/env_errors": errors,
        "eval/turns": turns / n if n else 0.0,
    }
    for i, s in enumerate(all_sites):
        so, sn = tot[4 + 2 * i], tot[5 + 2 * i]
        m[f"eval/success/{s}"] = so / sn if sn else 0.0
    return m
