"""Kinds of failure: what the failed episodes of an evaluation or of training rollouts did.

Every failed episode (reward 0, status other than ``env_error``) gets exactly one kind: the
first of ``FAILURE_KINDS`` that applies, in this order of precedence:

0. ``side_effects``: the grader failed the episode for changing the site beyond the task
   (``state_match``'s write budget: a second vote, a comment; ``docs/grading.md``), whatever
   else it did: the task's own change may well have been made.
1. ``invalid_action``: more than half of its turns had an invalid action, one that the parser
   refused (``Turn.action`` is None, the parse error in ``Turn.error``) or that the page could
   not execute (``Turn.error`` set: an unknown element, a blocked URL …). Such actions never
   changed the page, so whatever else the episode did follows from them.
2. ``loop``: the same action taken from the same state ``loop_repeats`` times (default 3),
   anywhere in the episode, or two (state, action) pairs alternating A-B-A-B over four
   consecutive turns. The state is ``Turn.state_key`` (a hash of the page the turn's prompt
   showed); in files written before that field existed, the URL of the page before the action.
   A looping agent usually runs out of turns too; the loop says why, so it comes first.
3. ``ran_out_of_turns``: the episode hit the turn limit (status ``max_turns``).
4. ``gave_up``: the agent ended the episode with ``exit`` declaring that the task cannot be
   done: a message such as "N/A", "unknown", "cannot find …", "does not exist"
   (``is_give_up``), or an empty message on a task that wants an answer (kind ``info``).
5. ``wrong_answer``: the agent ended with ``exit`` and a non-empty answer that the grader
   rejected, on an information task (kind ``info``) or a task of unknown kind.
6. ``wrong_end_state``: the rest: the agent stopped (``exit``, or the page ended the episode
   as in MiniWoB++) on a navigation or state-changing task (kind ``nav`` or ``change``), or
   without an answer on a task of unknown kind, and the page or the site state graded wrong.

A trajectory does not record which element a task needed, so "clicked a different element
than needed" cannot be told apart from any other wrong end state: it is ``wrong_end_state``.

The task kind is ``info["task"]["kind"]`` when a trajectory records it, else the kind of its
template (``info["task"]["template"]``) in the ``kinds`` mapping given (the embedded suite's,
``embedded_template_kinds``), else unknown (WebArena and MiniWoB++ tasks).

Episodes with status ``env_error`` are infrastructure faults, not failures of the agent: they
are counted apart (``FailureCounts.env_errors``) and never get a kind. Everything here works on
``Trajectory`` objects and does no I/O; ``report.load.collect_failures`` reads the files.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.grading.embedded import SIDE_EFFECTS
from webagent_r1.report.markdown import MISSING, md_table
from webagent_r1.sources.embedded.suite import all_templates
from webagent_r1.types import Trajectory, Turn

__all__ = [
    "COLUMNS",
    "FAILURE_KINDS",
    "LOOP_REPEATS",
    "TASK_KINDS",
    "FailureCounts",
    "FailureTable",
    "classify",
    "embedded_template_kinds",
    "failures_markdown",
    "has_loop",
    "invalid_turn",
    "is_give_up",
    "row_cells",
    "tabulate",
    "task_kind",
    "template_of",
]

FAILURE_KINDS: tuple[str, ...] = (
    "side_effects",
    "invalid_action",
    "loop",
    "ran_out_of_turns",
    "gave_up",
    "wrong_answer",
    "wrong_end_state",
)
"""The kinds of failure, in order of precedence (the first that applies is given)."""
LOOP_REPEATS = 3
"""Default times the same action from the same state makes a ``loop``."""
TASK_KINDS = ("info", "nav", "change")
"""Task kinds of the embedded suite: answer with exit, reach a page, change site state."""
UNKNOWN_TEMPLATE = "?"
"""Template of an episode whose trajectory does not name one."""

# Whole messages that say "no answer" (compared after stripping spaces and final dots).
_NO_ANSWER = re.compile(
    r"n/?a|unknown|not applicable|not available|no answer|no results?|[-?]+",
    re.IGNORECASE,
)
# Phrases anywhere in a message that declare the task cannot be done.
_CANNOT = re.compile(
    r"\b(?:can ?not|can[’']?t|could ?not|couldn[’']?t|unable|impossible|not possible|"
    r"not (?:be )?found|no such|(?:does|do) ?n[o’']?t exist|not exist|infeasible|"
    r"unachievable|give up|gave up)\b",
    re.IGNORECASE,
)


def invalid_turn(turn: Turn) -> bool:
    """Whether a turn's action was invalid: not parsed (``action`` None) or not executed
    (``error`` set). An ``exit`` cannot fail: an error on its turn is the previous action's,
    which files written before the environment cleared it on ``exit`` recorded there."""
    if turn.action is None:
        return True
    return bool(turn.error) and turn.action.kind != "exit"


def _action_sig(turn: Turn) -> tuple[str, ...]:
    """What a turn did: kind, element and argument; the text of an unparsed reply."""
    # str(): files are read without validation, and a key must be hashable
    a = turn.action
    if a is None:
        return ("", str(turn.text).strip())
    return (str(a.kind), str(a.element or ""), str(a.argument or ""))


def _state_keys(turns: list[Turn]) -> list[str]:
    """The state each turn acted from: ``state_key``, else the URL of the page before."""
    out = []
    for k, t in enumerate(turns):
        if t.state_key:
            out.append(f"key:{t.state_key}")
        elif k == 0:
            out.append("url:<start>")  # the start page's URL is not recorded
        else:
            obs = turns[k - 1].observation
            out.append(f"url:{obs.get('url', '') if isinstance(obs, dict) else ''}")
    return out


def has_loop(turns: list[Turn], repeats: int = LOOP_REPEATS) -> bool:
    """Whether an episode loops: one (state, action) ``repeats`` times, or A-B-A-B.

    Args:
        turns: the episode's turns; ``exit`` turns are never part of a loop.
        repeats: how many times the same action from the same state makes a loop (>= 2).
    """
    states = _state_keys(turns)
    keys = [(s, _action_sig(t)) for s, t in zip(states, turns, strict=True)]
    keys = [
        k for k, t in zip(keys, turns, strict=True) if not (t.action and t.action.kind == "exit")
    ]
    if any(n >= repeats for n in Counter(keys).values()):
        return True
    return any(
        keys[i] == keys[i + 2] and keys[i + 1] == keys[i + 3] and keys[i] != keys[i + 1]
        for i in range(len(keys) - 3)
    )


def is_give_up(message: str) -> bool:
    """Whether an exit message declares that the task cannot be done (N/A, "cannot …")."""
    text = message.strip().rstrip(".!").strip()
    return bool(_NO_ANSWER.fullmatch(text) or _CANNOT.search(text))


def _task_info(traj: Trajectory) -> dict[str, Any]:
    task = traj.info.get("task") if isinstance(traj.info, dict) else None
    return task if isinstance(task, dict) else {}


def template_of(traj: Trajectory, kinds: Mapping[str, str] | None = None) -> str:
    """The template an episode is counted under: ``info["task"]["template"]``; else, for an
    episode that recorded no task (an env error at reset), the part of an embedded task id
    (``<template>/<k>``) before the ``/`` when ``kinds`` knows it; else ``"?"``."""
    name = _task_info(traj).get("template")
    if isinstance(name, (str, int)) and not isinstance(name, bool) and str(name):
        return str(name)
    head = str(traj.task_id).rpartition("/")[0]
    if head and kinds and head in kinds:
        return head
    return UNKNOWN_TEMPLATE


def task_kind(traj: Trajectory, kinds: Mapping[str, str] | None = None) -> str | None:
    """``info``, ``nav`` or ``change`` (see the module docstring), None when unknown."""
    kind = _task_info(traj).get("kind")
    if kind in TASK_KINDS:
        return str(kind)
    kind = (kinds or {}).get(template_of(traj, kinds))
    return kind if kind in TASK_KINDS else None


def _exit_message(traj: Trajectory) -> str | None:
    """The ``exit`` message the episode ended with, None when it did not end with ``exit``."""
    last = traj.turns[-1].action if traj.turns else None
    if last is None or last.kind != "exit":
        return None
    answer = traj.info.get("answer") if isinstance(traj.info, dict) else None
    if isinstance(answer, str):
        return answer
    return last.argument if isinstance(last.argument, str) else ""


def classify(
    traj: Trajectory,
    kinds: Mapping[str, str] | None = None,
    loop_repeats: int = LOOP_REPEATS,
) -> str | None:
    """The kind of failure of an episode (one of ``FAILURE_KINDS``).

    Args:
        traj: the episode.
        kinds: template name -> task kind (``info``/``nav``/``change``), for trajectories
            that do not record their task's kind; e.g. ``embedded_template_kinds()``.
        loop_repeats: times the same action from the same state makes a ``loop`` (>= 2).

    Returns:
        The kind, or None for an episode that succeeded (reward 1) or hit an env error.
    """
    if traj.status == "env_error" or traj.reward == 1.0:
        return None
    explanation = traj.info.get("explanation") if isinstance(traj.info, dict) else None
    if isinstance(explanation, str) and SIDE_EFFECTS in explanation:
        return "side_effects"
    turns = traj.turns
    if turns and 2 * sum(map(invalid_turn, turns)) > len(turns):
        return "invalid_action"
    if has_loop(turns, loop_repeats):
        return "loop"
    if traj.status == "max_turns":
        return "ran_out_of_turns"
    message = _exit_message(traj)
    kind = task_kind(traj, kinds)
    if message is None:  # the page ended the episode, or a file without the last turn
        return "wrong_end_state"
    if is_give_up(message) or (not message.strip() and kind == "info"):
        return "gave_up"
    if message.strip() and kind in (None, "info"):
        return "wrong_answer"
    return "wrong_end_state"


def embedded_template_kinds() -> dict[str, str]:
    """Template name -> kind (``info``/``nav``/``change``) of the embedded task suite."""
    return {t.name: str(t.kind) for t in all_templates()}


@dataclass
class FailureCounts:
    """Outcomes of a set of episodes: successes, env errors and failures by kind."""

    episodes: int = 0
    """Every episode, env errors included."""
    successes: int = 0
    env_errors: int = 0
    kinds: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAILURE_KINDS, 0))
    """Failed episodes of each kind (every kind present, in precedence order)."""
    turns_failed: int = 0
    """Turns of the failed episodes, summed."""
    turns_success: int = 0
    """Turns of the successful episodes, summed."""

    @property
    def failures(self) -> int:
        """Failed episodes (reward 0, env errors left out)."""
        return sum(self.kinds.values())

    def share(self, kind: str) -> float | None:
        """Fraction of the failed episodes that are of ``kind`` (None without failures)."""
        return self.kinds[kind] / self.failures if self.failures else None

    @property
    def mean_turns_failed(self) -> float | None:
        """Mean turns of a failed episode (None without failures)."""
        return self.turns_failed / self.failures if self.failures else None

    @property
    def mean_turns_success(self) -> float | None:
        """Mean turns of a successful episode (None without successes)."""
        return self.turns_success / self.successes if self.successes else None

    def add(self, outcome: str, turns: int) -> None:
        """Count one episode: ``outcome`` is ``success``, ``env_error`` or a failure kind."""
        self.episodes += 1
        if outcome == "success":
            self.successes += 1
            self.turns_success += turns
        elif outcome == "env_error":
            self.env_errors += 1
        else:
            self.kinds[outcome] += 1
            self.turns_failed += turns

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready counts, shares and mean turns."""
        return {
            "episodes": self.episodes,
            "successes": self.successes,
            "failures": self.failures,
            "env_errors": self.env_errors,
            "kinds": dict(self.kinds),
            "shares": {k: self.share(k) for k in FAILURE_KINDS},
            "mean_turns_failed": self.mean_turns_failed,
            "mean_turns_success": self.mean_turns_success,
        }


