"""Rollout throughput: async vs lockstep, in one process, on the same tasks and seeds.

    python benchmarks/rollout.py [--engine fixed|hf|both] [--tasks N] [--group G] ...
    webagent-r1 bench rollout [same options]
    python benchmarks/rollout.py --engine fixed --site-latency-ms 300   # slower servers

Two settings, each run in both modes (``rollout.collect(mode=...)``) over the embedded sites in
real Chromium, one env pool per setting, the same tasks and sampling seeds for both modes:

(a) ``hf``: the real HF engine with the default model on this machine (CPU): 8 tasks x
    group 2, at most 4 turns and 48 new tokens a turn. Async mode overlaps one episode's
    browser work with another's generation; lockstep alternates the two. Target: >= 1.2x.
(b) ``fixed``: ``FixedLatencyEngine`` (the scripted experts answering after 50 ms per call,
    whatever the batch size), a stand-in for a GPU inference server, 16 concurrent episodes.
    Lockstep then pays every browser step one after another; async runs them side by side.
    Target: >= 3x.

Prints JSON: per setting and mode, trajectories/s, env-steps/s, tokens/s, success rate, wall
time, the cores the machine kept busy (all processes: Python, Chromium, the site servers), and
the ratio async / lockstep of trajectories/s. Browser steps are CPU work (layout, the browser
process's own thread, DevTools traffic), so async can gain only as far as idle cores remain:
compare ``cores_busy`` of the two modes with ``cpu_count``. ``--browsers k`` spreads the envs
over k Chromium processes (one browser process serves all of its contexts on one thread).

``--site-latency-ms t`` makes the embedded sites answer every page request after ``t`` ms
(an idle wait, no CPU), a stand-in for slower servers: the embedded sites answer in a few ms,
so a browser step here is CPU work, where WebArena's Magento, GitLab and Postmill containers
spend longer on each page. Lockstep waits for each step in turn; async waits for many at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import time
from typing import Any

import psutil

from webagent_r1.browser import Browser
from webagent_r1.config import (
    AgentConfig,
    BrowserConfig,
    Config,
    EnvConfig,
    ModelConfig,
    RolloutConfig,
)
from webagent_r1.grading.embedded import evaluate
from webagent_r1.policy.base import SamplingParams
from webagent_r1.policy.expert import ExpertPolicy, FixedLatencyEngine
from webagent_r1.rollout.collect import RolloutStats, collect
from webagent_r1.rollout.pool import LocalEnvPool, make_env_pool
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sources.embedded.suite import build_suite, select
from webagent_r1.types import Task

DEFAULTS: dict[str, dict[str, Any]] = {
    "hf": {"tasks": 8, "group": 2, "concurrency": 16, "max_turns": 4, "max_new_tokens": 48},
    "fixed": {"tasks": 16, "group": 2, "concurrency": 16, "max_turns": 15, "max_new_tokens": 48},
}


def _busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy so far (every process, every core)."""
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0)


def pick_tasks(n: int, seed: int) -> list[Task]:
    """A seeded sample of ``n`` train tasks, at most one per template while templates last."""
    tasks = select(build_suite(), split="train")
    rng = random.Random(seed)
    rng.shuffle(tasks)
    out: list[Task] = []
    seen: set[str] = set()
    for t in tasks:  # one per template first: a spread of lengths and sites
        if t.extra.get("template") not in seen:
            seen.add(str(t.extra.get("template")))
            out.append(t)
    out += [t for t in tasks if t not in out]
    return out[:n]


async def _both_modes(
    name: str,
    engine: Any,
    tasks: list[Task],
    group: int,
    concurrency: int,
    pool: LocalEnvPool,
    tokenizer: Any,
    params: SamplingParams,
    progress: bool,
) -> dict[str, Any]:
    # Warm-up (not counted): first page loads, first forward passes.
    await collect(tasks[:1], 1, engine, pool, tokenizer, AgentConfig(), params, 1, progress=False)
    out: dict[str, Any] = {"tasks": len(tasks), "group": group, "concurrency": concurrency}
    for mode in ("lockstep", "async"):
        stats = RolloutStats()
        cpu0 = _busy_cpu_s()
        await collect(
            tasks,
            group,
            engine,
            pool,
            tokenizer,
            AgentConfig(),
            params,
            max_concurrent_episodes=concurrency,
            progress=progress,
            mode=mode,
            stats=stats,
        )
        m = stats.metrics()
        out[mode] = {
            "trajectories_per_s": round(m["rollout/trajectories_per_s"], 3),
            "env_steps_per_s": round(m["rollout/env_steps_per_s"], 3),
            "tokens_per_s": round(m["rollout/tokens_per_s"], 1),
            "success_rate": round(m["rollout/success_rate"], 3),
            "episodes": stats.episodes,
            "env_steps": stats.turns,
            "env_errors": stats.env_errors,
            "wall_s": round(stats.wall_s, 2),
            "cores_busy": round((_busy_cpu_s() - cpu0) / max(stats.wall_s, 1e-9), 2),
        }
    out["ratio_async_over_lockstep"] = round(
        out["async"]["trajectories_per_s"] / max(out["lockstep"]["trajectories_per_s"], 1e-9), 2
    )
    if out["async"]["success_rate"] != out["lockstep"]["success_rate"]:
        out["warning"] = "success rates differ: episodes did different work (timeouts?)"
    out["setting"] = name
    out["cpu_count"] = os.cpu_count()
    return out


