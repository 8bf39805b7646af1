"""Distribution of observation sizes (tokens of the default model) on the embedded sites.

    python benchmarks/page_sizes.py [--sample 60] [--format compact|html]

Runs the scripted experts on a sample of test tasks in real Chromium, tokenises every
observation the agent would see with the default model's tokenizer, and reports p50 / p90 /
max per site. Prompt length sets training speed on a CPU, so pages are kept compact.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics

from webagent_r1.browser import Browser
from webagent_r1.checks.tasks import run_expert
from webagent_r1.config import BrowserConfig, EnvConfig, ObservationConfig
from webagent_r1.grading.embedded import evaluate
from webagent_r1.policy.hf import load_tokenizer
from webagent_r1.rollout.env import WebEnv
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sources.embedded.suite import build_suite, select


class RecordingEnv(WebEnv):
    """A WebEnv that remembers the text of every observation it returns."""

    seen: list[str]

    async def _observe(self):
        obs = await super()._observe()
        self.seen.append(obs.text)
        return obs


async def main(sample: int, fmt: str, max_tokens: int) -> dict:
    tok = load_tokenizer("smollm2-135m-instruct")
    tasks = select(build_suite(), split="test")
    tasks = random.Random(0).sample(tasks, min(sample, len(tasks)))
    sites = EmbeddedSites.start()
    browser = await Browser.launch(BrowserConfig())
    per_site: dict[str, list[int]] = {}
    truncated = 0
    try:
        obs_cfg = ObservationConfig(format=fmt, max_tokens=max_tokens)
        env = RecordingEnv(browser, EnvConfig(max_turns=30), obs_cfg, sites, evaluate)
        for t in tasks:
            env.seen = []
            await run_expert(env, t)
            for text in env.seen:
                per_site.setdefault(t.sites[0], []).append(len(tok(text).input_ids))
                truncated += "truncated" in text.splitlines()[-1] if text else 0
    finally:
        await browser.close()
        sites.stop()
    out = {"format": fmt, "max_tokens": max_tokens, "tasks": len(tasks), "truncated": truncated}
    for site, xs in sorted(per_site.items()):
        xs.sort()
        out[site] = {
            "pages": len(xs),
            "p50": int(statistics.median(xs)),
            "p90": xs[int(0.9 * (len(xs) - 1))],
            "max": xs[-1],
        }
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=60)
    ap.add_argument("--format", default="compact", choices=["compact", "html"])
    ap.add_argument("--max-tokens", type=int, default=100000, help="budget (large = untruncated)")
    a = ap.parse_args()
    print(json.dumps(asyncio.run(main(a.sample, a.format, a.max_tokens)), indent=1))
