"""The report's PNG plots, drawn with matplotlib's Agg canvas (no display, no pyplot state).

Each function takes plain series (steps, fractions in [0, 1]) and writes one PNG; the caller
decides what to plot from what the run folder holds (``report/build.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from webagent_r1.report.load import EpisodeStats

__all__ = [
    "plot_compare_mixed",
    "plot_compare_success",
    "plot_curriculum",
    "plot_learning_curve",
    "plot_sites",
    "plot_tts",
    "plot_turns_hist",
]

Series = Sequence[tuple[float, float]]
"""``(step, value)`` points."""


def _figure(width: float, height: float) -> Figure:
    # Figure + FigureCanvasAgg instead of pyplot: no global state, no GUI backend picked up
    # from the environment, safe to call from a process that already uses matplotlib.
    # heavy: keeps matplotlib off the import path
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    # heavy: keeps matplotlib off the import path
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _integer_ticks() -> Any:
    # heavy: keeps matplotlib off the import path
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _per_step(
    ax: Any, title: str, xlabel: str, ylabel: str, ylim: tuple[float, float] | None = None
) -> None:
    """Dress the axes of a per-step plot: the title, integer ticks on x, the axis labels, the
    y range (when given) and a light grid."""
    ax.set_title(title)
    ax.xaxis.set_major_locator(_integer_ticks())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.grid(alpha=0.3)


def _xy(points: Series) -> tuple[list[float], list[float]]:
    return [p[0] for p in points], [p[1] for p in points]


def plot_learning_curve(
    path: Path,
    rollout_success: Series = (),
    eval_success: Series = (),
    bc_loss: Series = (),
    bc_heldout: Series = (),
) -> Path:
    """Success against RL step (training rollouts and evaluations), BC loss in a second panel.

    Args:
        path: the PNG to write.
        rollout_success: ``rollout/success`` per RL step.
        eval_success: ``eval/success`` per evaluation step.
        bc_loss: BC ``train/loss`` per step (second panel when given).
        bc_heldout: BC ``bc/heldout_loss`` per step (same panel).
    """
    has_rl = bool(rollout_success or eval_success)
    has_bc = bool(bc_loss or bc_heldout)
    panels = int(has_rl) + int(has_bc)
    if panels == 0:
        raise ValueError("plot_learning_curve needs at least one series")
    fig = _figure(6.5 * panels, 4.2)
    axes = fig.subplots(1, panels, squeeze=False)[0]
    k = 0
    if has_rl:
        ax = axes[k]
        k += 1
        if rollout_success:
            x, y = _xy(rollout_success)
            ax.plot(x, y, color="tab:blue", alpha=0.8, lw=1.2, label="train (rollout/success)")
        if eval_success:
            x, y = _xy(eval_success)
            ax.plot(x, y, "o-", color="tab:red", lw=1.8, label="eval (eval/success)")
        _per_step(ax, "M-GRPO success", "RL step", "success rate", (-0.02, 1.02))
        ax.legend(loc="best", fontsize=9)
    if has_bc:
        ax = axes[k]
        if bc_loss:
            x, y = _xy(bc_loss)
            ax.plot(x, y, color="tab:green", lw=1.2, label="train loss")
        if bc_heldout:
            x, y = _xy(bc_heldout)
            ax.plot(x, y, "s--", color="tab:purple", lw=1.4, label="held-out loss")
        _per_step(ax, "BC loss", "BC step", "loss (cross-entropy)")
        ax.legend(loc="best", fontsize=9)
    return _save(fig, path)


def plot_sites(
    path: Path, columns: Sequence[str], rows: Sequence[tuple[str, Sequence[float | None]]]
) -> Path:
    """Grouped bars: success per site (and overall) for each model / evaluation row.

    Args:
        path: the PNG to write.
        columns: the x groups (site labels, e.g. ``Reddit`` … ``Avg.``).
        rows: ``(label, values)`` with one fraction (or None: no bar) per column.
    """
    if not rows or not columns:
        raise ValueError("plot_sites needs at least one row and one column")
    fig = _figure(max(6.5, 1.1 * len(columns) + 2.0), 4.2)
    ax = fig.subplots()
    width = 0.8 / len(rows)
    for i, (label, values) in enumerate(rows):
        xs = [j + (i - (len(rows) - 1) / 2) * width for j in range(len(columns))]
        pts = [(x, 100 * v) for x, v in zip(xs, values, strict=True) if v is not None]
        if not pts:
            continue
        bars = ax.bar([p[0] for p in pts], [p[1] for p in pts], width, label=label)
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ax.set_xticks(range(len(columns)), list(columns))
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(0, 108)
    ax.set_title("Success per site")
    ax.grid(axis="y", alpha=0.3)
    # below the axes, so that no bar is hidden behind it
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), fontsize=8, ncols=min(len(rows), 3))
    return _save(fig, path)


def plot_tts(
    path: Path,
    curves: Sequence[
        tuple[str, Sequence[int], Sequence[float], Sequence[tuple[float, float] | None]]
    ],
    pass_at_k: Sequence[tuple[str, Sequence[int], Sequence[float]]] = (),
) -> Path:
    """Test-time scaling: success against the turn budget, with confidence intervals.

    Args:
        path: the PNG to write.
        curves: ``(label, max_turns, success, ci)`` per evaluation; ``ci`` holds ``(lo, hi)``
            or None per point (no error bar).
        pass_at_k: ``(label, max_turns, pass@k)`` lines drawn dashed.
    """
    if not curves:
        raise ValueError("plot_tts needs at least one curve")
    fig = _figure(6.5, 4.2)
    ax = fig.subplots()
    for label, turns, success, ci in curves:
        lo = [s - c[0] if c else 0.0 for s, c in zip(success, ci, strict=True)]
        hi = [c[1] - s if c else 0.0 for s, c in zip(success, ci, strict=True)]
        # (2, N) asymmetric error bars; clamp at 0 in case a CI does not contain its estimate
        yerr = [[100 * max(v, 0.0) for v in lo], [100 * max(v, 0.0) for v in hi]]
        ax.errorbar(
            list(turns), [100 * s for s in success], yerr=yerr, fmt="o-", capsize=4, label=label
        )
    for label, turns, values in pass_at_k:
        ax.plot(list(turns), [100 * v for v in values], "^--", label=label)
    ax.set_xlabel("max turns per episode")
    ax.set_ylabel("success rate (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Test-time scaling")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def plot_turns_hist(path: Path, stats: Sequence[EpisodeStats]) -> Path:
    """Histogram of turns per episode, successes and failures stacked, one panel per source.

    Args:
        path: the PNG to write.
        stats: turn counts and outcomes of the evaluation episodes of each source.
    """
    stats = [s for s in stats if s.turns]
    if not stats:
        raise ValueError("plot_turns_hist needs at least one source with episodes")
    fig = _figure(5.0 * len(stats), 3.8)
    axes = fig.subplots(1, len(stats), squeeze=False)[0]
    for ax, st in zip(axes, stats, strict=True):
        ok = [t for t, s in zip(st.turns, st.success, strict=True) if s]
        bad = [t for t, s in zip(st.turns, st.success, strict=True) if not s]
        top = max(st.turns)
        bins = [b + 0.5 for b in range(top + 1)]  # one bin per whole number of turns
        ax.hist(
            [ok, bad],
            bins=bins,
            stacked=True,
            color=["tab:green", "tab:gray"],
            label=[f"success ({len(ok)})", f"failure ({len(bad)})"],
        )
        ax.set_title(f"{st.label} ({len(st.turns)} episodes)", fontsize=10)
        ax.set_xlabel("turns per episode")
        ax.set_ylabel("episodes")
        ax.set_xlim(0.5, top + 0.5)
        ax.xaxis.set_major_locator(_integer_ticks())
        ax.yaxis.set_major_locator(_integer_ticks())
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def plot_curriculum(
    path: Path, templates: Sequence[tuple[str, Series]], mixed_frac: Series = ()
) -> Path:
    """The curriculum's estimated success of every template against RL step.

    Args:
        path: the PNG to write.
        templates: ``(template, points)`` of ``curriculum/p/<template>`` per RL step.
        mixed_frac: ``curriculum/mixed_frac`` per RL step (drawn dashed black when given).
    """
    templates = [(name, pts) for name, pts in templates if pts]
    if not templates:
        raise ValueError("plot_curriculum needs at least one template series")
    fig = _figure(8.0, 4.6)
    ax = fig.subplots()
    cmap = _colors(len(templates))
    for (name, pts), color in zip(templates, cmap, strict=True):
        x, y = _xy(pts)
        ax.plot(x, y, color=color, lw=1.2, label=name)
    if mixed_frac:
        x, y = _xy(mixed_frac)
        ax.plot(x, y, "k--", lw=1.6, label="groups with mixed rewards (fraction)")
    _per_step(
        ax,
        "Curriculum: estimated success per template",
        "RL step",
        "estimated success (posterior mean)",
        (-0.02, 1.02),
    )
    # right of the axes: template names are long
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    return _save(fig, path)


def plot_compare_mixed(path: Path, runs: Sequence[tuple[str, Series]]) -> Path:
    """The fraction of groups with mixed rewards per RL step, one line per run.

    Args:
        path: the PNG to write.
        runs: ``(label, points)`` of ``curriculum/mixed_frac`` per RL step.
    """
    fig, ax, runs = _line_per_run("plot_compare_mixed", runs, markers=False, lw=1.4)
    _per_step(
        ax,
        "Groups with mixed rewards (the ones with a gradient)",
        "RL step",
        "fraction of groups rolled out",
        (-0.02, 1.02),
    )
    ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def plot_compare_success(path: Path, runs: Sequence[tuple[str, Series]]) -> Path:
    """Eval success against RL wall-clock minutes, one line per run, a marker per evaluation.

    Args:
        path: the PNG to write.
        runs: ``(label, points)`` of ``(minutes since the run's first metrics row,
            eval/success)``.
    """
    fig, ax, runs = _line_per_run("plot_compare_success", runs, markers=True, lw=1.6)
    ax.set_title("Eval success against RL wall time")
    ax.set_xlabel("RL wall-clock time (minutes)")
    ax.set_ylabel("success rate")
    # from 0 to just above the best point, not to 1: the runs often differ by a few points
    top = max(v for _, pts in runs for _, v in pts)
    ax.set_ylim(0.0, min(1.02, max(0.05, 1.15 * top)))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _save(fig, path)


def _line_per_run(
    plot: str, runs: Sequence[tuple[str, Series]], markers: bool, lw: float
) -> tuple[Figure, Any, list[tuple[str, Series]]]:
    """A new figure with one line per run that has points, in the runs' colours; a marker at
    every point (``markers``) or only on a run of one point.

    Returns:
        The figure, its axes and the runs drawn.

    Raises:
        ValueError: no run has points (``plot`` names the plot).
    """
    runs = [(label, pts) for label, pts in runs if pts]
    if not runs:
        raise ValueError(f"{plot} needs at least one run with points")
    fig = _figure(6.5, 4.2)
    ax = fig.subplots()
    for (label, pts), color in zip(runs, _colors(len(runs)), strict=True):
        x, y = _xy(pts)
        ax.plot(x, y, "o-" if markers or len(pts) == 1 else "-", color=color, lw=lw, label=label)
    return fig, ax, runs


def _colors(n: int) -> list[Any]:
    """``n`` distinct line colours (tab10, then tab20, then a continuous map)."""
    # heavy: keeps matplotlib off the import path
    from matplotlib import colormaps

    if n <= 10:
        return [colormaps["tab10"](i) for i in range(n)]
    if n <= 20:
        return [colormaps["tab20"](i) for i in range(n)]
    return [colormaps["viridis"](i / (n - 1)) for i in range(n)]
