"""The quickstart end to end at the smallest scale: every stage, the report, the viewer, the table.

The real quickstart uses the bundled model (under half an hour on 2 cores); this runs the same
code with a tiny random model so that the pipeline (demonstrations by the experts in real
Chromium, base evaluation, BC, M-GRPO with evaluations, report, plots, viewer) is checked on
every CI run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.tiny import make_tiny_model
from webagent_r1.quickstart import quickstart_config, run_quickstart

pytestmark = pytest.mark.browser


def test_packaged_config_loads() -> None:
    cfg = quickstart_config()
    assert cfg.run_dir == "runs/quickstart" and len(cfg.tasks.templates or []) == 4
    assert cfg.bc.steps > 0 and cfg.rl.steps > 0


def test_quickstart_runs_every_stage(tmp_path: Path, capsys) -> None:
    model = make_tiny_model(tmp_path / "model")
    run = tmp_path / "qs"
    (run / "stale").mkdir(parents=True)  # a previous quickstart run is replaced
    out = run_quickstart(
        None,
        [
            f"model.name={model}",
            "model.device=cpu",
            f"run_dir={run}",
            f"bc.data={run / 'demos.jsonl'}",
            "bc.demo_tasks=3",
            "bc.steps=1",
            "bc.batch_size=2",
            "train.trainable_layers=1",
            "rl.steps=1",
            "rl.tasks_per_step=1",
            "rl.eval_tasks=2",
            "rl.drop_equal_groups=false",
            "rollout.group_size=2",
            "rollout.max_new_tokens=4",
            "env.max_turns=2",
        ],
    )
    assert out == run and not (run / "stale").exists()
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary["stages"]) == {"demos", "base", "bc", "rl"}
    assert summary["guess_baseline"]["tasks"] == 2  # the evaluation subset (rl.eval_tasks)
    assert summary["stages"]["rl"]["steps"] == 1
    assert summary["stages"]["rl"]["groups_collected"] == 1  # one step of one task
    paired = summary["stages"]["rl"]["paired"]  # the 2 eval tasks before and after M-GRPO
    assert (paired["from_step"], paired["to_step"], paired["tasks"]) == (0, 1, 2)
    assert (run / "report.md").is_file() and (run / "viewer.html").is_file()
    assert (run / "plots" / "sites.png").is_file()
    printed = capsys.readouterr().out
    labels = ("Base model", "+ BC", "+ M-GRPO", "task by task", "report.md", "viewer.html")
    baseline = "a constant answer per template would score"
    for label in (*labels, baseline, "groups were trained on", "configs/r1.yaml"):
        assert label in printed, label
