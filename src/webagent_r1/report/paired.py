"""Paired comparison of two evaluations of the same tasks: is one model really better?

Two models evaluated on the same tasks (``webagent-r1 eval --out-dir``, or the evaluation
trajectories of a recipe, ``rl/eval/step-*.jsonl``) are compared task by task, which is far
more sensitive than comparing two success rates with their separate intervals: most tasks are
solved by both or by neither, and only the tasks where the two differ carry evidence.

Per task ``t`` with ``k`` scored episodes each (``env_error`` episodes are not scored, as in
``evaluation.run.EvalReport``): ``d_t = success_B(t) - success_A(t)``, a rate in [-1, 1]. Reported:

- success of each on the common tasks (episodes pooled) with its 95% interval: Wilson with one
  episode per task, a bootstrap over tasks (a task's episodes resampled together) with more;
- the difference, ``mean_t d_t``, with a 95% paired bootstrap interval (tasks resampled with
  replacement, seeded, so the same files give the same interval);
- tasks better / worse / tied, and the exact two-sided **sign test** on better vs worse
  (H0: a task is as likely to get better as worse);
- the two-sided **sign-flip permutation test** of ``mean_t d_t`` (H0: the labels A and B are
  exchangeable within each task): exact over all ``2^n`` sign patterns of the ``n`` non-zero
  ``d_t`` when ``n <= 16``, else 20,000 seeded random patterns;
- pass@k of each, unbiased (``1 - C(n-c, k) / C(n, k)`` per task, averaged), for the
  largest ``k > 1`` that every common task has in both evaluations;
- the same better/worse counts and successes per site and per template;
- the tasks of each evaluation with no scored episode (env errors only), named, not dropped;
- for tasks of the embedded suite (``compare_files``), the constant-answer baseline of the
  common tasks, overall and per template (``sources.embedded.guess``).

The statistics themselves live in ``webagent_r1.stats``.

``webagent-r1 compare-evals A B [C ...]`` compares B, C, ... each against A.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webagent_r1.errors import LoadError
from webagent_r1.inputs import parse_json, read_text
from webagent_r1.report.load import ReportError, read_jsonl_rows
from webagent_r1.report.markdown import md_table
from webagent_r1.sources.embedded.guess import baseline_line, baseline_of_ids
from webagent_r1.stats import (
    bootstrap_interval,
    pass_at_k,
    sign_flip_p,
    sign_test_p,
    success_interval,
)

__all__ = [
    "EvalOutcomes",
    "GroupDiff",
    "PairedComparison",
    "compare_files",
    "compare_paired",
    "load_outcomes",
    "outcome_rows",
    "write_outcomes",
    "render_paired_markdown",
    "to_json",
    "numerics_notes",
    "uncounted_notes",
]


@dataclass
class EvalOutcomes:
    """Successes per task of one evaluation."""

    label: str
    source: Path
    """The trajectory file read."""
    outcomes: dict[str, list[int]]
    """``task_id -> [1 or 0 per scored episode]``, in file order."""
    site: dict[str, str]
    template: dict[str, str]
    env_errors: int = 0
    uncounted: int = 0
    """Successes not counted because the episode did not end by itself (``require_exit``)."""
    unscored: list[str] = field(default_factory=list)
    """Tasks whose every episode was an env error (no outcome to compare)."""
    problems: list[str] = field(default_factory=list)
    numerics: str | None = None
    """The precision its policy sampled in ('cpu, bf16 autocast'), from the ``eval.json``
    beside the trajectories; None when that does not say."""


def _trajectory_file(path: Path, max_turns: int | None) -> Path:
    """The trajectory JSONL of ``path``: the file itself, or one named by an eval folder."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise ReportError(f"{str(path)!r} not found: pass an eval folder or a trajectory JSONL")
    ej = path / "eval.json"
    if not ej.is_file():
        raise ReportError(
            f"{str(path)!r} has no eval.json: pass the --out-dir of `webagent-r1 eval` or a "
            "trajectory JSONL file (e.g. RUN/rl/eval/step-000012.jsonl)"
        )
    try:  # as the loaders read JSON: UTF-8 or UTF-16, nesting bounded
        d = parse_json(read_text(ej, LoadError), str(ej), LoadError)
    except LoadError as e:
        raise ReportError(f"{ej}: cannot read it as JSON ({e})") from None
    listed = d.get("results") if isinstance(d, dict) else None
    results = [
        r
        for r in (listed if isinstance(listed, list) else [])
        if isinstance(r, dict)
        and isinstance(r.get("trajectories"), str)
        and isinstance(r.get("max_turns", 0), int)
    ]
    if not results:
        raise ReportError(f"{ej}: no result names its trajectory file ('trajectories')")
    if max_turns is not None:
        results = [r for r in results if r.get("max_turns") == max_turns]
        if not results:
            raise ReportError(f"{ej}: no result with max_turns {max_turns}")
    # The largest turn budget of a test-time-scaling sweep, as `eval --out` keeps.
    best = max(results, key=lambda r: r.get("max_turns") or 0)
    f = path / best["trajectories"]
    if not f.is_file():
        raise ReportError(f"{ej} names {best['trajectories']!r}, which is not in {str(path)!r}")
    return f


