"""Trainer building blocks on a tiny random Llama: batching, log-probs, BC and M-GRPO steps."""

from __future__ import annotations

import copy
import math
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from tests.support.tiny import make_tiny_model, make_trajectories, make_turn
from webagent_r1.config import ConfigError, load_config
from webagent_r1.errors import LoadError
from webagent_r1.policy.trainable import load_policy
from webagent_r1.rollout.collect import Group
from webagent_r1.rollout.trajectories import turn_samples, write_trajectories
from webagent_r1.train.batching import collate, completion_logprobs, micro_batches
from webagent_r1.train.bc import batch_indices, split_demos
from webagent_r1.train.dist import Dist, build_optimizer, lr_factor
from webagent_r1.train.rl import (
    RLStage,
    StaleTurnsError,
    _started_subset,
    bc_term_samples,
    build_rl_batch,
    interleave_shares,
    mgrpo_update,
    refuse_stale_turns,
    trained_rewards,
)
from webagent_r1.types import Task, Trajectory


def _cfg(tiny_dir: Path, *extra: str):
    return load_config(None, [f"model.name={tiny_dir}", "model.device=cpu", *extra])


def test_micro_batches_cover_every_sample_within_budget() -> None:
    lengths = [50, 10, 30, 30, 200, 5, 40]
    mbs = micro_batches(lengths, token_budget=100)
    assert sorted(i for mb in mbs for i in mb) == list(range(len(lengths)))
    for mb in mbs:
        longest = max(lengths[i] for i in mb)
        assert len(mb) == 1 or len(mb) * longest <= 100
    assert [4] in mbs  # longer than the budget: alone


def test_lm_head_on_completion_positions_matches_full_logits(tiny_dir: Path) -> None:
    model, _ = load_policy(_cfg(tiny_dir))
    trajs = make_trajectories(3, seed=1)
    samples = [s for t in trajs for s in turn_samples(t)]
    mb = collate(samples, list(range(len(samples))), pad_id=1)
    with torch.no_grad():
        ours = completion_logprobs(model, mb, temperature=0.7, autocast_bf16=False)
        for k in range(len(samples)):
            s = samples[k]
            logits = model(torch.tensor([s.input_ids])).logits[0].float() / 0.7  # (T, V)
            full = torch.log_softmax(logits, -1)
            want = [
                full[p - 1, s.input_ids[p]].item() for p in range(s.prompt_len, len(s.input_ids))
            ]
            got = ours[mb.sample == k]
            assert torch.allclose(got, torch.tensor(want), atol=1e-5)


def test_lr_schedule() -> None:
    assert lr_factor(0, 4, 20, "constant") == pytest.approx(0.25)
    assert lr_factor(3, 4, 20, "constant") == pytest.approx(1.0)
    assert lr_factor(19, 4, 20, "constant") == pytest.approx(1.0)
    assert lr_factor(4, 4, 20, "linear") == pytest.approx(1.0)
    assert lr_factor(20, 4, 20, "linear") == pytest.approx(0.1)
    assert lr_factor(12, 4, 20, "cosine") == pytest.approx(
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 2))
    )


def test_bc_loss_is_the_weighted_nll() -> None:
    from webagent_r1.algos.sft import bc_loss

    logp = torch.tensor([-1.0, -3.0, -2.0])
    assert float(bc_loss(logp, torch.full((3,), 1 / 3))) == pytest.approx(2.0)  # token mean


def test_bc_data_order_is_a_function_of_the_step() -> None:
    a = [batch_indices(s, 4, 10, seed=3) for s in range(6)]
    b = [batch_indices(s, 4, 10, seed=3) for s in range(6)]
    assert a == b
    flat = [i for step in a[:5] for i in step]  # 20 draws = 2 epochs of 10
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:20]) == list(range(10))
    train, held = split_demos(make_trajectories(20), 0.1, seed=0)
    assert len(held) == 2 and len(train) == 18
    assert not {t.task_id for t in train} & {t.task_id for t in held}


def _group(rewards: list[float], seed: int = 0, status: str = "done") -> Group:
    import random

    rng = random.Random(seed)
    trajs = []
    for i, r in enumerate(rewards):
        turns = [make_turn(rng, 8, 4) for _ in range(1 + i % 2)]
        trajs.append(Trajectory(task_id="t", group_id=0, turns=turns, reward=r, status=status))
    return Group(Task(task_id="t", sites=[], intent="x", start_url=""), trajs)


