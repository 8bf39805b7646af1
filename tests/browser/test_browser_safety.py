"""The origin allow-list, and recovery from a killed Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
from pathlib import Path

import pytest

from webagent_r1.browser import Browser, BrowserCrashedError, BrowserSession
from webagent_r1.config import ObservationConfig
from webagent_r1.types import Action

from ..conftest import browser_config
from .helpers import element_id

pytestmark = pytest.mark.browser

CFG = ObservationConfig(format="compact")


async def click(session: BrowserSession, name: str) -> str | None:
    element = element_id((await session.observe(CFG)).text, name)
    return await session.execute(Action("Click", element=element))


async def add_link(session: BrowserSession, href: str, text: str) -> None:
    await session.page.evaluate(
        """([href, text]) => {
          const a = document.createElement('a');
          a.href = href;
          a.textContent = text;
          document.body.prepend(a);
        }""",
        [href, text],
    )


@pytest.mark.parametrize(
    ("name", "url"),
    [("External site", "http://example.com/"), ("Local file", "file:///etc/passwd")],
)
async def test_links_off_the_allow_list_are_blocked(
    session: BrowserSession, name: str, url: str
) -> None:
    before = session.page.url
    error = await click(session, name)
    assert error == f"navigation to {url!r} blocked: not an allowed site"
    obs = await session.observe(CFG)
    assert obs.url == before and obs.title == "Test Shop"


async def test_scripted_navigation_off_the_list_is_undone(session: BrowserSession) -> None:
    # The link check cannot see this one coming: the route aborts it and the page goes back.
    before = session.page.url
    error = await click(session, "Scripted escape")
    assert error == "navigation to 'http://example.com/js' blocked: not an allowed site"
    obs = await session.observe(CFG)
    assert obs.url == before and obs.title == "Test Shop" and len(obs.tabs) == 1


async def test_other_local_port_is_not_allowed(session: BrowserSession, other_site: str) -> None:
    before = session.page.url
    url = f"{other_site}/product.html"
    assert await session.goto(url) == f"navigation to {url!r} blocked: not an allowed site"
    await add_link(session, url, "Same host, other port")
    assert await click(session, "Same host, other port") == (
        f"navigation to {url!r} blocked: not an allowed site"
    )
    # A new tab to it is closed again and the old tab stays active.
    await session.page.evaluate("(u) => { window.open(u); }", url)
    obs = await session.observe(CFG)
    assert obs.url == before and obs.tabs == ["Test Shop"]


async def test_new_tab_off_the_list_is_closed(session: BrowserSession) -> None:
    await session.page.evaluate(
        """() => {
          const b = document.createElement('button');
          b.textContent = 'Escape in a tab';
          b.onclick = () => window.open('http://example.com/tab');
          document.body.prepend(b);
        }"""
    )
    error = await click(session, "Escape in a tab")
    assert error == "navigation to 'http://example.com/tab' blocked: not an allowed site"
    obs = await session.observe(CFG)
    assert obs.tabs == ["Test Shop"] and obs.url.endswith("/index.html")


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:text/html,<h1>hi</h1>",
        "chrome://settings",
        "http://example.com/",
    ],
)
async def test_goto_blocked_urls(session: BrowserSession, url: str) -> None:
    assert await session.goto(url) == f"navigation to {url!r} blocked: not an allowed site"
    assert session.page.url.endswith("/index.html")


async def test_empty_allow_list_allows_local_hosts_only(browser: Browser, site: str) -> None:
    session = await browser.new_session([])
    try:
        assert await session.goto(f"{site}/index.html") is None
        localhost = site.replace("127.0.0.1", "localhost")
        assert await session.goto(f"{localhost}/product.html") is None
        assert await session.goto("http://example.com/") is not None
        assert session.page.url == f"{localhost}/product.html"
    finally:
        await session.close()


async def test_screenshot(session: BrowserSession, tmp_path: Path) -> None:
    await session.screenshot(tmp_path / "shot.png")
    assert (tmp_path / "shot.png").read_bytes()[:4] == b"\x89PNG"


def _pids_with(marker: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    pids.append(int(entry))
        except OSError:
            continue
    return pids


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds Chromium's pid through /proc")
async def test_killed_browser_raises_crash_and_relaunches(site: str) -> None:
    # A private browser: killing the shared one would disturb the other tests.
    async with await Browser.launch(browser_config()) as browser:
        session = await browser.new_session([site])
        assert await session.goto(f"{site}/index.html") is None
        await session.observe(CFG)

        pids = _pids_with(browser.instance_marker)
        assert pids, "Chromium process not found"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)

        with pytest.raises(BrowserCrashedError):
            await session.execute(Action("Click", element="1"))
        assert not browser.is_alive
        with pytest.raises(BrowserCrashedError):
            await session.observe(CFG)
        with pytest.raises(BrowserCrashedError):
            await session.goto(f"{site}/product.html")
        with pytest.raises(BrowserCrashedError):
            await browser.new_session([site])
        await session.close()  # closing a dead session is fine

        assert await browser.ensure_alive() is True
        assert browser.is_alive and browser.launches == 2
        assert await browser.ensure_alive() is False
        fresh = await browser.new_session([site])
        assert await fresh.goto(f"{site}/product.html") is None
        assert (await fresh.observe(CFG)).title == "Orbit Golden Charger"
        await fresh.close()
    assert not browser.is_alive


async def test_downloads_are_refused(session: BrowserSession) -> None:
    error = await click(session, "Download file")
    assert error is None  # the click itself is fine; the download never starts
    obs = await session.observe(CFG)
    assert obs.url.endswith("/index.html") and obs.tabs == ["Test Shop"]


async def test_sessions_are_isolated_and_run_concurrently(browser: Browser, site: str) -> None:
    sessions = [await browser.new_session([site]) for _ in range(4)]
    try:
        for i, s in enumerate(sessions):
            await s.context.add_cookies([{"name": "instance", "value": str(i), "url": site}])

        async def episode(s: BrowserSession) -> tuple[str, str]:
            assert await s.goto(f"{site}/index.html") is None
            assert await click(s, "Orbit Golden Charger") is None
            obs = await s.observe(CFG)
            return obs.title, await s.page.evaluate("document.cookie")

        results = await asyncio.gather(*(episode(s) for s in sessions))
        assert results == [("Orbit Golden Charger", f"instance={i}") for i in range(4)]
    finally:
        for s in sessions:
            await s.close()


async def test_redirect_off_the_list_is_undone(session: BrowserSession, other_site: str) -> None:
    site = session.page.url.rsplit("/", 1)[0]
    target = f"{other_site}/product.html"
    error = await session.goto(f"{site}/redirect?to={target}")
    assert error == f"navigation to {target!r} blocked: not an allowed site"
    assert session.page.url == f"{site}/index.html"

    await add_link(session, f"/redirect?to={target}", "Open redirect")
    assert await click(session, "Open redirect") == (
        f"navigation to {target!r} blocked: not an allowed site"
    )
    obs = await session.observe(CFG)
    assert obs.url == f"{site}/index.html" and obs.title == "Test Shop"


class _Listener:
    """A bare TCP listener on a free port that records every connection it accepts (a stand-in
    for a WebSocket server: the browser's upgrade request is all it needs to see)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.origin = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                conn.settimeout(2)
                with conn, contextlib.suppress(OSError):
                    self.requests.append(conn.recv(4096))


_OPEN_WS_JS = """(url) => new Promise((resolve) => {
  const ws = new WebSocket(url);
  ws.onopen = () => resolve('open');
  ws.onerror = () => resolve('error');
  ws.onclose = () => resolve('closed');
  setTimeout(() => resolve('pending'), 3000);
})"""


async def test_websockets_to_other_origins_are_refused(browser: Browser, site: str) -> None:
    """``ctx.route`` sees HTTP only: a page script reached another local port by WebSocket."""
    listener = _Listener()
    ws_url = listener.origin.replace("http://", "ws://") + "/socket"
    blocked = await browser.new_session([site])
    allowed = await browser.new_session([site, listener.origin])
    try:
        for s in (blocked, allowed):
            assert await s.goto(f"{site}/index.html") is None
        assert await blocked.page.evaluate(_OPEN_WS_JS, ws_url) in ("error", "closed")
        await asyncio.sleep(0.3)
        assert listener.requests == []  # not one byte reached the other port
        # The same socket from a session that allows that origin does reach it.
        await allowed.page.evaluate(_OPEN_WS_JS, ws_url)
        for _ in range(100):
            if listener.requests:
                break
            await asyncio.sleep(0.05)
        assert listener.requests and listener.requests[0].startswith(b"GET /socket")
    finally:
        await blocked.close()
        await allowed.close()
        listener.sock.close()


async def test_first_tab_timer_to_a_blob_page_is_undone(session: BrowserSession) -> None:
    """Only tabs after the first were checked: a timer sent the first tab to a ``blob:`` page
    and the agent read it."""
    before = session.page.url
    await session.page.evaluate(
        """() => setTimeout(() => {
          const page = new Blob(['<title>Elsewhere</title><p>SECRET-PAGE</p>'],
                                {type: 'text/html'});
          location.href = URL.createObjectURL(page);
        }, 50)"""
    )
    for _ in range(100):  # wait until the timer has fired
        if session.page.url.startswith("blob:"):
            break
        await asyncio.sleep(0.02)
    assert session.page.url.startswith("blob:")
    obs = await session.observe(CFG)
    assert obs.url == before and obs.title == "Test Shop"
    assert "SECRET-PAGE" not in obs.text
