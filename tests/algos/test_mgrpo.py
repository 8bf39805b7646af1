"""M-GRPO math against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from webagent_r1.algos.mgrpo import (
    NORMALIZERS,
    group_advantages,
    kl_k3,
    mgrpo_loss,
    weights_mgrpo,
)


def test_group_advantages() -> None:
    # rewards [1, 0, 0, 1]: mean 0.5, population std 0.5 -> advantages ±1 (minus eps effect)
    a = group_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), eps=0.0)
    assert torch.allclose(a, torch.tensor([1.0, -1.0, -1.0, 1.0]))
    # equal rewards: zero advantage, not NaN
    assert torch.equal(group_advantages(torch.ones(3)), torch.zeros(3))
    # "none" only centres: [1, 0, 0, 0] -> [0.75, -0.25, -0.25, -0.25]
    a = group_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), scale="none")
    assert torch.allclose(a, torch.tensor([0.75, -0.25, -0.25, -0.25]))
    with pytest.raises(ValueError):
        group_advantages(torch.ones(2), scale="max")


# Two trajectories: traj 0 has turns of 2 and 1 tokens; traj 1 has one turn of 3 tokens.
TRAJ = torch.tensor([0, 0, 0, 1, 1, 1])
TURN = torch.tensor([0, 0, 1, 0, 0, 0])


def test_mgrpo_weights_by_hand() -> None:
    w = weights_mgrpo(TRAJ, TURN, n_traj=2)
    # 1/(G·|τ|·|a|): traj 0 turn 0 -> 1/(2·2·2)=1/8; traj 0 turn 1 -> 1/(2·2·1)=1/4;
    # traj 1 -> 1/(2·1·3)=1/6
    expected = torch.tensor([1 / 8, 1 / 8, 1 / 4, 1 / 6, 1 / 6, 1 / 6])
    assert torch.allclose(w, expected)
    assert math.isclose(float(w.sum()), 1.0)  # each trajectory weighs 1/G in total


def test_the_three_normalisations_differ() -> None:
    # ratio = 1 everywhere, so loss = -Σ w·A; uneven advantages within a trajectory
    # (as after several groups are packed) make the weightings visible.
    logp = torch.zeros(6)
    losses = {}
    adv = torch.tensor([1.0, 1.0, 2.0, -1.0, -1.0, -1.0])
    for name, fn in NORMALIZERS.items():
        w = fn(TRAJ, TURN, 2, max_tokens=4)
        loss, _ = mgrpo_loss(logp, torch.zeros(6), adv, w)
        losses[name] = float(loss)
    # mgrpo: -(1/8 + 1/8 + 2/4 - 1/2) = -0.25
    assert math.isclose(losses["mgrpo"], -0.25, abs_tol=1e-6)
    # token_mean: -(1 + 1 + 2 - 3)/6 = -1/6
    assert math.isclose(losses["token_mean"], -1 / 6, abs_tol=1e-6)
    # dr_grpo: -(1/(2·4))·(1) = -0.125
    assert math.isclose(losses["dr_grpo"], -0.125, abs_tol=1e-6)


def test_clipping_changes_the_gradient() -> None:
    # One token, A = +1, ratio = e^0.5 ≈ 1.65 > 1 + 0.2: the clipped branch is taken,
    # so the gradient w.r.t. logp is zero (the update is stopped).
    logp = torch.tensor([0.5], requires_grad=True)
    loss, stats = mgrpo_loss(logp, torch.zeros(1), torch.ones(1), torch.ones(1), clip_eps=0.2)
    loss.backward()
    assert math.isclose(float(loss), -1.2, rel_tol=1e-6)  # -(clip(1.65) · 1)
    assert float(logp.grad) == 0.0 and stats.clip_frac == 1.0
    # Same ratio but A = -1: min(-1.65, -1.2) = -1.65 is unclipped, gradient flows:
    # d/dlogp of -(ratio · -1) = ratio = e^0.5
    logp = torch.tensor([0.5], requires_grad=True)
    loss, stats = mgrpo_loss(logp, torch.zeros(1), -torch.ones(1), torch.ones(1), clip_eps=0.2)
    loss.backward()
    assert math.isclose(float(logp.grad), math.exp(0.5), rel_tol=1e-6)
    assert stats.clip_frac == 0.0
    # Without clipping (ratio 1) the gradient is -A·w.
    logp = torch.tensor([0.0], requires_grad=True)
    loss, _ = mgrpo_loss(logp, torch.zeros(1), torch.ones(1), torch.tensor([0.5]))
    loss.backward()
    assert math.isclose(float(logp.grad), -0.5, rel_tol=1e-6)


def test_kl_k3_and_beta() -> None:
    # d = ref - new = ln 2: k3 = 2 - ln 2 - 1
    new, ref = torch.tensor([0.0]), torch.tensor([math.log(2.0)])
    assert math.isclose(float(kl_k3(new, ref)), 1 - math.log(2.0), rel_tol=1e-6)
    assert float(kl_k3(ref, ref)) == 0.0
    logp = torch.zeros(1, requires_grad=True)
    loss, stats = mgrpo_loss(
        logp, torch.zeros(1), torch.zeros(1), torch.ones(1), beta=0.5, ref_logp=ref
    )
    # A = 0, so loss = β·KL = 0.5 · (1 - ln 2)
    assert math.isclose(float(loss), 0.5 * (1 - math.log(2.0)), rel_tol=1e-6)
    assert math.isclose(stats.kl, 1 - math.log(2.0), rel_tol=1e-6)
    with pytest.raises(ValueError, match="ref_logp"):
        mgrpo_loss(logp, torch.zeros(1), torch.zeros(1), torch.ones(1), beta=0.1)
