"""Reset latency of an embedded-site episode: instance + login + first page + observation.

    python benchmarks/reset_latency.py [--n 100] [--site shopping]

Reports p50 / p95 / max in milliseconds for (a) creating an isolated instance alone (a copy
of the pristine SQLite database) and (b) a full ``WebEnv.reset``: new browser context,
instance, login cookie, first page load and observation extraction, in one process. For
comparison, FACTS.md measured BrowserGym's reset at 1.9-2.9 s on this machine, and a
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
    ap.add_argument("--site", default="shopping", choices=sorted(START))
    a = ap.parse_args()
    print(json.dumps(asyncio.run(main(a.n, a.site)), indent=1))