async def run(
    engine: str = "both",
    tasks: int | None = None,
    group: int | None = None,
    concurrency: int | None = None,
    max_turns: int | None = None,
    max_new_tokens: int | None = None,
    latency_ms: float = 50.0,
    seed: int = 0,
    progress: bool = True,
    browsers: int = 1,
    ray_workers: int = 0,
    site_latency_ms: float = 0.0,
) -> dict[str, Any]:
    """Run the benchmark settings (``hf``, ``fixed`` or ``both``); sizes default per setting.

    ``ray_workers`` > 0 runs the episodes in that many Ray browser workers
    (``rollout.env_pool: ray``, each with its own Chromium and sites) instead of local browsers.
    ``site_latency_ms`` delays every page response of the embedded sites (local pool only).

    Returns:
        ``{setting: {lockstep: {...}, async: {...}, ratio_async_over_lockstep: x}}``.
    """
    from webagent_r1.policy.hf import HFEngine, load_tokenizer

    names = ["fixed", "hf"] if engine == "both" else [engine]
    if any(n not in DEFAULTS for n in names):
        raise ValueError(f"engine must be hf, fixed or both, got {engine!r}")
    model_cfg = ModelConfig()
    tokenizer = load_tokenizer(model_cfg.name)

    def count_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    if browsers < 1:
        raise ValueError("browsers must be >= 1")
    if site_latency_ms and ray_workers > 0:
        raise ValueError("site_latency_ms applies to the local pool's sites, not Ray workers'")
    results: dict[str, Any] = {}
    sites = EmbeddedSites.start(latency_ms=site_latency_ms)
    # Generous timeouts: on a loaded machine 16 concurrent contexts can take seconds per
    # click, and a timed-out click would end an episode early in one mode and not the other.
    bcfg = BrowserConfig(action_timeout_ms=30_000, navigation_timeout_ms=60_000)
    launched: list[Browser] = []
    try:
        for _ in range(browsers if ray_workers <= 0 else 0):
            launched.append(await Browser.launch(bcfg))
        for name in names:
            d = DEFAULTS[name]
            n_tasks = tasks or d["tasks"]
            g = group or d["group"]
            conc = concurrency or d["concurrency"]
            chosen = pick_tasks(n_tasks, seed)
            env_cfg = EnvConfig(max_turns=max_turns or d["max_turns"])
            if ray_workers > 0:
                ray_cfg = Config(
                    browser=bcfg, rollout=RolloutConfig(env_pool="ray", ray_workers=ray_workers)
                )
                pool: Any = make_env_pool(ray_cfg, conc, env_cfg=env_cfg)
            else:
                pool = LocalEnvPool(launched, conc, env_cfg, None, sites, evaluate, count_tokens)
            params = SamplingParams(
                temperature=1.0, max_new_tokens=max_new_tokens or d["max_new_tokens"], seed=seed
            )
            t0 = time.time()
            if name == "fixed":
                eng: Any = FixedLatencyEngine(ExpertPolicy(tokenizer), latency_ms / 1000.0)
            else:
                eng = HFEngine.from_config(
                    model_cfg,
                    max_batch_size=conc,
                    batch_wait_fraction=RolloutConfig().batch_wait_fraction,
                )
            try:
                results[name] = await _both_modes(
                    name, eng, chosen, g, conc, pool, tokenizer, params, progress
                )
            finally:
                if name == "hf":
                    eng.close()
                await pool.close()
            results[name]["total_s"] = round(time.time() - t0, 1)
            results[name]["browsers"] = browsers if ray_workers <= 0 else ray_workers
            results[name]["env_pool"] = "ray" if ray_workers > 0 else "local"
            results[name]["site_latency_ms"] = site_latency_ms
            if name == "fixed":
                results[name]["latency_ms"] = latency_ms
    finally:
        for b in launched:
            await b.close()
        sites.stop()
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Command-line entry: parse ``argv``, run, print JSON."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--engine", default="both", choices=["hf", "fixed", "both"])
    ap.add_argument("--tasks", type=int, default=None, help="tasks (default per setting)")
    ap.add_argument("--group", type=int, default=None, help="group size G")
    ap.add_argument("--concurrency", type=int, default=None, help="episodes at once")
    ap.add_argument("--max-turns", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--latency-ms", type=float, default=50.0, help="fixed engine latency")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--browsers", type=int, default=1, help="Chromium processes to spread over")
    ap.add_argument(
        "--ray-workers", type=int, default=0, help="run the browsers in N Ray workers (0: local)"
    )
    ap.add_argument(
        "--site-latency-ms", type=float, default=0.0, help="delay of every site page response"
    )
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    out = asyncio.run(
        run(
            a.engine,
            a.tasks,
            a.group,
            a.concurrency,
            a.max_turns,
            a.max_new_tokens,
            a.latency_ms,
            a.seed,
            not a.no_progress,
            a.browsers,
            a.ray_workers,
            a.site_latency_ms,
        )
    )
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
