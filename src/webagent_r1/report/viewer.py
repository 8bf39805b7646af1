"""A static HTML viewer of the episodes of a run: ``webagent-r1 view RUN_DIR``.

``build_viewer`` finds every trajectory file (``**/*.jsonl``) under a run folder, looks each
episode's task up in the embedded suite, and writes ONE self-contained HTML file (inline CSS
and JS, screenshots as data URIs, no server, no external URL) that lists the episodes with
filters (stage, site, success, template, file, free text over the intent) and expands one on
click to its turns: thinking, action, error, observation summary, screenshot, and the outcome.

Each trajectory file belongs to a stage (``stage_of``): the experts' demonstrations, the base
model's evaluation, each RL evaluation step, each RL step's rollouts, each budget of an
``eval --out-dir`` folder, or else the file itself. Success is counted per stage only: the
page opens on a table of the stages (episodes, successes, success rate each), and the list
shows a success rate only while the episodes it shows come from one stage, since a rate over
the experts' kept demonstrations and a model's evaluations together measures nothing.

The episodes travel as JSON in a ``<script type="application/json">`` tag (``<``, ``>`` and
``&`` escaped as ``\\u003c`` … so model output can never close the tag) and are rendered with
``textContent`` only, never ``innerHTML``: text written by the model stays text. Token ids
are left out (they are most of a trajectory file's size). Files that are not trajectory
files (``metrics.jsonl``) are skipped with a note; a malformed line of a trajectory file is
skipped and counted in the page.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webagent_r1.errors import LoadError
from webagent_r1.inputs import read_jsonl
from webagent_r1.rollout.trajectories import TrajectoryFileError, trajectory_from_value
from webagent_r1.sources.embedded.suite import build_suite, spec_for
from webagent_r1.types import Task, Trajectory, describe_task

__all__ = [
    "NoTrajectoriesError",
    "RunEpisodes",
    "Stage",
    "build_viewer",
    "extract_thinking",
    "load_run",
    "render_html",
    "stage_of",
]

_THINK_OPEN = re.compile(r"<\s*think\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*think\s*>", re.IGNORECASE)
_ANSWER_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
_PLACEHOLDER = re.compile(r"__(TITLE|CSS|JS|DATA)__")
# Per-file problems listed in the page; past this only the count grows.
_MAX_NOTES = 50
# The trajectory files of a run folder (``train/recipe.py``, ``report/load.py``) and of an
# ``eval --out-dir`` folder (``trajectories-t<max_turns>[.partial].jsonl``).
_RL_EVAL_FILE = re.compile(r"^step-(\d+)\.jsonl$")
_ROLLOUT_FILE = re.compile(r"^step-(\d+)-rank(\d+)\.jsonl$")
_BUDGET_FILE = re.compile(r"^trajectories-t(\d+)(\.partial)?\.jsonl$")
_DEMOS_FILE = re.compile(r"^demos.*\.jsonl$")


class NoTrajectoriesError(FileNotFoundError):
    """The run folder holds no trajectory (a user error: printed as one line by the CLI)."""


@dataclass
class Stage:
    """One stage of a run: the episodes of one evaluation, one RL step's rollouts, the
    demonstrations, or one other trajectory file; success is only ever counted per stage."""

    label: str
    """What the stage is, unique in a run (``recipe/seed-0 · evaluation: RL step 10``)."""
    kind: str
    """``demonstrations``, ``evaluation``, ``rollouts`` or ``trajectories`` (any other file)."""
    files: list[str] = field(default_factory=list)
    """Its trajectory files, relative to the run folder."""
    episodes: int = 0
    scored: int = 0
    """Episodes with a reward (``status != "env_error"``, as ``EvalReport``'s rates)."""
    successes: int = 0
    """Scored episodes with reward 1."""

    @property
    def success(self) -> float | None:
        """``successes / scored`` (None without a scored episode)."""
        return self.successes / self.scored if self.scored else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "kind": self.kind,
            "files": self.files,
            "episodes": self.episodes,
            "scored": self.scored,
            "successes": self.successes,
            "success": self.success,
        }


