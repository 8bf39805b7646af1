"""``webagent-r1 tasks budget``: roll the experts out and measure what each step needs.

The experts run through the same rollout as demonstrations (``demos.roll_out``: the policy's
prompts, the env pool, real Chromium over the embedded sites), with a large observation
budget so that no page is cut. ``RecordingPolicy`` keeps the full observation text each expert
step was chosen on (trajectories keep only its head); each turn of a clean episode is then
measured by ``tasks.budget.measure_turn`` with the policy tokenizer's count.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webagent_r1.config import Config, load_config
from webagent_r1.errors import RequestError
from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.policy.expert import ExpertPolicy
from webagent_r1.rollout.collect import RolloutStats
from webagent_r1.rollout.demos import demo_failure, pick_demo_tasks, roll_out, token_counter
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sources.embedded.suite import all_templates, template_of
from webagent_r1.tasks.budget import (
    DEFAULT_BUDGETS,
    BudgetRow,
    TurnNeed,
    measure_turn,
    parse_budgets,
    summarize,
)
from webagent_r1.types import Task

__all__ = [
    "BudgetReport",
    "BudgetRequest",
    "BudgetRun",
    "RecordingPolicy",
    "measure_page_budget",
    "page_budget",
]


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


@dataclass
class BudgetRequest:
    """What ``webagent-r1 tasks budget`` measures: the experts on a split's tasks (a
    template's, a subset), the budgets (``"300,600"``) to show fit shares for, and the
    rollout's ``observation.max_tokens`` (large, so no page is cut)."""

    config: str | None = None
    overrides: list[str] = field(default_factory=list)
    split: str = "train"
    subset: int | None = None
    template: str | None = None
    budgets: str = ",".join(str(b) for b in DEFAULT_BUDGETS)
    rollout_tokens: int = 4000
    concurrency: int = 4
    json_out: str | None = None
    """Also write the rows and every measured turn here."""


@dataclass
class BudgetReport:
    """The measured budgets: a row per template and the ``all`` row, and the rollout."""

    request: BudgetRequest
    tasks: int
    model: str
    format: str
    budgets: list[int]
    rows: list[BudgetRow]
    run: BudgetRun

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``--json``: the rows, every turn, the episodes not measured."""
        return {
            "split": self.request.split,
            "tasks": self.tasks,
            "model": self.model,
            "format": self.format,
            "rollout_tokens": self.request.rollout_tokens,
            "budgets": self.budgets,
            "rows": [r.to_dict() for r in self.rows],
            "turns": [n.to_dict() for n in self.run.needs],
            "failures": [{"task_id": t, "reason": w} for t, w in self.run.failures],
            "env_errors": self.run.env_errors,
            "wall_s": self.run.wall_s,
        }


def _check_budget_request(request: BudgetRequest) -> list[int]:
    """The budgets of a request whose template, concurrency and subset are valid.

    Raises:
        RequestError: bad budgets, an unknown template (the nearest name suggested), a
            concurrency or subset below 1.
    """
    try:
        wanted = parse_budgets(request.budgets)
    except ValueError as e:
        raise RequestError(str(e)) from None
    names = [t.name for t in all_templates()]
    if request.template is not None and request.template not in names:
        near = difflib.get_close_matches(request.template, names, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else "; see `webagent-r1 tasks list`"
        raise RequestError(f"--template: unknown template {request.template!r}{hint}")
    if request.concurrency < 1:
        raise RequestError("--concurrency must be >= 1")
    if request.subset is not None and request.subset < 1:
        raise RequestError("--subset must be >= 1")
    return wanted


def page_budget(request: BudgetRequest) -> BudgetReport:
    """``webagent-r1 tasks budget``: check the request, roll the experts out on its tasks
    with the recipe's settings (``observation.max_tokens`` = ``rollout_tokens``), measure
    every turn (``measure_page_budget``) and sum them per template; with ``json_out``, the
    report written there as JSON.

    Raises:
        RequestError: bad budgets, template, concurrency or subset; no task of the split
            (and template) passes the config's tasks filter.
    """
    # heavy: keeps torch, transformers off the import path
    from webagent_r1.policy.hf import load_tokenizer

    wanted = _check_budget_request(request)
    max_tokens = f"observation.max_tokens={request.rollout_tokens}"
    cfg = load_config(request.config, [*request.overrides, max_tokens])
    split, template = request.split, request.template
    try:
        tasks = pick_demo_tasks(split, request.subset, cfg.seed, template, cfg=cfg)
    except ValueError as e:
        raise RequestError(str(e)) from None
    if not tasks:
        raise RequestError(
            f"no {split} task of template {template!r} passes the config's tasks filter"
        )
    tokenizer = load_tokenizer(cfg.model.name)
    run = asyncio.run(measure_page_budget(tasks, tokenizer, cfg, concurrency=request.concurrency))
    rows = summarize(run.needs, wanted)
    report = BudgetReport(
        request, len(tasks), cfg.model.name, cfg.observation.format, wanted, rows, run
    )
    if request.json_out:
        path = Path(request.json_out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report.to_dict(), indent=1) + "\n", encoding="utf-8")
    return report
