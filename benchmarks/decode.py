"""Decoding throughput of the HF engine, in one process: reserved KV cache against concatenation,
or dropping finished rows against keeping them.

    python benchmarks/decode.py [--model smollm2-135m-instruct] [--batch 1,12,48]
                                [--prompt-len 750] [--new-tokens 64] [--reps 3]
    webagent-r1 bench decode [same options]

For every batch size, ``HFEngine._generate_batch`` decodes the same random prompts greedily
for exactly ``--new-tokens`` tokens (end-of-sequence disabled), alternately with the engine's
reserved cache (``reserve_cache``: each new token written in place) and with transformers'
concatenating ``DynamicLayer`` (the whole cache copied for every token). The prompts share all
but their last 8 tokens (as the prompts of a rollout batch share the system prompt and often
the task), so the engine's shared-prefix prefill keeps the prompt cost small and the decode
dominates, as in a rollout. Reports the median wall time of a call, decoded tokens/s, the
speed-up (concatenating time / reserved time), and whether both produced the same tokens (they
must: the cache layout changes, the arithmetic does not).

    python benchmarks/decode.py --compare drop [--batch 48] ...

``--compare drop`` times instead dropping finished rows from the batch (the engine's default,
``HFEngine.drop_finished_fraction``) against decoding every row until the longest one ends.
Rows must stop at different lengths for that to matter, as an agent's completions do, so the
prompts are chat prompts (when the model has a chat template) sharing a long page-like system
message and each asking its own question, decoded greedily until end-of-sequence or
``--new-tokens``; the report adds the completion lengths. Whether the tokens are the same is
reported, not required: fewer rows can change the float rounding of a matrix product.

    python benchmarks/decode.py --compare prefill [--batch 16,48] [--prompt-len 750] ...

``--compare prefill`` times prefilling prompts of unequal length in groups of like length
(``HFEngine.max_pad_ratio``, 1.1 on CPU, the groups' KV caches merged) against one padded
batch (``inf``). The prompts share a 290-token head (a system prompt) and have own parts
spread evenly from 40% to 160% of ``--prompt-len`` minus the head (shuffled), as a rollout
batch's pages differ; each row then decodes ``--new-tokens`` greedy tokens. The report adds
the padding tokens each side computed.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from webagent_r1.config import ModelConfig
from webagent_r1.policy import hf as hf_module
from webagent_r1.policy.base import SamplingParams
from webagent_r1.policy.hf import HFEngine


def _no_reserve(past: Any, extra: int) -> int:
    return 0


def _decode(engine: HFEngine, prompts: list[list[int]], params: SamplingParams):
    """One timed ``_generate_batch``; returns (seconds, token ids)."""
    t0 = time.perf_counter()
    out = engine._generate_batch(prompts, params)
    return time.perf_counter() - t0, [c.token_ids for c in out]


def timed(engine: HFEngine, prompts: list[list[int]], params: SamplingParams, reserve: bool):
    """One decode, with or without the reserved cache; returns (seconds, token ids)."""
    real = hf_module.reserve_cache
    if not reserve:
        hf_module.reserve_cache = _no_reserve
    try:
        return _decode(engine, prompts, params)
    finally:
        hf_module.reserve_cache = real


def timed_drop(engine: HFEngine, prompts: list[list[int]], params: SamplingParams, drop: bool):
    """One decode, dropping finished rows (the default threshold) or never; returns (seconds,
    token ids)."""
    default = engine.drop_finished_fraction
    engine.drop_finished_fraction = default if drop else float("inf")
    try:
        return _decode(engine, prompts, params)
    finally:
        engine.drop_finished_fraction = default


def timed_pad(engine: HFEngine, prompts: list[list[int]], params: SamplingParams, grouped: bool):
    """One decode, prefilled in length groups or as one padded batch; returns (seconds, token
    ids). The engine's ``padded_prefill_tokens`` counts the padding each side computed."""
    default = engine.max_pad_ratio
    engine.max_pad_ratio = 1.1 if grouped else float("inf")
    try:
        return _decode(engine, prompts, params)
    finally:
        engine.max_pad_ratio = default


def alternate(side: Callable[[bool], tuple[float, list[list[int]]]], reps: int):
    """Run ``side(True)`` and ``side(False)`` in turn ``reps`` times (so drift in the
    machine's load hits both alike); returns the median seconds and the last token ids of
    each side, keyed by the flag."""
    times: dict[bool, list[float]] = {True: [], False: []}
    tokens: dict[bool, list[list[int]]] = {}
    for _ in range(reps):
        for flag in (True, False):
            times[flag].append((res := side(flag))[0])
            tokens[flag] = res[1]
    return {k: statistics.median(v) for k, v in times.items()}, tokens


