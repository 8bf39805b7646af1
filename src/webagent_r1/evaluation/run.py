"""Evaluation: a policy on a set of tasks, greedy by default, success overall and per site.

``evaluate_policy`` rolls out ``samples`` episodes per task with the same rollout code as
training and grades each with the task's programmatic evaluator; ``eval_subset`` picks a fixed,
stratified subset of a split (round-robin over templates, by site) so that evaluations during
training compare like with like. ``run_evaluation`` is ``webagent-r1 eval``: any engine (a model
folder or checkpoint, the experts, an OpenAI-compatible server), one or several turn budgets
(test-time scaling), results per site and per template kind with 95% intervals (Wilson with one
episode per task, a bootstrap over tasks with several; see ``stats``), unbiased pass@k, tasks
that no episode scored, failure reasons, on the embedded suite the constant-answer baseline of
the tasks (``embedded.guess``), and an output folder (``eval.json`` and the trajectories) that
``webagent-r1 report`` and ``webagent-r1 view`` read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from webagent_r1.browser import Browser
from webagent_r1.config import AgentConfig, to_dict
from webagent_r1.errors import RequestError
from webagent_r1.policy.base import Engine, SamplingParams, prefill_counts
from webagent_r1.policy.expert import ExpertPolicy
from webagent_r1.policy.openai import OpenAIEngine
from webagent_r1.rollout.collect import Group, Policy, RolloutStats, collect
from webagent_r1.rollout.pool import EnvPool, make_env_pool
from webagent_r1.rollout.trajectories import (
    TrajectoryFileError,
    cut_to_budget,
    read_trajectories,
    read_trajectory_records,
    write_trajectories,
)
from webagent_r1.sources import TaskSource, task_source
from webagent_r1.sources.embedded.guess import baseline
from webagent_r1.sources.embedded.suite import all_templates, select
from webagent_r1.stats import pass_at_k, success_interval
from webagent_r1.types import Task, Trajectory, failure_reason, site_of

__all__ = [
    "EvalReport",
    "EvalRequest",
    "evaluate_policy",
    "request_out_dir",
    "request_split",
    "request_tasks",
    "run_evaluation",
    "run_request",
    "site_of",
]


def _template_attr(task: Task, attr: str) -> str:
    """``kind`` or ``difficulty`` of an embedded task's template ('?' for other tasks)."""
    name = task.extra.get("template")
    for t in all_templates():
        if t.name == name:
            return str(getattr(t, attr))
    return "?"


