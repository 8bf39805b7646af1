"""One headless Chromium shared by many episodes, and one isolated session per episode.

``Browser`` owns the Chromium process (launching it costs ~0.5 s; a context costs a few ms),
``BrowserSession`` owns one Playwright ``BrowserContext`` (cookies, storage, tabs) for one
episode. Sessions are safe to use concurrently from asyncio tasks.

Safety: every session has an allow-list of origins. Requests to other origins (other hosts
or ports, ``file://``, ``chrome://``) are aborted by a context-wide route, WebSockets to them
are closed by a context-wide WebSocket route before they connect, links to them are refused
before they are clicked, downloads and service workers are refused, and a page that still
ends up off the list (every tab is checked before each observation, the first one too: a
timer may send it to a ``blob:`` page no request route sees) is sent back to where it was,
and a page read while off the list is read again after that. Under the routes, Chromium's
network stack holds each context to its list too: the context's proxy is a local port that
refuses every connection and only the allowed origins bypass it, so what no route sees (a
WebSocket opened in a worker, the hop of an HTTP redirect, a TURN allocation over TCP,
WebTransport) fails before a byte leaves, and WebRTC may send no UDP that bypasses that proxy
(no STUN). A crashed browser raises ``BrowserCrashedError`` from every session method, so the
env can end the episode as ``env_error`` instead of blaming the agent; ``Browser.ensure_alive``
relaunches it.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import shutil
import signal
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright.async_api import Browser as PwBrowser
from playwright.async_api import (
    BrowserContext,
    Page,
    Playwright,
    Request,
    Route,
    WebSocketRoute,
    async_playwright,
)
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from webagent_r1.browser.execute import blocked_message, error_text, execute_action, settle
from webagent_r1.browser.observation import PageText, read_page, to_page_text
from webagent_r1.config import BrowserConfig, ObservationConfig
from webagent_r1.types import Action, Observation

# Flags that keep a headless Chromium quiet and container-friendly: no sandbox (we often run
# as root in containers), no GPU, no QUIC / background traffic / updates / sync (nothing may
# leave the machine), and /tmp instead of the small /dev/shm of containers. WebRTC's UDP
# (STUN, direct peer traffic) ignores proxies; this policy lets WebRTC use only what goes
# through the context's proxy, which refuses it (``Browser.refusing_proxy``).
CHROMIUM_ARGS: tuple[str, ...] = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
)

_SYSTEM_CHROMIUMS = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
_DEFAULT_PORTS = {"http": 80, "https": 443}

# Counts popups a page opens (window.open, target=_blank links and forms), so that after a
# click the session knows whether to wait for a new tab instead of sleeping after every click.
_POPUP_WATCH_JS = """(() => {
  const mark = () => { window.__webagentPopup = (window.__webagentPopup || 0) + 1; };
  const opensTab = (t) => !!t && !['_self', '_parent', '_top'].includes(t.toLowerCase());
  const open = window.open;
  window.open = function (...args) { mark(); return open.apply(this, args); };
  document.addEventListener('click', (e) => {
    const a = e.target && e.target.closest ? e.target.closest('a[href], area[href]') : null;
    if (a && opensTab(a.target)) mark();
  }, true);
  document.addEventListener('submit', (e) => {
    const f = e.target;
    if (f && opensTab(f.target || (e.submitter && e.submitter.formTarget) || '')) mark();
  }, true);
})();"""
_POPUP_READ_JS = (
    "() => { const n = window.__webagentPopup || 0; window.__webagentPopup = 0; return n; }"
)
_POPUP_WAIT_S = 2.0
_BLOCKED_COMMIT_S = 0.5
"""How long to wait for an aborted navigation's error page to replace an allowed page."""
_REFUSED_COMMIT_S = 3.0
"""The same after a ``goto`` the refusing proxy failed (its error page commits ~0.1 s later,
over 0.5 s on a loaded machine)."""
_PROXY_REFUSED = "net::ERR_PROXY_CONNECTION_FAILED"
"""A request's failure when the context's refusing proxy turned it away: it was off the list."""


class BrowserError(RuntimeError):
    """Base class of the browser layer's errors."""


class BrowserNotFoundError(BrowserError):
    """No Chromium executable was found."""


class BrowserCrashedError(BrowserError):
    """The browser process, context or page died: an environment error, not an agent error."""


# --------------------------------------------------------------------------------------
# Finding Chromium
# --------------------------------------------------------------------------------------


def _playwright_bundled_chromium() -> str | None:
    """Chromium installed by ``playwright install`` (not possible offline, but used if there)."""
    root = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or str(Path.home() / ".cache/ms-playwright")
    patterns = ("chromium-*/chrome-linux*/chrome", "chromium_headless_shell-*/chrome-linux*/*")
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(root, pattern)), reverse=True):
            name = os.path.basename(path)
            if name in ("chrome", "headless_shell") and os.access(path, os.X_OK):
                return path
    return None