def test_build_rl_batch_skips_equal_groups_and_env_errors() -> None:
    mixed = _group([1.0, 0.0, 0.0, 1.0])
    equal = _group([0.0, 0.0, 0.0])
    crashed = _group([1.0, 0.0])
    for t in crashed.trajectories:
        t.status = "env_error"
    batch = build_rl_batch([mixed, equal, crashed])
    assert (batch.groups_used, batch.groups_equal, batch.groups_small) == (1, 1, 1)
    assert batch.n_traj == 4
    assert len(batch.samples) == sum(len(t.turns) for t in mixed.trajectories)
    adv = {s.advantage for s in batch.samples}
    assert len(adv) == 2 and min(adv) < 0 < max(adv)
    kept_all = build_rl_batch([equal], drop_equal_groups=False)
    assert kept_all.groups_used == 1 and all(s.advantage == 0 for s in kept_all.samples)


def test_reward_requires_exit_trains_a_success_at_the_turn_limit_as_a_failure() -> None:
    group = _group([1.0, 1.0, 0.0, 0.0], seed=1)  # 1, 2, 1 and 2 turns
    group.trajectories[1].status = "max_turns"  # the right end state, never exited
    plain = build_rl_batch([group])
    strict = build_rl_batch([group], require_exit=True)

    def adv(batch) -> list[float]:  # one advantage per trajectory
        first = {}
        for s, i in zip(batch.samples, batch.traj, strict=True):
            first.setdefault(i, s.advantage)
        return [first[i] for i in range(4)]

    # by hand: rewards [1, 1, 0, 0] -> ±1 (mean 0.5, std 0.5 over the group)
    assert adv(plain) == pytest.approx([1.0, 1.0, -1.0, -1.0], abs=1e-3)
    # [1, 0, 0, 0]: mean 0.25, std sqrt(3)/4 -> 0.75 / 0.433 = 1.732 and -0.577
    assert adv(strict) == pytest.approx([1.732, -0.577, -0.577, -0.577], abs=1e-3)
    assert [t.reward for t in group.trajectories] == [1.0, 1.0, 0.0, 0.0]  # graded rewards kept
    # a group whose only success never exited carries no signal, and is dropped
    lone = _group([0.0, 1.0], seed=3)
    lone.trajectories[1].status = "max_turns"
    assert build_rl_batch([lone], require_exit=True).groups_equal == 1
    assert build_rl_batch([lone]).groups_used == 1


def test_trained_rewards_are_what_the_batch_trains_on() -> None:
    group = _group([1.0, 0.0, 0.0], seed=2)
    group.trajectories[0].status = "max_turns"
    group.trajectories[2].status = "env_error"  # never a failure: left out
    assert trained_rewards(group, require_exit=False) == [1.0, 0.0]
    assert trained_rewards(group, require_exit=True) == [0.0, 0.0]
    assert build_rl_batch([group], require_exit=True).groups_equal == 1  # the same verdict


def test_round_fits_leaves_room_for_a_round_an_update_and_the_evaluation() -> None:
    def stage(budget_min: float, updates: list[float]) -> SimpleNamespace:
        dist = SimpleNamespace(main=False, broadcast_object=lambda x: x)
        cfg = SimpleNamespace(rl=SimpleNamespace(time_budget_min=budget_min))
        now = time.time()
        # 20 min of earlier wall time, this process started 10 min ago, a 5-min evaluation
        return SimpleNamespace(
            cfg=cfg,
            dist=dist,
            prior_s=1200.0,
            clock_t0=now - 600,
            eval_s=300.0,
            update_times=updates,
        )

    s0 = time.time() - 240  # the step's 2 rounds so far took 4 min: 2 min a round
    # used 30 min; need 1.1 * (2 + 3) + 5 = 10.5 min
    assert RLStage.round_fits(stage(41, [180.0]), s0, 2)
    assert not RLStage.round_fits(stage(40, [180.0]), s0, 2)
    # no update timed yet: a round's time stands in, 1.1 * (2 + 2) + 5 = 9.4 min
    assert RLStage.round_fits(stage(40, []), s0, 2)
    assert not RLStage.round_fits(stage(39, []), s0, 2)
    assert RLStage.round_fits(stage(0, [1e9]), s0, 2)  # no budget


