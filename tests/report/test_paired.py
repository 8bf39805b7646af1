"""Paired comparison of evaluations (``report/paired.py``, ``webagent-r1 compare-evals``).

The two evaluations written here, two episodes per task (sites from ``info["task"]``)::

    task     site  A      B      d = B - A
    x.a/0    x     1 0    1 1    +0.5
    x.a/1    x     0 0    1 0    +0.5
    y.b/0    y     1 1    1 1     0
    y.b/1    y     0 1    0 0    -0.5
    y.b/2    y     -      1 1    (only in B)

    → 4 common tasks, A 4/8, B 5/8, mean d = 0.5 / 4 = +0.125, better 2 / worse 1 / tied 1,
      sign test p = 2 * (C(3,0) + C(3,1)) / 2^3 = 1.0, sign-flip p = 1.0 (every pattern of
      ±0.5 three times has |sum| >= 0.5), pass@2: A 3/4, B 3/4.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.report.conftest import traj
from webagent_r1.cli import app
from webagent_r1.report.load import ReportError
from webagent_r1.report.paired import (
    compare_files,
    load_outcomes,
    render_paired_markdown,
    to_json,
)
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.sources.embedded.suite import build_suite, select, spec_for

A = {"x.a/0": [1, 0], "x.a/1": [0, 0], "y.b/0": [1, 1], "y.b/1": [0, 1]}
B = {"x.a/0": [1, 1], "x.a/1": [1, 0], "y.b/0": [1, 1], "y.b/1": [0, 0], "y.b/2": [1, 1]}


def write_eval(folder: Path, outcomes: dict[str, list[int]], extra_rows: str = "") -> Path:
    """An ``eval --out-dir`` folder: eval.json naming a trajectory file of real trajectories."""
    trajs = []
    for tid, rewards in outcomes.items():
        for r in rewards:
            t = traj(tid, 1, float(r))
            t.info["task"] = {"site": tid[0], "template": tid.split("/")[0], "intent": "?"}
            trajs.append(t)
    folder.mkdir(parents=True)
    write_trajectories(trajs, folder / "trajectories-t4.jsonl")
    if extra_rows:
        with (folder / "trajectories-t4.jsonl").open("a") as f:
            f.write(extra_rows)
    results = [{"max_turns": 4, "trajectories": "trajectories-t4.jsonl"}]
    (folder / "eval.json").write_text(json.dumps({"results": results}))
    return folder


def test_pass_at_k_unbiased_with_unequal_episodes(tmp_path: Path) -> None:
    # x.a/0: 4 episodes, 1 success in A → pass@2 = 1 - C(3,2)/C(4,2) = 0.5, not 1
    a = write_eval(tmp_path / "a", {"x.a/0": [0, 0, 0, 1], "x.a/1": [1, 0]})
    b = write_eval(tmp_path / "b", {"x.a/0": [1, 1, 0, 0], "x.a/1": [0, 0, 0]})
    [c], _ = compare_files([a, b])
    assert c.k == 2
    # A: (0.5 + 1) / 2; B: (1 - C(2,2)/C(4,2)) = 5/6 and 0 → 5/12
    assert c.pass_a == pytest.approx(0.75)
    assert c.pass_b == pytest.approx(5 / 12)
    assert "pass@2: 75.0% → 41.7%" in render_paired_markdown([c])


def test_compare_two_eval_folders(tmp_path: Path) -> None:
    a = write_eval(tmp_path / "bc", A)
    b = write_eval(tmp_path / "rl", B)
    [c], problems = compare_files([a, b])
    assert problems == []
    assert (c.a, c.b, c.tasks, c.only_a, c.only_b) == ("bc", "rl", 4, 0, 1)
    assert (c.ok_a, c.n_a, c.ok_b, c.n_b) == (4, 8, 5, 8)
    assert c.diff == pytest.approx(0.125)
    assert (c.better, c.worse, c.tied) == (2, 1, 1)
    assert c.sign_p == pytest.approx(1.0)
    assert c.flip_p == pytest.approx(1.0)
    assert (c.pass_a, c.pass_b, c.k) == (0.75, 0.75, 2)
    lo, hi = c.diff_ci
    assert lo <= c.diff <= hi
    sites = {g.name: (g.ok_a, g.n_a, g.ok_b, g.n_b, g.better, g.worse) for g in c.by_site}
    assert sites == {"x": (1, 4, 3, 4, 2, 0), "y": (3, 4, 2, 4, 0, 1)}
    md = render_paired_markdown([c])
    assert "| rl vs bc | 4 | 4/8 = 50.0%" in md
    assert "+12.5" in md
    assert "1 only in rl" in md


def test_env_errors_and_bad_rows_are_not_scored(tmp_path: Path) -> None:
    err = traj("x.a/0", 1, 0.0, status="env_error").to_dict()
    rows = json.dumps(err) + "\n" + json.dumps({"task_id": "x.a/0", "reward": "yes"}) + "\n"
    rows += '{"task_id": "x.a/0", "reward": NaN}\n'

    folder = write_eval(tmp_path / "e", A, extra_rows=rows + "{not json\n")
    out = load_outcomes(folder, "e")
    assert out.outcomes["x.a/0"] == [1, 0]
    assert out.env_errors == 1
    assert any("skipped 2 row(s) without a task_id" in p for p in out.problems)
    assert any("not JSON objects" in p for p in out.problems)


def test_tasks_with_no_scored_episode_are_named(tmp_path: Path) -> None:
    """A task whose every episode was an env error is named in the comparison, not dropped
    without a word; the success intervals are a bootstrap over tasks (2 episodes a task)."""
    errs = "".join(
        json.dumps(traj("z.c/0", 1, 0.0, status="env_error").to_dict()) + "\n" for _ in range(2)
    )
    a = write_eval(tmp_path / "a", A)
    b = write_eval(tmp_path / "b", A, extra_rows=errs)
    [c], problems = compare_files([a, b])
    assert c.unscored_b == ["z.c/0"] and c.unscored_a == [] and c.tasks == 4
    assert any("1 task(s) with no scored episode" in p for p in problems)
    md = render_paired_markdown([c])
    assert "1 task(s) of b had no scored episode" in md and "z.c/0" in md
    assert c.ci_method == "task-bootstrap" and "bootstrap over tasks" in md
    # A's tasks: (1,2) (0,2) (2,2) (1,2): 4 of 8; the interval holds 0.5 and lies in [0, 1]
    lo, hi = c.ci_a
    assert 0.0 <= lo < 0.5 < hi <= 1.0 and c.ci_a == c.ci_b


def test_trajectory_file_and_turn_budget(tmp_path: Path) -> None:
    folder = write_eval(tmp_path / "sweep", A)
    write_trajectories([traj("x.a/0", 1, 1.0)], folder / "trajectories-t2.jsonl")
    results = [
        {"max_turns": 2, "trajectories": "trajectories-t2.jsonl"},
        {"max_turns": 4, "trajectories": "trajectories-t4.jsonl"},
    ]
    (folder / "eval.json").write_text(json.dumps({"results": results}))
    assert load_outcomes(folder, "s").source.name == "trajectories-t4.jsonl"
    assert load_outcomes(folder, "s", max_turns=2).outcomes == {"x.a/0": [1]}
    direct = load_outcomes(folder / "trajectories-t4.jsonl", "f")
    assert direct.outcomes == A
    with pytest.raises(ReportError, match="no result with max_turns 9"):
        load_outcomes(folder, "s", max_turns=9)


def test_clear_errors(tmp_path: Path) -> None:
    a = write_eval(tmp_path / "a", A)
    other = write_eval(tmp_path / "o", {"z.c/0": [1]})
    with pytest.raises(ReportError, match="share no task"):
        compare_files([a, other])
    with pytest.raises(ReportError, match="at least two"):
        compare_files([a])
    with pytest.raises(ReportError, match="1 label"):
        compare_files([a, other], labels=["only-one"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no eval.json"):
        load_outcomes(tmp_path / "empty", "x")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ReportError, match="no scored episode"):
        load_outcomes(tmp_path / "empty.jsonl", "x")
    with pytest.raises(ReportError, match="not found"):
        load_outcomes(tmp_path / "missing", "x")


@pytest.mark.parametrize(
    "eval_json",
    [
        '{"results": 5}',
        '{"results": [{"max_turns": "4", "trajectories": "trajectories-t4.jsonl"}]}',
        '{"results": [{"max_turns": 4, "trajectories": "gone.jsonl"}]}',
        "[1, 2]",
        "{not json",
    ],
)
def test_malformed_eval_json(tmp_path: Path, eval_json: str) -> None:
    folder = write_eval(tmp_path / "e", A)
    (folder / "eval.json").write_text(eval_json)
    with pytest.raises(ReportError, match="eval.json"):
        load_outcomes(folder, "e")
    res = CliRunner().invoke(app, ["compare-evals", str(folder), str(folder)])
    assert res.exit_code == 2 and "error" in res.output


def test_undecodable_files(tmp_path: Path) -> None:
    folder = write_eval(tmp_path / "e", A)
    (folder / "eval.json").write_bytes(b"\xff\xfe{")
    with pytest.raises(ReportError, match="cannot read it as JSON"):
        load_outcomes(folder, "e")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\x00\x9c")
    with pytest.raises(ReportError, match="cannot read it as trajectory JSONL"):
        load_outcomes(tmp_path / "bin.jsonl", "b")


def test_cli_compare_evals(tmp_path: Path) -> None:
    a = write_eval(tmp_path / "bc", A)
    b = write_eval(tmp_path / "rl", B)
    out = tmp_path / "cmp" / "paired.md"
    res = CliRunner().invoke(
        app, ["compare-evals", str(a), str(b), "--label", "BC", "--label", "RL", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "| RL vs BC | 4 |" in res.output
    assert out.read_text() in res.output
    [row] = json.loads(out.with_suffix(".json").read_text())
    assert row["diff"] == pytest.approx(0.125)
    assert math.isclose(row["success_b"], 5 / 8)
    bad = CliRunner().invoke(app, ["compare-evals", str(a), str(tmp_path / "nope")])
    assert bad.exit_code == 2
    assert "not found" in bad.output
    for wrong in (str(tmp_path / "x.json"), str(tmp_path)):
        res = CliRunner().invoke(app, ["compare-evals", str(a), str(b), "--out", wrong])
        assert res.exit_code == 2 and "markdown file" in res.output
    assert not (tmp_path / "x.json").exists()


def test_embedded_tasks_get_the_constant_answer_column(tmp_path: Path) -> None:
    """gitlab.member_role's 6 test tasks: its training answer "Developer" passes 4; a change
    template has no guess (n/a)."""
    tasks = select(build_suite(spec_for("test")), split="test")
    role = [str(t.task_id) for t in tasks if t.extra["template"] == "gitlab.member_role"]
    add = [str(t.task_id) for t in tasks if t.extra["template"] == "gitlab.add_member"][:2]
    assert len(role) == 6 and len(add) == 2
    a = write_eval(tmp_path / "a", {tid: [0] for tid in role + add})
    b = write_eval(tmp_path / "b", {tid: [1] for tid in role + add})
    [c], _ = compare_files([a, b])
    assert c.guess is not None and (c.guess["successes"], c.guess["tasks"]) == (4, 8)
    md = render_paired_markdown([c])
    assert "| template | tasks | A | B | better / worse | constant answer |" in md
    assert "| gitlab.member_role | 6 | 0/6 | 6/6 | 6 / 0 | 4/6 |" in md
    assert "| gitlab.add_member | 2 | 0/2 | 2/2 | 2 / 0 | n/a |" in md
    assert "would score 4/8 (50.0%) on these tasks" in md
    # other tasks (the synthetic ids above): no baseline, no column
    [c], _ = compare_files([write_eval(tmp_path / "x", A), write_eval(tmp_path / "y", B)])
    assert c.guess is None and "constant answer" not in render_paired_markdown([c])


def test_require_exit_counts_only_successes_that_ended_by_themselves(tmp_path: Path) -> None:
    """x.a/0: A one exit success; B one exit success and one at the turn limit (reward 1)."""
    a = write_eval(tmp_path / "a", {"x.a/0": [1, 0], "x.a/1": [0, 0]})
    b = tmp_path / "b"
    rows = [("x.a/0", 1.0, "done"), ("x.a/0", 1.0, "max_turns"), ("x.a/1", 1.0, "max_turns")]
    rows += [("x.a/1", 0.0, "max_turns")]
    trajs = []
    for tid, reward, status in rows:
        t = traj(tid, 8, reward, status)
        t.info["task"] = {"site": "x", "template": "x.a", "intent": "?"}
        trajs.append(t)
    b.mkdir()
    write_trajectories(trajs, b / "trajectories-t8.jsonl")
    (b / "eval.json").write_text(
        json.dumps({"results": [{"max_turns": 8, "trajectories": "trajectories-t8.jsonl"}]})
    )
    [c], _ = compare_files([a, b])
    assert (c.ok_a, c.ok_b) == (1, 3)
    [c], problems = compare_files([a, b], require_exit=True)
    assert (c.ok_a, c.ok_b) == (1, 1)
    assert c.diff == pytest.approx(0.0)
    assert problems == [
        "b: 2 success(es) in the file without exit (at the turn limit) counted as failures "
        "(--require-exit)"
    ]
    assert (c.require_exit, c.uncounted_a, c.uncounted_b) == (True, 0, 2)
    out = tmp_path / "cmp.md"
    r = CliRunner().invoke(
        app, ["compare-evals", str(a), str(b), "--require-exit", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert "1/4 = 25.0%" in r.output
    md = out.read_text()
    assert "Successes counted only when the episode ended by itself" in md
    assert "- b: 2 success(es) in the file without exit" in md
    [row] = json.loads(out.with_suffix(".json").read_text())
    assert row["require_exit"] is True and row["uncounted_b"] == 2
    # a row without a status (as older files have) ended by itself: its success stays
    c_dir = write_eval(
        tmp_path / "c", {"x.a/0": [0]}, extra_rows='{"task_id": "x.a/1", "reward": 1.0}\n'
    )
    [c], _ = compare_files([a, c_dir], require_exit=True)
    assert c.ok_b == 1 and c.uncounted_b == 0


def test_outcomes_file_pairs_like_the_evaluation(tmp_path: Path) -> None:
    """`outcomes` keeps what a comparison reads: the same numbers, with and without
    --require-exit, from a file a fraction of the trajectories' size."""
    a = write_eval(tmp_path / "a", A)
    b = tmp_path / "b"
    trajs = []
    for tid, rewards in B.items():
        for i, r in enumerate(rewards):
            t = traj(tid, 3 + i, float(r), "max_turns" if i else "done")
            t.info["task"] = {"site": tid[0], "template": tid.split("/")[0], "intent": "?"}
            t.info["answer_shown"] = bool(i)
            t.info["final_answer"] = "dropped"
            trajs.append(t)
    b.mkdir()
    write_trajectories(trajs, b / "trajectories-t8.jsonl")
    (b / "eval.json").write_text(
        json.dumps({"results": [{"max_turns": 8, "trajectories": "trajectories-t8.jsonl"}]})
    )
    files = []
    for src in (a, b):
        dest = tmp_path / "pub" / f"{src.name}.jsonl"
        res = CliRunner().invoke(app, ["outcomes", str(src), "--out", str(dest)])
        assert res.exit_code == 0, res.output
        assert f"outcomes: {dest}" in res.output
        files.append(dest)
    assert "(10 episodes of 5 tasks, 7 successes)" in res.output
    rows = [json.loads(line) for line in files[1].read_text().splitlines()]
    assert rows[0] == {
        "task_id": "x.a/0",
        "group_id": "x.a/0",
        "reward": 1.0,
        "status": "done",
        "num_turns": 3,
        "info": {"task": {"site": "x", "template": "x.a", "intent": "?"}, "answer_shown": False},
    }
    assert rows[1]["status"] == "max_turns" and rows[1]["num_turns"] == 4
    assert files[1].stat().st_size * 3 < (b / "trajectories-t8.jsonl").stat().st_size
    # the published file is read again as its own source: nothing further is lost
    again = tmp_path / "again.jsonl"
    assert CliRunner().invoke(app, ["outcomes", str(files[1]), "--out", str(again)]).exit_code == 0
    assert again.read_text() == files[1].read_text()
    for require_exit in (False, True):
        full, p_full = compare_files([a, b], ["A", "B"], require_exit=require_exit)
        pub, p_pub = compare_files(files, ["A", "B"], require_exit=require_exit)
        assert to_json(pub) == to_json(full)
        assert p_pub == p_full
    [c], _ = compare_files(files, require_exit=True)
    assert c.uncounted_b == 3


