"""M-GRPO: group-relative policy optimisation over multi-turn episodes (pure tensor math).

WebAgent-R1 (Wei et al., 2025, arXiv 2505.16421, Sec. 3) extends GRPO to episodes of many
turns. For one task, G trajectories are rolled out; trajectory i has reward r_i in {0, 1}
and turns j = 1..|τ_i|, turn j has completion tokens a_ij. Then

    A_i = (r_i − mean(r)) / (std(r) + eps)                          (group advantage)
    ρ_ijt = π_θ(a_ijt | s_ij, a_ij,<t) / π_old(a_ijt | s_ij, a_ij,<t)
    L = −(1/G) Σ_i (1/|τ_i|) Σ_j (1/|a_ij|) Σ_t [min(ρ A_i, clip(ρ, 1−ε, 1+ε) A_i) − β KL_ijt]

Every turn of a trajectory shares its advantage (``rl.advantage: gigpo`` adds a step-level
term per turn, ``algos/gigpo.py``; the loss takes any per-token advantage). The sum over
tokens is a weighted sum with one weight per completion token; the paper's normalisation
("mgrpo": per action tokens, per turn, per trajectory) and the alternatives (plain token
mean, Dr.GRPO's constant, "turn_mean": per action tokens, then every turn of the batch alike)
differ only in those weights, so they are selected by name from ``NORMALIZERS``.
"turn_mean" replaces the paper's 1/G · 1/|τ_i| by 1/T, T = Σ_i |τ_i| the turns of the batch:

    L = −(1/T) Σ_i Σ_j (1/|a_ij|) Σ_t [min(ρ A_i, clip(ρ, 1−ε, 1+ε) A_i) − β KL_ijt]

so a turn of a long episode weighs as much as a turn of a short one (with "mgrpo" it weighs
1/|τ_i| of its trajectory's share).

Every weight is a function of counts over the whole batch (of all training processes, passed
as ``n_traj``, ``n_tokens``, ``n_turns``), computed once before the batch is split into
micro-batches, so the loss summed over micro-batches and processes is the same however the
batch is split.

All tensors here are flat over the completion tokens of a packed batch: shape (N,).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch


def group_advantages(rewards: torch.Tensor, scale: str = "std", eps: float = 1e-4) -> torch.Tensor:
    """Group-relative advantages of one group.

    Args:
        rewards: (G,) rewards of the group's trajectories.
        scale: "std" divides by the group's std (GRPO); "none" only centres (Dr.GRPO).
        eps: added to the std so equal rewards give zero, not NaN.

    Returns:
        (G,) advantages; all zero when every reward is equal.
    """
    r = rewards.float()
    centred = r - r.mean()
    if scale == "none":
        return centred
    if scale != "std":
        raise ValueError(f"advantage scale must be 'std' or 'none', got {scale!r}")
    # 1) population std (as GRPO implementations use over the group); 2) eps keeps it finite
    return centred / (r.std(unbiased=False) + eps)


def _turns(traj: torch.Tensor, turn: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's turn among the distinct (trajectory, turn) pairs, and the tokens of each.

    Returns:
        (N,) index of each token's turn in [0, turns), and (turns,) its |a_ij|.
    """
    key = traj * (int(turn.max().item()) + 1 if turn.numel() else 1) + turn  # (N,)
    _, inv, tokens_per_turn = torch.unique(key, return_inverse=True, return_counts=True)
    return inv, tokens_per_turn


def turn_count(traj: torch.Tensor, turn: torch.Tensor) -> int:
    """Distinct turns (trajectory, turn) among the tokens given: what ``weights_turn_mean``
    takes as T when summed over the training processes."""
    return int(_turns(traj, turn)[1].numel())


def weights_mgrpo(traj: torch.Tensor, turn: torch.Tensor, n_traj: int, **_: object) -> torch.Tensor:
    """Paper weights: 1 / (G · |τ_i| · |a_ij|) for each token of turn j of trajectory i.

    Every trajectory weighs 1/G in total, shared by its turns: a turn of a long trajectory
    weighs less than a turn of a short one.

    Args:
        traj: (N,) trajectory index of each token, in [0, n_traj).
        turn: (N,) turn index of each token within its trajectory.
        n_traj: G, the number of trajectories the loss averages over.
    """
    # |a_ij|: tokens per (trajectory, turn); |τ_i|: distinct turns per trajectory
    inv, tokens_per_turn = _turns(traj, turn)
    a_len = tokens_per_turn[inv].float()  # (N,)
    turns_per_traj = torch.zeros(n_traj, dtype=torch.float)
    first = torch.zeros_like(tokens_per_turn, dtype=torch.long)
    first.scatter_(0, inv, traj)  # trajectory of each unique turn
    turns_per_traj.index_add_(0, first, torch.ones_like(first, dtype=torch.float))
    tau_len = turns_per_traj[traj]  # (N,)
    return 1.0 / (n_traj * tau_len * a_len)


