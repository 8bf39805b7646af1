"""Reading a run folder for the report: every input is optional, every problem is named.

A run folder of ``webagent-r1 train`` (see ``train/recipe.py``) holds::

    summary.json                      stages demos/base/bc/rl, success per stage, wall times
    bc/metrics.jsonl                  one row per log call: step, train/loss, bc/heldout_loss …
    rl/metrics.jsonl                  step, rollout/success, rollout/turns, eval/success[/site] …
    rl/eval_history.json              the eval rows again, with step (written after RL)
    rl/eval/step-XXXXXX.jsonl         evaluation trajectories (Trajectory.to_dict() per line)
    rl/rollouts/step-XXXXXX-rankR.jsonl   training rollouts of step XXXXXX (0-based)

and a folder of ``webagent-r1 eval --out-dir DIR`` holds ``eval.json`` (one result per turn
budget) next to the trajectory files it names. ``eval.json`` is looked for in the folder and
its direct subfolders (``<run>/eval/eval.json``, ``<run>/tts/eval.json`` …).

Readers never raise on a malformed file: they record the problem in ``RunData.problems`` and
skip it, so that a report can be made of a run still being written (a half-written last line)
or of a partly copied folder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webagent_r1.errors import LoadError
from webagent_r1.inputs import parse_json, read_jsonl, read_text
from webagent_r1.report.failures import (
    LOOP_REPEATS,
    FailureTable,
    embedded_template_kinds,
    template_of,
)
from webagent_r1.rollout.trajectories import read_trajectory_records
from webagent_r1.types import Trajectory

__all__ = [
    "EpisodeStats",
    "EvalFile",
    "EvalResult",
    "GROUP_KEYS",
    "ReportError",
    "RunData",
    "SITE_LABELS",
    "SITE_ORDER",
    "TrajectorySource",
    "collect_failures",
    "eval_rows",
    "failure_tables",
    "load_run",
    "metric_series",
    "num",
    "bad_lines_note",
    "read_episode_stats",
    "read_jsonl_rows",
    "rows_by_step",
    "scan_trajectories",
    "trajectory_sources",
]

SITE_ORDER: tuple[str, ...] = (
    "reddit",
    "gitlab",
    "shopping_admin",
    "map",
    "shopping",
    "cross-site",
)
"""Sites in the column order of the paper's tables."""
SITE_LABELS: dict[str, str] = {
    "reddit": "Reddit",
    "gitlab": "GitLab",
    "shopping_admin": "CMS",
    "map": "Map",
    "shopping": "OSS",
    "cross-site": "Cross-site",
}
"""Column header of each site, as in the paper (unknown sites keep their own name)."""

_EVAL_FILE = re.compile(r"^step-(\d+)\.jsonl$")
_ROLLOUT_FILE = re.compile(r"^step-(\d+)-rank(\d+)\.jsonl$")


GROUP_KEYS = ("train/groups_used", "train/groups_skipped_equal", "train/groups_skipped_small")
"""M-GRPO metrics whose sum is the groups a step rolled out; the first, those trained on."""


class ReportError(ValueError):
    """The folder has nothing a report can be made of (the message says what was looked for)."""


@dataclass
class EvalResult:
    """One turn budget of an ``eval.json`` (fractions in [0, 1])."""

    max_turns: int
    success: float
    ci: tuple[float, float] | None = None
    pass_at_k: float | None = None
    episodes: int | None = None
    by_site: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``site -> {"success", "ci": [lo, hi], "n"}``."""
    by_kind: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``kind -> {"success", "ci": [lo, hi], "n"}``."""
    by_template: dict[str, dict[str, Any]] = field(default_factory=dict)
    """``template -> {"success", "ci": [lo, hi], "n"}``."""
    trajectories: Path | None = None
    """The trajectory file of this budget, resolved against the folder of ``eval.json``."""
    ci_method: str | None = None
    """How ``ci`` was made: ``wilson`` or ``task-bootstrap`` (None in older files)."""
    unscored_tasks: list[str] = field(default_factory=list)
    """Tasks with no scored episode (env errors only), left out of the rates."""