def test_build_rl_batch_drops_or_refuses_stale_turns() -> None:
    from webagent_r1.config import ConfigError

    group = _group([1.0, 0.0, 1.0, 0.0], seed=2)  # 1, 2, 1 and 2 turns
    for t in group.trajectories:
        for u in t.turns:
            u.weight_version = 5  # the trainer's weights
    group.trajectories[1].turns[0].weight_version = 3  # two updates behind
    group.trajectories[3].turns[1].weight_version = 6  # weights the trainer never had
    group.trajectories[2].turns[0].weight_version = None  # an engine without versions
    unchecked = build_rl_batch([group])
    assert len(unchecked.samples) == 6 and unchecked.turns_stale == 0
    batch = build_rl_batch([group], version=5)
    assert batch.turns_stale == 2 and len(batch.samples) == 4
    kept = [(i, s.turn_index) for i, s in zip(batch.traj, batch.samples, strict=True)]
    assert kept == [(0, 0), (1, 1), (2, 0), (3, 0)] and batch.n_traj == 4
    # the episodes' rewards still define the group's advantages
    adv = {i: s.advantage for i, s in zip(unchecked.traj, unchecked.samples, strict=True)}
    assert all(s.advantage == adv[i] for i, s in zip(batch.traj, batch.samples, strict=True))
    assert build_rl_batch([group], version=5, max_staleness=2).turns_stale == 1  # ahead: still
    with pytest.raises(StaleTurnsError, match=r"^2 turn\(s\).*version 5.*seen here: \[3, 6\]"):
        build_rl_batch([group], version=5, stale_turns="error")
    # the trainer drops, then refuses on every process alike when asked to
    rl = load_config(None, ["rl.stale_turns=error"]).rl
    with pytest.raises(StaleTurnsError, match="rl.stale_turns=drop"):
        refuse_stale_turns(batch, rl, 5, Dist())
    refuse_stale_turns(batch, load_config(None, []).rl, 5, Dist())  # 'drop': counted only
    refuse_stale_turns(unchecked, rl, 5, Dist())  # nothing stale
    with pytest.raises(ConfigError, match="rl.stale_turns"):
        load_config(None, ["rl.stale_turns=warn"])
    with pytest.raises(ConfigError, match="rl.max_staleness"):
        load_config(None, ["rl.max_staleness=-1"])


def _seq_logp(model, traj: Trajectory) -> float:
    samples = turn_samples(traj)
    mb = collate(samples, list(range(len(samples))), pad_id=1)
    with torch.no_grad():
        return float(completion_logprobs(model, mb, autocast_bf16=False).sum())


@pytest.mark.parametrize("normalization", ["mgrpo", "token_mean", "dr_grpo", "turn_mean"])
def test_one_mgrpo_step_moves_rewarded_up_and_unrewarded_down(
    tiny_dir: Path, normalization: str
) -> None:
    cfg = _cfg(
        tiny_dir, f"rl.normalization={normalization}", "model.autocast_bf16=false", "rl.lr=0.05"
    )
    torch.manual_seed(0)
    model, _ = load_policy(cfg)
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    group = _group([1.0, 0.0], seed=4)
    good, bad = group.trajectories
    before = (_seq_logp(model, good), _seq_logp(model, bad))
    weights = [p.detach().clone() for p in model.parameters()]
    metrics = mgrpo_update(model, opt, build_rl_batch([group]), cfg, pad_id=1)
    after = (_seq_logp(model, good), _seq_logp(model, bad))
    pairs = zip(model.parameters(), weights, strict=True)
    moved = [float((p.detach() - w).square().sum()) for p, w in pairs]
    rms = math.sqrt(sum(moved) / sum(w.numel() for w in weights))
    # the logged step size is the weights' real change; a fresh AdamW's is at most lr
    assert metrics["train/update_rms"] == pytest.approx(rms, rel=1e-3)
    assert 0 < metrics["train/update_rms"] <= 0.05 * (1 + 1e-6)
    assert after[0] > before[0], "the rewarded trajectory's actions must become likelier"
    assert after[1] < before[1], "the unrewarded trajectory's actions must become less likely"
    assert metrics["train/ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # π_old recomputed
    assert metrics["train/clip_frac"] == 0.0  # first iteration: nothing to clip


def _nll_grads(model, samples) -> list[torch.Tensor]:
    """Gradient of the token-mean NLL of ``samples``' completions, by a plain forward of
    each sample alone (no batching, padding or packing of the trainer's)."""
    model.zero_grad(set_to_none=True)
    total = sum(len(s.input_ids) - s.prompt_len for s in samples)
    for s in samples:
        ids = torch.tensor([s.input_ids])
        logits = model(input_ids=ids).logits[0, :-1].float()  # position t predicts t + 1
        logp = torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None])[:, 0]
        (-logp[s.prompt_len - 1 :].sum() / total).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def _nll(model, samples) -> float:
    """Summed NLL of ``samples``' completions, by a plain forward of each sample alone."""
    out = 0.0
    for s in samples:
        ids = torch.tensor([s.input_ids])
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
        out -= float(logp.gather(1, ids[0, 1:, None])[s.prompt_len - 1 :, 0].sum())
    return out


