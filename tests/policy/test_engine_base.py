"""The ``Engine`` base class: ``generate`` required, the rest defaults that do nothing."""

from __future__ import annotations

import pytest

from webagent_r1.policy.base import Completion, Engine, SamplingParams


class Echo(Engine):
    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        return [Completion(p, [0.0] * len(p), "", "stop") for p in prompts]


def test_an_engine_without_generate_cannot_be_made() -> None:
    class NoGenerate(Engine):
        pass

    with pytest.raises(TypeError, match="generate"):
        NoGenerate()  # type: ignore[abstract]


async def test_defaults_say_untracked_shares_nothing_and_never_sleeps() -> None:
    e = Echo()
    assert e.weight_version is None and e.sleeps is False and e.lock is None
    assert e.takes_weight_stream is False and e.weight_dtype is None and e.model is None
    assert e.close() is None
    assert await e.sleep() is None and await e.wake_up(["weights"]) is None
    [c] = await e.generate([[1, 2]], SamplingParams())
    assert c.token_ids == [1, 2]


def test_the_real_engines_subclass_it() -> None:
    from webagent_r1.policy.hf import HFEngine
    from webagent_r1.policy.openai import OpenAIEngine
    from webagent_r1.policy.vllm import VLLMEngine

    assert all(issubclass(c, Engine) for c in (HFEngine, OpenAIEngine, VLLMEngine))
    assert VLLMEngine.takes_weight_stream and not HFEngine.takes_weight_stream