@dataclass
class EvalReport:
    """Outcome of an evaluation."""

    trajectories: list[Trajectory] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)
    env_errors: int = 0
    """Episodes that still hit env errors after retries (left out of the rates)."""
    wall_s: float = 0.0
    samples: int = 1
    """Episodes per task (consecutive in ``tasks``/``trajectories``)."""

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

    def _group_of(self, task: Task, key: str) -> str:
        if key == "site":
            return site_of(task)
        if key == "template":
            return str(task.extra.get("template", "?"))
        return _template_attr(task, key)

    def per_task(self) -> dict[str, list[int]]:
        """``task_id -> [1 or 0 per scored episode]``, every task listed (an empty list: all
        of its episodes were env errors)."""
        out: dict[str, list[int]] = {str(t.task_id): [] for t in self.tasks}
        for task, tr in self._scored():
            out[str(task.task_id)].append(int(tr.reward == 1.0))
        return out

    def clusters(self, key: str | None = None) -> dict[str, list[tuple[int, int]]]:
        """``group -> [(successes, scored episodes) per task]`` by site, template, kind or
        difficulty (one group ``"all"`` when ``key`` is None): what the intervals resample."""
        if key not in (None, "site", "template", "kind", "difficulty"):
            raise ValueError(f"key must be site, template, kind or difficulty, got {key!r}")
        outs = self.per_task()
        groups: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
        for task in self.tasks:
            tid = str(task.task_id)
            name = "all" if key is None else self._group_of(task, key)
            groups[name][tid] = (sum(outs[tid]), len(outs[tid]))
        return {k: list(v.values()) for k, v in sorted(groups.items())}

    def by(self, key: str = "site") -> dict[str, tuple[int, int]]:
        """``name -> (successes, episodes)`` per site, template, kind or difficulty (groups
        whose every episode was an env error left out)."""
        out = {
            name: (sum(s for s, _ in cs), sum(n for _, n in cs))
            for name, cs in self.clusters(key).items()
        }
        return {k: v for k, v in out.items() if v[1] > 0}

    def pass_at_k(self) -> float:
        """Unbiased pass@k, k = ``samples``, averaged over the tasks with a scored episode
        (``stats.pass_at_k``)."""
        return pass_at_k(self.per_task(), self.samples)[0]

    def failures(self) -> Counter[str]:
        """Failure reasons (``failure_reason``) and how many episodes had each."""
        return Counter(r for _, tr in self._scored() if (r := failure_reason(tr)) is not None)

    def result(self) -> dict[str, Any]:
        """JSON-ready summary: success with its 95% interval (``ci_method``: Wilson over
        episodes, or a bootstrap over tasks when a task has several episodes), unbiased pass@k,
        the tasks no episode scored, the successes that ran to the turn limit without ending
        by themselves (a state-changing task is graded on its end state, so they count; see
        ``compare-evals --require-exit``), per site, template (a MiniWoB++ task) and kind."""
        scored = self._scored()
        ok = sum(int(tr.reward == 1.0) for _, tr in scored)
        ci, method = success_interval(self.clusters()["all"] if self.tasks else [])
        pak, short, unscored = pass_at_k(self.per_task(), self.samples)

        def table(key: str) -> dict[str, dict[str, Any]]:
            rows = {}
            for name, cs in self.clusters(key).items():
                s, n = sum(c[0] for c in cs), sum(c[1] for c in cs)
                if n:
                    rows[name] = {"success": s / n, "ci": list(success_interval(cs)[0]), "n": n}
            return rows

        return {
            "success": ok / len(scored) if scored else 0.0,
            "ci": list(ci),
            "ci_method": method,
            "pass_at_k": pak if self.samples > 1 else None,
            "pass_at_k_short_tasks": short if self.samples > 1 else 0,
            "samples": self.samples,
            "episodes": len(scored),
            "tasks": len({str(t.task_id) for t in self.tasks}),
            "unscored_tasks": unscored,
            "env_errors": self.env_errors,
            "turns": sum(len(tr.turns) for _, tr in scored) / len(scored) if scored else 0.0,
            "successes_at_turn_limit": sum(
                tr.reward == 1.0 and tr.status == "max_turns" for _, tr in scored
            ),
            "successes_answer_not_shown": sum(
                tr.reward == 1.0 and tr.info.get("answer_shown") is False for _, tr in scored
            ),
            "by_site": table("site"),
            "by_template": table("template"),
            "by_kind": table("kind"),
            "by_difficulty": table("difficulty"),
            "failures": dict(self.failures().most_common(20)),
            "wall_s": self.wall_s,
        }

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


async def evaluate_policy(
    engine: Engine | Policy,
    tokenizer: Any,
    tasks: list[Task],
    env_pool: EnvPool,
    agent_cfg: AgentConfig | None = None,
    params: SamplingParams | None = None,
    max_env_retries: int = 2,
    progress: bool = True,
    samples: int = 1,
    on_group: Callable[[Group], None] | None = None,
    group_ids: Sequence[int] | None = None,
) -> EvalReport:
    """``samples`` episodes per task (greedy unless ``params`` say otherwise), graded.

    Args:
        engine: the policy's engine (or a ``Policy``).
        tokenizer: prompt ids.
        tasks: the tasks.
        env_pool: envs to run in (its size = episodes at once).
        agent_cfg: prompt options.
        params: sampling parameters; default greedy, 256 new tokens.
        max_env_retries: re-runs of an episode lost to an env error.
        progress: progress bar.
        samples: episodes per task (k of pass@k); with k > 1 sample (temperature > 0).
        on_group: called with a task's ``samples`` episodes as soon as they have all ended.
        group_ids: the tasks' group ids and sampling-seed bases (``collect``).
    """
    params = params or SamplingParams(temperature=0.0, max_new_tokens=256)
    stats = RolloutStats()
    groups = await collect(
        tasks,
        samples,
        engine,
        env_pool,
        tokenizer,
        agent_cfg,
        params,
        max_concurrent_episodes=env_pool.size,
        max_env_retries=max_env_retries,
        progress=progress,
        stats=stats,
        on_group=on_group,
        group_ids=group_ids,
    )
    report = EvalReport(
        trajectories=[tr for g in groups for tr in g.trajectories],
        tasks=[g.task for g in groups for _ in g.trajectories],
        wall_s=stats.wall_s,
        samples=samples,
    )
    report.env_errors = sum(tr.status == "env_error" for tr in report.trajectories)
    return report


ENGINES = ("hf", "vllm", "expert", "openai")
"""Engines ``run_evaluation`` can build: a local model (transformers, or vLLM on a CUDA GPU),
the scripted experts, an API server."""


