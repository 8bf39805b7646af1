"""Behaviour-cloning data: the scripted experts rolled out by the same code as the policy.

``collect_demos`` runs ``rollout.collect`` with an ``ExpertPolicy`` (group size 1) over the
embedded sites in real Chromium. Every turn's prompt is built exactly as the policy will see
it (same system prompt, same dynamic context compression, same chat template), and every
completion is the expert's response with its rationale inside ``<think>`` (``cot=True``: a
longer step-by-step chain), stored with the exact token ids BC trains on.

Only clean successes are kept: reward 1, status ``done``, and no turn whose action failed.
Everything else is dropped and reported with its reason (``webagent-r1 demos`` prints them).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.browser import Browser
from webagent_r1.config import Config
from webagent_r1.errors import RequestError
from webagent_r1.grading.embedded import evaluate
from webagent_r1.policy.base import SamplingParams
from webagent_r1.policy.expert import ExpertPolicy
from webagent_r1.rollout.collect import Group, Policy, RolloutStats, collect
from webagent_r1.rollout.pool import LocalEnvPool
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sources.embedded.suite import build_suite, select, spec_for, tasks_for
from webagent_r1.tasks.subset import eval_subset
from webagent_r1.types import Task, Trajectory

__all__ = [
    "DemoReport",
    "collect_demos",
    "demo_failure",
    "pick_demo_tasks",
    "roll_out",
    "token_counter",
    "write_demos",
]


@dataclass
class DemoReport:
    """What ``collect_demos`` kept and dropped."""

    kept: Counter = field(default_factory=Counter)
    """Template name → demonstrations kept."""
    dropped: Counter = field(default_factory=Counter)
    """Template name → episodes dropped."""
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(task id, reason) of every dropped episode."""
    env_errors: int = 0
    """Episode attempts lost to env errors (retried; counted here, never as failures)."""
    wall_s: float = 0.0

    @property
    def total_kept(self) -> int:
        return sum(self.kept.values())

    @property
    def total_dropped(self) -> int:
        return sum(self.dropped.values())


def pick_demo_tasks(
    split: str = "train",
    sample: int | None = None,
    seed: int = 0,
    template: str | None = None,
    cfg: Config | None = None,
) -> list[Task]:
    """Tasks of the embedded suite for demonstrations.

    A sample of N is seeded and spread over templates (round-robin, a random instance of each
    template in turn), so N >= the number of templates covers every template.

    Args:
        split: train | test | heldout.
        sample: how many (None: all).
        seed: sampling seed.
        template: only this template.
        cfg: a config whose ``tasks`` filters apply (sites, templates, difficulty).
    """
    if cfg is not None:
        tasks = tasks_for(cfg, split)
    else:
        tasks = select(build_suite(spec_for(split)), split=split)
    if template is not None:
        tasks = select(tasks, template=template)
    if sample is not None and sample < len(tasks):
        tasks = eval_subset(tasks, sample, seed)
    return tasks


def demo_failure(traj: Trajectory, expert_error: str | None = None) -> str | None:
    """Why ``traj`` is not a clean demonstration, or None when it is one."""
    if expert_error:
        return f"expert: {expert_error}"
    if traj.status != "done":
        return f"status {traj.status}: {traj.info.get('error') or 'no exit() in time'}"
    if traj.reward != 1.0:
        return f"reward 0: {traj.info.get('explanation', '')}"
    for k, turn in enumerate(traj.turns):
        if turn.error:
            return f"turn {k}: {turn.error}"
    return None


