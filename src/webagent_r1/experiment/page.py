"""An experiment's results page: per-arm success, every comparison with its intervals,
Holm-adjusted p-values, and every checkpoint ever evaluated on test.

For each comparison (arm against its control, on the tasks every run of the two arms scored):

- the difference and the two intervals of ``compare-arms`` (``report/arms.py``): over runs and
  tasks (runs, then tasks, resampled; the recipe) and over tasks alone (these checkpoints);
- rliable's stratified bootstrap interval of the same difference and the probability of
  improvement with its interval (``report/rliable_stats.py``);
- a p-value: the two-sided sign-flip permutation test over tasks of the per-task differences
  of the arms' means over runs (``stats.sign_flip_p``: exact up to 16 non-zero differences,
  else 20,000 seeded patterns), and that p Holm-adjusted over every comparison of the plan
  (statsmodels ``multipletests(method="holm")``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from webagent_r1.config import load_config
from webagent_r1.experiment.plan import Plan
from webagent_r1.report.arms import compare_arms
from webagent_r1.report.ledger import TestEvaluation, find_ledgers, read_ledger
from webagent_r1.report.markdown import md_table
from webagent_r1.report.paired import EvalOutcomes, load_outcomes
from webagent_r1.report.rliable_stats import (
    arm_interval,
    holm,
    poi_interval,
    stratified_diff_interval,
)
from webagent_r1.stats import sign_flip_p

__all__ = ["ArmRow", "ComparisonRow", "RunRecord", "build_results", "write_results"]


@dataclass
class RunRecord:
    """One (arm, seed) of the plan, trained and evaluated."""

    arm: str
    seed: int
    run_dir: Path
    model: str
    """The final model evaluated."""
    eval_dir: Path
    """Its evaluation folder (``eval.json`` and the trajectories)."""


@dataclass
class ArmRow:
    """An arm on the tasks every run of the plan scored (fractions in [0, 1])."""

    name: str
    overrides: list[str]
    success: float
    ci: tuple[float, float]
    """rliable's stratified bootstrap over runs and tasks, 95%."""
    runs: list[dict[str, Any]]
    """Per run: seed, ok, n (episodes), success (tasks weighted equally)."""


@dataclass
class ComparisonRow:
    """One comparison of the plan (fractions in [0, 1], points = 100 x)."""

    name: str
    arm: str
    control: str
    tasks: int
    diff: float
    ci_runs_tasks: tuple[float, float]
    """``compare-arms``: runs resampled, then tasks (paired)."""
    ci_tasks: tuple[float, float]
    """``compare-arms``: tasks resampled, the runs fixed."""
    rliable_ci: tuple[float, float]
    rliable_method: str
    """What rliable resampled: ``runs and tasks`` or ``runs`` (tasks held)."""
    poi: float
    """P(a run of the arm beats a run of the control on a task), averaged over tasks."""
    poi_ci: tuple[float, float]
    p: float
    """Sign-flip permutation test over tasks, two-sided (the runs held fixed)."""
    p_holm: float = 1.0
    p_templates: float = 1.0
    """The same test over templates (each template's mean per-task difference): instances of
    one template are not independent, so this is the stricter one."""
    p_templates_holm: float = 1.0
    by_template: list[tuple[str, int, float]] = field(default_factory=list)
    """(template, tasks, arm − control) per template, on the common tasks."""
    problems: list[str] = field(default_factory=list)


def template_of(task_id: str) -> str:
    """The template of a task id (``<template>/<instance>``); a bare id is its own."""
    return str(task_id).rsplit("/", 1)[0]


def by_template(tasks: list[str], per_task: list[float]) -> list[tuple[str, int, float]]:
    """``(template, tasks, mean difference)`` per template, in template order."""
    groups: dict[str, list[float]] = {}
    for t, d in zip(tasks, per_task, strict=True):
        groups.setdefault(template_of(t), []).append(d)
    return [(k, len(v), sum(v) / len(v)) for k, v in sorted(groups.items())]


def _rates(o: EvalOutcomes, tasks: list[str]) -> list[float]:
    return [sum(o.outcomes[t]) / len(o.outcomes[t]) for t in tasks]


def _common(outs: list[EvalOutcomes]) -> list[str]:
    return sorted(set.intersection(*(set(o.outcomes) for o in outs)))


