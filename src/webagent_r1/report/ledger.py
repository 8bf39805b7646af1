"""The test ledger: every evaluation on the test split, one JSON line each, in its run folder.

The test split measures a configuration fixed beforehand; every choice (settings, number of
updates, which checkpoint) is made on ``val``. So an evaluation on test is rare and
deliberate: ``webagent-r1 eval --split test`` refuses without ``--final``, and each one run
(by ``eval --final`` or by an experiment plan with ``split: test`` and ``final: true``) is
appended to ``<run_dir>/test-evaluations.jsonl``: which checkpoint, when, with which code and
settings. An experiment's results page lists every entry of its runs' ledgers, so a reader
sees how many checkpoints were ever looked at on test, not only the reported one.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "LEDGER_FILE",
    "TestEvaluation",
    "append_test_evaluation",
    "code_commit",
    "find_ledgers",
    "read_ledger",
]

LEDGER_FILE = "test-evaluations.jsonl"
"""The ledger's file name inside a run folder."""


@dataclass
class TestEvaluation:
    """One evaluation on the test split."""

    __test__ = False  # not a pytest class, whatever its name

    checkpoint: str
    """The model evaluated: a checkpoint's ``model/`` folder, a model name or an engine."""
    time: str
    """When it finished, UTC, ISO 8601."""
    commit: str | None
    """The code's git commit (``+dirty`` with uncommitted changes); None outside a checkout."""
    by: str
    """``eval --final`` or ``experiment <plan>``."""
    settings: dict[str, Any] = field(default_factory=dict)
    """Engine, samples, temperature, turn budgets, tasks, task source, out folder."""
    success: float | None = None
    """Success at the largest turn budget (a fraction)."""


def code_commit() -> str | None:
    """The git commit of this package's checkout, ``+dirty`` when it has changes; None when
    the package is not in a git checkout (an installed wheel) or git is missing."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def append_test_evaluation(
    run_dir: str | Path,
    checkpoint: str,
    by: str,
    settings: dict[str, Any],
    success: float | None = None,
) -> Path:
    """Append one test evaluation to ``<run_dir>/test-evaluations.jsonl``; returns the file."""
    path = Path(run_dir) / LEDGER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = TestEvaluation(
        checkpoint=checkpoint,
        time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        commit=code_commit(),
        by=by,
        settings=settings,
        success=success,
    )
    with path.open("a") as f:
        f.write(json.dumps(asdict(entry)) + "\n")
    return path


def read_ledger(path: str | Path) -> list[TestEvaluation]:
    """The entries of a ledger file (a missing file has none; an unreadable line is skipped:
    a ledger is appended to by killed processes too)."""
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            row = json.loads(line)
            out.append(TestEvaluation(**row))
        except (ValueError, TypeError):
            continue
    return out


def find_ledgers(*folders: str | Path, up: int = 4) -> list[Path]:
    """The ledger files under each folder (recursively) and in up to ``up`` folders above it
    (a checkpoint's ``model/`` folder sits four levels below its run folder), deduplicated,
    in a stable order."""
    found: dict[Path, None] = {}
    for folder in folders:
        f = Path(folder).resolve()
        if f.is_dir():
            for p in sorted(f.rglob(LEDGER_FILE)):
                found[p] = None
        for parent in [f, *f.parents][: up + 1]:
            if (parent / LEDGER_FILE).is_file():
                found[parent / LEDGER_FILE] = None
    return list(found)
