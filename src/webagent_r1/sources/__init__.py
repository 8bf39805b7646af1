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

- ``embedded``: the embedded suite (``sources/embedded/suite.py``) on ``EmbeddedSites`` with the
  WebArena-style evaluators of ``grading/embedded.py`` (``sources/embedded/source.py``);
- ``miniwob``: MiniWoB++ pages of the ``miniwob`` package (``sources/miniwob.py``);
- ``webarena-lite``: WebArena-Lite's tasks on user-hosted WebArena sites
  (``sources/webarena/``).

The interface (``TaskSource``, ``TaskSourceError``) is in ``sources/base.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webagent_r1.sources.base import TaskSource, TaskSourceError
from webagent_r1.sources.embedded.source import EmbeddedSource
from webagent_r1.sources.miniwob import MiniWoBSource
from webagent_r1.sources.webarena.source import task_source as webarena_lite_source

__all__ = [
    "SOURCES",
    "EmbeddedSource",
    "TaskSource",
    "TaskSourceError",
    "task_source",
]


SOURCES: dict[str, Callable[[Any], TaskSource]] = {
    "embedded": EmbeddedSource.from_config,
    "miniwob": MiniWoBSource.from_config,
    "webarena-lite": webarena_lite_source,
}
"""Task source name -> factory ``(cfg) -> TaskSource``; the same names, in the same order, as
``config.TASK_SOURCES`` (which validates ``tasks.source`` without importing this module)."""


def task_source(cfg: Any, name: str | None = None) -> TaskSource:
    """The task source ``name`` (default ``cfg.tasks.source``), not started yet.

    Raises:
        TaskSourceError: an unknown name (the message lists the valid ones), or a source
            whose data or sites are missing.
    """
    name = name or cfg.tasks.source
    if name not in SOURCES:
        raise TaskSourceError(f"unknown task source {name!r}; choose one of {', '.join(SOURCES)}")
    return SOURCES[name](cfg)