def _load(plan: Plan, runs: list[RunRecord]) -> dict[tuple[str, int], EvalOutcomes]:
    return {
        (r.arm, r.seed): load_outcomes(r.eval_dir, f"{r.arm}/seed-{r.seed}", plan.eval.max_turns)
        for r in runs
    }


def _arm_rows(plan: Plan, outs: dict[tuple[str, int], EvalOutcomes]) -> list[ArmRow]:
    tasks = _common(list(outs.values()))
    rows = []
    for arm in plan.arms:
        mine = [(s, outs[(arm, s)]) for s in plan.seeds if (arm, s) in outs]
        matrix = [_rates(o, tasks) for _, o in mine]
        success, ci = arm_interval(matrix, seed=0, reps=plan.reps)
        runs = [
            {
                "seed": s,
                "ok": sum(sum(o.outcomes[t]) for t in tasks),
                "n": sum(len(o.outcomes[t]) for t in tasks),
                "success": sum(m) / len(m),
            }
            for (s, o), m in zip(mine, matrix, strict=True)
        ]
        rows.append(ArmRow(arm, plan.arms[arm], success, ci, runs))
    return rows


def _comparison(
    plan: Plan, name: str, arm: str, control: str, runs: list[RunRecord], outs: dict
) -> ComparisonRow:
    dirs = {a: [r.eval_dir for r in runs if r.arm == a] for a in (arm, control)}
    c = compare_arms(dirs[control], dirs[arm], control, arm, plan.eval.max_turns, seed=0)
    mine = [outs[(r.arm, r.seed)] for r in runs if r.arm in (arm, control)]
    tasks = _common(mine)
    a = [_rates(outs[(r.arm, r.seed)], tasks) for r in runs if r.arm == control]
    b = [_rates(outs[(r.arm, r.seed)], tasks) for r in runs if r.arm == arm]
    _, r_ci, method = stratified_diff_interval(a, b, seed=0, reps=plan.reps)
    poi, poi_ci = poi_interval(a, b, seed=0, reps=plan.reps)
    per_task = [
        sum(col_b) / len(col_b) - sum(col_a) / len(col_a)
        for col_a, col_b in zip(zip(*a, strict=True), zip(*b, strict=True), strict=True)
    ]
    templates = by_template(tasks, per_task)
    return ComparisonRow(
        name=name,
        arm=arm,
        control=control,
        tasks=c.tasks,
        diff=c.diff,
        ci_runs_tasks=c.diff_ci,
        ci_tasks=c.diff_ci_tasks,
        rliable_ci=r_ci,
        rliable_method=method,
        poi=poi,
        poi_ci=poi_ci,
        p=sign_flip_p(per_task, seed=0),
        p_templates=sign_flip_p([d for _, _, d in templates], seed=0),
        by_template=templates,
        problems=c.problems,
    )


def _test_ledger(plan: Plan) -> list[tuple[Path, TestEvaluation]]:
    """Every test evaluation in a ledger of the plan's runs, of the recipe's own run folder,
    or near the start checkpoint."""
    folders: list[str | Path] = [plan.out_dir, load_config(plan.recipe, []).run_dir]
    if plan.init_from:
        folders.append(plan.init_from)
    return [(p, e) for p in find_ledgers(*folders) for e in read_ledger(p)]


def build_results(plan: Plan, runs: list[RunRecord]) -> dict[str, Any]:
    """The page's content: arms, comparisons (Holm-adjusted), runs, test ledger, notes."""
    outs = _load(plan, runs)
    comps = [_comparison(plan, c.name, c.arm, c.control, runs, outs) for c in plan.comparisons]
    for c, adj in zip(comps, holm([c.p for c in comps]), strict=True):
        c.p_holm = adj
    for c, adj in zip(comps, holm([c.p_templates for c in comps]), strict=True):
        c.p_templates_holm = adj
    notes = list(plan.warnings)
    notes += sorted({p for c in comps for p in c.problems})
    numerics = sorted(
        {
            n
            for r in runs
            if not plan.sets_precision(r.arm)
            and isinstance(n := _mark(r.run_dir).get("numerics"), str)
        }
    )
    if len(numerics) > 1:
        notes.append(
            f"the runs computed in different numerics ({', '.join(numerics)}): their "
            "comparisons mix precision with the settings compared"
        )
    return {
        "plan": str(plan.path),
        "recipe": plan.recipe,
        "init_from": plan.init_from,
        "split": plan.split,
        "final": plan.final,
        "seeds": plan.seeds,
        "eval": asdict(plan.eval),
        "overrides": plan.overrides,
        "reps": plan.reps,
        "arms": [asdict(a) for a in _arm_rows(plan, outs)],
        "comparisons": [asdict(c) for c in comps],
        "runs": [
            {**asdict(r), "run_dir": str(r.run_dir), "eval_dir": str(r.eval_dir)} for r in runs
        ],
        "test_evaluations": [{"ledger": str(p), **asdict(e)} for p, e in _test_ledger(plan)],
        "notes": notes,
    }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _pts(x: float) -> str:
    return f"{round(100 * x, 1) + 0.0:+.1f}"


