"""Run the scripted experts on tasks in real Chromium: proof that every task is solvable.

``webagent-r1 tasks check`` uses this. A failing task is a bug in a site, a task, an
evaluator or an expert; the result says which step failed and why.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from webagent_r1.browser import Browser
from webagent_r1.config import BrowserConfig, EnvConfig, ObservationConfig
from webagent_r1.errors import RequestError
from webagent_r1.grading.base import EnvError
from webagent_r1.grading.embedded import evaluate
from webagent_r1.rollout.env import WebEnv
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sources.embedded.suite import template_of
from webagent_r1.tasks.experts import ExpertError, Step
from webagent_r1.types import Task


@dataclass
class ExpertRun:
    """Outcome of one expert episode."""

    task_id: str
    reward: float
    status: str
    steps: list[Step] = field(default_factory=list)
    explanation: str = ""
    error: str | None = None
    wall_s: float = 0.0


async def run_expert(env: WebEnv, task: Task) -> ExpertRun:
    """Run the task's expert for one episode in ``env``."""
    t0 = time.perf_counter()
    run = ExpertRun(task_id=str(task.task_id), reward=0.0, status="done")
    try:
        obs = await env.reset(task)
    except EnvError as e:
        run.status, run.error = "env_error", str(e)
        return run
    gen = template_of(task).expert(dict(task.instantiation_dict))
    try:
        next(gen)  # prime: the expert now waits for the first observation
        while True:
            try:
                step = gen.send(obs)
            except StopIteration:
                run.error = "expert stopped without exit()"
                break
            except ExpertError as e:
                run.error = str(e)
                break
            if step is None:
                run.error = "expert yielded no step"
                break
            run.steps.append(step)
            result = await env.step(step.response())
            if result.observation.error and not result.done:
                run.error = f"step {len(run.steps)}: {result.observation.error}"
                break
            obs = result.observation
            if result.done:
                run.reward = result.reward
                run.status = result.info.get("status", "done")
                run.explanation = result.info.get("explanation", "")
                if run.status == "env_error":
                    run.error = result.info.get("error")
                break
    finally:
        gen.close()
        await env.close_episode()
    run.wall_s = time.perf_counter() - t0
    return run


async def check_tasks(
    tasks: list[Task],
    concurrency: int = 4,
    browser_cfg: BrowserConfig | None = None,
    obs_cfg: ObservationConfig | None = None,
    max_turns: int = 30,
    on_result: Callable[[ExpertRun], None] | None = None,
    sites: EmbeddedSites | None = None,
) -> list[ExpertRun]:
    """Run experts on ``tasks`` with ``concurrency`` parallel episodes; results in order."""
    own_sites = sites is None
    sites = sites or EmbeddedSites.start()
    browser = await Browser.launch(browser_cfg or BrowserConfig())
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(len(tasks)):
        queue.put_nowait(i)
    results: list[ExpertRun | None] = [None] * len(tasks)

    async def worker() -> None:
        env = WebEnv(browser, EnvConfig(max_turns=max_turns), obs_cfg, sites, evaluator=evaluate)
        while not queue.empty():
            i = queue.get_nowait()
            r = await run_expert(env, tasks[i])
            results[i] = r
            if on_result:
                on_result(r)
        await env.close()

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    finally:
        await browser.close()
        if own_sites:
            sites.stop()
    return [r for r in results if r is not None]


def pick_check_tasks(tasks: list[Task], subset: int | None, seed: int) -> list[Task]:
    """``tasks``, or a seeded random ``subset`` of them when it is smaller.

    Raises:
        RequestError: no task left.
    """
    if subset is not None and subset < len(tasks):
        tasks = random.Random(seed).sample(tasks, subset)
    if not tasks:
        raise RequestError("no tasks match the filters")
    return tasks
