"""A tiny synthetic run folder (recipe summary, metrics, trajectories, an eval.json sweep).

Every number the tests check is written here, so the expected percentages can be read off:
e.g. the base model's Reddit success 0.5 must appear as ``50.0`` in the report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.types import Action, Trajectory, Turn


def traj(task_id: str, turns: int, reward: float, status: str = "done") -> Trajectory:
    """A trajectory of ``turns`` turns made with the real types (valid ids and log-probs)."""
    return Trajectory(
        task_id=task_id,
        group_id=task_id,
        turns=[
            Turn(
                prompt_ids=[1, 2, 3],
                completion_ids=[4, 5],
                completion_logprobs=[-0.1, -0.2],
                text='<answer>do(action="Click", element="3")</answer>',
                action=Action(kind="Click", element="3", raw='do(action="Click", element="3")'),
            )
            for _ in range(turns)
        ],
        reward=reward,
        status=status,  # type: ignore[arg-type]
    )


def write_jsonl(path: Path, rows: list[dict[str, Any]], tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


BASE = {
    "wall_s": 30.0,
    "eval/success": 0.25,
    "eval/episodes": 8.0,
    "eval/turns": 3.0,
    "eval/env_errors": 0.0,
    "eval/success/reddit": 0.5,
    "eval/success/gitlab": 0.0,
    "eval/success/shopping_admin": 0.25,
}
START = {
    "step": 0,
    "eval/success": 0.375,
    "eval/episodes": 8.0,
    "eval/success/reddit": 0.75,
    "eval/success/gitlab": 0.125,
    "eval/success/shopping_admin": 0.25,
}
MID = {**START, "step": 2, "eval/success": 0.5}
FINAL = {
    "step": 4,
    "eval/success": 0.625,
    "eval/episodes": 8.0,
    "eval/success/reddit": 1.0,
    "eval/success/gitlab": 0.5,
    "eval/success/shopping_admin": 0.375,
}
SUMMARY = {
    "run_dir": "runs/tiny",
    "stages": {
        "demos": {"wall_s": 12.0, "file": "data/demos.jsonl"},
        "base": BASE,
        "bc": {
            "wall_s": 61.0,
            "checkpoint": "runs/tiny/bc/checkpoints/step-6",
            "heldout_loss": 0.8123,
        },
        "rl": {
            "wall_s": 3725.0,
            "checkpoint": "runs/tiny/rl/checkpoints/step-4",
            "start": START,
            "final": FINAL,
            "history": [START, MID, FINAL],
        },
    },
    "success": {"base": 0.25, "bc": 0.375, "rl": 0.625},
    "wall_s": 3828.0,
}


def group(success: float, lo: float, hi: float, n: int) -> dict[str, Any]:
    return {"success": success, "ci": [lo, hi], "n": n}


EVAL = {
    "model": "runs/tiny/rl/checkpoints/step-4/model",
    "split": "test",
    "samples": 1,
    "seed": 0,
    "results": [
        {
            "max_turns": t,
            "success": s,
            "ci": [lo, hi],
            "pass_at_k": None,
            "episodes": 20,
            "by_site": {
                "reddit": group(s + 0.1, 0.1, 0.9, 10),
                "map": group(s - 0.1, 0.0, 0.6, 6),
                "cross-site": group(0.0, 0.0, 0.5, 4),
            },
            "by_kind": {"info": group(s, 0.1, 0.7, 12), "change": group(s, 0.0, 0.6, 8)},
            "trajectories": f"trajectories-t{t}.jsonl",
        }
        for t, s, lo, hi in [(5, 0.2, 0.08, 0.42), (10, 0.3, 0.15, 0.52), (15, 0.35, 0.2, 0.5)]
    ],
}


def write_eval_folder(folder: Path) -> None:
    """``eval.json`` with 3 turn budgets and the trajectory file of the largest one."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "eval.json").write_text(json.dumps(EVAL))
    write_trajectories(
        [traj("e1", 2, 1.0), traj("e2", 15, 0.0, "max_turns"), traj("e3", 4, 1.0)],
        folder / "trajectories-t15.jsonl",
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished R1 run with every input the report reads, plus ``eval/eval.json``."""
    return make_run(tmp_path)


def make_run(parent: Path) -> Path:
    """Write the synthetic run folder ``parent/tiny`` (see ``run_dir``)."""
    run = parent / "tiny"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps(SUMMARY))
    write_jsonl(
        run / "bc" / "metrics.jsonl",
        [{"step": 0, "time": 0.0, "bc/heldout_loss": 1.5}]
        + [{"step": s, "time": float(s), "train/loss": 2.0 / s} for s in range(1, 7)]
        + [{"step": 6, "time": 7.0, "bc/heldout_loss": 0.8123}],
    )
    rl_rows: list[dict[str, Any]] = [{"time": 0.0, **START}]
    for s, succ in [(1, 0.25), (2, 0.5), (3, None), (4, 0.75)]:
        rl_rows.append({"step": s, "time": float(s), "rollout/success": succ, "train/loss": 0.1})
    rl_rows += [{"time": 2.5, **MID}, {"time": 4.5, **FINAL}]
    # a half-written last line, as while the trainer is appending
    write_jsonl(run / "rl" / "metrics.jsonl", rl_rows, tail='{"step": 5, "rollout/succ')
    write_trajectories(
        [traj("t1", 2, 0.0, "max_turns"), traj("t2", 1, 1.0)],
        run / "rl" / "eval" / "step-000000.jsonl",
    )
    write_trajectories(
        [
            traj("t1", 1, 1.0),
            traj("t2", 3, 1.0),
            traj("t3", 5, 0.0, "max_turns"),
            traj("t4", 2, 0.0, "env_error"),
        ],
        run / "rl" / "eval" / "step-000004.jsonl",
    )
    for step in range(2):
        write_trajectories(
            [traj("r1", 2, 1.0), traj("r1", 3, 0.0)],
            run / "rl" / "rollouts" / f"step-{step:06d}-rank0.jsonl",
        )
    write_eval_folder(run / "eval")
    return run
