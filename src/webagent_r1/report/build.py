"""``report.md`` and ``plots/*.png`` of a run or evaluation folder, rebuilt from its logs.

The success table follows the paper's layout (Reddit | GitLab | CMS | Map | OSS | Cross-site
| Avg.; "Avg." is the success rate over all scored episodes, not the mean of the columns).
Its rows come from ``summary.json`` of a recipe:

- ``Base model``: ``stages.base`` (R1, R1-CoT), or ``stages.rl.start`` when the run has no BC
  stage (R1-Zero: the RL stage starts from the base model);
- ``+ BC``: ``stages.rl.start``, the RL stage's evaluation at step 0, which evaluates the BC
  model;
- ``+ M-GRPO``: ``stages.rl.final``;

from the eval rows of ``rl/metrics.jsonl`` while ``summary.json`` has no RL stage yet (a run
in progress), and one row per turn budget of every ``eval.json`` found.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webagent_r1.errors import LoadError
from webagent_r1.report import plots
from webagent_r1.report.failures import failures_markdown
from webagent_r1.report.load import (
    SITE_LABELS,
    SITE_ORDER,
    EpisodeStats,
    EvalFile,
    ReportError,
    RunData,
    eval_rows,
    failure_tables,
    load_run,
    metric_series,
    num,
    read_episode_stats,
    trajectory_sources,
)
from webagent_r1.report.markdown import MISSING, ci_str, duration, md_table, pct
from webagent_r1.report.paired import compare_paired, load_outcomes
from webagent_r1.report.steps import StepRow, step_rows, steps_markdown

__all__ = [
    "PLOT_NAMES",
    "ReportError",
    "ReportFiles",
    "SuccessRow",
    "build_report",
    "build_report_files",
    "success_rows",
]

PLOT_NAMES = (
    "learning_curve.png",
    "sites.png",
    "tts.png",
    "turns_hist.png",
    "curriculum.png",
)
"""The plots a report may have; stale ones of an earlier build are removed."""


@dataclass
class SuccessRow:
    """One row of the success table (fractions in [0, 1])."""

    label: str
    overall: float | None
    by_site: dict[str, float]
    source: str
    """Where the numbers come from, e.g. ``summary.json: stages.rl.final (step 40)``."""
    episodes: int | None = None


@dataclass
class ReportFiles:
    """What ``build_report_files`` wrote and what it left out."""

    report: Path
    plots: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """One sentence per plot or section that was skipped, and why."""


def _metrics_row(label: str, m: dict[str, Any], source: str) -> SuccessRow:
    """A table row from ``eval/…`` metrics (``eval/success``, ``eval/success/<site>``)."""
    by_site = {
        k.removeprefix("eval/success/"): x
        for k, v in m.items()
        if k.startswith("eval/success/") and (x := num(v)) is not None
    }
    eps = num(m.get("eval/episodes"))
    return SuccessRow(
        label,
        num(m.get("eval/success")),
        by_site,
        source,
        int(eps) if eps is not None else None,
    )


def _step(m: dict[str, Any]) -> str:
    return f" (step {int(m['step'])})" if num(m.get("step")) is not None else ""


def success_rows(data: RunData) -> list[SuccessRow]:
    """The rows of the success table, in order: base, BC, RL, then each eval.json result."""
    out: list[SuccessRow] = []
    stages: dict[str, Any] = (data.summary or {}).get("stages", {})
    rl = stages.get("rl") if isinstance(stages.get("rl"), dict) else {}
    start, final = rl.get("start"), rl.get("final")
    start = start if isinstance(start, dict) else None
    final = final if isinstance(final, dict) else None
    base = stages.get("base")
    at_start = f"summary.json: stages.rl.start{_step(start or {})}"
    if isinstance(base, dict) and num(base.get("eval/success")) is not None:
        out.append(_metrics_row("Base model", base, "summary.json: stages.base"))
    elif "bc" not in stages and start:  # R1-Zero: RL starts from the base model
        out.append(_metrics_row("Base model", start, at_start))
    if "bc" in stages and start:  # the RL stage's step-0 evaluation is of the BC model
        out.append(_metrics_row("+ BC", start, at_start))
    if final and (not start or final.get("step") != start.get("step")):
        out.append(_metrics_row("+ M-GRPO", final, f"summary.json: stages.rl.final{_step(final)}"))

    if not rl:  # no RL stage in summary.json yet: the eval rows RL has logged so far
        evals = eval_rows(data.rl_metrics) or eval_rows(data.rl_eval_history)
        if evals:
            src = "rl/metrics.jsonl" if eval_rows(data.rl_metrics) else "rl/eval_history.json"
            first, last = evals[0], evals[-1]
            after_bc = "bc" in stages or bool(data.bc_metrics)
            label = "+ BC" if after_bc else "Base model"
            if int(first["step"]) == 0 and label not in {r.label for r in out}:
                out.append(_metrics_row(label, first, f"{src}{_step(first)}"))
            if int(last["step"]) > 0:
                label = f"+ M-GRPO (step {int(last['step'])})"
                out.append(_metrics_row(label, last, f"{src}{_step(last)}"))

    many = len(data.eval_files) > 1
    for ef in data.eval_files:
        where = f" [{data.rel(ef.path)}]" if many else ""
        for r in ef.results:
            out.append(
                SuccessRow(
                    f"eval (max_turns={r.max_turns}){where}",
                    r.success,
                    {s: g["success"] for s, g in r.by_site.items()},
                    data.rel(ef.path),
                    r.episodes,
                )
            )
    return out


def _site_columns(rows: list[SuccessRow]) -> list[str]:
    """The paper's six sites, then any other site the rows have, by name."""
    extra = sorted({s for r in rows for s in r.by_site} - set(SITE_ORDER))
    return [*SITE_ORDER, *extra]


