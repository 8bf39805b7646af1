"""benchmarks/trainer.py: the synthetic batch, the memory probe, and one tiny end-to-end run.

The end-to-end run compares against TRL only where TRL is installed (the optional ``bench``
extra): without it, it checks our side and that the result says TRL was left out, and why. It
never skips: a machine without the extra still tests our update path, and one with it tests
both sides and that they compute the same gradient.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tests.support.scripts import load_script


def load_bench() -> ModuleType:
    return load_script("benchmarks/trainer.py", "bench_trainer_under_test")


def test_synthetic_groups_shapes_and_mixed_rewards() -> None:
    bench = load_bench()
    groups = bench.synthetic_groups(2, 4, 16, 5, vocab=1000, seed=0)
    assert len(groups) == 2
    for g in groups:
        assert g.rewards == [0.0, 1.0, 0.0, 1.0]  # mixed: every group carries a gradient
        prompts = {tuple(t.turns[0].prompt_ids) for t in g.trajectories}
        assert len(prompts) == 1  # one prompt per group
        for t in g.trajectories:
            assert len(t.turns) == 1
            assert len(t.turns[0].prompt_ids) == 16 and len(t.turns[0].completion_ids) == 5
            assert all(100 <= i < 1000 for i in t.turns[0].prompt_ids + t.turns[0].completion_ids)
    again = bench.synthetic_groups(2, 4, 16, 5, vocab=1000, seed=0)
    assert again[1].trajectories[2].turns[0].completion_ids == (
        groups[1].trajectories[2].turns[0].completion_ids
    )


def test_synthetic_groups_need_two_members() -> None:
    with pytest.raises(ValueError, match="group >= 2"):
        load_bench().synthetic_groups(1, 1, 8, 4, vocab=1000, seed=0)


def test_peak_memory_sees_a_temporary_allocation() -> None:
    bench = load_bench()
    with bench.PeakMemory() as pm:
        x = torch.ones(64 * 1024 * 1024)  # 256 MB, every page touched
        del x
    r = pm.result()
    assert r["sampled_peak_rss_mb"] >= 0
    assert r["peak_rss_mb"] is None or 200 <= r["peak_rss_mb"] < 1024
    assert r["torch_peak_alloc_mb"] is None or r["torch_peak_alloc_mb"] >= 200


@pytest.mark.model
def test_tiny_run_reports_both_sides() -> None:
    bench = load_bench()
    have_trl = importlib.util.find_spec("trl") is not None
    out = bench.run(
        prompts=1,
        group=2,
        prompt_len=32,
        completion_len=8,
        reps=1,
        recompute=False,
        # fp32: bf16 autocast is many times slower on CPUs without native bf16 (AVX2 only)
        overrides=["model.autocast_bf16=false"],
        progress=False,
    )
    assert out["setup"]["tokens_per_update"] == 1 * 2 * (32 + 8)
    sides = ["ours", "ours_unshared", "trl"] if have_trl else ["ours", "ours_unshared"]
    for side in sides:
        r = out[side]
        assert r["tokens_per_s"] > 0 and r["tokens_per_cpu_s"] > 0
        assert len(r["update_s"]) == 1
        # the gradients alone (fp32, 135M parameters) are > 500 MB of new pages
        assert r["peak_rss_mb"] is None or r["peak_rss_mb"] > 100
        assert r["sampled_peak_rss_mb"] > 0
    if have_trl:
        assert out["setup"]["trl"]
        assert out["ratio_tokens_per_s_ours_over_trl"] > 0
        assert out["ratio_peak_memory_ours_over_trl"] > 0
        # same weights, same batch, same loss weights: the same gradient up to bf16 rounding
        g_ours, g_trl = out["ours"]["warmup_grad_norm"], out["trl"]["warmup_grad_norm"]
        assert abs(g_ours - g_trl) <= 0.05 * g_trl
        assert out["ratio_tokens_per_s_unshared_over_trl"] > 0
    else:
        assert "not installed" in out["trl"]["skipped"]
    assert out["speedup_shared_prompts"] > 0


def test_rollouts_mode_times_a_trajectory_file_shared_and_unshared(tmp_path: Path) -> None:
    from tests.support.tiny import make_tiny_model, make_trajectories
    from webagent_r1.rollout.trajectories import write_trajectories

    bench = load_bench()
    tiny = make_tiny_model(tmp_path / "tiny")
    trajs = make_trajectories(6, seed=2)
    for i, t in enumerate(trajs):
        t.group_id = i // 3  # two groups of three, one prompt per group's first turn
        t.reward = float(i % 2)
        t.turns[0].prompt_ids = list(trajs[3 * (i // 3)].turns[0].prompt_ids)
    trajs[5].reward = trajs[3].reward = trajs[4].reward = 1.0  # group 1: all equal, dropped
    path = tmp_path / "rollouts.jsonl"
    write_trajectories(trajs, path)
    groups = bench.rollout_groups(str(path))
    assert [len(g.trajectories) for g in groups] == [3, 3]
    out = bench.run(
        reps=1,
        recompute=True,
        overrides=[f"model.name={tiny}", "model.autocast_bf16=false"],
        progress=False,
        rollouts=str(path),
    )
    assert out["setup"]["groups_used"] == 1
    assert out["setup"]["turn_samples"] == sum(len(t.turns) for t in trajs[:3])
    assert out["setup"]["tokens_per_update"] == sum(
        len(u.prompt_ids) + len(u.completion_ids) for t in trajs[:3] for u in t.turns
    )
    assert "multi-turn" in out["trl"]["skipped"]
    assert out["ours"]["tokens_per_s"] > 0 and out["ours_unshared"]["tokens_per_s"] > 0
    assert out["speedup_shared_prompts"] > 0
    # pi_old recomputed: from the training forward (mu = 1), or by a forward of its own
    fused, two = out["ours_recompute"], out["ours_two_forwards"]
    # a forward is about a third of a training pass (forward + backward)
    assert two["flops_per_update"] == pytest.approx(fused["flops_per_update"] * 4 / 3, rel=0.1)
    assert out["speedup_fused_old_logprobs"] > 0