def find_chromium(explicit: str | None = None) -> str:
    """Find a Chromium executable.

    Order: ``explicit``, ``$WEBAGENT_R1_CHROMIUM``, ``/usr/bin/chromium``, ``chromium``,
    ``chromium-browser`` or ``google-chrome`` on PATH, then Playwright's bundled Chromium.

    Raises:
        BrowserNotFoundError: none found (or an explicit path does not exist).
    """
    for source, path in (
        ("browser.executable", explicit),
        ("$WEBAGENT_R1_CHROMIUM", os.environ.get("WEBAGENT_R1_CHROMIUM")),
    ):
        if path:
            found = shutil.which(path)
            if found is None:
                raise BrowserNotFoundError(
                    f"Chromium not found at {path!r} (from {source}); install it with "
                    "`apt-get install -y chromium` or point WEBAGENT_R1_CHROMIUM at a binary."
                )
            return found
    for name in _SYSTEM_CHROMIUMS:
        found = shutil.which(name)
        if found:
            return found
    bundled = _playwright_bundled_chromium()
    if bundled:
        return bundled
    raise BrowserNotFoundError(
        "No Chromium found: install it with `apt-get install -y chromium` or set "
        "WEBAGENT_R1_CHROMIUM to the path of a Chromium binary."
    )


# --------------------------------------------------------------------------------------
# Origin allow-list
# --------------------------------------------------------------------------------------


def normalize_origin(origin: str) -> tuple[str, str, int]:
    """``"http://127.0.0.1:7770/"`` → ``("http", "127.0.0.1", 7770)``.

    Raises:
        ValueError: not an http(s) origin.
    """
    parts = urlsplit(origin.strip())
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(
            f"allowed origin {origin!r} must look like 'http://host:port' (http or https)"
        )
    return parts.scheme, parts.hostname.lower(), parts.port or _DEFAULT_PORTS[parts.scheme]


class AllowList:
    """Origins (scheme, host, port) a session may load; empty means local hosts only."""

    def __init__(self, origins: Iterable[str] = ()) -> None:
        self._origins: set[tuple[str, str, int]] = {normalize_origin(o) for o in origins}

    def add(self, origin: str) -> None:
        """Allow one more origin (e.g. a site the task starts on)."""
        self._origins.add(normalize_origin(origin))

    @property
    def origins(self) -> list[str]:
        """The allowed origins as strings, sorted."""
        return sorted(f"{s}://{h}:{p}" for s, h, p in self._origins)

    def proxy_bypass(self) -> str:
        """Chromium's proxy bypass rules for these origins: what may connect directly while
        everything else goes to a proxy that refuses it. An empty list allows the local hosts
        on any port, as ``allows`` does."""
        if not self._origins:
            return ",".join(f"[{h}]" if ":" in h else h for h in _LOCAL_HOSTS)
        # WebSockets are matched by their own scheme: ws:// beside http://, wss:// beside https://.
        sockets = {"http": "ws", "https": "wss"}
        return ",".join(
            f"{scheme}://{f'[{h}]' if ':' in h else h}:{p}"
            for s, h, p in sorted(self._origins)
            for scheme in (s, sockets[s])
        )

    def allows_socket(self, url: str) -> bool:
        """Whether a WebSocket to ``url`` (``ws://`` or ``wss://``) may connect: when its
        origin, read as ``http://`` or ``https://``, is allowed."""
        scheme, sep, rest = url.partition("://")
        http = {"ws": "http", "wss": "https"}.get(scheme.lower())
        return http is not None and self.allows(f"{http}{sep}{rest}")

    def allows(self, url: str) -> bool:
        """Whether ``url`` may be loaded (``about:blank`` always may)."""
        if url == "about:blank":
            return True
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return False
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            return False
        host = parts.hostname.lower()
        if not self._origins:
            return host in _LOCAL_HOSTS
        return (parts.scheme, host, port or _DEFAULT_PORTS[parts.scheme]) in self._origins


# --------------------------------------------------------------------------------------
# Browser: one process, many sessions
# --------------------------------------------------------------------------------------


_HANG_CAP = 5
"""``hang_bound`` gives up an exchange after this many ``hang_timeout_s`` even while
Chromium answers its probes."""

_CLOSE_WAIT_S = 10.0
"""Seconds to wait for a context or a browser to close before giving up on it."""


def _kill_marked(marker: str) -> None:
    """SIGKILL every process whose command line holds ``marker`` (this Browser's Chromium
    processes that outlived a close that was given up); no-op where /proc is absent."""
    proc = Path("/proc")
    if not proc.is_dir():
        return
    needle = marker.encode()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):  # gone meanwhile, or not ours to kill
            continue