def stage_of(rel: str, demo_files: frozenset[str] = frozenset()) -> tuple[tuple, str, str]:
    """``(sort key, kind, label)`` of the trajectory file at ``rel`` (a posix path relative to
    the run folder), from the file layout of a run or ``eval --out-dir`` folder.

    ``rl/eval/step-S.jsonl`` is the evaluation at RL step S; ``rl/rollouts/step-S-rankR.jsonl``
    the rollouts of step S + 1 (every rank in one stage, as the report numbers them);
    ``base/eval.jsonl`` the base model's evaluation; ``D/trajectories-tN[.partial].jsonl`` the
    evaluation in ``D`` with N turns (unfinished while ``.partial``); ``demos*.jsonl`` and the
    files in ``demo_files`` the experts' demonstrations; any other file is a stage of its own.
    A prefix of folders above these (a run inside an experiment folder) starts the label, so
    that the stages of different runs stay apart. The sort key puts a run's stages in the
    order the recipe runs them: demonstrations, base evaluation, RL by step, other evaluations.
    """
    parts = tuple(rel.split("/"))
    name = parts[-1]

    def at(prefix: tuple[str, ...], rank: int, label: str, kind: str, *order: Any):
        shown = " · ".join(p for p in ("/".join(prefix), label) if p)
        return (prefix, rank, *order), kind, shown

    if parts[-3:-1] == ("rl", "eval") and (m := _RL_EVAL_FILE.match(name)):
        step = int(m[1])
        label = f"evaluation: RL step {step}" + (" (before the first update)" if not step else "")
        return at(parts[:-3], 2, label, "evaluation", step, 0)
    if parts[-3:-1] == ("rl", "rollouts") and (m := _ROLLOUT_FILE.match(name)):
        step = int(m[1])
        return at(parts[:-3], 2, f"rollouts: RL step {step + 1}", "rollouts", step, 1)
    if parts[-2:] == ("base", "eval.jsonl"):
        return at(parts[:-2], 1, "evaluation: base model", "evaluation")
    if m := _BUDGET_FILE.match(name):
        folder = parts[-2] if len(parts) > 1 else ""
        label = "evaluation" + (f": {folder}/" if folder else "") + f" (max_turns={m[1]}"
        label += ", unfinished)" if m[2] else ")"
        return at(parts[:-2], 3, label, "evaluation", folder, int(m[1]), bool(m[2]))
    if rel in demo_files or _DEMOS_FILE.match(name):
        label = "demonstrations" + ("" if name == "demos.jsonl" else f" {name}")
        return at(parts[:-1], 0, label, "demonstrations", name)
    return (parts[:-1], 4, name), "trajectories", rel


def _demo_files(root: Path) -> frozenset[str]:
    """The demonstrations file ``summary.json`` names (``stages.demos.file``, a path relative
    to where the recipe ran, usually below the run folder), relative to ``root``; empty when
    no such file lies below ``root``."""
    try:
        summary = json.loads((root / "summary.json").read_text(encoding="utf-8"))
        named = Path(summary["stages"]["demos"]["file"])
    except (OSError, ValueError, KeyError, TypeError):
        return frozenset()
    top = root.resolve()
    # where the recipe ran is not recorded: the viewer's folder, else the run folder or one
    # above it (the recipe usually ran in the folder holding runs/)
    bases = [Path.cwd(), top, *top.parents]
    for path in [(b / named).resolve() for b in ([Path("/")] if named.is_absolute() else bases)]:
        if path.is_file() and path.is_relative_to(top):
            return frozenset({path.relative_to(top).as_posix()})
    return frozenset()


@dataclass
class RunEpisodes:
    """Episodes of a run, ready for the page (plain JSON-able dicts) and what was skipped."""

    episodes: list[dict[str, Any]] = field(default_factory=list)
    """Each with ``stage``: the label of its ``Stage``."""
    stages: list[Stage] = field(default_factory=list)
    """In the order the run made them (``stage_of``)."""
    notes: list[str] = field(default_factory=list)
    """Skipped files and malformed lines, one sentence each (at most ``_MAX_NOTES``)."""
    bad_lines: int = 0
    """Malformed lines skipped inside trajectory files."""
    skipped_files: int = 0
    """``.jsonl`` files that held no trajectory (metrics, task files …)."""


