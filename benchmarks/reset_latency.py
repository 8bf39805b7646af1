"""Reset latency of an episode, with and without the browser context pool, in one process:
embedded sites (instance + login + first page + observation) or MiniWoB++ (first page +
seeded episode start + observation).

    python benchmarks/reset_latency.py [--n 100] [--site shopping]
    python benchmarks/reset_latency.py --source miniwob [--n 100] [--task click-button]

Each reset is a full ``WebEnv.reset`` as rollouts do it: a context (new, or a cleaned one
from the pool), the site instance and login cookie, the first page load and its observation;
the previous episode's context is given back just before the timer starts. Three Chromium
processes take turns in blocks of 10 resets, so a slow moment of the machine hits all alike:
``pool_off`` (``browser.context_pool: 0``: a new context and its route every time),
``pool_on`` (back to back: the context just given back is cleaned in the background while the
reset runs, and competes with it for Chromium's time) and ``pool_on_cleaned`` (the cleaning
has finished before the reset starts, as when episodes' resets are spread out by generation
time). Prints p50 / p95 / max in milliseconds of each and the ratios of the p50s.
Embedded also times creating an isolated instance alone (a copy of the pristine SQLite
database). MiniWoB++ cycles over every supported task (or ``--task``) with test seeds. For
comparison, BrowserGym's reset measured 1.9-2.9 s on this kind of machine (docs/miniwob.md),
and a WebArena site reset is a container restart (minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from webagent_r1.browser import Browser
from webagent_r1.config import BrowserConfig, EnvConfig, ObservationConfig
from webagent_r1.rollout.env import WebEnv
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.types import Task

START = {
    "shopping": ("__SHOPPING__/", "emma.lopez"),
    "shopping_admin": ("__SHOPPING_ADMIN__/", "admin"),
}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(1000 * statistics.median(xs), 1),
        "p95_ms": round(1000 * pct(xs, 0.95), 1),
        "max_ms": round(1000 * max(xs), 1),
    }


async def _compare(
    make_env: Callable[[Browser], WebEnv], order: list[Task], block: int = 10
) -> dict[str, Any]:
    """Time ``len(order)`` resets in each mode, the modes taking turns in blocks."""
    pool = BrowserConfig().context_pool
    # mode: (browser.context_pool, whether the pool's cleaning finishes before the reset)
    modes = {"pool_off": (0, False), "pool_on": (pool, False), "pool_on_cleaned": (pool, True)}
    browsers = {
        m: await Browser.launch(BrowserConfig(context_pool=k)) for m, (k, _) in modes.items()
    }
    try:
        envs = {m: make_env(b) for m, b in browsers.items()}
        times: dict[str, list[float]] = {m: [] for m in modes}
        for env in envs.values():
            await env.reset(order[0])  # warm-up
        for start in range(0, len(order), block):
            for m, env in envs.items():
                for task in order[start : start + block]:
                    await env.close_episode()
                    if modes[m][1]:
                        await browsers[m].pool_ready()
                    t0 = time.perf_counter()
                    await env.reset(task)
                    times[m].append(time.perf_counter() - t0)
        for env in envs.values():
            await env.close()
        reused = {m: b.contexts_reused for m, b in browsers.items()}
    finally:
        for b in browsers.values():
            await b.close()
    out: dict[str, Any] = {m: summary(t) | {"contexts_reused": reused[m]} for m, t in times.items()}
    for m in ("pool_on", "pool_on_cleaned"):
        out[f"p50_off_over_{m[5:]}"] = round(out["pool_off"]["p50_ms"] / out[m]["p50_ms"], 2)
    return out


async def main_miniwob(n: int, task: str | None) -> dict:
    from webagent_r1.sources.miniwob import MiniWoBSource

    source = MiniWoBSource([task] if task else [])
    backend = source.start()
    try:
        by_name: dict[str, list[Task]] = {}
        for t in source.tasks("test"):
            by_name.setdefault(t.extra["miniwob"]["task"], []).append(t)
        names = list(by_name)
        # Reset i: task i mod |tasks|, its (i div |tasks|)-th test seed.
        order = [by_name[names[i % len(names)]][(i // len(names)) % 50] for i in range(n)]
        resets = await _compare(
            lambda b: WebEnv(b, EnvConfig(), ObservationConfig(), backend, source.evaluator),
            order,
        )
    finally:
        source.stop()
    what = task or f"all {len(names)} supported tasks, round-robin"
    return {"n": n, "source": "miniwob", "tasks": what, "env_reset": resets}


async def main(n: int, site: str) -> dict:
    sites = EmbeddedSites.start()
    try:
        # (a) instance creation alone
        inst = []
        for _ in range(n):
            t0 = time.perf_counter()
            iid = sites.running.create_instance()
            inst.append(time.perf_counter() - t0)
            sites.running.delete_instance(iid)
        # (b) full env resets
        url, user = START[site]
        task = Task(task_id="bench", intent="benchmark", start_url=url, sites=[site], user=user)
        resets = await _compare(
            lambda b: WebEnv(b, EnvConfig(), ObservationConfig(), sites), [task] * n
        )
    finally:
        sites.stop()
    return {"n": n, "site": site, "instance_create": summary(inst), "env_reset": resets}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--source", default="embedded", choices=["embedded", "miniwob"])
    ap.add_argument("--site", default="shopping", choices=sorted(START), help="embedded")
    ap.add_argument("--task", default=None, help="miniwob: one task (default: all supported)")
    a = ap.parse_args()
    if a.source == "miniwob":
        out = asyncio.run(main_miniwob(a.n, a.task))
    else:
        out = asyncio.run(main(a.n, a.site))
    print(json.dumps(out, indent=1))
