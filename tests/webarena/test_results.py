"""WebArena-Lite's headline score (every episode counts; env errors are failures), its
per-site table in the paper's columns, and the warning for shared site state."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path

import pytest

from webagent_r1.evaluation.run import EvalReport, _source_hook
from webagent_r1.report import build_report
from webagent_r1.report.load import SITE_LABELS, SITE_ORDER
from webagent_r1.sources.webarena.results import (
    DENOMINATOR,
    SharedStateWarning,
    headline,
    shared_state_warning,
    state_graded,
    state_graded_ids,
)
from webagent_r1.sources.webarena.source import WebArenaSource
from webagent_r1.stats import wilson_interval
from webagent_r1.types import Task, Trajectory

NEWEST_ORDER = [104, 117, 118]  # func:shopping_get_latest_order_url()


def test_state_graded_tasks_of_the_165(lite_tasks: list[Task]) -> None:
    ids = state_graded_ids(lite_tasks)
    assert len(ids) == 40
    newest = [t.task_id for t in lite_tasks if "latest_order" in json.dumps(t.eval)]
    assert newest == NEWEST_ORDER and set(newest) <= set(ids)
    fixed = [i for i in ids if i not in newest]
    assert len(fixed) == 37 and 119 in fixed  # the wish list page
    by_id = {t.task_id: t for t in lite_tasks}
    assert not state_graded(by_id[29])  # checks the page the episode ended on ("last")
    assert not state_graded(by_id[144])  # url_match as well: the agent must end there
    assert not state_graded(by_id[0])  # an answer


def test_shared_state_warning_names_the_task_ids(lite_tasks: list[Task]) -> None:
    assert shared_state_warning(lite_tasks, samples=1, concurrency=1) is None
    msg = shared_state_warning(lite_tasks, samples=4, concurrency=1)
    assert msg is not None and "--samples 4" in msg and "40 task(s)" in msg
    assert "task ids 97, 98, 99" in msg and "104" in msg and "164)" in msg
    msg = shared_state_warning(lite_tasks, samples=1, concurrency=8)
    assert msg is not None and "rollout.max_concurrent_episodes 8" in msg
    assert shared_state_warning(lite_tasks, 4, 8, reset_between_episodes=True) is None
    answers_only = [t for t in lite_tasks if not state_graded(t)]
    assert shared_state_warning(answers_only, samples=4, concurrency=8) is None


def test_source_warns_before_a_run(lite_tasks: list[Task]) -> None:
    source = WebArenaSource(check=False)
    with pytest.warns(SharedStateWarning, match=r"task ids 97, .*, 164\)"):
        _source_hook(source, "check_run", lite_tasks, 3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _source_hook(source, "check_run", lite_tasks, 1, 1)  # one at a time: no warning


def _episodes(tasks: list[Task]) -> list[Trajectory]:
    """Tasks 0-49 succeed, 50-59 end in env errors, the rest fail."""
    out = []
    for t in tasks:
        i = int(t.task_id)
        if i < 50:
            out.append(Trajectory(i, i, reward=1.0))
        elif i < 60:
            out.append(
                Trajectory(i, i, status="env_error", info={"error": "judge gave no verdict"})
            )
        else:
            out.append(Trajectory(i, i, reward=0.0, info={"explanation": "wrong"}))
    return out


def test_headline_divides_by_every_task(lite_tasks: list[Task]) -> None:
    trajs = _episodes(lite_tasks)
    h = headline(lite_tasks, trajs)
    assert h["success"] == pytest.approx(50 / 165)  # not 50 / 155
    assert h["success_without_env_errors"] == pytest.approx(50 / 155)
    assert h["episodes"] == 165 and h["env_errors"] == 10 and h["denominator"] == DENOMINATOR
    assert h["ci"][0] < 50 / 165 < h["ci"][1]
    # The paper's columns: Reddit, GitLab, CMS, Map, OSS, cross-site; every task counted.
    assert set(h["by_site"]) == set(SITE_ORDER)
    assert [SITE_LABELS[s] for s in SITE_ORDER] == [
        "Reddit",
        "GitLab",
        "CMS",
        "Map",
        "OSS",
        "Cross-site",
    ]
    sizes = Counter(t.sites[0] if len(t.sites) == 1 else "cross-site" for t in lite_tasks)
    assert {s: g["n"] for s, g in h["by_site"].items()} == dict(sizes)
    assert sum(g["env_errors"] for g in h["by_site"].values()) == 10
    for site, g in h["by_site"].items():
        won = sum(
            1
            for t in lite_tasks
            if int(t.task_id) < 50 and (t.sites[0] if len(t.sites) == 1 else "cross-site") == site
        )
        assert g["success"] == pytest.approx(won / sizes[site])
    assert h["failures"]["env error: judge gave no verdict"] == 10
    # The generic report leaves env errors out; the source's hook replaces it.
    generic = EvalReport(trajs, list(lite_tasks)).result()
    assert generic["success"] == pytest.approx(50 / 155)
    source = WebArenaSource(check=False)
    assert _source_hook(source, "headline_result", lite_tasks, trajs) == h
    with pytest.raises(ValueError, match="165 tasks but 1 trajectories"):
        headline(lite_tasks, trajs[:1])


def test_report_shows_the_paper_columns(lite_tasks: list[Task], tmp_path: Path) -> None:
    trajs = _episodes(lite_tasks)
    res = {
        "max_turns": 15,
        **EvalReport(trajs, list(lite_tasks)).result(),
        **headline(lite_tasks, trajs),
    }
    (tmp_path / "eval.json").write_text(
        json.dumps({"model": "m", "split": "test", "samples": 1, "results": [res]})
    )
    text = build_report(tmp_path).read_text()
    assert "| max_turns | Reddit | GitLab | CMS | Map | OSS | Cross-site |" in text
    assert f"| 15 | {100 * 50 / 165:.1f}" in text  # the headline over all 165
    assert "WebArena-Lite evaluations, which divide by every episode" in text


def test_headline_interval_treats_a_tasks_samples_as_one_cluster(lite_tasks: list[Task]) -> None:
    """One episode a task: Wilson over the episodes. Four a task, each task's four alike:
    the same rate, but four copies of each outcome are not four times the evidence, so the
    interval is a bootstrap over tasks and wider than Wilson over the 660 episodes."""
    one = headline(lite_tasks, _episodes(lite_tasks))
    assert one["ci_method"] == "wilson"
    assert one["ci"] == pytest.approx(list(wilson_interval(50, 165)))
    tasks4 = [t for t in lite_tasks for _ in range(4)]
    four = headline(tasks4, [tr for tr in _episodes(lite_tasks) for _ in range(4)])
    assert four["success"] == pytest.approx(50 / 165) and four["ci_method"] == "task-bootstrap"
    flat = wilson_interval(200, 660)
    assert four["ci"][0] < flat[0] and four["ci"][1] > flat[1]
    assert four["ci"][0] < 50 / 165 < four["ci"][1]
    for site, g in four["by_site"].items():  # per site too: wider than its episodes' Wilson
        assert g["ci_method"] == "task-bootstrap"
        wilson = wilson_interval(round(g["success"] * g["n"]), g["n"])
        assert g["ci"][1] - g["ci"][0] >= wilson[1] - wilson[0] - 1e-9, site
