"""Shared prefix (``train.share_prefix``): the prompt prefix of a micro-batch run once, its KV
cache repeated for every row; same log-probs, gradients and updates as whole rows, on a tiny
random Llama with grouped-query attention."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.support.tiny import group_samples, mgrpo_step, shared_prompt_group, tiny_config
from webagent_r1.policy.trainable import load_policy
from webagent_r1.rollout.collect import Group
from webagent_r1.train.batching import (
    MIN_SHARED_PREFIX,
    collate,
    collate_rows,
    completion_logprobs,
    prompt_groups,
    shared_prefix_len,
    supports_shared_prefix,
)
from webagent_r1.train.bc import bc_backward

SYSTEM = 24  # tokens of the "system prompt" every prompt starts with


def _group(rewards: list[float], seed: int) -> Group:
    """A group whose prompts all start with the same ``SYSTEM`` tokens."""
    return shared_prompt_group(rewards, seed, system_len=SYSTEM)


def test_shared_prefix_len() -> None:
    long = list(range(3, 3 + MIN_SHARED_PREFIX + 5))
    assert shared_prefix_len([long + [1], long + [2, 3]]) == len(long)
    # each prompt keeps one token of its own: identical prompts share all but the last
    assert shared_prefix_len([long, long]) == len(long) - 1
    assert shared_prefix_len([long]) == 0  # nothing to share with
    short = long[: MIN_SHARED_PREFIX - 1]
    assert shared_prefix_len([short + [1], short + [2]]) == 0  # not worth a forward
    assert shared_prefix_len([[7] + long, [8] + long]) == 0  # differ at the first token


def _logp_and_grad(model, mb):
    model.zero_grad()
    lp = completion_logprobs(model, mb, temperature=0.7, autocast_bf16=False)
    order = torch.argsort(mb.sample * 1000 + mb.offset)  # the samples' token order
    lp = lp[order]
    (lp * torch.linspace(-1, 2, lp.numel())).sum().backward()
    return lp.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
@pytest.mark.parametrize("packed", [False, True])
def test_prefix_once_gives_the_log_probs_and_gradients_of_whole_rows(
    tiny_dir: Path, attn: str, packed: bool
) -> None:
    model, _ = load_policy(tiny_config(tiny_dir))
    model.config._attn_implementation = attn
    samples = group_samples(_group([1.0, 0.0, 1.0, 0.0, 0.0], seed=3))
    rows = prompt_groups(samples) if packed else [[i] for i in range(len(samples))]
    whole = collate_rows(samples, rows, pad_id=1)
    once = collate_rows(samples, rows, pad_id=1, share_prefix=True)
    assert whole.prefix_ids is None and once.prefix_len == SYSTEM
    assert once.input_ids.shape[1] == whole.input_ids.shape[1] - SYSTEM
    assert once.attention_mask.shape[-1] == whole.attention_mask.shape[-1]
    lp_w, g_w = _logp_and_grad(model, whole)
    lp_o, g_o = _logp_and_grad(model, once)
    assert lp_o.shape == lp_w.shape
    assert torch.allclose(lp_o, lp_w, atol=1e-5), (lp_o - lp_w).abs().max()
    for a, b in zip(g_o, g_w, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_every_completion_sees_the_prefix(tiny_dir: Path) -> None:
    """A changed prefix token changes every completion's log-probs (a cache that was not
    attended would pass the equality test only if the prefix did not matter)."""
    model, _ = load_policy(tiny_config(tiny_dir))
    samples = group_samples(_group([1.0, 0.0, 1.0], seed=5))
    idx = list(range(len(samples)))
    with torch.no_grad():
        a = completion_logprobs(model, collate(samples, idx, 1, True), autocast_bf16=False)
        for s in samples:
            s.input_ids[3] = (s.input_ids[3] + 1) % 96 or 3
        mb = collate(samples, idx, 1, True)
        assert mb.prefix_len == SYSTEM
        b = completion_logprobs(model, mb, autocast_bf16=False)
    assert (a - b).abs().min() > 0


def test_mgrpo_update_and_bc_step_are_the_same_with_and_without_the_prefix_once(
    tiny_dir: Path,
) -> None:
    group = _group([1.0, 0.0, 0.0, 1.0, 0.0, 1.0], seed=7)
    results = {}
    for prefix in (True, False):
        metrics, model = mgrpo_step(tiny_dir, group, f"train.share_prefix={prefix}")
        model.zero_grad()
        loss, _ = bc_backward(model, group_samples(group), 1, 64, False, share_prefix=prefix)
        grads = [p.grad.clone() for p in model.parameters()]
        results[prefix] = (metrics, [p.detach().clone() for p in model.parameters()], loss, grads)
    (m_o, p_o, l_o, g_o), (m_w, p_w, l_w, g_w) = results[True], results[False]
    for k in ("train/loss", "train/grad_norm", "train/ratio_mean", "train/clip_frac"):
        assert m_o[k] == pytest.approx(m_w[k], rel=1e-4, abs=1e-6), k
    assert m_o["train/grad_norm"] > 0
    diff = sum(float((a - b).square().sum()) for a, b in zip(p_o, p_w, strict=True)) ** 0.5
    assert diff < 1e-3, diff
    assert l_o == pytest.approx(l_w, rel=1e-5)
    for a, b in zip(g_o, g_w, strict=True):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_prefix_is_not_shared_where_the_cache_would_be_dropped(tiny_dir: Path) -> None:
    model, _ = load_policy(tiny_config(tiny_dir))
    assert supports_shared_prefix(model)
    model.gradient_checkpointing_enable()
    assert not supports_shared_prefix(model)
    model.gradient_checkpointing_disable()
    model.config._attn_implementation = "flash_attention_2"
    assert not supports_shared_prefix(model)
    model.config._attn_implementation = "sdpa"
    assert supports_shared_prefix(model)
    # a sliding-window layer's cache would keep only the window of the prefix
    model.config.layer_types = ["sliding_attention"] + ["full_attention"] * (
        model.config.num_hidden_layers - 1
    )
    assert not supports_shared_prefix(model)
