"""Kill-and-resume: a BC run killed with SIGKILL after a checkpoint, then resumed, ends with the
same parameters as an uninterrupted run with the same seed (tiny model, deterministic CPU)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.support.tiny import make_tiny_model, make_trajectories
from webagent_r1.rollout.trajectories import write_trajectories

STEPS = 8


def _cmd(model: Path, data: Path, run: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "webagent_r1.cli",
        "sft",
        f"model.name={model}",
        "model.device=cpu",
        f"bc.data={data}",
        f"run_dir={run}",
        f"bc.steps={STEPS}",
        "bc.batch_size=4",
        "bc.lr=3e-3",
        "bc.eval_every=0",
        "train.checkpoint_every=2",
        "train.keep_checkpoints=2",
        "train.tensorboard=false",
        *extra,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _final(run: Path) -> dict[str, torch.Tensor]:
    return load_file(
        run / "bc" / "checkpoints" / f"step-{STEPS:06d}" / "model" / "model.safetensors"
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("resume")
    model = make_tiny_model(root / "model")
    data = root / "demos.jsonl"
    write_trajectories(make_trajectories(24, seed=2), data)
    return root, model, data


def test_sigkill_then_resume_matches_uninterrupted_run(setup: tuple[Path, Path, Path]) -> None:
    root, model, data = setup
    straight = root / "straight"
    subprocess.run(_cmd(model, data, straight), check=True, env=_env(), capture_output=True)

    killed = root / "killed"
    # The same run, paced by a test-only callback (0.3 s after each step) so the kill lands
    # between checkpoint 4 and the end whatever the machine's speed.
    overrides = _cmd(model, data, killed)[4:]
    driver = (
        "import sys, time\n"
        "from webagent_r1.config import load_config\n"
        "from webagent_r1.train.bc import train_bc\n"
        "cfg = load_config(None, sys.argv[1:])\n"
        "train_bc(cfg, progress=False, on_step=lambda step, m: time.sleep(0.3))\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", driver, *overrides],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    marker = killed / "bc" / "checkpoints" / "step-000004" / "meta.json"
    deadline = time.time() + 300
    while not marker.exists():
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.time() < deadline, "no checkpoint at step 4 within 300 s"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    ckpts = sorted(p.name for p in (killed / "bc" / "checkpoints").iterdir())
    assert f"step-{STEPS:06d}" not in ckpts, "killed too late: the run had already finished"
    # every complete checkpoint left behind loads; temp folders are never mistaken for one
    for name in ckpts:
        if name.startswith("step-"):
            assert (killed / "bc" / "checkpoints" / name / "meta.json").is_file()

    # without --resume the run refuses to start over the existing checkpoints
    again = subprocess.run(_cmd(model, data, killed), env=_env(), capture_output=True, text=True)
    assert again.returncode != 0 and "--resume" in again.stderr

    subprocess.run(
        [*_cmd(model, data, killed), "--resume"], check=True, env=_env(), capture_output=True
    )
    a, b = _final(straight), _final(killed)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"parameter {k} differs after resume"
    # and training did move the weights (the comparison is not vacuous)
    start = load_file(model / "model.safetensors")
    assert any(not torch.equal(start[k], a[k]) for k in a)