def _read_rows(
    path: str | Path, max_turns: int | None
) -> tuple[Path, list[dict[str, Any]], list[str]]:
    """The trajectory file of ``path``, its rows, and the problems noticed reading them."""
    f = _trajectory_file(Path(path), max_turns)
    problems: list[str] = []
    try:
        rows = read_jsonl_rows(f, problems, str(f))
    except (OSError, ValueError) as e:  # unreadable, or not UTF-8 text
        raise ReportError(f"{f}: cannot read it as trajectory JSONL ({e})") from None
    return f, rows, problems


def load_outcomes(
    path: str | Path, label: str, max_turns: int | None = None, require_exit: bool = False
) -> EvalOutcomes:
    """Read the per-task successes of an eval folder or a trajectory JSONL file.

    With ``require_exit`` a success counts only when its episode ended by itself (the agent's
    ``exit``, or the page ending it, e.g. MiniWoB++); one that reached the right end state and
    ran on to the turn limit (status ``max_turns``) counts as a failure
    (``EvalOutcomes.uncounted``).

    Raises:
        ReportError: nothing readable there, or no scored episode in it.
    """
    f, rows, problems = _read_rows(path, max_turns)
    out = EvalOutcomes(label, f, defaultdict(list), {}, {}, problems=problems)
    bad = 0
    errored: set[str] = set()
    for r in rows:
        tid, reward = r.get("task_id"), r.get("reward")
        if (
            not isinstance(tid, str)
            or isinstance(reward, bool)
            or not isinstance(reward, int | float)
            or not math.isfinite(reward)
        ):
            bad += 1
            continue
        if r.get("status") == "env_error":
            out.env_errors += 1
            errored.add(tid)
            continue
        ok = reward == 1.0
        if ok and require_exit and r.get("status") == "max_turns":
            ok = False
            out.uncounted += 1
        out.outcomes[tid].append(int(ok))
        task = (r.get("info") or {}).get("task") if isinstance(r.get("info"), dict) else None
        task = task if isinstance(task, dict) else {}
        out.site[tid] = str(task.get("site") or tid.split(".", 1)[0])
        out.template[tid] = str(task.get("template") or tid.split("/", 1)[0])
    if bad:
        problems.append(f"{f}: skipped {bad} row(s) without a task_id and a finite reward")
    if not out.outcomes:
        raise ReportError(f"{f}: no scored episode (task_id and reward) in it")
    out.outcomes = dict(out.outcomes)
    out.unscored = sorted(errored - set(out.outcomes))
    out.numerics = _eval_numerics(f.parent / "eval.json")
    return out


