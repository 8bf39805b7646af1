"""Reading and writing task files (WebArena JSON list, or JSONL one config per line)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from webagent_r1.types import Task

EVAL_TYPES = ("string_match", "url_match", "program_html", "state_match")


class TaskError(ValueError):
    """A task file or task config is malformed; the message names the file, entry and field."""


def validate_task_dict(d: Any, where: str = "task") -> Task:
    """Check one WebArena-style config and build a ``Task``.

    Raises:
        TaskError: missing fields, wrong types, or an eval spec the evaluators cannot run.
    """
    if not isinstance(d, dict):
        raise TaskError(f"{where}: a task config must be a JSON object, got {type(d).__name__}")
    try:
        task = Task.from_dict(d)
    except (TypeError, ValueError) as e:
        raise TaskError(f"{where}: {e}") from None
    if not isinstance(task.intent, str) or not task.intent.strip():
        raise TaskError(f"{where}: 'intent' must be a non-empty string")
    if not isinstance(task.start_url, str):
        raise TaskError(f"{where}: 'start_url' must be a string")
    if not isinstance(task.sites, list):
        raise TaskError(f"{where}: 'sites' must be a list of site names")
    ev = task.eval
    if not isinstance(ev, dict):
        raise TaskError(f"{where}: 'eval' must be an object")
    types_ = ev.get("eval_types") or []
    if not isinstance(types_, list) or not types_:
        raise TaskError(f"{where}: eval.eval_types must be a non-empty list of {EVAL_TYPES}")
    for t in types_:
        if t not in EVAL_TYPES:
            raise TaskError(f"{where}: unknown eval type {t!r}; known: {', '.join(EVAL_TYPES)}")
    if "string_match" in types_ and not isinstance(ev.get("reference_answers"), dict):
        raise TaskError(f"{where}: string_match needs eval.reference_answers")
    if "url_match" in types_ and not ev.get("reference_url"):
        raise TaskError(f"{where}: url_match needs eval.reference_url")
    if "program_html" in types_ and not ev.get("program_html"):
        raise TaskError(f"{where}: program_html needs eval.program_html entries")
    if "state_match" in types_ and not ev.get("state_checks"):
        raise TaskError(f"{where}: state_match needs eval.state_checks")
    return task


def load_tasks(path: str | Path) -> list[Task]:
    """Load tasks from a WebArena JSON file (a list or one object) or a JSONL file.

    Raises:
        TaskError: the file is missing, not JSON, or holds an invalid config (the message
            names the line or index).
    """
    p = Path(path)
    if not p.is_file():
        raise TaskError(f"task file {str(p)!r} not found")
    text = p.read_text(encoding="utf-8")
    entries: list[tuple[str, Any]] = []
    if p.suffix == ".jsonl":
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                entries.append((f"{p.name}:{i}", json.loads(line)))
            except json.JSONDecodeError as e:
                raise TaskError(f"{p.name}:{i}: not valid JSON ({e.msg})") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise TaskError(f"{p.name}: not valid JSON ({e.msg} at line {e.lineno})") from None
        data = data if isinstance(data, list) else [data]
        entries = [(f"{p.name}[{i}]", d) for i, d in enumerate(data)]
    tasks = [validate_task_dict(d, where) for where, d in entries]
    seen: set[Any] = set()
    for t in tasks:
        if t.task_id in seen:
            raise TaskError(f"{p.name}: duplicate task_id {t.task_id!r}")
        seen.add(t.task_id)
    return tasks


def write_tasks(tasks: Iterable[Task], path: str | Path) -> int:
    """Write tasks as JSONL (WebArena config format, one per line); returns the count."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    tmp = p.with_suffix(p.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for t in tasks:
            f.write(json.dumps(t.to_dict(), ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(p)
    return n
