"""A plan runs two arms end to end with a fake trainer and evaluator; a second call trains and
evaluates nothing; a killed training or evaluation is resumed; test runs go to the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.experiment.support import FakeEvaluator, FakeTrainer, write_plan
from webagent_r1.experiment import PlanError, load_plan, run_experiment
from webagent_r1.report.ledger import LEDGER_FILE, read_ledger


def _run(plan: Path, trainer: FakeTrainer, evaluator: FakeEvaluator):
    return run_experiment(load_plan(plan), trainer, evaluator, progress=False, log=lambda m: None)


def test_two_arms_end_to_end_then_nothing_to_do(tmp_path: Path) -> None:
    plan = write_plan(tmp_path)
    trainer, evaluator = FakeTrainer(), FakeEvaluator()
    done = _run(plan, trainer, evaluator)
    assert (done.trained, done.evaluated) == (4, 4)
    assert sorted(Path(r).relative_to(tmp_path / "exp").as_posix() for r, _ in trainer.calls) == [
        "mgrpo/seed-0",
        "mgrpo/seed-1",
        "no-pg/seed-0",
        "no-pg/seed-1",
    ]
    assert not any(resume for _, resume in trainer.calls + evaluator.calls)
    page = done.results.read_text()
    assert done.results == tmp_path / "exp" / "results.md"
    assert "mgrpo − no-pg" in page and "`rl.pg_coef=0`" in page
    d = json.loads(done.results.with_suffix(".json").read_text())
    assert [a["name"] for a in d["arms"]] == ["mgrpo", "no-pg"]
    (c,) = d["comparisons"]
    assert c["tasks"] == 6 and c["diff"] > 0  # 0.7 against 0.3
    assert c["p_holm"] == pytest.approx(c["p"])  # one comparison: Holm leaves p alone
    assert c["rliable_method"] == "runs and tasks" and 0.5 < c["poi"] <= 1
    assert d["test_evaluations"] == []
    # the second call: every run trained and evaluated, the page rewritten alone
    again = _run(plan, FakeTrainer(), FakeEvaluator())
    assert (again.trained, again.evaluated) == (0, 0)
    assert json.loads(again.results.with_suffix(".json").read_text())["comparisons"] == [c]


def test_a_killed_training_and_a_killed_evaluation_resume(tmp_path: Path) -> None:
    plan = write_plan(tmp_path)
    trainer = FakeTrainer(fail_once="no-pg/seed-1")
    with pytest.raises(RuntimeError, match="killed"):
        _run(plan, trainer, FakeEvaluator(fail_once="mgrpo/seed-1"))  # killed in the eval
    with pytest.raises(RuntimeError, match="killed"):
        _run(plan, trainer, FakeEvaluator())  # killed in no-pg seed 1's training
    trainer2, evaluator = FakeTrainer(), FakeEvaluator()
    done = _run(plan, trainer2, evaluator)
    assert trainer2.calls == [(str(tmp_path / "exp" / "no-pg" / "seed-1"), True)]
    assert evaluator.calls == [(str(tmp_path / "exp" / "no-pg" / "seed-1" / "eval-val"), False)]
    assert (done.trained, done.evaluated) == (1, 1)


def test_a_killed_evaluation_is_resumed_with_resume(tmp_path: Path) -> None:
    plan = write_plan(tmp_path)
    with pytest.raises(RuntimeError, match="killed"):
        _run(plan, FakeTrainer(), FakeEvaluator(fail_once="mgrpo/seed-0"))
    evaluator = FakeEvaluator()
    _run(plan, FakeTrainer(), evaluator)
    assert evaluator.calls[0] == (str(tmp_path / "exp" / "mgrpo" / "seed-0" / "eval-val"), True)


def test_a_run_trained_with_other_overrides_is_refused(tmp_path: Path) -> None:
    _run(write_plan(tmp_path), FakeTrainer(), FakeEvaluator())
    changed = write_plan(tmp_path, arms={"mgrpo": ["rl.lr=1e-5"], "no-pg": ["rl.pg_coef=0"]})
    with pytest.raises(PlanError, match="arms.mgrpo: .* was trained with other settings"):
        _run(changed, FakeTrainer(), FakeEvaluator())


def test_a_test_plan_logs_every_evaluation_and_lists_them(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, split="test", final=True, seeds=[0])
    done = _run(plan, FakeTrainer(), FakeEvaluator())
    ledgers = sorted((tmp_path / "exp").rglob(LEDGER_FILE))
    assert len(ledgers) == 2  # one per run
    entry = read_ledger(ledgers[0])[0]
    assert entry.checkpoint.endswith("step-000010/model") and entry.by.startswith("experiment")
    assert entry.settings["samples"] == 2 and entry.settings["tasks"] == 6
    d = json.loads(done.results.with_suffix(".json").read_text())
    assert len(d["test_evaluations"]) == 2
    assert "one seed per arm" in " ".join(d["notes"])
    assert "## Checkpoints evaluated on test" in done.results.read_text()
    _run(plan, FakeTrainer(), FakeEvaluator())  # nothing evaluated again: nothing logged
    assert sum(len(read_ledger(p)) for p in ledgers) == 2


def test_the_cli_runs_a_plan(monkeypatch, tmp_path: Path) -> None:
    """``webagent-r1 experiment PLAN`` with the recipe's trainer and evaluator replaced."""
    from typer.testing import CliRunner

    import webagent_r1.cli as cli
    import webagent_r1.experiment.run as run

    monkeypatch.setattr(run, "recipe_trainer", lambda progress=True: FakeTrainer())
    monkeypatch.setattr(run, "recipe_evaluator", lambda *a, **k: FakeEvaluator())
    res = CliRunner().invoke(cli.app, ["experiment", str(write_plan(tmp_path))])
    assert res.exit_code == 0, res.output
    assert "[4/4] no-pg seed 1: evaluation evaluated" in res.output
    assert (
        f"trained 4 run(s), evaluated 4; results: {tmp_path / 'exp' / 'results.md'}" in res.output
    )


