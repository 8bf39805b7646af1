"""The test-split guard of ``webagent-r1 eval``: test only with ``--final``, and logged.

Choices (settings, number of updates, which checkpoint) are made on ``val``; ``test`` is the
one measurement of a configuration fixed beforehand. A test evaluation that was not meant as
that measurement is a choice made on test, so ``eval --split test`` refuses without
``--final``, and one run with it is appended to the ledger of the config's run folder
(``report/ledger.py``), which an experiment's results page lists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webagent_r1.report.ledger import append_test_evaluation

__all__ = ["TestSplitError", "check_test_split", "log_test_eval"]


class TestSplitError(RuntimeError):
    """``--split test`` without ``--final``."""

    __test__ = False  # not a pytest class, whatever its name


def check_test_split(split: str, final: bool) -> None:
    """Refuse the test split unless ``final``.

    Raises:
        TestSplitError: ``split`` is test and ``final`` is not set.
    """
    if split == "test" and not final:
        raise TestSplitError(
            "--split test is the one measurement of a configuration fixed beforehand: choose "
            "settings and checkpoints on --split val, and add --final to evaluate on test "
            "(it is logged in <run_dir>/test-evaluations.jsonl)"
        )


def log_test_eval(
    cfg: Any, summary: dict[str, Any], engine: str, out_dir: str | None, tasks: int
) -> Path:
    """Append an ``eval --final`` test evaluation (``run_evaluation``'s summary) to
    ``<cfg.run_dir>/test-evaluations.jsonl``; returns the ledger's path."""
    last = summary["results"][-1] if summary.get("results") else {}
    return append_test_evaluation(
        cfg.run_dir,
        str(summary.get("model")),
        by="eval --final",
        settings={
            "engine": engine,
            "samples": summary.get("samples"),
            "temperature": summary.get("temperature"),
            "max_turns": [r.get("max_turns") for r in summary.get("results", [])],
            "tasks": tasks,
            "task_source": cfg.tasks.source,
            "out_dir": out_dir,
        },
        success=last.get("success"),
    )
