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
    turn_count,
    weights_mgrpo,
    weights_turn_mean,
)
from webagent_r1.config import ConfigError, load_config


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
    # turn_mean, T = 3 turns: -(1/3)·((1 + 1)/2 + 2/1 + (-3)/3) = -2/3
    assert math.isclose(losses["turn_mean"], -2 / 3, abs_tol=1e-6)
    assert set(losses) == {"mgrpo", "token_mean", "dr_grpo", "turn_mean"}


def test_every_normalisation_is_a_config_value() -> None:
    for name in NORMALIZERS:
        assert load_config(None, [f"rl.normalization={name}"]).rl.normalization == name
    with pytest.raises(ConfigError, match="rl.normalization must be .*turn_mean"):
        load_config(None, ["rl.normalization=turn_sum"])


# Two trajectories: traj 0 has 1 turn of 4 tokens; traj 1 has 3 turns of 2, 1 and 3 tokens.
SHORT_LONG_TRAJ = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
SHORT_LONG_TURN = torch.tensor([0, 0, 0, 0, 0, 0, 1, 2, 2, 2])


def _per_turn(
    w: torch.Tensor, traj: torch.Tensor, turn: torch.Tensor
) -> dict[tuple[int, int], float]:
    """Total weight of each (trajectory, turn)."""
    out: dict[tuple[int, int], float] = {}
    for wi, i, j in zip(w.tolist(), traj.tolist(), turn.tolist(), strict=True):
        out[(i, j)] = out.get((i, j), 0.0) + wi
    return out


def test_turn_mean_weights_by_hand() -> None:
    traj, turn = SHORT_LONG_TRAJ, SHORT_LONG_TURN
    assert turn_count(traj, turn) == 4
    w = weights_turn_mean(traj, turn, n_traj=2)
    # 1/(T·|a_ij|), T = 4: traj 0 -> 1/(4·4) = 1/16; traj 1 turn 0 -> 1/(4·2) = 1/8;
    # turn 1 -> 1/(4·1) = 1/4; turn 2 -> 1/(4·3) = 1/12
    expected = torch.tensor([1 / 16] * 4 + [1 / 8] * 2 + [1 / 4] + [1 / 12] * 3)
    assert torch.allclose(w, expected)
    assert math.isclose(float(w.sum()), 1.0, rel_tol=1e-6)
    # the global T of several processes replaces the local count
    assert torch.allclose(weights_turn_mean(traj, turn, 2, n_turns=8), expected / 2)


def test_a_long_trajectorys_turns_weigh_as_much_as_a_short_ones() -> None:
    traj, turn = SHORT_LONG_TRAJ, SHORT_LONG_TURN
    turn_mean = _per_turn(weights_turn_mean(traj, turn, n_traj=2), traj, turn)
    mgrpo = _per_turn(weights_mgrpo(traj, turn, n_traj=2), traj, turn)
    # turn_mean: every turn 1/4, the 3-turn trajectory 3/4 of the batch in total
    for key, v in turn_mean.items():
        assert math.isclose(v, 1 / 4, rel_tol=1e-6), key
    # mgrpo: each trajectory 1/G = 1/2, so the short one's turn 1/2, the long one's 1/(2·3)
    assert math.isclose(mgrpo[(0, 0)], 1 / 2, rel_tol=1e-6)
    for j in range(3):
        assert math.isclose(mgrpo[(1, j)], 1 / 6, rel_tol=1e-6)
    assert math.isclose(sum(mgrpo.values()), 1.0, rel_tol=1e-6)


def test_turn_mean_weights_sum_to_one_and_ignore_turn_lengths() -> None:
    gen = torch.Generator().manual_seed(0)
    traj, turn = [], []
    for i in range(5):  # 1 to 4 turns of 1 to 6 tokens, turn indices with a gap (a stale turn)
        n_turns = int(torch.randint(1, 5, (1,), generator=gen))
        for j in range(n_turns):
            n_tok = int(torch.randint(1, 7, (1,), generator=gen))
            traj += [i] * n_tok
            turn += [2 * j] * n_tok
    tr, tu = torch.tensor(traj), torch.tensor(turn)
    w = weights_turn_mean(tr, tu, n_traj=5)
    per_turn = _per_turn(w, tr, tu)
    assert math.isclose(float(w.sum()), 1.0, rel_tol=1e-6)
    assert len(per_turn) == turn_count(tr, tu)
    for v in per_turn.values():
        assert math.isclose(v, 1 / len(per_turn), rel_tol=1e-6)
    # no tokens: no weights (and no division by zero)
    assert (
        weights_turn_mean(
            torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.long), 1
        ).numel()
        == 0
    )


@pytest.mark.parametrize("name", ["mgrpo", "turn_mean", "token_mean"])
def test_weights_from_global_counts_do_not_depend_on_the_split(name: str) -> None:
    """Split by whole turns (as micro-batches and processes split the batch), each share's
    weights with the whole batch's counts are the whole batch's weights; turn_mean with the
    share's own turn count would weigh the share as if it were the batch."""
    traj, turn = SHORT_LONG_TRAJ, SHORT_LONG_TURN
    fn = NORMALIZERS[name]
    counts = {"n_traj": 2, "n_tokens": 10, "n_turns": turn_count(traj, turn)}
    whole = fn(traj, turn, **counts)
    shares = [torch.arange(0, 6), torch.arange(6, 10)]  # traj 0 + traj 1 turn 0 | turns 1, 2
    if name == "mgrpo":  # a trajectory's turns stay on one process (|τ_i| is local)
        shares = [torch.arange(0, 4), torch.arange(4, 10)]
    parts = torch.cat([fn(traj[s], turn[s], **counts) for s in shares])
    assert torch.allclose(parts, whole)
    if name == "turn_mean":
        local = torch.cat([fn(traj[s], turn[s], n_traj=2) for s in shares])
        assert math.isclose(float(local.sum()), 2.0, rel_tol=1e-6)  # each share summed to 1


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
