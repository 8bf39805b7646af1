"""The task-source interface: ``TaskSource`` (tasks per split, site backend, evaluator) and
``TaskSourceError``. The sources themselves and the dispatch by name are in
``webagent_r1.sources``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from webagent_r1.grading.base import EvaluatorFn, SiteBackend
from webagent_r1.tasks.io import TaskError
from webagent_r1.types import Task

__all__ = ["TaskSource", "TaskSourceError"]


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
    grades_mid_episode: ClassVar[bool] = False
    """True when the evaluator only reads the page and the sites (it never navigates the
    agent's tab or runs scripts in it), so an episode can be graded at a turn and go on
    (``env.grade_at_turns``): a turn-budget sweep then runs once, at its largest budget.
    False: each budget of a sweep runs its own episodes."""
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