def _ci(ci: tuple[float, float] | list[float]) -> str:
    return f"{_pts(ci[0])} to {_pts(ci[1])}"


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _code(xs: list[str]) -> str:
    return " ".join(f"`{x}`" for x in xs) or "(the recipe as is)"


def _header(d: dict[str, Any]) -> list[str]:
    e = d["eval"]
    temp = "greedy" if e["temperature"] in (None, 0) and e["samples"] == 1 else e["temperature"]
    return [
        f"# Experiment {Path(d['plan']).stem}",
        "",
        f"Plan `{d['plan']}`: recipe `{d['recipe']}`, start "
        + (f"`{d['init_from']}`" if d["init_from"] else "the recipe's own")
        + f"; split **{d['split']}**"
        + (" (final: the one test measurement)" if d["final"] else "")
        + f"; seeds {d['seeds']}; common overrides {_code(d['overrides'])}.",
        f"Evaluation of each run's final checkpoint: {e['samples']} sample(s) a task, "
        f"temperature {temp if temp is not None else 'rollout.temperature'}, max_turns "
        f"{e['max_turns'] or 'the recipe'}, "
        + (f"a fixed subset of {e['subset']} tasks" if e["subset"] else "every task of the split")
        + f", engine {e['engine']}.",
        "",
    ]


def _arms_md(d: dict[str, Any]) -> list[str]:
    rows = [
        [
            a["name"],
            _code(a["overrides"]),
            str(len(a["runs"])),
            _pct(a["success"]),
            f"{_pct(a['ci'][0])} to {_pct(a['ci'][1])}",
            ", ".join(f"seed {r['seed']}: {r['ok']}/{r['n']}" for r in a["runs"]),
        ]
        for a in d["arms"]
    ]
    head = ["arm", "overrides", "runs", "success", "95% (rliable, runs and tasks)", "episodes"]
    return ["## Arms", "", *md_table(head, rows), ""]


def _comparisons_md(d: dict[str, Any]) -> list[str]:
    rows = [
        [
            c["name"],
            f"{c['arm']} − {c['control']}",
            str(c["tasks"]),
            f"**{_pts(c['diff'])}**",
            _ci(c["ci_runs_tasks"]),
            _ci(c["ci_tasks"]),
            f"{_ci(c['rliable_ci'])} ({c['rliable_method']})",
            f"{c['poi']:.2f} ({c['poi_ci'][0]:.2f} to {c['poi_ci'][1]:.2f})",
            _p(c["p"]),
            _p(c["p_holm"]),
            f"{_p(c['p_templates'])} / {_p(c['p_templates_holm'])}",
        ]
        for c in d["comparisons"]
    ]
    head = [
        "comparison",
        "arm − control",
        "tasks",
        "points",
        "95% over runs and tasks",
        "95% over tasks (runs fixed)",
        "95% rliable stratified",
        "P(arm > control), 95%",
        "p (sign-flip)",
        "p, Holm",
        "p over templates / Holm",
    ]
    return [
        "## Comparisons",
        "",
        *md_table(head, rows),
        "",
        "Points: the mean over tasks of each arm's mean over runs, arm minus control, on the "
        "tasks every run of both scored. The first two intervals are `compare-arms`' "
        "(runs resampled, then tasks, paired; tasks alone); rliable's stratified bootstrap "
        "resamples the runs within each task and the tasks (paired). P(arm > control) is "
        "rliable's probability of improvement (runs resampled within each task). p: two-sided "
        "sign-flip permutation test over tasks of the per-task differences; Holm-adjusted "
        f"over the plan's {len(d['comparisons'])} comparison(s). It holds the runs fixed: it "
        "tests these checkpoints, not the recipe (the interval over runs and tasks is the "
        "recipe's). Instances of one template are not independent, so the same test over "
        "templates (each template's mean difference) is given too, the stricter of the two. "
        f"Seeded; rliable with {d['reps']} resamples.",
        "",
        *_templates_md(d),
    ]


