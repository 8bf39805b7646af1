"""Task sources: where a run's tasks come from, where their pages live, how they are graded.

A task source is a plug-in, not a fork (issue 8): the env, rollout, trainer and evaluator are
the same for every source. A ``TaskSource`` lists the tasks of a split, starts and stops the
``SiteBackend`` that ``WebEnv`` runs them against, and names the default evaluator::

    source = task_source(cfg)              # by cfg.tasks.source, e.g. "miniwob"
    with source:                           # start(): servers up; stop() on the way out
        tasks = source.tasks("test")
        pool = LocalEnvPool(browser, 4, cfg.env, cfg.observation,
                            source.backend, source.evaluator, count_tokens)

``SOURCES`` maps the names allowed in ``tasks.source`` (``config.TASK_SOURCES``) to
factories ``(cfg) -> TaskSource``:

- ``embedded``: the embedded suite (``tasks/suite.py``) on ``EmbeddedSites`` with the
  WebArena-style evaluators of ``tasks/evaluators.py``;
- ``miniwob``: MiniWoB++ pages of the ``miniwob`` package (``tasks/miniwob.py``);
- ``webarena-lite``: imported lazily from ``webagent_r1.sources.webarena``, which must define
  ``task_source(cfg) -> TaskSource``; until that package exists, selecting it is a clear
  error.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from webagent_r1.env import EvaluatorFn, SiteBackend
from webagent_r1.tasks.io import TaskError
from webagent_r1.types import Task

__all__ = [
    "SOURCES",
    "EmbeddedSource",
    "TaskSource",
    "TaskSourceError",
    "task_source",
]


class TaskSourceError(TaskError):
    """A task source cannot be used (unknown name, package not installed, sites missing)."""


class TaskSource(ABC):
    """Where tasks come from: their list per split, their site backend, their evaluator.

    Subclasses implement ``tasks``, ``evaluator``, ``_start`` and ``_stop``; ``start`` is
    idempotent (servers start once per process, not per episode) and the source is a context
    manager (``with source: ...``).
    """

    name: ClassVar[str]
    """The name in ``tasks.source`` / ``--tasks``."""
    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    """The split names ``tasks`` accepts."""
    _backend: SiteBackend | None = None

    @abstractmethod
    def tasks(self, split: str) -> list[Task]:
        """The tasks of ``split`` (one of ``splits``).

        Raises:
            ValueError: an unknown split, or a filter that keeps no task.
        """

    @property
    @abstractmethod
    def evaluator(self) -> EvaluatorFn:
        """The evaluator of tasks without one of their own."""

    @abstractmethod
    def _start(self) -> SiteBackend:
        """Start serving the sites; return the backend."""

    @abstractmethod
    def _stop(self, backend: SiteBackend) -> None:
        """Stop what ``_start`` started."""

    def start(self) -> SiteBackend:
        """Start the sites (once) and return the backend for ``WebEnv`` / ``LocalEnvPool``."""
        if self._backend is None:
            self._backend = self._start()
        return self._backend

    def stop(self) -> None:
        """Stop the sites (safe to call twice)."""
        backend, self._backend = self._backend, None
        if backend is not None:
            self._stop(backend)

    @property
    def backend(self) -> SiteBackend:
        """The running backend.

        Raises:
            RuntimeError: ``start()`` was not called.
        """
        if self._backend is None:
            raise RuntimeError(f"task source {self.name!r}: call start() before using backend")
        return self._backend

    def __enter__(self) -> TaskSource:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class EmbeddedSource(TaskSource):
    """The embedded suite on our own sites (each episode on its own site instance).

    Args:
        sites / templates / difficulty: the ``tasks`` filters of a run (empty keeps all).
    """

    name = "embedded"
    splits = ("train", "test", "heldout", "wide", "extra")

    def __init__(
        self,
        sites: list[str] | None = None,
        templates: list[str] | None = None,
        difficulty: list[str] | None = None,
    ) -> None:
        self.sites = list(sites or [])
        self.templates = list(templates or [])
        self.difficulty = list(difficulty or [])

    @classmethod
    def from_config(cls, cfg: Any) -> EmbeddedSource:
        """With the filters of a ``Config``'s ``tasks`` section."""
        return cls(cfg.tasks.sites, cfg.tasks.templates, cfg.tasks.difficulty)

    def tasks(self, split: str) -> list[Task]:
        from webagent_r1.tasks.suite import run_tasks

        return run_tasks(split, self.sites, self.templates, self.difficulty)

    @property
    def evaluator(self) -> EvaluatorFn:
        from webagent_r1.tasks.evaluators import evaluate

        return evaluate

    def _start(self) -> SiteBackend:
        from webagent_r1.sites.episodes import EmbeddedSites

        return EmbeddedSites.start()

    def _stop(self, backend: SiteBackend) -> None:
        backend.stop()  # type: ignore[attr-defined]


def _miniwob(cfg: Any) -> TaskSource:
    from webagent_r1.sources.miniwob import MiniWoBSource

    return MiniWoBSource.from_config(cfg)


def _webarena_lite(cfg: Any) -> TaskSource:
    try:
        module = importlib.import_module("webagent_r1.sources.webarena")
    except ModuleNotFoundError as e:
        if e.name != "webagent_r1.sources.webarena":
            raise
        raise TaskSourceError(
            "the webarena-lite task source is not installed yet (no package "
            "webagent_r1.sources.webarena); use tasks.source embedded or miniwob"
        ) from None
    factory = getattr(module, "task_source", None)
    if factory is None:
        raise TaskSourceError(
            "webagent_r1.sources.webarena defines no task_source(cfg) -> TaskSource, "
            "which the webarena-lite task source needs"
        )
    return factory(cfg)


SOURCES: dict[str, Callable[[Any], TaskSource]] = {
    "embedded": EmbeddedSource.from_config,
    "miniwob": _miniwob,
    "webarena-lite": _webarena_lite,
}
"""Task source name -> factory ``(cfg) -> TaskSource``; the same names, in the same order, as
``config.TASK_SOURCES`` (which validates ``tasks.source`` without importing this module)."""


def task_source(cfg: Any, name: str | None = None) -> TaskSource:
    """The task source ``name`` (default ``cfg.tasks.source``), not started yet.

    Raises:
        TaskSourceError: an unknown name (the message lists the valid ones), or a source
            whose package is missing.
    """
    name = name or cfg.tasks.source
    if name not in SOURCES:
        raise TaskSourceError(f"unknown task source {name!r}; choose one of {', '.join(SOURCES)}")
    return SOURCES[name](cfg)