def _build_engine(
    cfg: Any,
    engine: str,
    model_path: str | None,
    openai_url: str | None,
    openai_model: str | None,
    openai_token_ids: bool,
) -> tuple[Any, Any, Callable[[], Any] | None]:
    """The engine, its tokenizer, and what closes the engine (None: nothing to close)."""
    # heavy: keeps torch, transformers off the import path
    from webagent_r1.policy.hf import HFEngine, load_tokenizer

    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if engine == "hf":
        # heavy: keeps torch off the import path
        from webagent_r1.policy.precision import autocast_enabled

        # heavy: keeps torch, transformers off the import path
        # heavy: keeps torch, transformers off the import path
        from webagent_r1.policy.trainable import load_policy, unwrap_model

        model, tokenizer = load_policy(cfg, model_path)
        model.eval()
        eng: Any = HFEngine(
            unwrap_model(model),
            tokenizer,
            autocast_enabled(cfg.model, next(model.parameters()).device),
            max_batch_size=cfg.rollout.max_batch_size,
            batch_wait_ms=cfg.rollout.batch_wait_ms,
            batch_wait_fraction=cfg.rollout.batch_wait_fraction,
            prefix_cache_mb=cfg.rollout.prefix_cache_mb if cfg.rollout.prefix_cache else 0.0,
        )
        return eng, tokenizer, eng.close
    if engine == "vllm":
        # heavy: keeps torch off the import path
        from webagent_r1.policy.vllm import VLLMEngine

        name = model_path or cfg.init_from or cfg.model.name
        # raises first when vLLM is missing; context bounded by the recipe's token budget
        eng = VLLMEngine(name, cfg.vllm, seed=cfg.seed, token_budget=cfg.train.token_budget)
        return eng, load_tokenizer(name), eng.close
    if engine == "expert":
        tokenizer = load_tokenizer(model_path or cfg.init_from or cfg.model.name)
        return ExpertPolicy(tokenizer, thinking=cfg.agent.thinking), tokenizer, None
    if not openai_url or not openai_model:
        raise ValueError("the openai engine needs a server URL and a model name")
    tokenizer = load_tokenizer(model_path or cfg.init_from or cfg.model.name)
    # evaluation never trains on these tokens: a server that omits log-probs is fine here
    eng = OpenAIEngine(
        openai_url,
        openai_model,
        tokenizer,
        use_token_ids=openai_token_ids,
        for_training=False,
    )
    return eng, tokenizer, eng.close


@contextlib.asynccontextmanager
async def _setup(
    cfg: Any,
    engine: str = "hf",
    model_path: str | None = None,
    openai_url: str | None = None,
    openai_model: str | None = None,
    openai_token_ids: bool = False,
    source: TaskSource | None = None,
) -> AsyncIterator[tuple[Any, Any, Any, TaskSource, Callable[[str], int]]]:
    """The engine, its tokenizer, the task source's sites (started) and a browser; all
    closed on exit. ``source`` defaults to ``cfg.tasks.source`` (the embedded sites)."""
    eng, tokenizer, closer = _build_engine(
        cfg, engine, model_path, openai_url, openai_model, openai_token_ids
    )

    def count_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    source = source or task_source(cfg)
    local = cfg.rollout.env_pool == "local"
    if local:  # Ray workers start their own sites and browsers
        source.start()
    try:
        browser = await Browser.launch(cfg.browser) if local else None
        try:
            yield eng, tokenizer, browser, source, count_tokens
        finally:
            if browser is not None:
                await browser.close()
    finally:
        source.stop()
        if closer is not None:
            res = closer()
            if asyncio.iscoroutine(res):
                await res


async def _evaluate_at(
    cfg: Any,
    eng: Any,
    tokenizer: Any,
    browser: Any,
    source: TaskSource,
    count_tokens: Callable[[str], int],
    tasks: list[Task],
    max_turns: int,
    params: SamplingParams,
    samples: int,
    concurrency: int,
    progress: bool,
    on_group: Callable[[Group], None] | None = None,
    group_ids: Sequence[int] | None = None,
    grade_at: Sequence[int] = (),
) -> EvalReport:
    pool = make_env_pool(
        cfg,
        concurrency,
        browser=browser,
        env_cfg=replace(cfg.env, max_turns=max_turns, grade_at_turns=list(grade_at)),
        backend=source.backend if browser is not None else None,
        evaluator=source.evaluator,
        count_tokens=count_tokens,
    )
    try:
        return await evaluate_policy(
            eng,
            tokenizer,
            tasks,
            pool,
            cfg.agent,
            params,
            cfg.rollout.max_env_retries,
            progress,
            samples,
            on_group,
            group_ids,
        )
    finally:
        await pool.close()


