"""``rollout.env_pool: ray`` in the evaluation (its own module: it starts its own local Ray,
so it must not run while test_rollout/ray_pool.py's module-wide Ray holds every CPU)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.rollout.test_raypool import _short_tasks
from webagent_r1.config import load_config


@pytest.mark.browser
async def test_evaluation_runs_on_ray_workers_by_config(tmp_path: Any) -> None:
    """``rollout.env_pool: ray`` reaches the evaluation: the experts solve tasks whose
    sites and browsers live in the workers only (the driver starts neither)."""
    pytest.importorskip("ray")
    from webagent_r1.evaluation.run import run_evaluation

    cfg = load_config(None, ["rollout.env_pool=ray", "rollout.ray_workers=1"])
    out = await run_evaluation(
        cfg, _short_tasks(2), engine="expert", concurrency=2, out_dir=tmp_path, progress=False
    )
    (res,) = out["results"]
    assert res["success"] == 1.0 and res["episodes"] == 2
    assert (tmp_path / "eval.json").is_file()
