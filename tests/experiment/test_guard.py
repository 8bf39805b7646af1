"""The test-split guard: ``eval --split test`` refuses without ``--final``; with it the
evaluation is appended to the run folder's ledger, which ledgers are found from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from webagent_r1.experiment.guard import TestSplitError, check_test_split
from webagent_r1.report.ledger import (
    LEDGER_FILE,
    append_test_evaluation,
    find_ledgers,
    read_ledger,
)


def test_check_test_split() -> None:
    check_test_split("val", False)
    check_test_split("test", True)
    with pytest.raises(TestSplitError, match="add --final"):
        check_test_split("test", False)
    for split in ("wide", "heldout"):  # they hold test instances too
        with pytest.raises(TestSplitError, match=f"--split {split} .*holds test instances"):
            check_test_split(split, False)
        check_test_split(split, True)


def test_eval_on_test_without_final_is_a_one_line_error(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "webagent_r1.cli", "eval", "--engine", "expert"]
        + ["--split", "test", f"run_dir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.startswith("error: --split test") and res.stderr.count("\n") == 1
    assert not (tmp_path / LEDGER_FILE).exists()


def test_eval_final_on_test_is_logged(monkeypatch, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    import webagent_r1.cli as cli
    import webagent_r1.evaluation.run as ev

    async def fake_run_evaluation(cfg, tasks, **kw):
        res = {"max_turns": 5, "success": 0.5, "ci": [0.2, 0.8], "episodes": len(tasks)}
        res |= {"pass_at_k": None, "by_site": {}, "failures": {}}
        return {
            "model": kw["model_path"],
            "engine": "expert",
            "samples": 1,
            "temperature": 0.0,
            "results": [res],
        }

    monkeypatch.setattr(ev, "run_evaluation", fake_run_evaluation)
    args = ["eval", "--engine", "expert", "--model", "runs/x/rl/checkpoints/step-000010/model"]
    args += ["--split", "test", "--final", "--subset", "4", f"run_dir={tmp_path}"]
    res = CliRunner().invoke(cli.app, args)
    assert res.exit_code == 0, res.output
    (entry,) = read_ledger(tmp_path / LEDGER_FILE)
    assert entry.checkpoint == "runs/x/rl/checkpoints/step-000010/model"
    assert entry.by == "eval --final" and entry.success == 0.5
    assert entry.settings["tasks"] == 4 and entry.settings["engine"] == "expert"
    assert entry.commit is None or len(entry.commit.split("+")[0]) == 40
    # the default split where the tasks have val: not test, nothing logged
    res = CliRunner().invoke(cli.app, args[:5] + ["--subset", "4", f"run_dir={tmp_path}"])
    assert res.exit_code == 0, res.output
    assert len(read_ledger(tmp_path / LEDGER_FILE)) == 1


def test_a_model_of_another_run_is_logged_in_that_run_too(monkeypatch, tmp_path: Path) -> None:
    """``eval --final --model <a checkpoint of run R>`` under another config's run_dir: the
    line goes to both ledgers, so R's results pages list it."""
    from typer.testing import CliRunner

    import webagent_r1.cli as cli
    import webagent_r1.evaluation.run as ev

    async def fake_run_evaluation(cfg, tasks, **kw):
        res = {"max_turns": 5, "success": 0.25, "ci": [0.0, 0.6], "episodes": len(tasks)}
        res |= {"pass_at_k": None, "by_site": {}, "failures": {}}
        return {"model": kw["model_path"], "engine": "expert", "samples": 1,
                "temperature": 0.0, "results": [res]}  # fmt: skip

    monkeypatch.setattr(ev, "run_evaluation", fake_run_evaluation)
    run = tmp_path / "runs" / "r"
    model = run / "rl" / "checkpoints" / "step-000010" / "model"
    model.mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 0\n")
    here = tmp_path / "elsewhere"
    args = ["eval", "--engine", "expert", "--model", str(model), "--split", "wide"]
    res = CliRunner().invoke(cli.app, args + ["--subset", "2", f"run_dir={here}"])
    assert res.exit_code != 0 and not (here / LEDGER_FILE).exists()  # wide needs --final
    res = CliRunner().invoke(cli.app, args + ["--final", "--subset", "2", f"run_dir={here}"])
    assert res.exit_code == 0, res.output
    for ledger in (here / LEDGER_FILE, run / LEDGER_FILE):
        (entry,) = read_ledger(ledger)
        assert entry.checkpoint == str(model) and entry.success == 0.25


def test_ledgers_are_found_below_a_folder_and_above_a_checkpoint(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "bc"
    append_test_evaluation(run, "m", by="eval --final", settings={})
    append_test_evaluation(tmp_path / "exp" / "a" / "seed-0", "n", by="x", settings={})
    model = run / "bc" / "checkpoints" / "step-000100" / "model"
    model.mkdir(parents=True)
    with (run / LEDGER_FILE).open("a") as f:
        f.write('{"cut off\n')  # a killed writer's line is skipped
    assert find_ledgers(model) == [run / LEDGER_FILE]
    assert find_ledgers(tmp_path / "exp", model) == [
        tmp_path / "exp" / "a" / "seed-0" / LEDGER_FILE,
        run / LEDGER_FILE,
    ]
    assert [e.checkpoint for e in read_ledger(run / LEDGER_FILE)] == ["m"]
    assert json.loads((run / LEDGER_FILE).read_text().splitlines()[0])["by"] == "eval --final"
