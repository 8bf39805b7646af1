"""A plan file and a fake trainer and evaluator: the experiment runs end to end in seconds."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import yaml

from webagent_r1.config import Config
from webagent_r1.evaluation.run import PROGRESS_FILE
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.types import Task, Trajectory

RECIPE = str(Path(__file__).resolve().parents[2] / "configs" / "r1-multiturn.yaml")


def plan_dict(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    """A valid plan (two arms of the multi-turn recipe, two seeds, val, 6 tasks), changed."""
    plan: dict[str, Any] = {
        "recipe": RECIPE,
        "init_from": None,
        "split": "val",
        "seeds": [0, 1],
        "arms": {"mgrpo": [], "no-pg": ["rl.pg_coef=0"]},
        "comparisons": {"rl-vs-control": {"arm": "mgrpo", "control": "no-pg"}},
        "eval": {"samples": 2, "temperature": 1.0, "max_turns": 8, "subset": 6},
        "out_dir": str(tmp_path / "exp"),
        "reps": 200,
    }
    plan.update(changes)
    return {k: v for k, v in plan.items() if v is not ...}


def write_plan(tmp_path: Path, **changes: Any) -> Path:
    """``plan_dict`` written to ``tmp_path/plan.yaml``; a value ``...`` drops the key."""
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan_dict(tmp_path, **changes)))
    return path


class FakeTrainer:
    """Writes a run's config and a final model folder; ``fail_once`` names a run folder whose
    first training is killed after it started (its config is there, no model)."""

    def __init__(self, fail_once: str | None = None) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.fail_once = fail_once

    def __call__(self, cfg: Config, resume: bool) -> str:
        run = Path(cfg.run_dir)
        self.calls.append((str(run), resume))
        run.mkdir(parents=True, exist_ok=True)
        (run / "config.yaml").write_text("seed: 0\n")
        if self.fail_once and run.match(self.fail_once):
            self.fail_once = None
            raise RuntimeError("killed")
        model = run / "rl" / "checkpoints" / "step-000010" / "model"
        model.mkdir(parents=True, exist_ok=True)
        return str(model)


class FakeEvaluator:
    """Episodes with success chance 0.7 with the policy gradient and 0.3 without, seeded by
    the run's seed and the task; ``fail_once`` names a run folder whose first evaluation is
    killed after half its tasks (progress file there)."""

    def __init__(self, samples: int = 2, fail_once: str | None = None, engine: str = "hf") -> None:
        self.calls: list[tuple[str, bool]] = []
        self.samples = samples
        self.fail_once = fail_once
        self.engine = engine

    def __call__(
        self, cfg: Config, tasks: list[Task], model: str, out: Path, resume: bool
    ) -> dict[str, Any]:
        self.calls.append((str(out), resume))
        out.mkdir(parents=True, exist_ok=True)
        if self.fail_once and out.parent.match(self.fail_once):
            self.fail_once = None
            (out / PROGRESS_FILE).write_text("{}")
            raise RuntimeError("killed")
        chance = 0.7 if cfg.rl.pg_coef > 0 else 0.3
        trajs = []
        for i, t in enumerate(tasks):
            rng = random.Random(f"{cfg.seed}/{t.task_id}/{chance}")
            for _ in range(self.samples):
                r = float(rng.random() < chance)
                trajs.append(Trajectory(str(t.task_id), i, [], r, "done"))
        write_trajectories(trajs, out / "trajectories-t8.jsonl")
        success = sum(t.reward for t in trajs) / len(trajs)
        summary = {
            "model": model,
            "engine": self.engine,
            "samples": self.samples,
            "temperature": 1.0,
            "results": [
                {"max_turns": 8, "trajectories": "trajectories-t8.jsonl", "success": success}
            ],
        }
        (out / "eval.json").write_text(json.dumps(summary))
        (out / PROGRESS_FILE).unlink(missing_ok=True)
        return summary