@dataclass
class EvalFile:
    """An ``eval.json`` written by ``webagent-r1 eval --out-dir DIR``."""

    path: Path
    model: str = ""
    split: str = ""
    samples: int | None = None
    seed: int | None = None
    results: list[EvalResult] = field(default_factory=list)
    """Sorted by ``max_turns``."""
    guess_baseline: dict[str, Any] | None = None
    """``{"successes", "tasks", "by_template": {name: {"guess", "successes", "tasks"}}}``:
    the constant-answer baseline of the tasks (``sources.embedded.guess``; embedded suite only)."""


@dataclass
class EpisodeStats:
    """Turns and outcome of the scored episodes of one trajectory file (env errors left out)."""

    label: str
    path: Path
    turns: list[int] = field(default_factory=list)
    success: list[bool] = field(default_factory=list)
    ended: list[bool] = field(default_factory=list)
    """Whether each episode ended before the turn limit (status ``done``: the agent's exit,
    or the page ending the episode)."""
    bad_lines: int = 0
    """Lines that were not a trajectory (e.g. a half-written last line)."""
    first_bad: str = ""
    """The loaders' one-line error of the first of them (``file:line: …``)."""

    @property
    def bad_note(self) -> str:
        """``N line(s) that were not trajectories (first: file:line: why)``."""
        return bad_lines_note(self.bad_lines, self.first_bad)


@dataclass
class RunData:
    """Everything found in a run or evaluation folder; missing parts are empty or None."""

    root: Path
    summary: dict[str, Any] | None = None
    bc_metrics: list[dict[str, Any]] = field(default_factory=list)
    rl_metrics: list[dict[str, Any]] = field(default_factory=list)
    rl_eval_history: list[dict[str, Any]] = field(default_factory=list)
    """``rl/eval_history.json`` (the eval rows of RL with ``step``)."""
    rl_eval_files: list[tuple[int, Path]] = field(default_factory=list)
    """``(step, path)`` of ``rl/eval/step-XXXXXX.jsonl``, by step."""
    rollout_files: list[tuple[int, int, Path]] = field(default_factory=list)
    """``(step, rank, path)`` of ``rl/rollouts/step-XXXXXX-rankR.jsonl``, by step and rank."""
    eval_files: list[EvalFile] = field(default_factory=list)
    guess_baseline: dict[str, Any] | None = None
    """``summary.json``'s constant-answer baseline of the recipe's evaluation subset (as
    ``EvalFile.guess_baseline``)."""
    problems: list[str] = field(default_factory=list)
    """Inputs that exist but could not be (fully) read, one sentence each."""

    @property
    def usable(self) -> bool:
        """Whether anything a report can show was found."""
        return bool(
            self.summary
            or self.bc_metrics
            or self.rl_metrics
            or self.rl_eval_history
            or self.rl_eval_files
            or self.rollout_files
            or any(ef.results for ef in self.eval_files)
        )

    def rel(self, path: Path) -> str:
        """``path`` relative to the folder (as written in the report)."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)


def read_jsonl_rows(
    path: Path, problems: list[str] | None = None, name: str | None = None
) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, skipping (and counting into ``problems``) bad lines.

    Read by ``inputs.read_jsonl`` as every loader reads (``\\n`` separates records; UTF-8
    or UTF-16 text; nesting bounded), but a line that is not a JSON object (the last line of
    a file being written, say) is skipped instead of raising.

    Raises:
        LoadError: the file is missing, unreadable or not text.
    """
    label = name or str(path)
    skipped: list[str] = []
    records = read_jsonl(path, LoadError, "file", _json_object, skipped=skipped, name=label)
    if skipped and problems is not None:
        problems.append(
            f"{label}: skipped {len(skipped)} line(s) that were not JSON objects "
            f"(first: {skipped[0]})"
        )
    return [row for _, row in records]