def test_bc_term_adds_coef_times_the_demonstrations_nll_gradient(tiny_dir: Path) -> None:
    """With ``rl.bc_coef`` = c, an SGD update moves the weights by the M-GRPO update's move
    plus -lr * c * the gradient of the demonstrations' token-mean NLL, and logs that NLL."""
    extra = ["model.autocast_bf16=false", "train.max_grad_norm=0", "rl.lr=0.5"]
    group = _group([1.0, 0.0, 1.0], seed=3)
    demos = [s for t in make_trajectories(3, seed=7) for s in turn_samples(t)]
    moves, logged = [], []
    for coef in (0.0, 0.3):
        cfg = _cfg(tiny_dir, *extra, f"rl.bc_coef={coef}")
        model, _ = load_policy(cfg)
        start = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(list(model.parameters()), lr=cfg.rl.lr)
        batch = build_rl_batch([copy.deepcopy(group)])
        m = mgrpo_update(model, opt, batch, cfg, 1, bc_samples=demos)
        moves.append([p.detach() - w for p, w in zip(model.parameters(), start, strict=True)])
        logged.append(m.get("train/bc_loss"))
    assert logged[0] is None  # coef 0: no term, no metric
    model, _ = load_policy(_cfg(tiny_dir, *extra))
    want = [-0.5 * 0.3 * g for g in _nll_grads(model, demos)]
    got = [b - a for a, b in zip(*moves, strict=True)]
    err = sum(float((g - w).square().sum()) for g, w in zip(got, want, strict=True))
    norm = sum(float(w.square().sum()) for w in want)
    assert norm > 0 and math.sqrt(err / norm) < 1e-4
    with torch.no_grad():
        total = sum(len(s.input_ids) - s.prompt_len for s in demos)
        nll = _nll(model, demos)
    assert logged[1] == pytest.approx(nll / total, rel=1e-4)  # at the start weights (mu = 1)


def test_pg_coef_zero_update_is_the_bc_term_alone(tiny_dir: Path) -> None:
    """``rl.pg_coef=0`` on a batch with advantages (a mixed group): the SGD move is the BC
    term's alone, -lr * c * the gradient of the demonstrations' token-mean NLL (a plain
    per-sample forward as the reference), and no surrogate metric is logged."""
    extra = ["model.autocast_bf16=false", "train.max_grad_norm=0", "rl.lr=0.5"]
    cfg = _cfg(tiny_dir, *extra, "rl.bc_coef=0.3", "rl.pg_coef=0")
    demos = [s for t in make_trajectories(3, seed=7) for s in turn_samples(t)]
    batch = build_rl_batch([_group([1.0, 0.0, 1.0], seed=3)])
    assert batch.samples and any(s.advantage != 0 for s in batch.samples)
    model, _ = load_policy(cfg)
    start = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.SGD(list(model.parameters()), lr=cfg.rl.lr)
    m = mgrpo_update(model, opt, batch, cfg, 1, bc_samples=demos)
    ref, _ = load_policy(cfg)
    want = [-0.5 * 0.3 * g for g in _nll_grads(ref, demos)]
    got = [p.detach() - w for p, w in zip(model.parameters(), start, strict=True)]
    err = sum(float((g - w).square().sum()) for g, w in zip(got, want, strict=True))
    norm = sum(float(w.square().sum()) for w in want)
    assert norm > 0 and math.sqrt(err / norm) < 1e-4
    assert "train/loss" not in m and "train/clip_frac" not in m and m["train/bc_loss"] > 0


def test_pg_coef_scales_the_policy_gradient(tiny_dir: Path) -> None:
    """Without the BC term, an SGD move under ``rl.pg_coef=0.25`` is a quarter of the move
    under 1; 0 with the BC term off is refused (nothing to train)."""
    extra = ["model.autocast_bf16=false", "train.max_grad_norm=0", "rl.lr=0.5"]
    group = _group([1.0, 0.0, 1.0, 0.0], seed=5)
    moves = {}
    for pg in (1.0, 0.25):
        cfg = _cfg(tiny_dir, *extra, f"rl.pg_coef={pg}")
        model, _ = load_policy(cfg)
        start = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(list(model.parameters()), lr=cfg.rl.lr)
        mgrpo_update(model, opt, build_rl_batch([copy.deepcopy(group)]), cfg, 1)
        moves[pg] = [p.detach() - w for p, w in zip(model.parameters(), start, strict=True)]
    norm = sum(float(w.square().sum()) for w in moves[1.0])
    err = sum(
        float((a - 0.25 * b).square().sum()) for a, b in zip(moves[0.25], moves[1.0], strict=True)
    )
    assert norm > 0 and math.sqrt(err / norm) < 1e-4
    with pytest.raises(ConfigError, match="leaves M-GRPO nothing to train"):
        _cfg(tiny_dir, "rl.pg_coef=0")
    with pytest.raises(ConfigError, match="rl.pg_coef must be a finite number >= 0"):
        _cfg(tiny_dir, "rl.pg_coef=-0.5")
    assert _cfg(tiny_dir, "rl.pg_coef=0", "rl.steps=0").rl.pg_coef == 0