def _found_lines(data: RunData) -> list[str]:
    lines = []
    if data.summary is not None:
        stages = ", ".join(data.summary.get("stages", {})) or "none"
        lines.append(f"- `summary.json`: recipe summary, stages: {stages}")
    else:
        lines.append("- `summary.json`: missing (not a recipe run, or the run has not started)")
    for stage in ("bc", "rl"):
        rows = getattr(data, f"{stage}_metrics")
        if rows:
            steps = [int(r["step"]) for r in rows]
            lines.append(
                f"- `{stage}/metrics.jsonl`: {len(rows)} rows, steps {min(steps)}–{max(steps)}"
            )
        else:
            lines.append(f"- `{stage}/metrics.jsonl`: missing")
    if data.rl_eval_files:
        steps = [s for s, _ in data.rl_eval_files]
        lines.append(
            f"- `rl/eval/`: {len(steps)} evaluation trajectory file(s), "
            f"steps {', '.join(map(str, steps))}"
        )
    else:
        lines.append("- `rl/eval/`: missing")
    if data.rollout_files:
        steps = sorted({s for s, _, _ in data.rollout_files})
        lines.append(
            f"- `rl/rollouts/`: {len(data.rollout_files)} rollout file(s), "
            f"RL steps {steps[0] + 1}–{steps[-1] + 1}"
        )
    else:
        lines.append("- `rl/rollouts/`: missing")
    if data.eval_files:
        for ef in data.eval_files:
            budgets = ", ".join(str(r.max_turns) for r in ef.results)
            lines.append(
                f"- `{data.rel(ef.path)}`: evaluation of `{ef.model}` on {ef.split or '?'}, "
                f"max_turns {budgets}"
            )
    else:
        lines.append("- `eval.json`: none in the folder or its direct subfolders")
    return lines


