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

__all__ = ["TEST_SPLITS", "TestSplitError", "check_test_split", "log_test_eval"]

TEST_SPLITS = ("test", "wide", "heldout")
"""Splits that hold test instances: ``wide`` is test plus val, ``heldout`` the test instances
of the templates never trained on."""


class TestSplitError(RuntimeError):
    """``--split test`` without ``--final``."""

    __test__ = False  # not a pytest class, whatever its name


def check_test_split(split: str, final: bool) -> None:
    """Refuse a split holding test instances (``TEST_SPLITS``) unless ``final``.

    Raises:
        TestSplitError: ``split`` holds test instances and ``final`` is not set.
    """
    if split in TEST_SPLITS and not final:
        held = "" if split == "test" else f" ({split} holds test instances)"
        raise TestSplitError(
            f"--split {split} is the one measurement of a configuration fixed beforehand"
            f"{held}: choose settings and checkpoints on --split val, and add --final to "
            "evaluate on it (it is logged in <run_dir>/test-evaluations.jsonl)"
        )


def model_run_dir(model: str | None) -> Path | None:
    """The run folder a model folder belongs to: the nearest folder above it (itself
    included) with the ``config.yaml`` every run writes; None for a name or a bare folder."""
    if not model:
        return None
    path = Path(model)
    if not path.is_dir():
        return None
    for folder in (path, *path.resolve().parents):
        if (folder / "config.yaml").is_file():
            return folder
    return None


def log_test_eval(
    cfg: Any, summary: dict[str, Any], engine: str, out_dir: str | None, tasks: int
) -> Path:
    """Append an ``eval --final`` test evaluation (``run_evaluation``'s summary) to
    ``<cfg.run_dir>/test-evaluations.jsonl``, and to the ledger of the run folder the
    evaluated model belongs to when that is another one (so a results page that looks for
    the model's run finds it); returns the config's ledger's path."""
    last = summary["results"][-1] if summary.get("results") else {}
    model = str(summary.get("model"))
    settings = {
        "engine": engine,
        "samples": summary.get("samples"),
        "temperature": summary.get("temperature"),
        "max_turns": [r.get("max_turns") for r in summary.get("results", [])],
        "tasks": tasks,
        "task_source": cfg.tasks.source,
        "out_dir": out_dir,
    }
    first = append_test_evaluation(
        cfg.run_dir, model, by="eval --final", settings=settings, success=last.get("success")
    )
    other = model_run_dir(model)
    if other is not None and other.resolve() != Path(cfg.run_dir).resolve():
        append_test_evaluation(
            other, model, by="eval --final", settings=settings, success=last.get("success")
        )
    return first
