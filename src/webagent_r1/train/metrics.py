"""Metrics, grouped by prefix (``rollout/…``, ``train/…``, ``eval/…``), to JSONL and TensorBoard.

``metrics.jsonl`` in the stage folder gets one JSON object per ``log`` call (``step``,
``time`` and the metrics); it is appended to, so a resumed run continues the same file.
TensorBoard event files go to ``tb/`` when the ``tensorboard`` package is installed, and
Weights & Biases gets the same numbers when ``train.wandb_project`` is set.

``MemoryWatch`` adds the process's memory (``sys/…``) to each step's metrics and warns once
when the peak nears the machine's memory, before the kernel kills the run for it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import IO, Any

from webagent_r1.errors import LoadError
from webagent_r1.inputs import read_jsonl

__all__ = [
    "MemoryWatch",
    "MetricLogger",
    "proc_status_bytes",
    "read_metrics",
    "release_free_memory",
    "total_memory_bytes",
]


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
                # heavy: keeps torch off the import path
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.folder / "tb"))
            except ImportError:
                self._tb = None
        if wandb_project:
            try:
                # heavy: keeps wandb off the import path
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
    """The rows of a ``metrics.jsonl`` file, read as every command reads JSONL
    (``inputs.read_jsonl``); a row that is not a JSON object (a line cut short by a
    kill) is left out.

    Raises:
        LoadError: the file is not text.
    """
    p = Path(path)
    if not p.is_file():
        return []
    rows = read_jsonl(p, LoadError, "metrics file", skipped=[])
    return [row for _, row in rows if isinstance(row, dict)]


def proc_status_bytes(field: str) -> int | None:
    """A memory field of ``/proc/self/status`` in bytes (``VmRSS``: resident now, ``VmHWM``:
    its high-water mark), or None where there is no such file or field (not Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


_LIBC: Any = None  # glibc, once loaded; False where there is none


def release_free_memory() -> bool:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``).

    PyTorch's CPU tensors below glibc's mmap threshold live on the C heap; freed, they stay
    resident, so a process whose tensor sizes change every step (rollout KV caches, update
    micro-batches) grows by fragmentation. Called between the phases of a step. Returns
    False where there is no glibc (macOS, Windows, musl), where it does nothing.
    """
    global _LIBC
    if _LIBC is None:
        _LIBC = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(ImportError, OSError, AttributeError):  # no glibc: stays False
                lib = ctypes.CDLL("libc.so.6")
                lib.malloc_trim.argtypes = [ctypes.c_size_t]
                _LIBC = lib
    if _LIBC is False:
        return False
    _LIBC.malloc_trim(0)
    return True


def total_memory_bytes() -> int | None:
    """The memory this process may use: physical RAM, or a smaller cgroup limit (None when
    neither can be read)."""
    total: int | None = None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = None
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
    return total


class MemoryWatch:
    """Memory of this process for each step's metrics, and one warning near the limit.

    ``metrics()`` gives ``sys/rss_gb`` (resident now), ``sys/peak_rss_gb`` (the high-water
    mark) and, when CUDA is in use, ``sys/cuda_peak_gb``. The first time the peak passes
    ``warn_fraction`` of ``total_memory_bytes()`` a warning goes to ``out``: on CPU the update's
    activations grow with ``train.token_budget`` times the trained layers, so a run that trains
    every layer can be killed for memory steps after it started.

    Args:
        warn_fraction: warn above this fraction of the machine's memory.
        out: where the warning is written (stderr).
        enabled: False on non-main processes (no warning; metrics still measured).
    """

    def __init__(
        self, warn_fraction: float = 0.85, out: IO[str] | None = None, enabled: bool = True
    ) -> None:
        self.warn_fraction = warn_fraction
        self.out = out
        self.enabled = enabled
        self.total = total_memory_bytes()
        self.warned = False

    def metrics(self) -> dict[str, float]:
        """The ``sys/…`` memory metrics now (and the warning, once, when due)."""
        out: dict[str, float] = {}
        rss, peak = proc_status_bytes("VmRSS"), proc_status_bytes("VmHWM")
        if peak is None:
            # ru_maxrss: kilobytes on Linux, bytes on macOS.
            ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            peak = ru if sys.platform == "darwin" else ru * 1024
        if rss is not None:
            out["sys/rss_gb"] = rss / 1e9
        out["sys/peak_rss_gb"] = peak / 1e9
        try:
            # heavy: keeps torch off the import path
            import torch

            if torch.cuda.is_available() and torch.cuda.is_initialized():
                out["sys/cuda_peak_gb"] = torch.cuda.max_memory_allocated() / 1e9
        except ImportError:
            pass
        near_limit = bool(self.total) and peak > self.warn_fraction * (self.total or 0)
        if self.enabled and not self.warned and near_limit:
            self.warned = True
            print(
                f"warning: this process's memory peaked at {peak / 1e9:.1f} GB of "
                f"{self.total / 1e9:.1f} GB; a step with a larger update may be killed for "
                "memory. The update's activations grow with train.token_budget and the "
                "trained layers (train.trainable_layers): lower the budget or set "
                "train.gradient_checkpointing=true.",
                file=self.out or sys.stderr,
                flush=True,
            )
        return out
