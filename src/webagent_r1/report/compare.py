"""Side-by-side comparison of RL runs: test success gained per hour, rollouts that taught.

Meant for runs that started from the same checkpoint with different settings (say
``rl.curriculum: uniform`` against ``dynamic``) under the same wall-clock budget. Per run, from
``rl/metrics.jsonl`` (one row per step; the last one logged wins, as after a resume) and
``summary.json``:

- groups rolled out: ``train/groups_used + train/groups_skipped_equal +
  train/groups_skipped_small`` summed over steps (``dynamic``'s extra groups,
  ``curriculum/extra_groups``, are already among them);
- mixed groups: ``train/groups_used``, the groups that carried a gradient (rewards not all
  equal), and their fraction of the groups rolled out;
- eval gain: the last ``eval/success`` minus the first, in points (percent × 100), and per hour
  of RL wall time: ``stages.rl.wall_s`` of ``summary.json`` (evaluations included) when the RL
  stage has finished, else the sum of ``train/step_s`` (evaluations left out, so it flatters
  a run in progress; the table marks it).

``webagent-r1 compare RUN_DIR RUN_DIR ...`` writes ``compare.md`` and two plots
(``compare_mixed.png``, ``compare_success.png``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from webagent_r1.report import plots
from webagent_r1.report.load import (
    GROUP_KEYS,
    ReportError,
    eval_rows,
    load_run,
    metric_series,
    num,
    rows_by_step,
)
from webagent_r1.report.markdown import MISSING, duration, md_table, pct

__all__ = [
    "COMPARE_PLOTS",
    "Comparison",
    "RunComparison",
    "compare_runs",
    "render_markdown",
    "save_comparison",
    "write_comparison",
]

COMPARE_PLOTS = ("compare_mixed.png", "compare_success.png")
"""The plots ``save_comparison`` may write; stale ones of an earlier comparison are removed."""


@dataclass
class RunComparison:
    """One run's row of the comparison (fractions in [0, 1], times in seconds)."""

    label: str
    root: Path
    steps: int
    """RL steps done (rows with ``train/step_s``)."""
    step_wall_s: float
    """Sum of ``train/step_s`` (rollouts and updates, no evaluations)."""
    rl_wall_s: float | None
    """``stages.rl.wall_s`` of ``summary.json`` (evaluations included); None before RL ends."""
    groups: int
    """Groups rolled out (used + skipped as equal + skipped as too small)."""
    mixed_groups: int
    """Groups trained on (``train/groups_used``)."""
    rollout_success: float | None
    """Mean over steps of ``rollout/success``."""
    eval_start: float | None
    eval_start_step: int | None
    eval_end: float | None
    eval_end_step: int | None
    mixed_series: list[tuple[float, float]] = field(default_factory=list)
    """``(step, curriculum/mixed_frac)``."""
    eval_series: list[tuple[float, float]] = field(default_factory=list)
    """``(seconds since the first row of metrics.jsonl, eval/success)``."""

    @property
    def mixed_frac(self) -> float | None:
        """Mixed groups over groups rolled out (None when none was rolled out)."""
        return self.mixed_groups / self.groups if self.groups else None

    @property
    def wall_s(self) -> float:
        """The RL wall time the gain is divided by: with evaluations when known."""
        return self.rl_wall_s if self.rl_wall_s is not None else self.step_wall_s

    @property
    def gain_pts(self) -> float | None:
        """Last minus first eval success in points (None with fewer than two evaluations)."""
        if self.eval_start is None or self.eval_end is None:
            return None
        return 100 * (self.eval_end - self.eval_start)

    @property
    def gain_per_hour(self) -> float | None:
        """``gain_pts`` per hour of ``wall_s``."""
        if self.gain_pts is None or self.wall_s <= 0:
            return None
        return self.gain_pts / (self.wall_s / 3600)


@dataclass
class Comparison:
    """The compared runs, in the order given, and what is worth knowing about them."""

    runs: list[RunComparison]
    notes: list[str] = field(default_factory=list)
    """One sentence each: unreadable lines, runs that did not start from the same success …"""

    @property
    def best(self) -> RunComparison | None:
        """The run with the highest positive gain per hour (the first of a tie); None if none."""
        gaining = [r for r in self.runs if (r.gain_per_hour or 0.0) > 0]
        return max(gaining, key=lambda r: r.gain_per_hour or 0.0) if gaining else None