def _json_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise LoadError(f"a line must hold one JSON object, got {type(value).__name__}")
    return value


def bad_lines_note(count: int, first: str) -> str:
    """``N line(s) that were not trajectories`` with the first one's error, if known."""
    note = f"{count} line(s) that were not trajectories"
    return f"{note} (first: {first})" if first else note


def read_episode_stats(path: Path, label: str) -> EpisodeStats:
    """Turns per episode and success of a trajectory JSONL file.

    Each line is read and checked as the loaders read it (``read_trajectory_records``): a
    ``reward`` of ``"1"`` or a NaN log-prob is not an episode, it is a bad line, counted with
    its one-line error. Episodes with ``status == "env_error"`` are left out, as in
    ``EvalReport``'s rates.

    Raises:
        OSError: the file is missing or cannot be read.
        LoadError: the file is not text (latin-1 …).
    """
    st = EpisodeStats(label=label, path=path)
    if not path.is_file():
        raise FileNotFoundError(f"no file {str(path)!r}")
    skipped: list[str] = []
    for _, traj in read_trajectory_records(path, skipped=skipped):
        if traj.status == "env_error":
            continue
        st.turns.append(len(traj.turns))
        st.success.append(traj.reward == 1.0)
        st.ended.append(traj.status != "max_turns")
    st.bad_lines = len(skipped)
    st.first_bad = skipped[0] if skipped else ""
    return st


def _read_json(path: Path, problems: list[str], rel: str) -> Any:
    try:  # as the loaders read JSON: UTF-8 or UTF-16, nesting bounded, one-line errors
        return parse_json(read_text(path, LoadError), rel, LoadError)
    except LoadError as e:
        problems.append(f"{rel}: unreadable ({e}); skipped")
        return None


def _ci(x: Any) -> tuple[float, float] | None:
    if isinstance(x, (list, tuple)) and len(x) == 2 and all(_is_num(v) for v in x):
        return float(x[0]), float(x[1])
    return None


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == x


def _groups(d: Any) -> dict[str, dict[str, Any]]:
    """``by_site`` / ``by_kind`` of an eval result, keeping the well-formed entries."""
    out: dict[str, dict[str, Any]] = {}
    if not isinstance(d, dict):
        return out
    for name, g in d.items():
        if isinstance(g, dict) and _is_num(g.get("success")):
            out[str(name)] = {
                "success": float(g["success"]),
                "ci": _ci(g.get("ci")),
                "n": int(g["n"]) if _is_num(g.get("n")) else None,
            }
    return out


def parse_guess_baseline(d: Any, problems: list[str], rel: str) -> dict[str, Any] | None:
    """``guess_baseline`` of an eval.json or summary.json, keeping the well-formed template
    rows; None (a problem noted) when it is malformed, None quietly when it is absent."""
    if d is None:
        return None
    if not (isinstance(d, dict) and _is_num(d.get("successes")) and _is_num(d.get("tasks"))):
        problems.append(f"{rel}: guess_baseline lacks successes or tasks; skipped")
        return None
    rows = d.get("by_template") if isinstance(d.get("by_template"), dict) else {}
    by_template = {
        str(name): {
            "guess": g["guess"] if isinstance(g.get("guess"), str) else None,
            "successes": int(g["successes"]),
            "tasks": int(g["tasks"]),
        }
        for name, g in rows.items()
        if isinstance(g, dict) and _is_num(g.get("successes")) and _is_num(g.get("tasks"))
    }
    return {"successes": int(d["successes"]), "tasks": int(d["tasks"]), "by_template": by_template}


