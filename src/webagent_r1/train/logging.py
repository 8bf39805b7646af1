"""Metrics, grouped by prefix (``rollout/…``, ``train/…``, ``eval/…``), to JSONL and TensorBoard.

``metrics.jsonl`` in the stage folder gets one JSON object per ``log`` call (``step``,
``time`` and the metrics); it is appended to, so a resumed run continues the same file.
TensorBoard event files go to ``tb/`` when the ``tensorboard`` package is installed, and
Weights & Biases gets the same numbers when ``train.wandb_project`` is set.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

__all__ = ["MetricLogger", "read_metrics"]


class MetricLogger:
    """Writes metrics of the main process (other processes get a silent logger).

    Args:
        folder: the stage folder (``metrics.jsonl``, ``tb/``).
        enabled: False on non-main processes.
        tensorboard: also write TensorBoard events (skipped when tensorboard is missing).
        wandb_project: also log to this W&B project.
        run_config: stored with the W&B run.
    """

    def __init__(
        self,
        folder: str | Path,
        enabled: bool = True,
        tensorboard: bool = True,
        wandb_project: str | None = None,
        run_config: dict[str, Any] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.enabled = enabled
        self._tb: Any = None
        self._wandb: Any = None
        if not enabled:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / "metrics.jsonl"
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.folder / "tb"))
            except ImportError:
                self._tb = None
        if wandb_project:
            try:
                import wandb
            except ImportError:
                raise RuntimeError(
                    "train.wandb_project is set but wandb is not installed: pip install wandb"
                ) from None
            self._wandb = wandb.init(
                project=wandb_project, dir=str(self.folder), config=run_config or {}
            )

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` at ``step``."""
        if not self.enabled:
            return
        row = {"step": step, "time": time.time(), **{k: _num(v) for k, v in metrics.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        if self._tb is not None:
            for k, v in metrics.items():
                if isinstance(v, (int, float)):
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(dict(metrics), step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def _num(v: Any) -> Any:
    if isinstance(v, float) and v != v:  # NaN is not valid JSON
        return None
    return v


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a ``metrics.jsonl`` file."""
    p = Path(path)
    if not p.is_file():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