def test_an_unfinished_evaluation_of_other_settings_is_a_plan_error(tmp_path: Path) -> None:
    def refuses(*args):
        raise ValueError("--resume: the folder holds an evaluation with other settings")

    with pytest.raises(PlanError, match="eval: .*eval-val: --resume: the folder holds"):
        run_experiment(load_plan(write_plan(tmp_path)), FakeTrainer(), refuses, log=lambda m: None)


def test_final_model_is_rl_then_bc_then_the_start() -> None:
    from webagent_r1.config import load_config
    from webagent_r1.experiment.run import final_model

    cfg = load_config(None, ["init_from=runs/bc/model"])
    rl = {"rl": {"checkpoint": "r/rl/checkpoints/step-000010"}, "bc": {"checkpoint": "r/bc/x"}}
    assert final_model({"stages": rl}, cfg) == str(Path("r/rl/checkpoints/step-000010/model"))
    assert final_model({"stages": {"bc": {"checkpoint": "r/bc/x"}}}, cfg) == str(
        Path("r/bc/x/model")
    )
    assert final_model({"stages": {}}, cfg) == "runs/bc/model"


def test_a_recipe_edited_after_its_runs_is_refused(tmp_path: Path) -> None:
    """A finished run is reused only under the settings it was trained with: an edit of the
    recipe file (same path, same overrides) is refused, not mixed in silently."""
    from tests.experiment.support import RECIPE

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(Path(RECIPE).read_text())
    plan = write_plan(tmp_path, recipe=str(recipe))
    _run(plan, FakeTrainer(), FakeEvaluator())
    assert (_run(plan, FakeTrainer(), FakeEvaluator()).trained) == 0  # unchanged: reused
    recipe.write_text(recipe.read_text().replace("lr: 2.0e-5", "lr: 3.0e-5"))
    with pytest.raises(PlanError, match="arms.mgrpo: .* was trained before .* changed"):
        _run(plan, FakeTrainer(), FakeEvaluator())


class ShortTrainer(FakeTrainer):
    """A fake trainer whose runs of one arm stop after 7 of their M-GRPO updates (a time
    budget), as the recipe's summary.json records it."""

    def __call__(self, cfg, resume: bool) -> str:
        model = super().__call__(cfg, resume)
        steps = 7 if "mgrpo" in str(cfg.run_dir) else cfg.rl.steps
        summary = {"stages": {"rl": {"steps": steps}}}
        (Path(cfg.run_dir) / "summary.json").write_text(json.dumps(summary))
        return model


