"""Reset latency of an episode: embedded sites (instance + login + first page + observation)
or MiniWoB++ (first page + seeded episode start + observation).

    python benchmarks/reset_latency.py [--n 100] [--site shopping]
    python benchmarks/reset_latency.py --source miniwob [--n 100] [--task click-button]

Embedded: p50 / p95 / max in milliseconds for (a) creating an isolated instance alone (a copy
of the pristine SQLite database) and (b) a full ``WebEnv.reset``: new browser context,
instance, login cookie, first page load and observation extraction, in one process.
MiniWoB++: a full ``WebEnv.reset`` (new browser context, task page, ``Math.seedrandom`` +
``core.startEpisodeReal()``, instruction, observation; the browser is never relaunched),
cycling over every supported task (or ``--task``) with test seeds. For comparison,
BrowserGym's reset measured 1.9-2.9 s on this kind of machine (docs/miniwob.md), and a
WebArena site reset is a container restart (minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from webagent_r1.browser import Browser
from webagent_r1.config import BrowserConfig, EnvConfig, ObservationConfig
from webagent_r1.env import WebEnv
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


async def main_miniwob(n: int, task: str | None) -> dict:
    from webagent_r1.sources.miniwob import MiniWoBSource

    source = MiniWoBSource([task] if task else [])
    backend = source.start()
    browser = await Browser.launch(BrowserConfig())
    try:
        by_name: dict[str, list[Task]] = {}
        for t in source.tasks("test"):
            by_name.setdefault(t.extra["miniwob"]["task"], []).append(t)
        names = list(by_name)
        # Reset i: task i mod |tasks|, its (i div |tasks|)-th test seed.
        order = [by_name[names[i % len(names)]][(i // len(names)) % 50] for i in range(n)]
        env = WebEnv(browser, EnvConfig(), ObservationConfig(), backend, source.evaluator)
        await env.reset(order[0])  # warm-up
        resets = []
        for t in order:
            t0 = time.perf_counter()
            await env.reset(t)
            resets.append(time.perf_counter() - t0)
        await env.close()
    finally:
        await browser.close()
        source.stop()
    what = task or f"all {len(names)} supported tasks, round-robin"
    return {"n": n, "source": "miniwob", "tasks": what, "env_reset": summary(resets)}


async def main(n: int, site: str) -> dict:
    sites = EmbeddedSites.start()
    browser = await Browser.launch(BrowserConfig())
    try:
        # (a) instance creation alone
        inst = []
        for _ in range(n):
            t0 = time.perf_counter()
            iid = sites.running.create_instance()
            inst.append(time.perf_counter() - t0)
            sites.running.delete_instance(iid)
        # (b) full env reset
        url, user = START[site]
        task = Task(task_id="bench", intent="benchmark", start_url=url, sites=[site], user=user)
        env = WebEnv(browser, EnvConfig(), ObservationConfig(), sites)
        await env.reset(task)  # warm-up
        resets = []
        for _ in range(n):
            t0 = time.perf_counter()
            await env.reset(task)
            resets.append(time.perf_counter() - t0)
        await env.close()
    finally:
        await browser.close()
        sites.stop()
    return {"n": n, "site": site, "instance_create": summary(inst), "env_reset": summary(resets)}


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
