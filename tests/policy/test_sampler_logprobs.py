"""The HF engine's stored log-probs at temperature 0.7 are the trainer's recomputed ones.

``rl.old_logprobs: sampler`` takes π_old from the log-probs the engine stored while it
sampled (KV-cached decoding of a left-padded batch, shared prefix run once); the trainer
recomputes π_θ with one forward over ``prompt + completion`` and the same division of the
logits by the temperature. The two must agree, or every ratio carries their difference.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch
from tests.support.tiny import VOCAB, make_tiny_model, tiny_config

from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.rollout.collect import Group
from webagent_r1.rollout.trajectories import Sample, turn_samples
from webagent_r1.train.batching import collate, completion_logprobs
from webagent_r1.types import Task, Trajectory, Turn

TEMP = 0.7


def _samples(prompts: list[list[int]], comps: list[Completion]) -> list[Sample]:
    return [
        s
        for p, c in zip(prompts, comps, strict=True)
        for s in turn_samples(
            Trajectory(
                task_id="t",
                group_id=0,
                turns=[Turn(list(p), c.token_ids, c.logprobs, c.text, None)],
                reward=0.0,
                status="done",
            )
        )
    ]


def _gap(model: Any, samples: list[Sample], pad_id: int, temperature: float) -> float:
    """Largest |sampler − trainer| log-prob over every completion token of ``samples``."""
    mb = collate(samples, list(range(len(samples))), pad_id)
    with torch.no_grad():
        trainer = completion_logprobs(model, mb, temperature, autocast_bf16=False)  # (N,)
    stored = torch.tensor(
        [samples[int(i)].old_logprobs[int(k)] for i, k in zip(mb.sample, mb.offset, strict=True)]
    )
    return float((trainer - stored).abs().max())


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    from webagent_r1.policy.trainable import load_policy

    folder = make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=1)
    model, tok = load_policy(tiny_config(folder))
    return model.eval(), tok, folder


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_tiny_engine_logprobs_at_t07_are_the_trainers(
    tiny: tuple[Any, Any, Path], top_p: float
) -> None:
    from webagent_r1.policy.hf import HFEngine

    model, tok, _ = tiny
    rng = random.Random(4)
    system = [rng.randrange(3, VOCAB) for _ in range(20)]  # a shared prefix, run once
    prompts = [system + [rng.randrange(3, VOCAB) for _ in range(n)] for n in (3, 9, 1)]
    prompts.append(list(prompts[1]))  # a duplicate prompt, prefilled once
    engine = HFEngine(model, tok, autocast_bf16=False, max_batch_size=8)
    engine.eos_ids = set()  # no early stop: every row decodes 16 tokens
    params = SamplingParams(temperature=TEMP, top_p=top_p, max_new_tokens=16, stop=[], seed=7)
    comps = engine.generate_sync(prompts, params)
    assert [len(c.token_ids) for c in comps] == [16] * 4
    samples = _samples(prompts, comps)
    assert _gap(model, samples, tok.pad_token_id, TEMP) < 1e-4
    # the comparison can fail: without the temperature division the trainer is far off
    assert _gap(model, samples, tok.pad_token_id, 1.0) > 1e-2


def test_mgrpo_with_sampler_logprobs_starts_at_ratio_one(tiny: tuple[Any, Any, Path]) -> None:
    """Through the update: π_old from the engine at T = 0.7, π_θ from the trainer at the
    rollout temperature: the first iteration's ratios are 1 and nothing is clipped."""
    from webagent_r1.policy.hf import HFEngine
    from webagent_r1.policy.trainable import load_policy
    from webagent_r1.train.dist import build_optimizer
    from webagent_r1.train.rl import build_rl_batch, mgrpo_update

    _, tok, folder = tiny
    cfg = tiny_config(
        folder, f"rollout.temperature={TEMP}", "rl.old_logprobs=sampler", "rl.clip_eps=0.001"
    )
    model, _ = load_policy(cfg)
    engine = HFEngine(model, tok, autocast_bf16=False)
    rng = random.Random(5)
    prompts = [[rng.randrange(3, VOCAB) for _ in range(12)]] * 2 + [
        [rng.randrange(3, VOCAB) for _ in range(8)]
    ] * 2
    comps = engine.generate_sync(
        prompts, SamplingParams(temperature=TEMP, max_new_tokens=10, stop=[], seed=3)
    )
    trajs = [
        Trajectory("t", 0, [Turn(p, c.token_ids, c.logprobs, c.text, None)], r, "done")
        for p, c, r in zip(prompts, comps, [1.0, 0.0, 0.0, 1.0], strict=True)
    ]
    group = Group(Task(task_id="t", sites=[], intent="x", start_url=""), trajs)
    opt = build_optimizer(list(model.parameters()), 1e-3, cfg.train)
    metrics = mgrpo_update(model, opt, build_rl_batch([group]), cfg, pad_id=tok.pad_token_id)
    assert metrics["train/ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["train/clip_frac"] == 0.0  # ε = 0.001: any gap over 1e-3 would clip


@pytest.mark.model
def test_smollm2_logprobs_at_t07_are_the_trainers_on_a_real_prompt() -> None:
    """The default model on a real agent prompt, batched with a shorter one (left padding),
    fp32: the engine's stored log-probs equal the trainer's to 1e-4."""
    from webagent_r1.agent.context import build_messages
    from webagent_r1.config import AgentConfig, ModelConfig
    from webagent_r1.policy.hf import HFEngine
    from webagent_r1.rollout.collect import chat_ids

    engine = HFEngine.from_config(ModelConfig(autocast_bf16=False, device="cpu"))
    tok = engine.tokenizer
    page = 'URL: http://127.0.0.1/\n[1] link "Mugs"\n[2] textbox "Search"\n[3] button "Go"'
    long = chat_ids(tok, build_messages("Find the cheapest red mug.", [], page, AgentConfig()))
    short = chat_ids(tok, build_messages("Open the cart.", [], page, AgentConfig()))
    params = SamplingParams(temperature=TEMP, max_new_tokens=24, stop=[], seed=11)
    comps = engine.generate_sync([long, short], params)
    engine.close()
    assert all(c.token_ids for c in comps)
    samples = _samples([long, short], comps)
    assert _gap(engine.model, samples, tok.pad_token_id, TEMP) < 1e-4
