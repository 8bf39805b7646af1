"""Page → observation text: one ``page.evaluate`` of ``observe.js``, then pure formatting.

The JavaScript walks the DOM once, numbers interactive elements (``data-webagent-id``) and
returns both text formats as lists of lines, each line with the document y of its first
item. This module picks the configured format and fits it into the token budget:

* ``html``: simplified HTML, WebRL / WebAgent-R1 style, e.g.
  ``<a id="3" href="/product/12">Orbit Golden Charger</a>``.
* ``compact``: one line per node, e.g. ``[12] link "Orbit Golden Charger"``,
  ``[5] textbox "Search" value="red mug"``, ``heading "Results"``, ``Mug | $12.00``.

When a full-page observation is over budget, the text starts at the current scroll position
(content above it is replaced by a marker line) and is cut at a line boundary with a marker
saying the page continues. Scrolling the viewport alone does not always reveal what the
budget hid: a page shorter than the viewport does not scroll, and a budget smaller than a
viewport's worth of text skips the lines between the cut and the next screen. So, with
``observation.page_through`` (the default), the session pages through the text instead:
"Scroll Down" starts the next observation at the first line the budget cut (``start`` and
``next_start`` of ``PageText``, the ``start`` argument of ``to_page_text``), "Scroll Up"
goes back a page (``prev_start``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from webagent_r1.config import ObservationConfig

TRUNCATED_MARKER = "[... truncated: page continues, scroll down to see more ...]"
MORE_BELOW_MARKER = "[... more below: scroll down to see more ...]"
ABOVE_MARKER = "[... content above: scroll up to see it ...]"

# Lines starting within this many pixels above the scroll position still count as visible,
# so a line cut by the top edge of the viewport is not hidden by the "above" marker.
_SCROLL_SLACK_PX = 8


@cache
def observe_script() -> str:
    """The JavaScript function (source text) that ``page.evaluate`` runs to read a page."""
    return resources.files(__package__).joinpath("observe.js").read_text(encoding="utf-8")


def approx_tokens(text: str) -> int:
    """Cheap token estimate (~4 characters a token) used when no tokenizer is given."""
    return (len(text) + 3) // 4


@dataclass
class PageText:
    """A page rendered to text for the agent.

    Attributes:
        url: the page URL when it was read.
        title: the document title.
        text: the observation text in the configured format, within the token budget.
        truncated: True when content was cut to fit the budget.
        interactive: how many interactive elements (with ids) the text shows.
        scroll: scroll position and sizes in CSS pixels (``x``, ``y``, ``viewportWidth``,
            ``viewportHeight``, ``pageHeight``).
        start: index of the first page line shown (0 when the text starts at the top; always
            0 in viewport mode).
        next_start: index of the first page line the budget cut off below the text; None
            when the text reaches the end of the page (or in viewport mode).
        prev_start: where the page of text that ends just above ``start`` begins (what
            Scroll Up shows when there is no earlier Scroll Down to go back to); None when
            ``start`` is 0 (or in viewport mode).
        line_ys: document y of each page line (CSS pixels), to scroll the viewport to a line.
        document: when the page's document started loading (ms since the epoch): a new
            document, even at the same URL, has another.
    """

    url: str
    title: str
    text: str
    truncated: bool
    interactive: int
    scroll: dict[str, int]
    start: int = 0
    next_start: int | None = None
    prev_start: int | None = None
    line_ys: list[int] = field(default_factory=list)
    document: float = 0.0


def fit_lines(
    lines: list[str],
    max_tokens: int,
    count_tokens: Callable[[str], int] | None = None,
    marker: str = TRUNCATED_MARKER,
) -> tuple[str, bool]:
    """Join ``lines`` and cut them at a line boundary to fit ``max_tokens``.

    Args:
        lines: the text, one node (or tag group) a line.
        max_tokens: budget for the returned text, marker included.
        count_tokens: tokenizer-backed counter; ``approx_tokens`` when None.
        marker: line appended when something was cut.

    Returns:
        ``(text, truncated)``. A first line longer than the whole budget is cut inside the
        line (the only case that is not a line boundary).
    """
    text, kept = fit_prefix(lines, max_tokens, count_tokens, marker)
    return text, kept < len(lines)


def fit_prefix(
    lines: list[str],
    max_tokens: int,
    count_tokens: Callable[[str], int] | None = None,
    marker: str = TRUNCATED_MARKER,
) -> tuple[str, int]:
    """``fit_lines`` that says how far it got: ``(text, lines kept whole)``.

    ``kept == len(lines)`` when nothing was cut; 0 when not even the first line fits (that
    line is then cut by characters, or left out when no character fits).
    """
    count = count_tokens or approx_tokens
    full = "\n".join(lines)
    if count(full) <= max_tokens:
        return full, len(lines)

    def fits(k: int) -> bool:
        return count("\n".join([*lines[:k], marker])) <= max_tokens

    # Binary search the longest prefix that fits: O(log n) tokenizer calls.
    lo, hi = 0, len(lines) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    if lo > 0 or not lines:
        return "\n".join([*lines[:lo], marker]), lo
    # Not even the first line fits: cut it by characters.
    first = lines[0]
    lo_c, hi_c = 0, len(first)
    while lo_c < hi_c:
        mid = (lo_c + hi_c + 1) // 2
        if count(first[:mid] + "…\n" + marker) <= max_tokens:
            lo_c = mid
        else:
            hi_c = mid - 1
    head = first[:lo_c] + "…" if lo_c else ""
    return "\n".join([x for x in (head, marker) if x]), 0


def render(
    raw: dict[str, Any],
    cfg: ObservationConfig,
    count_tokens: Callable[[str], int] | None = None,
    start: int | None = None,
) -> tuple[str, bool]:
    """Turn the result of ``observe.js`` into the observation text (pure function).

    Args:
        raw: the dict ``observe.js`` returned (``html`` / ``compact``: ``{text, ys}`` with
            lines joined by newlines and their document y joined by commas; ``scroll``).
        cfg: format, viewport mode and token budget.
        count_tokens: tokenizer-backed counter; ``approx_tokens`` when None.
        start: first page line to show when the page is over budget (paging through it);
            None: the first line at the scroll position.

    Returns:
        ``(text, truncated)``.
    """
    w = _window(raw, cfg, count_tokens, start)
    return w.text, w.truncated


@dataclass
class _Window:
    text: str
    truncated: bool
    start: int
    next_start: int | None
    prev_start: int | None
    ys: list[int]


def _window(
    raw: dict[str, Any],
    cfg: ObservationConfig,
    count_tokens: Callable[[str], int] | None,
    start: int | None,
) -> _Window:
    """``render`` with where the text starts and where the budget cut it."""
    lines, ys = _unpack(raw[cfg.format])
    scroll = raw.get("scroll") or {}
    count = count_tokens or approx_tokens

    if cfg.viewport_only:
        # The JS already kept only what intersects the viewport. If the budget cuts it, the
        # truncation marker replaces the "more below" one: both say to scroll down.
        tail = [MORE_BELOW_MARKER] if _more_below(scroll) else []
        text, truncated = fit_lines(lines + tail, cfg.max_tokens, count)
        return _Window(text, truncated, 0, None, None, ys)

    text = "\n".join(lines)
    if count(text) <= cfg.max_tokens:
        return _Window(text, False, 0, None, None, ys)
    if start is not None and start >= len(lines):
        start = None  # the document got shorter than where paging had got to
    if start is None:
        # Over budget: show the page from the scroll position on.
        top = scroll.get("y", 0)
        start = 0
        if top > 0:
            start = next((i for i, y in enumerate(ys) if y >= top - _SCROLL_SLACK_PX), len(lines))
    else:
        start = max(start, 0)
    head = [ABOVE_MARKER] if start > 0 else []
    budget = cfg.max_tokens - (count(ABOVE_MARKER) + 1 if head else 0)
    body, kept = fit_prefix(lines[start:], max(budget, 1), count)
    # A first line longer than the budget is shown cut; the next page starts after it.
    nxt = start + max(kept, 1)
    text = "\n".join([*head, body]) if body else "\n".join(head)
    prev = _page_above(lines, start, cfg.max_tokens, count) if start > 0 else None
    return _Window(text, True, start, nxt if nxt < len(lines) else None, prev, ys)


def _page_above(lines: list[str], start: int, max_tokens: int, count: Callable[[str], int]) -> int:
    """The smallest s whose page (markers included) holds ``lines[s:start]`` whole.

    At least one line back (``start - 1``), so Scroll Up always moves, even past a line
    longer than the budget.
    """

    above = count(ABOVE_MARKER) + 1

    def fits(s: int) -> bool:  # as ``_window`` fits a page that starts at s
        budget = max_tokens - (above if s > 0 else 0)
        return count("\n".join([*lines[s:start], TRUNCATED_MARKER])) <= max(budget, 1)

    lo, hi = 0, start - 1  # fits(start - 1) is assumed: the answer is at most start - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _unpack(block: dict[str, Any]) -> tuple[list[str], list[int]]:
    """``{text, ys}`` as packed by ``observe.js`` → (lines, document y of each line)."""
    text = block.get("text") or ""
    lines = text.split("\n") if text else []
    ys = [int(y) for y in block["ys"].split(",")] if block.get("ys") else []
    return lines, ys + [ys[-1] if ys else 0] * (len(lines) - len(ys))


def _more_below(scroll: dict[str, Any]) -> bool:
    if not scroll:
        return False
    bottom = scroll.get("y", 0) + scroll.get("viewportHeight", 0)
    return bottom < scroll.get("pageHeight", 0) - 2


async def read_page(
    page: Any, viewport_only: bool, timeout_s: float, fmt: str | None = None
) -> dict[str, Any]:
    """Run ``observe.js`` on ``page`` (one evaluate call) and return its raw result.

    Args:
        page: a Playwright ``Page``.
        viewport_only: keep only nodes that intersect the viewport.
        timeout_s: give up after this long (a page stuck in a script never answers).
        fmt: ``"html"`` or ``"compact"`` to serialise one format only (half the transfer);
            None for both.

    Raises:
        asyncio.TimeoutError: the page did not answer in time.
        playwright.async_api.Error: the page navigated or closed while being read.
    """
    return await asyncio.wait_for(
        page.evaluate(observe_script(), {"viewportOnly": viewport_only, "format": fmt}),
        timeout=timeout_s,
    )


def to_page_text(
    raw: dict[str, Any],
    cfg: ObservationConfig,
    count_tokens: Callable[[str], int] | None = None,
    start: int | None = None,
) -> PageText:
    """Wrap ``render`` with the page's url, title, sizes and where the text starts and ends.

    Args:
        raw / cfg / count_tokens: as for ``render``.
        start: first page line to show when the page is over budget (the session paging
            through it); None: the first line at the scroll position.
    """
    w = _window(raw, cfg, count_tokens, start)
    return PageText(
        url=raw.get("url", ""),
        title=raw.get("title", ""),
        text=w.text,
        truncated=w.truncated,
        interactive=int(raw.get("interactive", 0)),
        scroll=dict(raw.get("scroll") or {}),
        start=w.start,
        next_start=w.next_start,
        prev_start=w.prev_start,
        line_ys=w.ys,
        document=float(raw.get("document") or 0.0),
    )