def test_a_run_stopped_short_of_its_updates_is_flagged(tmp_path: Path) -> None:
    lines: list[str] = []
    done = run_experiment(
        load_plan(write_plan(tmp_path)), ShortTrainer(), FakeEvaluator(), False, lines.append
    )
    assert sum("made 7 of rl.steps=10" in m for m in lines) == 2  # both mgrpo seeds
    page = done.results.read_text()
    assert page.count("7/10 (short)") == 2 and page.count("10/10") == 2


def test_an_archive_keeps_finished_runs_and_restores_them_on_another_machine(
    tmp_path: Path,
) -> None:
    import shutil

    kept = tmp_path / "docs" / "kept"
    plan = write_plan(tmp_path, archive=str(kept))
    first = _run(plan, FakeTrainer(), FakeEvaluator())
    page = json.loads(first.results.with_suffix(".json").read_text())
    run = kept / "mgrpo" / "seed-1"
    assert sorted(p.name for p in run.iterdir()) == [
        "config.yaml",
        "eval-val-outcomes.jsonl",
        "eval-val.json",
        "experiment-run.json",
    ]
    rows = [
        json.loads(line) for line in (run / "eval-val-outcomes.jsonl").read_text().split("\n")[:-1]
    ]
    assert len(rows) == 12 and set(rows[0]) >= {"task_id", "reward", "status"}  # 6 tasks x 2
    # another machine: the archive only (no run folder, no model); nothing runs again
    shutil.rmtree(tmp_path / "exp")
    trainer, evaluator = FakeTrainer(), FakeEvaluator()
    again = _run(plan, trainer, evaluator)
    assert (again.trained, again.evaluated) == (0, 0) and trainer.calls == evaluator.calls == []
    assert (
        json.loads(again.results.with_suffix(".json").read_text())["comparisons"]
        == (page["comparisons"])
    )
    # a run missing from the archive (or half archived: no mark) is trained again, alone
    shutil.rmtree(tmp_path / "exp")
    (kept / "no-pg" / "seed-0" / "experiment-run.json").unlink()
    trainer = FakeTrainer()
    _run(plan, trainer, FakeEvaluator())
    assert trainer.calls == [(str(tmp_path / "exp" / "no-pg" / "seed-0"), False)]
    assert (kept / "no-pg" / "seed-0" / "experiment-run.json").is_file()  # archived again


def test_an_archive_of_other_settings_is_refused(tmp_path: Path) -> None:
    import shutil

    kept = tmp_path / "kept"
    plan = write_plan(tmp_path, archive=str(kept))
    _run(plan, FakeTrainer(), FakeEvaluator())
    shutil.rmtree(tmp_path / "exp")
    mark = kept / "mgrpo" / "seed-0" / "experiment-run.json"
    d = json.loads(mark.read_text())
    mark.write_text(json.dumps(d | {"overrides": [*d["overrides"], "rl.lr=1e-3"]}))
    with pytest.raises(PlanError, match="trained with other settings"):
        _run(plan, FakeTrainer(), FakeEvaluator())


class SavingTrainer(FakeTrainer):
    """A fake trainer that saves the run's settings as ``webagent-r1 train`` does."""

    def __call__(self, cfg, resume: bool) -> str:
        from webagent_r1.train.runconfig import save_run_config

        model = super().__call__(cfg, resume)
        save_run_config(cfg, resume=False)
        return model


def test_a_run_of_an_older_code_version_is_reused_when_its_saved_settings_match(
    tmp_path: Path,
) -> None:
    """A settings hash changes when the code adds a setting; the run's saved settings, loaded
    with today's defaults, decide then, and a real difference is named."""
    plan = write_plan(tmp_path)
    _run(plan, SavingTrainer(), FakeEvaluator())
    for mark in (tmp_path / "exp").glob("*/seed-*/experiment-run.json"):
        mark.write_text(json.dumps(json.loads(mark.read_text()) | {"config_sha": "0" * 64}))
    lines: list[str] = []
    trainer = FakeTrainer()
    done = run_experiment(
        load_plan(plan), trainer, FakeEvaluator(), progress=False, log=lines.append
    )
    assert done.trained == 0 and trainer.calls == []
    assert sum("another version of the code" in line for line in lines) == 4
    saved = tmp_path / "exp" / "no-pg" / "seed-1" / "config.yaml"
    saved.write_text(saved.read_text().replace("\nseed: 1\n", "\nseed: 5\n"))
    with pytest.raises(PlanError, match=r"arms.no-pg: .*seed: 5 → 1"):
        _run(plan, FakeTrainer(), FakeEvaluator())
