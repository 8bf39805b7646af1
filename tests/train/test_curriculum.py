"""The adaptive curriculum (``train/curriculum.py``): weights, floor, splits, state, stopping.

Pure logic: synthetic tasks and groups, no browser, no model (one test builds the real suite).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from webagent_r1.config import ConfigError, RLConfig, load_config
from webagent_r1.rollout.collect import Group
from webagent_r1.train.curriculum import (
    CURRICULA,
    Curriculum,
    SuccessTracker,
    collect_step,
    is_mixed,
    mixed_weights,
    more_groups,
    more_rounds,
    step_tasks,
    template_key,
)
from webagent_r1.train.rl import step_tasks as rl_step_tasks
from webagent_r1.types import Task


def make_tasks(
    templates: dict[str, int], split: str = "train", heldout: bool = False
) -> list[Task]:
    """``n`` instances of each named template, ids ``<template>/<k>``."""
    return [
        Task(
            task_id=f"{name}/{k:03d}",
            intent=f"{name} #{k}",
            start_url="__SHOPPING__/",
            split=split,
            heldout_template=heldout,
            extra={"template": name},
        )
        for name, n in templates.items()
        for k in range(n)
    ]


def group(task: Task, rewards: list[float], status: str = "done") -> Group:
    """A group of ``task`` with these rewards (duck-typed trajectories)."""
    return Group(task, [SimpleNamespace(reward=r, status=status) for r in rewards])  # type: ignore[misc]


def outcome(cur: Curriculum, task: Task, succ: float, fail: float) -> list[float]:
    """An outcome vector with one task's counts."""
    vec = [0.0] * (2 * len(cur.tasks))
    i = cur.index[str(task.task_id)]
    vec[2 * i], vec[2 * i + 1] = succ, fail
    return vec


# ---- mixed weights -------------------------------------------------------------------


def test_mixed_weights_by_hand() -> None:
    # p(1-p) = [0.25, 0.09, 0.0], sum 0.34; floor 0.25 over 3 templates = 1/12 each
    w = mixed_weights([0.5, 0.1, 1.0], floor=0.25)
    assert w[0] == pytest.approx(1 / 12 + 0.75 * 0.25 / 0.34)  # 0.6348
    assert w[1] == pytest.approx(1 / 12 + 0.75 * 0.09 / 0.34)  # 0.2819
    assert w[2] == pytest.approx(1 / 12)
    assert sum(w) == pytest.approx(1.0)
    # no floor: proportional to p(1-p); p and 1-p weigh alike
    assert mixed_weights([0.2, 0.8, 0.5], 0.0) == pytest.approx(
        [0.16 / 0.57, 0.16 / 0.57, 0.25 / 0.57]
    )
    assert mixed_weights([], 0.2) == []


def test_floor_keeps_templates_at_zero_and_one() -> None:
    w = mixed_weights([0.0, 1.0, 0.5], floor=0.3)
    assert w == pytest.approx([0.1, 0.1, 0.1 + 0.7])  # each gets floor / K = 0.1
    # every template at 0 or 1: the variance term is uniform too
    assert mixed_weights([0.0, 1.0], floor=0.0) == pytest.approx([0.5, 0.5])
    # floor 1: uniform whatever the estimates
    assert mixed_weights([0.0, 0.5, 0.9, 1.0], floor=1.0) == pytest.approx([0.25] * 4)


def test_curriculum_weights_follow_the_estimates_and_unseen_get_the_prior() -> None:
    tasks = make_tasks({"a": 4, "b": 4, "c": 4})
    cur = Curriculum(tasks, "mixed", floor=0.3, decay=1.0)
    assert cur.weights() == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})  # all at ½
    a0, b0 = cur.by_template["a"][0], cur.by_template["b"][0]
    vec = [x + y for x, y in zip(outcome(cur, a0, 0, 18), outcome(cur, b0, 9, 9), strict=True)]
    cur.record(0, vec)
    # Beta(1, 1) prior: a = 1/20, b = 10/20 = 1/2, c unseen = 1/2
    pa, pb, pc = 1 / 20, 0.5, 0.5
    assert cur.estimate("a").mean == pytest.approx(pa)
    assert cur.estimate("c").mean == pytest.approx(pc) and cur.estimate("c").n == 0
    var = [pa * (1 - pa), pb * (1 - pb), pc * (1 - pc)]
    want = [0.1 + 0.7 * v / sum(var) for v in var]
    assert list(cur.weights().values()) == pytest.approx(want)
    assert cur.metrics() == pytest.approx(
        {"curriculum/p/a": pa, "curriculum/p/b": pb, "curriculum/p/c": pc}
    )
    # per-instance estimate of the task that was rolled out; the rest have the prior
    assert cur.task_estimate(a0).mean == pytest.approx(pa)
    assert cur.task_estimate(cur.by_template["a"][1]).mean == pytest.approx(0.5)


