"""``webagent-r1 tasks budget``: roll the experts out and measure what each step needs.

The experts run through the same rollout as demonstrations (``demos.roll_out``: the policy's
prompts, the env pool, real Chromium over the embedded sites), with a large observation
budget so that no page is cut. ``RecordingPolicy`` keeps the full observation text each expert
step was chosen on (trajectories keep only its head); each turn of a clean episode is then
measured by ``tasks.budget.measure_turn`` with the policy tokenizer's count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.config import Config
from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.policy.expert import ExpertPolicy
from webagent_r1.rollout.collect import RolloutStats
from webagent_r1.rollout.demos import demo_failure, roll_out, token_counter
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sources.embedded.suite import template_of
from webagent_r1.tasks.budget import TurnNeed, measure_turn
from webagent_r1.types import Task

__all__ = ["BudgetRun", "RecordingPolicy", "measure_page_budget"]


@dataclass
class _Recording:
    """One episode's inner policy state and the observation texts it acted on."""

    task: Task
    inner: Any
    texts: list[str] = field(default_factory=list)


class RecordingPolicy:
    """Wraps a policy and records, per task, the full observation text of every turn.

    Args:
        inner: the policy that acts (an ``ExpertPolicy``).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts: dict[str, list[str]] = {}
        """Task id → the observation text of each of its turns (the last attempt's)."""

    def begin(self, task: Task) -> _Recording:
        return _Recording(task, self.inner.begin(task))

    async def act(
        self, states: list[_Recording], inputs: list[Any], params: SamplingParams
    ) -> list[Completion]:
        out = await self.inner.act([s.inner for s in states], inputs, params)
        for s, inp in zip(states, inputs, strict=True):
            s.texts.append(inp.observation.text)
        return out

    def end(self, state: _Recording) -> None:
        self.inner.end(state.inner)
        self.texts[str(state.task.task_id)] = state.texts


@dataclass
class BudgetRun:
    """The measured turns of a rollout and what could not be measured.

    Attributes:
        needs: every turn of every clean expert episode, in task order.
        failures: (task id, reason) of episodes left out (the expert did not succeed).
        env_errors: episode attempts lost to env errors (retried).
        rollout_tokens: ``observation.max_tokens`` of the rollout.
        wall_s: wall time of the rollout and the measurement.
        texts: task id → the observation text each turn of its episode acted on.
    """

    needs: list[TurnNeed] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    env_errors: int = 0
    rollout_tokens: int = 0
    wall_s: float = 0.0
    texts: dict[str, list[str]] = field(default_factory=dict)


async def measure_page_budget(
    tasks: list[Task],
    tokenizer: Any,
    cfg: Config,
    concurrency: int = 4,
    sites: EmbeddedSites | None = None,
    progress: bool = True,
) -> BudgetRun:
    """Roll the experts out on ``tasks`` and measure the tokens each turn needs of its page.

    Args:
        tasks: embedded-suite tasks.
        tokenizer: the policy model's tokenizer: the token count of the observation budget.
        cfg: the rollout's settings; ``observation.max_tokens`` should be large enough that
            no page is cut (turns on a cut page are flagged ``cut``).
        concurrency: episodes at once (browser contexts).
        sites: running embedded sites; started (and stopped) here when None.
        progress: show a progress bar.

    Returns:
        The measured turns of the episodes the experts solved, and the others' reasons.
    """
    t0 = time.time()
    experts = ExpertPolicy(tokenizer, thinking=cfg.agent.thinking)
    policy = RecordingPolicy(experts)
    stats = RolloutStats()
    groups = await roll_out(
        tasks, policy, tokenizer, cfg, concurrency, sites=sites, progress=progress, stats=stats
    )
    count = token_counter(tokenizer)
    run = BudgetRun(
        env_errors=stats.env_errors,
        rollout_tokens=cfg.observation.max_tokens,
        texts=policy.texts,
    )
    for g in groups:
        [traj] = g.trajectories
        task_id = str(g.task.task_id)
        why = demo_failure(traj, experts.failures.get(task_id))
        if why is not None:
            run.failures.append((task_id, why))
            continue
        template = template_of(g.task)
        texts = policy.texts.get(task_id, [])
        if len(texts) != len(traj.turns):
            run.failures.append(
                (task_id, f"{len(texts)} observations recorded for {len(traj.turns)} turns")
            )
            continue
        for k, (turn, text) in enumerate(zip(traj.turns, texts, strict=True)):
            run.needs.append(
                measure_turn(
                    text,
                    turn.action,
                    count,
                    info_task=template.kind == "info",
                    template=template.name,
                    task_id=task_id,
                    turn=k,
                )
            )
    run.wall_s = time.time() - t0
    return run
