"""What an episode is graded with and where its sites live: the interface between the
environment (``rollout/env.py``), the graders (``grading/``) and the task sources
(``sources/``).

- ``EvalContext``: everything an evaluator may look at when an episode ends; ``EvalResult``:
  its binary reward and explanation; ``EvaluatorFn``: an evaluator.
- ``SiteBackend``: where a task's sites live and how an episode's site state is prepared
  (``PageEpisodes``: optional hooks for pages that run the episode themselves);
  ``StaticSites``: sites at fixed URLs.
- ``EnvError``: the environment cannot run or grade an episode (never the agent's failure).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from webagent_r1.browser import BrowserSession
from webagent_r1.types import Action, Task


@dataclass
class EvalContext:
    """Everything an evaluator may look at when an episode ends."""

    task: Task
    answer: str | None
    """The ``exit(message=…)`` text, or None when the episode ran out of turns."""
    session: BrowserSession
    """The episode's browser context (still open), for program_html and url checks."""
    url: str
    """URL of the page the episode ended on."""
    instance_id: str | None
    """The site instance of this episode (embedded sites), for state checks."""
    backend: SiteBackend
    history: list[Action] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    """The task's intent and the title and text of every page the episode showed the agent
    (for ``EvalResult.answer_shown``)."""
    turn: int = 0
    """Turns the episode took, parse failures included (what a step limit counts)."""


@dataclass
class EvalResult:
    """A binary reward and the evaluator's explanation."""

    reward: float
    explanation: str = ""
    answer_shown: bool | None = None
    """For an answer-graded task: whether the answer stood in a text the agent was shown
    (``grading.embedded.answer_shown``); None when not checked. Recorded as the episode's
    ``info["answer_shown"]``."""


EvaluatorFn = Callable[[EvalContext], "Awaitable[EvalResult] | EvalResult | float"]


class SiteBackend(Protocol):
    """Where the task's sites live and how an episode's site state is prepared."""

    def resolve_url(self, url: str) -> str:
        """Replace site placeholders (``__SHOPPING__`` …) with real base URLs."""
        ...

    def origins(self, task: Task) -> list[str]:
        """Origins (scheme://host:port) the episode may visit."""
        ...

    async def begin(self, task: Task, session: BrowserSession) -> str | None:
        """Prepare site state for an episode (instance, login cookies); return instance id."""
        ...

    async def end(self, instance_id: str | None) -> None:
        """Release what ``begin`` created."""
        ...

    # Optional: ``keep_alive(instance_id) -> bool``, called at every step, for backends that
    # reap instances left idle (the embedded sites); False ends the episode as an env error.
    # Optional: ``display_url(text) -> str``, the URLs of ``text`` as the agent's prompt shows
    # them (the embedded sites: at their default ports); the observation keeps the real URL.


@runtime_checkable
class PageEpisodes(Protocol):
    """Optional ``SiteBackend`` hooks for benchmarks whose episode lives in the page's own
    script (MiniWoB++): the page generates the task when started and says when it is done.

    A backend that has both methods gets them called by ``WebEnv``; the embedded sites and
    ``StaticSites`` have neither, and their episodes are untouched by this.
    """

    async def start_episode(self, task: Task, session: BrowserSession) -> None:
        """Start the page's episode once the start page has loaded, before the first
        observation; may fill ``task.intent`` from the page (the instruction is known only
        then). Raising makes the reset an ``EnvError``."""
        ...

    async def episode_done(self, session: BrowserSession) -> bool:
        """After each executed action: True ends the episode (status ``done``, no answer),
        and the evaluator grades it."""
        ...


class StaticSites:
    """Sites at fixed URLs with shared state (fixture servers, user-hosted WebArena).

    Args:
        urls: site name → base URL, e.g. ``{"shopping": "http://127.0.0.1:7770"}``;
            ``__SHOPPING__`` in a task URL becomes that base URL.
    """

    def __init__(self, urls: dict[str, str] | None = None) -> None:
        self.urls = {k: v.rstrip("/") for k, v in (urls or {}).items()}

    def resolve_url(self, url: str) -> str:
        for name, base in self.urls.items():
            url = url.replace(f"__{name.upper()}__", base)
        return url

    def origins(self, task: Task) -> list[str]:
        names = task.sites or list(self.urls)
        out = [_origin(self.urls[n]) for n in names if n in self.urls]
        out.append(_origin(self.resolve_url(task.start_url)))
        return sorted(set(o for o in out if o))

    async def begin(self, task: Task, session: BrowserSession) -> str | None:
        return None

    async def end(self, instance_id: str | None) -> None:
        return None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return ""
    return f"{parts.scheme}://{parts.netloc}"


class EnvError(RuntimeError):
    """The environment cannot run an episode (e.g. reset failed on a dead site)."""
