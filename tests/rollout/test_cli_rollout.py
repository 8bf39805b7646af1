"""CLI smoke tests: `webagent-r1 demos` and `webagent-r1 bench rollout` on tiny sizes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from webagent_r1.cli import app
from webagent_r1.trajectories import read_trajectories

runner = CliRunner()


def test_bench_and_demos_are_registered() -> None:
    r = runner.invoke(app, ["bench", "rollout", "--help"])
    assert r.exit_code == 0 and "--latency-ms" in r.output
    r = runner.invoke(app, ["demos", "--help"])
    assert r.exit_code == 0 and "--cot" in r.output and "--concurrency" in r.output


@pytest.mark.browser
def test_demos_writes_reward_1_trajectories(tmp_path) -> None:
    out = tmp_path / "demos.jsonl"
    r = runner.invoke(
        app,
        [
            "demos",
            "--template",
            "shopping.product_price",
            "--sample",
            "2",
            "--concurrency",
            "2",
            "--cot",
            "--out",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "wrote 2 demonstrations" in r.output and "shopping.product_price" in r.output
    trajs = read_trajectories(out)
    assert len(trajs) == 2 and all(t.reward == 1.0 and t.info["cot"] for t in trajs)
    assert all(t.turns[0].text.startswith("<think>The task asks:") for t in trajs)


@pytest.mark.browser
@pytest.mark.slow
def test_bench_rollout_fixed_tiny() -> None:
    r = runner.invoke(
        app,
        [
            "bench",
            "rollout",
            "--engine",
            "fixed",
            "--tasks",
            "2",
            "--group",
            "1",
            "--concurrency",
            "2",
            "--latency-ms",
            "10",
            "--browsers",
            "2",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout[r.stdout.index("{") :])
    fixed = out["fixed"]
    assert fixed["async"]["episodes"] == fixed["lockstep"]["episodes"] == 2
    assert fixed["ratio_async_over_lockstep"] > 0 and fixed["browsers"] == 2
    assert fixed["async"]["cores_busy"] > 0 and fixed["cpu_count"] >= 1