def _run_row(label: str, run_dir: str | Path, notes: list[str]) -> RunComparison:
    try:
        data = load_run(run_dir)
    except FileNotFoundError as e:
        raise ReportError(f"{e}: pass the run folders of `webagent-r1 train`") from None
    if not data.rl_metrics:
        raise ReportError(
            f"{str(data.root)!r} has no RL metrics (rl/metrics.jsonl): pass the run folder of a "
            "recipe that reached M-GRPO"
        )
    notes += [f"{label}: {p}" for p in data.problems]
    train = rows_by_step(data.rl_metrics, "train/step_s")
    evals = eval_rows(data.rl_metrics)
    rollout = [v for r in train if (v := num(r.get("rollout/success"))) is not None]
    rl = ((data.summary or {}).get("stages") or {}).get("rl")
    first, last = (evals[0], evals[-1]) if evals else ({}, {})
    two = len(evals) >= 2  # one evaluation is a start, not a gain

    # cumulative wall time of each evaluation, from the first row that carries a time
    t0 = next((t for r in data.rl_metrics if (t := num(r.get("time"))) is not None), None)
    eval_series = [
        (t - t0, float(r["eval/success"]))
        for r in evals
        if t0 is not None and (t := num(r.get("time"))) is not None
    ]
    return RunComparison(
        label=label,
        root=data.root,
        steps=len(train),
        step_wall_s=sum(float(r["train/step_s"]) for r in train),
        rl_wall_s=num(rl.get("wall_s")) if isinstance(rl, dict) else None,
        groups=int(sum(num(r.get(k)) or 0 for r in train for k in GROUP_KEYS)),
        mixed_groups=int(sum(num(r.get("train/groups_used")) or 0 for r in train)),
        rollout_success=sum(rollout) / len(rollout) if rollout else None,
        eval_start=float(first["eval/success"]) if evals else None,
        eval_start_step=int(first["step"]) if evals else None,
        eval_end=float(last["eval/success"]) if two else None,
        eval_end_step=int(last["step"]) if two else None,
        mixed_series=metric_series(data.rl_metrics, "curriculum/mixed_frac"),
        eval_series=eval_series,
    )


def compare_runs(run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None) -> Comparison:
    """Read each run folder and compute its row of the comparison.

    Args:
        run_dirs: two or more run folders of ``webagent-r1 train`` (any stage of completion
            once ``rl/metrics.jsonl`` exists).
        labels: one name per folder (default: the folder's name, or the path as given when two
            folders share a name).

    Raises:
        ReportError: fewer than two folders, a wrong number of labels, a missing folder or one
            without RL metrics.
    """
    if len(run_dirs) < 2:
        raise ReportError(
            f"compare needs at least 2 run folders, got {len(run_dirs)}: pass the runs to compare"
        )
    if labels:
        if len(labels) != len(run_dirs):
            raise ReportError(
                f"got {len(labels)} label(s) for {len(run_dirs)} run folders: give one per folder "
                "(or none)"
            )
        if len(set(labels)) != len(labels):
            raise ReportError(f"labels must differ, got {list(labels)}")
        names = list(labels)
    else:
        names = [Path(d).resolve().name for d in run_dirs]
        if len(set(names)) != len(names):  # runs/a/r1 and runs/b/r1
            names = [str(d) for d in run_dirs]
    notes: list[str] = []
    runs = [_run_row(n, d, notes) for n, d in zip(names, run_dirs, strict=True)]
    starts = {r.eval_start for r in runs if r.eval_start is not None}
    if len(starts) > 1:
        notes.append(
            "the runs start from different eval success ("
            + ", ".join(f"{r.label} {pct(r.eval_start)}" for r in runs)
            + "): did they start from the same checkpoint and evaluate the same tasks?"
        )
    return Comparison(runs=runs, notes=notes)


def _signed(x: float | None) -> str:
    return MISSING if x is None else f"{x:+.1f}"


def _at(x: float | None, step: int | None) -> str:
    return MISSING if x is None else f"{pct(x)} (step {step})"


