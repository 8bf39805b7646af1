"""The recipe's summary: the constant-answer baseline of its evaluation subset, and its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webagent_r1.config import load_config
from webagent_r1.train import rl
from webagent_r1.train.recipe import _rl_groups, guess_line, run_recipe
from webagent_r1.train.rl import RLResult


def test_summary_has_the_baseline_of_the_evaluation_subset(tmp_path: Path) -> None:
    """shopping.search_result_count's 6 test tasks (rl.eval_tasks 0: all of them): its
    training answer "2" is the answer of 4."""
    cfg = load_config(
        None,
        [
            f"run_dir={tmp_path}",
            "tasks.templates=[shopping.search_result_count]",
            "rl.eval_split=test",  # the default, val, holds its 14 other instances
            "rl.eval_tasks=0",
            "bc.steps=0",
            "rl.steps=0",
        ],
    )
    summary = run_recipe(cfg, progress=False)
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    g = summary["guess_baseline"]
    assert (g["successes"], g["tasks"]) == (4, 6)
    assert g["by_template"] == {
        "shopping.search_result_count": {"guess": "2", "successes": 4, "tasks": 6}
    }
    assert guess_line(summary) == (
        "a constant answer per template would score 67% on these tasks (4/6: each template's "
        "most common training answer, without reading the page)"
    )


def test_other_task_sources_have_no_baseline(tmp_path: Path) -> None:
    cfg = load_config(
        None, [f"run_dir={tmp_path}", "tasks.source=miniwob", "bc.steps=0", "rl.steps=0"]
    )
    summary = run_recipe(cfg, progress=False)
    assert "guess_baseline" not in summary and guess_line(summary) is None
    assert guess_line({"guess_baseline": {"successes": 0, "tasks": 0}}) is None


def test_groups_count_a_redone_step_once(tmp_path: Path) -> None:
    """A run killed after step 4 (checkpoint at 2) and resumed logs steps 3 and 4 twice: the
    summary counts the resumed run's rows; when the resumed run ends at step 3 (its time
    budget), the killed run's step 4 is not counted."""
    rows = [
        {"step": 1, "train/groups_used": 2, "train/groups_skipped_equal": 6},
        {"step": 2, "train/groups_used": 1, "train/groups_skipped_equal": 7},
        {"step": 3, "train/groups_used": 4, "train/groups_skipped_equal": 4},
        {"step": 4, "train/groups_used": 5, "train/groups_skipped_equal": 3},
        {
            "step": 3,
            "train/groups_used": 3,
            "train/groups_skipped_equal": 4,
            "train/groups_skipped_small": 1,
        },
        {"step": 3, "eval/success": 0.5},  # a row without groups is not a step's update
    ]
    (tmp_path / "rl").mkdir()
    (tmp_path / "rl" / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    cfg = load_config(None, [f"run_dir={tmp_path}"])
    assert _rl_groups(cfg, 3) == {"groups_trained": 6, "groups_collected": 24}
    assert _rl_groups(cfg, 4) == {"groups_trained": 11, "groups_collected": 32}


def test_the_rl_stage_time_is_the_trainers_clock_over_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run killed after its checkpoints never wrote its summary; the resumed run's summary
    takes the stage's time from the trainer (kept in the checkpoints), not this process's time
    added to the last summary's."""
    base = [f"run_dir={tmp_path}", "tasks.templates=[shopping.search_result_count]"]
    cfg = load_config(None, [*base, "bc.steps=0", "rl.steps=4", "rl.eval_tasks=2"])
    # the summary of an earlier run that ended after 300 s; a later run was killed after 2 h
    stages = {"rl": {"wall_s": 300.0, "steps": 1}}
    (tmp_path / "summary.json").write_text(json.dumps({"stages": stages, "wall_s": 300.0}))

    async def resumed(cfg, resume=False, init=None, progress=True):  # type: ignore[no-untyped-def]
        assert resume
        return RLResult(tmp_path / "rl" / "checkpoints" / "step-000004", 4, [], 60.0, 7500.0)

    monkeypatch.setattr(rl, "train_rl", resumed)
    summary = run_recipe(cfg, resume=True, progress=False)
    assert summary["stages"]["rl"]["wall_s"] == 7500.0
    assert json.loads((tmp_path / "summary.json").read_text())["stages"]["rl"]["wall_s"] == 7500.0