def parse_eval_file(path: Path, d: Any, problems: list[str], rel: str) -> EvalFile | None:
    """An ``EvalFile`` from the parsed ``eval.json`` ``d`` (None when it has no results)."""
    if not isinstance(d, dict) or not isinstance(d.get("results"), list):
        problems.append(f"{rel}: no 'results' list; skipped")
        return None
    ef = EvalFile(
        path=path,
        model=str(d.get("model", "")),
        split=str(d.get("split", "")),
        samples=d["samples"] if _is_num(d.get("samples")) else None,
        seed=d["seed"] if _is_num(d.get("seed")) else None,
        guess_baseline=parse_guess_baseline(d.get("guess_baseline"), problems, rel),
    )
    for i, r in enumerate(d["results"]):
        if not (isinstance(r, dict) and _is_num(r.get("max_turns")) and _is_num(r.get("success"))):
            problems.append(f"{rel}: results[{i}] lacks max_turns or success; skipped")
            continue
        traj = r.get("trajectories")
        ef.results.append(
            EvalResult(
                max_turns=int(r["max_turns"]),
                success=float(r["success"]),
                ci=_ci(r.get("ci")),
                pass_at_k=float(r["pass_at_k"]) if _is_num(r.get("pass_at_k")) else None,
                episodes=int(r["episodes"]) if _is_num(r.get("episodes")) else None,
                by_site=_groups(r.get("by_site")),
                by_kind=_groups(r.get("by_kind")),
                by_template=_groups(r.get("by_template")),
                trajectories=path.parent / traj if isinstance(traj, str) and traj else None,
                ci_method=r["ci_method"] if isinstance(r.get("ci_method"), str) else None,
                unscored_tasks=[
                    str(t) for t in r.get("unscored_tasks") or [] if isinstance(t, str | int)
                ],
            )
        )
    ef.results.sort(key=lambda r: r.max_turns)
    if not ef.results:
        problems.append(f"{rel}: no usable results; skipped")
        return None
    return ef


def _find_eval_json(root: Path) -> list[Path]:
    found = [root / "eval.json"] if (root / "eval.json").is_file() else []
    for sub in sorted(p for p in root.iterdir() if p.is_dir()):
        if (sub / "eval.json").is_file():
            found.append(sub / "eval.json")
    return found


def load_run(run_dir: str | Path) -> RunData:
    """Read every known input of ``run_dir`` that exists.

    Raises:
        FileNotFoundError: ``run_dir`` does not exist or is not a folder.
    """
    root = Path(run_dir)
    if not root.exists():
        raise FileNotFoundError(f"run folder {str(root)!r} not found")
    if not root.is_dir():
        raise FileNotFoundError(f"{str(root)!r} is not a folder: pass a run or evaluation folder")
    data = RunData(root=root)
    probs = data.problems

    p = root / "summary.json"
    if p.is_file():
        s = _read_json(p, probs, "summary.json")
        if isinstance(s, dict) and isinstance(s.get("stages"), dict):
            data.summary = s
            data.guess_baseline = parse_guess_baseline(
                s.get("guess_baseline"), probs, "summary.json"
            )
        elif s is not None:
            probs.append("summary.json: no 'stages' object; skipped")

    for stage in ("bc", "rl"):
        p = root / stage / "metrics.jsonl"
        if p.is_file():
            try:
                rows = read_jsonl_rows(p, probs, f"{stage}/metrics.jsonl")
            except LoadError as e:
                probs.append(f"{stage}/metrics.jsonl: unreadable ({e}); skipped")
                rows = []
            rows = [r for r in rows if _is_num(r.get("step"))]
            setattr(data, f"{stage}_metrics", rows)

    p = root / "rl" / "eval_history.json"
    if p.is_file():
        h = _read_json(p, probs, "rl/eval_history.json")
        if isinstance(h, list):
            data.rl_eval_history = [r for r in h if isinstance(r, dict) and "step" in r]

    folder = root / "rl" / "eval"
    if folder.is_dir():
        for f in folder.iterdir():
            if m := _EVAL_FILE.match(f.name):
                data.rl_eval_files.append((int(m[1]), f))
        data.rl_eval_files.sort()
    folder = root / "rl" / "rollouts"
    if folder.is_dir():
        for f in folder.iterdir():
            if m := _ROLLOUT_FILE.match(f.name):
                data.rollout_files.append((int(m[1]), int(m[2]), f))
        data.rollout_files.sort()

    for p in _find_eval_json(root):
        rel = data.rel(p)
        d = _read_json(p, probs, rel)
        if d is not None and (ef := parse_eval_file(p, d, probs, rel)) is not None:
            data.eval_files.append(ef)
    return data


