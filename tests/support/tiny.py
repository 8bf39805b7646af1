"""A tiny random Llama, a word-level tokenizer and synthetic trajectories (trainer tests)."""

from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from webagent_r1.config import Config, load_config
from webagent_r1.rollout.collect import Group
from webagent_r1.rollout.trajectories import Sample, turn_samples
from webagent_r1.types import Task, Trajectory, Turn

VOCAB = 96


def tiny_llama(vocab_size: int = VOCAB, seed: int = 0, **config: Any) -> Any:
    """A random 2-layer Llama (hidden 32, 4 heads, 2 KV heads, 256 positions), seeded;
    ``config`` overrides fields of its ``LlamaConfig`` (e.g. ``attention_dropout``)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    for k, v in config.items():
        setattr(cfg, k, v)
    return LlamaForCausalLM(cfg)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread inside: a model this small gains nothing from more, and spinning
    threads crawl on a loaded machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def make_tiny_model(folder: Path, seed: int = 0, **config: Any) -> Path:
    """Save ``tiny_llama`` (with pad 1, eos 2, bos 0, untied embeddings) and a word-level
    tokenizer in ``folder``; ``config`` overrides fields of its ``LlamaConfig``."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    ids = {"pad_token_id": 1, "eos_token_id": 2, "bos_token_id": 0}
    model = tiny_llama(VOCAB, seed, **{**ids, "tie_word_embeddings": False, **config})
    model.save_pretrained(folder)
    vocab = {f"w{i}": i for i in range(VOCAB)}
    inner = Tokenizer(WordLevel(vocab=vocab, unk_token="w0"))
    inner.pre_tokenizer = Whitespace()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=inner, unk_token="w0", pad_token="w1", eos_token="w2", bos_token="w0"
    )
    # A minimal chat template, so rollouts can build prompts (text maps to w0 = unknown).
    tok.chat_template = (
        "{% for m in messages %}w3 {{ m['content'] }} w4 {% endfor %}"
        "{% if add_generation_prompt %}w5 {% endif %}"
    )
    tok.save_pretrained(folder)
    return folder


def make_turn(rng: random.Random, prompt_len: int, comp_len: int) -> Turn:
    return Turn(
        prompt_ids=[rng.randrange(3, VOCAB) for _ in range(prompt_len)],
        completion_ids=[rng.randrange(3, VOCAB) for _ in range(comp_len)],
        completion_logprobs=[-1.0] * comp_len,
        text="",
        action=None,
    )


def make_trajectories(n: int, seed: int = 0, reward: float = 1.0) -> list[Trajectory]:
    """``n`` successful multi-turn trajectories of random ids (1-3 turns)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        turns = [
            make_turn(rng, rng.randint(6, 20), rng.randint(2, 6)) for _ in range(rng.randint(1, 3))
        ]
        out.append(
            Trajectory(task_id=f"t{i}", group_id=i, turns=turns, reward=reward, status="done")
        )
    return out


def tiny_config(model_dir: Path, *extra: str) -> Config:
    """A config for the tiny model in ``model_dir`` on the CPU, fp32, plus ``extra``
    overrides."""
    return load_config(
        None, [f"model.name={model_dir}", "model.device=cpu", "model.autocast_bf16=false", *extra]
    )


def shared_prompt_group(rewards: list[float], seed: int = 0, system_len: int = 0) -> Group:
    """A group as rollouts make it: every prompt starts with the same ``system_len`` tokens;
    every first turn has the same prompt (the start page), the second turns of trajectories 0
    and 1 share a prompt (their first actions were the same), the others have their own."""
    rng = random.Random(seed)
    system = [rng.randrange(3, VOCAB) for _ in range(system_len)]
    start = system + [rng.randrange(3, VOCAB) for _ in range(10)]
    page2 = system + [rng.randrange(3, VOCAB) for _ in range(7)]
    trajs = []
    for i, r in enumerate(rewards):
        first = make_turn(rng, 0, rng.randint(2, 6))
        first.prompt_ids = list(start)
        turns = [first]
        if i % 3 != 2:  # a second turn
            second = make_turn(rng, 0, rng.randint(1, 5))
            own = [rng.randrange(3, VOCAB) for _ in range(rng.randint(1, 12))]
            second.prompt_ids = list(page2) if i < 2 else system + own
            turns.append(second)
        trajs.append(Trajectory(task_id="t", group_id=0, turns=turns, reward=r, status="done"))
    return Group(Task(task_id="t", sites=[], intent="x", start_url=""), trajs)


def group_samples(group: Group) -> list[Sample]:
    """The turn samples of every trajectory of ``group``, in order."""
    return [s for t in group.trajectories for s in turn_samples(t)]


def mgrpo_step(model_dir: Path, group: Group, *extra: str) -> tuple[dict[str, float], Any]:
    """One M-GRPO update (lr 0.01, two policy iterations) of the tiny model in ``model_dir``,
    freshly loaded, on ``group`` under ``extra`` overrides; its metrics and the model."""
    import torch

    from webagent_r1.policy.trainable import load_policy
    from webagent_r1.train.dist import build_optimizer
    from webagent_r1.train.rl import build_rl_batch, mgrpo_update

    cfg = tiny_config(model_dir, "rl.lr=0.01", "rl.mu=2", *extra)
    torch.manual_seed(0)
    model, _ = load_policy(cfg)
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    metrics = mgrpo_update(model, opt, build_rl_batch([copy.deepcopy(group)]), cfg, pad_id=1)
    return metrics, model