def _engine(model: str, batches: tuple[int, ...], prompt_len: int, new_tokens: int, reps: int):
    """The model's engine (fp32) after checking the sizes; no prefix cache, which would serve
    the repeated prompts of later repetitions and sides from the first (``bench rollout-step``
    measures the cache)."""
    if prompt_len < 1 or new_tokens < 1 or reps < 1 or not batches or min(batches) < 1:
        raise ValueError("prompt_len, new_tokens, reps and every batch size must be >= 1")
    cfg = ModelConfig(name=model, dtype="float32", autocast_bf16=False)
    return HFEngine.from_config(cfg, prefix_cache_mb=0)


def _fixed_length(
    model: str, batches: tuple[int, ...], prompt_len: int, new_tokens: int, reps: int, seed: int
) -> tuple[HFEngine, SamplingParams, torch.Generator]:
    """The engine with end-of-sequence disabled (every row decodes exactly ``new_tokens``),
    greedy parameters for that many tokens, and the seeded generator of the prompts."""
    engine = _engine(model, batches, prompt_len, new_tokens, reps)
    engine.eos_ids = set()
    params = SamplingParams(temperature=0.0, max_new_tokens=new_tokens, stop=[])
    return engine, params, torch.Generator().manual_seed(seed)


QUESTIONS = (
    "Which item is the cheapest? Answer with its name only.",
    "How many items are listed? Answer with a number.",
    "Describe the third item in two sentences.",
    "Summarise this page for a shopper in a short paragraph.",
    "What colour is item {k}?",
    "List three items and their prices.",
    "Is item {k} in stock? Answer yes or no, then explain why in one sentence.",
    "Write a short review of item {k}.",
)


def chat_prompts(engine: HFEngine, b: int, prompt_len: int) -> list[list[int]]:
    """``b`` prompts that share a page-like system message of about ``prompt_len`` tokens and
    each ask their own question (chat template when the tokenizer has one)."""
    tok = engine.tokenizer
    lines, page = [], ""
    k = 0
    while len(tok.encode(page)) < prompt_len - 40:
        k += 1
        colour = ("red", "blue", "green", "black")[k % 4]
        lines.append(f'[{k}] link "{colour} mug no. {k}" ${k * 3 % 97}.{k % 10}9 in stock')
        page = "\n".join(lines)
    out = []
    for i in range(b):
        q = QUESTIONS[i % len(QUESTIONS)].format(k=1 + i * 7 % max(k, 1)) + f" (question {i})"
        messages = [{"role": "system", "content": page}, {"role": "user", "content": q}]
        if getattr(tok, "chat_template", None):
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            out.append(tok.encode(text, add_special_tokens=False))
        else:
            out.append(tok.encode(page + "\n" + q))
    return out


def run_drop(
    model: str = "smollm2-135m-instruct",
    batches: tuple[int, ...] = (48,),
    prompt_len: int = 750,
    new_tokens: int = 64,
    reps: int = 3,
) -> dict[str, Any]:
    """Time dropping finished rows against keeping them at every batch size (greedy)."""
    engine = _engine(model, batches, prompt_len, new_tokens, reps)
    params = SamplingParams(temperature=0.0, max_new_tokens=new_tokens, stop=[])
    rows: list[dict[str, Any]] = []
    for b in batches:
        prompts = chat_prompts(engine, b, prompt_len)
        timed_drop(engine, prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=2), True)
        dropped = engine.dropped_rows
        med, tokens = alternate(functools.partial(timed_drop, engine, prompts, params), reps)
        lengths = [len(t) for t in tokens[False]]
        rows.append(
            {
                "batch": b,
                "prompt_tokens": round(statistics.mean(len(p) for p in prompts)),
                "mean_length": round(statistics.mean(lengths), 1),
                "max_length": max(lengths),
                "drop_s": round(med[True], 3),
                "keep_s": round(med[False], 3),
                "ratio": round(med[False] / med[True], 3),
                "rows_dropped_per_call": (engine.dropped_rows - dropped) // reps,
                "same_tokens": tokens[True] == tokens[False],
            }
        )
    engine.close()
    return {
        "compare": "drop finished rows vs keep them",
        "model": model,
        "drop_finished_fraction": engine.drop_finished_fraction,
        "new_tokens": new_tokens,
        "reps": reps,
        "threads": torch.get_num_threads(),
        "results": rows,
    }


