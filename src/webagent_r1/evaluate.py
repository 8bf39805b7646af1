"""Evaluation: a policy on a set of tasks, greedy by default, success overall and per site.

``evaluate_policy`` rolls out one episode per task with the same rollout code as training and
grades it with the task's programmatic evaluator; ``eval_subset`` picks a fixed, stratified
subset of a split (round-robin over templates) so that evaluations during training compare
like with like.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.config import AgentConfig
from webagent_r1.envpool import EnvPool
from webagent_r1.policy.base import Engine, SamplingParams
from webagent_r1.rollout import Policy, RolloutStats, collect
from webagent_r1.types import Task, Trajectory

__all__ = ["EvalReport", "eval_subset", "evaluate_policy", "site_of"]


def site_of(task: Task) -> str:
    """The site a task is reported under (``cross-site`` for tasks of several sites)."""
    return task.sites[0] if len(task.sites) == 1 else "cross-site"


@dataclass
class EvalReport:
    """Outcome of an evaluation."""

    trajectories: list[Trajectory] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    env_errors: int = 0
    """Episodes that still hit env errors after retries (left out of the rates)."""
    wall_s: float = 0.0

    def _scored(self) -> list[tuple[Task, Trajectory]]:
        return [
            (t, tr)
            for t, tr in zip(self.tasks, self.trajectories, strict=True)
            if tr.status != "env_error"
        ]

    @property
    def success_rate(self) -> float:
        scored = self._scored()
        return sum(tr.reward for _, tr in scored) / len(scored) if scored else 0.0

    def by(self, key: str = "site") -> dict[str, tuple[int, int]]:
        """``name -> (successes, episodes)`` per site or per template."""
        out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for task, tr in self._scored():
            name = site_of(task) if key == "site" else str(task.extra.get("template", "?"))
            out[name][0] += int(tr.reward == 1.0)
            out[name][1] += 1
        return {k: (v[0], v[1]) for k, v in sorted(out.items())}

    def metrics(self, prefix: str = "eval") -> dict[str, float]:
        """``eval/success`` and ``eval/success/<site>``, plus turns and errors."""
        scored = self._scored()
        m: dict[str, float] = {
            f"{prefix}/success": self.success_rate,
            f"{prefix}/episodes": float(len(scored)),
            f"{prefix}/env_errors": float(self.env_errors),
            f"{prefix}/turns": (
                sum(len(tr.turns) for _, tr in scored) / len(scored) if scored else 0.0
            ),
        }
        for site, (s, n) in self.by("site").items():
            m[f"{prefix}/success/{site}"] = s / n if n else 0.0
        return m


def eval_subset(tasks: list[Task], n: int, seed: int = 0) -> list[Task]:
    """A fixed subset of ``n`` tasks, round-robin over templates (all tasks when n <= 0)."""
    if n <= 0 or n >= len(tasks):
        return list(tasks)
    by_t: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        by_t[str(t.extra.get("template", t.intent_template_id))].append(t)
    rng = random.Random(seed)
    queues = []
    for name in sorted(by_t):
        lst = list(by_t[name])
        rng.shuffle(lst)
        queues.append(lst)
    out: list[Task] = []
    while len(out) < n:
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop())
    return out


async def evaluate_policy(
    engine: Engine | Policy,
    tokenizer: Any,
    tasks: list[Task],
    env_pool: EnvPool,
    agent_cfg: AgentConfig | None = None,
    params: SamplingParams | None = None,
    max_env_retries: int = 2,
    progress: bool = True,
) -> EvalReport:
    """One episode per task (greedy unless ``params`` say otherwise), graded.

    Args:
        engine: the policy's engine (or a ``Policy``).
        tokenizer: prompt ids.
        tasks: the tasks.
        env_pool: envs to run in (its size = episodes at once).
        agent_cfg: prompt options.
        params: sampling parameters; default greedy, 256 new tokens.
        max_env_retries: re-runs of an episode lost to an env error.
        progress: progress bar.
    """
    params = params or SamplingParams(temperature=0.0, max_new_tokens=256)
    stats = RolloutStats()
    groups = await collect(
        tasks,
        1,
        engine,
        env_pool,
        tokenizer,
        agent_cfg,
        params,
        max_concurrent_episodes=env_pool.size,
        max_env_retries=max_env_retries,
        progress=progress,
        stats=stats,
    )
    report = EvalReport(
        trajectories=[g.trajectories[0] for g in groups],
        tasks=[g.task for g in groups],
        wall_s=stats.wall_s,
    )
    report.env_errors = sum(tr.status == "env_error" for tr in report.trajectories)
    return report


async def eval_model(
    cfg: Any,
    tasks: list[Task],
    model_path: str | None = None,
    progress: bool = True,
    concurrency: int | None = None,
) -> EvalReport:
    """Load a model (``model_path`` or the config's), start the sites and a browser, evaluate.

    Args:
        cfg: a ``Config`` (model, browser, observation, agent, env, rollout).
        tasks: the tasks (one greedy episode each).
        model_path: a model folder or checkpoint ``model/`` (default ``init_from`` / name).
        progress: progress bar.
        concurrency: episodes at once (default ``rollout.max_concurrent_episodes``).
    """
    from webagent_r1.browser import Browser
    from webagent_r1.envpool import LocalEnvPool
    from webagent_r1.policy.hf import HFEngine
    from webagent_r1.sites.episodes import EmbeddedSites
    from webagent_r1.tasks.evaluators import evaluate
    from webagent_r1.train.batching import unwrap_model
    from webagent_r1.train.setup import load_policy

    model, tokenizer = load_policy(cfg, model_path)
    model.eval()
    engine = HFEngine(
        unwrap_model(model),
        tokenizer,
        cfg.model.autocast_bf16,
        max_batch_size=cfg.rollout.max_batch_size,
        batch_wait_ms=cfg.rollout.batch_wait_ms,
    )

    def count_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    sites = EmbeddedSites.start()
    browser = await Browser.launch(cfg.browser)
    pool = LocalEnvPool(
        browser,
        concurrency or cfg.rollout.max_concurrent_episodes,
        cfg.env,
        cfg.observation,
        sites,
        evaluate,
        count_tokens,
    )
    try:
        return await evaluate_policy(
            engine,
            tokenizer,
            tasks,
            pool,
            cfg.agent,
            SamplingParams(temperature=0.0, max_new_tokens=cfg.rollout.max_new_tokens),
            cfg.rollout.max_env_retries,
            progress,
        )
    finally:
        await pool.close()
        await browser.close()
        sites.stop()
        engine.close()