def test_mixed_draws_follow_the_weights_and_the_floor() -> None:
    tasks = make_tasks({"easy": 50, "hard": 50, "edge": 50})
    cur = Curriculum(tasks, "mixed", floor=0.3, decay=1.0)
    vec = [0.0] * (2 * len(tasks))
    for t, (s, f) in [("easy", (1000, 0)), ("hard", (0, 1000)), ("edge", (500, 500))]:
        o = outcome(cur, cur.by_template[t][0], s, f)
        vec = [x + y for x, y in zip(vec, o, strict=True)]
    cur.record(0, vec)
    w = cur.weights()
    assert w["easy"] == pytest.approx(0.1, abs=5e-3) and w["hard"] == pytest.approx(0.1, abs=5e-3)
    counts: Counter[str] = Counter()
    for step in range(1, 401):
        counts.update(template_key(t) for t in cur.draw(step, 5))
    n = sum(counts.values())
    assert counts["easy"] / n == pytest.approx(0.1, abs=0.03)  # the floor share, not 0
    assert counts["hard"] / n == pytest.approx(0.1, abs=0.03)
    assert counts["edge"] / n == pytest.approx(0.8, abs=0.04)


# ---- success tracking ----------------------------------------------------------------


def test_tracker_decays_old_counts_and_gives_beta_moments() -> None:
    tr = SuccessTracker(prior=1.0, decay=0.5)
    tr.observe("t", 2, 0, step=0)
    tr.observe("t", 0, 1, step=2)  # the step-0 counts weigh 0.5² = 0.25: [0.5, 0] + [0, 1]
    assert tr.counts["t"] == pytest.approx([0.5, 1.0])
    e = tr.estimate("t")
    a, b = 1.5, 2.0
    assert e.mean == pytest.approx(a / (a + b))
    assert e.std == pytest.approx(math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1))))
    assert e.n == pytest.approx(1.5)
    tr.observe("t", 1, 0, step=2)  # same step: no further decay
    assert tr.counts["t"] == pytest.approx([1.5, 1.0])
    u = tr.estimate("unseen")
    assert (u.mean, u.n) == (0.5, 0) and u.std == pytest.approx(math.sqrt(1 / 12))
    with pytest.raises(ValueError, match="decay"):
        SuccessTracker(decay=0.0)


def test_outcome_vector_counts_usable_members_only() -> None:
    tasks = make_tasks({"a": 2})
    cur = Curriculum(tasks, "mixed")
    g = Group(
        tasks[1],
        [
            SimpleNamespace(reward=1.0, status="done"),
            SimpleNamespace(reward=0.0, status="max_turns"),
            SimpleNamespace(reward=0.0, status="env_error"),  # never a failure
        ],  # type: ignore[list-item]
    )
    assert cur.outcome_vector([g]) == [0.0, 0.0, 1.0, 1.0]
    other = make_tasks({"zzz": 1})[0]
    with pytest.raises(KeyError, match="not a curriculum task"):
        cur.outcome_vector([group(other, [1.0, 0.0])])


# ---- never test tasks or held-out templates --------------------------------------------


def test_curriculum_refuses_test_and_heldout_tasks() -> None:
    train = make_tasks({"a": 3})
    for bad in (make_tasks({"b": 1}, split="test"), make_tasks({"h": 1}, heldout=True)):
        with pytest.raises(ValueError, match="not training tasks"):
            Curriculum(train + bad, "mixed")
    with pytest.raises(ValueError, match="unknown curriculum"):
        Curriculum(train, "greedy")


@pytest.fixture(scope="module")
def real_train_tasks() -> list[Task]:
    from webagent_r1.sources.embedded.suite import run_tasks

    return run_tasks("train", [], [], ["1-2"])


