"""Core data types shared by every part of webagent-r1 (see docs/design.md, "Contracts").

All are plain dataclasses: they cross process boundaries as JSON (``to_dict``/``from_dict``)
and carry no behaviour beyond (de)serialisation and small derived properties.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Self

TrajectoryStatus = Literal["done", "max_turns", "env_error"]

# Action kinds of the WebRL / WebAgent-R1 action space. The names inside ``do(action="…")``
# are kept verbatim so their data and checkpoints stay usable.
ACTION_KINDS: tuple[str, ...] = (
    "Click",
    "Type",
    "Search",
    "Hover",
    "Press Enter",
    "Scroll Down",
    "Scroll Up",
    "Select Dropdown Option",
    "go_backward",
    "go_forward",
    "exit",
)
# Kinds that need an ``element`` id, and kinds that need an ``argument``.
ELEMENT_KINDS = frozenset({"Click", "Type", "Search", "Hover", "Select Dropdown Option"})
ARGUMENT_KINDS = frozenset({"Type", "Search", "Select Dropdown Option"})


class _FlatRecord:
    """``to_dict`` and ``from_dict`` of a dataclass whose fields are all JSON values."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Self:
        return cls(**d)


@dataclass
class Action(_FlatRecord):
    """One parsed agent action.

    Attributes:
        kind: one of ``ACTION_KINDS``.
        element: the ``id`` of the target element as it appears in the observation, if any.
        argument: text to type / option to select; the answer for ``exit``.
        raw: the exact text the action was parsed from (inside ``<answer>``).
    """

    kind: str
    element: str | None = None
    argument: str | None = None
    raw: str = ""


@dataclass
class Observation(_FlatRecord):
    """What the agent sees after reset or after an action.

    Attributes:
        url: the page URL.
        title: the page title.
        text: the page as simplified HTML or compact text (config ``observation.format``).
        tabs: titles of the open tabs; the active one is ``tabs[active_tab]``.
        error: why the last action failed (parse error, unknown element, blocked URL …),
            or None when it succeeded.
        active_tab: index of the active tab in ``tabs``.
        shown_url: the URL the agent's prompt shows in place of ``url`` (None: ``url``); the
            embedded sites show each site at its default port, whatever port it runs on.
    """

    url: str
    title: str
    text: str
    tabs: list[str] = field(default_factory=list)
    error: str | None = None
    active_tab: int = 0
    shown_url: str | None = None

    @property
    def prompt_url(self) -> str:
        """The URL the prompt shows: ``shown_url`` when set, else ``url``."""
        return self.url if self.shown_url is None else self.shown_url


@dataclass
class StepResult:
    """Result of ``WebEnv.step``: next observation, whether the episode ended, reward, info."""

    observation: Observation
    done: bool
    reward: float
    info: dict[str, Any] = field(default_factory=dict)


# An evaluator sees the finished episode and returns (reward in {0, 1}, explanation).
# ``EvalContext`` is defined by the env (final page, answer, instance id …); kept as Any here
# so this module stays free of I/O imports.
Evaluator = Callable[[Any], Any]

_TASK_FIELDS = (
    "task_id",
    "sites",
    "intent",
    "intent_template",
    "intent_template_id",
    "instantiation_dict",
    "start_url",
    "require_login",
    "storage_state",
    "require_reset",
    "geolocation",
    "eval",
    "user",
    "split",
    "heldout_template",
)


