"""Soak test: roll episodes out for a long time and check that nothing accumulates.

The scripted experts (no model, so the numbers are the env's alone) play the look-up tasks of
every site in real Chromium over the embedded sites, ``--concurrency`` episodes at a time,
for ``--minutes``. Every ``--sample-s`` seconds it records the open browser contexts, the
open file descriptors and the RSS of this process and its Chromium children, and the site
instance folders under the temp directory. After the warm-up (the first third of the
samples) every series must stay flat: contexts at most ``--concurrency`` plus the idle ones
the context pool keeps (``browser.context_pool``), file descriptors
and instance files within a small slack of the warm-up's level, RSS within ``--rss-growth``.

Bounded and self-stopping; writes ``<out>/soak.jsonl`` (one sample a line), ``<out>/soak.png``
(the four series) and ``<out>/summary.json``, prints the summary and exits 0 only when every
series stayed flat::

    python scripts/soak.py --minutes 30 --out runs/soak
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

LOOKUP_TEMPLATES = (
    "shopping.search_result_count",
    "shopping_admin.customer_contact",
    "reddit.post_comment_count",
    "reddit.post_author",
    "reddit.search_count",
    "reddit.forum_count",
    "map.street_address",
    "map.place_at_coordinates",
    "gitlab.latest_commit_author",
    "gitlab.star_count",
)
"""The look-up tasks of the r1 recipe (configs/r1.yaml)."""


def _instance_files(roots: list[Path]) -> tuple[int, int]:
    """(instance database files, their bytes) in this run's instance folders."""
    files = [p for d in roots if d.is_dir() for p in d.glob("*.sqlite*")]
    return len(files), sum(p.stat().st_size for p in files if p.exists())


def _process_tree() -> tuple[int, int, int]:
    """(open file descriptors, RSS bytes, Chromium processes) of this process and children."""
    me = psutil.Process()
    fds, rss, chromium = 0, 0, 0
    for p in [me, *me.children(recursive=True)]:
        try:
            fds += p.num_fds()
            rss += p.memory_info().rss
            chromium += "chrom" in p.name().lower()
        except psutil.Error:  # a renderer that exited meanwhile
            continue
    return fds, rss, chromium


def _flat(rows: list[dict[str, Any]], key: str, slack: float, ratio: float) -> dict[str, Any]:
    """Is ``key`` flat? The mean of the middle third of the samples (after the warm-up)
    against the mean of the last third: ``end <= warm * ratio + slack``."""
    n = len(rows)
    warm = [r[key] for r in rows[n // 3 : max(n // 3 + 1, 2 * n // 3)]]
    last = [r[key] for r in rows[2 * n // 3 :]] or warm
    base = sum(warm) / len(warm)
    end = sum(last) / len(last)
    return {
        "warm": round(base, 1),
        "end": round(end, 1),
        "flat": end <= base * ratio + slack,
    }


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [r["t_min"] for r in rows]
    series = [
        ("contexts", "browser contexts"),
        ("fds", "open file descriptors"),
        ("instance_files", "site instance files"),
        ("rss_mb", "RSS (MB), process + Chromium"),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for ax, (key, label) in zip(axes.flat, series, strict=True):
        ax.plot(t, [r[key] for r in rows], marker=".")
        ax.set_title(label)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("minutes")
    fig.suptitle(f"soak: {rows[-1]['episodes']} expert episodes over {t[-1]:.0f} min")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


async def soak(a: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from webagent_r1.browser import Browser
    from webagent_r1.checks.tasks import run_expert
    from webagent_r1.config import BrowserConfig, EnvConfig, ObservationConfig
    from webagent_r1.grading.embedded import evaluate
    from webagent_r1.rollout.env import WebEnv
    from webagent_r1.sites.episodes import EmbeddedSites
    from webagent_r1.sources.embedded.suite import build_suite, select

    suite = build_suite()
    tasks = [t for name in LOOKUP_TEMPLATES for t in select(suite, "train", template=name)]
    order = itertools.cycle(tasks)
    sites = EmbeddedSites.start()
    running = sites.running
    roots = sorted({running.store(name).root for name in running.sites})  # under $TMPDIR
    bcfg = BrowserConfig()
    browser = await Browser.launch(bcfg)
    counts = {"episodes": 0, "env_errors": 0, "successes": 0}
    rows: list[dict[str, Any]] = []
    t0 = time.monotonic()
    stop_at = t0 + 60 * a.minutes
    out = a.out / "soak.jsonl"

    async def worker() -> None:
        env = WebEnv(
            browser, EnvConfig(max_turns=30), ObservationConfig(), sites, evaluator=evaluate
        )
        try:
            while time.monotonic() < stop_at:
                run = await run_expert(env, next(order))
                counts["episodes"] += 1
                counts["env_errors"] += run.status == "env_error"
                counts["successes"] += run.reward == 1.0
                if run.status == "env_error":
                    await browser.ensure_alive()
        finally:
            await env.close()

    async def sampler() -> None:
        while True:
            fds, rss, chromium = _process_tree()
            files, size = _instance_files(roots)
            pw = getattr(browser, "_browser", None)  # Playwright's Browser: its open contexts
            row = {
                "t_min": round((time.monotonic() - t0) / 60, 2),
                **counts,
                "contexts": len(pw.contexts) if pw is not None else -1,
                "fds": fds,
                "rss_mb": round(rss / 2**20, 1),
                "chromium_processes": chromium,
                "instance_files": files,
                "instance_mb": round(size / 2**20, 1),
            }
            rows.append(row)
            with out.open("a") as f:
                f.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
            if time.monotonic() >= stop_at:
                return
            await asyncio.sleep(min(a.sample_s, max(0.0, stop_at - time.monotonic())))

    try:
        await asyncio.gather(sampler(), *(worker() for _ in range(a.concurrency)))
    finally:
        await browser.close()
        sites.stop()

    # the episodes' contexts, and the finished ones the pool keeps for reuse
    limit = a.concurrency + bcfg.context_pool
    checks = {
        "contexts": {"max": max(r["contexts"] for r in rows), "limit": limit},
        "fds": _flat(rows, "fds", slack=64, ratio=1.0),
        "instance_files": _flat(rows, "instance_files", slack=2 * a.concurrency, ratio=1.0),
        "rss_mb": _flat(rows, "rss_mb", slack=0, ratio=1.0 + a.rss_growth),
    }
    checks["contexts"]["flat"] = checks["contexts"]["max"] <= limit
    left = [str(d) for d in roots if d.exists()]  # sites.stop() must remove every folder
    passed = all(c["flat"] for c in checks.values()) and counts["episodes"] > 0 and not left
    summary = {**counts, "samples": len(rows), "checks": checks, "folders_left": left}
    return {**summary, "passed": passed}, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/soak"))
    ap.add_argument("--minutes", type=float, default=30.0, help="how long to roll out")
    ap.add_argument("--sample-s", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--concurrency", type=int, default=4, help="episodes at a time")
    ap.add_argument("--rss-growth", type=float, default=0.2, help="allowed RSS growth, 0.2=20%%")
    a = ap.parse_args()
    if a.minutes <= 0 or a.sample_s <= 0 or a.concurrency < 1:
        ap.error("--minutes and --sample-s must be > 0 and --concurrency >= 1")
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "soak.jsonl").unlink(missing_ok=True)
    summary, rows = asyncio.run(soak(a))
    _plot(rows, a.out / "soak.png")
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
