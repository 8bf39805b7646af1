"""The default model's tokenizer and engine through the rollout: ids kept exactly."""

from __future__ import annotations

import pytest

from tests.support.fakes import EXIT, FakeEnvPool, make_tasks
from webagent_r1.config import Config, ModelConfig
from webagent_r1.policy.base import Completion, Engine, SamplingParams
from webagent_r1.policy.hf import load_tokenizer
from webagent_r1.rollout.collect import collect
from webagent_r1.rollout.trajectories import read_trajectories, turn_samples, write_trajectories


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(Config().model.name)


class NonCanonicalEngine(Engine):
    """Returns EXIT tokenised piece by piece (each character its own id) plus <|im_end|>."""

    def __init__(self, tok) -> None:
        self.tok = tok
        self.ids = [i for ch in EXIT for i in tok.encode(ch, add_special_tokens=False)]
        self.ids.append(tok.eos_token_id)

    async def generate(self, prompts, params) -> list[Completion]:
        return [
            Completion(
                self.ids,
                [-0.1] * len(self.ids),
                self.tok.decode(self.ids, skip_special_tokens=True),
                "stop",
            )
            for _ in prompts
        ]


async def test_real_tokenizer_non_canonical_ids_survive(tokenizer, tmp_path) -> None:
    engine = NonCanonicalEngine(tokenizer)
    canonical = tokenizer.encode(EXIT, add_special_tokens=False) + [tokenizer.eos_token_id]
    assert engine.ids != canonical and len(engine.ids) > len(canonical)
    [g] = await collect(make_tasks(1), 2, engine, FakeEnvPool(2), tokenizer, progress=False)
    for traj in g.trajectories:
        assert traj.reward == 1.0 and traj.turns[0].text == EXIT
        assert traj.turns[0].completion_ids == engine.ids
    write_trajectories(g.trajectories, tmp_path / "t.jsonl")
    back = read_trajectories(tmp_path / "t.jsonl")
    [s] = turn_samples(back[0])
    assert s.input_ids == back[0].turns[0].prompt_ids + engine.ids
    assert tokenizer.decode(s.input_ids).endswith("<|im_start|>assistant\n" + EXIT + "<|im_end|>")


@pytest.mark.model
async def test_hf_engine_rollout_batches_requests_and_keeps_sampled_ids() -> None:
    from webagent_r1.policy.hf import HFEngine

    engine = HFEngine.from_config(ModelConfig(), max_batch_size=8, batch_wait_ms=20)
    sampled: list[Completion] = []
    real = engine._generate_batch

    def spy(*a, **k):
        out = real(*a, **k)
        sampled.extend(out)
        return out

    engine._generate_batch = spy
    params = SamplingParams(temperature=1.0, max_new_tokens=8, seed=1)
    tasks = make_tasks(2)
    groups = await collect(
        tasks,
        2,
        engine,
        FakeEnvPool(4, max_turns=2),
        engine.tokenizer,
        None,
        params,
        4,
        progress=False,
    )
    engine.close()
    turns = [u for g in groups for t in g.trajectories for u in t.turns]
    assert len(turns) == 8 and len(sampled) == 8  # base model: no valid exit, 2 turns each
    assert max(engine.batch_sizes) > 1  # concurrent episodes shared a decode
    for u in turns:
        # (Ids alone may repeat: the base model likes to copy its previous turn.)
        assert any(
            c.token_ids == u.completion_ids and c.logprobs == u.completion_logprobs for c in sampled
        )
        assert len(u.completion_ids) <= 8
        assert all(lp <= 0 for lp in u.completion_logprobs)