_OUTCOME_INFO = ("answer_shown",)
"""Keys of a trajectory's ``info`` an outcome row keeps besides the task's site and template."""


def outcome_rows(
    path: str | Path, max_turns: int | None = None
) -> tuple[Path, list[dict[str, Any]]]:
    """One small row per episode of an evaluation: what a paired comparison reads of it;
    returned with the trajectory file read.

    Each row keeps ``task_id``, ``group_id``, ``reward``, ``status`` (so ``--require-exit``
    still applies), ``num_turns``, and of ``info`` the task's site, template and intent and
    ``answer_shown``; it drops the turns (prompts, completions, pages). ``compare-evals`` and
    ``compare-arms`` read a file of these rows as they read the trajectories, so an
    evaluation can be published beside a results file (about 70 KB for 240 episodes) and
    paired against later.
    Rows without a ``task_id`` are dropped, as ``load_outcomes`` would skip them.

    Raises:
        ReportError: nothing readable there.
    """
    f, rows, _ = _read_rows(path, max_turns)
    out = []
    for r in rows:
        if not isinstance(r.get("task_id"), str):
            continue
        info = r.get("info") if isinstance(r.get("info"), dict) else {}
        task = info.get("task") if isinstance(info.get("task"), dict) else {}
        keep: dict[str, Any] = {
            "task": {k: task[k] for k in ("site", "template", "intent") if k in task}
        }
        keep.update({k: info[k] for k in _OUTCOME_INFO if k in info})
        turns = r.get("turns")
        out.append(
            {
                "task_id": r["task_id"],
                "group_id": r.get("group_id"),
                "reward": r.get("reward"),
                "status": r.get("status"),
                "num_turns": len(turns) if isinstance(turns, list) else r.get("num_turns"),
                "info": keep,
            }
        )
    if not out:
        raise ReportError(f"{f}: no episode with a task_id in it")
    return f, out


def write_outcomes(
    path: str | Path, out: str | Path, max_turns: int | None = None
) -> list[dict[str, Any]]:
    """``webagent-r1 outcomes``: the ``outcome_rows`` of an evaluation written to ``dest`` as
    JSONL at ``out`` (through a temporary file, so a kill leaves the old file or the new);
    the rows.

    Raises:
        ReportError: nothing readable there, or ``out`` is the trajectory file read.
        OSError: ``out`` cannot be written.
    """
    dest = Path(out)
    read, rows = outcome_rows(path, max_turns)
    if dest.exists() and dest.resolve() == read.resolve():
        raise ReportError(f"--out {out} is the evaluation's trajectory file: write elsewhere")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.replace(dest)
    return rows


@dataclass
class GroupDiff:
    """One site's or template's row: successes of A and B, tasks better and worse in B."""

    name: str
    tasks: int
    ok_a: int
    n_a: int
    ok_b: int
    n_b: int
    better: int
    worse: int


@dataclass
class PairedComparison:
    """B against A on the tasks both evaluated (fractions in [0, 1])."""

    a: str
    b: str
    tasks: int
    only_a: int
    only_b: int
    ok_a: int
    n_a: int
    ok_b: int
    n_b: int
    ci_a: tuple[float, float]
    """95% interval of A's success (``ci_method``)."""
    ci_b: tuple[float, float]
    ci_method: str
    """``wilson`` (one episode per task) or ``task-bootstrap`` (several)."""
    diff: float
    """``mean_t d_t``: B's success minus A's, tasks weighted equally."""
    diff_ci: tuple[float, float]
    better: int
    worse: int
    tied: int
    sign_p: float
    flip_p: float
    pass_a: float | None
    """Unbiased pass@k of A on the common tasks; None when k < 2."""
    pass_b: float | None
    k: int
    """The fewest episodes of a common task in either evaluation (the k of pass@k)."""
    by_site: list[GroupDiff]
    by_template: list[GroupDiff]
    unscored_a: list[str] = field(default_factory=list)
    """Tasks of A with no scored episode (env errors only); not compared."""
    unscored_b: list[str] = field(default_factory=list)
    require_exit: bool = False
    """Only successes whose episode ended by itself were counted (``load_outcomes``)."""
    uncounted_a: int = 0
    """Successes of A's file not counted under ``require_exit``."""
    uncounted_b: int = 0
    guess: dict[str, Any] | None = None
    """The constant-answer baseline of the common tasks
    (``sources.embedded.guess.Baseline.to_dict``), when they are embedded tasks and
    ``compare_files`` made the comparison."""

    @property
    def success_a(self) -> float:
        return self.ok_a / self.n_a if self.n_a else 0.0

    @property
    def success_b(self) -> float:
        return self.ok_b / self.n_b if self.n_b else 0.0


