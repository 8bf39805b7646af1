"""Every run of a plan computes in one precision: the numerics are recorded in each run's
folder, mark and evaluation, shown on the results page, and a run that would compute in other
numerics than the plan's runs so far is refused before any of its work starts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.experiment.support import FakeEvaluator, FakeTrainer, write_plan
from webagent_r1.experiment import PlanError, load_plan, run_experiment
from webagent_r1.experiment.run import NUMERICS_FILE

BF16 = {"numerics": "cpu, bf16 autocast", "machine": "AMD EPYC (avx512_bf16)"}
FP32 = {"numerics": "cpu, float32", "machine": "AMD EPYC (avx2)"}


def _run(plan: Path, numerics: dict, trainer=None, evaluator=None, log=None):
    return run_experiment(
        load_plan(plan),
        trainer or FakeTrainer(),
        evaluator or FakeEvaluator(),
        progress=False,
        log=log or (lambda m: None),
        numerics=lambda cfg: numerics,
    )


def test_each_run_records_its_numerics_and_the_page_shows_them(tmp_path: Path) -> None:
    done = _run(write_plan(tmp_path), BF16)
    for run in (tmp_path / "exp").glob("*/seed-*"):
        assert json.loads((run / NUMERICS_FILE).read_text()) == BF16
        mark = json.loads((run / "experiment-run.json").read_text())
        assert {k: mark[k] for k in BF16} == BF16
        assert json.loads((run / "eval-val" / NUMERICS_FILE).read_text()) == BF16
    page = done.results.read_text()
    assert page.count("cpu, bf16 autocast on AMD EPYC (avx512_bf16)") == 4
    assert "different numerics" not in page


def test_a_plan_begun_in_bf16_is_refused_where_auto_picks_fp32(tmp_path: Path) -> None:
    """Seed 0 of both arms ran on a bf16 machine; on an fp32 machine the seed 1 runs are
    refused before training, and nothing is written into their folders."""
    _run(write_plan(tmp_path, seeds=[0]), BF16)
    plan = write_plan(tmp_path, seeds=[0, 1])
    trainer = FakeTrainer()
    with pytest.raises(PlanError) as e:
        _run(plan, FP32, trainer)
    msg = str(e.value)
    assert "\n" not in msg
    assert "arms.mgrpo seed 1's training would run in cpu, float32" in msg
    assert "ran in cpu, bf16 autocast (AMD EPYC (avx512_bf16))" in msg
    assert trainer.calls == [] and not (tmp_path / "exp" / "mgrpo" / "seed-1").exists()
    # where auto picks bf16 again, the plan goes on
    done = _run(plan, BF16)
    assert done.trained == 2


def test_a_finished_plan_is_read_in_any_numerics(tmp_path: Path) -> None:
    plan = write_plan(tmp_path)
    _run(plan, BF16)
    done = _run(plan, FP32)  # nothing left to compute: nothing to refuse
    assert (done.trained, done.evaluated) == (0, 0)


def test_a_half_trained_run_is_not_resumed_in_other_numerics(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, seeds=[0])
    with pytest.raises(RuntimeError, match="killed"):
        _run(plan, BF16, FakeTrainer(fail_once="*/mgrpo/seed-0"))
    assert not (tmp_path / "exp" / "mgrpo" / "seed-0" / "experiment-run.json").exists()
    with pytest.raises(PlanError, match="mgrpo/seed-0/experiment-numerics.json ran in cpu, bf16"):
        _run(plan, FP32)
    assert _run(plan, BF16).trained == 2  # mgrpo resumed, no-pg trained


def test_an_evaluation_left_to_do_is_refused_in_other_numerics(tmp_path: Path) -> None:
    """Trained on a bf16 machine, killed before its evaluation: evaluating it under fp32
    would sample from the checkpoint in other numerics than its training and the others."""
    plan = write_plan(tmp_path, seeds=[0])
    with pytest.raises(RuntimeError, match="killed"):
        _run(plan, BF16, evaluator=FakeEvaluator(fail_once="*/mgrpo/seed-0"))
    evaluator = FakeEvaluator()
    with pytest.raises(PlanError, match="seed 0's evaluation would run in cpu, float32"):
        _run(plan, FP32, evaluator=evaluator)
    assert evaluator.calls == []


def test_an_archive_carries_the_numerics_to_another_machine(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    _run(write_plan(tmp_path, seeds=[0], archive=str(kept)), BF16)
    shutil.rmtree(tmp_path / "exp")  # a new machine: only the committed archive is left
    plan = write_plan(tmp_path, seeds=[0, 1], archive=str(kept))
    with pytest.raises(PlanError, match="ran in cpu, bf16 autocast"):
        _run(plan, FP32)
    assert _run(plan, BF16).trained == 2  # the seed-0 runs restored, seed 1 trained


def test_runs_that_already_differ_are_noted_on_the_page(tmp_path: Path) -> None:
    """Marks from before this check, edited to differ: the page says so, the log too."""
    plan = write_plan(tmp_path)
    _run(plan, BF16)
    mark = tmp_path / "exp" / "no-pg" / "seed-1" / "experiment-run.json"
    mark.write_text(json.dumps(json.loads(mark.read_text()) | FP32))
    lines: list[str] = []
    done = _run(plan, BF16, log=lines.append)
    assert any("computed in cpu, bf16 autocast and cpu, float32" in m for m in lines)
    page = done.results.read_text()
    assert "the runs computed in different numerics (cpu, bf16 autocast, cpu, float32)" in page
    assert "cpu, float32 on AMD EPYC (avx2)" in page


def test_runs_from_before_numerics_were_recorded_bind_nothing(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, seeds=[0])
    _run(plan, BF16)
    for f in (tmp_path / "exp").rglob(NUMERICS_FILE):
        f.unlink()
    for mark in (tmp_path / "exp").glob("*/seed-*/experiment-run.json"):
        d = json.loads(mark.read_text())
        mark.write_text(json.dumps({k: v for k, v in d.items() if k not in BF16}))
    done = _run(write_plan(tmp_path, seeds=[0, 1]), FP32)
    assert done.trained == 2
    assert "not recorded" in done.results.read_text()


def test_a_start_checkpoint_trained_by_an_experiment_binds_its_numerics(tmp_path: Path) -> None:
    """Stage 2 starts from a stage-1 run's checkpoint: trained in bf16, its continuations
    are refused in fp32."""
    stage1 = tmp_path / "stage1"
    stage1.mkdir()
    _run(write_plan(stage1, seeds=[0]), BF16)
    start = stage1 / "exp" / "mgrpo" / "seed-0" / "rl" / "checkpoints" / "step-000010" / "model"
    plan = write_plan(tmp_path, init_from=str(start), seeds=[0])
    with pytest.raises(PlanError, match=r"stage1/exp/mgrpo/seed-0/experiment-run.json ran in"):
        _run(plan, FP32)
    assert _run(plan, BF16).trained == 2


def test_an_arm_that_sets_the_precision_itself_is_left_out(tmp_path: Path) -> None:
    """bf16 against fp32 as the setting compared: the fp32 arm runs on this machine beside
    the plan's bf16 runs, and its records bind nothing."""
    arms = {"mgrpo": [], "no-pg": ["rl.pg_coef=0"], "fp32": ["model.autocast_bf16=false"]}
    comps = {"rl-vs-control": {"arm": "mgrpo", "control": "no-pg"}}
    plan = write_plan(tmp_path, seeds=[0], arms=arms, comparisons=comps)

    def numerics(cfg):
        return FP32 if cfg.model.autocast_bf16 is False else BF16

    done = run_experiment(
        load_plan(plan), FakeTrainer(), FakeEvaluator(), False, lambda m: None, numerics
    )
    assert done.trained == 3
    mark = json.loads((tmp_path / "exp" / "fp32" / "seed-0" / "experiment-run.json").read_text())
    assert mark["numerics"] == "cpu, float32"
    assert "different numerics" not in done.results.read_text()