def _eval_section(data: RunData, ef: EvalFile) -> list[str]:
    rel = data.rel(ef.path)
    lines = [f"## Evaluation `{rel}`", ""]
    meta = [f"model `{ef.model}`" if ef.model else "", f"split `{ef.split}`" if ef.split else ""]
    if ef.samples is not None:
        meta.append(f"{ef.samples} sample(s) per task")
    if ef.seed is not None:
        meta.append(f"seed {ef.seed}")
    if any(meta):
        lines += [", ".join(m for m in meta if m) + ".", ""]
    has_pass = any(r.pass_at_k is not None for r in ef.results)
    header = ["max_turns", "Success (%)", "CI (%)"] + (["pass@k (%)"] if has_pass else [])
    header.append("Episodes")
    body = []
    for r in ef.results:
        row = [str(r.max_turns), pct(r.success), ci_str(r.ci)]
        if has_pass:
            row.append(pct(r.pass_at_k))
        row.append(str(r.episodes) if r.episodes is not None else MISSING)
        body.append(row)
    lines += md_table(header, body) + [""]
    lines += _interval_notes(ef)
    for what in ("by_site", "by_kind"):
        names = sorted({n for r in ef.results for n in getattr(r, what)})
        if what == "by_site":  # the paper's order, then the others by name
            names = [s for s in SITE_ORDER if s in names] + sorted(set(names) - set(SITE_ORDER))
        if not names:
            continue
        lines += [
            f"Success {'per site' if what == 'by_site' else 'per task kind'} (%), "
            "with the confidence interval and the number of episodes:",
            "",
        ]
        head = ["max_turns"] + [SITE_LABELS.get(n, n) if what == "by_site" else n for n in names]
        body = []
        for r in ef.results:
            groups = getattr(r, what)
            cells = [str(r.max_turns)]
            for n in names:
                g = groups.get(n)
                if g is None:
                    cells.append(MISSING)
                    continue
                n_str = f" (n={g['n']})" if g["n"] is not None else ""
                ci = f" {ci_str(g['ci'])}" if g["ci"] else ""
                cells.append(f"{pct(g['success'])}{ci}{n_str}")
            body.append(cells)
        lines += md_table(head, body) + [""]
    lines += _template_lines(ef)
    return lines


def guess_sentence(g: dict[str, Any], tasks: str = "these tasks") -> str:
    """The constant-answer baseline ``g`` (``{successes, tasks}``) on ``tasks`` as one
    sentence."""
    rate = g["successes"] / g["tasks"] if g["tasks"] else 0.0
    return (
        f"Constant-answer baseline: a policy answering each template's most common training "
        f"answer, without reading the page, would score {g['successes']}/{g['tasks']} "
        f"({pct(rate)}%) on {tasks} (docs/grading.md)."
    )


def _guess_cell(row: dict[str, Any] | None) -> str:
    """A template's constant-answer baseline: ``2/6 (33.3)``, or n/a without a guess."""
    if row is None or row.get("guess") is None or not row["tasks"]:
        return "n/a"
    return f"{row['successes']}/{row['tasks']} ({pct(row['successes'] / row['tasks'])})"


def _template_lines(ef: EvalFile) -> list[str]:
    """Success per template at each budget, with the constant-answer baseline's column when
    ``eval.json`` has one; no lines when the results have no template names."""
    names = sorted({n for r in ef.results for n in r.by_template} - {"?"})
    if not names:
        return []
    g = ef.guess_baseline
    head = ["Template"] + [f"max_turns {r.max_turns}" for r in ef.results]
    if g is not None:
        head += ["Constant answer", "Its answer"]
    body = []
    for n in names:
        cells = [n]
        for r in ef.results:
            row = r.by_template.get(n)
            cells.append(MISSING if row is None else f"{pct(row['success'])} (n={row['n']})")
        if g is not None:
            row = g["by_template"].get(n)
            guess = row.get("guess") if row else None
            cells += [_guess_cell(row), MISSING if guess is None else guess.replace("|", "\\|")]
        body.append(cells)
    lines = ["Success per template (%) with the number of episodes:", ""]
    if g is not None:
        lines = [
            "Success per template (%) with the number of episodes, beside the constant-answer "
            "baseline (tasks its most common training answer passes; n/a: graded on the page "
            "or the site's state, or no training instances):",
            "",
        ]
    lines += md_table(head, body) + [""]
    if g is not None:
        lines += [guess_sentence(g), ""]
    return lines


_CI_METHODS = {
    "wilson": "95% Wilson intervals (one episode per task)",
    "task-bootstrap": "95% intervals from a bootstrap over tasks (a task's samples resampled "
    "together, since they are correlated)",
}


