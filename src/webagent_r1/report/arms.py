"""Two arms of training runs compared on the same tasks: is a recipe better, run after run?

One training run against another (``compare-evals``) answers whether *that checkpoint* beats
*that one* on these tasks. Two runs of one recipe from one checkpoint can end several points
apart (sampled rollouts part after one differing token, and the updates follow), so a claim
about a recipe needs several runs per arm, and an interval that counts the spread between them.

Each run is an evaluation of the same tasks (``eval --out-dir`` folders or trajectory files).
On the tasks every run scored:

- **the arm's success**: per task, the mean over the arm's runs of each run's success rate,
  then the mean over tasks (tasks weighted equally);
- **B − A**, with two 95% intervals: over runs and tasks (a two-level bootstrap: each arm's
  runs resampled with replacement, then the tasks, paired; the interval for the recipe), and
  over tasks only (the runs held fixed; the interval for these checkpoints);
- **each run** against arm A's per-task mean: points with a paired task-bootstrap interval;
- **the spread of each arm with two runs or more**: the standard deviation of its runs'
  success, and the permutation p-value of "these runs are one policy" (``run_spread_p``:
  each task's episodes dealt between the runs at random). A small p says the runs differ by
  more than their evaluation episodes' sampling: the training itself spreads.

The statistics live in ``webagent_r1.stats``. ``webagent-r1 compare-arms -a A1 [-a A2 ...]
-b B1 -b B2 [...]`` runs it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webagent_r1.report.load import ReportError
from webagent_r1.report.markdown import md_table
from webagent_r1.report.paired import (
    EvalOutcomes,
    load_outcomes,
    numerics_notes,
    uncounted_notes,
)
from webagent_r1.stats import bootstrap_interval, hierarchical_bootstrap_interval, run_spread_p

__all__ = ["Arm", "ArmComparison", "RunRow", "arms_to_json", "compare_arms", "render_arms_markdown"]


@dataclass
class RunRow:
    """One run of an arm, on the common tasks."""

    label: str
    source: str
    """The trajectory file read."""
    ok: int
    n: int
    success: float
    """Tasks weighted equally: the mean over tasks of the run's per-task rate."""
    diff: float
    """This run's success minus arm A's (per-task means), tasks weighted equally."""
    diff_ci: tuple[float, float]
    """95% paired bootstrap interval over tasks of ``diff``."""
    uncounted: int = 0
    """Successes of the file not counted under ``require_exit``."""


@dataclass
class Arm:
    """The runs of one arm on the common tasks."""

    label: str
    runs: list[RunRow]
    success: float
    """Mean over tasks of the mean over runs of each run's per-task rate."""
    spread_sd: float | None
    """Standard deviation of the runs' success (None with one run)."""
    spread_p: float | None
    """``run_spread_p`` of the runs (None with one run)."""


@dataclass
class ArmComparison:
    """Arm B against arm A on the tasks every run scored (fractions in [0, 1])."""

    a: Arm
    b: Arm
    tasks: int
    dropped: int
    """Tasks some run did not score (absent, or env errors only): not compared."""
    diff: float
    diff_ci: tuple[float, float]
    """95% interval over runs and tasks (``hierarchical_bootstrap_interval``)."""
    diff_ci_tasks: tuple[float, float]
    """95% interval over tasks alone, the runs fixed."""
    require_exit: bool = False
    """Only successes whose episode ended by itself were counted."""
    problems: list[str] = field(default_factory=list)


def _rates(o: EvalOutcomes, tasks: list[str]) -> list[float]:
    return [sum(o.outcomes[t]) / len(o.outcomes[t]) for t in tasks]