def test_bc_term_samples_are_bcs_training_share(tmp_path: Path, tiny_dir: Path) -> None:
    """The term's turns are those of BC's training share of ``bc.data``: successful
    demonstrations only, the held-out ones left out; a missing file is a one-line error."""
    good = make_trajectories(6, seed=1)
    bad = make_trajectories(2, seed=2, reward=0.0)
    data = tmp_path / "demos.jsonl"
    write_trajectories(good + bad, data)
    cfg = _cfg(tiny_dir, f"bc.data={data}", "bc.heldout_fraction=0.34", "rl.bc_coef=0.1")
    train, _ = split_demos(good, 0.34, cfg.seed)
    assert 0 < len(train) < len(good)
    want = [(s.input_ids, s.prompt_len) for t in train for s in turn_samples(t)]
    got = [(s.input_ids, s.prompt_len) for s in bc_term_samples(cfg)]
    assert got == want
    missing = _cfg(tiny_dir, f"bc.data={tmp_path / 'none.jsonl'}", "rl.bc_coef=0.1")
    with pytest.raises(FileNotFoundError, match=r"needs demonstrations: .*none.jsonl"):
        bc_term_samples(missing)
    write_trajectories(good[:1] + bad, data)  # one demonstration, and it is held out
    with pytest.raises(ConfigError, match="holds out every demonstration"):
        bc_term_samples(_cfg(tiny_dir, f"bc.data={data}", "bc.heldout_fraction=0.9"))
    write_trajectories(bad, data)
    with pytest.raises(LoadError, match="no successful demonstration"):
        bc_term_samples(cfg)
    with pytest.raises(ConfigError, match="rl.bc_coef must be >= 0"):
        _cfg(tiny_dir, "rl.bc_coef=-1")
    with pytest.raises(ConfigError, match="rl.bc_batch_size must be >= 1"):
        _cfg(tiny_dir, "rl.bc_batch_size=0")


def test_an_update_with_only_equal_groups_trains_the_bc_term_alone_each_iteration(
    tiny_dir: Path,
) -> None:
    """Every group dropped (equal rewards), ``rl.bc_coef`` > 0: each of the μ = 2 SGD steps is
    -lr * c * the NLL gradient at that step's weights, and ``train/bc_loss`` the mean of the
    two NLLs (a plain per-sample forward as the reference)."""
    cfg = _cfg(
        tiny_dir,
        "model.autocast_bf16=false",
        "train.max_grad_norm=0",
        "rl.lr=0.5",
        "rl.mu=2",
        "rl.bc_coef=0.4",
    )
    demos = [s for t in make_trajectories(3, seed=8) for s in turn_samples(t)]
    batch = build_rl_batch([_group([0.0, 0.0], seed=2)])
    assert not batch.samples  # the group is dropped: no M-GRPO token
    model, _ = load_policy(cfg)
    opt = torch.optim.SGD(list(model.parameters()), lr=cfg.rl.lr)
    m = mgrpo_update(model, opt, batch, cfg, 1, bc_samples=demos)
    ref, _ = load_policy(cfg)
    nlls = []
    for _ in range(2):
        with torch.no_grad():
            total = sum(len(s.input_ids) - s.prompt_len for s in demos)
            nlls.append(_nll(ref, demos) / total)
        grads = _nll_grads(ref, demos)
        with torch.no_grad():
            for p, g in zip(ref.parameters(), grads, strict=True):
                p -= 0.5 * 0.4 * g
    start, _ = load_policy(cfg)
    got, want, first = model.parameters(), ref.parameters(), start.parameters()
    err = sum(float((a - b).square().sum()) for a, b in zip(got, want, strict=True))
    moved = sum(float((a - b).square().sum()) for a, b in zip(ref.parameters(), first, strict=True))
    assert moved > 0 and math.sqrt(err / moved) < 1e-4
    assert m["train/bc_loss"] == pytest.approx(sum(nlls) / 2, rel=1e-4)
    assert "train/skipped" not in m and m["train/tokens"] == 0
    assert "train/loss" not in m and "train/ratio_mean" not in m  # no surrogate ran


class MirrorDist(Dist):
    """One process posing as two that hold identical batches: every sum over processes is
    twice this process's value, and so are the summed gradients."""

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        return [2 * v for v in values]

    def all_reduce_grads(self, params: list[torch.nn.Parameter]) -> None:
        for p in params:
            if p.grad is not None:
                p.grad.mul_(2)


