"""Reading and writing task files (WebArena JSON list, or JSONL one config per line)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from webagent_r1.config import WEBARENA_SITES
from webagent_r1.errors import LoadError
from webagent_r1.inputs import Fields, check_unique_ids, read_json_entries, show
from webagent_r1.types import Task

EVAL_TYPES = ("string_match", "url_match", "program_html", "state_match")


KNOWN_SITES = (*WEBARENA_SITES, "miniwob")
"""Site names a task may name: the embedded sites and WebArena's (the same names), MiniWoB++."""


class TaskError(LoadError):
    """A task file or task config is malformed; the message names the file, entry and field."""


def _check_fields(d: Any, where: str) -> None:
    """Types of the WebArena fields ``Task.from_dict`` takes over as they are."""
    f = Fields(d, where, TaskError, prefix="")
    f.id("task_id")
    f.text("intent", nonempty=True)
    f.text("start_url")
    if d.get("sites") is not None:
        f.names("sites", KNOWN_SITES, noun="site")
    for key in ("require_login", "require_reset", "heldout_template"):
        f.flag(key, default=False)
    for key in ("user", "storage_state"):
        f.optional_text(key)
    f.text("intent_template", default="")
    f.text("split", default="test")
    f.check(
        "intent_template_id",
        lambda v: v is None or isinstance(v, str) or (isinstance(v, int) and v is not True),
        "an integer, a string or null",
        default=None,
    )
    for key in ("instantiation_dict", "extra"):
        f.check(key, lambda v: v is None or isinstance(v, dict), "an object or null", None)
    if d.get("eval") is not None:
        f.mapping("eval")


def validate_task_dict(d: Any, where: str = "task") -> Task:
    """Check one WebArena-style config and build a ``Task``.

    Raises:
        TaskError: missing fields, wrong types, an unknown site, or an eval spec the
            evaluators cannot run.
    """
    if not isinstance(d, dict):
        raise TaskError(f"{where}: a task config must be a JSON object, got {type(d).__name__}")
    missing = [k for k in ("task_id", "intent", "start_url") if k not in d]
    if missing:
        raise TaskError(
            f"{where}: task config lacks required field(s) {missing}; got keys {sorted(d)[:12]}"
        )
    _check_fields(d, where)
    try:
        task = Task.from_dict(d)
    except (TypeError, ValueError) as e:
        raise TaskError(f"{where}: {show(str(e), 120)}") from None
    ev = task.eval
    types_ = ev.get("eval_types") or []
    if not isinstance(types_, list) or not types_:
        raise TaskError(f"{where}: eval.eval_types must be a non-empty list of {EVAL_TYPES}")
    for t in types_:
        if t not in EVAL_TYPES:
            raise TaskError(f"{where}: unknown eval type {show(t)}; known: {', '.join(EVAL_TYPES)}")
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
        TaskError: the file is missing, not text, not JSON, or holds an invalid config (the
            message names the line or index and the field).
    """
    p = Path(path)
    entries = read_json_entries(p, TaskError, "task file")
    tasks = [validate_task_dict(d, where) for where, d in entries]
    check_unique_ids((t.task_id for t in tasks), p.name, TaskError)
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