def _arm(
    label: str, outs: list[EvalOutcomes], tasks: list[str], base: list[float], seed: int
) -> Arm:
    rows = []
    for o in outs:
        rates = _rates(o, tasks)
        diffs = [r - b for r, b in zip(rates, base, strict=True)]
        rows.append(
            RunRow(
                label=o.label,
                source=str(o.source),
                ok=sum(sum(o.outcomes[t]) for t in tasks),
                n=sum(len(o.outcomes[t]) for t in tasks),
                success=sum(rates) / len(rates),
                diff=sum(diffs) / len(diffs),
                diff_ci=bootstrap_interval(diffs, seed),
                uncounted=o.uncounted,
            )
        )
    two = len(outs) > 1
    return Arm(
        label=label,
        runs=rows,
        # the mean over tasks of the runs' mean is the mean of the runs' successes
        success=sum(r.success for r in rows) / len(rows),
        spread_sd=statistics.stdev(r.success for r in rows) if two else None,
        spread_p=run_spread_p([[o.outcomes[t] for t in tasks] for o in outs], seed)
        if two
        else None,
    )


def compare_arms(
    paths_a: Sequence[str | Path],
    paths_b: Sequence[str | Path],
    label_a: str = "A",
    label_b: str = "B",
    max_turns: int | None = None,
    seed: int = 0,
    require_exit: bool = False,
) -> ArmComparison:
    """Arm B's runs against arm A's runs on the tasks every run scored. ``require_exit``: only
    successes whose episode ended by itself count (``paired.load_outcomes``).

    Raises:
        ReportError: an arm without a run, a file given twice, unreadable inputs, or no task
            common to every run.
    """
    if not paths_a or not paths_b:
        raise ReportError("each arm needs at least one evaluation: -a PATH ... -b PATH ...")
    if label_a == label_b:
        raise ReportError(f"both arms are named {label_a!r}: give --label-a and --label-b")
    paths = [*paths_a, *paths_b]
    labels = _unique_labels(paths)
    outs = [
        load_outcomes(p, n, max_turns, require_exit) for p, n in zip(paths, labels, strict=True)
    ]
    read: dict[Path, str] = {}
    for p, o in zip(paths, outs, strict=True):
        f = o.source.resolve()
        if f in read:
            raise ReportError(
                f"{read[f]} and {p} are one evaluation ({f}): each run counts once, in one arm "
                "(two checkpoints of one run are not two runs either)"
            )
        read[f] = str(p)
    outs_a, outs_b = outs[: len(paths_a)], outs[len(paths_a) :]
    everyone = outs_a + outs_b
    tasks = sorted(set.intersection(*(set(o.outcomes) for o in everyone)))
    if not tasks:
        raise ReportError(
            "the runs share no task: compare evaluations of the same tasks (same config, split "
            "and --subset)"
        )
    every_task = set().union(*(set(o.outcomes) | set(o.unscored) for o in everyone))
    problems = [p for o in everyone for p in o.problems] + uncounted_notes(everyone)
    problems += numerics_notes(everyone)
    problems += [
        f"{o.label}: {o.env_errors} env_error episode(s) not scored"
        for o in everyone
        if o.env_errors
    ]
    rates_a = [_rates(o, tasks) for o in outs_a]
    rates_b = [_rates(o, tasks) for o in outs_b]
    base = [sum(col) / len(col) for col in zip(*rates_a, strict=True)]
    arm_a = _arm(label_a, outs_a, tasks, base, seed)
    arm_b = _arm(label_b, outs_b, tasks, base, seed)
    return ArmComparison(
        a=arm_a,
        b=arm_b,
        tasks=len(tasks),
        dropped=len(every_task) - len(tasks),
        diff=arm_b.success - arm_a.success,
        diff_ci=hierarchical_bootstrap_interval(rates_a, rates_b, seed),
        diff_ci_tasks=hierarchical_bootstrap_interval(rates_a, rates_b, seed, resample_runs=False),
        require_exit=require_exit,
        problems=problems,
    )


