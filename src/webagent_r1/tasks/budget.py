"""Page budget: how many observation tokens the experts' steps need (pure functions).

For one expert turn, the observation the agent saw before acting and the action it took give
the line the step depends on:

* an action on an element (``Click``, ``Type``, ``Search``, ``Hover``,
  ``Select Dropdown Option``): the line that shows ``[id]`` (compact format) or ``id="id"``
  (simplified HTML);
* the final ``exit(message=…)`` of an info task: the first line that contains the answer
  (compared case-insensitively, with whitespace collapsed and element ids left out, and not
  inside a longer word or number); an answer of several values joined by commas
  (``Jane Doe, jane@example.com``) that is not on the page as a whole needs the line by
  which every value has appeared; an answer that is nowhere on the page is ``not on page``
  (a count the expert worked out, an answer read on an earlier page).

``needed`` is then the smallest ``observation.max_tokens`` at which the page, cut from the
top as ``browser.observation.fit_lines`` cuts it, still shows that line: the tokens of the
text up to the end of the line plus the truncation marker, or the tokens of the whole text
when that is fewer (a page that fits is not cut). ``webagent-r1 tasks budget`` rolls the
experts out with a large budget and aggregates these per template (``summarize``).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.browser.observation import ABOVE_MARKER, TRUNCATED_MARKER
from webagent_r1.tasks.experts import elements
from webagent_r1.types import ELEMENT_KINDS, Action

__all__ = [
    "DEFAULT_BUDGETS",
    "BudgetRow",
    "TurnNeed",
    "answer_line",
    "element_line",
    "measure_turn",
    "needed_tokens",
    "parse_budgets",
    "percentile",
    "summarize",
]

DEFAULT_BUDGETS: tuple[int, ...] = (300, 400, 600, 800, 1200)
"""Budgets whose fit shares the table shows when none are given."""

SCROLL_KINDS = frozenset({"Scroll Down", "Scroll Up"})

_HTML_ID = re.compile(r'\sid="(\d+)"')
_COMPACT_ID = re.compile(r"\[\d+\]")


def element_line(text: str, element_id: str) -> int | None:
    """Index of the first line of ``text`` that shows element ``element_id``, or None.

    Args:
        text: an observation text (compact or simplified-HTML format).
        element_id: the id of the element, as in ``[12]`` or ``id="12"``.
    """
    for i, line in enumerate(text.split("\n")):
        if any(el.id == element_id for el in elements(line)):
            return i
    return None


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().casefold()


def answer_line(text: str, answer: str) -> int | None:
    """Index of the first line of ``text`` that contains ``answer``, or None.

    The comparison ignores case and runs of whitespace; a line is read as the page shows it
    (quotes unescaped, HTML entities decoded) and element ids (``[12]``, ``id="12"``) are
    removed from it first, and the answer must not continue a word or a number on
    either side (``3`` is not found in ``13``, ``3rd`` or ``3.5``). An answer with commas
    that is not found whole is split at them: then the line by which every part has
    appeared (the last of their first lines), or None when a part is missing.

    Args:
        text: an observation text.
        answer: the exit message; an empty one is never found.
    """
    whole = _first_line(text, answer)
    parts = [p for p in answer.split(",") if p.strip()]
    if whole is not None or len(parts) < 2:
        return whole
    lines = [_first_line(text, p) for p in parts]
    return None if None in lines else max(line for line in lines if line is not None)


def _first_line(text: str, answer: str) -> int | None:
    """``answer_line`` of one value: the first line that contains it whole."""
    want = _norm(answer)
    if not want:
        return None
    # Not inside a word or a number: no letter or digit next to it, and no digit beyond a
    # decimal point or thousands separator ("12" is not in "$12.50" nor in "1,120").
    pattern = re.compile(
        r"(?<![0-9a-z])(?<![0-9][.,])" + re.escape(want) + r"(?![0-9a-z])(?![.,][0-9])"
    )
    for i, line in enumerate(text.split("\n")):
        plain = html.unescape(line.replace('\\"', '"'))  # as the page shows it
        clean = _norm(_HTML_ID.sub(" ", _COMPACT_ID.sub(" ", plain)))
        if pattern.search(clean):
            return i
    return None


def needed_tokens(
    text: str, line: int, count: Callable[[str], int], marker: str = TRUNCATED_MARKER
) -> tuple[int, int]:
    """The token offset of the end of ``line`` and the smallest budget that keeps it.

    Args:
        text: the observation text, lines joined by newlines.
        line: index of the line.
        count: the token counter the observation builder uses.
        marker: the line a cut page ends with.

    Returns:
        ``(offset, needed)``: ``offset`` counts the text up to the end of the line;
        ``needed`` is the smaller of the tokens of the text up to that line followed by the
        marker line, and the tokens of the whole text.

    Raises:
        IndexError: ``line`` is not a line of ``text``.
    """
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        raise IndexError(f"line {line} of a text of {len(lines)} lines")
    head = "\n".join(lines[: line + 1])
    offset = count(head)
    return offset, min(count(f"{head}\n{marker}"), count(text))


@dataclass
class TurnNeed:
    """What one expert turn needs of its page.

    Attributes:
        template: the task's template name.
        task_id: the task.
        turn: index of the turn in the episode.
        kind: ``element`` (an action on an element), ``answer`` (an info task's exit),
            ``scroll``, or ``other`` (navigation, an exit without an answer to find).
        page_tokens: tokens of the observation the turn acted on.
        line: index of the line the turn needs; None when there is none.
        offset: tokens up to the end of that line; None when there is no line.
        needed: smallest ``observation.max_tokens`` that shows that line; None when none.
        note: ``not on page`` (an answer that is not on the page), ``element not shown``
            (an element id the text does not show), or "".
        cut: the observation itself was cut by the rollout's budget (then ``needed`` may
            be missing or too small: roll out with a larger budget).
    """

    template: str
    task_id: str
    turn: int
    kind: str
    page_tokens: int
    line: int | None = None
    offset: int | None = None
    needed: int | None = None
    note: str = ""
    cut: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def measure_turn(
    text: str,
    action: Action | None,
    count: Callable[[str], int],
    info_task: bool,
    template: str = "",
    task_id: str = "",
    turn: int = 0,
    marker: str = TRUNCATED_MARKER,
) -> TurnNeed:
    """Find the line an expert turn depends on and the tokens it needs.

    Args:
        text: the observation the turn acted on.
        action: the parsed action (None: unparsable, counted as ``other``).
        count: the token counter the observation builder uses.
        info_task: the task is answered with ``exit(message=…)``; the exit of any other task
            has no answer to find (``other``).
        template: template name recorded in the result.
        task_id: task id recorded in the result.
        turn: turn index recorded in the result.
        marker: the line a cut page ends with.
    """
    need = TurnNeed(template, task_id, turn, "other", count(text))
    need.cut = TRUNCATED_MARKER in text or ABOVE_MARKER in text
    if action is None:
        return need
    line: int | None = None
    if action.kind in SCROLL_KINDS:
        need.kind = "scroll"
        return need
    if action.kind in ELEMENT_KINDS and action.element is not None:
        need.kind = "element"
        line = element_line(text, action.element)
        if line is None:
            need.note = "element not shown"
    elif action.kind == "exit" and info_task:
        need.kind = "answer"
        line = answer_line(text, action.argument or "")
        if line is None:
            need.note = "not on page"
    if line is not None:
        need.line = line
        need.offset, need.needed = needed_tokens(text, line, count, marker)
    return need


def percentile(values: Sequence[int], q: float) -> int:
    """The nearest-rank ``q``-th percentile: the ``ceil(q/100 * n)``-th smallest value.

    Args:
        values: at least one value.
        q: in (0, 100].

    Raises:
        ValueError: no values, or ``q`` out of range.
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile q must be in (0, 100], got {q}")
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@dataclass
class BudgetRow:
    """One template's (or all templates') needs.

    Attributes:
        name: template name, or ``all``.
        episodes: expert episodes measured.
        turns: expert turns in them.
        measured: turns with a line found (element and answer turns).
        median: nearest-rank median of ``needed`` over the measured turns (None: none).
        p90: nearest-rank 90th percentile.
        max: the largest ``needed``.
        fits: budget → share of the measured turns whose ``needed`` is within it.
        scrolls: turns that scrolled.
        not_on_page: answers not found on the page the exit acted on.
        cut: turns whose observation was itself cut by the rollout's budget.
    """

    name: str
    episodes: int = 0
    turns: int = 0
    measured: int = 0
    median: int | None = None
    p90: int | None = None
    max: int | None = None
    fits: dict[int, float] = field(default_factory=dict)
    scrolls: int = 0
    not_on_page: int = 0
    cut: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["fits"] = {str(k): v for k, v in self.fits.items()}
        return d


