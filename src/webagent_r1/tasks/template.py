"""``Template``: one task template of the embedded suite (the templates themselves are in
``tasks/templates/``, the suite that instantiates them in ``sources/embedded/suite.py``)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from webagent_r1.tasks.experts import ExpertFactory

__all__ = ["EvalBuilder", "Kind", "Sampler", "Template"]

Kind = Literal["info", "nav", "change"]
Sampler = Callable[[Any, random.Random], dict[str, Any] | None]
"""``sample(conn, rng)``: ``conn`` is the pristine database of ``backend_site`` (default: the
first site), or for templates with ``backend_sites`` a dict site name -> connection."""
EvalBuilder = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Template:
    """A task template of one embedded site (or several, for cross-site tasks).

    Attributes:
        id: unique integer (``intent_template_id``).
        name: readable unique name, ``<site>.<what>``.
        sites: sites the task touches (first = where it starts).
        kind: ``info`` (answer with exit), ``nav`` (reach a page), ``change`` (modify state).
        intent: the instruction with ``{param}`` placeholders (public parameters only).
        start_url: first URL, with site placeholders (``__SHOPPING__/``).
        sample: draws one parameter dict from the pristine database (keys starting with ``_``
            are hidden from the intent and the expert: answers, ids for checks); None = retry.
        evaluation: builds the WebArena ``eval`` spec from the full parameters.
        expert: the scripted solver; it receives the public parameters only.
        user: account to log in as on every site of the task (None: anonymous).
        logins: site -> account, for cross-site tasks whose sites have different accounts
            (replaces ``user``; sites left out stay anonymous).
        heldout: only in the test split.
        difficulty: rough expert step count, for reports ("1-2", "3-5", "6-9", "10+").
    """

    id: int
    name: str
    sites: list[str]
    kind: Kind
    intent: str
    start_url: str
    sample: Sampler
    evaluation: EvalBuilder
    expert: ExpertFactory
    user: str | None = None
    heldout: bool = False
    difficulty: str = "3-5"
    backend_site: str | None = None
    """Site whose database ``sample`` reads (default: ``sites[0]``)."""
    backend_sites: list[str] | None = None
    """Cross-site templates: the sites whose databases ``sample`` reads; it then gets a dict
    site name -> connection instead of one connection."""
    logins: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    writes: dict[str, int] | Callable[[dict[str, Any]], dict[str, int]] | None = None
    """``change`` templates: the most rows of each ``site.table`` the task may change (insert,
    update or delete), or a function of the parameters giving them. The grader fails an
    episode that changed more, or any other table (side effects: a second vote, a comment, a
    subscription; ``docs/grading.md``). The experts stay within them (``tasks check``)."""