def _unique_labels(paths: Sequence[str | Path]) -> list[str]:
    """Each path's shortest tail of components that no other path shares (file suffix
    dropped): ``runs/s0/eval`` and ``runs/s1/eval`` are ``s0/eval`` and ``s1/eval``."""
    parts = []
    for p in paths:
        r = Path(p).resolve()
        parts.append([*r.parent.parts, r.stem] if r.suffix == ".jsonl" else list(r.parts))
    labels = []
    for i, x in enumerate(parts):
        others = [y for j, y in enumerate(parts) if j != i]
        k = next((k for k in range(1, len(x)) if all(y[-k:] != x[-k:] for y in others)), len(x))
        labels.append("/".join(x[-k:]))
    return labels


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _pts(x: float) -> str:
    return f"{round(100 * x, 1) + 0.0:+.1f}"  # + 0.0: never "-0.0"


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _ci(ci: tuple[float, float]) -> str:
    return f"{_pts(ci[0])} to {_pts(ci[1])}"


def render_arms_markdown(c: ArmComparison) -> str:
    """Markdown: the arms, their difference with both intervals, then one row per run."""

    def runs(arm: Arm) -> str:
        return f"{len(arm.runs)} run" + ("s" if len(arm.runs) != 1 else "")

    lines = [f"# {c.b.label} ({runs(c.b)}) against {c.a.label} ({runs(c.a)})", ""]
    lines.append(
        f"{c.tasks} tasks every run scored"
        + (
            f" ({c.dropped} other task{'s' if c.dropped != 1 else ''} left out: some run did "
            "not score them)"
            if c.dropped
            else ""
        )
        + "; tasks weighted equally."
    )
    lines.append("")
    arm_rows = []
    for arm in (c.a, c.b):
        spread = (
            f"{100 * arm.spread_sd:.1f} points, {_p(arm.spread_p)}"
            if arm.spread_sd is not None and arm.spread_p is not None
            else "– (one run)"
        )
        arm_rows.append(
            [
                _cell(arm.label),
                str(len(arm.runs)),
                _pct(arm.success),
                ", ".join(_pct(r.success) for r in arm.runs),
                spread,
            ]
        )
    lines += md_table(
        ["arm", "runs", "success", "each run", "spread of runs: SD, p (one policy)"], arm_rows
    )
    lines += [
        "",
        f"**{c.b.label} − {c.a.label}: {_pts(c.diff)} points**, 95% interval over runs and "
        f"tasks {_ci(c.diff_ci)} (the recipe); over tasks alone, the runs fixed, "
        f"{_ci(c.diff_ci_tasks)} (these checkpoints).",
        "",
    ]
    single = [arm.label for arm in (c.a, c.b) if len(arm.runs) == 1]
    if single:
        lines += [
            f"{' and '.join(single)}: one run, so its spread between runs is not in the interval "
            "over runs and tasks (fine for a fixed starting checkpoint; a recipe needs more "
            "runs).",
            "",
        ]
    run_rows = [
        [
            _cell(arm.label),
            _cell(r.label),
            f"{r.ok}/{r.n}",
            _pct(r.success),
            "–" if arm is c.a and len(c.a.runs) == 1 else f"{_pts(r.diff)} ({_ci(r.diff_ci)})",
        ]
        for arm in (c.a, c.b)
        for r in arm.runs
    ]
    lines += md_table(
        [
            "arm",
            "run",
            "episodes succeeded",
            "success (tasks weighted equally)",
            f"− {_cell(c.a.label)}, points (95% over tasks)",
        ],
        run_rows,
    )
    lines += [
        "",
        "Intervals: percentile bootstrap, seeded. With few runs the draw over runs has few "
        "distinct outcomes and the interval over runs and tasks is rough (two runs: a little "
        "narrow; three or more: about right, docs/evaluation.md). The spread p tests "
        "whether an arm's runs differ by more than their evaluation episodes' sampling "
        "(each task's episodes dealt between the runs at random).",
    ]
    return "\n".join(lines) + "\n"


def arms_to_json(c: ArmComparison) -> dict[str, Any]:
    """JSON-ready (fractions in [0, 1])."""

    def arm(a: Arm) -> dict[str, Any]:
        return {**vars(a), "runs": [vars(r) for r in a.runs]}

    return {**vars(c), "a": arm(c.a), "b": arm(c.b)}