def _templates_md(d: dict[str, Any]) -> list[str]:
    """Per comparison, the difference on each template (where a gain or a loss sits)."""
    out: list[str] = []
    for c in d["comparisons"]:
        rows = [[f"`{t}`", str(n), _pts(diff)] for t, n, diff in c["by_template"]]
        out += [f"### {c['name']} by template", ""]
        out += [*md_table(["template", "tasks", "points"], rows), ""]
    return out


def _mark(run_dir: str | Path) -> dict[str, Any]:
    """A run's mark (``experiment-run.json``), {} without a readable one."""
    try:
        mark = json.loads((Path(run_dir) / "experiment-run.json").read_text())
    except (OSError, ValueError):
        return {}
    return mark if isinstance(mark, dict) else {}


def _numerics(run_dir: str | Path) -> str:
    """'cpu, bf16 autocast on AMD EPYC (avx512_bf16)' from the run's mark."""
    mark = _mark(run_dir)
    if not isinstance(mark.get("numerics"), str):
        return "not recorded"
    return f"{mark['numerics']} on {mark.get('machine') or 'an unknown machine'}"


def _updates(run_dir: str) -> str:
    """'made/planned' M-GRPO updates from the run's mark (``n/a`` without one), flagged when
    a time budget stopped the run short of its configuration."""
    mark = _mark(run_dir)
    if not mark:
        return "n/a"
    made, planned = mark.get("rl_steps"), mark.get("rl_steps_planned")
    if made is None or planned is None:
        return "n/a" if not planned else f"?/{planned}"
    return f"{made}/{planned}" + (" (short)" if made < planned else "")


def _runs_md(d: dict[str, Any]) -> list[str]:
    rows = [
        [
            r["arm"],
            str(r["seed"]),
            _updates(r["run_dir"]),
            _numerics(r["run_dir"]),
            f"`{r['run_dir']}`",
            f"`{r['model']}`",
        ]
        for r in d["runs"]
    ]
    head = ["arm", "seed", "M-GRPO updates", "numerics", "run folder", "final model"]
    return ["## Runs", "", *md_table(head, rows), ""]


def _ledger_md(d: dict[str, Any]) -> list[str]:
    out = ["## Checkpoints evaluated on test", ""]
    if not d["test_evaluations"]:
        return [
            *out,
            "None: no test-evaluations.jsonl of this plan's runs, of the recipe's run folder "
            "or near the start checkpoint records a test evaluation.",
            "",
        ]
    rows = [
        [
            e["time"],
            f"`{e['checkpoint']}`",
            e["by"],
            e["commit"] or "–",
            _pct(e["success"]) if e["success"] is not None else "–",
            f"`{e['ledger']}`",
        ]
        for e in d["test_evaluations"]
    ]
    head = ["time (UTC)", "checkpoint", "by", "code", "success", "ledger"]
    return [*out, *md_table(head, rows), ""]


def render_results(d: dict[str, Any]) -> str:
    """The markdown page of ``build_results``' content."""
    lines = _header(d) + _arms_md(d) + _comparisons_md(d) + _runs_md(d) + _ledger_md(d)
    if d["notes"]:
        lines += ["## Notes", "", *(f"- {n}" for n in d["notes"]), ""]
    return "\n".join(lines)


def write_results(plan: Plan, runs: list[RunRecord]) -> Path:
    """Write the results page (markdown) and its JSON beside it; returns the page's path."""
    d = build_results(plan, runs)
    plan.results.parent.mkdir(parents=True, exist_ok=True)
    plan.results.write_text(render_results(d))
    plan.results.with_suffix(".json").write_text(json.dumps(d, indent=1, default=str))
    return plan.results
