"""Execute one agent action on a Playwright page.

Elements are found by the ``data-webagent-id`` attribute that ``observe.js`` set, so the id
the agent read in the observation is the element it acts on. Every problem an agent can cause
(unknown id, wrong element kind, missing option, timeout) comes back as a one-sentence error
string for the next observation; nothing here raises for it (BrowserGym's convention). A
crashed browser is not the agent's fault: Playwright's ``TargetClosedError`` propagates so the
session can report it as an environment error.

Tab following, the origin allow-list and crash detection live in ``launch.BrowserSession``,
which wraps ``execute_action``.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from webagent_r1.types import ARGUMENT_KINDS, ELEMENT_KINDS, Action

ATTR = "data-webagent-id"

# Reads what an action needs to know about its target in one round trip, searching open
# shadow roots too (a Playwright CSS locator pierces them, document.querySelector does not).
_DESCRIBE_JS = """(id) => {
  const sel = '[data-webagent-id="' + id + '"]';
  const find = (root) => {
    const e = root.querySelector(sel);
    if (e) return e;
    for (const h of root.querySelectorAll('*')) {
      if (h.shadowRoot) { const f = find(h.shadowRoot); if (f) return f; }
    }
    return null;
  };
  const el = find(document);
  if (!el) return null;
  const tag = el.localName;
  const st = getComputedStyle(el);
  const r = el.getBoundingClientRect();
  const link = el.closest('a[href], area[href]');
  const clean = (s) => (s || '').replace(/\\s+/g, ' ').trim();
  const NOT_TYPEABLE = ['checkbox', 'radio', 'submit', 'button', 'reset', 'image', 'file',
                        'hidden'];
  const role = (el.getAttribute('role') || '').toLowerCase();
  return {
    tag,
    type: tag === 'input' ? el.type : '',
    role,
    visible: r.width > 0 && r.height > 0 && st.visibility === 'visible',
    disabled: !!el.disabled || el.getAttribute('aria-disabled') === 'true',
    typeable: (tag === 'input' && !NOT_TYPEABLE.includes(el.type)) || tag === 'textarea' ||
      el.isContentEditable || role === 'textbox' || role === 'searchbox',
    href: link ? link.href : null,
    options: tag === 'select'
      ? Array.from(el.options).map((o) => ({ label: clean(o.label || o.textContent),
                                            value: o.value }))
      : null,
    label: clean(el.getAttribute('aria-label') ||
      (el.labels && el.labels.length ? el.labels[0].innerText : '') || el.placeholder ||
      (tag === 'select' ? '' : el.innerText || el.value) || '').slice(0, 40),
  };
}"""

# Scrolls the window by one viewport; when the window cannot scroll (app-like pages that
# scroll an inner box), scrolls the nearest scrollable ancestor of the viewport's centre.
# 'instant' overrides CSS smooth scrolling so the next observation sees the final position.
_SCROLL_JS = """(dir) => {
  const before = window.scrollY;
  window.scrollTo({ top: before + dir * window.innerHeight, behavior: 'instant' });
  if (window.scrollY !== before) return true;
  let el = document.elementFromPoint(window.innerWidth / 2, window.innerHeight / 2);
  for (; el; el = el.parentElement) {
    const oy = getComputedStyle(el).overflowY;
    if ((oy === 'auto' || oy === 'scroll') && el.scrollHeight > el.clientHeight) {
      const b = el.scrollTop;
      el.scrollTo({ top: b + dir * el.clientHeight, behavior: 'instant' });
      if (el.scrollTop !== b) return true;
    }
  }
  return false;
}"""

# Schemes that load a document when followed; other hrefs (javascript:, mailto:) run script
# or do nothing in a headless browser, so the allow-list does not apply to them.
_NAVIGATING_SCHEMES = ("http:", "https:", "file:", "data:", "ftp:", "chrome:", "about:", "blob:")


def blocked_message(url: str) -> str:
    """The error an agent sees when it tries to leave the allowed sites."""
    return f"navigation to {url!r} blocked: not an allowed site"


def error_text(e: BaseException) -> str:
    """First line of a Playwright error, without its call log."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    # Playwright prefixes the API name ("Locator.click: ..."), which means nothing to the agent.
    return re.sub(r"^[A-Za-z]+\.[A-Za-z_]+: ", "", msg)


def is_fatal(page: Page, e: PlaywrightError) -> bool:
    """Whether ``e`` means the tab, context or browser is gone (not the agent's doing)."""
    # TargetClosedError is not exported by playwright.async_api; match it by name.
    return (
        page.is_closed()
        or type(e).__name__ == "TargetClosedError"
        or "Target crashed" in str(e)
        or "has been closed" in str(e)
    )


