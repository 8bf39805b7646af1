"""Behaviour cloning (SFT) loss on completion tokens only (pure tensor math).

The BC warm-up of WebAgent-R1 (Wei et al., 2025, Sec. 3.1) maximises the likelihood of the
expert's responses given the prompts the policy will see. Prompt and observation tokens are
context only: they are attended to but carry no loss.

    L_BC = −Σ_t w_t · log π_θ(a_t | context_t)

with one weight per completion token (``token_weights``): ``"token"`` makes every completion
token of the batch weigh the same (1 / N), ``"sample"`` averages within each turn first
(1 / (S · |a_s|)), so long responses do not dominate.

All tensors here are flat over the completion tokens of a batch: shape (N,).
"""

from __future__ import annotations

import torch

__all__ = ["BC_WEIGHTINGS", "bc_loss", "token_weights"]

BC_WEIGHTINGS = ("token", "sample")


def token_weights(sample: torch.Tensor, mode: str = "token") -> torch.Tensor:
    """Per-token weights of the BC loss.

    Args:
        sample: (N,) index of the turn sample each completion token belongs to.
        mode: "token" (1/N each) or "sample" (1/(S·|a_s|): each turn weighs the same).

    Returns:
        (N,) weights summing to 1 (0 tokens: an empty tensor).
    """
    n = sample.numel()
    if n == 0:
        return torch.zeros(0)
    if mode == "token":
        return torch.full((n,), 1.0 / n)
    if mode != "sample":
        raise ValueError(f"BC weighting must be one of {BC_WEIGHTINGS}, got {mode!r}")
    _, inv, counts = torch.unique(sample, return_inverse=True, return_counts=True)
    n_samples = counts.numel()
    return 1.0 / (n_samples * counts[inv].float())  # (N,)


def bc_loss(logp: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted negative log-likelihood of the completion tokens.

    Args:
        logp: (N,) log π_θ of each expert completion token (requires grad).
        weights: (N,) per-token weights (``token_weights``).

    Returns:
        The scalar loss.
    """
    return -(weights * logp).sum()