class _PooledContext:
    """A browser context with its route, listeners and init script installed once, lent to
    one ``BrowserSession`` at a time: the unit the context pool keeps and reuses."""

    def __init__(self, context: BrowserContext, generation: int, bypass: str) -> None:
        self.context = context
        self.generation = generation
        """``Browser.launches`` when it was opened: a relaunch makes it unusable."""
        self.bypass = bypass
        """Its proxy bypass rules (``AllowList.proxy_bypass``), fixed when it was opened: it
        serves only sessions with that allow-list."""
        self.session: BrowserSession | None = None
        self.uses = 0
        self.closed = False
        self.crashed = False

    async def install(self, cfg: BrowserConfig) -> None:
        ctx = self.context
        ctx.set_default_timeout(cfg.action_timeout_ms)
        ctx.set_default_navigation_timeout(cfg.navigation_timeout_ms)
        ctx.on("page", self._on_page)
        ctx.on("close", self._on_close)
        ctx.on("requestfailed", self._on_request_failed)
        await ctx.route("**/*", self._route)
        # ctx.route sees HTTP only: a page script could reach any port by WebSocket.
        await ctx.route_web_socket(lambda _url: True, self._route_socket)
        await ctx.add_init_script(script=_POPUP_WATCH_JS)

    def usable(self, launches: int) -> bool:
        return not (self.closed or self.crashed) and self.generation == launches

    # Events and routes go to the session it is lent to; between sessions nothing loads.

    def _on_page(self, page: Page) -> None:
        page.on("crash", self._on_crash)
        if self.session is not None:
            self.session._on_page(page)

    def _on_crash(self, _: Page) -> None:
        self.crashed = True

    def _on_request_failed(self, request: Request) -> None:
        if self.session is not None:
            self.session._on_request_failed(request)

    def _on_close(self, ctx: BrowserContext) -> None:
        self.closed = True
        if self.session is not None:
            self.session._on_context_close(ctx)

    async def _route(self, route: Route) -> None:
        if self.session is not None:
            await self.session._route(route)
            return
        with contextlib.suppress(PlaywrightError):
            await route.abort("blockedbyclient")

    async def _route_socket(self, ws: WebSocketRoute) -> None:
        if self.session is not None:
            await self.session._route_socket(ws)
            return
        with contextlib.suppress(PlaywrightError):
            await ws.close(code=1008, reason="blocked: no episode")