SELECT_NAVIGATION_WAIT_S = 0.3
"""How long a key press or dropdown change may take to start a navigation (form submit)."""


async def _then_await_navigation(page: Page, act: Any, nav_ms: int) -> str | None:
    """Run ``act`` (an awaitable); if it starts a main-frame navigation soon after (a form
    submitted by a key press or a change handler), wait for the new document's DOM, so the
    next observation does not read a page that is still loading. Actions that do not
    navigate cost at most ``SELECT_NAVIGATION_WAIT_S``."""
    loop = asyncio.get_running_loop()
    navigating: asyncio.Future[None] = loop.create_future()
    loaded: asyncio.Future[None] = loop.create_future()

    def on_request(request: Any) -> None:
        main = request.is_navigation_request() and request.frame == page.main_frame
        if main and not navigating.done():
            navigating.set_result(None)

    def on_loaded(_: Any) -> None:
        # Playwright may itself wait for the navigation inside ``act``: the new document's
        # DOMContentLoaded can fire before ``act`` returns, so it is recorded, not awaited.
        if navigating.done() and not loaded.done():
            loaded.set_result(None)

    page.on("request", on_request)
    page.on("domcontentloaded", on_loaded)
    try:
        await act
        try:
            await asyncio.wait_for(asyncio.shield(navigating), SELECT_NAVIGATION_WAIT_S)
        except TimeoutError:
            return None
        try:
            await asyncio.wait_for(asyncio.shield(loaded), nav_ms / 1000)
        except TimeoutError:
            return f"the page did not finish loading within {nav_ms / 1000:g} s"
    finally:
        page.remove_listener("request", on_request)
        page.remove_listener("domcontentloaded", on_loaded)
    return None


async def settle(page: Page, timeout_ms: int) -> str | None:
    """Wait until the page's DOM is loaded (returns at once when it already is)."""
    try:
        await page.wait_for_load_state("domcontentloaded", timeout=timeout_ms)
    except PlaywrightTimeoutError:
        return f"the page did not finish loading within {timeout_ms / 1000:g} s"
    return None


async def execute_action(
    page: Page,
    action: Action,
    *,
    action_timeout_ms: int,
    navigation_timeout_ms: int,
    is_allowed: Callable[[str], bool],
) -> str | None:
    """Execute ``action`` on ``page`` and wait for the page to settle.

    Args:
        page: the active Playwright page.
        action: the parsed action; ``action.element`` is an id from the last observation.
        action_timeout_ms: timeout of a click / fill / hover.
        navigation_timeout_ms: timeout of a page load (back, forward, after a click).
        is_allowed: whether a URL is on the session's allow-list (checked before following a
            link, so a blocked click costs no request).

    Returns:
        None on success, else a one-sentence error for the agent.

    Raises:
        playwright.async_api.Error: the page, context or browser is gone (see ``is_fatal``).
    """
    kind = action.kind
    handler = _HANDLERS.get(kind)
    if handler is None:
        return f"unknown action {kind!r}; valid actions: {', '.join(_HANDLERS)}"
    if kind in ELEMENT_KINDS and not (action.element or "").strip():
        return f"action {kind!r} needs an element id"
    if kind in ARGUMENT_KINDS and action.argument is None:
        return f"action {kind!r} needs an argument"
    try:
        err = await handler(page, action, action_timeout_ms, navigation_timeout_ms, is_allowed)
    except PlaywrightTimeoutError as e:
        return f"{kind} timed out: {error_text(e)}"
    except PlaywrightError as e:
        if is_fatal(page, e):
            raise
        return f"{kind} failed: {error_text(e)}"
    if err:
        return err
    return await settle(page, navigation_timeout_ms)


async def _describe(page: Page, element: str) -> tuple[Any, dict[str, Any] | str]:
    """Find element ``element``: ``(locator, description)`` or ``(None, error message)``."""
    element = element.strip()
    if not element.isdigit():
        return None, f"element {element!r} not found on the page (ids are numbers)"
    desc = await page.evaluate(_DESCRIBE_JS, element)
    if desc is None:
        return None, f"element {element} not found on the page"
    if not desc["visible"]:
        return None, f"element {element} is not visible on the page"
    return page.locator(f'[{ATTR}="{element}"]').first, desc


def _what(element: str, desc: dict[str, Any]) -> str:
    kind = desc["type"] if desc["tag"] == "input" else desc["role"] or desc["tag"]
    label = f" {desc['label']!r}" if desc["label"] else ""
    return f"element {element} ({kind}{label})"