@pytest.mark.parametrize("sampler", CURRICULA)
def test_samplers_draw_only_training_tasks_of_the_suite(
    sampler: str, real_train_tasks: list[Task]
) -> None:
    from webagent_r1.sources.embedded.suite import build_suite, select

    test_ids = {t.task_id for t in select(build_suite(), split="test")}
    heldout = {t.extra["template"] for t in select(build_suite(), split="heldout")}
    cur = Curriculum(real_train_tasks, sampler, seed=3)
    for step in range(30):
        for rnd in range(2):
            for t in cur.draw(step, 8, rnd):
                assert t.split == "train" and not t.heldout_template
                assert t.task_id not in test_ids
                assert t.extra["template"] not in heldout
        # drive the estimates away from the prior so ``mixed`` changes its weights
        first = cur.tasks[step % len(cur.tasks)]
        cur.record(step, outcome(cur, first, step % 3, 2))


# ---- uniform is today's draw; draws are deterministic ----------------------------------


def test_uniform_equals_step_tasks() -> None:
    tasks = make_tasks({"a": 7, "b": 5, "c": 9})
    cur = Curriculum(tasks, "uniform", seed=11)
    assert rl_step_tasks is step_tasks  # the trainer's name still works
    for step in range(20):
        want = step_tasks(tasks, step, 8, 11)
        cur.record(step, outcome(cur, tasks[step], 1, 3))  # estimates do not change uniform
        assert cur.draw(step, 8) == want
    assert len(cur.draw(0, 100)) == len(tasks)  # B above the split: the whole split


def test_draws_are_a_function_of_seed_step_and_state() -> None:
    tasks = make_tasks({"a": 6, "b": 6, "c": 6})
    a, b = Curriculum(tasks, "mixed", seed=5), Curriculum(tasks, "mixed", seed=5)
    assert [t.task_id for t in a.draw(4, 6)] == [t.task_id for t in b.draw(4, 6)]
    c = Curriculum(tasks, "mixed", seed=6)
    draws = {tuple(t.task_id for t in c.draw(s, 6)) for s in range(10)}
    assert len(draws) > 1
    one = a.draw(5, 4)
    assert len({t.task_id for t in one}) == 4  # distinct within a draw


def test_state_round_trip_gives_identical_next_draws() -> None:
    tasks = make_tasks({"a": 5, "b": 5, "c": 5, "d": 5})
    for sampler in CURRICULA:
        cur = Curriculum(tasks, sampler, seed=2, decay=0.7)
        for step in range(6):
            drawn = cur.draw(step, 4)
            cur.record(step, outcome(cur, drawn[0], step % 2, 1 + step % 3))
        # plain Python: survives torch.save and even JSON
        state = json.loads(json.dumps(cur.state_dict()))
        resumed = Curriculum(tasks, sampler, seed=2, decay=0.7)
        resumed.load_state_dict(state)
        assert resumed.weights() == pytest.approx(cur.weights())
        for step in range(6, 12):
            assert [t.task_id for t in resumed.draw(step, 4)] == [
                t.task_id for t in cur.draw(step, 4)
            ]
            assert [t.task_id for t in resumed.draw(step, 3, 1)] == [
                t.task_id for t in cur.draw(step, 3, 1)
            ]
            v = outcome(cur, tasks[step], 1, 1)
            cur.record(step, v)
            resumed.record(step, v)
        assert resumed.state_dict() == cur.state_dict()


# ---- fresh instances -----------------------------------------------------------------


def test_fresh_instances_cycle_through_a_template_before_repeating() -> None:
    tasks = make_tasks({"only": 6})
    cur = Curriculum(tasks, "mixed", seed=0, fresh=True)
    seen = [t.task_id for step in range(6) for t in cur.draw(step, 2)]
    assert sorted(seen[:6]) == sorted(t.task_id for t in tasks)  # all six before any repeat
    assert sorted(seen[6:]) == sorted(t.task_id for t in tasks)
    # without ``fresh`` instances repeat before the template is exhausted (seeded, so fixed)
    stale = Curriculum(tasks, "mixed", seed=0, fresh=False)
    ids = [t.task_id for step in range(3) for t in stale.draw(step, 2)]
    assert len(set(ids)) < 6


def test_later_rounds_avoid_instances_already_drawn_this_step() -> None:
    tasks = make_tasks({"a": 3, "b": 3})
    cur = Curriculum(tasks, "dynamic", seed=1)
    first = {t.task_id for t in cur.draw(0, 4)}
    second = {t.task_id for t in cur.draw(0, 2, 1)}
    assert not first & second
    third = cur.draw(0, 3, 2)  # all six drawn this step: repeats allowed, distinct in the round
    assert len({t.task_id for t in third}) == 3


# ---- dynamic sampling ----------------------------------------------------------------