@pytest.mark.parametrize("normalization", ["mgrpo", "token_mean", "dr_grpo", "turn_mean"])
def test_weights_are_normalised_over_every_process(tiny_dir: Path, normalization: str) -> None:
    """Two processes with the same batch make the same update as one process with it: each
    weight divides by the counts of both (trajectories, tokens, turns), so each process's
    share of the summed gradient is half. A weight normalised over its own process's counts
    only would double the update."""
    cfg = _cfg(
        tiny_dir,
        f"rl.normalization={normalization}",
        "model.autocast_bf16=false",
        "train.max_grad_norm=0",  # clipping would hide a doubled gradient
        "rl.lr=0.05",
        "rl.bc_coef=0.5",  # the BC term too divides by the tokens of every process
    )
    group = _group([1.0, 0.0, 0.0, 1.0, 0.0], seed=6)  # 1 or 2 turns
    demos = [s for t in make_trajectories(2, seed=9) for s in turn_samples(t)]
    params, losses = [], []
    for dist in (Dist(), MirrorDist()):
        model, _ = load_policy(cfg)
        start = [p.detach().clone() for p in model.parameters()]
        opt = torch.optim.SGD(list(model.parameters()), lr=cfg.rl.lr)
        batch = build_rl_batch([copy.deepcopy(group)])
        m = mgrpo_update(model, opt, batch, cfg, 1, dist, bc_samples=demos)
        params.append([p.detach() - s for p, s in zip(model.parameters(), start, strict=True)])
        losses.append((m["train/loss"], m["train/bc_loss"]))
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    one, two = params
    diff = sum(float((a - b).square().sum()) for a, b in zip(one, two, strict=True))
    norm = sum(float(a.square().sum()) for a in one)
    assert norm > 0 and math.sqrt(diff / norm) < 1e-5


@pytest.mark.parametrize("checkpointing", [False, True], ids=["plain", "checkpointing"])
def test_first_iteration_ratio_is_one_with_dropout(tmp_path: Path, checkpointing: bool) -> None:
    """With dropout in the model, π_old and the update's π_θ come from the same dropout-free
    function (with gradient checkpointing too: its recomputed forward draws no dropout
    either): ratio 1, nothing clipped, and every module back in train mode after."""
    folder = make_tiny_model(tmp_path / "dropout", attention_dropout=0.5)
    cfg = _cfg(
        folder,
        "model.autocast_bf16=false",
        "rl.lr=0.05",
        "rl.clip_eps=0.01",
        f"train.gradient_checkpointing={str(checkpointing).lower()}",
    )
    torch.manual_seed(0)
    model, _ = load_policy(cfg)
    assert model.training
    group = _group([1.0, 0.0], seed=4)
    samples = [s for t in group.trajectories for s in turn_samples(t)]
    mb = collate(samples, list(range(len(samples))), pad_id=1)
    with torch.no_grad():  # the dropout really draws in train mode
        a, b = (completion_logprobs(model, mb, autocast_bf16=False) for _ in range(2))
    assert (a - b).abs().max() > 1e-3
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    metrics = mgrpo_update(model, opt, build_rl_batch([group]), cfg, pad_id=1)
    assert metrics["train/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
    assert metrics["train/clip_frac"] == 0.0
    assert all(m.training for m in model.modules())


def _saved_for_backward(fn, *args, **kwargs) -> int:
    """Bytes of the distinct storages the autograd graph keeps while ``fn(*args, **kwargs)``
    runs (outside gradient checkpoints, which keep their own)."""
    sizes: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        st = t.untyped_storage()
        sizes[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args, **kwargs)
    return sum(sizes.values())


def test_the_update_checkpoints_when_the_model_does(tmp_path: Path) -> None:
    """Dropout is off during the update, yet the checkpointing layers still checkpoint (they
    do only in training mode): the activations kept for the backward pass shrink to the
    layers' inputs."""
    folder = make_tiny_model(
        tmp_path / "deep", num_hidden_layers=8, hidden_size=64, intermediate_size=256
    )
    group = _group([1.0, 0.0], seed=4)
    saved = {}
    for ckpt in ("false", "true"):
        cfg = _cfg(folder, "model.autocast_bf16=false", f"train.gradient_checkpointing={ckpt}")
        torch.manual_seed(0)
        model, _ = load_policy(cfg)
        opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
        batch = build_rl_batch([copy.deepcopy(group)])
        saved[ckpt] = _saved_for_backward(mgrpo_update, model, opt, batch, cfg, pad_id=1)
    assert 0 < saved["true"] < 0.4 * saved["false"], saved


def test_mu_above_one_makes_the_clip_act(tiny_dir: Path) -> None:
    cfg = _cfg(tiny_dir, "rl.mu=4", "rl.lr=0.05", "model.autocast_bf16=false", "rl.clip_eps=0.05")
    torch.manual_seed(0)
    model, _ = load_policy(cfg)
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    metrics = mgrpo_update(model, opt, build_rl_batch([_group([1.0, 0.0], seed=5)]), cfg, 1)
    assert metrics["train/clip_frac"] > 0, "with 4 iterations the ratio leaves [1-ε, 1+ε]"
    assert metrics["train/ratio_mean"] != pytest.approx(1.0, abs=1e-6)


def test_kl_needs_a_reference_and_is_zero_against_itself(tiny_dir: Path) -> None:
    cfg = _cfg(tiny_dir, "rl.beta=0.1", "model.autocast_bf16=false", "rl.lr=1e-9")
    model, _ = load_policy(cfg)
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    batch = build_rl_batch([_group([1.0, 0.0])])
    with pytest.raises(ValueError, match="reference"):
        mgrpo_update(model, opt, batch, cfg, 1)
    ref = copy.deepcopy(model).eval()
    metrics = mgrpo_update(model, opt, batch, cfg, 1, ref_model=ref)
    assert metrics["train/kl"] == pytest.approx(0.0, abs=1e-6)


def test_lora_trains_only_adapters(tiny_dir: Path) -> None:
    cfg = _cfg(tiny_dir, "train.lora_r=4", "model.autocast_bf16=false", "rl.lr=0.05")
    model, _ = load_policy(cfg)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora" in n for n in trainable)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    opt = build_optimizer([p for p in model.parameters() if p.requires_grad], 0.05, cfg.train)
    mgrpo_update(model, opt, build_rl_batch([_group([1.0, 0.0])]), cfg, 1)
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n])


