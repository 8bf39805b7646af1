"""BC under ``accelerate launch`` with 2 CPU processes (gloo) equals the 1-process run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.support.tiny import make_tiny_model, make_trajectories
from tests.train.launch import launch_two
from webagent_r1.config import load_config
from webagent_r1.rollout.trajectories import read_trajectories, write_trajectories
from webagent_r1.sources.embedded.suite import tasks_for
from webagent_r1.tasks.subset import eval_subset
from webagent_r1.train.metrics import read_metrics


def _overrides(tmp: Path, run: str) -> list[str]:
    return [
        f"model.name={tmp / 'model'}",
        "model.device=cpu",
        "model.autocast_bf16=false",
        f"bc.data={tmp / 'demos.jsonl'}",
        f"run_dir={tmp / run}",
        "bc.steps=4",
        "bc.batch_size=6",
        "bc.lr=3e-3",
        "bc.heldout_fraction=0",
        "train.tensorboard=false",
    ]


def _final(tmp: Path, run: str) -> dict[str, torch.Tensor]:
    return load_file(
        tmp / run / "bc" / "checkpoints" / "step-000004" / "model" / "model.safetensors"
    )


def test_two_processes_match_one(tmp_path: Path) -> None:
    make_tiny_model(tmp_path / "model")
    write_trajectories(make_trajectories(24, seed=5), tmp_path / "demos.jsonl")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one = [sys.executable, "-m", "webagent_r1.cli", "sft", *_overrides(tmp_path, "one")]
    subprocess.run(one, check=True, env=env, capture_output=True)
    out = launch_two(29533, "sft", *_overrides(tmp_path, "two"))
    assert out.stdout.count("BC done") == 2, "both processes must run the training loop"
    a, b = _final(tmp_path, "one"), _final(tmp_path, "two")
    start = load_file(tmp_path / "model" / "model.safetensors")
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5), f"{k}: 2 processes differ from 1"
    assert any(not torch.equal(start[k], a[k]) for k in a)


@pytest.mark.browser
def test_two_processes_run_mgrpo_steps(tmp_path: Path) -> None:
    """M-GRPO under ``accelerate launch`` with 2 CPU processes: each rolls out its share of
    a step's tasks in its own Chromium, the update and checkpoint happen once."""
    make_tiny_model(tmp_path / "model")
    launch_two(
        29534,
        "train",
        f"model.name={tmp_path / 'model'}",
        "model.device=cpu",
        "model.autocast_bf16=false",
        f"run_dir={tmp_path / 'run'}",
        "bc.steps=0",
        "rl.steps=1",
        "rl.tasks_per_step=2",
        "rl.eval_tasks=2",
        "rl.drop_equal_groups=false",  # the random model fails: still run the update
        "rollout.group_size=2",
        "rollout.max_concurrent_episodes=2",
        "rollout.max_new_tokens=6",
        "env.max_turns=2",
        "train.tensorboard=false",
        timeout=900,
    )
    stage = tmp_path / "run" / "rl"
    shares = [read_trajectories(stage / "rollouts" / f"step-000000-rank{r}.jsonl") for r in (0, 1)]
    assert [len(s) for s in shares] == [2, 2]  # one task (a group of 2) per process
    assert {t.task_id for t in shares[0]}.isdisjoint({t.task_id for t in shares[1]})
    rows = [r for r in read_metrics(stage / "metrics.jsonl") if "train/loss" in r]
    assert len(rows) == 1 and rows[0]["train/groups_used"] == 2  # counted over both processes
    assert (stage / "checkpoints" / "step-000001" / "model" / "config.json").is_file()
    # the evaluation: each process ran one of the 2 tasks; the file and the per-site
    # success hold both (the subset's first two site groups, so two sites)
    val = tasks_for(load_config(None), "val")  # rl.eval_split's default
    subset = [str(t.task_id) for t in eval_subset(val, 2, 0)]
    for step in (0, 1):
        evals = read_trajectories(stage / "eval" / f"step-{step:06d}.jsonl")
        assert [str(t.task_id) for t in evals] == subset  # rank 0's task, then rank 1's
        sites = {t.info["task"]["site"] for t in evals}
        [row] = [
            r
            for r in read_metrics(stage / "metrics.jsonl")
            if r.get("step") == step and "eval/success" in r
        ]
        assert row["eval/episodes"] == 2 and row["eval/env_errors"] == 0
        assert {k.rpartition("/")[2] for k in row if k.startswith("eval/success/")} == sites
        assert len(sites) == 2