def test_more_groups_stopping_rule() -> None:
    assert more_groups(mixed=8, target=8, extra=0, max_extra=8) == 0  # enough mixed groups
    assert more_groups(mixed=3, target=8, extra=0, max_extra=8) == 5  # the deficit
    assert more_groups(mixed=3, target=8, extra=6, max_extra=8) == 2  # what is left of the cap
    assert more_groups(mixed=3, target=8, extra=8, max_extra=8) == 0  # cap spent
    assert more_groups(mixed=0, target=8, extra=0, max_extra=0) == 0  # cap 0: plain mixed
    assert is_mixed([0.0, 1.0]) and not is_mixed([1.0, 1.0]) and not is_mixed([1.0])


async def test_dynamic_collects_until_b_mixed_groups_or_the_cap() -> None:
    # "easy" always succeeds, "hard" always fails, "edge" alternates: only edge groups mix
    tasks = make_tasks({"easy": 10, "hard": 10, "edge": 10})
    rounds: list[int] = []

    async def fake_collect(mine: list[Task], rnd: int) -> list[Group]:
        rounds.append(len(mine))
        rewards = {"easy": [1.0] * 4, "hard": [0.0] * 4, "edge": [0.0, 1.0, 0.0, 1.0]}
        return [group(t, rewards[template_key(t)]) for t in mine]

    cur = Curriculum(tasks, "dynamic", seed=0, floor=1.0, max_extra=12)
    got = await collect_step(cur, 0, 4, fake_collect)
    mixed = sum(is_mixed(g.rewards) for g in got.groups)
    assert got.mixed == mixed and got.total == len(got.groups) == sum(rounds)
    assert got.extra == got.total - 4 and got.rounds == len(rounds)
    assert mixed == 4 or got.extra == 12  # B mixed groups, or the cap reached
    assert mixed <= 4  # never more mixed groups than B
    # the estimates saw every group of every round
    n_obs = sum(cur.templates.estimate(m).n for m in ("easy", "hard", "edge"))
    assert n_obs == pytest.approx(4 * got.total)

    # a cap that binds: nothing mixes
    async def all_fail(mine: list[Task], rnd: int) -> list[Group]:
        return [group(t, [0.0] * 4) for t in mine]

    cur = Curriculum(tasks, "dynamic", seed=0, max_extra=5)
    got = await collect_step(cur, 0, 4, all_fail)
    assert (got.mixed, got.extra, got.total) == (0, 5, 9)
    assert got.rounds == 3  # 4, then 4 more, then the 1 left of the cap


def test_more_rounds_stopping_rule() -> None:
    assert more_rounds(mixed=4, min_mixed=4, extra=0, max_extra=16, n=8) == 0  # enough
    assert more_rounds(mixed=1, min_mixed=4, extra=0, max_extra=16, n=8) == 8  # a whole round
    assert more_rounds(mixed=3, min_mixed=4, extra=8, max_extra=12, n=8) == 4  # cap's rest
    assert more_rounds(mixed=3, min_mixed=4, extra=16, max_extra=16, n=8) == 0  # cap spent
    assert more_rounds(mixed=0, min_mixed=0, extra=0, max_extra=16, n=8) == 0  # off: one round


async def test_min_mixed_collects_whole_rounds_until_k_mixed_groups() -> None:
    # "edge" groups mix, the others never: rounds of B=4 until 3 edge groups were drawn
    tasks = make_tasks({"easy": 10, "hard": 10, "edge": 10})
    rounds: list[tuple[int, int]] = []

    async def fake_collect(mine: list[Task], rnd: int) -> list[Group]:
        rounds.append((rnd, len(mine)))
        rewards = {"easy": [1.0] * 4, "hard": [0.0] * 4, "edge": [0.0, 1.0, 0.0, 1.0]}
        return [group(t, rewards[template_key(t)]) for t in mine]

    for sampler in ("uniform", "mixed"):
        rounds.clear()
        cur = Curriculum(tasks, sampler, seed=1, floor=1.0, max_extra=40, min_mixed=3)
        got = await collect_step(cur, 0, 4, fake_collect)
        mixed = sum(is_mixed(g.rewards) for g in got.groups)
        assert got.mixed == mixed >= 3
        # the step stopped at the first round that reached 3 mixed groups
        before_last = sum(is_mixed(g.rewards) for g in got.groups[:-4])
        assert before_last < 3
        assert [r for r, _ in rounds] == list(range(len(rounds))) and len(rounds) >= 2
        assert all(n == 4 for _, n in rounds)  # whole rounds of B
        assert got.extra == got.total - 4 == 4 * (len(rounds) - 1)
        # within a step no instance is drawn twice while others remain
        ids = [g.task.task_id for g in got.groups]
        assert len(set(ids)) == len(ids)

    # the cap binds when nothing mixes: B, then what the cap allows
    async def all_fail(mine: list[Task], rnd: int) -> list[Group]:
        return [group(t, [0.0] * 4) for t in mine]

    cur = Curriculum(tasks, "mixed", seed=0, max_extra=6, min_mixed=2)
    got = await collect_step(cur, 0, 4, all_fail)
    assert (got.mixed, got.extra, got.total, got.rounds) == (0, 6, 10, 3)  # 4, 4, then 2
    with pytest.raises(ValueError, match="min_mixed"):
        Curriculum(tasks, "dynamic", min_mixed=2)