def _interval_notes(ef: EvalFile) -> list[str]:
    """How the intervals were made and which tasks no episode scored, one line each."""
    notes = []
    methods = sorted({r.ci_method for r in ef.results if r.ci_method})
    if methods:
        notes.append("CI: " + "; ".join(_CI_METHODS.get(m, m) for m in methods) + ".")
    if ef.results and ef.results[0].pass_at_k is not None:
        notes.append("pass@k: unbiased, 1 − C(n−c, k)/C(n, k) per task, averaged over tasks.")
    for r in ef.results:
        if r.unscored_tasks:
            shown = ", ".join(r.unscored_tasks[:10]) + (" …" if len(r.unscored_tasks) > 10 else "")
            notes.append(
                f"max_turns {r.max_turns}: {len(r.unscored_tasks)} task(s) with no scored "
                f"episode (env errors only), not in the rates: {shown}."
            )
    return [*(f"- {n}" for n in notes), ""] if notes else []


def _stage_lines(summary: dict[str, Any]) -> list[str]:
    stages = summary.get("stages", {})
    body = []
    for name, st in stages.items():
        if not isinstance(st, dict):
            continue
        details = []
        if name == "demos" and st.get("file"):
            details.append(f"file `{st['file']}`")
        if num(st.get("eval/episodes")) is not None:
            details.append(f"{int(st['eval/episodes'])} eval episodes")
        if num(st.get("heldout_loss")) is not None:
            details.append(f"held-out loss {st['heldout_loss']:.4f}")
        final = st.get("final")
        if name == "rl" and num(st.get("steps")) is not None:
            details.append(f"{int(st['steps'])} steps")
        elif name == "rl" and isinstance(final, dict) and num(final.get("step")) is not None:
            details.append(f"{int(final['step'])} steps")
        if st.get("checkpoint"):
            details.append(f"checkpoint `{st['checkpoint']}`")
        body.append([name, duration(num(st.get("wall_s"))), "; ".join(details)])
    if not body:
        return []
    if num(summary.get("wall_s")) is not None:  # written when the recipe returns
        body.append(["**total**", duration(num(summary.get("wall_s"))), ""])
    return ["## Stage wall times", "", *md_table(["Stage", "Wall time", "Details"], body), ""]


def _turn_sources(data: RunData, skipped: list[str]) -> list[EpisodeStats]:
    """The final RL evaluation and, per eval.json, its largest turn budget."""
    sources, notes = trajectory_sources(data, rollouts=False)
    skipped.extend(notes)
    out = []
    for src in sources:
        try:
            out.append(read_episode_stats(src.files[0], src.label))
        except (OSError, LoadError) as e:
            data.problems.append(f"{data.rel(src.files[0])}: unreadable ({e}); skipped")
    for st in out:
        if st.bad_lines:
            data.problems.append(f"{data.rel(st.path)}: skipped {st.bad_note}")
    return [st for st in out if st.turns]


