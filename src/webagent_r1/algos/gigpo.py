"""GiGPO: step-level credit inside M-GRPO's groups (pure math, no tensors of the model).

Group-in-Group Policy Optimization (Feng et al., 2025, arXiv 2505.10978) keeps GRPO's
episode-level advantage and adds a step-level one. The G episodes of one group run the same
task instance, so they often pass through the same page in the same state (an *anchor
state*). Turns that acted from one anchor state form a *step group*; their discounted
returns are compared with each other, which tells which action taken from that page led to
success sooner:

    R_it = γ^(T_i − 1 − t) · r_i                  (terminal reward r_i, T_i turns, t = 0..T_i−1)
    A^S_it = (R_it − mean_S(R)) / (std_S(R) + eps) (over the step group S of turn t of episode i)
    A_it = A^E_i + ω · A^S_it                      (A^E_i: ``group_advantages`` of the rewards)

A step group of one turn, or of equal returns, gives A^S = 0, so a group in which no state
recurs trains exactly as episode-level M-GRPO. Turns are keyed by ``Turn.state_key`` (a
hash of the observation the turn's prompt showed, recorded by the rollout); a turn without
a key (trajectories written before keys were recorded) is a step group of its own.

The std is the population std (``unbiased=False``), as in ``mgrpo.group_advantages``, and
``eps`` is added to it the same way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from webagent_r1.algos.mgrpo import group_advantages

__all__ = [
    "ADVANTAGES",
    "StepCredit",
    "discounted_returns",
    "gigpo_advantages",
    "step_advantages",
    "step_groups",
]

ADVANTAGES = ("episode", "gigpo")
"""Advantage estimators of M-GRPO by name (``rl.advantage``)."""

TurnRef = tuple[int, int]
"""(trajectory index within the group, turn index within the trajectory)."""


def discounted_returns(reward: float, n_turns: int, gamma: float) -> list[float]:
    """Discounted return of each turn of one trajectory whose only reward comes at its end.

    Args:
        reward: the trajectory's terminal reward r.
        n_turns: its number of turns T.
        gamma: discount γ in (0, 1].

    Returns:
        ``[γ^(T-1) r, …, γ r, r]``: R_t = γ^(T-1-t) · r for t = 0..T-1.
    """
    return [gamma ** (n_turns - 1 - t) * reward for t in range(n_turns)]


def step_groups(keys: Sequence[Sequence[str | None]]) -> list[list[TurnRef]]:
    """Turns of one group of trajectories that share an anchor state.

    Args:
        keys: ``keys[i][t]`` is the state key of turn t of trajectory i (None: unknown).

    Returns:
        The step groups, each a list of (trajectory, turn) pairs, in order of first
        appearance; every turn is in exactly one. Turns with equal keys (across and within
        trajectories) share a group; a turn whose key is None is a group of its own.
    """
    by_key: dict[str, list[TurnRef]] = {}
    out: list[list[TurnRef]] = []
    for i, traj_keys in enumerate(keys):
        for t, key in enumerate(traj_keys):
            if key is None:
                out.append([(i, t)])
            elif key in by_key:
                by_key[key].append((i, t))
            else:
                by_key[key] = [(i, t)]
                out.append(by_key[key])
    return out


def step_advantages(
    returns: Sequence[Sequence[float]],
    groups: Sequence[Sequence[TurnRef]],
    scale: str = "std",
    eps: float = 1e-4,
) -> list[list[float]]:
    """Step-level advantage of every turn: its return normalised within its step group.

    Args:
        returns: ``returns[i][t]``, the discounted return of turn t of trajectory i.
        groups: the step groups (``step_groups``); they must cover every turn.
        scale: 'std' gives (R − mean) / (std + eps), std the population std of the step
            group (as ``group_advantages``); 'none' gives R − mean.
        eps: added to the std.

    Returns:
        ``adv[i][t]``, shaped like ``returns``; 0 for a step group of one turn or of equal
        returns.
    """
    if scale not in ("std", "none"):
        raise ValueError(f"advantage scale must be 'std' or 'none', got {scale!r}")
    adv = [[0.0] * len(r) for r in returns]
    for group in groups:
        values = [returns[i][t] for i, t in group]
        if len(values) < 2 or all(v == values[0] for v in values):
            continue  # nothing to compare: 0 (exactly, not a rounding residue)
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        div = std + eps if scale == "std" else 1.0
        for (i, t), v in zip(group, values, strict=True):
            adv[i][t] = (v - mean) / div
    return adv


@dataclass
class StepCredit:
    """GiGPO's advantages of one group of trajectories."""

    advantages: list[list[float]]
    """``advantages[i][t]``: A^E_i + ω · A^S_it of turn t of trajectory i."""
    episode: list[float]
    """A^E_i: the episode-level advantage of each trajectory (``group_advantages``)."""
    step: list[list[float]]
    """A^S_it: the step-level advantage of each turn."""
    grouped: list[list[bool]]
    """Whether each turn is in a step group of more than one turn (shares its state)."""

    @property
    def grouped_turns(self) -> int:
        """Turns in step groups of more than one turn."""
        return sum(map(sum, self.grouped))


def gigpo_advantages(
    rewards: Sequence[float],
    keys: Sequence[Sequence[str | None]],
    scale: str = "std",
    step_weight: float = 1.0,
    gamma: float = 0.95,
    eps: float = 1e-4,
) -> StepCredit:
    """Per-turn advantages of one group: episode advantage plus ω times step advantage.

    Args:
        rewards: (G,) terminal rewards of the group's trajectories.
        keys: ``keys[i][t]``, the state key of turn t of trajectory i (``Turn.state_key``).
        scale: 'std' or 'none', for both levels (see ``group_advantages``).
        step_weight: ω, the weight of the step-level advantage (0: episode-level only).
        gamma: γ, the discount of the step-level returns.
        eps: added to each std.

    Returns:
        The advantages, both levels, and which turns share their state with another.
    """
    if len(rewards) != len(keys):
        raise ValueError(f"{len(rewards)} rewards for {len(keys)} trajectories' keys")
    episode = [float(a) for a in group_advantages(torch.tensor(list(rewards)), scale, eps)]
    returns = [discounted_returns(r, len(k), gamma) for r, k in zip(rewards, keys, strict=True)]
    groups = step_groups(keys)
    step = step_advantages(returns, groups, scale, eps)
    grouped = [[False] * len(k) for k in keys]
    for group in groups:
        if len(group) > 1:
            for i, t in group:
                grouped[i][t] = True
    advantages = [[episode[i] + step_weight * a for a in step[i]] for i in range(len(keys))]
    return StepCredit(advantages, episode, step, grouped)