async def test_min_mixed_counts_trained_rewards_and_stops_when_told() -> None:
    tasks = make_tasks({"a": 10})

    async def graded_mixed(mine: list[Task], rnd: int) -> list[Group]:
        return [group(t, [1.0, 0.0]) for t in mine]

    # graded [1, 0] but trained [0, 0] (say, the success never exited): not mixed
    cur = Curriculum(tasks, "mixed", seed=0, max_extra=4, min_mixed=1)
    got = await collect_step(cur, 0, 2, graded_mixed, rewards_of=lambda g: [0.0, 0.0])
    assert (got.mixed, got.rounds, got.total) == (0, 3, 6)
    assert cur.templates.estimate("a").mean == pytest.approx((1 + 6) / (2 + 12))  # graded
    # the budget says no: one round only, and it is asked with the rounds so far
    asked: list[int] = []

    def no_room(rounds: int) -> bool:
        asked.append(rounds)
        return False

    cur = Curriculum(tasks, "mixed", seed=0, max_extra=4, min_mixed=1)
    got = await collect_step(
        cur, 0, 2, graded_mixed, rewards_of=lambda g: [0.0, 0.0], may_extend=no_room
    )
    assert (got.rounds, got.total, asked) == (1, 2, [1])
    # enough mixed groups: the budget is not asked
    cur = Curriculum(tasks, "mixed", seed=0, max_extra=4, min_mixed=1)
    got = await collect_step(cur, 0, 2, graded_mixed, may_extend=no_room)
    assert (got.rounds, got.mixed, asked) == (1, 2, [1])


async def test_uniform_and_mixed_collect_one_round_and_record_it() -> None:
    tasks = make_tasks({"a": 5, "b": 5})

    async def fake_collect(mine: list[Task], rnd: int) -> list[Group]:
        return [group(t, [1.0, 0.0, 0.0]) for t in mine]

    for sampler in ("uniform", "mixed"):
        cur = Curriculum(tasks, sampler, seed=4)
        got = await collect_step(cur, 3, 4, fake_collect)
        assert (got.total, got.mixed, got.extra, got.rounds) == (4, 4, 0, 1)
        if sampler == "uniform":
            assert [g.task for g in got.groups] == step_tasks(tasks, 3, 4, 4)
        total_n = cur.templates.estimate("a").n + cur.templates.estimate("b").n
        assert total_n == pytest.approx(12)


async def test_collect_step_rolls_out_this_process_share() -> None:
    tasks = make_tasks({"a": 8})
    seen: list[list[Task]] = []

    async def fake_collect(mine: list[Task], rnd: int) -> list[Group]:
        seen.append(mine)
        return [group(t, [1.0, 0.0]) for t in mine]

    cur = Curriculum(tasks, "uniform", seed=0)
    # the other process's outcomes arrive through the sum: here a stand-in that doubles ours
    got = await collect_step(cur, 0, 4, fake_collect, lambda v: [2 * x for x in v], 1, 2)
    assert seen[0] == step_tasks(tasks, 0, 4, 0)[1::2]
    assert got.total == 4 and got.mixed == 4 and len(got.groups) == 2


# ---- config --------------------------------------------------------------------------


