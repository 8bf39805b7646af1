"""Plan files: a valid one loads; each malformed one fails with one line naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.experiment.support import write_plan
from webagent_r1.experiment import PlanError, load_plan, run_experiment

ROOT = Path(__file__).resolve().parents[2]


def test_a_valid_plan_loads_with_its_defaults(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path))
    assert plan.arms == {"mgrpo": [], "no-pg": ["rl.pg_coef=0"]}
    assert plan.results == tmp_path / "exp" / "results.md"
    assert plan.eval.samples == 2 and plan.eval.engine == "hf" and not plan.final
    assert plan.run_dir("no-pg", 1) == tmp_path / "exp" / "no-pg" / "seed-1"
    assert plan.run_overrides("no-pg", 1)[-2:] == ["seed=1", f"run_dir={plan.run_dir('no-pg', 1)}"]
    assert plan.warnings == []


def test_one_seed_and_bc_before_a_start_checkpoint_are_warnings(tmp_path: Path) -> None:
    (tmp_path / "bc").mkdir()
    plan = load_plan(write_plan(tmp_path, seeds=[3], init_from=str(tmp_path / "bc")))
    assert "one seed per arm" in plan.warnings[0]
    assert "bc.steps=0" in plan.warnings[1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"arms": ...}, "arms: missing"),
        ({"seed": [0]}, "seed: unknown key; did you mean seeds?"),
        ({"split": "dev"}, "split: is 'dev'; use val"),
        ({"split": "test"}, "final: split: test is the one measurement"),
        ({"final": True}, "final: true marks a test measurement"),
        ({"seeds": [0, 0]}, "seeds: lists a seed twice"),
        ({"seeds": []}, "seeds: needs a non-empty list"),
        ({"arms": {"a b": []}}, "arms: arm name 'a b' is a folder name"),
        ({"arms": {"mgrpo": "rl.lr=1"}}, "arms.mgrpo: needs a list of section.key=value"),
        ({"arms": {"mgrpo": [], "no-pg": ["rl.nope=1"]}}, "arms.no-pg: the config rejects it"),
        (
            {"comparisons": {"c": {"arm": "mgrpo", "control": "bc"}}},
            "comparisons.c.control: 'bc' is not an arm",
        ),
        ({"comparisons": {"c": {"arm": "mgrpo", "control": "mgrpo"}}}, "with itself"),
        ({"comparisons": {"c": ["mgrpo", "no-pg"]}}, "comparisons.c: needs exactly"),
        ({"eval": {"samples": 0}}, "eval.samples: needs an integer >= 1"),
        ({"eval": {"sample": 2}}, "eval.sample: unknown key"),
        ({"eval": {"samples": 4, "temperature": 0}}, "eval.temperature: 0 with samples > 1"),
        ({"eval": {"engine": "openai"}}, "eval.engine: is 'openai'"),
        ({"results": "out/results.json"}, "results: needs a .md file"),
        ({"recipe": "configs/nope.yaml"}, "recipe: configs/nope.yaml does not exist"),
    ],
)
def test_malformed_plans_name_the_key(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(PlanError) as e:
        load_plan(write_plan(tmp_path, **change))
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_missing_start_checkpoint_is_refused_when_the_plan_runs(tmp_path: Path) -> None:
    plan = load_plan(write_plan(tmp_path, init_from="runs/nope/model"))
    with pytest.raises(PlanError, match="init_from: runs/nope/model does not exist"):
        run_experiment(plan, log=lambda m: None)


def test_the_example_plans_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # their paths are relative to the repository, as configs' are
    plans = sorted((ROOT / "configs" / "experiments").glob("*.yaml"))
    assert plans
    for p in plans:
        plan = load_plan(p)
        assert plan.split == "val" and not plan.final  # examples choose; test comes after
        # one seed only where the plan chooses a start (it says so) and claims nothing
        assert len(plan.seeds) >= 2 or "One seed: these are choices" in p.read_text()


def test_not_yaml_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("arms: [\n")
    with pytest.raises(PlanError, match="cannot read it as YAML"):
        load_plan(bad)
    with pytest.raises(PlanError, match="no such plan file"):
        load_plan(tmp_path / "none.yaml")
    bad.write_text("- 1\n")
    with pytest.raises(PlanError, match="needs a YAML mapping"):
        load_plan(bad)


def test_the_cli_prints_a_bad_plan_as_one_line(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, split="test")
    res = subprocess.run(
        [sys.executable, "-m", "webagent_r1.cli", "experiment", str(plan)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    assert "final: split: test" in res.stderr and "Traceback" not in res.stderr
