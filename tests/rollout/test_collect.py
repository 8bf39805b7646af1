"""collect() over fake envs and a scripted engine: exact ids, concurrency, retries, modes."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fakes import (
    CLICK,
    EXIT,
    FakeEnv,
    FakeEnvPool,
    FakeTokenizer,
    ScriptedEngine,
    make_tasks,
)
from webagent_r1.config import AgentConfig
from webagent_r1.policy.base import SamplingParams
from webagent_r1.rollout.collect import (
    ROLLOUT_MODES,
    Group,
    RolloutStats,
    _Progress,
    collect,
    run_episode,
    turns_by_outcome,
    turns_by_outcome_metrics,
)
from webagent_r1.rollout.trajectories import turn_samples
from webagent_r1.types import Trajectory, Turn

TOK = FakeTokenizer()


def _check_groups(groups: list[Group], tasks, group_size: int) -> None:
    assert [g.task.task_id for g in groups] == [t.task_id for t in tasks]
    for i, g in enumerate(groups):
        assert len(g.trajectories) == group_size
        assert [t.info["member"] for t in g.trajectories] == list(range(group_size))
        assert all(t.group_id == i and t.task_id == g.task.task_id for t in g.trajectories)


async def test_stored_ids_are_exactly_the_sampled_ids() -> None:
    engine = ScriptedEngine(TOK, [CLICK, EXIT])
    tasks = make_tasks(3)
    groups = await collect(tasks, 2, engine, FakeEnvPool(4), TOK, progress=False)
    _check_groups(groups, tasks, 2)
    turns = [turn for g in groups for t in g.trajectories for turn in t.turns]
    assert len(turns) == len(engine.sampled) == 12
    sampled = {id(c.token_ids) for c in engine.sampled}
    for turn in turns:
        match = [c for c in engine.sampled if c.token_ids == turn.completion_ids]
        assert match and match[0].logprobs == turn.completion_logprobs
        # The engine's ids are a non-canonical tokenisation of the text: not re-tokenised.
        assert turn.completion_ids != TOK.encode(turn.text) + [TOK.eos_token_id]
        assert id(turn.completion_ids) not in sampled  # a copy, not the engine's list
    # The prompt ids are the chat template of the compressed context.
    first = groups[0].trajectories[0]
    assert TOK.decode(first.turns[0].prompt_ids).startswith("<|system|>")
    assert "[page omitted]" in TOK.decode(first.turns[1].prompt_ids)
    assert all(t.reward == 1.0 and t.status == "done" for g in groups for t in g.trajectories)


async def test_turn_samples_concatenate_stored_ids_without_retokenising() -> None:
    engine = ScriptedEngine(TOK, [CLICK, EXIT])
    [g] = await collect(make_tasks(1), 1, engine, FakeEnvPool(1), TOK, progress=False)
    traj = g.trajectories[0]
    samples = turn_samples(traj, advantage=0.5)
    assert len(samples) == len(traj.turns) == 2
    for s, turn in zip(samples, traj.turns, strict=True):
        assert s.input_ids == turn.prompt_ids + turn.completion_ids
        n_p, n_c = len(turn.prompt_ids), len(turn.completion_ids)
        assert s.prompt_len == n_p and s.completion_mask == [0] * n_p + [1] * n_c
        assert s.labels[:n_p] == [-100] * n_p and s.labels[n_p:] == turn.completion_ids
        assert s.old_logprobs == turn.completion_logprobs and s.advantage == 0.5
        assert s.num_turns == 2
    # A completion whose ids are not the canonical encoding of its text survives exactly.
    weird = TOK.char_ids("ab") + [TOK.eos_token_id]  # canonical: one "ab" piece
    assert TOK.encode("ab") != TOK.char_ids("ab")
    traj.turns[0].completion_ids = weird
    traj.turns[0].completion_logprobs = [-1.0] * len(weird)
    assert turn_samples(traj)[0].input_ids[-len(weird) :] == weird


async def test_async_episodes_overlap_and_refill_slots() -> None:
    engine = ScriptedEngine(TOK, [CLICK, EXIT], latency_s=0.02)
    tasks = make_tasks(4)
    stats = RolloutStats()
    groups = await collect(
        tasks,
        2,
        engine,
        FakeEnvPool(3, step_s=0.02),
        TOK,
        max_concurrent_episodes=3,
        progress=False,
        stats=stats,
    )
    _check_groups(groups, tasks, 2)
    trajs = [t for g in groups for t in g.trajectories]
    spans = [(t.turns[0].timings["gen_start"], t.turns[-1].timings["env_end"]) for t in trajs]
    # Some episode's generation runs while another episode's env step runs.
    gens = [(u.timings["gen_start"], u.timings["gen_end"]) for t in trajs for u in t.turns]
    envs = [(u.timings["env_start"], u.timings["env_end"]) for t in trajs for u in t.turns]
    assert any(g0 < e1 and e0 < g1 for g0, g1 in gens for e0, e1 in envs)
    # At most 3 episodes at once, and at some moment 3 were running.
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running, peak = 0, 0
    for _, d in events:
        running += d
        peak = max(peak, running)
    assert peak == 3
    assert stats.episodes == 8 and stats.successes == 8 and stats.turns == 16
    assert stats.tokens == sum(len(u.completion_ids) for t in trajs for u in t.turns)
    m = stats.metrics()
    assert m["rollout/success_rate"] == 1.0 and m["rollout/env_steps_per_s"] > 0


async def test_calls_sharing_stats_sum_them_and_each_bar_counts_its_own() -> None:
    tasks = make_tasks(2)
    stats = RolloutStats()
    kw = dict(max_concurrent_episodes=2, progress=False, stats=stats)
    await collect(tasks, 2, ScriptedEngine(TOK, [CLICK, EXIT]), FakeEnvPool(2), TOK, **kw)
    assert stats.wall_s > 0
    stats.wall_s = 1000.0  # as if the first call took 1000 s
    bar = _Progress(4, stats, False, "rollout")  # the second round's bar
    assert bar.line()[0] == 0 and bar.line()[1].startswith("success 0/0 ")
    await collect(tasks, 2, ScriptedEngine(TOK, [CLICK, EXIT]), FakeEnvPool(2), TOK, **kw)
    assert (stats.episodes, stats.successes, stats.turns) == (8, 8, 16)  # both calls
    assert stats.wall_s > 1000.0  # summed, not the last call's
    done, info = bar.line()
    assert done == 4 and info.startswith("success 4/4 ")  # not 8/8 over a total of 4


@pytest.mark.parametrize("mode", sorted(ROLLOUT_MODES))
async def test_env_errors_are_retried_and_never_failures(mode: str) -> None:
    tasks = make_tasks(2)
    tasks[0].extra["fail_resets"] = 1  # first reset fails, the retry works
    tasks[1].extra["fail_resets"] = 10  # never works: stays env_error after the retries
    stats = RolloutStats()
    pool = FakeEnvPool(4)
    groups = await collect(
        tasks,
        2,
        ScriptedEngine(TOK, [CLICK, EXIT]),
        pool,
        TOK,
        max_concurrent_episodes=4,
        max_env_retries=2,
        progress=False,
        mode=mode,
        stats=stats,
    )
    _check_groups(groups, tasks, 2)
    assert [t.status for t in groups[0].trajectories] == ["done", "done"]
    assert sorted(t.info["attempt"] for t in groups[0].trajectories) == [0, 1]
    assert [t.status for t in groups[1].trajectories] == ["env_error", "env_error"]
    assert groups[1].usable == [] and len(groups[0].usable) == 2
    assert all(t.info["attempt"] == 2 for t in groups[1].trajectories)
    assert stats.env_errors == 1 + 2 * 3 and stats.dropped == 2
    assert stats.successes == 2 and stats.metrics()["rollout/success_rate"] == 1.0
    assert pool.failures == {"t0": 1, "t1": 6}


def _episode(n_turns: int, reward: float, status: str = "done") -> Trajectory:
    turns = [Turn([1], [2], [-1.0], "", None) for _ in range(n_turns)]
    return Trajectory(task_id="t", group_id=0, turns=turns, reward=reward, status=status)


def test_turns_by_outcome_leave_env_errors_out() -> None:
    trajs = [
        _episode(2, 1.0),
        _episode(4, 1.0),
        _episode(5, 0.0, "max_turns"),
        _episode(3, 0.0),
        _episode(1, 0.0),
        _episode(7, 0.0, "env_error"),  # neither a success nor a failure
        _episode(9, 1.0, "env_error"),
    ]
    sums = turns_by_outcome(trajs)
    # successes: 2 + 4 turns over 2 episodes; failures: 5 + 3 + 1 turns over 3 episodes
    assert sums == [6.0, 2.0, 9.0, 3.0]
    assert turns_by_outcome_metrics(sums) == {
        "rollout/turns": 15 / 5,  # the env errors' 16 turns in neither sum
        "rollout/turns_success": 3.0,
        "rollout/turns_failure": 3.0,
    }
    # two processes' sums add: (6 + 5) / (2 + 1) and (9 + 0) / (3 + 0)
    other = turns_by_outcome([_episode(5, 1.0)])
    assert other == [5.0, 1.0, 0.0, 0.0]
    merged = turns_by_outcome_metrics([a + b for a, b in zip(sums, other, strict=True)])
    assert merged == {
        "rollout/turns": 20 / 6,
        "rollout/turns_success": 11 / 3,
        "rollout/turns_failure": 3.0,
    }


def test_turns_by_outcome_omit_an_outcome_without_episodes() -> None:
    failed = turns_by_outcome([_episode(2, 0.0), _episode(4, 0.0), _episode(3, 1.0, "env_error")])
    assert turns_by_outcome_metrics(failed) == {"rollout/turns": 3.0, "rollout/turns_failure": 3.0}
    assert turns_by_outcome_metrics(turns_by_outcome([_episode(1, 1.0)])) == {
        "rollout/turns": 1.0,
        "rollout/turns_success": 1.0,
    }
    assert turns_by_outcome([]) == [0.0, 0.0, 0.0, 0.0]
    assert turns_by_outcome_metrics(turns_by_outcome([])) == {}


async def test_lockstep_gives_the_same_group_structure() -> None:
    tasks = make_tasks(3)
    out = {}
    for mode in ("async", "lockstep"):
        engine = ScriptedEngine(TOK, [CLICK, EXIT])
        out[mode] = await collect(
            tasks,
            2,
            engine,
            FakeEnvPool(4),
            TOK,
            params=SamplingParams(seed=7),
            max_concurrent_episodes=4,
            progress=False,
            mode=mode,
        )
        _check_groups(out[mode], tasks, 2)
    a = [
        [u.prompt_ids + u.completion_ids for t in g.trajectories for u in t.turns]
        for g in out["async"]
    ]
    b = [
        [u.prompt_ids + u.completion_ids for t in g.trajectories for u in t.turns]
        for g in out["lockstep"]
    ]
    assert a == b
    assert [g.rewards for g in out["async"]] == [g.rewards for g in out["lockstep"]]


async def test_lockstep_batches_generation_per_turn() -> None:
    engine = ScriptedEngine(TOK, [CLICK, EXIT])
    await collect(
        make_tasks(3),
        2,
        engine,
        FakeEnvPool(4),
        TOK,
        max_concurrent_episodes=4,
        progress=False,
        mode="lockstep",
    )
    # Batches of 4 then 2 episodes, two turns each: one generate call per batch and turn.
    assert engine.calls == [4, 4, 2, 2]


async def test_lockstep_wall_time_ends_with_the_episode() -> None:
    """In lockstep a batch's episodes are closed together; each one's wall time still ends
    at its own last step: one env ends its episodes after 1 turn, the other after 5."""
    pool = FakeEnvPool(2, step_s=0.1)
    pool.envs[0].max_turns = 1
    [group] = await collect(
        make_tasks(1),
        2,
        ScriptedEngine(TOK, [CLICK]),
        pool,
        TOK,
        max_concurrent_episodes=2,
        progress=False,
        mode="lockstep",
    )
    short, long = sorted(group.trajectories, key=lambda t: len(t.turns))
    assert (len(short.turns), len(long.turns)) == (1, 5)
    # the long episode's 4 more steps (0.1 s each) are not in the short one's time
    assert short.info["wall_s"] < long.info["wall_s"] - 0.3


async def test_seeded_turns_get_distinct_seeds() -> None:
    engine = ScriptedEngine(TOK, [CLICK, EXIT])
    await collect(
        make_tasks(2), 2, engine, FakeEnvPool(2), TOK, params=SamplingParams(seed=3), progress=False
    )
    assert len(engine.seeds) == 8 and len(set(engine.seeds)) == 8


async def test_cancellation_closes_every_episode() -> None:
    engine = ScriptedEngine(TOK, [CLICK, EXIT])
    engine.gate = asyncio.Event()  # generation blocks: episodes sit mid-turn
    pool = FakeEnvPool(3)
    job = asyncio.create_task(
        collect(make_tasks(4), 2, engine, pool, TOK, max_concurrent_episodes=3, progress=False)
    )
    for _ in range(200):
        await asyncio.sleep(0.005)
        if pool.open_episodes() == 3:
            break
    assert pool.open_episodes() == 3
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert pool.open_episodes() == 0
    assert pool._q().qsize() == 3  # every env was released


async def test_engine_errors_propagate_and_close_episodes() -> None:
    pool = FakeEnvPool(2)
    with pytest.raises(RuntimeError, match="engine exploded"):
        await collect(
            make_tasks(2), 2, ScriptedEngine(TOK, [CLICK], fail=True), pool, TOK, progress=False
        )
    assert pool.open_episodes() == 0


async def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown rollout mode"):
        await collect(
            make_tasks(1),
            1,
            ScriptedEngine(TOK, [EXIT]),
            FakeEnvPool(1),
            TOK,
            progress=False,
            mode="sync",
        )
    with pytest.raises(ValueError, match="pool has 1 envs"):
        await collect(
            make_tasks(2),
            1,
            ScriptedEngine(TOK, [EXIT]),
            FakeEnvPool(1),
            TOK,
            max_concurrent_episodes=2,
            progress=False,
            mode="lockstep",
        )


async def test_run_episode_keeps_its_signature() -> None:
    env = FakeEnv({})
    engine = ScriptedEngine(TOK, ["no action here", EXIT])
    traj = await run_episode(
        env, engine, TOK, make_tasks(1)[0], AgentConfig(), SamplingParams(), group_id="g"
    )
    assert traj.group_id == "g" and traj.reward == 1.0 and len(traj.turns) == 2
    assert traj.turns[0].error and traj.turns[0].action is None
    assert traj.turns[1].action.kind == "exit" and env.session is None
    assert set(traj.turns[0].timings) >= {"gen_start", "gen_end", "env_start", "env_end"}
