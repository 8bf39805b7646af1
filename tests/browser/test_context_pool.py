"""The context pool (``browser.context_pool``): a reused context carries nothing of the
episode before it, and a context that crashed or could not be cleaned is never reused."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from webagent_r1.browser import Browser, BrowserCrashedError, BrowserSession
from webagent_r1.browser import launch as launch_mod
from webagent_r1.config import BrowserConfig

# Everything a page can leave behind: a cookie, local and session storage, an IndexedDB
# database, a second tab and a history entry.
_LEAVE_TRACES = """async () => {
    document.cookie = "seen=1; max-age=3600";
    localStorage.setItem("k", "v");
    sessionStorage.setItem("s", "v");
    await new Promise((ok, bad) => {
        const r = indexedDB.open("traces", 1);
        r.onupgradeneeded = () => r.result.createObjectStore("t");
        r.onsuccess = () => { r.result.close(); ok(); };
        r.onerror = () => bad(r.error);
    });
}"""

_READ_TRACES = """async () => [
    document.cookie,
    localStorage.getItem("k"),
    sessionStorage.getItem("s"),
    (await indexedDB.databases()).map(d => d.name),
    history.length,
]"""


async def _fresh_browser(**pool: int) -> Browser:
    return await Browser.launch(BrowserConfig(**pool))


async def _used_session(browser: Browser, site: str) -> BrowserSession:
    s = await browser.new_session([site])
    assert await s.goto(f"{site}/index.html") is None
    assert await s.goto(f"{site}/product.html") is None
    await s.page.evaluate(_LEAVE_TRACES)
    assert await s.page.evaluate(_READ_TRACES) == ["seen=1", "v", "v", ["traces"], 3]
    await s.page.evaluate(f"window.open({f'{site}/menu.html'!r})")
    for _ in range(100):
        if len(s.pages) == 2:
            break
        await s.page.wait_for_timeout(20)
    assert len(s.pages) == 2
    return s


async def test_a_reused_context_carries_nothing_of_the_episode_before(site: str) -> None:
    browser = await _fresh_browser()
    try:
        first = await _used_session(browser, site)
        context = first._context
        await first.close()
        await browser.pool_ready()
        assert browser.pooled_contexts == 1
        second = await browser.new_session([site])
        assert second._context is context and browser.contexts_reused == 1
        assert browser.contexts_opened == 1
        # one blank tab with no history, no cookie in the context
        assert len(second.pages) == 1 and second.page.url == "about:blank"
        assert await context.cookies() == []
        assert await second.goto(f"{site}/index.html") is None
        assert await second.page.evaluate(_READ_TRACES) == ["", None, None, [], 2]
        await second.close()
    finally:
        await browser.close()


async def test_a_closed_session_cannot_touch_the_context_it_gave_back(site: str) -> None:
    browser = await _fresh_browser()
    try:
        first = await browser.new_session([site])
        await first.close()
        await browser.pool_ready()
        second = await browser.new_session([site])
        assert second._context is first._context
        with pytest.raises(BrowserCrashedError, match="closed"):
            await first.goto(f"{site}/index.html")
        with pytest.raises(BrowserCrashedError, match="closed"):
            first.context  # noqa: B018
        assert first.pages == []
        assert second.page.url == "about:blank"  # untouched by the stale handle
        await second.close()
    finally:
        await browser.close()


async def test_a_context_whose_page_crashed_is_replaced(site: str) -> None:
    browser = await _fresh_browser()
    try:
        first = await browser.new_session([site])
        assert await first.goto(f"{site}/index.html") is None
        cdp = await first.context.new_cdp_session(first.page)
        # the call dies with its page (an error, or no answer at all)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(cdp.send("Page.crash"), 5)
        for _ in range(100):
            if first._crashed_pages:
                break
            await asyncio.sleep(0.05)
        assert first._crashed_pages
        await first.close()
        await browser.pool_ready()
        assert browser.pooled_contexts == 0
        second = await browser.new_session([site])
        assert second._context is not first._context and browser.contexts_opened == 2
        assert await second.goto(f"{site}/index.html") is None
        await second.close()
    finally:
        await browser.close()


async def test_a_context_that_could_not_be_cleaned_is_closed(
    site: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def leaves_a_tab(pooled: launch_mod._PooledContext, origins: list[str]) -> bool:
        await pooled.context.new_page()  # a second tab: not as good as new
        return False

    monkeypatch.setattr(launch_mod, "_clean", leaves_a_tab)
    browser = await _fresh_browser()
    try:
        first = await browser.new_session([site])
        context = first._context
        await first.close()
        await browser.pool_ready()
        assert browser.pooled_contexts == 0 and context not in browser._browser.contexts
        second = await browser.new_session([site])
        assert second._context is not context
        await second.close()
    finally:
        await browser.close()


async def test_pool_off_and_max_uses(site: str) -> None:
    off = await _fresh_browser(context_pool=0)
    try:
        for _ in range(3):
            s = await off.new_session([site])
            await s.close()
        await off.pool_ready()
        assert off.contexts_opened == 3 and off.contexts_reused == 0
        assert off._browser.contexts == []
    finally:
        await off.close()
    capped = await _fresh_browser(context_max_uses=2)
    try:
        contexts = []
        for _ in range(5):
            s = await capped.new_session([site])
            contexts.append(s._context)
            await s.close()
            await capped.pool_ready()
        # each context serves two sessions, then a new one is opened
        assert [contexts.index(c) for c in contexts] == [0, 0, 2, 2, 4]
        assert capped.contexts_opened == 3 and len(capped._browser.contexts) == 1
    finally:
        await capped.close()


async def test_a_context_serves_only_its_own_allow_list(site: str, other_site: str) -> None:
    """A context's proxy rules are fixed when it opens: a session with another allow-list
    gets another context, and a full pool gives up the context idle longest for it."""
    browser = await _fresh_browser(context_pool=1)
    try:
        first = await browser.new_session([site])
        context = first._context
        await first.close()
        await browser.pool_ready()
        wider = await browser.new_session([site, other_site])
        assert wider._context is not context and browser.contexts_reused == 0
        assert await wider.goto(f"{other_site}/index.html") is None
        await wider.close()
        await browser.pool_ready()
        # the pool holds one: the newer context replaced the older
        assert browser.pooled_contexts == 1
        again = await browser.new_session([site, other_site])
        assert again._context is wider._context and browser.contexts_reused == 1
        await again.close()
        narrow = await browser.new_session([site])
        assert narrow._context not in (context, wider._context)
        assert await narrow.goto(f"{other_site}/index.html") is not None
        await narrow.close()
    finally:
        await browser.close()


async def test_pooled_contexts_of_a_dead_browser_are_dropped(site: str) -> None:
    browser = await _fresh_browser()
    try:
        s = await browser.new_session([site])
        await s.close()
        await browser.pool_ready()
        assert browser.pooled_contexts == 1
        browser.mark_hung()
        assert await browser.ensure_alive() is True
        assert browser.pooled_contexts == 0
        fresh = await browser.new_session([site])
        assert browser.contexts_opened == 2
        assert await fresh.goto(f"{site}/index.html") is None
        await fresh.close()
    finally:
        await browser.close()