def test_trainable_layers_train_the_top_only_and_still_learn(tiny_dir: Path) -> None:
    from webagent_r1.config import ConfigError

    cfg = _cfg(tiny_dir, "train.trainable_layers=1", "model.autocast_bf16=false", "rl.lr=0.05")
    model, _ = load_policy(cfg)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(
        n.startswith(("model.layers.1.", "model.norm.", "lm_head.")) for n in trainable
    )
    assert "lm_head.weight" in trainable  # untied head: cheap to train
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if n not in trainable}
    opt = build_optimizer([p for p in model.parameters() if p.requires_grad], 0.05, cfg.train)
    group = _group([1.0, 0.0], seed=4)
    good = group.trajectories[0]
    before = _seq_logp(model, good)
    mgrpo_update(model, opt, build_rl_batch([group]), cfg, 1)
    assert _seq_logp(model, good) > before  # the top layer alone still moves the policy
    for n, p in model.named_parameters():
        if n in frozen:
            assert torch.equal(p, frozen[n]), n
    with pytest.raises(ValueError, match="has 2 layers"):
        load_policy(_cfg(tiny_dir, "train.trainable_layers=3"))
    with pytest.raises(ConfigError, match="exclusive"):
        _cfg(tiny_dir, "train.trainable_layers=1", "train.lora_r=4")