def _make_plots(
    data: RunData,
    rows: list[SuccessRow],
    columns: list[str],
    steps: list[StepRow],
    plot_dir: Path,
    skipped: list[str],
) -> list[tuple[str, Path]]:
    """Draw every plot the data allow; returns ``(title, path)`` of each written."""
    made: list[tuple[str, Path]] = []

    # 1) learning curve: metrics.jsonl first, then the rollout files (the step table's rows)
    # / eval history / summary
    train = metric_series(data.rl_metrics, "rollout/success") or [
        (float(r.step), r.success_rate) for r in steps if r.success_rate is not None
    ]
    evals = metric_series(data.rl_metrics, "eval/success") or metric_series(
        data.rl_eval_history, "eval/success"
    )
    if not evals and data.summary:
        hist = (data.summary.get("stages", {}).get("rl") or {}).get("history") or []
        evals = metric_series(
            [h for h in hist if isinstance(h, dict) and "step" in h], "eval/success"
        )
    bc_loss = metric_series(data.bc_metrics, "train/loss")
    bc_held = metric_series(data.bc_metrics, "bc/heldout_loss")
    if train or evals or bc_loss or bc_held:
        p = plots.plot_learning_curve(
            plot_dir / "learning_curve.png", train, evals, bc_loss, bc_held
        )
        made.append(("Learning curve", p))
    else:
        skipped.append(
            "`learning_curve.png`: no RL or BC metrics (`rl/metrics.jsonl`, `bc/metrics.jsonl`)"
        )

    # 2) success per site: only columns some row has a value for
    if rows:
        cols = [c for c in columns if any(c in r.by_site for r in rows)]
        labels = [SITE_LABELS.get(c, c) for c in cols] + ["Avg."]
        series = [(r.label, [r.by_site.get(c) for c in cols] + [r.overall]) for r in rows]
        made.append(("Success per site", plots.plot_sites(plot_dir / "sites.png", labels, series)))
    else:
        skipped.append("`sites.png`: no evaluation results (summary.json, eval.json)")

    # 3) test-time scaling: eval.json files with at least two turn budgets
    sweeps = [ef for ef in data.eval_files if len(ef.results) >= 2]
    if sweeps:
        many = len(sweeps) > 1
        curves = []
        passk = []
        for ef in sweeps:
            name = data.rel(ef.path.parent) if many else "success"
            res = ef.results
            curves.append(
                (name, [r.max_turns for r in res], [r.success for r in res], [r.ci for r in res])
            )
            pk = [r for r in res if r.pass_at_k is not None]
            if pk:
                pass_label = f"pass@{ef.samples}" if ef.samples else "pass@k"
                passk.append(
                    (
                        f"{name} {pass_label}" if many else pass_label,
                        [r.max_turns for r in pk],
                        [float(r.pass_at_k or 0.0) for r in pk],
                    )
                )
        made.append(("Test-time scaling", plots.plot_tts(plot_dir / "tts.png", curves, passk)))
    else:
        skipped.append("`tts.png`: needs an `eval.json` with at least 2 turn budgets")

    # 4) turns per episode of the evaluation trajectories
    sources = _turn_sources(data, skipped)
    if sources:
        p = plots.plot_turns_hist(plot_dir / "turns_hist.png", sources)
        made.append(("Turns per episode", p))
    else:
        skipped.append(
            "`turns_hist.png`: no evaluation trajectories (`rl/eval/step-*.jsonl` or the "
            "trajectory files of `eval.json`)"
        )

    # 5) the curriculum's per-template success estimates (runs that log them)
    prefix = "curriculum/p/"
    names = sorted({k[len(prefix) :] for r in data.rl_metrics for k in r if k.startswith(prefix)})
    if names:
        per_template = [(n, metric_series(data.rl_metrics, prefix + n)) for n in names]
        mixed = metric_series(data.rl_metrics, "curriculum/mixed_frac")
        p = plots.plot_curriculum(plot_dir / "curriculum.png", per_template, mixed)
        made.append(("Curriculum: estimated success per template", p))
    return made


def _paired_section(data: RunData) -> list[str]:
    """The RL stage's last evaluation against its first (the start: BC for R1), task by task."""
    if len(data.rl_eval_files) < 2:
        return []
    (s0, f0), (s1, f1) = data.rl_eval_files[0], data.rl_eval_files[-1]
    try:
        a = load_outcomes(f0, f"step {s0}")
        b = load_outcomes(f1, f"step {s1}")
        c = compare_paired(a, b)
    except (ReportError, OSError) as e:
        data.problems.append(f"paired comparison of RL evaluations skipped: {e}")
        return []
    lo, hi = c.diff_ci
    lines = [
        f"## M-GRPO against its start, task by task (step {s0} → step {s1})",
        "",
        f"- Success on the {c.tasks} tasks both evaluated: {c.ok_a}/{c.n_a} → {c.ok_b}/{c.n_b}; "
        f"difference {100 * c.diff:+.1f} points (95% paired bootstrap interval "
        f"{100 * lo:+.1f} to {100 * hi:+.1f}).",
        f"- Tasks better / worse / tied: {c.better} / {c.worse} / {c.tied}; sign test "
        f"p = {c.sign_p:.3f}, sign-flip test p = {c.flip_p:.3f}.",
        *(
            [
                f"- Tasks with no scored episode (env errors only), not compared: "
                f"{len(c.unscored_a)} at step {s0}, {len(c.unscored_b)} at step {s1}."
            ]
            if c.unscored_a or c.unscored_b
            else []
        ),
        f"- Sources: {data.rel(f0)}, {data.rel(f1)} (with several processes, rank 0's share "
        "of the tasks). `webagent-r1 compare-evals` compares any two evaluations this way "
        "(sample several episodes per task for a finer test).",
        "",
    ]
    return lines


