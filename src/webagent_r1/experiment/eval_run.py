"""One evaluation as ``webagent-r1 eval`` runs it, from an ``EvalRequest``.

The tasks the request names (the split checked against the task source, the site, a
stratified subset), the test-split guard (``experiment/guard.py``: a split holding test
instances only with ``final``), ``run_evaluation``, then a test evaluation's line in the
ledgers and, with ``out``, the largest budget's trajectories copied there.
"""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webagent_r1.config import Config, to_dict
from webagent_r1.errors import RequestError
from webagent_r1.evaluation.run import (
    EvalRequest,
    request_out_dir,
    request_split,
    request_tasks,
    run_request,
)
from webagent_r1.experiment.guard import TEST_SPLITS, check_test_split, log_test_eval
from webagent_r1.sources import task_source
from webagent_r1.tasks.subset import eval_subset

__all__ = ["EvalOutcome", "run_eval"]


@dataclass
class EvalOutcome:
    """What an evaluation gave and where it went."""

    summary: dict[str, Any]
    """``run_evaluation``'s summary (the ``eval.json`` content)."""
    split: str
    tasks: int
    source: str
    """The task source's name (``embedded``, ``miniwob``, ``webarena-lite``)."""
    out_dir: str | None
    ledger: Path | None = None
    """The config's ledger a test evaluation was logged in."""
    trajectories: str | None = None
    """Where the largest budget's trajectories were copied (``out``)."""


def run_eval(cfg: Config, request: EvalRequest) -> EvalOutcome:
    """Resolve the request's tasks, evaluate them, log a test evaluation, copy the
    trajectories to ``request.out``.

    Raises:
        RequestError: a split the tasks lack, the experts on tasks they cannot solve, no
            task left by the filters, screenshots without an output folder, or what
            ``run_evaluation`` refuses (bad sizes, an unfinished evaluation in the folder).
        TestSplitError: a split holding test instances without ``request.final``.
    """
    try:
        source = task_source(cfg)
        split = request_split(source, request.split)
        check_test_split(split, request.final)
        tasks = request_tasks(source, request, split)
    except ValueError as e:
        raise RequestError(str(e)) from None
    if not tasks:
        raise RequestError("no tasks match the filters")
    tasks = eval_subset(tasks, request.subset or 0, cfg.seed)
    out_dir = request_out_dir(cfg, request)
    meta = {"split": split, "site": request.site, "tasks_filter": to_dict(cfg)["tasks"]}
    try:
        summary = asyncio.run(run_request(cfg, tasks, request, out_dir, meta, source))
    except ValueError as e:
        raise RequestError(str(e)) from None
    outcome = EvalOutcome(summary, split, len(tasks), source.name, out_dir)
    if split in TEST_SPLITS:
        outcome.ledger = log_test_eval(cfg, summary, request.engine, out_dir, len(tasks))
    if request.out and out_dir:
        last = summary["results"][-1]["trajectories"]
        shutil.copyfile(Path(out_dir) / last, request.out)
        outcome.trajectories = request.out
    return outcome