def test_config_fields_and_validation() -> None:
    rl = RLConfig()
    assert rl.curriculum == "uniform"  # existing runs are unchanged
    assert set(CURRICULA) == {"uniform", "mixed", "dynamic"}
    cfg = load_config(None, ["rl.curriculum=dynamic", "rl.dynamic_max_extra=4"])
    cur = Curriculum.from_config(make_tasks({"a": 2}), cfg.rl, cfg.seed)
    assert (cur.sampler, cur.max_extra, cur.floor) == ("dynamic", 4, 0.2)
    with pytest.raises(ConfigError, match="rl.curriculum must be uniform, mixed or dynamic"):
        load_config(None, ["rl.curriculum=greedy"])
    with pytest.raises(ConfigError, match=r"rl.curriculum_floor must be in \[0, 1\]"):
        load_config(None, ["rl.curriculum_floor=1.5"])
    with pytest.raises(ConfigError, match=r"rl.curriculum_decay must be in \(0, 1\]"):
        load_config(None, ["rl.curriculum_decay=0"])
    with pytest.raises(ConfigError, match="rl.dynamic_max_extra must be >= 0"):
        load_config(None, ["rl.dynamic_max_extra=-1"])
    assert rl.min_mixed_groups == 0  # one round a step unless asked
    cfg = load_config(None, ["rl.curriculum=mixed", "rl.min_mixed_groups=3"])
    assert Curriculum.from_config(make_tasks({"a": 2}), cfg.rl, cfg.seed).min_mixed == 3
    with pytest.raises(ConfigError, match="rl.min_mixed_groups must be >= 0"):
        load_config(None, ["rl.min_mixed_groups=-1"])
    with pytest.raises(ConfigError, match="min_mixed_groups applies to rl.curriculum uniform"):
        load_config(None, ["rl.curriculum=dynamic", "rl.min_mixed_groups=2"])
    with pytest.raises(ConfigError, match="can never be reached"):
        load_config(
            None, ["rl.tasks_per_step=4", "rl.dynamic_max_extra=4", "rl.min_mixed_groups=9"]
        )
    with pytest.raises(ConfigError, match="did you mean 'curriculum'"):
        load_config(None, ["rl.curriculm=mixed"])


# ---- report --------------------------------------------------------------------------


def test_report_draws_the_curriculum_plot(tmp_path: Path) -> None:
    from webagent_r1.report import build_report_files

    rows = [
        {
            "step": s,
            "rollout/success": 0.3,
            "curriculum/mixed_frac": 0.25 + 0.05 * s,
            "curriculum/p/reddit.post_author": 0.2 + 0.1 * s,
            "curriculum/p/map.street_address": 0.9 - 0.05 * s,
        }
        for s in range(1, 6)
    ]
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = build_report_files(tmp_path)
    png = tmp_path / "plots" / "curriculum.png"
    assert png in res.plots and png.read_bytes()[:4] == b"\x89PNG"
    assert "plots/curriculum.png" in res.report.read_text()


def test_draw_refuses_a_sampler_that_leaks_a_test_task(monkeypatch: pytest.MonkeyPatch) -> None:
    from webagent_r1.train import curriculum as mod

    leak = make_tasks({"t": 1}, split="test")
    monkeypatch.setitem(mod.DRAWS, "mixed", lambda cur, rng, n, taken: leak)
    cur = Curriculum(make_tasks({"a": 3}), "mixed")
    with pytest.raises(ValueError, match="not training tasks"):
        cur.draw(0, 2)


def test_trainer_checkpoint_keeps_the_curriculum(tmp_path: Path) -> None:
    from webagent_r1.config import Config
    from webagent_r1.train.checkpoint import latest_checkpoint, load_trainer_state
    from webagent_r1.train.dist import Dist
    from webagent_r1.train.rl import _trainer_state
    from webagent_r1.train.stage import save_trainer_checkpoint

    tasks = make_tasks({"a": 5, "b": 5})
    cur = Curriculum(tasks, "mixed", seed=1)
    for step in range(3):
        drawn = cur.draw(step, 3)
        cur.record(step, outcome(cur, drawn[0], 2, 1))
    model = SimpleNamespace(save_pretrained=lambda p: Path(p).mkdir(parents=True))
    opt = SimpleNamespace(state_dict=lambda: {})
    state = _trainer_state(3, [], None, cur)
    save_trainer_checkpoint(tmp_path, 3, model, None, opt, Config(), Dist(), state)
    ckpt = latest_checkpoint(tmp_path)
    assert ckpt is not None
    resumed = Curriculum(tasks, "mixed", seed=1)
    resumed.load_state_dict(load_trainer_state(ckpt)["curriculum"])
    assert [t.task_id for t in resumed.draw(3, 4)] == [t.task_id for t in cur.draw(3, 4)]