def _source_hook(source: TaskSource, name: str, *args: Any) -> Any:
    """``source.<name>(*args)`` when the task source defines that optional hook, else None.

    Hooks: ``check_run(tasks, samples, concurrency)`` before the episodes (WebArena-Lite
    warns about shared site state) and ``headline_result(tasks, trajectories)``, fields that
    replace the generic ones (WebArena-Lite divides by every episode, as the paper).
    """
    fn = getattr(source, name, None)
    return fn(*args) if callable(fn) else None


def _relative_screenshots(trajs: list[Trajectory], folder: Path) -> None:
    """Screenshot paths relative to ``folder`` (the viewer resolves them from the JSONL's)."""
    for tr in trajs:
        for turn in tr.turns:
            shot = turn.observation.get("screenshot")
            if shot and os.path.isabs(shot):
                turn.observation["screenshot"] = os.path.relpath(shot, folder)


PROGRESS_FILE = "eval-progress.json"
"""In an ``--out-dir`` while its evaluation is unfinished: the settings it runs with."""


def _trajectory_name(max_turns: int, partial: bool = False) -> str:
    """A budget's trajectory file in an ``--out-dir`` (``partial``: while it is unfinished)."""
    return f"trajectories-t{max_turns}{'.partial' if partial else ''}.jsonl"


def read_partial(path: Path, samples: int) -> dict[int, list[Trajectory]]:
    """The finished tasks of an interrupted evaluation's partial trajectory file: task
    position (the trajectories' ``group_id``) -> its ``samples`` episodes in member order.
    A line cut short by the interruption is skipped, a member written twice (a task run
    again after an earlier interruption) counts once (its last line), and a task missing a
    member runs again."""
    by: dict[int, dict[int, Trajectory]] = defaultdict(dict)
    if not path.exists():
        return {}
    # read as every command reads JSONL; a line cut short (or otherwise bad) is left out
    for _, tr in read_trajectory_records(path, skipped=[]):
        try:
            by[int(tr.group_id)][int(tr.info.get("member", 0))] = tr
        except (ValueError, TypeError):  # a group id or member that is not a number
            continue
    return {
        i: [members[k] for k in range(samples)]
        for i, members in by.items()
        if all(k in members for k in range(samples))
    }


def _write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON through a temporary file, so a kill leaves the old file or the new."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1))
    tmp.replace(path)


def _start_or_resume(out: Path, settings: dict[str, Any], resume: bool) -> None:
    """Refuse to run over an unfinished evaluation in ``out`` unless resuming, and check
    that the one to resume ran with the same ``settings``. (A fresh evaluation writes its
    progress file with its first finished task: one that fails before any leaves nothing
    to resume.)"""
    prog = out / PROGRESS_FILE
    if not prog.exists():
        if resume:
            raise ValueError(f"--resume: {out} holds no unfinished evaluation (no {PROGRESS_FILE})")
        for m in settings["max_turns"]:
            (out / _trajectory_name(m, partial=True)).unlink(missing_ok=True)
        return
    if not resume:
        raise ValueError(
            f"{out} holds an unfinished evaluation ({PROGRESS_FILE}): add --resume to continue "
            "it, or choose another --out-dir"
        )
    try:
        old = json.loads(prog.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"--resume: {prog} is unreadable ({e}); remove it to start anew") from None
    old.pop("finished_budgets", None)
    differ = sorted(k for k in settings.keys() | old.keys() if settings.get(k) != old.get(k))
    if differ == ["graded_at"]:
        raise ValueError(
            f"--resume: {out} holds a turn-budget sweep of an older version, which ran each "
            "budget on its own; finish it with that version, or choose another --out-dir"
        )
    if differ:
        raise ValueError(
            f"--resume: {out} holds an evaluation with other settings ({', '.join(differ)} "
            "differ); run it with the same ones, or choose another --out-dir"
        )


def _write_progress(out: Path, settings: dict[str, Any]) -> None:
    """Write the progress file (once: it may already list finished budgets)."""
    prog = out / PROGRESS_FILE
    if prog.exists():
        return
    out.mkdir(parents=True, exist_ok=True)
    _write_json(prog, settings)


def _rewrite(path: Path, kept: dict[int, list[Trajectory]]) -> None:
    """Leave only the kept episodes in a partial file (drops a cut line and duplicates)."""
    tmp = path.with_name(path.name + ".tmp")
    write_trajectories([tr for i in sorted(kept) for tr in kept[i]], tmp)
    tmp.replace(path)


