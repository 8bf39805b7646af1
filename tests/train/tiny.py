"""A tiny random Llama, a word-level tokenizer and synthetic trajectories (trainer tests)."""

from __future__ import annotations

import random
from pathlib import Path

from webagent_r1.types import Trajectory, Turn

VOCAB = 96


def make_tiny_model(folder: Path, seed: int = 0) -> Path:
    """Save a 2-layer Llama (hidden 32) and its tokenizer in ``folder``."""
    import torch
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=1,
        eos_token_id=2,
        bos_token_id=0,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(cfg)
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