def test_outcomes_clear_errors(tmp_path: Path) -> None:
    a = write_eval(tmp_path / "a", A)
    src = a / "trajectories-t4.jsonl"
    before = src.read_text()
    cases = [
        (["outcomes", str(tmp_path / "nope"), "--out", str(tmp_path / "o.jsonl")], "not found"),
        (["outcomes", str(a), "--out", str(tmp_path / "o.json")], ".jsonl"),
        (["outcomes", str(src), "--out", str(src)], "the evaluation's trajectory file"),
        (["outcomes", str(a), "--out", str(src)], "the evaluation's trajectory file"),
    ]
    for args, msg in cases:
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2, res.output
        assert msg in res.output
    assert src.read_text() == before
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"reward": 1.0}\n')
    res = CliRunner().invoke(app, ["outcomes", str(empty), "--out", str(tmp_path / "e.jsonl")])
    assert res.exit_code == 2 and "no episode with a task_id" in res.output
    assert not (tmp_path / "e.jsonl").exists()


def _set_numerics(folder: Path, numerics: str) -> Path:
    d = json.loads((folder / "eval.json").read_text())
    (folder / "eval.json").write_text(json.dumps(d | {"numerics": numerics}))
    return folder


def test_evaluations_sampled_in_other_numerics_are_noted(tmp_path: Path) -> None:
    a = _set_numerics(write_eval(tmp_path / "a", A), "cpu, bf16 autocast")
    b = _set_numerics(write_eval(tmp_path / "b", B), "cpu, float32")
    _, problems = compare_files([a, b])
    assert problems == [
        "the evaluations sampled in different numerics (a: cpu, bf16 autocast; b: cpu, "
        "float32): precision differs too"
    ]
    _set_numerics(b, "cpu, bf16 autocast")
    assert compare_files([a, b])[1] == []
    assert load_outcomes(a, "a").numerics == "cpu, bf16 autocast"
    assert load_outcomes(write_eval(tmp_path / "c", A), "c").numerics is None  # not recorded