def _finished_budget(out: Path, m: int, n_tasks: int, samples: int) -> dict[int, list[Trajectory]]:
    """A budget the interrupted sweep had finished (listed in its progress file), read back
    from its trajectory file."""
    done = json.loads((out / PROGRESS_FILE).read_text()).get("finished_budgets", [])
    if m not in done:
        return {}
    try:
        trs = read_trajectories(out / _trajectory_name(m))
    except (FileNotFoundError, TrajectoryFileError):
        return {}
    if len(trs) != n_tasks * samples:
        return {}
    return {i: trs[i * samples : (i + 1) * samples] for i in range(n_tasks)}


def _mark_finished(out: Path, m: int, settings: dict[str, Any]) -> None:
    _write_progress(out, settings)
    prog = out / PROGRESS_FILE
    state = json.loads(prog.read_text())
    state["finished_budgets"] = sorted({*state.get("finished_budgets", []), m})
    _write_json(prog, state)


def _budget_result(
    m: int,
    trajs: list[Trajectory],
    tasks: list[Task],
    samples: int,
    wall_s: float,
    source: TaskSource,
    out: Path | None,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """One budget's entry of ``eval.json``; with ``out``, its trajectory file written."""
    report = EvalReport(
        trajs, [t for t in tasks for _ in range(samples)], wall_s=wall_s, samples=samples
    )
    report.env_errors = sum(tr.status == "env_error" for tr in trajs)
    res = {"max_turns": m, **report.result()}
    res.update(_source_hook(source, "headline_result", report.tasks, report.trajectories) or {})
    if out is not None:
        name = _trajectory_name(m)
        _relative_screenshots(report.trajectories, out)
        write_trajectories(report.trajectories, out / name)
        res["trajectories"] = name
        _mark_finished(out, m, settings)
    return res


def _sampling(
    cfg: Any,
    tasks: list[Task],
    samples: int,
    max_turns: list[int] | None,
    temperature: float | None,
) -> tuple[list[int], SamplingParams]:
    """Check an evaluation's sizes; its turn budgets (ascending) and sampling parameters
    (greedy for one sample a task unless ``temperature`` says otherwise)."""
    if not tasks:
        raise ValueError("no tasks to evaluate")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    budgets = sorted(set(max_turns or [cfg.env.max_turns]))
    if budgets[0] < 1:
        raise ValueError(f"turn budgets must be >= 1, got {budgets}")
    temp = temperature if temperature is not None else (0.0 if samples == 1 else None)
    if temp is None:
        temp = cfg.rollout.temperature
    if samples > 1 and temp <= 0:
        raise ValueError("samples > 1 (pass@k) needs a temperature > 0: greedy repeats itself")
    params = SamplingParams(
        temperature=temp,
        top_p=cfg.rollout.top_p if temp > 0 else 1.0,
        max_new_tokens=cfg.rollout.max_new_tokens,
        seed=cfg.seed,
    )
    return budgets, params


def _budget_runs(source: TaskSource, budgets: list[int]) -> list[tuple[int, list[int]]]:
    """The rollouts of a sweep: (turns, the smaller budgets cut from its episodes). One at
    the largest budget when the source's graders only read the site; else one per budget."""
    if source.grades_mid_episode:
        return [(budgets[-1], budgets[:-1])]
    return [(m, []) for m in reversed(budgets)]


@dataclass
class _Sweep:
    """What every rollout of one evaluation shares: its inputs and its ``--out-dir``."""

    cfg: Any
    tasks: list[Task]
    params: SamplingParams
    samples: int
    concurrency: int
    progress: bool
    out: Path | None
    settings: dict[str, Any]
    resume: bool


def _resume_settings(
    sweep: _Sweep,
    model: str | None,
    engine: str,
    openai: tuple[str | None, str | None],
    budgets: list[int],
    runs: list[tuple[int, list[int]]],
) -> dict[str, Any]:
    """What an ``--out-dir``'s progress file records, as JSON holds it (lists, not tuples),
    to compare with the file's on ``--resume``."""
    cfg, params = sweep.cfg, sweep.params
    sections = to_dict(cfg)
    settings = {
        "model": model or cfg.model.name,
        "engine": engine,
        "openai_url": openai[0],
        "openai_model": openai[1],
        "samples": sweep.samples,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_new_tokens": params.max_new_tokens,
        "seed": cfg.seed,
        "max_turns": budgets,
        "tasks": [str(t.task_id) for t in sweep.tasks],
        **{k: sections[k] for k in ("agent", "observation", "env")},
    }
    settings["env"].pop("grade_at_turns", None)  # the sweep sets it: "graded_at" says
    if len(runs) == 1 and len(budgets) > 1:
        settings["graded_at"] = budgets[:-1]
    return json.loads(json.dumps(settings))


def _kept_tasks(sweep: _Sweep, m: int, partial: Path | None) -> dict[int, list[Trajectory]]:
    """On ``--resume``, the tasks of budget ``m`` already done: all of them when the budget
    had finished, else those its partial file holds whole (the file rewritten to them)."""
    if not sweep.resume or partial is None or sweep.out is None:
        return {}
    kept = _finished_budget(sweep.out, m, len(sweep.tasks), sweep.samples)
    if not kept:
        kept = read_partial(partial, sweep.samples)
        kept = {i: trs for i, trs in kept.items() if i < len(sweep.tasks)}
        if partial.exists():
            _rewrite(partial, kept)
    return kept


async def _run_budget(
    sweep: _Sweep, setup: tuple[Any, ...], m: int, shorter: list[int]
) -> list[dict[str, Any]]:
    """One rollout at ``m`` turns, resumed where its partial file left it, each task's
    episodes appended to that file as they end; the results of ``m`` and of each budget in
    ``shorter`` (its episodes cut there), their trajectory files written."""
    out, tasks, samples = sweep.out, sweep.tasks, sweep.samples
    partial = None if out is None else out / _trajectory_name(m, partial=True)
    kept = _kept_tasks(sweep, m, partial)

    def save(group: Group, path: Path | None = partial) -> None:
        if path is not None:
            _write_progress(path.parent, sweep.settings)
            _relative_screenshots(group.trajectories, path.parent)
            write_trajectories(group.trajectories, path, append=True)

    todo = [i for i in range(len(tasks)) if i not in kept]
    if kept and sweep.progress:
        print(
            f"max_turns {m}: resuming, {len(kept)} of {len(tasks)} tasks already done", flush=True
        )
    part = EvalReport(samples=samples)
    if todo:
        part = await _evaluate_at(
            sweep.cfg,
            *setup,
            [tasks[i] for i in todo],
            m,
            sweep.params,
            samples,
            sweep.concurrency,
            sweep.progress,
            on_group=save,
            group_ids=todo,
            grade_at=shorter,
        )
    fresh = iter(part.trajectories)
    longest: list[Trajectory] = []
    for i in range(len(tasks)):
        longest.extend(kept[i] if i in kept else [next(fresh) for _ in range(samples)])
    results = []
    for b in [m, *reversed(shorter)]:
        trajs = longest if b == m else [cut_to_budget(tr, b) for tr in longest]
        res = _budget_result(b, trajs, tasks, samples, part.wall_s, setup[3], out, sweep.settings)
        if b != m:
            res["cut_from"] = m
        if kept:
            res["resumed_tasks"] = len(kept)
        results.append(res)
        if sweep.progress:
            print(_budget_line(res, b, m, samples), flush=True)
    if partial is not None:
        partial.unlink(missing_ok=True)
    return results


def _budget_line(res: dict[str, Any], b: int, m: int, samples: int) -> str:
    """The line printed when budget ``b`` (cut from the ``m``-turn episodes) is scored."""
    return (
        f"max_turns {b}: success {res['success']:.3f} "
        f"[{res['ci'][0]:.3f}, {res['ci'][1]:.3f}] on {res['episodes']} episodes"
        + (f", pass@{samples} {res['pass_at_k']:.3f}" if samples > 1 else "")
        + (f" (cut from the {m}-turn episodes)" if b != m else "")
        + (
            f"; {res['successes_at_turn_limit']} of the successes ran to the "
            "turn limit without exit"
            if res["successes_at_turn_limit"]
            else ""
        )
        + (
            f"; {res['successes_answer_not_shown']} answered with a text no "
            "page had shown (a guess or a derived value: read them)"
            if res["successes_answer_not_shown"]
            else ""
        )
        + (
            f"; {len(res['unscored_tasks'])} task(s) with no scored episode"
            if res["unscored_tasks"]
            else ""
        )
    )


def _write_summary(
    sweep: _Sweep, summary: dict[str, Any], results: list[dict[str, Any]], source_name: Any
) -> dict[str, Any]:
    """The summary with its results (ascending budgets) and, for the embedded suite, the
    constant-answer baseline; written as ``eval.json`` with ``--out-dir`` (the progress file
    removed: the evaluation is finished)."""
    summary["results"] = sorted(results, key=lambda r: r["max_turns"])
    if source_name == "embedded":
        summary["guess_baseline"] = baseline(sweep.tasks).to_dict()
    if sweep.out is not None:
        sweep.out.mkdir(parents=True, exist_ok=True)
        _write_json(sweep.out / "eval.json", summary)
        (sweep.out / PROGRESS_FILE).unlink(missing_ok=True)
    return summary


def _prefill_summary(counts: tuple[int, int] | None) -> dict[str, Any]:
    """``prefill``: the prompt tokens this invocation's engine ran and those its turns
    requested (shared prefixes, duplicate prompts and the prefix cache serve the rest); none
    for an engine that does not count them."""
    if counts is None or not counts[1]:
        return {}
    computed, requested = counts
    return {
        "prefill": {
            "computed": computed,
            "requested": requested,
            "computed_frac": computed / requested,
        }
    }


async def run_evaluation(
    cfg: Any,
    tasks: list[Task],
    *,
    engine: str = "hf",
    model_path: str | None = None,
    openai_url: str | None = None,
    openai_model: str | None = None,
    openai_token_ids: bool = False,
    samples: int = 1,
    max_turns: list[int] | None = None,
    temperature: float | None = None,
    out_dir: str | Path | None = None,
    concurrency: int | None = None,
    progress: bool = True,
    meta: dict[str, Any] | None = None,
    source: TaskSource | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Evaluate an engine on ``tasks`` at one or several turn budgets (``webagent-r1 eval``).

    Greedy with one sample per task by default; with ``samples`` = k > 1 it samples at
    ``temperature`` (default ``rollout.temperature``) and reports pass@k too. Several
    ``max_turns`` make a test-time-scaling sweep from one rollout: the episodes run at the
    largest budget, the env grades each one still running at every smaller budget's last turn
    (the prompt never states the budget, so up to there it is the smaller budget's episode),
    and each smaller budget's episodes are the longest's cut there (``cut_to_budget``).

    ``engine``: ``hf`` (``model_path``, a folder or checkpoint ``model/``, or the config's
    model), ``vllm`` (the same through vLLM, ``cfg.vllm``), ``expert`` (the scripted experts;
    ``model_path`` is the tokenizer) or ``openai`` (``openai_url``, ``openai_model``;
    ``openai_token_ids``: token-id prompts, vLLM and SGLang). ``max_turns`` defaults to
    ``env.max_turns``, ``concurrency`` to ``rollout.max_concurrent_episodes``, ``source`` (the
    tasks' sites and evaluator) to ``cfg.tasks.source``; ``meta`` adds fields to eval.json.
    ``out_dir`` gets ``eval.json`` and ``trajectories-t<budget>.jsonl``; while it runs, also
    ``eval-progress.json`` (its settings) and each budget's finished tasks in
    ``trajectories-t<budget>.partial.jsonl``, from which ``resume`` continues it (same
    settings; the other tasks run with the seeds they would have had).

    Returns the ``eval.json`` content: ``results``, one entry per budget (ascending) with
    success, ci, pass_at_k, by_site, by_kind, by_difficulty, failures, and ``cut_from`` on the
    smaller budgets; for the embedded suite ``guess_baseline`` (``embedded.guess``). Raises
    ValueError for bad samples, budgets or temperature, an unknown engine, no tasks, and an
    unfinished evaluation in ``out_dir`` without ``resume`` or with other settings.
    """
    budgets, params = _sampling(cfg, tasks, samples, max_turns, temperature)
    source = source or task_source(cfg)  # not started yet: _setup starts it
    runs = _budget_runs(source, budgets)
    out = Path(out_dir) if out_dir is not None else None
    if resume and out is None:
        raise ValueError("--resume needs the --out-dir of the evaluation to continue")
    n_conc = concurrency or cfg.rollout.max_concurrent_episodes
    sweep = _Sweep(cfg, tasks, params, samples, n_conc, progress, out, {}, resume)
    if out is not None:
        openai = (openai_url, openai_model)
        sweep.settings = _resume_settings(sweep, model_path, engine, openai, budgets, runs)
        _start_or_resume(out, sweep.settings, resume)
    results: list[dict[str, Any]] = []
    t0 = time.time()
    openai_args = (openai_url, openai_model, openai_token_ids)
    async with _setup(cfg, engine, model_path, *openai_args, source) as setup:
        source_name = getattr(setup[3], "name", None)
        _source_hook(setup[3], "check_run", tasks, samples, n_conc)
        for m, shorter in runs:
            results += await _run_budget(sweep, setup, m, shorter)
        prefill = prefill_counts(setup[0])
    summary = {
        "model": model_path or (openai_model if engine == "openai" else None) or cfg.model.name,
        "engine": engine,
        "samples": samples,
        "temperature": params.temperature,
        "seed": cfg.seed,
        "thinking": cfg.agent.thinking,
        "tasks": len(tasks),
        "wall_s": time.time() - t0,
        **_prefill_summary(prefill),
        **_numerics(cfg, engine),
        **(meta or {}),
    }
    return _write_summary(sweep, summary, results, source_name)


def _numerics(cfg: Any, engine: str) -> dict[str, str]:
    """The HF engine's precision (``policy.precision.run_numerics``) and machine, so that
    evaluations sampled in bf16 on one machine and fp32 on another are told apart; {} for the
    other engines."""
    if engine != "hf":
        return {}
    from webagent_r1.policy.precision import numerics_record  # heavy: imports torch

    return numerics_record(cfg.model)


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
    params = SamplingParams(temperature=0.0, max_new_tokens=cfg.rollout.max_new_tokens)
    async with _setup(cfg, "hf", model_path) as (eng, tok, browser, source, count):
        return await _evaluate_at(
            cfg,
            eng,
            tok,
            browser,
            source,
            count,
            tasks,
            cfg.env.max_turns,
            params,
            1,
            concurrency or cfg.rollout.max_concurrent_episodes,
            progress,
        )


@dataclass
class EvalRequest:
    """An evaluation as ``webagent-r1 eval`` asks for it: which tasks (a split of the task
    source, a site, a stratified subset), which engine, how many episodes at which turn
    budgets, and where the results go (``--out-dir``; ``--out``: a copy of the largest
    budget's trajectories)."""

    engine: str = "hf"
    model_path: str | None = None
    split: str | None = None
    final: bool = False
    site: str | None = None
    subset: int | None = None
    samples: int = 1
    max_turns: list[int] | None = None
    temperature: float | None = None
    out_dir: str | None = None
    resume: bool = False
    out: str | None = None
    screenshots: bool = False
    openai_url: str | None = None
    openai_model: str | None = None
    openai_token_ids: bool = False


def request_split(source: TaskSource, split: str | None) -> str:
    """The split asked for, else ``val`` where the source has one, else ``test``.

    Raises:
        ValueError: the source has no such split.
    """
    split = split or ("val" if "val" in source.splits else "test")
    if split not in source.splits:
        raise ValueError(
            f"--split {split}: the {source.name} tasks have splits {', '.join(source.splits)}"
        )
    return split


def request_tasks(source: TaskSource, request: EvalRequest, split: str) -> list[Task]:
    """The tasks of ``split`` on the requested site (all of them: no subset yet).

    Raises:
        ValueError: the scripted experts asked for on tasks they cannot solve.
    """
    if request.engine == "expert" and source.name != "embedded":
        raise ValueError(
            f"the scripted experts solve embedded tasks only, not {source.name}; "
            "use --engine hf or --engine openai"
        )
    return select(source.tasks(split), site=request.site)


def request_out_dir(cfg: Any, request: EvalRequest) -> str | None:
    """The output folder: ``--out-dir``, else next to ``--out`` (``<out>-eval``); with
    screenshots, ``cfg.env.screenshot_dir`` set to its ``screenshots/`` folder.

    Raises:
        RequestError: screenshots without an output folder.
    """
    out_dir = request.out_dir
    if request.out and not out_dir:
        out_dir = str(Path(request.out).with_suffix("")) + "-eval"
    if request.screenshots:
        if not out_dir:
            raise RequestError("--screenshots needs --out-dir (they are saved there)")
        cfg.env.screenshot_dir = str(Path(out_dir) / "screenshots")
    return out_dir


async def run_request(
    cfg: Any,
    tasks: list[Task],
    request: EvalRequest,
    out_dir: str | None,
    meta: dict[str, Any],
    source: TaskSource,
) -> dict[str, Any]:
    """``run_evaluation`` of ``tasks`` as ``request`` asks."""
    return await run_evaluation(
        cfg,
        tasks,
        engine=request.engine,
        model_path=request.model_path,
        openai_url=request.openai_url,
        openai_model=request.openai_model,
        openai_token_ids=request.openai_token_ids,
        samples=request.samples,
        max_turns=request.max_turns,
        temperature=request.temperature,
        out_dir=out_dir,
        meta=meta,
        source=source,
        resume=request.resume,
    )