def spread_prompts(vocab: int, b: int, prompt_len: int, gen: torch.Generator) -> list[list[int]]:
    """``b`` random prompts sharing a 290-token head, own parts from 40% to 160% of the rest."""
    low = min(100, vocab // 2)  # above the special tokens
    n_head = min(290, prompt_len // 2)
    head = torch.randint(low, vocab, (n_head,), generator=gen).tolist()
    rest = prompt_len - n_head
    own = [max(1, round(rest * (0.4 + 1.2 * i / max(b - 1, 1)))) for i in range(b)]
    order = torch.randperm(b, generator=gen).tolist()
    return [head + torch.randint(low, vocab, (own[i],), generator=gen).tolist() for i in order]


def run_prefill(
    model: str = "smollm2-135m-instruct",
    batches: tuple[int, ...] = (16, 48),
    prompt_len: int = 750,
    new_tokens: int = 64,
    reps: int = 3,
    seed: int = 0,
) -> dict[str, Any]:
    """Time length-grouped prefill against one padded batch at every batch size (greedy)."""
    engine, params, gen = _fixed_length(model, batches, prompt_len, new_tokens, reps, seed)
    rows: list[dict[str, Any]] = []
    for b in batches:
        prompts = spread_prompts(engine.model.config.vocab_size, b, prompt_len, gen)
        timed_pad(engine, prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=2), True)
        padded = {}
        times: dict[bool, list[float]] = {True: [], False: []}
        tokens: dict[bool, list[list[int]]] = {}
        for _ in range(reps):
            for flag in (True, False):
                before = engine.padded_prefill_tokens
                sec, tokens[flag] = timed_pad(engine, prompts, params, flag)
                times[flag].append(sec)
                padded[flag] = engine.padded_prefill_tokens - before
        med = {k: statistics.median(v) for k, v in times.items()}
        rows.append(
            {
                "batch": b,
                "prompt_tokens": sum(len(p) for p in prompts),
                "grouped_padding": padded[True],
                "one_batch_padding": padded[False],
                "grouped_s": round(med[True], 3),
                "one_batch_s": round(med[False], 3),
                "ratio": round(med[False] / med[True], 3),
                "same_tokens": tokens[True] == tokens[False],
            }
        )
    engine.close()
    return {
        "compare": "prefill in length groups (max_pad_ratio 1.1) vs one padded batch",
        "model": model,
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "reps": reps,
        "threads": torch.get_num_threads(),
        "results": rows,
    }


def run(
    model: str = "smollm2-135m-instruct",
    batches: tuple[int, ...] = (1, 12, 48),
    prompt_len: int = 750,
    new_tokens: int = 64,
    reps: int = 3,
    seed: int = 0,
) -> dict[str, Any]:
    """Time both cache layouts at every batch size; returns the JSON-ready results."""
    engine, params, gen = _fixed_length(model, batches, prompt_len, new_tokens, reps, seed)
    vocab = engine.model.config.vocab_size
    rows: list[dict[str, Any]] = []
    for b in batches:
        low = min(100, vocab // 2)  # above the special tokens
        own = min(8, prompt_len)
        head = torch.randint(low, vocab, (prompt_len - own,), generator=gen).tolist()
        tails = torch.randint(low, vocab, (b, own), generator=gen).tolist()
        prompts = [head + t for t in tails]
        timed(engine, prompts[:1], SamplingParams(temperature=0.0, max_new_tokens=2), True)
        med, tokens = alternate(functools.partial(timed, engine, prompts, params), reps)
        rows.append(
            {
                "batch": b,
                "reserved_s": round(med[True], 3),
                "concat_s": round(med[False], 3),
                "reserved_tokens_per_s": round(b * new_tokens / med[True], 1),
                "concat_tokens_per_s": round(b * new_tokens / med[False], 1),
                "ratio": round(med[False] / med[True], 3),
                "same_tokens": tokens[True] == tokens[False],
            }
        )
    engine.close()
    return {
        "model": model,
        "prompt_len": prompt_len,
        "new_tokens": new_tokens,
        "reps": reps,
        "threads": torch.get_num_threads(),
        "results": rows,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--batch", default="1,12,48", help="comma-separated batch sizes")
    p.add_argument("--prompt-len", type=int, default=750)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compare", choices=("reserve", "drop", "prefill"), default="reserve")
    a = p.parse_args()
    batches = tuple(int(x) for x in a.batch.split(","))
    if a.compare == "drop":
        out = run_drop(a.model, batches, a.prompt_len, a.new_tokens, a.reps)
    elif a.compare == "prefill":
        out = run_prefill(a.model, batches, a.prompt_len, a.new_tokens, a.reps, a.seed)
    else:
        out = run(a.model, batches, a.prompt_len, a.new_tokens, a.reps, a.seed)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
