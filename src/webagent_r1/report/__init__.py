"""Reports of a run or evaluation folder: a markdown summary and PNG plots.

``build_report(run_dir)`` reads whatever the folder holds (``summary.json`` of a recipe,
``bc/`` and ``rl/`` metrics, evaluation trajectories, ``eval.json`` of ``webagent-r1 eval``)
and writes ``<run_dir>/report.md`` and ``<run_dir>/plots/*.png``; ``webagent-r1 report
RUN_DIR`` runs it from the command line. ``report.viewer.build_viewer`` writes the static HTML
trajectory viewer (``webagent-r1 view RUN_DIR``).
"""

from __future__ import annotations

from webagent_r1.report.build import ReportFiles, build_report, build_report_files
from webagent_r1.report.load import ReportError, RunData, load_run

__all__ = [
    "ReportError",
    "ReportFiles",
    "RunData",
    "build_report",
    "build_report_files",
    "load_run",
]