def _row(name: str, needs: list[TurnNeed], budgets: Sequence[int]) -> BudgetRow:
    values = [n.needed for n in needs if n.needed is not None]
    row = BudgetRow(
        name,
        episodes=len({n.task_id for n in needs}),
        turns=len(needs),
        measured=len(values),
        scrolls=sum(n.kind == "scroll" for n in needs),
        not_on_page=sum(n.note == "not on page" for n in needs),
        cut=sum(n.cut for n in needs),
    )
    if values:
        row.median, row.p90, row.max = percentile(values, 50), percentile(values, 90), max(values)
        row.fits = {b: sum(v <= b for v in values) / len(values) for b in budgets}
    return row


def summarize(needs: Iterable[TurnNeed], budgets: Sequence[int]) -> list[BudgetRow]:
    """One row per template (sorted by name), then the ``all`` row over every turn.

    Args:
        needs: the measured turns.
        budgets: budgets whose fit shares each row gets.
    """
    by_template: dict[str, list[TurnNeed]] = {}
    everything: list[TurnNeed] = []
    for n in needs:
        by_template.setdefault(n.template, []).append(n)
        everything.append(n)
    rows = [_row(name, by_template[name], budgets) for name in sorted(by_template)]
    return [*rows, _row("all", everything, budgets)]


def parse_budgets(text: str) -> list[int]:
    """``"300,400,600"`` → ``[300, 400, 600]`` (sorted, without repeats).

    Raises:
        ValueError: an empty list, or an entry that is not a whole number >= 1.
    """
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not re.fullmatch(r"[0-9]+", part) or int(part) < 1:
            raise ValueError(
                f"--budgets takes whole token counts >= 1 separated by commas, e.g. 300,600; "
                f"got {part!r}"
            )
        out.add(int(part))
    return sorted(out)
