"""Run what a plan still misses: train each (arm, seed), evaluate its final checkpoint, report.

Every run has its own folder, ``<out_dir>/<arm>/seed-<seed>/`` (the recipe's ``run_dir``), and
each step leaves a mark there, so the command can be killed at any point and run again, in
another process or another day:

- **training**: ``experiment-run.json`` is written when the recipe returns (the final model
  and the run's overrides). With it the run is skipped; a folder with a recipe's files and no
  mark is resumed (``train --resume``: finished stages skipped, the stage in progress
  continued from its newest checkpoint); an empty one is started.
- **evaluation**: ``eval-<split>/eval.json`` marks it done (its settings must be the plan's);
  ``eval-<split>/eval-progress.json`` marks it unfinished and it is resumed (``eval
  --resume``: finished tasks kept, the others run with the seeds they would have had).
- a **test** evaluation (``split: test`` with ``final: true``) is appended to the run's
  ``test-evaluations.jsonl`` (``report/ledger.py``) when it finishes;
- with ``archive`` in the plan, a finished run's small files are kept there and a run folder
  without a mark is restored from them first (``experiment/archive.py``).
- **numerics**: before a run is trained or evaluated, the precision it would compute in on
  this machine (``model.autocast_bf16`` resolved: 'cpu, bf16 autocast' or 'cpu, float32') is
  written to ``experiment-numerics.json`` in its folder and kept in its mark (and the HF
  engine's ``eval.json``) with the machine's name. A run in other numerics than the plan's
  runs so far is refused: ``auto`` picks fp32 on a CPU without fast bf16 and bf16 autocast on
  one with it, and arms trained or sampled in different precisions differ in more than their
  settings.

Then the results page is (re)written from every run's evaluation (``experiment/page.py``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webagent_r1.config import Config, ConfigError, load_config, to_dict
from webagent_r1.evaluation.run import PROGRESS_FILE, run_evaluation
from webagent_r1.experiment.archive import archive_run, restore_run
from webagent_r1.experiment.page import RunRecord, write_results
from webagent_r1.experiment.plan import EvalSettings, Plan, PlanError
from webagent_r1.report.ledger import append_test_evaluation
from webagent_r1.sources import task_source
from webagent_r1.tasks.subset import eval_subset
from webagent_r1.train.runconfig import CONFIG_FILE, describe, differences
from webagent_r1.types import Task

__all__ = [
    "DONE_FILE",
    "NUMERICS_FILE",
    "NumericsGuard",
    "Numerics",
    "Evaluator",
    "ExperimentOutcome",
    "Trainer",
    "final_model",
    "recipe_evaluator",
    "recipe_numerics",
    "recipe_trainer",
    "run_experiment",
]

DONE_FILE = "experiment-run.json"
"""Written into a run folder when its training has finished."""
NUMERICS_FILE = "experiment-numerics.json"
"""Written into a run or evaluation folder before its work starts: the numerics it runs in."""

Trainer = Callable[[Config, bool], str]
"""``(the run's config, resume) -> the final model folder`` (``recipe_trainer``)."""
Evaluator = Callable[[Config, list[Task], str, Path, bool], dict[str, Any]]
"""``(the run's config, tasks, model folder, eval folder, resume) -> eval.json's content``
(``recipe_evaluator``); it writes ``eval.json`` and the trajectories into the eval folder."""
Numerics = Callable[[Config], dict[str, str]]
"""``(a run's config) -> {"numerics": ..., "machine": ...}`` on this machine
(``recipe_numerics``)."""


@dataclass
class ExperimentOutcome:
    """What ``run_experiment`` did."""

    results: Path
    """The results page (markdown; the JSON beside it)."""
    trained: int
    """Runs trained or resumed by this call (0 when every run had finished)."""
    evaluated: int
    """Evaluations run or resumed by this call."""
    runs: list[RunRecord]


def final_model(summary: dict[str, Any], cfg: Config) -> str:
    """The model a recipe ends with: the M-GRPO checkpoint, else BC's, else its start."""
    stages = summary.get("stages", {})
    for stage in ("rl", "bc"):
        ckpt = (stages.get(stage) or {}).get("checkpoint")
        if ckpt:
            return str(Path(ckpt) / "model")
    return cfg.init_from or cfg.model.name


def recipe_trainer(progress: bool = True) -> Trainer:
    """The trainer of ``webagent-r1 train``: ``run_recipe`` (resumable)."""

    def train(cfg: Config, resume: bool) -> str:
        # heavy: the recipe imports torch and transformers
        from webagent_r1.train.recipe import run_recipe

        return final_model(run_recipe(cfg, resume=resume, progress=progress), cfg)

    return train


def recipe_numerics(cfg: Config) -> dict[str, str]:
    """The numerics the recipe's policy computes in here (``policy.precision.run_numerics``)."""
    from webagent_r1.policy.precision import numerics_record  # heavy: imports torch

    return numerics_record(cfg.model)


def recipe_evaluator(settings: EvalSettings, split: str, progress: bool = True) -> Evaluator:
    """The evaluation of ``webagent-r1 eval --out-dir`` with the plan's settings."""

    def evaluate(cfg: Config, tasks: list[Task], model: str, out: Path, resume: bool) -> dict:
        return asyncio.run(
            run_evaluation(
                cfg,
                tasks,
                engine=settings.engine,
                model_path=model,
                samples=settings.samples,
                max_turns=[settings.max_turns] if settings.max_turns else None,
                temperature=settings.temperature,
                out_dir=out,
                progress=progress,
                meta={"split": split, "site": None},
                resume=resume,
            )
        )

    return evaluate


def plan_tasks(plan: Plan) -> list[Task]:
    """The tasks every run is evaluated on: the split of the recipe (with the plan's common
    overrides, not an arm's), the fixed subset when the plan asks for one."""
    cfg = load_config(plan.recipe, plan.overrides)
    source = task_source(cfg)
    if plan.split not in source.splits:
        raise PlanError(
            f"{plan.path}: split: the {source.name} tasks have no {plan.split} split (they "
            f"have {', '.join(source.splits)}); use one of those or another task source"
        )
    tasks = source.tasks(plan.split)
    if not tasks:
        raise PlanError(f"{plan.path}: split: {plan.split} has no task for this recipe")
    return eval_subset(tasks, plan.eval.subset or 0, seed=0)


def config_sha(cfg: Config) -> str:
    """A hash of every resolved setting of a run: an edit of the recipe file changes it."""
    text = json.dumps(to_dict(cfg), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def rl_steps_done(run_dir: Path) -> int | None:
    """The M-GRPO updates a finished recipe made (``summary.json``), None without that stage:
    a time budget may stop a run before ``rl.steps``."""
    try:
        rl = json.loads((run_dir / "summary.json").read_text())["stages"].get("rl") or {}
    except (OSError, ValueError, KeyError, AttributeError):
        return None
    steps = rl.get("steps")
    return int(steps) if isinstance(steps, int) else None


def _read_record(path: Path) -> dict[str, str] | None:
    """The numerics a mark, ``eval.json`` or ``experiment-numerics.json`` holds (None when it
    holds none: a file from before numerics were recorded, or none there)."""
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(d, dict) or not isinstance(d.get("numerics"), str):
        return None
    return {"numerics": d["numerics"], "machine": str(d.get("machine") or "unknown machine")}


class NumericsGuard:
    """Keeps every run of a plan in one precision: a run is trained or evaluated only where it
    computes in the numerics every earlier run and evaluation of the plan recorded, and the
    start checkpoint's run (an experiment's run folder above ``init_from``) when it has one.
    An arm that sets the precision itself (``Plan.sets_precision``) compares precisions: it is
    checked against its own runs only, and the other arms not against it."""

    START = ""
    """The arm name of the start checkpoint's record."""

    def __init__(self, plan: Plan, numerics: Numerics) -> None:
        self.plan, self.numerics = plan, numerics
        self.records: list[tuple[str, Path, dict[str, str]]] = []
        self.pinned = {arm for arm in plan.arms if plan.sets_precision(arm)}
        for arm in plan.arms:
            for seed in plan.seeds:
                run_dir = plan.run_dir(arm, seed)
                files = [run_dir / DONE_FILE, run_dir / NUMERICS_FILE]
                for d in sorted(run_dir.glob("eval-*")):
                    files += [d / "eval.json", d / NUMERICS_FILE]
                self.records += [(arm, f, r) for f in files if (r := _read_record(f)) is not None]
        if plan.init_from:  # the start checkpoint, when an experiment's run trained it
            for d in Path(plan.init_from).resolve().parents:
                if (r := _read_record(d / DONE_FILE)) is not None:
                    self.records.append((self.START, d / DONE_FILE, r))
                    break

    def _binding(self, arm: str) -> list[tuple[Path, dict[str, str]]]:
        """The records a run of ``arm`` must agree with."""
        if arm in self.pinned:
            return [(p, r) for a, p, r in self.records if a == arm]
        return [(p, r) for a, p, r in self.records if a not in self.pinned]

    def mixed(self) -> list[str]:
        """The distinct numerics of the records that bind the unpinned arms (more than one:
        the plan's runs already differ, and none of those arms can go on)."""
        return sorted({r["numerics"] for a, _, r in self.records if a not in self.pinned})

    def claim(self, folder: Path, cfg: Config, arm: str, what: str) -> dict[str, str]:
        """The numerics of ``cfg`` here, once checked against the records that bind ``arm``
        and written into ``folder`` (``release`` takes it back if the work never starts);
        raises PlanError naming a record that differs."""
        here = self.numerics(cfg)
        binding = self._binding(arm)
        for path, rec in binding:
            if rec["numerics"] == here["numerics"]:
                continue
            if len({r["numerics"] for _, r in binding}) > 1:
                raise PlanError(
                    f"{self.plan.path}: this plan's runs already computed in "
                    f"{' and '.join(sorted({r['numerics'] for _, r in binding}))} (e.g. {path}): "
                    f"no machine can go on with {what}; remove the runs in the wrong numerics "
                    "(their folders and archive entries) or give the plan a new out_dir"
                )
            raise PlanError(
                f"{self.plan.path}: {what} would run in {here['numerics']} on this machine "
                f"({here['machine']}), but {path} ran in {rec['numerics']} "
                f"({rec['machine']}): arms in other numerics differ in more than their "
                "settings. Run the plan on a machine where model.autocast_bf16 resolves "
                "alike, or give it a new out_dir (and archive) to start over here"
            )
        folder.mkdir(parents=True, exist_ok=True)
        f = folder / NUMERICS_FILE
        if _read_record(f) is None:  # absent, or cut short by a kill: written whole
            tmp = f.with_suffix(".tmp")
            tmp.write_text(json.dumps(here))
            tmp.replace(f)
        self.records.append((arm, f, here))
        return here

    def release(self, folder: Path) -> None:
        """Forget the claim on ``folder``: its work failed before leaving anything behind."""
        f = folder / NUMERICS_FILE
        self.records = [x for x in self.records if x[1] != f]
        f.unlink(missing_ok=True)


def _train(
    plan: Plan,
    arm: str,
    seed: int,
    trainer: Trainer,
    guard: NumericsGuard,
    log: Callable[[str], None],
) -> tuple[str, str]:
    """Train one run unless done; returns ``(model, what happened)``."""
    run_dir = plan.run_dir(arm, seed)
    overrides = plan.run_overrides(arm, seed)
    cfg = load_config(plan.recipe, overrides)
    done = run_dir / DONE_FILE
    if done.is_file():
        mark = json.loads(done.read_text())
        if mark.get("overrides") != overrides or mark.get("recipe") != plan.recipe:
            raise PlanError(
                f"{plan.path}: arms.{arm}: {run_dir} was trained with other settings "
                f"({mark.get('recipe')} {' '.join(mark.get('overrides', []))}); give the arm "
                "a new name or the plan a new out_dir"
            )
        if mark.get("config_sha", config_sha(cfg)) != config_sha(cfg):
            _check_saved_settings(plan, arm, run_dir, cfg, log)
        return str(mark["model"]), "done before"
    resume = (run_dir / CONFIG_FILE).is_file() or (run_dir / "summary.json").is_file()
    here = guard.claim(run_dir, cfg, arm, f"arms.{arm} seed {seed}'s training")
    try:
        model = trainer(cfg, resume)
    except BaseException:
        if not resume and not (run_dir / CONFIG_FILE).is_file():  # refused before it began
            guard.release(run_dir)
        raise
    run_dir.mkdir(parents=True, exist_ok=True)
    steps = rl_steps_done(run_dir)
    if steps is not None and steps < cfg.rl.steps:
        log(
            f"note: {arm} seed {seed} made {steps} of rl.steps={cfg.rl.steps} M-GRPO updates "
            "(a time budget stopped it); its arm is not the plan's configuration"
        )
    mark = {"model": model, "recipe": plan.recipe, "overrides": overrides}
    mark |= {"config_sha": config_sha(cfg), "rl_steps": steps, "rl_steps_planned": cfg.rl.steps}
    mark |= here
    tmp = done.with_suffix(".tmp")
    tmp.write_text(json.dumps(mark))
    tmp.replace(done)
    return model, "resumed" if resume else "trained"


def _check_saved_settings(
    plan: Plan, arm: str, run_dir: Path, cfg: Config, log: Callable[[str], None]
) -> None:
    """A finished run whose settings hash is not this plan's: accepted when the settings it
    saved (``config.yaml``, loaded with today's defaults for settings added since) equal the
    plan's; refused naming the settings that differ otherwise."""
    saved = run_dir / CONFIG_FILE
    diff = None
    if saved.is_file():
        try:
            diff = differences(load_config(str(saved)), cfg)
        except ConfigError as e:  # a setting removed since, or a file that no longer loads
            raise PlanError(
                f"{plan.path}: arms.{arm}: {run_dir} was trained with settings this code no "
                f"longer reads ({e}); give the plan a new out_dir"
            ) from None
    if diff == []:
        log(
            f"note: arms.{arm}: {run_dir}'s settings hash is from another version of the code; "
            f"its {CONFIG_FILE} matches this plan's settings (settings added since take "
            "their defaults)"
        )
        return
    what = f" ({describe(diff)})" if diff else ""
    raise PlanError(
        f"{plan.path}: arms.{arm}: {run_dir} was trained before {plan.recipe} (or a "
        f"default) changed: its settings differ from this plan's{what}; give the plan a new "
        "out_dir, or restore the recipe"
    )


def _check_done_eval(plan: Plan, out: Path, model: str) -> None:
    """An evaluation already there must be the plan's: same model and settings."""
    d = json.loads((out / "eval.json").read_text())
    want = {"model": model, "samples": plan.eval.samples, "engine": plan.eval.engine}
    if plan.eval.temperature is not None:
        want["temperature"] = plan.eval.temperature
    got = {k: d.get(k) for k in want}
    turns = [r.get("max_turns") for r in d.get("results", [])]
    if got != want or (plan.eval.max_turns and plan.eval.max_turns not in turns):
        raise PlanError(
            f"{plan.path}: eval: {out} holds an evaluation with other settings ({got}, "
            f"max_turns {turns}); move that folder away, or restore the plan's eval settings"
        )


def _evaluate(
    plan: Plan,
    arm: str,
    seed: int,
    model: str,
    tasks: list[Task],
    evaluator: Evaluator,
    guard: NumericsGuard,
) -> tuple[Path, str]:
    """Evaluate one run's final model unless done; returns ``(eval folder, what happened)``."""
    run_dir = plan.run_dir(arm, seed)
    out = run_dir / f"eval-{plan.split}"
    if (out / "eval.json").is_file():
        _check_done_eval(plan, out, model)
        return out, "done before"
    resume = (out / PROGRESS_FILE).is_file()
    cfg = load_config(plan.recipe, plan.run_overrides(arm, seed))
    hf = plan.eval.engine == "hf"  # the other engines do not sample in this process's numerics
    if hf:
        guard.claim(out, cfg, arm, f"arms.{arm} seed {seed}'s evaluation")
    try:
        summary = evaluator(cfg, tasks, model, out, resume)
    except BaseException as e:
        if hf and not (out / PROGRESS_FILE).is_file():  # refused before it began
            guard.release(out)
        if isinstance(e, ValueError) and not isinstance(e, PlanError):
            # run_evaluation's refusals: an unfinished folder of other settings
            raise PlanError(f"{plan.path}: eval: {out}: {e}") from None
        raise
    if plan.split == "test":
        last = (summary.get("results") or [{}])[-1]
        append_test_evaluation(
            run_dir,
            model,
            by=f"experiment {plan.path}",
            settings={
                "engine": plan.eval.engine,
                "samples": plan.eval.samples,
                "temperature": summary.get("temperature", plan.eval.temperature),
                "max_turns": last.get("max_turns", plan.eval.max_turns),
                "tasks": len(tasks),
                "task_source": cfg.tasks.source,
                "out_dir": str(out),
            },
            success=last.get("success"),
        )
    return out, "resumed" if resume else "evaluated"


def run_experiment(
    plan: Plan,
    trainer: Trainer | None = None,
    evaluator: Evaluator | None = None,
    progress: bool = True,
    log: Callable[[str], None] = lambda m: print(m, flush=True),
    numerics: Numerics | None = None,
) -> ExperimentOutcome:
    """Train and evaluate what the plan still misses, then write its results page.

    Args:
        plan: a plan from ``load_plan``.
        trainer: trains one run (default ``recipe_trainer``: ``webagent-r1 train``).
        evaluator: evaluates one run's final model (default ``recipe_evaluator``).
        progress: progress bars of training and evaluation.
        log: where the one line per stage goes.
        numerics: the precision a run computes in here (default ``recipe_numerics``).

    Raises:
        PlanError: no start checkpoint at ``init_from``, the split is not one of the task
            source's, a run folder or evaluation was made with other settings than the
            plan's, or a run still to train or evaluate would compute in other numerics
            than the plan's runs so far.
    """
    plan.check_start()
    for w in plan.warnings:
        log(f"note: {w}")
    trainer = trainer or recipe_trainer(progress)
    evaluator = evaluator or recipe_evaluator(plan.eval, plan.split, progress)
    tasks = plan_tasks(plan)
    pairs = [(arm, seed) for arm in plan.arms for seed in plan.seeds]
    heads = {p: f"[{i}/{len(pairs)}] {p[0]} seed {p[1]}" for i, p in enumerate(pairs, 1)}
    for arm, seed in pairs:  # restored first: an archived run's numerics bind the rest
        kept = plan.archive_dir(arm, seed)
        if kept is not None and restore_run(
            plan.run_dir(arm, seed), kept, plan.split, DONE_FILE, plan.eval.max_turns
        ):
            log(f"{heads[arm, seed]}: restored from {kept} (trained and evaluated before)")
    guard = NumericsGuard(plan, numerics or recipe_numerics)
    if len(guard.mixed()) > 1:
        log(f"note: this plan's runs so far computed in {' and '.join(guard.mixed())}")
    records, trained, evaluated = [], 0, 0
    for arm, seed in pairs:
        head = heads[arm, seed]
        run_dir, kept = plan.run_dir(arm, seed), plan.archive_dir(arm, seed)
        log(f"{head}: training in {run_dir}")
        model, how = _train(plan, arm, seed, trainer, guard, log)
        trained += how != "done before"
        log(f"{head}: training {how}; final model {model}")
        log(f"{head}: evaluating on {len(tasks)} {plan.split} tasks x {plan.eval.samples}")
        out, how_e = _evaluate(plan, arm, seed, model, tasks, evaluator, guard)
        evaluated += how_e != "done before"
        log(f"{head}: evaluation {how_e}: {out / 'eval.json'}")
        if kept is not None:
            archive_run(run_dir, out, kept, plan.split, DONE_FILE, plan.eval.max_turns)
        records.append(RunRecord(arm, seed, run_dir, model, out))
    log(f"statistics: {len(plan.comparisons)} comparison(s), rliable reps {plan.reps}")
    results = write_results(plan, records)
    return ExperimentOutcome(results, trained, evaluated, records)
