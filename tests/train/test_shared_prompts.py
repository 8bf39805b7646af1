"""Shared-prompt rows (``train.share_prompts``): same log-probs, gradients and updates as one
sample per row, on a tiny random Llama with grouped-query attention."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.support.tiny import group_samples, mgrpo_step, shared_prompt_group, tiny_config
from webagent_r1.policy.trainable import load_policy
from webagent_r1.rollout.trajectories import turn_samples
from webagent_r1.train.batching import (
    collate_rows,
    completion_logprobs,
    pack_plan,
    prompt_groups,
)
from webagent_r1.types import Trajectory, Turn


def test_prompt_groups_and_plan_cover_every_sample_once() -> None:
    samples = group_samples(shared_prompt_group([1.0, 0.0, 1.0, 0.0, 0.0]))
    groups = prompt_groups(samples)
    assert sorted(i for g in groups for i in g) == list(range(len(samples)))
    for g in groups:
        prompts = {tuple(samples[i].input_ids[: samples[i].prompt_len]) for i in g}
        assert len(prompts) == 1
    assert max(len(g) for g in groups) == 5  # the five first turns
    assert len(groups) < len(samples)
    for share in (True, False):
        plan = pack_plan(samples, token_budget=64, share_prompts=share)
        assert sorted(i for mb in plan for row in mb for i in row) == list(range(len(samples)))
        assert all(len(row) == 1 for mb in plan for row in mb) is not share


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_shared_rows_give_the_log_probs_and_gradients_of_separate_rows(
    tiny_dir: Path, attn: str
) -> None:
    model, _ = load_policy(tiny_config(tiny_dir))
    model.config._attn_implementation = attn
    samples = group_samples(shared_prompt_group([1.0, 0.0, 1.0, 0.0, 0.0], seed=3))
    rows = prompt_groups(samples)
    shared = collate_rows(samples, rows, pad_id=1)
    single = collate_rows(samples, [[i] for i in range(len(samples))], pad_id=1)
    assert shared.attention_mask.dim() == 4 and single.attention_mask.dim() == 2
    assert shared.input_ids.numel() < single.input_ids.numel()

    def logp_and_grad(mb):
        model.zero_grad()
        lp = completion_logprobs(model, mb, temperature=0.7, autocast_bf16=False)
        # any weighted sum of the token log-probs, in the samples' token order
        order = torch.argsort(mb.sample * 1000 + mb.offset)
        lp = lp[order]
        (lp * torch.linspace(-1, 2, lp.numel())).sum().backward()
        return lp.detach(), [p.grad.clone() for p in model.parameters()]

    lp_s, g_s = logp_and_grad(shared)
    lp_1, g_1 = logp_and_grad(single)
    assert lp_s.shape == lp_1.shape
    assert torch.allclose(lp_s, lp_1, atol=1e-5), (lp_s - lp_1).abs().max()
    for a, b in zip(g_s, g_1, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_a_changed_prompt_token_is_seen_by_every_completion_of_its_row(tiny_dir: Path) -> None:
    """The block mask really lets completions attend to the prompt (a mask that hid it
    would pass the equality test only if the prompt did not matter)."""
    model, _ = load_policy(tiny_config(tiny_dir))
    samples = group_samples(shared_prompt_group([1.0, 0.0, 1.0], seed=5))
    rows = prompt_groups(samples)
    with torch.no_grad():
        a = completion_logprobs(model, collate_rows(samples, rows, 1), autocast_bf16=False)
        for s in samples:
            if s.turn_index == 0:
                s.input_ids[2] = (s.input_ids[2] + 1) % 96 or 3  # the shared start page
        mb = collate_rows(samples, prompt_groups(samples), 1)
        b = completion_logprobs(model, mb, autocast_bf16=False)
    first = torch.tensor([samples[i].turn_index == 0 for i in mb.sample.tolist()])
    assert (a[first] - b[first]).abs().min() > 0, "every first-turn token depends on the page"
    assert torch.equal(a[~first], b[~first]), "other rows do not see that page"


def test_mgrpo_update_is_the_same_with_and_without_shared_prompts(tiny_dir: Path) -> None:
    group = shared_prompt_group([1.0, 0.0, 0.0, 1.0, 0.0, 1.0], seed=7)
    results = {}
    for share in (True, False):
        metrics, model = mgrpo_step(tiny_dir, group, f"train.share_prompts={share}")
        results[share] = (metrics, [p.detach().clone() for p in model.parameters()])
    (m_s, p_s), (m_1, p_1) = results[True], results[False]
    for k in ("train/loss", "train/grad_norm", "train/ratio_mean", "train/clip_frac"):
        assert m_s[k] == pytest.approx(m_1[k], rel=1e-4, abs=1e-6), k
    assert m_s["train/tokens"] == m_1["train/tokens"]
    # Adam divides by the gradient's running scale, so round-off in near-zero gradients
    # shows in the step: compare the two updates' difference with the update itself
    p0 = _fresh(tiny_dir)
    step = sum(float((a - b).square().sum()) for a, b in zip(p_1, p0, strict=True)) ** 0.5
    diff = sum(float((a - b).square().sum()) for a, b in zip(p_s, p_1, strict=True)) ** 0.5
    assert step > 0.01
    assert diff < 1e-3 * step, (diff, step)


def _fresh(tiny_dir: Path) -> list[torch.Tensor]:
    model, _ = load_policy(tiny_config(tiny_dir))
    return [p.detach() for p in model.parameters()]


def test_unsupported_attention_falls_back_to_one_sample_per_row(tiny_dir: Path) -> None:
    from webagent_r1.train.batching import supports_shared_prompts

    model, _ = load_policy(tiny_config(tiny_dir))
    assert supports_shared_prompts(model)
    model.config._attn_implementation = "flash_attention_2"
    assert not supports_shared_prompts(model)


def test_turn_with_empty_completion_is_packed_without_tokens() -> None:
    t = Turn(prompt_ids=[5, 6, 7], completion_ids=[], completion_logprobs=[], text="", action=None)
    u = Turn(
        prompt_ids=[5, 6, 7],
        completion_ids=[8, 9],
        completion_logprobs=[-1.0, -1.0],
        text="",
        action=None,
    )
    samples = [
        s
        for tr in (t, u)
        for s in turn_samples(
            Trajectory(task_id="t", group_id=0, turns=[tr], reward=1.0, status="done")
        )
    ]
    mb = collate_rows(samples, prompt_groups(samples), pad_id=1)
    assert mb.targets.tolist() == [8, 9]
    assert mb.cols.tolist() == [2, 3]  # the prompt's last position, then the first token