def extract_thinking(text: str) -> str:
    """The text inside ``<think>…</think>`` of a response ("" when it has none).

    A response whose chat template opened ``<think>`` in the prompt has only the closer: then
    the thinking is everything before it. A response cut off inside the thinking (no closer)
    keeps what follows ``<think>`` up to an ``<answer>`` tag, if any.
    """
    close = _THINK_CLOSE.search(text)
    opener = _THINK_OPEN.search(text, 0, close.start() if close else len(text))
    if close is not None:
        start = opener.end() if opener else 0
        return text[start : close.start()].strip()
    if opener is None:
        return ""
    answer = _ANSWER_OPEN.search(text, opener.end())
    return text[opener.end() : answer.start() if answer else len(text)].strip()


def _read_file(path: Path, rel: str) -> tuple[list[tuple[int, Trajectory]], list[str]]:
    """Trajectories of one JSONL file with their line numbers, and one error per bad line
    (``rel:line: …``, the loaders' one-line errors), read as every command reads JSONL
    (``read_trajectory_records``); a file that is not text gives one error and no lines."""
    errors: list[str] = []
    try:
        good = read_jsonl(
            path,
            TrajectoryFileError,
            "trajectory file",
            trajectory_from_value,
            skipped=errors,
            name=rel,
        )
    except LoadError as e:
        return [], [str(e)]
    return good, errors


def _screenshot(obs: dict[str, Any], folder: Path, root: Path) -> str | None:
    """``obs["screenshot"]`` (a path relative to the JSONL file's folder) as a data URI.

    Only a file inside the run folder ``root`` is embedded (after resolving ``..`` and
    symbolic links): a trajectory file must not pull other files of the disk into a page
    that may be shared.
    """
    name = obs.get("screenshot")
    if not isinstance(name, str) or not name or "\0" in name:
        return None
    path = (folder / name).resolve()
    mime = _IMAGE_TYPES.get(path.suffix.lower())
    if mime is None or not path.is_relative_to(root.resolve()) or not path.is_file():
        return None
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _text(x: Any) -> str:
    return "" if x is None else str(x)


def _episode(
    traj: Trajectory, task: Task | None, file: str, line: int, folder: Path, root: Path
) -> dict:
    """One episode as the page's JSON (no token ids)."""
    turns = []
    for t in traj.turns:
        obs = t.observation if isinstance(t.observation, dict) else {}
        thinking = extract_thinking(t.text)
        turns.append(
            {
                "thinking": thinking,
                # The raw response only when it has no thinking to show, so a reply with no
                # tags at all is still readable (and the page stays small otherwise).
                "text": "" if thinking else t.text,
                "action": t.action.raw if t.action and t.action.raw else "",
                "target": _text(obs.get("target")),
                "error": _text(t.error),
                "obs": {k: _text(obs.get(k)) for k in ("url", "title", "error", "text_head")},
                "screenshot": _screenshot(obs, folder, root),
            }
        )
    info = traj.info if isinstance(traj.info, dict) else {}
    # The task list wins; else what the rollout recorded (MiniWoB++, WebArena-Lite, ...).
    known = describe_task(task) if task else {}
    recorded = info.get("task") if isinstance(info.get("task"), dict) else {}
    return {
        "task_id": _text(traj.task_id),
        "group_id": _text(traj.group_id),
        **{k: known.get(k) or _text(recorded.get(k)) for k in ("intent", "site", "template")},
        "split": task.split if task else "",
        "reward": traj.reward,
        "success": traj.reward == 1.0,
        "status": traj.status,
        "n_turns": len(traj.turns),
        "file": file,
        "line": line,
        "answer": _text(info.get("answer")),
        "explanation": _text(info.get("explanation")),
        "error": _text(info.get("error")),
        "wall_s": info.get("wall_s") if isinstance(info.get("wall_s"), (int, float)) else None,
        "turns": turns,
    }


