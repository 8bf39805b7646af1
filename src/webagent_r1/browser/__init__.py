"""Playwright + Chromium driver: launch, per-episode sessions, observations and actions.

Typical use::

    async with await Browser.launch(BrowserConfig()) as browser:
        session = await browser.new_session(["http://127.0.0.1:7770"])
        await session.goto("http://127.0.0.1:7770/")
        obs = await session.observe(ObservationConfig())
        error = await session.execute(Action("Click", element="12"))
"""

from webagent_r1.browser.execute import blocked_message, execute_action, match_option
from webagent_r1.browser.launch import (
    CHROMIUM_ARGS,
    AllowList,
    Browser,
    BrowserCrashedError,
    BrowserError,
    BrowserNotFoundError,
    BrowserSession,
    find_chromium,
    normalize_origin,
)
from webagent_r1.browser.observation import (
    ABOVE_MARKER,
    MORE_BELOW_MARKER,
    TRUNCATED_MARKER,
    PageText,
    approx_tokens,
    fit_lines,
    render,
)

__all__ = [
    "ABOVE_MARKER",
    "CHROMIUM_ARGS",
    "MORE_BELOW_MARKER",
    "TRUNCATED_MARKER",
    "AllowList",
    "Browser",
    "BrowserCrashedError",
    "BrowserError",
    "BrowserNotFoundError",
    "BrowserSession",
    "PageText",
    "approx_tokens",
    "blocked_message",
    "execute_action",
    "find_chromium",
    "fit_lines",
    "match_option",
    "normalize_origin",
    "render",
]