@dataclass
class FailureTable:
    """Failure kinds of one set of episodes (an evaluation, a step's rollouts), overall and
    per template."""

    label: str
    files: list[str] = field(default_factory=list)
    """Where the episodes come from (as shown to the user)."""
    kinds: Mapping[str, str] | None = None
    """Template name -> task kind (see ``classify``)."""
    loop_repeats: int = LOOP_REPEATS
    template: str | None = None
    """Only episodes of this template are counted (None: all)."""
    overall: FailureCounts = field(default_factory=FailureCounts)
    by_template: dict[str, FailureCounts] = field(default_factory=dict)
    bad_lines: int = 0
    """Lines of the files that were not trajectories (skipped)."""
    first_bad: str = ""
    """The loaders' one-line error of the first of them (``file:line: …``)."""

    def add(self, traj: Trajectory) -> str | None:
        """Count one episode (unless it is of another template than ``template``).

        Returns:
            ``success``, ``env_error`` or its failure kind; None when it was not counted.
        """
        name = template_of(traj, self.kinds)
        if self.template is not None and name != self.template:
            return None
        if traj.status == "env_error":
            outcome = "env_error"
        elif traj.reward == 1.0:
            outcome = "success"
        else:
            outcome = classify(traj, self.kinds, self.loop_repeats) or "wrong_end_state"
        self.overall.add(outcome, len(traj.turns))
        self.by_template.setdefault(name, FailureCounts()).add(outcome, len(traj.turns))
        return outcome

    def rows(self) -> list[tuple[str, FailureCounts]]:
        """Templates with a failed episode, most failures first (then by name)."""
        rows = [(n, c) for n, c in self.by_template.items() if c.failures]
        return sorted(rows, key=lambda r: (-r[1].failures, r[0]))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready table: every template (with or without failures) and the total."""
        return {
            "label": self.label,
            "files": list(self.files),
            "template": self.template,
            "loop_repeats": self.loop_repeats,
            "bad_lines": self.bad_lines,
            "overall": self.overall.to_dict(),
            "by_template": {n: c.to_dict() for n, c in sorted(self.by_template.items())},
        }


def tabulate(
    trajs: Iterable[Trajectory],
    label: str = "",
    kinds: Mapping[str, str] | None = None,
    loop_repeats: int = LOOP_REPEATS,
    template: str | None = None,
) -> FailureTable:
    """The failure table of some episodes (see ``FailureTable``).

    Args:
        trajs: the episodes.
        label: what they are, e.g. ``eval (max_turns=15)``.
        kinds: template name -> task kind, for trajectories that do not record it.
        loop_repeats: times the same action from the same state makes a ``loop`` (>= 2).
        template: count only the episodes of this template.

    Raises:
        ValueError: ``loop_repeats`` is below 2.
    """
    if loop_repeats < 2:
        raise ValueError(f"loop_repeats must be at least 2, got {loop_repeats}")
    table = FailureTable(label, kinds=kinds, loop_repeats=loop_repeats, template=template)
    for traj in trajs:
        table.add(traj)
    return table


def _cell(c: FailureCounts, kind: str) -> str:
    """``count (share %)`` of one kind, ``0`` when none."""
    n = c.kinds[kind]
    return f"{n} ({100 * n / c.failures:.0f}%)" if n else "0"


def _turns(x: float | None) -> str:
    """Mean turns with one decimal (``MISSING`` when unknown)."""
    return MISSING if x is None else f"{x:.1f}"


COLUMNS = [
    "Template",
    "Episodes",
    "Failed",
    *FAILURE_KINDS,
    "Env errors",
    "Turns (failed)",
    "Turns (success)",
]
"""Columns of a failure table (markdown and the command line)."""


def row_cells(name: str, c: FailureCounts, shares: bool = True) -> list[str]:
    """The cells of one row of a failure table (see ``COLUMNS``).

    Args:
        name: the first cell (the template).
        c: the row's counts.
        shares: each kind as ``count (share %)``; False: the count only.
    """
    return [
        name,
        str(c.episodes),
        str(c.failures),
        *(_cell(c, k) if shares else str(c.kinds[k]) for k in FAILURE_KINDS),
        str(c.env_errors),
        _turns(c.mean_turns_failed),
        _turns(c.mean_turns_success),
    ]


def failures_markdown(tables: list[FailureTable]) -> list[str]:
    """The "Failure kinds" section of ``report.md`` (no lines when no episode failed)."""
    if not any(t.overall.failures for t in tables):
        return []
    lines = [
        "## Failure kinds",
        "",
        "Each failed episode (reward 0; environment errors are counted apart) under one kind, "
        "the first that applies: " + ", ".join(f"`{k}`" for k in FAILURE_KINDS) + " "
        f"(a loop: the same action from the same state {tables[0].loop_repeats} times, or "
        'A-B-A-B; see docs/evaluation.md, "Failure kinds"). Cells: failed episodes of the '
        "kind (share of the row's failures); templates without a failed episode left out. "
        "`webagent-r1 failures DIR` prints the same tables.",
        "",
    ]
    for t in tables:
        lines += [f"### {t.label}", ""]
        if t.files:
            lines += ["From " + ", ".join(f"`{f}`" for f in t.files) + ".", ""]
        if not t.overall.failures:
            lines += [
                f"No failed episode ({t.overall.successes} successes, "
                f"{t.overall.env_errors} env errors).",
                "",
            ]
            continue
        body = [row_cells(n, c) for n, c in t.rows()]
        body.append(row_cells("**all**", t.overall))
        lines += md_table(COLUMNS, body) + [""]
        left_out = sum(1 for c in t.by_template.values() if not c.failures)
        if left_out:
            lines += [f"Templates without a failed episode: {left_out}.", ""]
        if t.bad_lines:
            first = f" The first: {t.first_bad}" if t.first_bad else ""
            lines += [f"Lines that were not trajectories, skipped: {t.bad_lines}.{first}", ""]
    return lines