class Browser:
    """One Chromium process shared by many sessions (one per episode).

    Use ``await Browser.launch(cfg)`` or ``async with await Browser.launch(cfg) as b``.
    """

    def __init__(self, cfg: BrowserConfig) -> None:
        self.cfg = cfg
        # A unique argument on the command line lets tools (and tests) find this process.
        self.instance_marker = f"--webagent-r1-instance={uuid.uuid4().hex}"
        self._pw: Playwright | None = None
        self._browser: PwBrowser | None = None
        self._lock = asyncio.Lock()
        self.launches = 0
        self._hung = False
        # The context pool (browser.context_pool): clean contexts waiting for an episode,
        # and those the pool holds (idle or being cleaned).
        self._idle: list[_PooledContext] = []
        self._held: set[_PooledContext] = set()
        self._recycling: set[asyncio.Task[None]] = set()
        self.contexts_opened = 0
        """Contexts opened so far (each costs a context, its routes and a first tab)."""
        self.contexts_reused = 0
        """Sessions served by a pooled context instead of a new one."""
        self._probe: asyncio.Future[bool] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._refuser: socket.socket | None = None
        self.refusing_proxy = ""
        """The proxy of every context (set at launch): what bypasses no rule is refused here."""

    @classmethod
    async def launch(cls, cfg: BrowserConfig | None = None) -> Browser:
        """Start Chromium.

        Raises:
            BrowserNotFoundError: no Chromium executable.
            BrowserError: Chromium did not start.
        """
        browser = cls(cfg or BrowserConfig())
        await browser._start()
        return browser

    async def _start(self) -> None:
        exe = find_chromium(self.cfg.executable)
        if self._refuser is None:
            # A local port bound and never listened on: every connection to it is refused at
            # once, and no other process can listen there while this Browser holds it.
            self._refuser = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._refuser.bind(("127.0.0.1", 0))
            self.refusing_proxy = f"http://127.0.0.1:{self._refuser.getsockname()[1]}"
        if self._pw is None:
            self._pw = await async_playwright().start()
        try:
            self._browser = await self._pw.chromium.launch(
                executable_path=exe,
                headless=self.cfg.headless,
                args=[*CHROMIUM_ARGS, *self.cfg.extra_args, self.instance_marker],
                timeout=self.cfg.navigation_timeout_ms,
            )
        except PlaywrightError as e:
            raise BrowserError(f"could not start Chromium at {exe!r}: {error_text(e)}") from e
        self.launches += 1

    @property
    def is_alive(self) -> bool:
        """False once the process died, was closed, or was marked hung (``mark_hung``)."""
        return self._browser is not None and not self._hung and self._browser.is_connected()

    def mark_hung(self) -> None:
        """Treat this Chromium as dead: a call to it did not return (``hang_bound``). The
        next ``ensure_alive`` relaunches it."""
        self._hung = True

    async def ensure_alive(self) -> bool:
        """Relaunch Chromium if it died; returns True when it had to.

        Sessions of the dead process stay dead (their methods raise ``BrowserCrashedError``);
        open new ones.
        """
        async with self._lock:
            if self.is_alive:
                return False
            if self._browser is not None:
                # closing a dead or hung Chromium can itself hang: bounded, then killed
                with contextlib.suppress(PlaywrightError, TimeoutError):
                    await asyncio.wait_for(self._browser.close(), _CLOSE_WAIT_S)
                _kill_marked(self.instance_marker)
            try:
                await self._start()
            except BrowserError:
                # The Playwright driver may have died with the browser: start a fresh one.
                await self._stop_driver()
                await self._start()
            self._hung = False
            self._idle.clear()  # contexts of the dead process
            self._held.clear()
            return True

    async def new_session(self, allowed_origins: Iterable[str] = ()) -> BrowserSession:
        """Open an isolated context (own cookies, storage and tabs) with one blank tab: a
        cleaned one from the context pool when there is one (``browser.context_pool``).

        Args:
            allowed_origins: origins the session may load, e.g. ``["http://127.0.0.1:7770"]``;
                empty allows http(s) on 127.0.0.1 and localhost only.

        Raises:
            BrowserCrashedError: the browser is not running.
        """
        if not self.is_alive or self._browser is None:
            raise BrowserCrashedError("the browser is not running; call ensure_alive() first")
        allow = AllowList(allowed_origins)
        bypass = allow.proxy_bypass()
        # A pooled context's proxy rules are its allow-list: reuse only one opened for the same.
        for pooled in [p for p in reversed(self._idle) if p.bypass == bypass]:
            self._idle.remove(pooled)
            self._held.discard(pooled)
            if pooled.usable(self.launches) and len(pooled.context.pages) == 1:
                self.contexts_reused += 1
                return BrowserSession(self, pooled, allow)
            await _close_context(pooled.context)
        try:
            # Chromium killed while a context opens can leave this call unanswered forever
            async with self.hang_bound("opening a browser context"):
                context = await self._browser.new_context(
                    viewport={"width": self.cfg.viewport_width, "height": self.cfg.viewport_height},
                    accept_downloads=False,
                    # Service workers could serve or fetch around the route below.
                    service_workers="block",
                    # Routes see HTTP requests only; the network stack sends everything else
                    # (workers' WebSockets, TURN, WebTransport) to a port that refuses it,
                    # except to the allowed origins. Playwright adds "<-loopback>", so other
                    # local ports are proxied too.
                    proxy={"server": self.refusing_proxy, "bypass": bypass},
                )
        except PlaywrightError as e:
            raise BrowserCrashedError(f"could not open a browser context: {error_text(e)}") from e
        self.contexts_opened += 1
        session = BrowserSession(self, _PooledContext(context, self.launches, bypass), allow)
        try:
            async with self.hang_bound("setting up a browser context"):
                await session._setup()
        except BrowserCrashedError:
            await session.close()
            raise
        return session

    @property
    def concurrency(self) -> int:
        """Browser exchanges that run at once (``browser.concurrency``; 0: 4 per core)."""
        return self.cfg.concurrency or 4 * (os.cpu_count() or 1)

    def slot(self) -> asyncio.Semaphore:
        """Hold it around one browser exchange (an episode's opening, an action with its
        observation): at most ``concurrency`` run at once; the others wait here."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        return self._slots

    @contextlib.asynccontextmanager
    async def hang_bound(self, what: str) -> AsyncIterator[None]:
        """Bound a browser exchange (``what``, for the error) against a hung Chromium.

        Every ``browser.hang_timeout_s`` the exchange is still running, Chromium is probed
        with a DevTools round trip: a slow machine's Chromium answers and the exchange goes
        on; one that does not answer within ``hang_timeout_s`` is hung. An exchange still
        running after ``_HANG_CAP`` times ``hang_timeout_s`` is given up even though Chromium
        answers (a call it lost). Either way Chromium is marked hung (relaunched at the next
        ``ensure_alive``) and ``BrowserCrashedError`` is raised.
        """
        limit = self.cfg.hang_timeout_s
        reason: list[str] = []
        dog: asyncio.Task[None] | None = None
        try:
            async with asyncio.timeout(None) as deadline:
                dog = asyncio.create_task(self._watch(deadline, limit, reason))
                yield
        except TimeoutError:
            if not reason:  # the exchange's own timeout, not this bound's
                raise
            self.mark_hung()
            raise BrowserCrashedError(
                f"{what} did not finish: {reason[0]} (browser.hang_timeout_s = {limit:g} s); "
                "the browser is relaunched"
            ) from None
        finally:
            if dog is not None:
                dog.cancel()

    async def _watch(self, deadline: asyncio.Timeout, limit: float, reason: list[str]) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        while True:
            await asyncio.sleep(limit)
            if loop.time() - start >= _HANG_CAP * limit * 0.999:
                reason.append(f"still running after {_HANG_CAP} x hang_timeout_s")
            elif not await self.responsive():
                reason.append("Chromium did not answer a probe")
            else:
                continue
            deadline.reschedule(loop.time())
            return

    async def responsive(self) -> bool:
        """Whether Chromium answers a DevTools round trip within ``browser.hang_timeout_s``
        (callers asking at once share one probe)."""
        if not self.is_alive or self._browser is None:
            return False
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(self._ping(self._browser))
        return await asyncio.shield(self._probe)

    async def _ping(self, browser: PwBrowser) -> bool:
        async def round_trip() -> None:
            cdp = await browser.new_browser_cdp_session()
            await cdp.send("Browser.getVersion")
            with contextlib.suppress(PlaywrightError):
                await cdp.detach()

        try:
            await asyncio.wait_for(round_trip(), self.cfg.hang_timeout_s)
        except (PlaywrightError, TimeoutError):
            return False
        return True

    async def pool_ready(self) -> None:
        """Wait until every context given back has been cleaned (or closed)."""
        while self._recycling:
            await asyncio.gather(*self._recycling, return_exceptions=True)

    @property
    def pooled_contexts(self) -> int:
        """Contexts the pool holds: clean and waiting, or being cleaned."""
        return len(self._held)

    async def _give_back(self, pooled: _PooledContext, origins: Iterable[str]) -> None:
        """A session ended: clean its context for reuse in the background, or close it."""
        if (
            self.cfg.context_pool > 0
            and len(self._held) >= self.cfg.context_pool
            and self._idle
            and self.is_alive
            and pooled.usable(self.launches)
            and pooled.uses < self.cfg.context_max_uses
        ):
            # Full: the context idle longest (likely of an allow-list no task asks for now)
            # makes room for this one.
            oldest = self._idle.pop(0)
            self._held.discard(oldest)
            await _close_context(oldest.context)
        if (
            self.cfg.context_pool > 0
            and self.is_alive
            and pooled.usable(self.launches)
            and pooled.uses < self.cfg.context_max_uses
            and len(self._held) < self.cfg.context_pool
        ):
            self._held.add(pooled)
            task = asyncio.create_task(self._recycle(pooled, sorted(origins)))
            self._recycling.add(task)
            task.add_done_callback(self._recycling.discard)
            return
        await _close_context(pooled.context)

    async def _recycle(self, pooled: _PooledContext, origins: list[str]) -> None:
        try:
            clean = await asyncio.wait_for(_clean(pooled, origins), self.cfg.hang_timeout_s)
        except (PlaywrightError, TimeoutError):
            clean = False
        if clean and pooled in self._held and pooled.usable(self.launches):
            self._idle.append(pooled)
            return
        self._held.discard(pooled)
        await _close_context(pooled.context)

    async def close(self) -> None:
        """Close Chromium and the Playwright driver (safe to call twice or after a crash)."""
        for task in list(self._recycling):
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*self._recycling, return_exceptions=True)
        self._idle.clear()
        self._held.clear()
        if self._browser is not None:
            with contextlib.suppress(PlaywrightError):
                await self._browser.close()
            self._browser = None
        await self._stop_driver()
        if self._refuser is not None:
            self._refuser.close()
            self._refuser = None

    async def _stop_driver(self) -> None:
        if self._pw is not None:
            # A dead driver may fail to stop in many ways; it is gone either way.
            with contextlib.suppress(Exception):
                await self._pw.stop()
            self._pw = None

    async def __aenter__(self) -> Browser:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _close_context(context: BrowserContext) -> None:
    """Close a context; a close that does not return (a hung Chromium) is given up."""
    with contextlib.suppress(PlaywrightError, TimeoutError):
        await asyncio.wait_for(context.close(), _CLOSE_WAIT_S)


async def _clean(pooled: _PooledContext, origins: list[str]) -> bool:
    """Make a finished episode's context like a new one: a fresh tab replaces its tabs
    (their history and session storage go with them), and cookies, permissions, geolocation, the
    storage of every origin it loaded (local storage, IndexedDB, cache storage, service
    workers, file systems) and the HTTP cache are cleared. Returns False when it is not
    fit for reuse (a page crashed, the context closed, a tab appeared meanwhile)."""
    ctx = pooled.context
    old = list(ctx.pages)
    fresh = await ctx.new_page()
    for page in old:
        await page.close()
    cdp = await ctx.new_cdp_session(fresh)
    try:
        for origin in origins:
            await cdp.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
        await cdp.send("Network.clearBrowserCache")
    finally:
        with contextlib.suppress(PlaywrightError):
            await cdp.detach()
    await ctx.clear_cookies()
    await ctx.clear_permissions()
    await ctx.set_geolocation(None)  # a task may have set one (WebArena's map tasks)
    return ctx.pages == [fresh] and fresh.url == "about:blank" and not pooled.crashed


# --------------------------------------------------------------------------------------
# BrowserSession: one context, one episode
# --------------------------------------------------------------------------------------


_NOT_PAGED = object()
"""``BrowserSession._page_through``: leave this action to the browser."""


class _Reading:
    """Where the agent paged to in one document (``observation.page_through``)."""

    def __init__(self, page: Page, text: PageText, start: int, back: list[int]) -> None:
        self.page = page
        self.url = text.url
        self.document = text.document
        self.start = start
        """First page line the next observation shows."""
        self.back = back
        """Where each Scroll Down came from (Scroll Up pops it)."""

    def on(self, page: Page, url: str, document: float) -> bool:
        """Still the tab and the document it was paged in (any navigation starts over)."""
        return page is self.page and url == self.url and document == self.document


class BrowserSession:
    """One episode's browser context and its tabs; the newest tab is the active one."""

    def __init__(self, browser: Browser, pooled: _PooledContext, allow: AllowList) -> None:
        self._owner = browser
        self._pooled = pooled
        self._context = pooled.context
        pooled.session = self
        pooled.uses += 1
        self.allow = allow
        """The origins this session may load. ``session.allow.add(origin)`` extends it for
        HTTP loads only: the context's proxy rules, which hold WebSockets and every other
        channel to the list, stay those of the origins the session was opened with."""
        self._cfg = browser.cfg
        self._pages: list[Page] = []
        self._active: Page | None = None
        self._crashed_pages: list[Page] = []
        self._context_closed = False
        self._closing = False
        # Main-frame navigations the route aborted since the last goto/execute began.
        self._blocked: list[str] = []
        # Tabs whose main-frame navigation was aborted, checked again before observing.
        self._blocked_pages: list[Page] = []
        self._new_page = asyncio.Event()
        self.last_page_text: PageText | None = None
        """The last observation's details (truncation, scroll, element count)."""
        self._paging = False
        """The last observation's config pages through text cut by its budget."""
        self._reading: _Reading | None = None
        """Where the agent paged to on the active tab (``observation.page_through``)."""
        self._loaded_origins: set[str] = set()
        """Origins of the requests let through: the storage the pool clears afterwards."""
        for page in pooled.context.pages:  # a pooled context's fresh tab
            self._on_page(page)

    async def _setup(self) -> None:
        try:
            await self._pooled.install(self._cfg)
            await self._context.new_page()
        except PlaywrightError as e:
            raise BrowserCrashedError(f"could not set up the session: {error_text(e)}") from e

    # -- events -------------------------------------------------------------------------

    def _on_page(self, page: Page) -> None:
        self._pages.append(page)
        self._active = page
        page.on("close", self._on_page_close)
        page.on("crash", self._on_page_crash)
        self._new_page.set()

    def _on_page_close(self, page: Page) -> None:
        if page in self._pages:
            self._pages.remove(page)
        if self._active is page:
            self._active = self._pages[-1] if self._pages else None

    def _on_page_crash(self, page: Page) -> None:
        self._crashed_pages.append(page)

    def _on_context_close(self, _: BrowserContext) -> None:
        self._context_closed = True

    async def _route(self, route: Route) -> None:
        request = route.request
        try:
            if self.allow.allows(request.url):
                parts = urlsplit(request.url)
                self._loaded_origins.add(f"{parts.scheme}://{parts.netloc}")
                await route.continue_()
                return
            navigation = request.is_navigation_request()
            frame = None
            if navigation:
                # A new tab's first request comes before its frame exists: frame stays None.
                with contextlib.suppress(PlaywrightError):
                    frame = request.frame
            if navigation and (frame is None or frame.parent_frame is None):
                self._blocked.append(request.url)
                if frame is not None:
                    self._blocked_pages.append(frame.page)
            await route.abort("blockedbyclient")
        except PlaywrightError:
            pass  # the page or context closed while the request was in flight

    def _on_request_failed(self, request: Request) -> None:
        """A request the context's proxy refused is off the list: no route saw it (the hop of
        an HTTP redirect). A main-frame navigation counts as blocked, like one the route
        aborted, so the page is sent back and the agent told."""
        if request.failure != _PROXY_REFUSED:
            return
        with contextlib.suppress(PlaywrightError):
            frame = request.frame
            if request.is_navigation_request() and frame.parent_frame is None:
                self._blocked.append(request.url)
                self._blocked_pages.append(frame.page)

    async def _route_socket(self, ws: WebSocketRoute) -> None:
        if self.allow.allows_socket(ws.url):
            ws.connect_to_server()
            return
        # Not connected: the server never sees the handshake; the page sees the socket close.
        with contextlib.suppress(PlaywrightError):
            await ws.close(code=1008, reason="blocked: not an allowed site")

    # -- properties ---------------------------------------------------------------------

    @property
    def context(self) -> BrowserContext:
        """The Playwright context (add cookies, storage state, extra headers).

        Raises:
            BrowserCrashedError: the session was closed (its context may serve another).
        """
        if self._closing:
            raise BrowserCrashedError("the browser session was closed")
        return self._context

    @property
    def page(self) -> Page:
        """The active tab.

        Raises:
            BrowserCrashedError: the context has no open tab (it was closed or crashed).
        """
        self._check_alive()
        if self._active is None:
            raise BrowserCrashedError("the browser session has no open tab")
        return self._active

    @property
    def pages(self) -> list[Page]:
        """All open tabs, oldest first (none once the session is closed)."""
        return [] if self._closing else list(self._pages)

    # -- crash handling -----------------------------------------------------------------

    def _crash_reason(self) -> str | None:
        if self._closing:
            return "the browser session was closed"
        if not self._owner.is_alive:
            return "the browser process is gone"
        if self._context_closed:
            return "the browser context was closed"
        if any(p is self._active for p in self._crashed_pages):
            return "the page crashed"
        return None

    def _check_alive(self) -> None:
        reason = self._crash_reason()
        if reason:
            raise BrowserCrashedError(reason)

    async def _raise_if_crashed(self, e: BaseException) -> None:
        """Re-raise ``e`` as ``BrowserCrashedError`` when the browser side died."""
        if self._crash_reason() is None:
            # The disconnect event can trail the failed call by a moment.
            await asyncio.sleep(0.05)
        reason = self._crash_reason()
        if reason:
            raise BrowserCrashedError(f"{reason}: {error_text(e)}") from e

    async def _ensure_page(self) -> Page:
        """The active tab; opens a blank one when the agent closed them all."""
        self._check_alive()
        if self._active is None:
            try:
                await self._context.new_page()
            except PlaywrightError as e:
                await self._raise_if_crashed(e)
                raise BrowserCrashedError(f"could not open a tab: {error_text(e)}") from e
        assert self._active is not None
        return self._active

    # -- navigation safety --------------------------------------------------------------

    async def _restore(self, page: Page, previous_url: str) -> None:
        """Bring ``page`` back to an allowed page after a blocked navigation."""
        nav_ms = self._cfg.navigation_timeout_ms
        if page.is_closed() or self.allow.allows(page.url):
            return
        try:
            await page.go_back(wait_until="domcontentloaded", timeout=nav_ms)
            if not self.allow.allows(page.url):
                target = previous_url if self.allow.allows(previous_url) else "about:blank"
                await page.goto(target, wait_until="domcontentloaded", timeout=nav_ms)
        except PlaywrightError as e:
            await self._raise_if_crashed(e)

    async def _police(self) -> None:
        """Undo blocked navigations no action caused (timers, meta refresh, popups)."""
        # Pages that were blocked, and new tabs off the list (their first request is blocked
        # before Playwright can tell which tab it belongs to).
        # Every tab, the first one too: a timer can send it to a blob: page, which no route sees.
        pages, self._blocked_pages = self._blocked_pages + self._pages, []
        for page in dict.fromkeys(pages):  # unique, in order
            if page.is_closed() or self.allow.allows(page.url):
                continue
            if len(self._pages) > 1 and page is not self._pages[0]:
                try:
                    await page.close()
                except PlaywrightError as e:
                    await self._raise_if_crashed(e)
            else:
                await self._restore(page, "")

    # -- public API ---------------------------------------------------------------------

    async def goto(self, url: str) -> str | None:
        """Load ``url`` in the active tab.

        Returns:
            None on success, else an error message (blocked URL, load failure, timeout).

        Raises:
            BrowserCrashedError: the browser, context or page died.
        """
        page = await self._ensure_page()
        if not self.allow.allows(url):
            return blocked_message(url)
        previous = page.url
        self._blocked.clear()
        self._blocked_pages.clear()
        try:
            await page.goto(url, wait_until="domcontentloaded")
        except PlaywrightTimeoutError:
            return f"loading {url!r} timed out after {self._cfg.navigation_timeout_ms / 1000:g} s"
        except PlaywrightError as e:
            await self._raise_if_crashed(e)
            # A script on the page sent it elsewhere, or the proxy refused a redirect's hop.
            if self._blocked or _PROXY_REFUSED in error_text(e):
                blocked = self._blocked[0] if self._blocked else url
                # The failed navigation's error page is sure to commit: wait for it longer
                # than after an action, where there may be none to wait for.
                await self._error_page_committed(page, _REFUSED_COMMIT_S)
                await self._restore(page, previous)
                return blocked_message(blocked)
            return f"could not load {url!r}: {error_text(e)}"
        if not self.allow.allows(page.url):
            # Playwright does not route the hops of an HTTP redirect (the refusing proxy stops
            # one off the list, see ``_on_request_failed``); should a page land off the list
            # anyway, undo it so the agent never works there.
            landed = page.url
            await self._restore(page, previous)
            return blocked_message(landed)
        return None

    async def execute(self, action: Action) -> str | None:
        """Execute an agent action on the active tab.

        Returns:
            None on success, else a one-sentence error for the agent's next observation
            (unknown element, missing option, blocked navigation, timeout …).

        Raises:
            BrowserCrashedError: the browser, context or page died.
        """
        page = await self._ensure_page()
        previous = page.url
        tabs_before = len(self._pages)
        self._blocked.clear()
        self._blocked_pages.clear()
        self._new_page.clear()
        cfg = self._cfg
        try:
            paged = await self._page_through(page, action)
            if paged is not _NOT_PAGED:
                return paged
            err = await execute_action(
                page,
                action,
                action_timeout_ms=cfg.action_timeout_ms,
                navigation_timeout_ms=cfg.navigation_timeout_ms,
                is_allowed=self.allow.allows,
            )
            after = await self._after_action(page, previous, tabs_before)
        except PlaywrightError as e:
            await self._raise_if_crashed(e)
            if page.is_closed():
                return "the tab was closed" if self._pages else "all tabs were closed"
            return f"{action.kind} failed: {error_text(e)}"
        return after or err

    async def _page_through(self, page: Page, action: Action) -> str | None | object:
        """Scroll Down/Up as paging through text the budget cut (``observation.page_through``).

        Scroll Down starts the next observation at the first line the last one cut; Scroll Up
        goes back to where the previous Scroll Down came from. The viewport follows where the
        page can scroll (screenshots show the same part). Anything else, a page that fits its
        budget, or a Scroll Up with no page to go back to, is left to the viewport scroll.

        Returns:
            None (paged), an error for the agent (nothing more below), or ``_NOT_PAGED``.
        """
        down = action.kind == "Scroll Down"
        last = self.last_page_text
        if (
            not self._paging
            or action.kind not in ("Scroll Down", "Scroll Up")
            or last is None
            or last.url != page.url
        ):
            return _NOT_PAGED
        reading = self._reading  # ``observe`` dropped it if the document is another
        if down:
            if last.next_start is None:
                if reading is None:
                    return _NOT_PAGED  # the page fits its budget, or no page was cut yet
                return "already at the bottom of the page"
            back = [*reading.back, last.start] if reading else [last.start]
            self._reading = _Reading(page, last, last.next_start, back)
            await self._scroll_to_line(page, last, last.next_start)
            return None
        if reading is not None and reading.back:
            reading.start = reading.back.pop()
        elif last.prev_start is not None:  # the text started mid-page: page up from there
            self._reading = reading = _Reading(page, last, last.prev_start, [])
        else:
            self._reading = None
            return _NOT_PAGED
        await self._scroll_to_line(page, last, reading.start)
        return None

    async def _scroll_to_line(self, page: Page, text: PageText, line: int) -> None:
        """Bring the viewport to ``line`` as far as the page scrolls (screenshots follow);
        the paging is done already, so a page that cannot scroll now is no error."""
        if not 0 <= line < len(text.line_ys):
            return
        try:
            await page.evaluate(
                "y => window.scrollTo({top: y, behavior: 'instant'})", text.line_ys[line]
            )
        except PlaywrightError as e:
            await self._raise_if_crashed(e)

    async def _error_page_committed(self, page: Page, wait_s: float = _BLOCKED_COMMIT_S) -> None:
        """Wait (at most ``wait_s``) for a blocked navigation's error page: it can commit a
        moment after the navigation failed, and restoring before it would leave the agent on
        the error page."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while not page.is_closed() and self.allow.allows(page.url) and loop.time() < deadline:
            await asyncio.sleep(0.02)

    async def _after_action(self, page: Page, previous: str, tabs_before: int) -> str | None:
        """Follow a new tab, undo blocked navigations; returns a blocked-navigation error."""
        nav_ms = self._cfg.navigation_timeout_ms
        if not page.is_closed() and len(self._pages) <= tabs_before:
            try:
                opened = await page.evaluate(_POPUP_READ_JS)
            except PlaywrightError:
                opened = 0  # the page navigated away: no popup from the old document
            if opened and len(self._pages) <= tabs_before:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._new_page.wait(), _POPUP_WAIT_S)
        new_tab = self._active if self._active is not page else None
        if new_tab is not None and not new_tab.is_closed():
            await settle(new_tab, nav_ms)
            if self._blocked or not self.allow.allows(new_tab.url):
                url = self._blocked[0] if self._blocked else new_tab.url
                await new_tab.close()
                if not page.is_closed():
                    self._active = page
                return blocked_message(url)
            return None
        if page.is_closed():
            return None
        if self._blocked:
            await self._error_page_committed(page)
            if page.is_closed():
                return blocked_message(self._blocked[0])
        if self._blocked or not self.allow.allows(page.url):
            url = self._blocked[0] if self._blocked else page.url
            await self._restore(page, previous)
            return blocked_message(url)
        return None

    async def observe(
        self,
        cfg: ObservationConfig,
        count_tokens: Callable[[str], int] | None = None,
    ) -> Observation:
        """Read the active tab as an observation (``error`` is None; the env sets it).

        Args:
            cfg: text format, viewport mode and token budget.
            count_tokens: tokenizer-backed token counter for the budget; ~4 chars a token
                when None.

        Raises:
            BrowserCrashedError: the browser, context or page died, or the page stopped
                answering.
        """
        await self._police()
        page = await self._ensure_page()
        timeout_s = self._cfg.navigation_timeout_ms / 1000
        raw: dict[str, Any] | None = None
        for attempt in range(3):
            try:
                await settle(page, self._cfg.navigation_timeout_ms)
                raw = await read_page(page, cfg.viewport_only, timeout_s, cfg.format)
                if self.allow.allows(page.url):
                    break
                # A timer sent the tab off the list after the check above: never show that
                # page; send it back and read again.
                raw = None
                await self._police()
                page = await self._ensure_page()
                continue
            except TimeoutError as e:
                raise BrowserCrashedError(f"the page did not answer within {timeout_s:g} s") from e
            except PlaywrightError as e:
                await self._raise_if_crashed(e)
                if page.is_closed():
                    page = await self._ensure_page()
                elif attempt == 2:
                    raise BrowserCrashedError(f"could not read the page: {error_text(e)}") from e
                # Otherwise the page navigated while being read: read the new document.
        if raw is None:
            raise BrowserCrashedError("the page kept leaving the allowed sites while being read")
        self._paging = cfg.page_through and not cfg.viewport_only
        reading = self._reading
        if reading is not None and not reading.on(
            page, raw.get("url", ""), float(raw.get("document") or 0.0)
        ):
            # another tab or a new document: read from where the browser put it
            self._reading = reading = None
        start = reading.start if reading is not None and self._paging else None
        text = to_page_text(raw, cfg, count_tokens, start)
        self.last_page_text = text
        tabs, active = [], 0
        for p in self._pages:
            if p is not page and (p.is_closed() or not self.allow.allows(p.url)):
                continue  # a tab off the list that opened while reading: the next police closes it
            if p is page:
                active = len(tabs)
            title = text.title if p is page else await self._title(p)
            tabs.append(title or p.url)
        return Observation(
            url=page.url,
            title=text.title,
            text=text.text,
            tabs=tabs,
            error=None,
            active_tab=active,
        )

    async def _title(self, page: Page) -> str:
        try:
            return await page.title()
        except PlaywrightError as e:
            await self._raise_if_crashed(e)
            return ""

    async def screenshot(self, path: str | Path, full_page: bool = False) -> None:
        """Save a PNG of the active tab.

        Raises:
            BrowserCrashedError: the browser, context or page died.
        """
        page = await self._ensure_page()
        try:
            await page.screenshot(path=str(path), full_page=full_page)
        except PlaywrightError as e:
            await self._raise_if_crashed(e)
            raise BrowserError(f"screenshot failed: {error_text(e)}") from e

    async def close(self) -> None:
        """End the session: its context goes back to the pool to be cleaned, or is closed
        (safe after a crash or a second call; a close that does not return within a few
        seconds, as on a hung Chromium, is given up). The session is unusable afterwards."""
        if self._closing:
            return
        self._closing = True
        self._pooled.session = None
        if self._crashed_pages or self._context_closed:
            self._pooled.crashed = True
        await self._owner._give_back(self._pooled, self._loaded_origins)

    async def __aenter__(self) -> BrowserSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
