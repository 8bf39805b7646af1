"""Progress display: a rich bar on a terminal, a plain line every minute in a log file.

Long stages (rollout, BC, evaluation) run in the background with their output sent to a log;
rich's live bar writes nothing useful there, so ``Bar`` falls back to one line per
``every_s`` seconds (and one at the end) when stderr is not a terminal.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

__all__ = ["Bar"]


class Bar:
    """A progress bar over ``total`` units with a free-text ``info`` field.

    Args:
        label: what is counted (``rollout (async)``, ``BC`` …).
        total: units in all.
        completed: units already done (a resumed run).
        time_remaining: show an ETA column (terminal only; the log line always has rates).
        every_s: seconds between log lines when stderr is not a terminal.
    """

    def __init__(
        self,
        label: str,
        total: int,
        completed: int = 0,
        time_remaining: bool = False,
        every_s: float = 60.0,
    ) -> None:
        self.label, self.total, self.completed, self.info = label, total, completed, ""
        self.every_s = every_s
        self.t0 = self.last = time.time()
        self.start_completed = completed
        console = Console(stderr=True)
        self.rich: Any = None
        if console.is_terminal:
            cols: list[Any] = [TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn()]
            if time_remaining:
                cols.append(TimeRemainingColumn())
            cols.append(TextColumn("{task.fields[info]}"))
            self.rich = Progress(*cols, console=console)
            self.job = self.rich.add_task(label, total=total, completed=completed, info="")
            self.rich.start()

    def update(
        self, completed: int | None = None, advance: int = 0, info: str | None = None
    ) -> None:
        """Set or advance the count and the info text."""
        self.completed = (self.completed if completed is None else completed) + advance
        if info is not None:
            self.info = info
        if self.rich is not None:
            self.rich.update(self.job, completed=self.completed, info=self.info)
        elif time.time() - self.last >= self.every_s:
            self._line()

    def close(self) -> None:
        """Stop the bar (terminal) or write the last line (log)."""
        if self.rich is not None:
            self.rich.stop()
        else:
            self._line()

    def _line(self) -> None:
        self.last = time.time()
        elapsed = self.last - self.t0
        done = self.completed - self.start_completed
        eta = ""
        if done > 0 and self.completed < self.total:
            eta = f", ~{(self.total - self.completed) * elapsed / done / 60:.1f} min left"
        print(
            f"{self.label}: {self.completed}/{self.total} after {elapsed / 60:.1f} min{eta}"
            + (f" · {self.info}" if self.info else ""),
            file=sys.stderr,
            flush=True,
        )
