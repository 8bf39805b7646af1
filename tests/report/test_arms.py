"""Arms of training runs compared (``report/arms.py``, ``webagent-r1 compare-arms``).

Arm A, one run; arm B, two runs (two episodes per task)::

    task     A      B1     B2     rates A / B1 / B2    arm B
    x.a/0    1 0    1 1    0 0    .5 / 1  / 0          .5
    x.a/1    0 0    1 0    0 0    0  / .5 / 0          .25
    y.b/0    1 1    1 1    1 0    1  / 1  / .5         .75
    y.b/1    0 1    0 0    1 1    .5 / 0  / 1          .5
    y.b/2    -      1 1    -      (only in B1: left out)

    → 4 tasks; A .5, B1 .625, B2 .375, arm B .5; B − A 0; runs +.125 and -.125 against A;
      spread SD of (.625, .375) = .25 / sqrt 2.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.report.conftest import traj
from tests.report.test_paired import write_eval
from webagent_r1.cli import app
from webagent_r1.report.arms import compare_arms, render_arms_markdown
from webagent_r1.report.load import ReportError
from webagent_r1.rollout.trajectories import write_trajectories

A = {"x.a/0": [1, 0], "x.a/1": [0, 0], "y.b/0": [1, 1], "y.b/1": [0, 1]}
B1 = {"x.a/0": [1, 1], "x.a/1": [1, 0], "y.b/0": [1, 1], "y.b/1": [0, 0], "y.b/2": [1, 1]}
B2 = {"x.a/0": [0, 0], "x.a/1": [0, 0], "y.b/0": [1, 0], "y.b/1": [1, 1]}


@pytest.fixture
def evals(tmp_path: Path) -> tuple[Path, Path, Path]:
    return (
        write_eval(tmp_path / "bc", A),
        write_eval(tmp_path / "rl1", B1),
        write_eval(tmp_path / "rl2", B2),
    )


def test_arms_by_hand(evals: tuple[Path, Path, Path]) -> None:
    a, b1, b2 = evals
    c = compare_arms([a], [b1, b2], "BC", "RL")
    assert (c.tasks, c.dropped) == (4, 1)
    assert c.a.success == pytest.approx(0.5)
    assert [r.success for r in c.b.runs] == pytest.approx([0.625, 0.375])
    assert [(r.ok, r.n) for r in c.b.runs] == [(5, 8), (3, 8)]
    assert c.b.success == pytest.approx(0.5)
    assert c.diff == pytest.approx(0.0)
    assert [r.diff for r in c.b.runs] == pytest.approx([0.125, -0.125])
    assert c.b.spread_sd == pytest.approx(0.25 / math.sqrt(2))
    assert c.a.spread_sd is None and c.a.spread_p is None
    assert 0 < c.b.spread_p <= 1
    md = render_arms_markdown(c)
    assert "# RL (2 runs) against BC (1 run)" in md
    assert "4 tasks every run scored (1 other task left out" in md
    assert "BC: one run, so its spread between runs is not in the interval" in md
    assert "| RL | rl1 | 5/8 | 62.5% | +12.5 (" in md
    assert "| BC | bc | 4/8 | 50.0% | – |" in md


def test_arm_intervals_by_hand(tmp_path: Path) -> None:
    # A: every task 1/2. B: one run solves everything, the other nothing. Over runs the arm
    # is at 1, 0 (1/4 each) or 1/2 (1/2): B − A in {+.5, -.5, 0}; with the runs fixed, 0.
    a = write_eval(tmp_path / "a", {"x.a/0": [1, 0], "x.a/1": [0, 1]})
    b1 = write_eval(tmp_path / "s0" / "eval", {"x.a/0": [1, 1], "x.a/1": [1, 1]})
    b2 = write_eval(tmp_path / "s1" / "eval", {"x.a/0": [0, 0], "x.a/1": [0, 0]})
    c = compare_arms([a], [b1, b2], "A", "B")
    assert c.diff == 0.0
    assert c.diff_ci == (-0.5, 0.5)
    assert c.diff_ci_tasks == (0.0, 0.0)
    # runs of two seeds are told apart by their folders, not both called "eval"
    assert [r.label for r in c.b.runs] == ["s0/eval", "s1/eval"]
    assert c.a.runs[0].label == "a"
    # each task's four episodes [1, 1, 0, 0] dealt two a run: the split is as uneven as the
    # observed one only if both tasks give run 1 both successes, or both give it none: 2/36
    assert c.b.spread_p == pytest.approx(1 / 18, abs=0.005)
    assert "p = 0.05" in render_arms_markdown(c)


def test_arms_refuse_a_run_twice_and_disjoint_tasks(
    evals: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    a, b1, _ = evals
    with pytest.raises(ReportError, match="one evaluation"):
        compare_arms([a], [b1, b1])
    # the folder and the trajectory file it names are one run
    with pytest.raises(ReportError, match="one evaluation"):
        compare_arms([a], [b1, b1 / "trajectories-t4.jsonl"])
    with pytest.raises(ReportError, match="one evaluation"):
        compare_arms([a], [b1, b1.parent / "." / b1.name])
    with pytest.raises(ReportError, match="both arms are named"):
        compare_arms([a], [b1], "X", "X")
    other = write_eval(tmp_path / "other", {"z.c/0": [1]})
    with pytest.raises(ReportError, match="share no task"):
        compare_arms([a], [other])
    with pytest.raises(ReportError, match="at least one evaluation"):
        compare_arms([], [b1])


def test_compare_arms_cli(evals: tuple[Path, Path, Path], tmp_path: Path) -> None:
    a, b1, b2 = evals
    out = tmp_path / "cmp" / "arms.md"
    args = ["compare-arms", "-a", str(a), "-b", str(b1), "-b", str(b2), "--label-b", "RL"]
    r = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "RL − A: +0.0 points" in r.output
    data = json.loads(out.with_suffix(".json").read_text())
    assert data["tasks"] == 4 and len(data["b"]["runs"]) == 2
    assert data["b"]["runs"][0]["success"] == pytest.approx(0.625)
    bad_out = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "arms.json")])
    assert bad_out.exit_code == 2 and "markdown file" in bad_out.output
    missing = CliRunner().invoke(app, ["compare-arms", "-a", str(tmp_path / "no"), "-b", str(b1)])
    assert missing.exit_code == 2 and "not found" in missing.output


def test_arms_require_exit(tmp_path: Path) -> None:
    # B's run succeeds on every episode, half of them at the turn limit
    a = write_eval(tmp_path / "a", {"x.a/0": [1, 0], "x.a/1": [0, 0]})
    b = tmp_path / "b"
    b.mkdir()
    trajs = []
    for tid in ("x.a/0", "x.a/1"):
        for status in ("done", "max_turns"):
            t = traj(tid, 8, 1.0, status)
            t.info["task"] = {"site": "x", "template": "x.a", "intent": "?"}
            trajs.append(t)
    write_trajectories(trajs, b / "trajectories-t8.jsonl")
    (b / "eval.json").write_text(
        json.dumps({"results": [{"max_turns": 8, "trajectories": "trajectories-t8.jsonl"}]})
    )
    assert compare_arms([a], [b]).diff == pytest.approx(0.75)
    c = compare_arms([a], [b], require_exit=True)
    assert c.b.success == pytest.approx(0.5) and c.diff == pytest.approx(0.25)
    assert any("2 success(es) in the file without exit" in p for p in c.problems)
    assert c.require_exit and [r.uncounted for r in c.b.runs] == [2]


def test_arms_note_runs_sampled_in_other_numerics(tmp_path: Path) -> None:
    runs = []
    for name, numerics in (("a", "cpu, bf16 autocast"), ("b1", "cpu, bf16 autocast")):
        f = write_eval(tmp_path / name, {"x.a/0": [1, 0], "x.a/1": [0, 0]})
        d = json.loads((f / "eval.json").read_text())
        (f / "eval.json").write_text(json.dumps(d | {"numerics": numerics}))
        runs.append(f)
    b2 = write_eval(tmp_path / "b2", {"x.a/0": [1, 1], "x.a/1": [0, 1]})
    assert not any("numerics" in p for p in compare_arms([runs[0]], [runs[1], b2]).problems)
    d = json.loads((b2 / "eval.json").read_text())
    (b2 / "eval.json").write_text(json.dumps(d | {"numerics": "cpu, float32"}))
    (note,) = [p for p in compare_arms([runs[0]], [runs[1], b2]).problems if "numerics" in p]
    assert "cpu, float32" in note and "cpu, bf16 autocast" in note