def test_an_arm_that_fixes_the_precision_is_checked_against_its_own_runs(tmp_path: Path) -> None:
    arms = {"mgrpo": [], "fp32": ["model.autocast_bf16=false"]}
    comps = {"fp32-vs-bf16": {"arm": "fp32", "control": "mgrpo"}}
    _run(write_plan(tmp_path, seeds=[0], arms=arms, comparisons=comps), FP32)
    plan = write_plan(tmp_path, seeds=[0, 1], arms=arms, comparisons=comps)
    with pytest.raises(PlanError, match=r"arms.fp32 seed 1's training would run in cpu, bf16"):
        run_experiment(
            load_plan(plan),
            FakeTrainer(),
            FakeEvaluator(),
            False,
            lambda m: None,
            lambda cfg: {**BF16} if cfg.seed == 1 and "fp32" in str(cfg.run_dir) else FP32,
        )
    # `auto` written out is not a fixed precision: such an arm is checked like any other
    auto = {"mgrpo": [], "auto": ["model.autocast_bf16=auto"]}
    plan = load_plan(
        write_plan(tmp_path, arms=auto, comparisons={"a": {"arm": "auto", "control": "mgrpo"}})
    )
    assert not plan.sets_precision("auto") and not plan.sets_precision("mgrpo")


