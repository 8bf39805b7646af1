"""CLI smoke tests: `webagent-r1 demos` and `webagent-r1 bench rollout` on tiny sizes."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from webagent_r1.cli import app
from webagent_r1.rollout.trajectories import read_trajectories

runner = CliRunner()


def test_bench_and_demos_are_registered() -> None:
    r = runner.invoke(app, ["bench", "rollout", "--help"])
    assert r.exit_code == 0 and "--site-latency-ms" in r.output
    assert re.search(r"(?<!site)-latency-ms", r.output)  # the engine's own latency
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
            "--subset",
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
            "--site-latency-ms",
            "20",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout[r.stdout.index("{") :])
    fixed = out["fixed"]
    assert fixed["site_latency_ms"] == 20
    assert fixed["async"]["episodes"] == fixed["lockstep"]["episodes"] == 2
    assert fixed["ratio_async_over_lockstep"] > 0 and fixed["browsers"] == 2
    assert fixed["async"]["cores_busy"] > 0 and fixed["cpu_count"] >= 1


@pytest.mark.browser
def test_bench_rollout_step_runs_every_variant_on_the_same_step(tmp_path) -> None:
    from tests.support.tiny import make_tiny_model

    model = make_tiny_model(tmp_path / "model")
    args = ["bench", "rollout-step", "--model", str(model), "--tasks", "1"]
    args += ["--variants", "keep,drop+early,cache"]
    args += ["rollout.group_size=2", "rollout.max_concurrent_episodes=2", "env.max_turns=2"]
    args += ["rollout.max_batch_size=2", "rollout.max_new_tokens=4", "train.trainable_layers=0"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout[r.stdout.index("{") :])
    assert (
        out["group"] == 2
        and out["concurrency"] == 2
        and set(out["variants"])
        == {
            "keep",
            "drop+early",
            "cache",
        }
    )
    keep, early = out["variants"]["keep"], out["variants"]["drop+early"]
    assert keep["speedup_vs_keep"] == 1.0 and early["speedup_vs_keep"] > 0
    for v in (keep, early):  # 2 episodes of up to two turns: batches of 1-2 rows
        assert v["wall_s"] > 0 and v["batches"] >= 1 and 1 <= v["mean_batch_rows"] <= 2
        assert v["env_errors"] == 0
    assert keep["rows_dropped"] == 0
    cached = out["variants"]["cache"]
    for v in (keep, early, cached):
        assert 0 < v["prompt_tokens_computed"] <= v["prompt_tokens_requested"]
        assert v["peak_rss_mb"] > 0
    assert set(out["vs_no_cache"]) == {"speedup", "prompt_tokens_computed", "peak_rss"}
    r = runner.invoke(app, ["bench", "rollout-step", "--variants", "fast"])
    assert r.exit_code == 2 and "--variants among" in r.output
    r = runner.invoke(app, ["bench", "rollout-step", "--tasks", "100000"])
    assert r.exit_code == 2 and "training tasks" in r.output
