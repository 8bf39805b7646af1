"""One M-GRPO step's rollout with the HF engine, in one process: engine decoding variants.

    python benchmarks/rollout_step.py [--config configs/r1.yaml] [--model PATH] [--tasks 8]
                                      [--reps 1] [--variants keep,drop,drop+early,cache]
    webagent-r1 bench rollout-step [same options]

Collects ``--tasks`` training tasks x ``rollout.group_size`` episodes of the recipe ``--config``
(its prompt, observation, turn limit, sampling and ``rollout.max_concurrent_episodes``) in real
Chromium over the embedded sites, once per engine variant, with the same tasks and sampling
seeds:

- ``keep``: every row of a batch decodes until the longest one stops, and every request is
  answered when its batch ends (the engine before finished rows left the batch);
- ``drop``: finished rows leave the batch (``HFEngine.drop_finished_fraction``), answers at
  the batch end;
- ``drop+early``: finished rows leave the batch and each request is answered as soon as its
  rows stop (``HFEngine.answer_early``), so its episode steps its browser while the batch
  decodes on;
- ``cache``: the engine's default: ``drop+early`` with the prefix cache
  (``rollout.prefix_cache``, ``HFEngine.prefix_cache``), empty at the start of the step as
  after a weight update. The other variants run without it.

Compare the prefix cache with ``--variants drop+early,cache``.

Use ``--model`` to roll out a trained checkpoint (a BC policy's completions stop at different
lengths, as in training; the base model's rarely form an action). Variants alternate over
``--reps`` in a rotating order so drift in the machine's load and the first page loads hit
all alike. Prints JSON: per variant the median wall time, tokens/s, success rate, batches
decoded and the rows they started with (on average), prompt tokens computed and requested
(``prefill_ratio``: computed / requested), the process's peak resident memory during the
variant (sampled every 0.2 s), and the speed-up against ``keep`` (and ``vs_no_cache``:
``cache`` against ``drop+early``: wall time, prompt tokens computed and peak RSS as ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from webagent_r1.config import load_config
from webagent_r1.evaluation.run import _setup
from webagent_r1.policy.base import SamplingParams
from webagent_r1.policy.hf import PrefixCache
from webagent_r1.rollout.collect import RolloutStats, collect
from webagent_r1.rollout.pool import make_env_pool
from webagent_r1.sources.embedded.suite import tasks_for
from webagent_r1.train.metrics import proc_status_bytes

VARIANTS = {
    "keep": (float("inf"), False, False),
    "drop": (None, False, False),
    "drop+early": (None, True, False),
    "cache": (None, True, True),
}
"""name -> (drop_finished_fraction (None: the engine's default), answer_early, prefix cache)."""


@contextmanager
def peak_rss(every_s: float = 0.2) -> Iterator[list[int]]:
    """Sample this process's resident memory every ``every_s`` seconds while inside; the
    yielded list holds the highest value seen (bytes; 0 where ``/proc`` has none)."""
    peak = [proc_status_bytes("VmRSS") or 0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(every_s):
            peak[0] = max(peak[0], proc_status_bytes("VmRSS") or 0)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield peak
    finally:
        stop.set()
        t.join()
        peak[0] = max(peak[0], proc_status_bytes("VmRSS") or 0)


def prepare(
    config: str, tasks: int, reps: int, seed: int = 0, overrides: tuple[str, ...] = ()
) -> tuple[Any, list[Any]]:
    """The recipe and a seeded sample of ``tasks`` of its training tasks.

    Raises:
        ValueError: sizes below 1, more tasks than the recipe's training split, or a bad
            config (``ConfigError``).
    """
    if tasks < 1 or reps < 1:
        raise ValueError("tasks and reps must be >= 1")
    cfg = load_config(config, list(overrides))
    train = tasks_for(cfg, "train")
    if tasks > len(train):
        raise ValueError(
            f"--tasks {tasks} is more than the {len(train)} training tasks of {config}"
        )
    return cfg, random.Random(seed).sample(train, tasks)


async def run(
    config: str = "configs/r1.yaml",
    model: str | None = None,
    tasks: int = 8,
    reps: int = 1,
    variants: tuple[str, ...] = ("keep", "drop", "drop+early", "cache"),
    seed: int = 0,
    overrides: tuple[str, ...] = (),
    progress: bool = True,
) -> dict[str, Any]:
    """Roll out the same step once per variant (``reps`` rounds); returns JSON-ready results."""
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise ValueError(f"variants are {', '.join(VARIANTS)}; got {', '.join(variants)!r}")
    cfg, chosen = prepare(config, tasks, reps, seed, overrides)
    params = SamplingParams(
        temperature=cfg.rollout.temperature,
        top_p=cfg.rollout.top_p,
        max_new_tokens=cfg.rollout.max_new_tokens,
        seed=seed,
    )
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    async with _setup(cfg, "hf", model) as (engine, tokenizer, browser, source, count):
        pool = make_env_pool(
            cfg,
            cfg.rollout.max_concurrent_episodes,
            browser=browser,
            backend=source.backend,
            evaluator=source.evaluator,
            count_tokens=count,
        )
        default_fraction = engine.drop_finished_fraction
        cache = engine.prefix_cache or PrefixCache(int(cfg.rollout.prefix_cache_mb * 2**20))
        try:
            # warm-up (not counted): first page loads, first forwards
            await collect(
                chosen[:1], 1, engine, pool, tokenizer, cfg.agent, params, 1, progress=False
            )
            for rep in range(reps):  # rotate the order: no variant always runs first
                for name in variants[rep % len(variants) :] + variants[: rep % len(variants)]:
                    fraction, early, cached = VARIANTS[name]
                    engine.drop_finished_fraction = (
                        default_fraction if fraction is None else fraction
                    )
                    engine.answer_early = early
                    cache.clear()  # every variant starts cold, as a step after an update
                    engine.prefix_cache = cache if cached else None
                    n_batches, dropped = len(engine.batch_sizes), engine.dropped_rows
                    computed, saved = engine.prefill_tokens, engine.saved_prefill_tokens
                    stats = RolloutStats()
                    with peak_rss() as peak:
                        await collect(
                            chosen,
                            cfg.rollout.group_size,
                            engine,
                            pool,
                            tokenizer,
                            cfg.agent,
                            params,
                            max_concurrent_episodes=cfg.rollout.max_concurrent_episodes,
                            max_env_retries=cfg.rollout.max_env_retries,
                            progress=progress,
                            mode=cfg.rollout.mode,
                            stats=stats,
                        )
                    cache.clear()
                    m = stats.metrics()
                    sizes = engine.batch_sizes[n_batches:]
                    computed = engine.prefill_tokens - computed
                    requested = computed + engine.saved_prefill_tokens - saved
                    runs[name].append(
                        {
                            "wall_s": stats.wall_s,
                            "tokens_per_s": m["rollout/tokens_per_s"],
                            "success_rate": m["rollout/success_rate"],
                            "env_errors": stats.env_errors,
                            "batches": len(sizes),
                            "mean_batch_rows": statistics.mean(sizes) if sizes else 0.0,
                            "rows_dropped": engine.dropped_rows - dropped,
                            "prompt_tokens_computed": computed,
                            "prompt_tokens_requested": requested,
                            "prefill_ratio": computed / max(requested, 1),
                            "peak_rss_mb": peak[0] / 2**20,
                        }
                    )
        finally:
            engine.prefix_cache = cache if cfg.rollout.prefix_cache else None
            await pool.close()
    out: dict[str, Any] = {
        "config": config,
        "model": model or cfg.init_from or cfg.model.name,
        "tasks": tasks,
        "group": cfg.rollout.group_size,
        "concurrency": cfg.rollout.max_concurrent_episodes,
        "max_batch_size": cfg.rollout.max_batch_size,
        "reps": reps,
        "variants": {},
    }
    for name, rs in runs.items():
        out["variants"][name] = {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]}
    if "keep" in runs:
        base = out["variants"]["keep"]["wall_s"]
        for v in out["variants"].values():
            v["speedup_vs_keep"] = round(base / max(v["wall_s"], 1e-9), 3)
    if "cache" in runs and "drop+early" in runs:
        on, off = out["variants"]["cache"], out["variants"]["drop+early"]
        out["vs_no_cache"] = {
            "speedup": round(off["wall_s"] / max(on["wall_s"], 1e-9), 3),
            "prompt_tokens_computed": round(
                on["prompt_tokens_computed"] / max(off["prompt_tokens_computed"], 1), 3
            ),
            "peak_rss": round(on["peak_rss_mb"] / max(off["peak_rss_mb"], 1e-9), 3),
        }
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry: parse ``argv``, run, print JSON."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--config", default="configs/r1.yaml")
    ap.add_argument("--model", default=None, help="checkpoint or model folder to roll out")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--variants", default="keep,drop,drop+early,cache")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("overrides", nargs="*", help="config overrides section.key=value")
    a = ap.parse_args(argv)
    out = asyncio.run(
        run(
            a.config,
            a.model,
            a.tasks,
            a.reps,
            tuple(a.variants.split(",")),
            a.seed,
            tuple(a.overrides),
            not a.no_progress,
        )
    )
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