def _rate(xs: list[int]) -> float:
    return sum(xs) / len(xs)


def _groups(
    a: EvalOutcomes, b: EvalOutcomes, tasks: list[str], key: dict[str, str]
) -> list[GroupDiff]:
    rows: dict[str, GroupDiff] = {}
    for t in tasks:
        name = key.get(t, "?")
        g = rows.setdefault(name, GroupDiff(name, 0, 0, 0, 0, 0, 0, 0))
        oa, ob = a.outcomes[t], b.outcomes[t]
        g.tasks += 1
        g.ok_a, g.n_a = g.ok_a + sum(oa), g.n_a + len(oa)
        g.ok_b, g.n_b = g.ok_b + sum(ob), g.n_b + len(ob)
        d = _rate(ob) - _rate(oa)
        g.better += d > 0
        g.worse += d < 0
    return [rows[k] for k in sorted(rows)]


def compare_paired(a: EvalOutcomes, b: EvalOutcomes, seed: int = 0) -> PairedComparison:
    """B against A, task by task, on the tasks both scored.

    Raises:
        ReportError: the two share no task.
    """
    tasks = sorted(set(a.outcomes) & set(b.outcomes))
    if not tasks:
        raise ReportError(
            f"{a.label} and {b.label} share no task: compare evaluations of the same tasks "
            "(same config, split and --subset)"
        )
    diffs = [_rate(b.outcomes[t]) - _rate(a.outcomes[t]) for t in tasks]
    better, worse = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    k = min(min(len(a.outcomes[t]), len(b.outcomes[t])) for t in tasks)
    pass_a = pass_at_k({t: a.outcomes[t] for t in tasks}, k)[0] if k > 1 else None
    pass_b = pass_at_k({t: b.outcomes[t] for t in tasks}, k)[0] if k > 1 else None
    ci_a, method_a = success_interval([(sum(a.outcomes[t]), len(a.outcomes[t])) for t in tasks])
    ci_b, method_b = success_interval([(sum(b.outcomes[t]), len(b.outcomes[t])) for t in tasks])
    method = method_a if method_a == method_b else "task-bootstrap"
    return PairedComparison(
        a=a.label,
        b=b.label,
        tasks=len(tasks),
        only_a=len(set(a.outcomes) - set(tasks)),
        only_b=len(set(b.outcomes) - set(tasks)),
        ok_a=sum(sum(a.outcomes[t]) for t in tasks),
        n_a=sum(len(a.outcomes[t]) for t in tasks),
        ok_b=sum(sum(b.outcomes[t]) for t in tasks),
        n_b=sum(len(b.outcomes[t]) for t in tasks),
        ci_a=ci_a,
        ci_b=ci_b,
        ci_method=method,
        diff=sum(diffs) / len(diffs),
        diff_ci=bootstrap_interval(diffs, seed),
        better=better,
        worse=worse,
        tied=len(tasks) - better - worse,
        sign_p=sign_test_p(better, worse),
        flip_p=sign_flip_p(diffs, seed),
        pass_a=pass_a,
        pass_b=pass_b,
        k=k,
        by_site=_groups(a, b, tasks, a.site | b.site),
        by_template=_groups(a, b, tasks, a.template | b.template),
        unscored_a=list(a.unscored),
        unscored_b=list(b.unscored),
        uncounted_a=a.uncounted,
        uncounted_b=b.uncounted,
    )


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _pts(x: float) -> str:
    return f"{100 * x:+.1f}"


