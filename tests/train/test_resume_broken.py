"""``--resume`` over broken checkpoints: the newest one that loads completely is used, the run
says which, and says why it skipped each newer one (tiny model, BC on the CPU)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.support.tiny import make_trajectories, tiny_config
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.train.bc import train_bc
from webagent_r1.train.checkpoint import checkpoint_problem, latest_checkpoint, resume_checkpoint

STEPS = 4


def _cfg(model: Path, data: Path, run: Path, steps: int = STEPS):
    return tiny_config(
        model,
        f"bc.data={data}",
        f"run_dir={run}",
        f"bc.steps={steps}",
        "bc.batch_size=4",
        "bc.lr=3e-3",
        "bc.eval_every=0",
        "train.checkpoint_every=2",
        "train.keep_checkpoints=3",
        "train.tensorboard=false",
    )


@pytest.fixture(scope="module")
def straight(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An uninterrupted run of STEPS steps with checkpoints at 2 and 4; (run, data)."""
    root = tmp_path_factory.mktemp("broken")
    data = root / "demos.jsonl"
    write_trajectories(make_trajectories(16, seed=3), data)
    run = root / "straight"
    train_bc(_cfg(tiny_dir, data, run), progress=False)
    return run, data


def _ckpts(run: Path) -> Path:
    return run / "bc" / "checkpoints"


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _set_meta(ckpt: Path, **kw) -> None:
    meta = json.loads((ckpt / "meta.json").read_text())
    (ckpt / "meta.json").write_text(json.dumps({**meta, **kw}))


BREAKS: dict[str, tuple[Callable[[Path], None], str]] = {
    "state truncated": (
        lambda c: _truncate(c / "trainer_state.pt"),
        "trainer_state.pt does not load",
    ),
    "state empty": (
        lambda c: (c / "trainer_state.pt").write_bytes(b""),
        "trainer_state.pt is empty",
    ),
    "state missing": (lambda c: (c / "trainer_state.pt").unlink(), "trainer_state.pt is missing"),
    "state of another step": (
        lambda c: shutil.copy(c.parent / "step-000002" / "trainer_state.pt", c),
        "trainer_state.pt is of step 2, not 4",
    ),
    "meta incomplete": (lambda c: _set_meta(c, complete=False), "does not say complete: true"),
    "meta missing": (lambda c: (c / "meta.json").unlink(), "meta.json is missing"),
    "meta not json": (lambda c: (c / "meta.json").write_text("{"), "meta.json is not a JSON"),
    "meta of another step": (lambda c: _set_meta(c, step=7), "meta.json is of step 7, not 4"),
    "weights truncated": (
        lambda c: _truncate(c / "model" / "model.safetensors"),
        "model/model.safetensors is truncated",
    ),
    "weights empty": (
        lambda c: (c / "model" / "model.safetensors").write_bytes(b""),
        "model/model.safetensors is empty",
    ),
    "weights missing": (
        lambda c: (c / "model" / "model.safetensors").unlink(),
        "model/ holds no weight file",
    ),
    "model config missing": (
        lambda c: (c / "model" / "config.json").unlink(),
        "model/config.json is missing",
    ),
}


@pytest.mark.parametrize("name", list(BREAKS))
def test_a_broken_newest_checkpoint_is_skipped_with_its_reason(
    straight: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    run, _ = straight
    ckpts = tmp_path / "checkpoints"
    shutil.copytree(_ckpts(run), ckpts)
    newest = ckpts / "step-000004"
    assert checkpoint_problem(newest) is None
    brk, reason = BREAKS[name]
    brk(newest)
    assert reason in (checkpoint_problem(newest) or "")
    said: list[str] = []
    found = resume_checkpoint(ckpts, say=said.append)
    assert found is not None
    ckpt, state = found
    assert ckpt == ckpts / "step-000002" and state["step"] == 2 and "optimizer" in state
    assert said[0].startswith(f"skipping checkpoint {newest}: ") and reason in said[0]
    assert said[-1] == f"resuming from {ckpts / 'step-000002'} (step 2)"


def test_no_loadable_checkpoint_says_so_and_starts_fresh(
    straight: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = straight
    ckpts = tmp_path / "checkpoints"
    shutil.copytree(_ckpts(run), ckpts)
    for c in ckpts.iterdir():
        (c / "trainer_state.pt").write_bytes(b"")
    said: list[str] = []
    assert resume_checkpoint(ckpts, say=said.append) is None
    assert len(said) == 3 and "no checkpoint" in said[-1] and "starting from step 0" in said[-1]
    assert resume_checkpoint(tmp_path / "none", say=said.append) is None and len(said) == 3


def test_meta_that_says_incomplete_is_never_the_latest_checkpoint(
    straight: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = straight
    ckpts = tmp_path / "checkpoints"
    shutil.copytree(_ckpts(run), ckpts)
    _set_meta(ckpts / "step-000004", complete=False)
    assert latest_checkpoint(ckpts) == ckpts / "step-000002"


@pytest.mark.parametrize("name", ["state truncated", "meta incomplete", "weights truncated"])
def test_resume_over_a_broken_checkpoint_ends_like_the_uninterrupted_run(
    straight: tuple[Path, Path], tiny_dir: Path, tmp_path: Path, name: str, capsys
) -> None:
    run, data = straight
    broken = tmp_path / "run"
    shutil.copytree(run, broken)
    BREAKS[name][0](_ckpts(broken) / "step-000004")
    capsys.readouterr()
    res = train_bc(_cfg(tiny_dir, data, broken), resume=True, progress=False)
    err = capsys.readouterr().err
    [skip] = [x for x in err.splitlines() if x.startswith("skipping checkpoint")]
    assert skip.startswith(f"skipping checkpoint {_ckpts(broken) / 'step-000004'}: ")
    assert BREAKS[name][1] in skip
    assert f"resuming from {_ckpts(broken) / 'step-000002'} (step 2)" in err
    assert checkpoint_problem(_ckpts(broken) / "step-000004") is None  # re-written whole
    a = load_file(_ckpts(run) / "step-000004" / "model" / "model.safetensors")
    b = load_file(_ckpts(broken) / "step-000004" / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    two = load_file(_ckpts(run) / "step-000002" / "model" / "model.safetensors")
    assert any(not torch.equal(a[k], two[k]) for k in a)  # steps 3-4 did move the weights
    assert res is not None