async def test_rl_trainable_layers_override_the_train_section(
    tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import webagent_r1.train.rl as rl_module
    import webagent_r1.train.stage as stage_module
    from webagent_r1.config import ConfigError

    seen: list[int] = []

    class Loaded(Exception):
        pass

    def record(cfg, path=None):
        seen.append(cfg.train.trainable_layers)
        raise Loaded

    monkeypatch.setattr(stage_module, "load_policy", record)
    for rl_layers, want in (("0", 0), ("null", 1)):
        cfg = _cfg(
            tiny_dir,
            f"run_dir={tmp_path}",
            "train.trainable_layers=1",
            f"rl.trainable_layers={rl_layers}",
        )
        assert cfg.train.trainable_layers == 1  # BC keeps its own
        with pytest.raises(Loaded):
            await rl_module.train_rl(cfg, progress=False)
        assert seen[-1] == want
    with pytest.raises(ConfigError, match="rl.trainable_layers=2: .*exclusive"):
        _cfg(tiny_dir, "rl.trainable_layers=2", "train.lora_r=4")


@pytest.mark.parametrize("arch", ["llama", "opt"])
def test_update_mode_draws_no_dropout_and_checkpoints_where_it_can(arch: str) -> None:
    """Inside ``_eval_mode`` two forwards agree although every dropout is 0.5. Llama's
    decoder layers keep their training flag (they checkpoint); OPT's apply dropout in their
    own forward, so they stay in eval mode (no checkpointing). Modes restored after."""
    from transformers import LlamaConfig, LlamaForCausalLM, OPTConfig, OPTForCausalLM

    from webagent_r1.train.rl import _eval_mode

    torch.manual_seed(0)
    if arch == "llama":
        cfg = LlamaConfig(
            vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, attention_dropout=0.5,
        )  # fmt: skip
        model = LlamaForCausalLM(cfg)
    else:
        cfg = OPTConfig(
            vocab_size=64, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
            num_attention_heads=4, dropout=0.5, attention_dropout=0.5, word_embed_proj_dim=32,
        )  # fmt: skip
        model = OPTForCausalLM(cfg)
    model.gradient_checkpointing_enable()
    model.train()
    ids = torch.randint(3, 64, (2, 12))
    with torch.no_grad():
        assert not torch.equal(model(ids).logits, model(ids).logits)  # dropout draws
    layers = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    with _eval_mode(model), torch.no_grad():
        assert torch.equal(model(ids).logits, model(ids).logits)
        flags = {type(m).__name__: m.training for m in layers}
        assert not any(m.training for m in model.modules() if isinstance(m, torch.nn.Dropout))
    want = {"llama": {"LlamaDecoderLayer": True}, "opt": {"OPTDecoderLayer": False}}[arch]
    assert {k: v for k, v in flags.items() if k in want} == want
    assert all(m.training for m in model.modules())


def test_interleave_shares_puts_dealt_tasks_back_in_order() -> None:
    """7 tasks dealt to 3 processes (0, 3, 6 / 1, 4 / 2, 5), 2 episodes each: the tasks come
    back 0-6, each task's two episodes in their order; one process is the identity."""
    world, samples, n_tasks = 3, 2, 7
    shares = [
        [
            Trajectory(f"task{t}", f"{t}.{k}")
            for t in range(r, n_tasks, world)
            for k in range(samples)
        ]
        for r in range(world)
    ]
    assert [len(s) for s in shares] == [6, 4, 4]
    out = interleave_shares(shares, samples)
    assert [t.group_id for t in out] == [f"{t}.{k}" for t in range(n_tasks) for k in range(samples)]
    assert interleave_shares([shares[0]], samples) == shares[0]
    assert interleave_shares([[], []], samples) == []


def test_a_resumed_run_keeps_the_evaluation_tasks_it_started_with(tmp_path: Path) -> None:
    """The first evaluation file's task ids, in order (a task's samples once); None when
    there is no file, a task is not in the test split, or the file is malformed."""
    test = [Task(f"t{k}", "x", "http://x/", ["shop"]) for k in range(4)]
    assert _started_subset(tmp_path, test) is None
    write_trajectories(
        [Trajectory("t2", 0), Trajectory("t2", 0), Trajectory("t0", 1)],
        tmp_path / "step-000000.jsonl",
    )
    write_trajectories([Trajectory("t3", 0)], tmp_path / "step-000004.jsonl")  # a later one
    assert _started_subset(tmp_path, test) == ["t2", "t0"]
    assert _started_subset(tmp_path, test[:2]) is None  # t2 is not in this split
    (tmp_path / "step-000000.jsonl").write_text("{not json\n")
    assert _started_subset(tmp_path, test) is None


@pytest.mark.parametrize("share", ["true", "false"])
def test_mu1_takes_pi_old_from_the_training_forward(tiny_dir: Path, share: str) -> None:
    """μ = 1, π_old recomputed: one forward fewer, and the same loss, metrics and gradients
    as the separate no-grad forward of π_old."""
    cfg = _cfg(
        tiny_dir,
        "rl.mu=1",
        "rl.old_logprobs=recompute",
        "model.autocast_bf16=false",
        f"train.share_prompts={share}",
        "train.max_grad_norm=1000",  # compare the raw gradients, not clipped ones
    )
    torch.manual_seed(0)
    base, _ = load_policy(cfg)
    batch = build_rl_batch([_group([1.0, 0.0, 0.0], seed=7), _group([0.0, 1.0], seed=8)])
    results = []
    for fuse in (False, True):
        model = copy.deepcopy(base)
        calls = [0]
        embed = model.get_input_embeddings()  # every forward starts there
        hook = embed.register_forward_hook(lambda *_, c=calls: c.__setitem__(0, c[0] + 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.0)  # keep the weights: compare grads
        m = mgrpo_update(model, opt, copy.deepcopy(batch), cfg, 1, fuse_old=fuse)
        hook.remove()
        results.append((m, [p.grad.clone() for p in model.parameters()], calls[0]))
    (m2, g2, n2), (m1, g1, n1) = results
    assert n1 < n2, "the fused path must not run a separate forward for π_old"
    assert m1["train/loss"] == pytest.approx(m2["train/loss"], rel=1e-6, abs=1e-7)
    assert m1["train/ratio_mean"] == 1.0 and m2["train/ratio_mean"] == pytest.approx(1.0)
    assert m1["train/grad_norm"] == pytest.approx(m2["train/grad_norm"], rel=1e-6)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_prefill_metrics_is_the_steps_share_of_prompt_tokens_computed() -> None:
    from webagent_r1.policy.base import prefill_counts
    from webagent_r1.train.rl import prefill_metrics

    one = SimpleNamespace(all_reduce_sum=lambda v: list(v))
    two = SimpleNamespace(all_reduce_sum=lambda v: [2 * x for x in v])  # two alike processes
    # counters since the engine started: this step computed 300 of 1000 requested
    assert prefill_metrics((100, 400), (400, 1400), one) == {"rollout/prefill_computed_frac": 0.3}
    assert prefill_metrics((100, 400), (400, 1400), two)["rollout/prefill_computed_frac"] == 0.3
    assert prefill_metrics(None, None, one) == {}  # an engine that does not count
    assert prefill_metrics((5, 9), (5, 9), one) == {}  # nothing requested this step
    assert prefill_counts(SimpleNamespace()) is None
