"""GiGPO's step-level credit: returns, step groups, advantages (hand-computed), the batch
builder's 'gigpo' option, the config settings and the state keys the rollout records."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
import torch

from tests.support.fakes import CLICK, EXIT, FakeEnvPool, FakeTokenizer, ScriptedEngine, make_tasks
from webagent_r1.algos.gigpo import (
    discounted_returns,
    gigpo_advantages,
    step_advantages,
    step_groups,
)
from webagent_r1.algos.mgrpo import group_advantages
from webagent_r1.config import ConfigError, RLConfig, load_config
from webagent_r1.rollout.collect import Group, collect, state_key
from webagent_r1.rollout.trajectories import (
    TrajectoryFileError,
    parse_trajectory_line,
    read_trajectories,
    write_trajectories,
)
from webagent_r1.train.rl import build_rl_batch
from webagent_r1.types import Observation, Task, Trajectory, Turn

EPS = 1e-4


# --- discounted returns ----------------------------------------------------------------------


def test_discounted_returns_put_the_terminal_reward_on_the_last_turn() -> None:
    assert discounted_returns(1.0, 3, 0.5) == [0.25, 0.5, 1.0]
    assert discounted_returns(1.0, 1, 0.9) == [1.0]
    assert discounted_returns(0.0, 2, 0.9) == [0.0, 0.0]
    assert discounted_returns(1.0, 2, 1.0) == [1.0, 1.0]  # γ = 1: no discount
    assert discounted_returns(1.0, 0, 0.9) == []


# --- step groups -----------------------------------------------------------------------------


def test_step_groups_join_equal_keys_and_keep_none_alone() -> None:
    keys = [["A", "B", "A"], ["A", None, "C"], [None]]
    groups = step_groups(keys)
    assert groups == [
        [(0, 0), (0, 2), (1, 0)],  # A: across trajectories and a revisit within one
        [(0, 1)],  # B
        [(1, 1)],  # None: alone
        [(1, 2)],  # C
        [(2, 0)],  # None: alone, even next to another None
    ]
    assert sorted(ref for g in groups for ref in g) == [
        (i, t) for i, k in enumerate(keys) for t in range(len(k))
    ]


# --- step advantages -------------------------------------------------------------------------


def test_shared_state_then_divergence() -> None:
    """Two episodes act from page A; one then succeeds on B, the other fails on C."""
    keys = [["A", "B"], ["A", "C"]]
    # γ = 0.5: returns [0.5, 1.0] and [0, 0]; step group A holds 0.5 and 0
    credit = gigpo_advantages([1.0, 0.0], keys, scale="none", step_weight=1.0, gamma=0.5)
    assert credit.step == [[0.25, 0.0], [-0.25, 0.0]]  # A: mean 0.25; B, C: seen once
    assert credit.episode == [0.5, -0.5]  # rewards centred
    assert credit.advantages == [[0.75, 0.5], [-0.75, -0.5]]
    assert credit.grouped == [[True, False], [True, False]] and credit.grouped_turns == 2
    # 'std': population std of the step group (0.25) and of the rewards (0.5), plus eps
    std = gigpo_advantages([1.0, 0.0], keys, scale="std", step_weight=1.0, gamma=0.5)
    step, ep = 0.25 / (0.25 + EPS), 0.5 / (0.5 + EPS)
    assert std.step[0] == pytest.approx([step, 0.0], rel=1e-9)
    assert std.step[1] == pytest.approx([-step, 0.0], rel=1e-9)
    assert std.episode == pytest.approx([ep, -ep], rel=1e-6)
    assert std.advantages[0] == pytest.approx([ep + step, ep], rel=1e-6)
    assert std.advantages[1] == pytest.approx([-ep - step, -ep], rel=1e-6)


def test_states_seen_once_give_zero_step_advantage() -> None:
    credit = gigpo_advantages([1.0, 0.0, 0.0], [["A", "B"], ["C"], ["D", "E", "F"]], gamma=0.5)
    assert credit.step == [[0.0, 0.0], [0.0], [0.0, 0.0, 0.0]]
    assert credit.grouped_turns == 0
    ep = credit.episode
    assert credit.advantages == [[ep[0]] * 2, [ep[1]], [ep[2]] * 3]  # episode-level only


def test_equal_returns_give_zero_step_advantage() -> None:
    # every episode fails: returns all 0 in the shared states
    fails = gigpo_advantages([0.0, 0.0, 0.0], [["A", "B"], ["A", "B"], ["A"]], gamma=0.9)
    assert fails.step == [[0.0, 0.0], [0.0, 0.0], [0.0]] and fails.grouped_turns == 5
    assert fails.advantages == [[0.0, 0.0], [0.0, 0.0], [0.0]]
    # every episode succeeds along the same path: equal returns per state, exactly 0
    same = gigpo_advantages([1.0, 1.0], [["A", "B", "C"]] * 2, gamma=0.9)
    assert same.step == [[0.0] * 3] * 2 and same.advantages == [[0.0] * 3] * 2


def test_discount_prefers_the_shorter_success_from_a_shared_state() -> None:
    """From S, episode 0 succeeds in 2 turns and episode 1 in 3: both rewarded, so the
    episode advantage is 0 and only the step level tells them apart."""
    keys = [["S", "P"], ["S", "Q", "R"]]
    credit = gigpo_advantages([1.0, 1.0], keys, scale="none", gamma=0.9)
    # returns at S: 0.9 and 0.81, mean 0.855
    assert credit.episode == [0.0, 0.0]
    assert credit.step[0] == pytest.approx([0.045, 0.0], abs=1e-12)
    assert credit.step[1] == pytest.approx([-0.045, 0.0, 0.0], abs=1e-12)
    assert credit.advantages[0][0] > 0 > credit.advantages[1][0]
    std = gigpo_advantages([1.0, 1.0], keys, scale="std", gamma=0.9)
    assert std.step[0][0] == pytest.approx(0.045 / (0.045 + EPS), rel=1e-9)


def test_advantage_is_episode_plus_weighted_step() -> None:
    keys = [["A", "B"], ["A", "C"]]
    half = gigpo_advantages([1.0, 0.0], keys, scale="none", step_weight=0.5, gamma=0.5)
    # episode ±0.5, step ±0.25 at A: 0.5 + 0.5 · 0.25 = 0.625
    assert half.advantages == [[0.625, 0.5], [-0.625, -0.5]]
    off = gigpo_advantages([1.0, 0.0], keys, scale="none", step_weight=0.0, gamma=0.5)
    assert off.advantages == [[0.5, 0.5], [-0.5, -0.5]]
    # the episode level is exactly group_advantages
    rewards = [1.0, 0.0, 0.0, 1.0, 0.0]
    credit = gigpo_advantages(rewards, [["A"]] * 5, scale="std", gamma=0.9)
    expected = group_advantages(torch.tensor(rewards), "std")
    assert credit.episode == pytest.approx(expected.tolist(), rel=1e-6)


def test_none_state_keys_are_groups_of_their_own() -> None:
    credit = gigpo_advantages([1.0, 0.0], [[None, None], [None, None]], gamma=0.5)
    assert credit.step == [[0.0, 0.0], [0.0, 0.0]]
    assert credit.grouped == [[False, False], [False, False]] and credit.grouped_turns == 0
    assert credit.advantages == [[credit.episode[0]] * 2, [credit.episode[1]] * 2]


def test_step_advantages_check_their_arguments() -> None:
    with pytest.raises(ValueError, match="'std' or 'none'"):
        step_advantages([[1.0]], [[(0, 0)]], scale="max")
    with pytest.raises(ValueError, match="2 rewards for 1 trajectories"):
        gigpo_advantages([1.0, 0.0], [["A"]])


# --- build_rl_batch --------------------------------------------------------------------------


def _turn(key: str | None, version: int | None = None) -> Turn:
    return Turn(
        prompt_ids=[3, 4, 5],
        completion_ids=[6, 7],
        completion_logprobs=[-1.0, -1.0],
        text="",
        action=None,
        weight_version=version,
        state_key=key,
    )


def _traj(reward: float, keys: list[str | None]) -> Trajectory:
    return Trajectory("t", 0, [_turn(k) for k in keys], reward=reward, status="done")


def _grp(*trajs: Trajectory) -> Group:
    return Group(Task(task_id="t", intent="x", start_url=""), list(trajs))


def _per_traj(batch) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for i, s in zip(batch.traj, batch.samples, strict=True):
        out.setdefault(i, []).append(s.advantage)
    return out


def _close(got: dict[int, list[float]], want: dict[int, list[float]]) -> bool:
    return got.keys() == want.keys() and all(
        got[k] == pytest.approx(want[k], rel=1e-6, abs=1e-9) for k in want
    )


def test_build_rl_batch_gigpo_gives_each_turn_its_advantage() -> None:
    group = _grp(_traj(1.0, ["A", "B"]), _traj(0.0, ["A", "C"]), _traj(0.0, ["D"]))
    batch = build_rl_batch([group], "none", advantage="gigpo", step_weight=1.0, step_gamma=0.5)
    # rewards [1, 0, 0]: episode 2/3, -1/3, -1/3; A holds returns 0.5 and 0: step ±0.25
    adv = _per_traj(batch)
    assert adv[0] == pytest.approx([2 / 3 + 0.25, 2 / 3], rel=1e-6)
    assert adv[1] == pytest.approx([-1 / 3 - 0.25, -1 / 3], rel=1e-6)
    assert adv[2] == pytest.approx([-1 / 3], rel=1e-6)
    assert batch.step_group_turns == 2 and len(batch.samples) == 5
    assert [s.turn_index for s in batch.samples] == [0, 1, 0, 1, 0]
    # 'episode' (the default): every turn carries its trajectory's group advantage
    old = build_rl_batch([group], "none")
    assert _close(_per_traj(old), {0: [2 / 3] * 2, 1: [-1 / 3] * 2, 2: [-1 / 3]})
    assert old.step_group_turns == 0
    std = build_rl_batch([group])
    ep = group_advantages(torch.tensor([1.0, 0.0, 0.0]), "std").tolist()
    assert _close(_per_traj(std), {0: [ep[0]] * 2, 1: [ep[1]] * 2, 2: [ep[2]]})
    with pytest.raises(ValueError, match="advantage must be one of"):
        build_rl_batch([group], advantage="turn")


def test_build_rl_batch_gigpo_with_equal_rewards_and_stale_turns() -> None:
    # both succeed, from S in 2 and 3 turns: dropped as an equal group unless kept
    group = _grp(_traj(1.0, ["S", "P"]), _traj(1.0, ["S", "Q", "R"]))
    dropped = build_rl_batch([group], "none", advantage="gigpo", step_gamma=0.9)
    assert dropped.groups_equal == 1 and not dropped.samples
    kept = build_rl_batch(
        [group], "none", drop_equal_groups=False, advantage="gigpo", step_gamma=0.9
    )
    adv = _per_traj(kept)
    assert adv[0] == pytest.approx([0.045, 0.0], abs=1e-9)
    assert adv[1] == pytest.approx([-0.045, 0.0, 0.0], abs=1e-9)
    assert kept.step_group_turns == 2
    # a stale turn is left out, but its return still shapes its step group's advantages
    mixed = _grp(_traj(1.0, ["A", "B"]), _traj(0.0, ["A", "C"]))
    for t in mixed.trajectories:
        for u in t.turns:
            u.weight_version = 4
    mixed.trajectories[1].turns[0].weight_version = 2
    batch = build_rl_batch(
        [mixed], "none", version=4, advantage="gigpo", step_weight=1.0, step_gamma=0.5
    )
    assert batch.turns_stale == 1 and batch.step_group_turns == 1
    assert _close(_per_traj(batch), {0: [0.75, 0.5], 1: [-0.5]})


# --- config ----------------------------------------------------------------------------------


def test_config_settings_and_their_checks() -> None:
    rl = load_config(None, []).rl
    assert (rl.advantage, rl.step_weight, rl.step_gamma) == ("episode", 1.0, 0.95)
    rl = load_config(None, ["rl.advantage=gigpo", "rl.step_weight=0", "rl.step_gamma=1"]).rl
    assert (rl.advantage, rl.step_weight, rl.step_gamma) == ("gigpo", 0.0, 1.0)
    with pytest.raises(ConfigError, match="rl.advantage must be 'episode' or 'gigpo'"):
        load_config(None, ["rl.advantage=step"])
    with pytest.raises(ConfigError, match=r"rl.step_weight must be a finite number >= 0"):
        load_config(None, ["rl.step_weight=-0.5"])
    for gamma in ("0", "-0.1", "1.5"):
        with pytest.raises(ConfigError, match=r"rl.step_gamma must be in \(0, 1\]"):
            load_config(None, [f"rl.step_gamma={gamma}"])
    with pytest.raises(ConfigError, match="rl.step_weight must be a finite"):
        RLConfig(step_weight=math.inf)
    with pytest.raises(ConfigError, match="rl.step_gamma"):
        RLConfig(step_gamma=math.nan)


# --- state keys ------------------------------------------------------------------------------


def test_state_key_is_a_short_stable_hash_of_the_rendered_observation() -> None:
    home = Observation(url="http://x/", title="Home", text="[1] link")
    key = state_key(home)
    assert len(key) == 16 and int(key, 16) >= 0
    assert state_key(Observation(url="http://x/", title="Home", text="[1] link")) == key
    assert state_key(Observation(url="http://x/?q", title="Home", text="[1] link")) != key
    assert state_key(Observation(url="http://x/", title="Home", text="[2] link")) != key
    assert state_key(Observation("http://x/", "Home", "[1] link", error="no [9]")) != key
    # the same page served on two ports (two Ray workers' sites), shown alike: one key
    on = [Observation(f"http://127.0.0.1:{p}/", "Home", "[1] link") for p in (41001, 41002)]
    shown = [dataclasses.replace(o, shown_url="http://127.0.0.1:7770/") for o in on]
    assert state_key(on[0]) != state_key(on[1])
    assert state_key(shown[0]) == state_key(shown[1])


async def test_rollout_records_the_key_of_the_observation_before_each_action() -> None:
    tok = FakeTokenizer()
    engine = ScriptedEngine(tok, [CLICK, EXIT])
    groups = await collect(make_tasks(2), 3, engine, FakeEnvPool(4), tok, progress=False)
    home = state_key(Observation("http://x/", "Home", '[1] link "Orbit Golden Charger"'))
    product = state_key(Observation("http://x/p", "Product", "Price: $12.00"))
    for g in groups:
        for traj in g.trajectories:
            assert [u.state_key for u in traj.turns] == [home, product]


def test_state_key_survives_files_and_older_files_load(tmp_path: Path) -> None:
    traj = _traj(1.0, ["0123456789abcdef", None])
    path = tmp_path / "t.jsonl"
    write_trajectories([traj], path)
    [back] = read_trajectories(path)
    assert [u.state_key for u in back.turns] == ["0123456789abcdef", None]
    d = traj.to_dict()
    for u in d["turns"]:
        del u["state_key"]  # a line written before the field existed
    assert [u.state_key for u in parse_trajectory_line(json.dumps(d)).turns] == [None, None]
    d["turns"][0]["state_key"] = 5
    with pytest.raises(TrajectoryFileError, match="turn 0: state_key must be a string or null"):
        parse_trajectory_line(json.dumps(d))
