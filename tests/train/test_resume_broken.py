"""``--resume`` over broken checkpoints: the newest one that loads completely is used, the run
says which, and says why it skipped each newer one (tiny model, BC on the CPU)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.support.tiny import make_trajectories, tiny_config
from webagent_r1.config import ConfigError
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.train.bc import train_bc
from webagent_r1.train.checkpoint import (
    checkpoint_problem,
    latest_checkpoint,
    plain_state,
    restore_optimizer,
    resume_checkpoint,
)

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


def _edit_state(ckpt: Path, edit: Callable[[dict], None]) -> None:
    """Rewrite ``ckpt``'s trainer state after ``edit`` (a well-formed file of wrong content)."""
    state = torch.load(ckpt / "trainer_state.pt", weights_only=True)
    edit(state)
    torch.save(state, ckpt / "trainer_state.pt")


def _reshape_exp_avg(state: dict) -> None:
    per_param = state["optimizer"]["state"][0]
    per_param["exp_avg"] = torch.zeros(3, 5)
    per_param["exp_avg_sq"] = torch.zeros(3, 5)


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
    "torch rng of a wrong size": (
        lambda c: _edit_state(c, lambda s: s["rng"].update(torch=s["rng"]["torch"][:100])),
        "the torch RNG state does not restore",
    ),
    "python rng of a wrong form": (
        lambda c: _edit_state(c, lambda s: s["rng"].update(python=(3, (1, 2), None))),
        "the Python RNG state does not restore",
    ),
    "optimizer state of another model": (
        lambda c: _edit_state(c, _reshape_exp_avg),
        "the optimizer state of parameter 0 has shape [3, 5], which no weight of model/ has",
    ),
    "optimizer state of mixed shapes": (
        lambda c: _edit_state(
            c, lambda s: s["optimizer"]["state"][1].update(exp_avg=torch.zeros(3, 5))
        ),
        "the optimizer state of parameter 1 has tensors of shapes",
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


class _Payload:
    """A pickle that creates folder ``marker`` when unpickled (what a crafted checkpoint
    could do with any function)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (str(self.marker),))


def test_a_crafted_trainer_state_is_refused_unloaded_and_skipped(
    straight: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = straight
    ckpts = tmp_path / "checkpoints"
    shutil.copytree(_ckpts(run), ckpts)
    marker = tmp_path / "ran"
    newest = ckpts / "step-000004"
    state = torch.load(newest / "trainer_state.pt", weights_only=True)
    torch.save({**state, "eval_history": _Payload(marker)}, newest / "trainer_state.pt")
    said: list[str] = []
    found = resume_checkpoint(ckpts, say=said.append)
    assert not marker.exists()  # nothing of the file ran
    assert found is not None and found[0] == ckpts / "step-000002"
    assert said[0] == (
        f"skipping checkpoint {newest}: trainer_state.pt holds more than tensors and plain data "
        "(posix.mkdir), refused unloaded: resume only from a checkpoint this version wrote"
    )


def test_a_crafted_sharded_optimizer_index_is_refused_unloaded(
    straight: tuple[Path, Path], tmp_path: Path
) -> None:
    run, _ = straight
    ckpts = tmp_path / "checkpoints"
    shutil.copytree(_ckpts(run), ckpts)
    marker = tmp_path / "ran"
    newest = ckpts / "step-000004"
    _edit_state(newest, lambda s: (s.pop("optimizer"), s.update(sharded_optimizer="optimizer")))
    (newest / "optimizer").mkdir()
    (newest / "optimizer" / ".metadata").write_bytes(pickle.dumps(_Payload(marker)))
    problem = checkpoint_problem(newest) or ""
    assert not marker.exists()
    assert problem.startswith("optimizer/.metadata does not load as data (UnpicklingError: ")
    assert "posix.mkdir is not allowed" in problem


def test_a_trainer_state_is_saved_in_forms_weights_only_loads(
    straight: tuple[Path, Path],
) -> None:
    run, _ = straight
    for ckpt in _ckpts(run).iterdir():
        state = torch.load(ckpt / "trainer_state.pt", weights_only=True)
        assert set(state) >= {"step", "rng", "optimizer"}
    np = pytest.importorskip("numpy")
    assert plain_state({"a": [np.float64(0.5), (np.int64(2),)]}) == {"a": [0.5, (2,)]}
    with pytest.raises(TypeError, match=r"trainer state\['a'\]\[0\] is a _Payload"):
        plain_state({"a": [_Payload(Path("x"))]})


def test_an_optimizer_state_of_other_shapes_is_refused_before_use(tmp_path: Path) -> None:
    model = torch.nn.Linear(4, 3)
    opt = torch.optim.AdamW(model.parameters())
    other = torch.nn.Linear(5, 3)
    other_opt = torch.optim.AdamW(other.parameters())
    other(torch.ones(1, 5)).sum().backward()
    other_opt.step()
    state = {"optimizer": other_opt.state_dict()}
    with pytest.raises(ConfigError, match=r"exp_avg of parameter 0 has shape \[3, 5\], the "):
        restore_optimizer(tmp_path, state, model, opt)
    two_groups = torch.optim.AdamW([{"params": [model.weight]}, {"params": [model.bias]}])
    with pytest.raises(ConfigError, match=r"groups of \[2\] parameters, the model \[1, 1\]"):
        restore_optimizer(tmp_path, state, model, two_groups)
