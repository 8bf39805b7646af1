"""The ``embedded`` task source: the embedded suite (``sources/embedded/suite.py``, templates in
``tasks/templates/``) on our own sites, graded by ``grading/embedded.py``."""

from __future__ import annotations

from typing import Any

from webagent_r1.grading.base import EvaluatorFn, SiteBackend
from webagent_r1.grading.embedded import evaluate
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sources.base import TaskSource
from webagent_r1.sources.embedded.suite import run_tasks
from webagent_r1.types import Task

__all__ = ["EmbeddedSource"]


class EmbeddedSource(TaskSource):
    """The embedded suite on our own sites (each episode on its own site instance).

    Args:
        sites / templates / difficulty / heldout_templates: the ``tasks`` filters of a run
            (empty keeps all; ``heldout_templates`` replaces ``templates`` on ``heldout``).
    """

    name = "embedded"
    splits = ("train", "test", "heldout", "val", "wide", "extra")
    grades_mid_episode = True  # graders read the database, the URL, or a page of their own

    def __init__(
        self,
        sites: list[str] | None = None,
        templates: list[str] | None = None,
        difficulty: list[str] | None = None,
        heldout_templates: list[str] | None = None,
    ) -> None:
        self.sites = list(sites or [])
        self.templates = list(templates or [])
        self.difficulty = list(difficulty or [])
        self.heldout_templates = list(heldout_templates or [])

    @classmethod
    def from_config(cls, cfg: Any) -> EmbeddedSource:
        """With the filters of a ``Config``'s ``tasks`` section."""
        t = cfg.tasks
        return cls(t.sites, t.templates, t.difficulty, t.heldout_templates)

    def tasks(self, split: str) -> list[Task]:
        return run_tasks(split, self.sites, self.templates, self.difficulty, self.heldout_templates)

    @property
    def evaluator(self) -> EvaluatorFn:
        return evaluate

    def _start(self) -> SiteBackend:
        return EmbeddedSites.start()

    def _stop(self, backend: SiteBackend) -> None:
        backend.stop()  # type: ignore[attr-defined]