async def _click(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    loc, desc = await _describe(page, a.element or "")
    if loc is None:
        return desc
    href = desc["href"]
    if href and href.lower().startswith(_NAVIGATING_SCHEMES) and not is_allowed(href):
        return blocked_message(href)
    if desc["disabled"]:
        return f"{_what(a.element or '', desc)} is disabled"
    await loc.click(timeout=t_ms)
    return None


async def _type(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    loc, desc = await _describe(page, a.element or "")
    if loc is None:
        return desc
    if desc["tag"] == "select":
        return f"{_what(a.element or '', desc)} is a dropdown: use Select Dropdown Option"
    if not desc["typeable"]:
        return f"{_what(a.element or '', desc)} cannot be typed into; Type needs a text box"
    if desc["disabled"]:
        return f"{_what(a.element or '', desc)} is disabled"
    # fill() replaces the field's content, so typing never appends to a stale value.
    await loc.fill(a.argument or "", timeout=t_ms)
    return None


async def _search(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    err = await _type(page, a, t_ms, nav_ms, is_allowed)
    if err:
        return err
    box = page.locator(f'[{ATTR}="{(a.element or "").strip()}"]').first
    return await _then_await_navigation(page, box.press("Enter", timeout=t_ms), nav_ms)


async def _hover(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    loc, desc = await _describe(page, a.element or "")
    if loc is None:
        return desc
    await loc.hover(timeout=t_ms)
    return None


async def _press_enter(
    page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any
) -> str | None:
    return await _then_await_navigation(page, page.keyboard.press("Enter"), nav_ms)


async def _scroll(page: Page, direction: int) -> str | None:
    moved = await page.evaluate(_SCROLL_JS, direction)
    if not moved:
        return (
            "already at the bottom of the page"
            if direction > 0
            else "already at the top of the page"
        )
    return None


async def _scroll_down(
    page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any
) -> str | None:
    return await _scroll(page, 1)


async def _scroll_up(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    return await _scroll(page, -1)


def match_option(options: list[dict[str, str]], wanted: str) -> int | None:
    """Index of the option whose visible label is ``wanted`` (case-insensitive), else whose
    value is, else the only option whose label contains it; None when none matches."""
    w = " ".join(wanted.split()).lower()
    for key in ("label", "value"):
        for i, o in enumerate(options):
            if " ".join(o[key].split()).lower() == w:
                return i
    partial = [i for i, o in enumerate(options) if w and w in o["label"].lower()]
    return partial[0] if len(partial) == 1 else None


async def _select(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    loc, desc = await _describe(page, a.element or "")
    if loc is None:
        return desc
    if desc["options"] is None:
        return f"{_what(a.element or '', desc)} is not a dropdown; use Click"
    if desc["disabled"]:
        return f"{_what(a.element or '', desc)} is disabled"
    index = match_option(desc["options"], a.argument or "")
    if index is None:
        names = ", ".join(f'"{o["label"] or o["value"]}"' for o in desc["options"][:30])
        return f"option {a.argument!r} not found in element {a.element}; options: {names}"
    # A dropdown whose change handler submits its form (e.g. "Sort By") navigates after
    # select_option has returned.
    return await _then_await_navigation(page, loc.select_option(index=index, timeout=t_ms), nav_ms)


async def _history(page: Page, forward: bool, nav_ms: int) -> str | None:
    before = page.url
    go = page.go_forward if forward else page.go_back
    response = await go(wait_until="domcontentloaded", timeout=nav_ms)
    if response is None and page.url == before:
        return "cannot go forward: no next page" if forward else "cannot go back: no previous page"
    if not forward and page.url == "about:blank" and before != "about:blank":
        # A new tab starts on about:blank: going back to it leaves the site with nothing to
        # see, so it counts as the start of the history.
        await page.go_forward(wait_until="domcontentloaded", timeout=nav_ms)
        return "cannot go back: no previous page"
    return None


async def _go_back(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    return await _history(page, False, nav_ms)


async def _go_forward(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    return await _history(page, True, nav_ms)


async def _exit(page: Page, a: Action, t_ms: int, nav_ms: int, is_allowed: Any) -> str | None:
    # The env ends the episode and scores the answer; the browser has nothing to do.
    return None


_HANDLERS = {
    "Click": _click,
    "Type": _type,
    "Search": _search,
    "Hover": _hover,
    "Press Enter": _press_enter,
    "Scroll Down": _scroll_down,
    "Scroll Up": _scroll_up,
    "Select Dropdown Option": _select,
    "go_backward": _go_back,
    "go_forward": _go_forward,
    "exit": _exit,
}