def test_a_run_refused_before_it_began_leaves_no_claim(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, seeds=[0])

    def refuses(cfg, resume):
        raise ValueError("bad recipe")

    with pytest.raises(ValueError, match="bad recipe"):
        _run(plan, BF16, trainer=refuses)
    assert not list((tmp_path / "exp").rglob(NUMERICS_FILE))
    assert _run(plan, FP32).trained == 2  # nothing bound the plan to bf16


def test_a_truncated_numerics_file_is_written_again(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, seeds=[0])
    with pytest.raises(RuntimeError, match="killed"):
        _run(plan, BF16, FakeTrainer(fail_once="*/mgrpo/seed-0"))
    f = tmp_path / "exp" / "mgrpo" / "seed-0" / NUMERICS_FILE
    f.write_text('{"numer')  # a kill mid-write, as an older version could leave it
    _run(plan, BF16)
    assert json.loads(f.read_text()) == BF16


def test_runs_already_mixed_are_named_as_such(tmp_path: Path) -> None:
    plan = write_plan(tmp_path, seeds=[0])
    _run(plan, BF16)
    mark = tmp_path / "exp" / "no-pg" / "seed-0" / "experiment-run.json"
    mark.write_text(json.dumps(json.loads(mark.read_text()) | FP32))
    with pytest.raises(PlanError, match="already computed in cpu, bf16 autocast and cpu, float32"):
        _run(write_plan(tmp_path, seeds=[0, 1]), BF16)


def test_an_evaluation_by_another_engine_is_not_checked(tmp_path: Path) -> None:
    """vLLM samples in its own process and precision: an HF record does not bind it."""
    plan = write_plan(tmp_path, seeds=[0], eval={**_EVAL, "engine": "vllm"})
    with pytest.raises(RuntimeError, match="killed"):
        _run(plan, BF16, evaluator=FakeEvaluator(fail_once="*/no-pg/seed-0", engine="vllm"))
    # no-pg's evaluation is left; not the HF engine's, it goes on on any machine
    _run(plan, FP32, evaluator=FakeEvaluator(engine="vllm"))
    assert not list((tmp_path / "exp").glob(f"*/seed-0/eval-val/{NUMERICS_FILE}"))


_EVAL = {"samples": 2, "temperature": 1.0, "max_turns": 8, "subset": 6}