def render_markdown(c: Comparison) -> str:
    """The comparison table, one row per run, and which run gained most per hour."""
    header = [
        "Run",
        "RL steps",
        "RL wall (steps)",
        "RL wall (total)",
        "Groups",
        "Mixed",
        "Mixed (%)",
        "Rollout success (%)",
        "Eval start (%)",
        "Eval end (%)",
        "Gain (pts)",
        "Gain / h (pts)",
    ]
    body = []
    for r in c.runs:
        per_hour = _signed(r.gain_per_hour)
        if r.gain_per_hour is not None and r.rl_wall_s is None:
            per_hour += "*"
        body.append(
            [
                r.label,
                str(r.steps),
                duration(r.step_wall_s),
                duration(r.rl_wall_s),
                str(r.groups),
                str(r.mixed_groups),
                pct(r.mixed_frac),
                pct(r.rollout_success),
                _at(r.eval_start, r.eval_start_step),
                _at(r.eval_end, r.eval_end_step),
                _signed(r.gain_pts),
                per_hour,
            ]
        )
    lines = md_table(header, body) + [""]
    lines.append(
        "Groups: groups rolled out; Mixed: of them, groups whose rewards were not all equal "
        "(the only ones with a gradient). Gain: last minus first `eval/success`, in points; "
        "per hour of the total RL wall time (evaluations included)"
        + (
            ", or * of the step time when the RL stage has not finished (no evaluations: "
            "flattering)."
            if any(r.gain_per_hour is not None and r.rl_wall_s is None for r in c.runs)
            else "."
        )
    )
    lines.append("")
    best = c.best
    # runs that look the same in the table tie: naming one of them would be arbitrary
    tied = [r for r in c.runs if best and _signed(r.gain_per_hour) == _signed(best.gain_per_hour)]
    if best is not None and len(tied) > 1:
        lines.append(
            " and ".join(f"**{r.label}**" for r in tied)
            + f" tie for the most test success per hour: {_signed(best.gain_per_hour)} points "
            "per hour."
        )
    elif best is not None:
        lines.append(
            f"**{best.label}** gained the most test success per hour: "
            f"{_signed(best.gain_per_hour)} points per hour ({_signed(best.gain_pts)} points in "
            f"{duration(best.wall_s)})."
        )
    elif any(r.gain_pts is not None for r in c.runs):
        lines.append("No run gained test success: the last evaluation is not above the first.")
    else:
        lines.append("No run gained test success: no run has two evaluations yet.")
    lines.append("")
    if c.notes:
        lines += ["Notes:", "", *[f"- {n}" for n in c.notes], ""]
    return "\n".join(lines)


def save_comparison(
    c: Comparison, out_dir: str | Path, on_note: Callable[[str], None] | None = None
) -> list[Path]:
    """Write ``out_dir/compare.md`` and the plots of ``c`` that have data.

    Args:
        c: the comparison (``compare_runs``).
        out_dir: the folder to write to (made when missing).
        on_note: called with one sentence per plot skipped, and why.

    Returns:
        ``compare.md``, then each plot written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    made: list[tuple[str, Path]] = []
    skipped: list[str] = []

    mixed = [(r.label, r.mixed_series) for r in c.runs if r.mixed_series]
    if mixed:
        p = plots.plot_compare_mixed(out / "compare_mixed.png", mixed)
        made.append(("Groups with mixed rewards per RL step", p))
    else:
        skipped.append("`compare_mixed.png`: no run logs `curriculum/mixed_frac`")
    success = [(r.label, [(t / 60, s) for t, s in r.eval_series]) for r in c.runs if r.eval_series]
    if success:
        p = plots.plot_compare_success(out / "compare_success.png", success)
        made.append(("Eval success against RL wall time", p))
    else:
        skipped.append("`compare_success.png`: no run logs `eval/success` rows with a `time`")
    for name in COMPARE_PLOTS:  # a plot of an earlier comparison that this one could not make
        stale = out / name
        if stale.is_file() and stale not in {p for _, p in made}:
            stale.unlink()

    md = ["# Comparison: " + " vs ".join(r.label for r in c.runs), ""]
    md += [f"- {r.label}: `{r.root}`" for r in c.runs] + [""]
    md.append(render_markdown(c))
    for title, p in made:
        md += [f"## {title}", "", f"![{title}]({p.name})", ""]
    if skipped:
        md += ["Skipped:", "", *[f"- {s}" for s in skipped], ""]
    report = out / "compare.md"
    report.write_text("\n".join(md))
    if on_note is not None:
        for s in skipped:
            on_note(f"skipped {s}")
    return [report, *(p for _, p in made)]


def write_comparison(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path,
    labels: Sequence[str] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[Path]:
    """``compare_runs`` then ``save_comparison``: ``compare.md`` and its plots in ``out_dir``.

    Raises:
        ReportError: see ``compare_runs``.
    """
    return save_comparison(compare_runs(run_dirs, labels), out_dir, on_note)