def load_run(
    run_dir: str | Path,
    tasks: Sequence[Task] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> RunEpisodes:
    """Read every trajectory file under ``run_dir`` into page-ready episodes.

    Args:
        run_dir: the run folder, searched recursively for ``*.jsonl``.
        tasks: tasks to look ``task_id`` up in (default: the embedded suite, built only when
            there are episodes); an unknown id shows the id only.
        on_note: called with each skipped file / malformed line (e.g. to print it).

    Raises:
        FileNotFoundError: ``run_dir`` is not a folder.
        NoTrajectoriesError: no trajectory in any file under it.
    """
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"run folder {str(root)!r} not found")
    run = RunEpisodes()

    def note(msg: str) -> None:
        if len(run.notes) < _MAX_NOTES:
            run.notes.append(msg)
        if on_note is not None:
            on_note(msg)

    found: list[tuple[str, Path, int, Trajectory]] = []
    for path in sorted(p for p in root.rglob("*.jsonl") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        good, errors = _read_file(path, rel)
        if not good and errors:
            run.skipped_files += 1
            note(f"{rel}: skipped, not a trajectory file ({errors[0]})")
            continue
        run.bad_lines += len(errors)
        for e in errors:
            note(f"{e} (line skipped)")
        found.extend((rel, path.parent, line, traj) for line, traj in good)
    if not found:
        raise NoTrajectoriesError(
            f"no trajectories under {str(root)!r}: expected JSONL files of trajectories "
            "(e.g. written by `webagent-r1 eval --out FILE` or a training run)"
        )
    if tasks is None:
        tasks = build_suite(spec_for("wide"))  # every split's tasks
    by_id = {str(t.task_id): t for t in tasks}
    demo_files = _demo_files(root)
    stages: dict[str, tuple[tuple, Stage]] = {}
    for rel, folder, line, traj in found:
        key, kind, label = stage_of(rel, demo_files)
        if label not in stages:
            stages[label] = (key, Stage(label, kind))
        stage = stages[label][1]
        if rel not in stage.files:
            stage.files.append(rel)
        stage.episodes += 1
        if traj.status != "env_error":
            stage.scored += 1
            stage.successes += int(traj.reward == 1.0)
        ep = _episode(traj, by_id.get(str(traj.task_id)), rel, line, folder, root)
        run.episodes.append({**ep, "stage": label})
    run.stages = [st for _, st in sorted(stages.values(), key=lambda ks: ks[0])]
    order = {st.label: i for i, st in enumerate(run.stages)}
    run.episodes.sort(key=lambda ep: order[ep["stage"]])  # stable: file order within a stage
    return run


def _finite(x: Any) -> Any:
    """``x`` with every NaN or infinite float replaced by None (JSON has no such numbers)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _json_for_script(data: Any) -> str:
    """Valid JSON safe inside a ``<script>`` element: no ``<``, ``>`` or ``&`` can end it
    early, and NaN / infinities (which ``JSON.parse`` refuses, emptying the page) are null."""
    text = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(run: RunEpisodes, title: str) -> str:
    """The self-contained page for ``run`` (see the module docstring)."""
    data = {
        "episodes": run.episodes,
        "stages": [st.to_dict() for st in run.stages],
        "notes": run.notes,
        "bad_lines": run.bad_lines,
        "skipped_files": run.skipped_files,
    }
    parts = {"TITLE": html.escape(title), "CSS": _CSS, "JS": _JS, "DATA": _json_for_script(data)}
    # One pass, so a title or an episode that contains a placeholder's name is left alone.
    return _PLACEHOLDER.sub(lambda m: parts[m.group(1)], _PAGE)


def build_viewer(
    run_dir: str | Path,
    out: str | Path | None = None,
    tasks: Sequence[Task] | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Path:
    """Write the HTML viewer of a run folder.

    Args:
        run_dir: the run folder (trajectory files anywhere under it).
        out: the HTML file (default ``<run_dir>/viewer.html``); parent folders are created.
        tasks: tasks to look episodes up in (default: the embedded suite).
        on_note: called with each skipped file / malformed line.

    Returns:
        The path of the HTML file.

    Raises:
        FileNotFoundError: ``run_dir`` is not a folder.
        NoTrajectoriesError: it holds no trajectory.
    """
    root = Path(run_dir)
    run = load_run(root, tasks=tasks, on_note=on_note)
    path = Path(out) if out is not None else root / "viewer.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(run, f"{root.resolve().name} · webagent-r1"), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------
# The page: everything inline; the CSP forbids loading anything but data: images.
# --------------------------------------------------------------------------------------

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; \
img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>__CSS__</style>
</head>
<body>
<header>
  <h1>__TITLE__</h1>
  <p id="summary"></p>
  <p id="warnings" hidden></p>
  <details id="notes" hidden><summary>Skipped files and lines</summary><ul></ul></details>
  <table id="stages">
    <caption>Success per stage (click a stage to list its episodes)</caption>
    <thead><tr><th>stage</th><th>episodes</th><th>successes</th><th>success</th></tr></thead>
    <tbody></tbody>
  </table>
</header>
<form id="filters" onsubmit="return false">
  <label>Stage <select id="f-stage"><option value="">all</option></select></label>
  <label>Site <select id="f-site"><option value="">all</option></select></label>
  <label>Outcome <select id="f-success">
    <option value="">all</option><option value="success">success</option>
    <option value="failure">failure</option></select></label>
  <label>Template <select id="f-template"><option value="">all</option></select></label>
  <label>File <select id="f-file"><option value="">all</option></select></label>
  <label>Intent <input id="f-search" type="search" placeholder="search the intent"></label>
  <span id="shown"></span>
</form>
<table id="episodes">
  <thead><tr><th>task</th><th>stage</th><th>site</th><th>template</th><th>reward</th>
  <th>status</th><th>turns</th><th>file</th><th>intent</th></tr></thead>
  <tbody></tbody>
</table>
<script type="application/json" id="data">__DATA__</script>
<script>__JS__</script>
</body>
</html>
"""

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 1.5em 2em; color: #222; }
h1 { font-size: 1.3em; margin: .8em 0 .2em; }
#warnings { color: #a15c00; }
#filters { position: sticky; top: 0; background: #f6f6f6; padding: .5em; display: flex;
  flex-wrap: wrap; gap: 1em; align-items: center; border-bottom: 1px solid #ddd; z-index: 1; }
#filters input { width: 18em; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .25em .5em; border-bottom: 1px solid #eee;
  vertical-align: top; }