def _succ(ok: int, n: int, ci: tuple[float, float]) -> str:
    lo, hi = ci
    return f"{ok}/{n} = {_pct(ok / n if n else 0.0)} ({_pct(lo)}-{_pct(hi)})"


def render_paired_markdown(comparisons: Sequence[PairedComparison]) -> str:
    """Markdown: one summary table, then per-site and per-template rows of each comparison."""
    lines = ["# Paired comparison of evaluations", ""]
    body = []
    for c in comparisons:
        lo, hi = c.diff_ci
        pk = (
            f"pass@{c.k}: {_pct(c.pass_a)} → {_pct(c.pass_b)}"
            if c.pass_a is not None and c.pass_b is not None
            else "–"
        )
        body.append(
            [
                f"{c.b} vs {c.a}",
                str(c.tasks),
                _succ(c.ok_a, c.n_a, c.ci_a),
                _succ(c.ok_b, c.n_b, c.ci_b),
                f"{_pts(c.diff)} ({_pts(lo)} to {_pts(hi)})",
                f"{c.better} / {c.worse} / {c.tied}",
                f"{c.sign_p:.3f}",
                f"{c.flip_p:.3f}",
                pk,
            ]
        )
    header = [
        "B vs A",
        "tasks",
        "success A (95% CI)",
        "success B (95% CI)",
        "B − A, points (95% bootstrap CI)",
        "tasks better / worse / tied",
        "sign test p",
        "sign-flip p",
        "pass@k, A → B",
    ]
    lines += md_table(header, body)
    lines += [
        "",
        "Tasks weighted equally; p-values two-sided. A difference is clear when its interval "
        "excludes 0 and p < 0.05. Success intervals: "
        + (
            "bootstrap over tasks (a task's episodes resampled together)."
            if any(c.ci_method == "task-bootstrap" for c in comparisons)
            else "Wilson (one episode per task)."
        ),
    ]
    for c in comparisons:
        notes = []
        if c.only_a or c.only_b:
            notes.append(
                f"Compared on the {c.tasks} common tasks; {c.only_a} only in {c.a}, "
                f"{c.only_b} only in {c.b}."
            )
        for label, unscored in ((c.a, c.unscored_a), (c.b, c.unscored_b)):
            if unscored:
                notes.append(
                    f"{len(unscored)} task(s) of {label} had no scored episode (env errors "
                    f"only) and are not compared: {', '.join(unscored[:10])}"
                    + (" …" if len(unscored) > 10 else "")
                    + "."
                )
        lines += ["", f"## {c.b} vs {c.a}", *(["", *notes] if notes else [])]
        for title, rows in (("site", c.by_site), ("template", c.by_template)):
            guess = c.guess["by_template"] if c.guess and title == "template" else None
            lines += [""]
            lines += md_table(
                [title, "tasks", "A", "B", "better / worse"]
                + (["constant answer"] if guess is not None else []),
                [
                    [
                        g.name,
                        str(g.tasks),
                        f"{g.ok_a}/{g.n_a}",
                        f"{g.ok_b}/{g.n_b}",
                        f"{g.better} / {g.worse}",
                    ]
                    + ([_guess_cell(guess.get(g.name))] if guess is not None else [])
                    for g in rows
                ],
            )
        if c.guess:
            lines += [
                "",
                baseline_line(c.guess["successes"], c.guess["tasks"])
                + " (per template: tasks its guess passes; n/a: no guess, docs/grading.md).",
            ]
    return "\n".join(lines) + "\n"


