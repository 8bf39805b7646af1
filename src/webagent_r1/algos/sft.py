"""Behaviour cloning (SFT) loss on completion tokens only (pure tensor math).

The BC warm-up of WebAgent-R1 (Wei et al., 2025, Sec. 3.1) maximises the likelihood of the
expert's responses given the prompts the policy will see. Prompt and observation tokens are
context only: they are attended to but carry no loss.

    L_BC = −Σ_t w_t · log π_θ(a_t | context_t)

with one weight per completion token. The trainer (``train/bc.py``) gives every completion
token of a batch the same weight 1 / N, N the batch's completion tokens over all processes,
so the loss is the token-mean negative log-likelihood.

All tensors here are flat over the completion tokens of a batch: shape (N,).
"""

from __future__ import annotations

import torch

__all__ = ["bc_loss"]


def bc_loss(logp: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Weighted negative log-likelihood of the completion tokens.

    Args:
        logp: (N,) log π_θ of each expert completion token (requires grad).
        weights: (N,) per-token weights (1 / N for the token mean).

    Returns:
        The scalar loss.
    """
    return -(weights * logp).sum()