tr.ep { cursor: pointer; }
tr.ep:hover, tr.ep:focus { background: #eef4ff; outline: none; }
tr.ep.open { background: #e3ecff; }
tr.ep.ok td.reward { color: #17702a; font-weight: bold; }
tr.ep.fail td.reward { color: #b3261e; font-weight: bold; }
td.intent { max-width: 40em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
td.file { font-family: monospace; font-size: .9em; }
tr.detail > td { background: #fafafa; padding: .8em 1.2em; }
.turn { border-left: 3px solid #9ab; margin: .8em 0; padding-left: .8em; }
.turn h4 { margin: 0 0 .3em; }
pre { white-space: pre-wrap; word-break: break-word; margin: .2em 0; background: #fff;
  border: 1px solid #e4e4e4; padding: .4em; max-height: 30em; overflow: auto; }
.action { font-family: monospace; background: #eef; padding: .1em .3em; }
.noaction { color: #777; font-style: italic; }
.error { color: #b3261e; }
.outcome { border-top: 1px solid #ddd; margin-top: .8em; padding-top: .5em; }
.label { color: #666; }
img.shot { max-width: 100%; border: 1px solid #ccc; margin-top: .3em; }
#stages { width: auto; margin: .6em 0 1em; }
#stages caption { text-align: left; color: #666; padding-bottom: .2em; }
#stages td.num { text-align: right; }
#stages .hint { color: #666; font-weight: normal; }
#stages tr.stage { cursor: pointer; }
#stages tr.stage:hover, #stages tr.stage:focus { background: #eef4ff; outline: none; }
#stages tr.stage.picked { background: #e3ecff; font-weight: bold; }
td.stage { white-space: nowrap; }
"""

_JS = r"""
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("data").textContent);
  const eps = data.episodes;
  const $ = (id) => document.getElementById(id);
  const pct = (ok, n) => (n ? (100 * ok / n).toFixed(1) + "%" : "-");

  // Build an element; text goes in through textContent only (model output is not HTML).
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function field(parent, label, value, cls) {
    if (value === "" || value === null || value === undefined) return;
    const p = el("div", cls);
    p.append(el("span", "label", label + ": "), el("span", null, value));
    parent.append(p);
  }

  // Success is only ever counted within one stage: the experts' kept demonstrations, an
  // evaluation and a step's rollouts answer different questions, and one rate over them
  // together means nothing.
  const stages = data.stages;
  $("summary").textContent = eps.length + " episodes in " + stages.length + " stage" +
    (stages.length === 1 ? "" : "s") + "; success is counted per stage";
  const stageRows = stages.map((st) => {
    const tr = el("tr", "stage");
    tr.tabIndex = 0;
    tr.dataset.stage = st.label;
    const unscored = st.episodes - st.scored;
    const name = el("td", "name", st.label);
    if (st.kind === "demonstrations") {
      name.append(el("span", "hint", " (the experts' kept episodes: successes only)"));
    }
    tr.append(
      name, el("td", "num episodes", st.episodes),
      el("td", "num successes", st.successes + " / " + st.scored +
        (unscored ? " (" + unscored + " env error" + (unscored === 1 ? "" : "s") + ")" : "")),
      el("td", "num success", pct(st.successes, st.scored)));
    tr.title = st.files.join("\n");
    const pick = () => {
      const sel = $("f-stage");
      sel.value = sel.value === st.label ? "" : st.label;
      applyFilters();
    };
    tr.addEventListener("click", pick);
    tr.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); pick(); }
    });
    return tr;
  });
  document.querySelector("#stages tbody").append(...stageRows);
  for (const st of stages) {
    const o = el("option", null, st.label + " (" + st.episodes + ")");
    o.value = st.label;
    $("f-stage").append(o);
  }
  if (data.bad_lines || data.skipped_files) {
    const w = $("warnings");
    w.hidden = false;
    w.textContent = "⚠ " + data.bad_lines + " malformed line(s) skipped, " +
      data.skipped_files + " non-trajectory file(s) skipped";
  }
  if (data.notes.length) {
    $("notes").hidden = false;
    const ul = $("notes").querySelector("ul");
    for (const n of data.notes) ul.append(el("li", null, n));
  }

  function fillSelect(id, values) {
    const sel = $(id);
    for (const v of [...new Set(values)].sort()) {
      const o = el("option", null, v === "" ? "(unknown)" : v);
      o.value = v === "" ? "\u0000" : v;
      sel.append(o);
    }
  }
  fillSelect("f-site", eps.map((e) => e.site));
  fillSelect("f-template", eps.map((e) => e.template));
  fillSelect("f-file", eps.map((e) => e.file));

  function renderDetail(ep) {
    const box = el("div");
    box.append(el("h3", null, ep.intent || "(unknown task " + ep.task_id + ")"));
    const meta = el("div");
    field(meta, "task", ep.task_id);
    field(meta, "group", ep.group_id);
    field(meta, "split", ep.split);
    field(meta, "from", ep.file + ":" + ep.line);
    box.append(meta);
    ep.turns.forEach((t, i) => {
      const d = el("div", "turn");
      d.append(el("h4", null, "Turn " + (i + 1)));
      if (t.thinking) {
        d.append(el("div", "label", "thinking"), el("pre", "thinking", t.thinking));
      } else if (t.text) {
        d.append(el("div", "label", "response (no <think> block)"), el("pre", "thinking", t.text));
      }
      const a = el("div");
      a.append(el("span", "label", "action: "));
      a.append(t.action ? el("code", "action", t.action)
        : el("span", "noaction", "(no valid action)"));
      if (t.target) a.append(el("span", "label", " on "), el("code", "action", t.target));
      d.append(a);
      field(d, "error", t.error, "error");
      const o = t.obs;
      if (o.url || o.title || o.text_head || o.error) {
        const det = el("details", "obs");
        det.append(el("summary", null, "observation: " + (o.title || o.url)));
        field(det, "url", o.url);
        field(det, "title", o.title);
        field(det, "error", o.error, "error");
        if (o.text_head) det.append(el("pre", null, o.text_head));
        d.append(det);
      }
      if (t.screenshot) {
        const img = el("img", "shot");
        img.alt = "screenshot after turn " + (i + 1);
        img.src = t.screenshot;
        d.append(img);
      }
      box.append(d);
    });
    const out = el("div", "outcome");
    field(out, "reward", ep.reward);
    field(out, "status", ep.status);
    field(out, "answer", ep.answer);
    field(out, "evaluator", ep.explanation);
    field(out, "error", ep.error, "error");
    if (ep.wall_s !== null) field(out, "wall time", ep.wall_s.toFixed(1) + " s");
    box.append(out);
    return box;
  }

  const tbody = document.querySelector("#episodes tbody");
  const rows = eps.map((ep, i) => {
    const tr = el("tr", "ep " + (ep.success ? "ok" : "fail"));
    tr.tabIndex = 0;
    tr.dataset.index = i;
    tr.dataset.site = ep.site;
    tr.dataset.stage = ep.stage;
    tr.dataset.success = ep.success ? "1" : "0";
    tr.append(
      el("td", "task", ep.task_id), el("td", "stage", ep.stage), el("td", "site", ep.site || "?"),
      el("td", "template", ep.template || "?"), el("td", "reward", ep.reward),
      el("td", "status", ep.status), el("td", "turns", ep.n_turns),
      el("td", "file", ep.file), el("td", "intent", ep.intent));
    tr.querySelector("td.intent").title = ep.intent;
    let detail = null;
    const toggle = () => {
      if (!detail) {
        detail = el("tr", "detail");
        const td = el("td");
        td.colSpan = 9;
        td.append(renderDetail(ep));
        detail.append(td);
        tr.after(detail);
      } else {
        detail.hidden = !detail.hidden;
      }
      tr.classList.toggle("open", !detail.hidden);
    };
    tr.addEventListener("click", toggle);
    tr.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); toggle(); }
    });
    tr.hideAll = (hide) => {
      tr.hidden = hide;
      if (detail) detail.hidden = hide || !tr.classList.contains("open");
    };
    return tr;
  });
  tbody.append(...rows);

  function applyFilters() {
    const want = (id) => { const v = $(id).value; return v === "\u0000" ? "" : v || null; };
    const site = want("f-site"), tpl = want("f-template"), file = want("f-file");
    const stage = want("f-stage");
    const outcome = $("f-success").value;
    const q = $("f-search").value.trim().toLowerCase();
    let n = 0, ok = 0, scored = 0;
    const shownStages = new Set();
    eps.forEach((ep, i) => {
      const show = (stage === null || ep.stage === stage) && (site === null || ep.site === site) &&
        (tpl === null || ep.template === tpl) && (file === null || ep.file === file) &&
        (outcome === "" || (outcome === "success") === ep.success) &&
        (!q || ep.intent.toLowerCase().includes(q) || ep.task_id.toLowerCase().includes(q));
      rows[i].hideAll(!show);
      if (show) {
        n += 1;
        shownStages.add(ep.stage);
        if (ep.status !== "env_error") { scored += 1; ok += ep.success ? 1 : 0; }
      }
    });
    let text = "showing " + n + " of " + eps.length;
    if (shownStages.size === 1) {
      text += " · " + [...shownStages][0] + " · success " + ok + " / " + scored + " (" +
        pct(ok, scored) + ")";
    } else if (shownStages.size > 1) {
      text += " from " + shownStages.size + " stages · pick a stage for its success rate";
    }
    $("shown").textContent = text;
    for (const tr of stageRows) tr.classList.toggle("picked", tr.dataset.stage === stage);
  }
  for (const id of ["f-stage", "f-site", "f-success", "f-template", "f-file"]) {
    $(id).addEventListener("change", applyFilters);
  }
  $("f-search").addEventListener("input", applyFilters);
  applyFilters();
})();
"""