def _failures_section(data: RunData) -> list[str]:
    """The failure kinds of the latest evaluations and rollouts (``report.failures``); no
    lines when no episode failed. Missing or malformed files are named elsewhere already."""
    tables, _notes, _templates = failure_tables(data)
    return failures_markdown(tables)


def build_report_files(run_dir: str | Path) -> ReportFiles:
    """Write ``<run_dir>/report.md`` and ``<run_dir>/plots/*.png`` from the folder's logs.

    Args:
        run_dir: a run folder of ``webagent-r1 train`` or a folder of ``webagent-r1 eval
            --out-dir``; any subset of their files will do.

    Returns:
        The report, the plots written and what was skipped.

    Raises:
        FileNotFoundError: ``run_dir`` does not exist or is not a folder.
        ReportError: the folder holds none of the known inputs.
    """
    data = load_run(run_dir)
    if not data.usable:
        msg = (
            f"{str(data.root)!r} has nothing to report: expected summary.json, bc/ or "
            "rl/metrics.jsonl, rl/eval/step-*.jsonl, rl/rollouts/ or an eval.json"
        )
        if data.problems:
            msg += " (" + "; ".join(data.problems) + ")"
        raise ReportError(msg)
    root = data.root
    plot_dir = root / "plots"
    rows = success_rows(data)
    columns = _site_columns(rows)
    skipped: list[str] = []
    steps = step_rows(data)
    made = _make_plots(data, rows, columns, steps, plot_dir, skipped)
    for name in PLOT_NAMES:  # a plot of an earlier build that this one could not make
        stale = plot_dir / name
        if stale.is_file() and stale not in {p for _, p in made}:
            stale.unlink()

    md = [f"# Report: {root.resolve().name}", ""]
    md += [
        f"Rebuilt by `webagent-r1 report {root}` from the logs in the folder. Success rates are "
        "percentages of the scored episodes (episodes lost to environment errors are left out), "
        "except WebArena-Lite evaluations, which divide by every episode as the paper does "
        "(an environment error counts as a failure; `eval.json` has `denominator`).",
        "",
        "## Found",
        "",
        *_found_lines(data),
        "",
    ]
    md += ["## Success per site", ""]
    if rows:
        header = ["Model", *[SITE_LABELS.get(c, c) for c in columns], "Avg."]
        body = [[r.label, *[pct(r.by_site.get(c)) for c in columns], pct(r.overall)] for r in rows]
        md += md_table(header, body) + [""]
        md += [
            "Success rate (%) per site; Avg. is the rate over all episodes; "
            f"{MISSING} means no episodes of that site. Sources:",
            "",
        ]
        for r in rows:
            eps = f", {r.episodes} episodes" if r.episodes is not None else ""
            md.append(f"- {r.label}: {r.source}{eps}")
        md.append("")
        if data.guess_baseline is not None:  # the recipe's evaluation subset
            what = "the recipe's evaluation subset (the Base model, + BC and + M-GRPO rows)"
            md += [guess_sentence(data.guess_baseline, what), ""]
    else:
        md += ["No evaluation results found (no summary.json stages, no eval.json).", ""]
    md += _paired_section(data)
    md += steps_markdown(steps)
    for ef in data.eval_files:
        md += _eval_section(data, ef)
    md += _failures_section(data)
    if data.summary:
        md += _stage_lines(data.summary)
    md += ["## Plots", ""]
    for title, p in made:
        rel = os.path.relpath(p, root).replace(os.sep, "/")
        md += [f"### {title}", "", f"![{title}]({rel})", ""]
    if skipped:
        md += ["Skipped:", "", *[f"- {s}" for s in skipped], ""]
    if data.problems:
        md += ["## Problems", "", *[f"- {p}" for p in data.problems], ""]
    report = root / "report.md"
    report.write_text("\n".join(md))
    return ReportFiles(report=report, plots=[p for _, p in made], skipped=skipped)


def build_report(run_dir: str | Path) -> Path:
    """Write ``<run_dir>/report.md`` and its PNG plots; returns the path of ``report.md``.

    See ``build_report_files`` (which also returns the plots and what was skipped).

    Raises:
        FileNotFoundError: ``run_dir`` does not exist or is not a folder.
        ReportError: (a ``ValueError``) the folder holds none of the known inputs.
    """
    return build_report_files(run_dir).report
