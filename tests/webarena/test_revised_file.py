"""WebAgent-R1's revised WebArena-Lite file, shipped (``tasks.webarena.test_file: webagent-r1``).

Loaded, it is 165 tasks that differ from WebArena-Lite's file (``browsergym-webarenalite``,
VisualAgentBench's ``test_webarena_lite.raw.json``) in exactly the grading of 25 tasks and
the intents of 4; its checksum is checked on every load.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.webarena.conftest import by_id
from webagent_r1.sources.webarena import WebArenaDataError, load_tasks
from webagent_r1.sources.webarena import data as data_mod
from webagent_r1.sources.webarena.data import (
    REVISED_EVAL_TASKS,
    REVISED_FILE,
    REVISED_INTENT_TASKS,
    REVISED_SHA256,
)
from webagent_r1.sources.webarena.source import WebArenaSource
from webagent_r1.types import Task

# The paper's grading changes, as docs/webarena-lite.md lists them (written out here, not
# read from the code under test).
EVAL_CHANGED = [3, 23, 27, 29, 37, 45, 49, 56, 59, 71, 73, 74, 81, 82, 86, 92, 94, 96, 99, 100]
EVAL_CHANGED += [109, 114, 120, 133, 161]
INTENT_CHANGED = [39, 72, 83, 140]


def _grading(task: Task) -> dict[str, Any]:
    """The eval spec without its annotation note, which no evaluator reads."""
    return {k: v for k, v in task.eval.items() if k != "reference_answer_raw_annotation"}


def test_the_shipped_file_is_165_tasks_with_the_29_changes_named(
    lite_tasks: list[Task],
) -> None:
    revised = load_tasks("test", "webagent-r1")
    assert len(revised) == 165
    assert [t.task_id for t in revised] == list(range(165))
    assert all(t.split == "test" and t.evaluator is not None for t in revised)
    lite, new = by_id(lite_tasks), by_id(revised)
    eval_changed = [i for i in range(165) if _grading(lite[i]) != _grading(new[i])]
    intent_changed = [i for i in range(165) if lite[i].intent != new[i].intent]
    assert eval_changed == EVAL_CHANGED == list(REVISED_EVAL_TASKS)
    assert intent_changed == INTENT_CHANGED == list(REVISED_INTENT_TASKS)
    assert len(eval_changed) + len(intent_changed) == 29
    # Nothing else that grading or the prompt reads changes: only task 69's annotation note
    # ("5h 47min" → "8h 33min"; its reference stays "8h 33min"), the intent templates of the
    # 4 reworded intents and numbers written as strings in 10 instantiation_dicts.
    other = {
        (i, key)
        for i in range(165)
        for key in ("sites", "start_url", "require_login", "storage_state", "eval")
        if getattr(lite[i], key) != getattr(new[i], key)
    }
    assert other == {(i, "eval") for i in [*EVAL_CHANGED, 69]}
    assert new[69].eval["reference_answers"] == lite[69].eval["reference_answers"]
    # Some changes, spot-checked: task 81's must_include becomes a list; 39 reworded.
    assert lite[81].eval["reference_answers"]["must_include"] == "yjlou"
    assert new[81].eval["reference_answers"]["must_include"] == ["yjlou"]
    assert new[39].intent == "Check out merge requests assigned to me"


def test_checksum_is_checked_on_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert hashlib.sha256(REVISED_FILE.read_bytes()).hexdigest() == REVISED_SHA256
    changed = tmp_path / REVISED_FILE.name
    shutil.copy(REVISED_FILE, changed)
    configs = json.loads(changed.read_text(encoding="utf-8"))
    configs[0]["intent"] += "?"
    changed.write_text(json.dumps(configs), encoding="utf-8")
    monkeypatch.setattr(data_mod, "REVISED_FILE", changed)
    with pytest.raises(WebArenaDataError, match="has sha256 .* the shipped file was changed"):
        load_tasks("test", "webagent-r1")
    monkeypatch.setattr(data_mod, "REVISED_FILE", tmp_path / "gone.json")
    with pytest.raises(WebArenaDataError, match="revised task file is missing"):
        load_tasks("test", "webagent-r1")


def test_licence_and_attribution_ship_with_it() -> None:
    folder = REVISED_FILE.parent
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "weizhepei/WebAgent-R1" in readme and REVISED_SHA256 in readme
    assert "Apache License" in (folder / "LICENSE-WebAgent-R1.txt").read_text(encoding="utf-8")
    assert "Permission is hereby granted" in (folder / "LICENSE-WebAgent-R1-Eval.txt").read_text(
        encoding="utf-8"
    )


def test_selected_through_the_config() -> None:
    from webagent_r1.config import load_config
    from webagent_r1.sources import task_source as by_name

    cfg = load_config(
        None,
        [
            "tasks.source=webarena-lite",
            "tasks.webarena.test_file=webagent-r1",
            "tasks.webarena.check=false",
        ],
    )
    source = by_name(cfg)
    assert isinstance(source, WebArenaSource) and source.scoring == "vab"
    tasks = source.tasks("test")
    assert len(tasks) == 165
    assert by_id(tasks)[72].intent == "Show the most recent pending order page"