def num(x: Any) -> float | None:
    """``x`` as a float when it is a number (not a bool), else None."""
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def metric_series(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """``(step, value)`` of ``key``, one per step (the last logged wins), by step."""
    by_step: dict[float, float] = {}
    for r in rows:
        v = num(r.get(key))
        if v is not None:
            by_step[float(r["step"])] = v
    return sorted(by_step.items())


def rows_by_step(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Rows with a number under ``key``, one per step (the last logged wins: a step redone
    after a resume replaces the killed run's), by step."""
    last = {int(r["step"]): r for r in rows if num(r.get(key)) is not None}
    return [last[s] for s in sorted(last)]


def eval_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with ``eval/success``, one per step (the last one logged wins, as after a resume)."""
    return rows_by_step(rows, "eval/success")


@dataclass
class TrajectorySource:
    """Trajectory files that hold one set of episodes (an evaluation, a step's rollouts)."""

    label: str
    files: list[Path]


def trajectory_sources(
    data: RunData, rollouts: bool = True
) -> tuple[list[TrajectorySource], list[str]]:
    """The episodes of the latest policy a folder holds, one source per set.

    In order: the last RL evaluation (``rl/eval/step-S.jsonl``), the rollouts of the last RL
    step (``rl/rollouts/step-S-rank*.jsonl``, every rank; the update logged at step S + 1),
    and, per ``eval.json``, the trajectory file of its largest turn budget.

    Args:
        data: the loaded folder.
        rollouts: include the last step's rollouts.

    Returns:
        The sources and one sentence per trajectory file that ``eval.json`` names but that is
        missing.
    """
    out: list[TrajectorySource] = []
    notes: list[str] = []
    if data.rl_eval_files:
        step, path = data.rl_eval_files[-1]
        out.append(TrajectorySource(f"RL eval, step {step}", [path]))
    if rollouts and data.rollout_files:
        last = data.rollout_files[-1][0]
        files = [p for s, _, p in data.rollout_files if s == last]
        out.append(TrajectorySource(f"RL rollouts, step {last + 1}", files))
    for ef in data.eval_files:
        with_file = [r for r in ef.results if r.trajectories is not None]
        if not with_file:
            continue
        r = with_file[-1]
        assert r.trajectories is not None
        if not r.trajectories.is_file():
            notes.append(
                f"`{data.rel(r.trajectories)}` (named by `{data.rel(ef.path)}`) is missing"
            )
            continue
        label = f"eval (max_turns={r.max_turns})"
        if len(data.eval_files) > 1:
            label += f" [{data.rel(ef.path.parent)}]"
        out.append(TrajectorySource(label, [r.trajectories]))
    return out, notes


def scan_trajectories(
    path: Path, on_trajectory: Callable[[Trajectory], Any], errors: list[str] | None = None
) -> int:
    """Call ``on_trajectory`` with each trajectory of a JSONL file, in file order.

    Lines are read and checked as the loaders read them (``read_trajectory_records``); a line
    that is not a trajectory (a half-written last line, a ``reward`` of ``"1"``, a NaN
    log-prob) is skipped, and its one-line error appended to ``errors``.

    Returns:
        How many lines were skipped.

    Raises:
        OSError: the file is missing or cannot be read.
        LoadError: the file is not text (latin-1 …).
    """
    if not path.is_file():
        raise FileNotFoundError(f"no file {str(path)!r}")
    skipped: list[str] = []
    for _, traj in read_trajectory_records(path, skipped=skipped):
        on_trajectory(traj)
    if errors is not None:
        errors.extend(skipped)
    return len(skipped)


def failure_tables(
    data: RunData,
    template: str | None = None,
    loop_repeats: int = LOOP_REPEATS,
    kinds: Mapping[str, str] | None = None,
) -> tuple[list[FailureTable], list[str], set[str]]:
    """Failure kinds of each source of ``trajectory_sources(data)`` (``report.failures``).

    Args:
        data: the folder's inputs.
        template: count only the episodes of this template.
        loop_repeats: times the same action from the same state makes a ``loop``.
        kinds: template name -> task kind; default the embedded suite's.

    Returns:
        The tables (one per source), notes on files that could not be read, and the
        templates of every episode read (whatever ``template`` is).
    """
    kinds = embedded_template_kinds() if kinds is None else kinds
    sources, notes = trajectory_sources(data)
    tables: list[FailureTable] = []
    seen: set[str] = set()

    def add(table: FailureTable, traj: Trajectory) -> None:
        seen.add(template_of(traj, kinds))
        table.add(traj)

    for src in sources:
        table = FailureTable(
            src.label,
            [data.rel(p) for p in src.files],
            kinds=kinds,
            loop_repeats=loop_repeats,
            template=template,
        )
        errors: list[str] = []
        for p in src.files:
            try:
                table.bad_lines += scan_trajectories(p, lambda tr, t=table: add(t, tr), errors)
            except (OSError, LoadError) as e:
                notes.append(f"{data.rel(p)}: unreadable ({e}); skipped")
        table.first_bad = errors[0] if errors else ""
        tables.append(table)
    return tables, notes, seen


def collect_failures(
    target: str | Path,
    template: str | None = None,
    loop_repeats: int = LOOP_REPEATS,
    kinds: Mapping[str, str] | None = None,
) -> tuple[list[FailureTable], list[str]]:
    """Failure tables of a run or ``eval --out-dir`` folder, or of one trajectory JSONL file.

    Args:
        target: the folder or file.
        template: count only the episodes of this template.
        loop_repeats: times the same action from the same state makes a ``loop`` (>= 2).
        kinds: template name -> task kind; default the embedded suite's.

    Returns:
        The tables (one per source, see ``trajectory_sources``; sources whose every episode
        is of another template left out) and notes on what was skipped.

    Raises:
        FileNotFoundError: ``target`` does not exist.
        ReportError: no trajectory file, no readable trajectory, no episode of ``template``,
            or ``loop_repeats`` below 2.
    """
    if loop_repeats < 2:
        raise ReportError(f"the loop threshold must be at least 2, got {loop_repeats}")
    path = Path(target)
    if path.is_file():
        # one file: the only source, labelled with its name
        data = RunData(root=path.parent, rl_eval_files=[(0, path)])
        tables, notes, seen = failure_tables(data, template, loop_repeats, kinds)
        tables[0].label = path.name
    else:
        data = load_run(path)
        tables, notes, seen = failure_tables(data, template, loop_repeats, kinds)
        notes = data.problems + notes
        if not tables:
            raise ReportError(
                f"{str(path)!r} has no trajectory files: expected rl/eval/step-*.jsonl, "
                "rl/rollouts/step-*-rank*.jsonl or an eval.json naming its trajectories"
                + (f" ({'; '.join(notes)})" if notes else "")
            )
    where = str(path)
    if not seen:
        bad = sum(t.bad_lines for t in tables)
        first = next((t.first_bad for t in tables if t.first_bad), "")
        why = [bad_lines_note(bad, first)] if bad else []
        why += [n for n in notes if "unreadable" in n]
        raise ReportError(
            f"no readable trajectory in {where!r}" + (f" ({'; '.join(why)})" if why else "")
        )
    if template is not None:
        tables = [t for t in tables if t.overall.episodes]
        if not tables:
            names = sorted(seen)
            shown = ", ".join(names[:12]) + (" …" if len(names) > 12 else "")
            raise ReportError(f"no episode of template {template!r} in {where!r}; found: {shown}")
    return tables, notes