def weights_turn_mean(
    traj: torch.Tensor, turn: torch.Tensor, n_traj: int, n_turns: int | None = None, **_: object
) -> torch.Tensor:
    """Every turn of the batch weighs the same: 1 / (T · |a_ij|) for each token of turn j of
    trajectory i, T the turns of the batch.

    Unlike ``weights_mgrpo`` a trajectory's weight grows with its number of turns, so a turn
    of a long episode counts as much as a turn of a short one; within a turn the tokens are
    averaged as in the paper.

    Args:
        traj: (N,) trajectory index of each token.
        turn: (N,) turn index of each token within its trajectory.
        n_traj: unused (the common signature of ``NORMALIZERS``).
        n_turns: T over all training processes (default: the turns given here,
            ``turn_count``).
    """
    inv, tokens_per_turn = _turns(traj, turn)
    a_len = tokens_per_turn[inv].float()  # (N,)
    t = n_turns if n_turns is not None else tokens_per_turn.numel()
    return 1.0 / (max(t, 1) * a_len)


def weights_token_mean(
    traj: torch.Tensor, turn: torch.Tensor, n_traj: int, n_tokens: int | None = None, **_: object
) -> torch.Tensor:
    """Every token weighs the same: 1 / N (long turns and trajectories weigh more).

    ``n_tokens``: N over all training processes (default: the tokens given here).
    """
    n = n_tokens if n_tokens is not None else traj.numel()
    return torch.full((traj.numel(),), 1.0 / max(n, 1))


def weights_dr_grpo(
    traj: torch.Tensor, turn: torch.Tensor, n_traj: int, max_tokens: int = 1024, **_: object
) -> torch.Tensor:
    """Dr.GRPO: a constant 1 / (G · max_tokens), free of length bias."""
    return torch.full((traj.numel(),), 1.0 / (n_traj * max_tokens))


Normalizer = Callable[..., torch.Tensor]
NORMALIZERS: dict[str, Normalizer] = {
    "mgrpo": weights_mgrpo,
    "token_mean": weights_token_mean,
    "dr_grpo": weights_dr_grpo,
    "turn_mean": weights_turn_mean,
}


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(π_θ || π_ref) per token: exp(d) − d − 1, d = ref − new.

    Unbiased, always >= 0, low variance (http://joschu.net/blog/kl-approx.html).
    """
    d = ref_logp - logp  # (N,)
    return torch.exp(d) - d - 1.0


@dataclass
class LossStats:
    """Diagnostics of one loss evaluation (detached floats)."""

    clip_frac: float
    """Fraction of tokens whose ratio was clipped in the direction that matters."""
    kl: float
    """Mean k3 KL to the reference (0 when β = 0)."""
    ratio_mean: float
    """Mean importance ratio π_θ / π_old."""


def mgrpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    weights: torch.Tensor,
    clip_eps: float = 0.2,
    beta: float = 0.0,
    ref_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, LossStats]:
    """The clipped surrogate of M-GRPO as a weighted sum over completion tokens.

    Args:
        logp: (N,) log π_θ of each sampled completion token (requires grad).
        old_logp: (N,) log π_old of the same tokens (sampling policy; no grad).
        advantages: (N,) advantage of each token's turn (its trajectory's, or GiGPO's).
        weights: (N,) normalisation weights from ``NORMALIZERS``.
        clip_eps: ε of the ratio clip.
        beta: KL coefficient; 0 turns KL off (no reference model needed).
        ref_logp: (N,) log π_ref, required when beta > 0.

    Returns:
        The scalar loss to minimise, and diagnostics.
    """
    ratio = torch.exp(logp - old_logp.detach())  # (N,)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    surrogate = torch.minimum(unclipped, clipped)  # (N,) pessimistic bound
    per_token = surrogate
    kl = torch.zeros_like(logp)
    if beta > 0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs ref_logp (log-probs of the reference policy)")
        kl = kl_k3(logp, ref_logp.detach())
        per_token = surrogate - beta * kl
    loss = -(weights * per_token).sum()
    with torch.no_grad():
        was_clipped = (clipped < unclipped).float()  # the min picked the clipped branch
        stats = LossStats(
            clip_frac=float(was_clipped.mean()) if was_clipped.numel() else 0.0,
            kl=float(kl.mean()) if kl.numel() else 0.0,
            ratio_mean=float(ratio.mean()) if ratio.numel() else 1.0,
        )
    return loss, stats