def _guess_cell(row: dict[str, Any] | None) -> str:
    """A template's constant-answer baseline as ``successes/tasks``, n/a without a guess."""
    if row is None or row.get("guess") is None:
        return "n/a"
    return f"{row['successes']}/{row['tasks']}"


def compare_files(
    paths: Sequence[str | Path],
    labels: Sequence[str] | None = None,
    max_turns: int | None = None,
    seed: int = 0,
    require_exit: bool = False,
) -> tuple[list[PairedComparison], list[str]]:
    """Compare ``paths[1:]`` each against ``paths[0]``; also returns the problems noticed.
    ``require_exit``: only successes whose episode ended by itself count (``load_outcomes``).

    Comparisons of embedded tasks get the constant-answer baseline of their common tasks
    (``PairedComparison.guess``).

    Raises:
        ReportError: fewer than two paths, labels that do not match, or unreadable inputs.
    """
    if len(paths) < 2:
        raise ReportError("pass at least two evaluations: the baseline first, then the others")
    if labels and len(labels) != len(paths):
        raise ReportError(f"{len(labels)} label(s) for {len(paths)} evaluation(s): give one each")
    names = list(labels) if labels else [_default_label(Path(p)) for p in paths]
    outs = [load_outcomes(p, n, max_turns, require_exit) for p, n in zip(paths, names, strict=True)]
    problems = [p for o in outs for p in o.problems] + uncounted_notes(outs)
    problems += numerics_notes(outs)
    problems += [
        f"{o.label}: {o.env_errors} env_error episode(s) not scored"
        + (f", {len(o.unscored)} task(s) with no scored episode" if o.unscored else "")
        for o in outs
        if o.env_errors
    ]
    comparisons = [compare_paired(outs[0], o, seed) for o in outs[1:]]
    for c in comparisons:
        c.require_exit = require_exit
    for c, o in zip(comparisons, outs[1:], strict=True):
        guess = baseline_of_ids(sorted(set(outs[0].outcomes) & set(o.outcomes)))
        c.guess = guess.to_dict() if guess is not None else None
    return comparisons, problems


def _eval_numerics(path: Path) -> str | None:
    """``numerics`` of an ``eval.json`` (written by ``eval`` with the HF engine), else None."""
    try:
        d = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    n = d.get("numerics") if isinstance(d, dict) else None
    return n if isinstance(n, str) else None


def numerics_notes(outs: Sequence[EvalOutcomes]) -> list[str]:
    """One line when the evaluations sampled in different precisions (bf16 autocast on one
    machine, fp32 on another): their difference is partly the precision's."""
    kinds = sorted({o.numerics for o in outs if o.numerics})
    if len(kinds) < 2:
        return []
    who = "; ".join(f"{o.label}: {o.numerics}" for o in outs if o.numerics)
    return [f"the evaluations sampled in different numerics ({who}): precision differs too"]


def uncounted_notes(outs: Sequence[EvalOutcomes]) -> list[str]:
    """One line per evaluation whose successes at the turn limit were not counted."""
    return [
        f"{o.label}: {o.uncounted} success(es) in the file without exit (at the turn limit) "
        "counted as failures (--require-exit)"
        for o in outs
        if o.uncounted
    ]


def _default_label(p: Path) -> str:
    """A short name: the folder, or ``parent/file`` for a trajectory file."""
    return p.name if p.is_dir() else f"{p.parent.name}/{p.stem}"


def to_json(comparisons: Sequence[PairedComparison]) -> list[dict[str, Any]]:
    """JSON-ready rows (fractions in [0, 1])."""
    out = []
    for c in comparisons:
        d = {k: v for k, v in vars(c).items() if k not in ("by_site", "by_template")}
        d["success_a"], d["success_b"] = c.success_a, c.success_b
        d["by_site"] = [vars(g) for g in c.by_site]
        d["by_template"] = [vars(g) for g in c.by_template]
        out.append(d)
    return out
