"""The report's table of M-GRPO steps (``report/steps.py``), on hand-written run folders."""

from __future__ import annotations

from pathlib import Path

from tests.report.conftest import traj, write_jsonl
from webagent_r1.report import build_report
from webagent_r1.report.load import load_run
from webagent_r1.report.steps import step_rows, steps_markdown
from webagent_r1.rollout.trajectories import write_trajectories


def _gigpo_run(tmp_path: Path) -> Path:
    """Two M-GRPO steps of a GiGPO run, the first logged twice (a resume), two ranks."""
    run = tmp_path / "run"
    step1 = {
        "step": 1,
        "rollout/success": 0.5,
        "train/groups_used": 1,
        "train/groups_skipped_equal": 2,
        "train/groups_skipped_small": 1,
        "train/step_group_turns": 6,
        "train/step_group_frac": 0.75,
        "train/update_rms": 2.5e-6,
        "rollout/wall_s": 100.0,
        "train/update_s": 50.0,
        "train/step_s": 150.0,
    }
    write_jsonl(
        run / "rl" / "metrics.jsonl",
        [
            {"step": 0, "eval/success": 0.25},  # the start's evaluation: not a step
            {**step1, "train/update_s": 999.0, "train/step_s": 999.0},  # before the resume
            step1,
            # step 2 before the resume had successes; after it, none (no turns_success logged)
            {"step": 2, "rollout/success": 0.25, "rollout/turns_success": 4.0},
            {
                "step": 2,
                "rollout/success": 0.0,
                "rollout/turns_failure": 6.5,
                "train/groups_used": 0,
                "train/groups_skipped_equal": 4,
                "train/step_s": 30.0,
            },
            # step 3: rollouts written, its metrics line not yet (a run in progress)
        ],
    )
    rollouts = run / "rl" / "rollouts"
    # the update logged at step 1: rank 0 and rank 1
    write_trajectories(
        [traj("a", 2, 1.0), traj("a", 8, 1.0, "max_turns"), traj("a", 8, 0.0, "max_turns")],
        rollouts / "step-000000-rank0.jsonl",
    )
    write_trajectories(
        [traj("b", 3, 0.0), traj("b", 5, 0.0, "env_error"), traj("b", 4, 1.0)],
        rollouts / "step-000000-rank1.jsonl",
    )
    # step 2: no rollout file (deleted): success and turns from the metrics
    write_trajectories(
        [
            traj("c", 8, 0.0, "max_turns"),
            traj("c", 8, 1.0, "max_turns"),
            traj("c", 8, 0.0, "env_error"),
        ],
        rollouts / "step-000002-rank0.jsonl",
    )
    write_trajectories([traj("d", 1, 0.0, "env_error")], rollouts / "step-000003-rank0.jsonl")
    (rollouts / "step-000002-rank1.jsonl").write_text('{"turns": [], "reward"\n')  # cut short
    return run


def test_rows_join_metrics_and_rollouts(tmp_path: Path) -> None:
    data = load_run(_gigpo_run(tmp_path))
    rows = step_rows(data)
    assert [r.step for r in rows] == [1, 2, 3, 4]
    r1, r2, r3, r4 = rows
    # 5 scored episodes (the env error left out), successes of 2, 8 and 4 turns
    assert (r1.successes, r1.episodes) == (3, 5)
    assert r1.turns_success == (2 + 8 + 4) / 3
    assert r1.turns_failure == (8 + 3) / 2
    assert r1.ended == 3  # 2-, 3- and 4-turn episodes; the two 8-turn ones hit the limit
    assert r1.successes_at_limit == 1
    assert (r1.groups_used, r1.groups) == (1, 4)
    assert (r1.step_group_turns, r1.step_group_frac) == (6, 0.75)
    assert (r1.update_s, r1.step_s) == (50.0, 150.0)  # the resumed line wins
    assert r2.episodes is None and r2.success_rate == 0.0
    assert r2.turns_success is None and r2.turns_failure == 6.5  # nothing of the dead run
    assert (r2.groups_used, r2.groups) == (0, 4)
    assert r2.step_group_turns is None and r2.update_rms is None
    # no metrics line: rollouts alone; both episodes cut off at the limit, one a success
    assert (r3.successes, r3.episodes, r3.ended, r3.successes_at_limit) == (1, 2, 0, 1)
    assert r3.groups_used is None and r3.step_s is None
    # only environment errors: nothing scored, nothing in the metrics
    assert r4.episodes is None and r4.success_rate is None
    [problem] = data.problems
    assert problem.startswith(
        "rl/rollouts/step-000002-rank1.jsonl: skipped 1 line(s) that were not trajectories (first: "
    )
    assert problem.endswith(
        "step-000002-rank1.jsonl:1: not valid JSON (Expecting ':' delimiter at line 1))"
    )


def test_markdown_table_and_totals(tmp_path: Path) -> None:
    md = "\n".join(steps_markdown(step_rows(load_run(_gigpo_run(tmp_path)))))
    assert "Turns in step groups > 1" in md
    row1 = "| 1 | 3/5 | 1/4 | 4.7 / 5.5 | 3/5 | 1 | 6 (75%) | 2.5e-06 | 1m 40s | 50.0 s | 2m 30s |"
    assert row1 in md
    assert "| 2 | 0.0% | 0/4 | – / 6.5 | – | – | – | – | – | – | 30.0 s |" in md
    assert "| 3 | 1/2 | – | 8.0 / 8.0 | 0/2 | 1 | – | – | – | – | – |" in md
    assert "| 4 | – | – | – / – | – | – | – | – | – | – | – |" in md
    assert (
        "Totals: rollout success 4/7 (57.1%) over 2 step(s) with rollouts; 2 success(es) cut "
        "off at the turn limit; 1 of 8 groups trained on; 3m 00s in 2 timed step(s)."
    ) in md


def test_episode_advantages_have_no_step_group_column(run_dir: Path) -> None:
    # the shared synthetic run: 4 logged steps, rollouts for the first two, no group counts
    md = "\n".join(steps_markdown(step_rows(load_run(run_dir))))
    assert "step groups" not in md
    assert "| 1 | 1/2 | – | 2.0 / 3.0 | 2/2 | 0 |" in md
    assert "| 3 | – | – |" in md  # a step whose line has no rollout success
    assert "| 4 | 75.0% |" in md


def test_report_has_the_section_only_with_rl_steps(tmp_path: Path, run_dir: Path) -> None:
    assert "## M-GRPO steps" in build_report(_gigpo_run(tmp_path)).read_text()
    (run_dir / "rl" / "metrics.jsonl").unlink()
    for f in (run_dir / "rl" / "rollouts").iterdir():
        f.unlink()
    assert "## M-GRPO steps" not in build_report(run_dir).read_text()