async def collect_demos(
    tasks: list[Task],
    tokenizer: Any,
    cfg: Config | None = None,
    cot: bool = False,
    concurrency: int = 4,
    sites: EmbeddedSites | None = None,
    progress: bool = True,
) -> tuple[list[Trajectory], DemoReport]:
    """Roll the experts out on ``tasks``; return the clean demonstrations and a report.

    Args:
        tasks: embedded-suite tasks.
        tokenizer: the policy model's tokenizer (prompt ids, completion ids, eos).
        cfg: agent (prompt, compression), env (turn limit), observation, browser and rollout
            (``max_env_retries``) settings; defaults when None.
        cot: long step-by-step rationales instead of the experts' one-liners.
        concurrency: episodes at once (browser contexts).
        sites: running embedded sites; started (and stopped) here when None.
        progress: show a progress bar.

    Returns:
        The kept trajectories (reward 1, in task order) and the report.
    """
    cfg = cfg or Config()
    report = DemoReport()
    t0 = time.time()
    policy = ExpertPolicy(tokenizer, thinking=cfg.agent.thinking, cot=cot)
    stats = RolloutStats()
    groups = await roll_out(
        tasks, policy, tokenizer, cfg, concurrency, sites=sites, progress=progress, stats=stats
    )
    kept: list[Trajectory] = []
    for g in groups:
        [traj] = g.trajectories
        name = str(g.task.extra.get("template", "?"))
        why = demo_failure(traj, policy.failures.get(str(g.task.task_id)))
        if why is None:
            traj.info["template"] = name
            traj.info["cot"] = cot
            kept.append(traj)
            report.kept[name] += 1
        else:
            report.dropped[name] += 1
            report.failures.append((str(g.task.task_id), why))
    report.env_errors = stats.env_errors
    report.wall_s = time.time() - t0
    return kept, report


def token_counter(tokenizer: Any) -> Callable[[str], int]:
    """The observation budget's token count: ``tokenizer``'s ids of a text, no special tokens."""

    def count_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    return count_tokens


async def roll_out(
    tasks: list[Task],
    policy: Policy,
    tokenizer: Any,
    cfg: Config,
    concurrency: int = 4,
    sites: EmbeddedSites | None = None,
    progress: bool = True,
    stats: RolloutStats | None = None,
) -> list[Group]:
    """One greedy episode of ``policy`` on each task, in real Chromium over the embedded sites.

    Args:
        tasks: embedded-suite tasks.
        policy: acts in the episodes (an ``ExpertPolicy``, or a policy wrapping one).
        tokenizer: the policy model's tokenizer (prompt ids; the observation token budget).
        cfg: agent, env, observation, browser and rollout (``max_env_retries``) settings.
        concurrency: episodes at once (browser contexts).
        sites: running embedded sites; started (and stopped) here when None.
        progress: show a progress bar.
        stats: filled with the rollout's counters (env errors retried …).

    Returns:
        One group of one trajectory per task, in task order.
    """
    own_sites = sites is None
    sites = sites or EmbeddedSites.start()
    browser = await Browser.launch(cfg.browser)
    try:
        pool = LocalEnvPool(
            browser,
            concurrency,
            cfg.env,
            cfg.observation,
            sites,
            evaluate,
            token_counter(tokenizer),
        )
        groups = await collect(
            tasks,
            1,
            policy,
            pool,
            tokenizer,
            cfg.agent,
            SamplingParams(temperature=0.0),
            max_concurrent_episodes=concurrency,
            max_env_retries=cfg.rollout.max_env_retries,
            progress=progress,
            stats=stats,
        )
        await pool.close()
    finally:
        await browser.close()
        if own_sites:
            sites.stop()
    return groups


def write_demos(
    cfg: Config,
    out: str,
    split: str = "train",
    subset: int | None = None,
    template: str | None = None,
    cot: bool = False,
    concurrency: int = 4,
) -> tuple[int, int, DemoReport]:
    """``webagent-r1 demos``: the experts' demonstrations of a split's tasks (a template's,
    a subset: ``pick_demo_tasks``) written to ``out`` as trajectories.

    Returns:
        The demonstrations written, their turns, and the report.

    Raises:
        RequestError: no task matches the filters, or a concurrency below 1.
    """
    # heavy: keeps torch, transformers off the import path
    from webagent_r1.policy.hf import load_tokenizer

    tasks = pick_demo_tasks(split, subset, cfg.seed, template, cfg=cfg)
    if not tasks:
        raise RequestError("no tasks match the filters")
    if concurrency < 1:
        raise RequestError("--concurrency must be >= 1")
    tokenizer = load_tokenizer(cfg.model.name)
    kept, report = asyncio.run(
        collect_demos(tasks, tokenizer, cfg, cot=cot, concurrency=concurrency)
    )
    n = write_trajectories(kept, out)
    return n, sum(len(t.turns) for t in kept), report
