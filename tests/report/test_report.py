"""``build_report`` and ``webagent-r1 report`` on the synthetic run folder of conftest.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.report.conftest import BASE, FINAL, START, traj, write_eval_folder
from webagent_r1.cli import app
from webagent_r1.report import ReportError, build_report, build_report_files, load_run, plots
from webagent_r1.report.build import success_rows
from webagent_r1.report.load import read_episode_stats
from webagent_r1.rollout.trajectories import write_trajectories

HEADER = "| Model | Reddit | GitLab | CMS | Map | OSS | Cross-site | Avg. |"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALL_PLOTS = ("learning_curve.png", "sites.png", "tts.png", "turns_hist.png")


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, path
    assert len(data) > 5_000, f"{path} is only {len(data)} bytes"


def test_full_run_table_numbers(run_dir: Path) -> None:
    report = build_report(run_dir)
    assert report == run_dir / "report.md"
    md = report.read_text()
    assert HEADER in md
    # base: reddit 0.5, gitlab 0.0, shopping_admin 0.25, no map/shopping/cross-site, avg 0.25
    assert "| Base model | 50.0 | 0.0 | 25.0 | – | – | – | 25.0 |" in md
    # + BC is the RL stage's step-0 evaluation: 0.75, 0.125 → 12.5, 0.25; avg 0.375
    assert "| + BC | 75.0 | 12.5 | 25.0 | – | – | – | 37.5 |" in md
    assert "| + M-GRPO | 100.0 | 50.0 | 37.5 | – | – | – | 62.5 |" in md
    # eval.json rows: reddit s + 0.1, map s - 0.1, cross-site 0.0, no gitlab/CMS/OSS
    assert "| eval (max_turns=5) | 30.0 | – | – | 10.0 | – | 0.0 | 20.0 |" in md
    assert "| eval (max_turns=15) | 45.0 | – | – | 25.0 | – | 0.0 | 35.0 |" in md
    rows = [ln.split(" |")[0] for ln in md.splitlines() if ln.startswith("| ")]
    order = ["| Base model", "| + BC", "| + M-GRPO", "| eval (max_turns=5)"]
    assert [rows.index(r) for r in order] == sorted(rows.index(r) for r in order)


def test_full_run_sections_and_plots(run_dir: Path) -> None:
    res = build_report_files(run_dir)
    md = res.report.read_text()
    # confidence intervals of eval.json, overall and per site / kind
    assert "| 15 | 35.0 | [20.0, 50.0] | 20 |" in md
    assert "45.0 [10.0, 90.0] (n=10)" in md
    assert "change" in md and "info" in md
    # stage wall times
    assert "| rl | 1h 02m |" in md and "| demos | 12.0 s |" in md and "| bc | 1m 01s |" in md
    assert "held-out loss 0.8123" in md
    # what was found, and the half-written line of rl/metrics.jsonl
    assert "`rl/eval/`: 2 evaluation trajectory file(s), steps 0, 4" in md
    assert "`eval/eval.json`" in md
    assert "rl/metrics.jsonl: skipped 1 line(s)" in md
    assert "Skipped:" not in md
    assert sorted(p.name for p in res.plots) == sorted(ALL_PLOTS)
    for name in ALL_PLOTS:
        assert f"](plots/{name})" in md  # relative links
        assert_png(run_dir / "plots" / name)


def test_rl_evals_compared_task_by_task(run_dir: Path) -> None:
    md = build_report(run_dir).read_text()
    # step 0: t1 fail, t2 ok; step 4: t1 ok, t2 ok, t3 fail (only there), t4 env_error
    assert "## M-GRPO against its start, task by task (step 0 → step 4)" in md
    assert "on the 2 tasks both evaluated: 1/2 → 2/2; difference +50.0 points" in md
    assert "better / worse / tied: 1 / 0 / 1; sign test p = 1.000" in md
    # evaluations of different tasks: noted, no section
    write_trajectories([traj("other", 1, 1.0)], run_dir / "rl" / "eval" / "step-000004.jsonl")
    md = build_report(run_dir).read_text()
    assert "task by task" not in md.split("## Problems")[0]
    assert "paired comparison of RL evaluations skipped" in md


def test_success_rows_sources(run_dir: Path) -> None:
    rows = success_rows(load_run(run_dir))
    assert [r.label for r in rows] == [
        "Base model",
        "+ BC",
        "+ M-GRPO",
        "eval (max_turns=5)",
        "eval (max_turns=10)",
        "eval (max_turns=15)",
    ]
    assert rows[1].overall == START["eval/success"] and rows[2].overall == FINAL["eval/success"]
    assert rows[2].source == "summary.json: stages.rl.final (step 4)"
    assert rows[0].episodes == 8


def test_r1_zero_base_row_is_rl_start(tmp_path: Path) -> None:
    summary = {"stages": {"rl": {"wall_s": 5.0, "start": START, "final": FINAL, "history": []}}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    rows = success_rows(load_run(tmp_path))
    assert [r.label for r in rows] == ["Base model", "+ M-GRPO"]
    md = build_report(tmp_path).read_text()
    assert "| Base model | 75.0 | 12.5 | 25.0 | – | – | – | 37.5 |" in md
    assert "+ BC" not in md


def test_episode_stats_leave_out_env_errors(run_dir: Path) -> None:
    st = read_episode_stats(run_dir / "rl" / "eval" / "step-000004.jsonl", "final")
    assert st.turns == [1, 3, 5] and st.success == [True, True, False] and st.bad_lines == 0


def test_missing_parts_are_skipped_and_noted(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text(json.dumps({"stages": {"base": BASE}}))
    res = build_report_files(tmp_path)
    md = res.report.read_text()
    assert "| Base model | 50.0 | 0.0 | 25.0 | – | – | – | 25.0 |" in md
    for missing in ("`bc/metrics.jsonl`: missing", "`rl/metrics.jsonl`: missing"):
        assert missing in md
    assert "`rl/eval/`: missing" in md and "`eval.json`: none" in md
    assert [p.name for p in res.plots] == ["sites.png"]
    assert_png(tmp_path / "plots" / "sites.png")
    for name in ("learning_curve.png", "tts.png", "turns_hist.png"):
        assert not (tmp_path / "plots" / name).exists()
        assert f"- `{name}`:" in md  # listed under "Skipped" with the reason


def test_eval_folder_alone(tmp_path: Path) -> None:
    write_eval_folder(tmp_path)
    res = build_report_files(tmp_path)
    md = res.report.read_text()
    assert HEADER in md and "| eval (max_turns=10) | 40.0 | – | – | 20.0 | – | 0.0 | 30.0 |" in md
    assert "`summary.json`: missing" in md
    assert sorted(p.name for p in res.plots) == ["sites.png", "tts.png", "turns_hist.png"]
    for p in res.plots:
        assert_png(p)


def test_eval_intervals_and_unscored_tasks_are_stated(tmp_path: Path) -> None:
    """An evaluation with several samples per task says its intervals are a bootstrap over
    tasks and pass@k the unbiased estimator, and names the tasks no episode scored."""
    write_eval_folder(tmp_path)
    d = json.loads((tmp_path / "eval.json").read_text())
    d["samples"] = 4
    for r in d["results"]:
        r.update(ci_method="task-bootstrap", pass_at_k=0.5, unscored_tasks=[])
    d["results"][-1]["unscored_tasks"] = ["map.x/3", "map.y/0"]
    (tmp_path / "eval.json").write_text(json.dumps(d))
    md = build_report(tmp_path).read_text()
    assert "bootstrap over tasks (a task's samples resampled together" in md
    assert "pass@k: unbiased" in md
    assert "max_turns 15: 2 task(s) with no scored episode" in md and "map.x/3, map.y/0" in md
    assert "max_turns 5: " not in md.split("CI: ")[1].split("\n\n")[0]


def test_missing_eval_trajectories_are_noted(tmp_path: Path) -> None:
    write_eval_folder(tmp_path)
    (tmp_path / "trajectories-t15.jsonl").unlink()
    res = build_report_files(tmp_path)
    assert "turns_hist.png" not in [p.name for p in res.plots]
    assert "`trajectories-t15.jsonl` (named by `eval.json`) is missing" in res.report.read_text()


def test_run_in_progress_uses_metrics_and_rollouts(run_dir: Path) -> None:
    # no RL stage in summary.json yet, no RL metrics: rows from eval_history, curve from rollouts
    summary = json.loads((run_dir / "summary.json").read_text())
    del summary["stages"]["rl"]
    (run_dir / "summary.json").write_text(json.dumps(summary))
    (run_dir / "rl" / "metrics.jsonl").unlink()
    (run_dir / "rl" / "eval_history.json").write_text(json.dumps([START, FINAL]))
    shutil.rmtree(run_dir / "eval")
    res = build_report_files(run_dir)
    md = res.report.read_text()
    assert "| + BC | 75.0 | 12.5 | 25.0 | – | – | – | 37.5 |" in md
    assert "| + M-GRPO (step 4) | 100.0 | 50.0 | 37.5 | – | – | – | 62.5 |" in md
    assert "learning_curve.png" in [p.name for p in res.plots]


def test_curve_from_rollouts_when_metrics_lack_success(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``rollout/success`` in the metrics, the curve's training points are the
    rollout files' success, a file named step S at step S + 1, an environment error left out."""
    rows = [json.loads(x) for x in (run_dir / "rl" / "metrics.jsonl").read_text().splitlines()[:-1]]
    for r in rows:
        r.pop("rollout/success", None)
    (run_dir / "rl" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_trajectories(
        [
            traj("r1", 2, 1.0),
            traj("r1", 3, 1.0),
            traj("r2", 1, 0.0),
            traj("r2", 4, 0.0, "env_error"),
        ],
        run_dir / "rl" / "rollouts" / "step-000001-rank1.jsonl",
    )
    seen: dict[str, object] = {}
    real = plots.plot_learning_curve

    def spy(path: Path, train=(), *args, **kwargs):  # type: ignore[no-untyped-def]
        seen["train"] = list(train)
        return real(path, train, *args, **kwargs)

    monkeypatch.setattr(plots, "plot_learning_curve", spy)
    build_report_files(run_dir)
    # step 1: 1 of 2 (rank 0); step 2: rank 0's 1 of 2 and rank 1's 2 of 3 scored
    assert seen["train"] == [(1.0, 0.5), (2.0, 0.6)]


def test_stale_plots_are_removed(run_dir: Path) -> None:
    build_report(run_dir)
    shutil.rmtree(run_dir / "eval")
    res = build_report_files(run_dir)
    assert not (run_dir / "plots" / "tts.png").exists()
    assert "tts.png" not in [p.name for p in res.plots]


def test_empty_or_missing_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not found"):
        build_report(tmp_path / "nope")
    with pytest.raises(ReportError, match="nothing to report"):
        build_report(tmp_path)
    assert issubclass(ReportError, ValueError)
    (tmp_path / "summary.json").write_text("{not json")
    (tmp_path / "rl" / "eval").mkdir(parents=True)
    with pytest.raises(ReportError, match="summary.json: unreadable"):
        build_report(tmp_path)
    assert not (tmp_path / "report.md").exists()


def test_partial_trajectory_line_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "rl" / "eval" / "step-000000.jsonl"
    write_trajectories([traj("a", 2, 1.0)], path)
    with path.open("a") as f:
        f.write('{"task_id": "b", "turns": [')
    res = build_report_files(tmp_path)
    assert [p.name for p in res.plots] == ["turns_hist.png"]
    assert "skipped 1 line(s) that were not trajectories" in res.report.read_text()


def test_cli_report(run_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["report", str(run_dir)])
    assert out.exit_code == 0, out.output
    assert f"report: {run_dir / 'report.md'}" in out.output
    for name in ALL_PLOTS:
        assert f"plot: {run_dir / 'plots' / name}" in out.output
    assert (run_dir / "report.md").is_file()

    missing = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such folder" in missing.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(app, ["report", str(empty)])
    assert res.exit_code == 2 and "nothing to report" in " ".join(res.output.split())
    assert "Traceback" not in res.output


GUESS = {
    "successes": 3,
    "tasks": 20,
    "by_template": {
        "reddit.search_count": {"guess": "1", "successes": 3, "tasks": 6},
        "reddit.upvote_post": {"guess": None, "successes": 0, "tasks": 14},
    },
}


def test_eval_per_template_table_has_the_constant_answer_column(tmp_path: Path) -> None:
    write_eval_folder(tmp_path)
    d = json.loads((tmp_path / "eval.json").read_text())
    for r in d["results"]:
        r["by_template"] = {
            "reddit.search_count": {"success": 0.5, "ci": [0.2, 0.8], "n": 6},
            "reddit.upvote_post": {"success": 0.25, "ci": [0.1, 0.5], "n": 14},
        }
    (tmp_path / "eval.json").write_text(json.dumps({**d, "guess_baseline": GUESS}))
    md = build_report(tmp_path).read_text()
    head = "| Template | max_turns 5 | max_turns 10 | max_turns 15 |"
    assert head + " Constant answer | Its answer |" in md
    # 3 of 6 → 50.0; a change template has no guess
    assert "| reddit.search_count | 50.0 (n=6) | 50.0 (n=6) | 50.0 (n=6) | 3/6 (50.0) | 1 |" in md
    assert "| reddit.upvote_post | 25.0 (n=14) | 25.0 (n=14) | 25.0 (n=14) | n/a | – |" in md
    assert "would score 3/20 (15.0%) on these tasks" in md
    # without guess_baseline (MiniWoB++, WebArena-Lite, older files): the table, no column
    (tmp_path / "eval.json").write_text(json.dumps(d))
    md = build_report(tmp_path).read_text()
    assert head + "\n" in md and "Constant answer" not in md and "would score" not in md
    # a malformed one is named, not fatal
    (tmp_path / "eval.json").write_text(json.dumps({**d, "guess_baseline": {"tasks": 3}}))
    data = load_run(tmp_path)
    assert data.eval_files[0].guess_baseline is None
    assert "eval.json: guess_baseline lacks successes or tasks; skipped" in data.problems


def test_recipe_summary_baseline_is_stated(run_dir: Path) -> None:
    s = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**s, "guess_baseline": GUESS}))
    md = build_report(run_dir).read_text()
    assert "would score 3/20 (15.0%) on the recipe's evaluation subset" in md
