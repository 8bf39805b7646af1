"""``compare_runs`` and ``webagent-r1 compare`` on two hand-written RL run folders.

Run ``uniform`` (summary.json: RL took 1 h with its evaluations)::

    step 0  t=1000  eval 0.10
    step 1  (logged twice, as around a resume: the second row wins)
    step 1  t=1900  rollout 0.25  groups used 1, equal 3, small 0  step_s 900  mixed_frac 0.25
    step 2  t=2800  rollout 0.00  groups used 0, equal 4, small 0  step_s 900  mixed_frac 0.00
    step 2  t=3400  eval 0.20

    → 2 steps, 8 groups, 1 mixed (12.5%), rollout 12.5%, gain +10 points in 1 h: +10.0 / h

Run ``dynamic`` (summary.json: RL took 45 min)::

    step 0  t=500   eval 0.10
    step 1  t=2300  rollout 0.50  groups used 3, equal 2, small 1 (2 extra)  step_s 1800
    step 1  t=2800  eval 0.25

    → 1 step, 6 groups, 3 mixed (50.0%), rollout 50.0%, gain +15 points in 0.75 h: +20.0 / h
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.report.conftest import write_jsonl
from webagent_r1.cli import app
from webagent_r1.report.compare import compare_runs, render_markdown, write_comparison
from webagent_r1.report.load import ReportError

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def step_row(
    step: int, time: float, success: float, used: int, equal: int, small: int, step_s: float
) -> dict[str, Any]:
    """A training row shaped like the trainer's (``train/rl.py``)."""
    total = used + equal + small
    return {
        "step": step,
        "time": time,
        "rollout/success": success,
        "rollout/wall_s": step_s - 30.0,
        "train/groups_used": used,
        "train/groups_skipped_equal": equal,
        "train/groups_skipped_small": small,
        "train/step_s": step_s,
        "curriculum/mixed_frac": used / total,
        "curriculum/discarded": total - used,
        "curriculum/extra_groups": max(total - 4, 0),
    }


def make_run(parent: Path, name: str, rows: list[dict[str, Any]], rl_wall_s: float | None) -> Path:
    run = parent / name
    write_jsonl(run / "rl" / "metrics.jsonl", rows)
    stages: dict[str, Any] = {"bc": {"wall_s": 60.0}}
    if rl_wall_s is not None:
        stages["rl"] = {"wall_s": rl_wall_s, "steps": 2}
    (run / "summary.json").write_text(json.dumps({"stages": stages}))
    return run


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    uniform = make_run(
        tmp_path,
        "uniform",
        [
            {"step": 0, "time": 1000.0, "eval/success": 0.1, "eval/success/gitlab": 0.08},
            step_row(1, 1400.0, 1.0, 4, 0, 0, 400.0),  # superseded by the next row of step 1
            step_row(1, 1900.0, 0.25, 1, 3, 0, 900.0),
            step_row(2, 2800.0, 0.0, 0, 4, 0, 900.0),
            {"step": 2, "time": 3400.0, "eval/success": 0.2},
        ],
        rl_wall_s=3600.0,
    )
    dynamic = make_run(
        tmp_path,
        "dynamic",
        [
            {"step": 0, "time": 500.0, "eval/success": 0.1},
            step_row(1, 2300.0, 0.5, 3, 2, 1, 1800.0),
            {"step": 1, "time": 2800.0, "eval/success": 0.25},
        ],
        rl_wall_s=2700.0,
    )
    return uniform, dynamic


def test_numbers(runs: tuple[Path, Path]) -> None:
    c = compare_runs(list(runs))
    u, d = c.runs
    assert (u.label, d.label) == ("uniform", "dynamic")
    assert (u.steps, u.step_wall_s, u.rl_wall_s) == (2, 1800.0, 3600.0)
    assert (u.groups, u.mixed_groups, u.mixed_frac) == (8, 1, 0.125)
    assert u.rollout_success == 0.125
    assert (u.eval_start, u.eval_start_step, u.eval_end, u.eval_end_step) == (0.1, 0, 0.2, 2)
    assert u.gain_pts == pytest.approx(10.0) and u.gain_per_hour == pytest.approx(10.0)
    assert u.mixed_series == [(1.0, 0.25), (2.0, 0.0)]
    assert u.eval_series == [(0.0, 0.1), (2400.0, 0.2)]  # seconds since the first row
    # the extra groups of `dynamic` are among used + equal + small: 6, not 8
    assert (d.steps, d.groups, d.mixed_groups, d.mixed_frac) == (1, 6, 3, 0.5)
    assert d.gain_pts == pytest.approx(15.0)
    assert d.gain_per_hour == pytest.approx(20.0)  # 15 points in 45 min
    assert d.eval_series == [(0.0, 0.1), (2300.0, 0.25)]
    assert c.best is d
    assert c.notes == []


def test_markdown(runs: tuple[Path, Path]) -> None:
    md = render_markdown(compare_runs(list(runs), ["uni", "dyn"]))
    assert md.startswith("| Run | RL steps | RL wall (steps) | RL wall (total) | Groups | Mixed |")
    assert (
        "| uni | 2 | 30m 00s | 1h 00m | 8 | 1 | 12.5 | 12.5 | 10.0 (step 0) | 20.0 (step 2) "
        "| +10.0 | +10.0 |" in md
    )
    assert (
        "| dyn | 1 | 30m 00s | 45m 00s | 6 | 3 | 50.0 | 50.0 | 10.0 (step 0) | 25.0 (step 1) "
        "| +15.0 | +20.0 |" in md
    )
    assert "**dyn** gained the most test success per hour: +20.0 points per hour" in md
    assert "*" not in md.replace("**", "")  # every run has its total RL wall time


