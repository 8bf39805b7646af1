"""The experiment's statistics: Holm by hand, rliable's probability of improvement, and the
results page against ``compare-arms`` on published outcome files."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from webagent_r1.experiment.page import RunRecord, build_results
from webagent_r1.experiment.plan import Comparison, EvalSettings, Plan
from webagent_r1.report.arms import compare_arms
from webagent_r1.report.rliable_stats import (
    arm_interval,
    holm,
    probability_of_improvement,
    stratified_diff_interval,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
BC = RESULTS / "2026-12-06-r1-multiturn-bc-coef-bc.jsonl"
RL = [RESULTS / f"2026-12-07-r1-multiturn-bc-coef-seed{s}-longer.jsonl" for s in (0, 1)]


def test_holm_by_hand() -> None:
    # sorted: 0.005 x 4 = 0.02, 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 = 0.04 -> 0.06
    # (never below the one before); then back in the given order
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([0.2]) == pytest.approx([0.2]) and holm([]) == []


def test_probability_of_improvement_is_rliables() -> None:
    from rliable import metrics

    rng = np.random.default_rng(0)
    b = rng.integers(0, 3, size=(3, 20)) / 2  # 3 runs, 20 tasks, rates 0, 0.5, 1
    a = rng.integers(0, 3, size=(2, 20)) / 2
    assert probability_of_improvement(b, a) == pytest.approx(
        metrics.probability_of_improvement(b, a)
    )
    assert probability_of_improvement(a, a) == pytest.approx(0.5)


def test_rliable_intervals_are_seeded_and_leave_numpys_generator_alone() -> None:
    np.random.seed(7)
    before = np.random.get_state()[1].copy()
    runs = [[0.0, 0.5, 1.0, 0.5], [0.5, 0.5, 1.0, 0.0]]
    assert arm_interval(runs, reps=300) == arm_interval(runs, reps=300)
    assert (np.random.get_state()[1] == before).all()
    diff, _, method = stratified_diff_interval([[0.0, 0.5, 1.0, 0.0]], runs, reps=300)
    assert diff == pytest.approx(0.5 - 0.375) and method == "runs and tasks"  # one run repeated
    _, _, method = stratified_diff_interval(runs + runs[:1], runs, reps=300)
    assert method == "runs"  # 3 runs against 2: tasks held


def test_the_page_agrees_with_compare_arms_on_published_files(tmp_path: Path) -> None:
    """Two 10-update seeds of the multi-turn recipe against its BC checkpoint: the page's
    difference and compare-arms intervals are compare-arms' own; rliable's stratified
    interval is within 1.5 points of compare-arms' over runs and tasks at each end (measured:
    +4.4 to +19.8 against +3.8 to +20.6). They differ by design: rliable resamples the runs
    within each task, compare-arms whole runs across all tasks."""
    ref = compare_arms([BC], RL, "bc", "mgrpo")
    plan = Plan(
        path=tmp_path / "plan.yaml",
        recipe=str(ROOT / "configs" / "r1-multiturn.yaml"),
        init_from=None,
        split="test",
        final=True,
        seeds=[0, 1],
        arms={"bc": [], "mgrpo": []},
        comparisons=[Comparison("rl-vs-bc", "mgrpo", "bc")],
        out_dir=tmp_path / "exp",
        results=tmp_path / "results.md",
        eval=EvalSettings(samples=4, temperature=1.0),
    )
    runs = [RunRecord("bc", 0, tmp_path, "bc", BC)]
    runs += [RunRecord("mgrpo", s, tmp_path, f"rl{s}", RL[s]) for s in (0, 1)]
    (c,) = build_results(plan, runs)["comparisons"]
    assert c["tasks"] == ref.tasks == 60
    assert c["diff"] == ref.diff == pytest.approx(0.12291666)  # +12.3 points
    assert c["ci_runs_tasks"] == ref.diff_ci and c["ci_tasks"] == ref.diff_ci_tasks
    assert c["rliable_method"] == "runs and tasks"
    for mine, theirs in zip(c["rliable_ci"], ref.diff_ci, strict=True):
        assert abs(mine - theirs) <= 0.015
    assert c["rliable_ci"][0] > 0  # both say: above 0
    assert 0.6 < c["poi"] < 0.65  # measured 0.625
    assert c["p"] < 0.01 and c["p_holm"] == pytest.approx(c["p"])
    # an independent reference: the numbers the results page published on 2026-12-07 from
    # an earlier version of compare-arms (2026-12-07-r1-multiturn-bc-coef-seed1-longer.md)
    assert round(100 * c["diff"], 1) == 12.3
    assert [round(100 * x, 1) for x in c["ci_runs_tasks"]] == [3.8, 20.6]
    # per template: 10 templates of 6 tasks; their task-weighted mean is the difference
    assert [n for _, n, _ in c["by_template"]] == [6] * 10
    weighted = sum(n * diff for _, n, diff in c["by_template"]) / 60
    assert weighted == pytest.approx(c["diff"])
    assert 0 < c["p_templates"] <= 1 and c["p_templates_holm"] == pytest.approx(c["p_templates"])


def test_by_template_groups_task_ids_by_their_template() -> None:
    from webagent_r1.experiment.page import by_template, template_of

    assert template_of("shopping.change_email/003") == "shopping.change_email"
    assert template_of("17") == "17"  # a WebArena id is its own cluster
    got = by_template(["b.x/2", "a.y/1", "b.x/7"], [1.0, -0.5, 0.0])
    assert got == [("a.y", 1, -0.5), ("b.x", 2, 0.5)]


def test_rliable_leaves_a_redirected_stderr_open() -> None:
    """rliable's absl handler must not hold (and later close) a redirected stderr: uvicorn's
    logging.config shuts every handler down when the sites start, and absl closes a stream
    that is not the process's own (it closed the test runner's capture)."""
    import io
    import logging.config

    import absl.logging

    from webagent_r1.report.rliable_stats import _rliable

    buf = io.StringIO()
    handler = absl.logging.get_absl_handler().python_handler
    handler.stream = buf  # as if absl had been imported under this redirection
    _rliable()
    logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
    assert not buf.closed
    assert handler.stream is sys.__stderr__