@dataclass
class Task:
    """A web task, compatible with WebArena's JSON task configs.

    WebArena fields are kept with their names so a WebArena(-Lite) config loads unchanged;
    fields this class does not know are kept in ``extra`` and written back by ``to_dict``.

    Attributes:
        task_id: unique id (int in WebArena, str allowed).
        sites: site names the task touches, e.g. ``["shopping"]``.
        intent: the instruction shown to the agent.
        intent_template / intent_template_id / instantiation_dict: how ``intent`` was made.
        start_url: first URL; may contain placeholders such as ``__SHOPPING__``.
        require_login: whether the env logs in before the episode.
        storage_state: WebArena's cookie file path (kept for compatibility).
        require_reset: whether the task changes site state (WebArena semantics).
        geolocation: WebArena's geolocation, kept.
        eval: WebArena eval spec: ``eval_types``, ``reference_answers``, ``reference_url``,
            ``program_html``, and for embedded sites ``state_checks``.
        user: account the env logs in as (embedded sites), None for anonymous.
        split: ``"train"`` or ``"test"``.
        heldout_template: True when the template never appears in the training split.
        extra: unknown fields of the source file, kept verbatim.
        evaluator: optional in-process evaluator (overrides ``eval``), not serialised.
    """

    task_id: int | str
    intent: str
    start_url: str
    sites: list[str] = field(default_factory=list)
    intent_template: str = ""
    intent_template_id: int | str | None = None
    instantiation_dict: dict[str, Any] = field(default_factory=dict)
    require_login: bool = False
    storage_state: str | None = None
    require_reset: bool = False
    geolocation: Any = None
    eval: dict[str, Any] = field(default_factory=dict)
    user: str | None = None
    split: str = "test"
    heldout_template: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    evaluator: Evaluator | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        """Build a Task from a WebArena-style dict; unknown keys go to ``extra``.

        Raises:
            ValueError: when a required field (task_id, intent, start_url) is missing.
        """
        missing = [k for k in ("task_id", "intent", "start_url") if k not in d]
        if missing:
            raise ValueError(
                f"task config lacks required field(s) {missing}; got keys {sorted(d)[:12]}"
            )
        known = {k: d[k] for k in _TASK_FIELDS if k in d}
        extra = {k: v for k, v in d.items() if k not in _TASK_FIELDS and k != "extra"}
        extra.update(d.get("extra") or {})
        if known.get("sites") is None:
            known["sites"] = []
        if known.get("eval") is None:
            known["eval"] = {}
        return cls(**known, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in _TASK_FIELDS}
        out.update(self.extra)
        return out


@dataclass
class Turn:
    """One agent turn: the exact prompt and sampled completion token ids, and what happened.

    ``prompt_ids`` is what the policy was conditioned on (context compression already
    applied); ``completion_ids`` are the sampled ids, never a re-tokenisation of ``text``.
    ``weight_version`` is the version of the policy weights the completion was sampled from
    (the trainer's optimizer-step count; None when the engine does not track versions, and
    in files written before the field existed).

    ``observation`` summarises the page AFTER the action (its ``target``, when the action
    named an element: that element's line on the page before, ``button "Upvote"``);
    ``state_key`` identifies the page BEFORE it, the one the prompt showed: a hash of that
    observation as the prompt rendered it (URL, tabs, the previous action's error, page
    text), so turns of a group's episodes that acted on the same page in the same state share
    it (GiGPO's anchor states, ``algos/gigpo.py``). None in files written before the field
    existed.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    completion_logprobs: list[float]
    text: str
    action: Action | None
    observation: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    weight_version: int | None = None
    state_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["action"] = self.action.to_dict() if self.action else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Turn:
        d = dict(d)
        d["action"] = Action.from_dict(d["action"]) if d.get("action") else None
        return cls(**d)


@dataclass
class Trajectory:
    """A finished episode: its turns, binary reward and how it ended."""

    task_id: int | str
    group_id: int | str
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    status: TrajectoryStatus = "done"
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "group_id": self.group_id,
            "turns": [t.to_dict() for t in self.turns],
            "reward": self.reward,
            "status": self.status,
            "info": self.info,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trajectory:
        return cls(
            task_id=d["task_id"],
            group_id=d["group_id"],
            turns=[Turn.from_dict(t) for t in d.get("turns", [])],
            reward=float(d.get("reward", 0.0)),
            status=d.get("status", "done"),
            info=d.get("info", {}),
        )


def site_of(task: Task) -> str:
    """The site a task is reported under (``cross-site`` for tasks of several sites)."""
    return task.sites[0] if len(task.sites) == 1 else "cross-site"


def describe_task(task: Task) -> dict[str, str]:
    """What a trajectory records of its task (``info["task"]``): intent, site, template."""
    template = task.extra.get("template") or task.intent_template_id or ""
    return {"intent": task.intent, "site": site_of(task), "template": str(template)}


def failure_reason(traj: Trajectory) -> str | None:
    """Why an episode failed, in a few words (None when it succeeded).

    Ran out of turns, no valid action, env error, or the evaluator's explanation.
    """
    if traj.reward == 1.0:
        return None
    if traj.status == "env_error":
        return f"env error: {str(traj.info.get('error', ''))[:80]}"
    invalid = sum(t.action is None for t in traj.turns)
    if traj.status == "max_turns":
        if invalid == len(traj.turns):
            return "ran out of turns: no valid action in any turn"
        return f"ran out of turns ({invalid} of {len(traj.turns)} turns without a valid action)"
    return f"wrong result: {str(traj.info.get('explanation') or 'reward 0')[:120]}"