def test_step_time_when_rl_has_not_finished(runs: tuple[Path, Path]) -> None:
    # no RL stage in summary.json (a run in progress): the step time, marked
    uniform, dynamic = runs
    (dynamic / "summary.json").unlink()
    c = compare_runs([uniform, dynamic])
    assert c.runs[1].rl_wall_s is None
    assert c.runs[1].gain_per_hour == pytest.approx(30.0)  # 15 points in 30 min of steps
    md = render_markdown(c)
    assert "| 30m 00s | – | 6 |" in md and "| +15.0 | +30.0* |" in md
    assert "or * of the step time" in md


def test_no_gain_and_different_starts(runs: tuple[Path, Path]) -> None:
    uniform, dynamic = runs
    write_jsonl(
        dynamic / "rl" / "metrics.jsonl",
        [
            {"step": 0, "time": 0.0, "eval/success": 0.3},
            step_row(1, 10.0, 0.5, 2, 2, 0, 10.0),
            {"step": 1, "time": 20.0, "eval/success": 0.3},
        ],
    )
    rows = [
        json.loads(line) for line in (uniform / "rl" / "metrics.jsonl").read_text().splitlines()
    ]
    rows[-1]["eval/success"] = 0.05  # uniform lost 5 points
    write_jsonl(uniform / "rl" / "metrics.jsonl", rows)
    c = compare_runs([uniform, dynamic])
    assert c.best is None
    assert c.runs[0].gain_pts == pytest.approx(-5.0) and c.runs[1].gain_pts == 0.0
    md = render_markdown(c)
    assert "No run gained test success" in md and "most test success" not in md
    assert "start from different eval success (uniform 10.0, dynamic 30.0)" in md


def test_same_run_twice_ties(runs: tuple[Path, Path]) -> None:
    uniform, _ = runs
    md = render_markdown(compare_runs([uniform, uniform], ["a", "b"]))
    assert "**a** and **b** tie for the most test success per hour: +10.0" in md


def test_one_evaluation_is_no_gain(tmp_path: Path, runs: tuple[Path, Path]) -> None:
    uniform, _ = runs
    fresh = make_run(
        tmp_path, "fresh", [{"step": 0, "time": 0.0, "eval/success": 0.1}], rl_wall_s=None
    )
    c = compare_runs([uniform, fresh])
    r = c.runs[1]
    assert (r.steps, r.groups, r.mixed_frac, r.eval_start, r.eval_end) == (0, 0, None, 0.1, None)
    assert r.gain_pts is None and r.gain_per_hour is None
    assert c.best is c.runs[0]


def test_write_comparison(runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    paths = write_comparison(list(runs), out)
    assert [p.name for p in paths] == ["compare.md", "compare_mixed.png", "compare_success.png"]
    for p in paths[1:]:
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5_000
    md = (out / "compare.md").read_text()
    assert md.startswith("# Comparison: uniform vs dynamic")
    assert "](compare_mixed.png)" in md and "](compare_success.png)" in md


def test_plots_without_series_are_skipped(runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_comparison(list(runs), out)  # both plots; the next comparison can make neither
    for run in runs:
        path = run / "rl" / "metrics.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        write_jsonl(
            path,
            [
                {k: v for k, v in r.items() if k not in ("time", "curriculum/mixed_frac")}
                for r in rows
            ],
        )
    notes: list[str] = []
    paths = write_comparison(list(runs), out, on_note=notes.append)
    assert [p.name for p in paths] == ["compare.md"]
    assert not (out / "compare_mixed.png").exists() and not (out / "compare_success.png").exists()
    assert len(notes) == 2 and "no run logs `curriculum/mixed_frac`" in notes[0]
    assert "- `compare_success.png`: no run logs" in (out / "compare.md").read_text()


def test_errors(runs: tuple[Path, Path], tmp_path: Path) -> None:
    uniform, dynamic = runs
    with pytest.raises(ReportError, match="at least 2 run folders, got 1"):
        compare_runs([uniform])
    with pytest.raises(ReportError, match="not found"):
        compare_runs([uniform, tmp_path / "nope"])
    bc_only = tmp_path / "bc_only"
    write_jsonl(bc_only / "bc" / "metrics.jsonl", [{"step": 1, "train/loss": 1.0}])
    with pytest.raises(ReportError, match="no RL metrics"):
        compare_runs([uniform, bc_only])
    with pytest.raises(ReportError, match="1 label"):
        compare_runs([uniform, dynamic], ["only-one"])


def test_cli_compare(runs: tuple[Path, Path], tmp_path: Path) -> None:
    runner = CliRunner()
    uniform, dynamic = runs
    out = tmp_path / "out"
    res = runner.invoke(
        app,
        ["compare", str(uniform), str(dynamic), "--label", "u", "--label", "d"]
        + ["--out-dir", str(out)],
    )
    assert res.exit_code == 0, res.output
    assert "| d | 1 | 30m 00s | 45m 00s | 6 | 3 | 50.0 |" in res.output
    assert "**d** gained the most" in res.output
    assert f"comparison: {out / 'compare.md'}" in res.output
    assert f"plot: {out / 'compare_success.png'}" in res.output
    assert (out / "compare.md").is_file()

    one = runner.invoke(app, ["compare", str(uniform)])
    assert one.exit_code == 2 and "at least 2 run folders" in " ".join(one.output.split())
    missing = runner.invoke(app, ["compare", str(uniform), str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such folder" in missing.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["compare", str(uniform), str(empty)])
    assert res.exit_code == 2 and "no RL metrics" in " ".join(res.output.split())
    assert "Traceback" not in res.output
