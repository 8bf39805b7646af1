"""Fixtures for browser tests (the shared ones live in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from webagent_r1.browser import Browser, BrowserSession


@pytest.fixture
async def session(browser: Browser, site: str) -> AsyncIterator[BrowserSession]:
    """A fresh context allowed to load ``site`` only, on its index page."""
    await browser.ensure_alive()
    s = await browser.new_session([site])
    assert await s.goto(f"{site}/index.html") is None
    yield s
    await s.close()
