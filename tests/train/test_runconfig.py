"""``train/runconfig.py``: the settings a run trained with, saved beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

from webagent_r1.config import load_config, to_dict
from webagent_r1.train.recipe import run_recipe
from webagent_r1.train.runconfig import (
    CONFIG_FILE,
    differences,
    latest_run_config,
    run_config_files,
    save_run_config,
)


def _cfg(run: Path | str, *overrides: str):  # type: ignore[no-untyped-def]
    return load_config("configs/r1-multiturn.yaml", [f"run_dir={run}", *overrides])


def test_a_fresh_start_writes_settings_that_load_back_equal(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, "rl.advantage=gigpo", "rl.normalization=turn_mean", "seed=3")
    assert save_run_config(cfg, resume=False) == []
    path = tmp_path / CONFIG_FILE
    assert path.read_text().startswith("# The settings this run started with")
    back = load_config(path, [])
    assert back == cfg and to_dict(back) == to_dict(cfg)
    assert (back.rl.advantage, back.rl.normalization, back.seed) == ("gigpo", "turn_mean", 3)
    assert latest_run_config(tmp_path) == path


def test_a_resume_with_other_settings_writes_a_file_of_its_own(tmp_path: Path) -> None:
    first = _cfg(tmp_path, "rl.steps=8")
    save_run_config(first, resume=False)
    original = (tmp_path / CONFIG_FILE).read_text()
    assert save_run_config(first, resume=True) == []  # the same settings: nothing written
    assert run_config_files(tmp_path) == [tmp_path / CONFIG_FILE]

    notes = save_run_config(_cfg(tmp_path, "rl.steps=16"), resume=True)
    assert notes == [
        "resuming with settings that differ from config.yaml: rl.steps: 8 → 16 "
        "(this resume's: config.resume-1.yaml)"
    ]
    assert (tmp_path / CONFIG_FILE).read_text() == original  # the start's settings kept
    notes = save_run_config(_cfg(tmp_path, "rl.steps=16", "rl.lr=5e-6"), resume=True)
    assert f"differ from config.resume-1.yaml: rl.lr: {first.rl.lr!r} → 5e-06" in notes[0]
    latest = latest_run_config(tmp_path)
    assert latest is not None and latest.name == "config.resume-2.yaml"
    assert load_config(latest, []).rl.lr == 5e-6

    # the same folder spelled another way is not a change
    assert save_run_config(_cfg(f"{tmp_path}/", "rl.steps=16", "rl.lr=5e-6"), True) == []

    # a fresh start over the folder (no checkpoints) replaces the start and its resumes,
    # also when config.yaml itself was removed
    (tmp_path / CONFIG_FILE).unlink()
    save_run_config(_cfg(tmp_path, "rl.steps=4"), resume=False)
    assert run_config_files(tmp_path) == [tmp_path / CONFIG_FILE]
    assert load_config(tmp_path / CONFIG_FILE, []).rl.steps == 4


def test_resume_files_are_ordered_by_number_and_a_gap_is_not_overwritten(tmp_path: Path) -> None:
    save_run_config(_cfg(tmp_path), resume=False)
    for n in (2, 10):
        (tmp_path / f"config.resume-{n}.yaml").write_text(
            (tmp_path / CONFIG_FILE).read_text().replace("steps: 8", f"steps: {n}")
        )
    (tmp_path / "config.resume-x.yaml").write_text("not one of them")
    names = [p.name for p in run_config_files(tmp_path)]
    assert names == [CONFIG_FILE, "config.resume-2.yaml", "config.resume-10.yaml"]
    notes = save_run_config(_cfg(tmp_path, "rl.steps=3"), resume=True)
    assert "rl.steps: 10 → 3" in notes[0] and "config.resume-11.yaml" in notes[0]


def test_a_newest_file_that_no_longer_loads_is_kept_and_noted(tmp_path: Path) -> None:
    save_run_config(_cfg(tmp_path), resume=False)
    path = tmp_path / CONFIG_FILE
    path.write_text(path.read_text() + "retired_setting: 1\n")
    notes = save_run_config(_cfg(tmp_path), resume=True)
    assert len(notes) == 1 and "config.yaml does not load with this version" in notes[0]
    assert "retired_setting" in notes[0] and "config.resume-1.yaml" in notes[0]
    assert "retired_setting" in path.read_text()


def test_a_resume_of_a_run_from_before_settings_were_saved(tmp_path: Path) -> None:
    assert latest_run_config(tmp_path) is None and latest_run_config(tmp_path / "nope") is None
    assert save_run_config(_cfg(tmp_path), resume=True) == []
    assert (tmp_path / CONFIG_FILE).read_text().startswith("# The settings of a resume")


def test_differences_names_each_setting_and_can_be_limited() -> None:
    a = load_config(None, ["rl.advantage=gigpo", "seed=1"])
    b = load_config(None, ["seed=2"])
    assert differences(a, b) == [("rl.advantage", "gigpo", "episode"), ("seed", 1, 2)]
    assert differences(a, b, ["seed", "rl.lr"]) == [("seed", 1, 2)]
    assert differences(a, a) == []


def test_run_recipe_saves_the_settings_and_notes_a_changed_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = [
        f"run_dir={tmp_path}",
        "tasks.templates=[shopping.search_result_count]",
        "rl.eval_tasks=0",
        "bc.steps=0",
        "rl.steps=0",
    ]
    cfg = load_config(None, base)
    run_recipe(cfg, progress=False)
    assert load_config(tmp_path / CONFIG_FILE, []) == cfg
    run_recipe(load_config(None, [*base, "rl.eval_tasks=2"]), resume=True, progress=False)
    out = capsys.readouterr().out
    assert "note: resuming with settings that differ from config.yaml: rl.eval_tasks: 0 → 2" in out
    assert load_config(tmp_path / "config.resume-1.yaml", []).rl.eval_tasks == 2

    # under accelerate / torchrun only the process of rank 0 writes
    other = tmp_path / "rank1"
    monkeypatch.setenv("RANK", "1")
    run_recipe(load_config(None, [*base[1:], f"run_dir={other}"]), progress=False)
    assert (other / "summary.json").is_file() and run_config_files(other) == []
