"""Host the embedded sites: uvicorn servers on one background event loop, instance management.

Typical use (the env, evaluators, tests)::

    sites = start_sites(["shopping", "shopping_admin"], ports="auto")
    iid = sites.create_instance()                       # one file copy per backend
    cookies = sites.instance_cookies(iid) + [sites.login_cookie("shopping", iid, "emma.lopez")]
    await browser_context.add_cookies(cookies)          # Playwright
    ...                                                  # the agent browses sites.urls[...]
    db = sites.connect("shopping", iid)                  # read-only, for state_match checks
    sites.delete_instance(iid)
    sites.stop()

``webagent-r1 sites serve`` calls :func:`serve_forever`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict, Unpack

import httpx
import uvicorn

from webagent_r1.sites.base import (
    CONTROL_HEADER,
    INSTANCE_COOKIE,
    SITE_LINKS_KEY,
    SITES_COOKIE,
    InstanceStore,
    Site,
    build_app,
    check_latency,
    connect,
    login_session,
    new_control_token,
)

log = logging.getLogger(__name__)

CONTROL_TOKEN_ENV = "WEBAGENT_R1_CONTROL_TOKEN"
"""Environment variable that fixes the control token (otherwise random per start)."""
DEFAULT_IDLE_TIMEOUT_S = 1800.0

Ports = Mapping[str, int] | Literal["auto"] | None


def _registry() -> dict[str, Site]:
    # cycle: sites/__init__ imports this module before it defines SITES (see tests/test_layout.py)
    from webagent_r1.sites import SITES

    return SITES


def _bind(host: str, port: int, allow_fallback: bool) -> socket.socket:
    """A bound TCP socket on ``port`` (0: any free port); falls back to a free port if taken."""
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when the
    # listening socket says TCP; without it keep-alive requests stall ~40 ms (Nagle).
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        if port == 0 or not allow_fallback or e.errno not in (errno.EADDRINUSE, errno.EACCES):
            sock.close()
            raise OSError(
                f"cannot listen on {host}:{port} ({e.strerror}); free the port, pass other "
                "ports, or use ports='auto'"
            ) from e
        log.warning("port %d is taken; using a free port instead", port)
        sock.bind((host, 0))
    return sock


def _instance_cookie(instance_id: str, url: str) -> dict[str, Any]:
    """The Playwright cookie selecting ``instance_id`` on ``url``'s host: HttpOnly, so no page
    script reads or rewrites it (it would move the browser to another episode's instance)."""
    return {"name": INSTANCE_COOKIE, "value": instance_id, "url": url, "httpOnly": True}


@dataclass(eq=False, repr=False)
class RunningSites:
    """Sites served in a background thread; created by :func:`start_sites`.

    Attributes:
        urls: Site name -> base URL, e.g. ``{"shopping": "http://127.0.0.1:7770"}``.
        control_token: Value of the ``X-WebAgent-Control`` header the control endpoints need.
        sites: Site name -> :class:`Site`.
    """

    sites: dict[str, Site]
    urls: dict[str, str]
    _stores: dict[str, InstanceStore]
    control_token: str
    _servers: list[uvicorn.Server]
    _thread: threading.Thread
    _stop_event: threading.Event

    # -- instances ----------------------------------------------------------------------------

    def store(self, site: str) -> InstanceStore:
        """The instance store behind ``site`` (shared by sites with the same backend)."""
        if site not in self.sites:
            raise KeyError(f"site {site!r} is not running; running: {sorted(self.sites)}")
        return self._stores[self.sites[site].backend.name]

    def create_instance(self, instance_id: str | None = None) -> str:
        """Create an isolated instance on every running backend and return its id.

        Costs one file copy per backend (about a millisecond). An existing id is kept as is.
        """
        for store in self._stores.values():
            instance_id = store.create(instance_id)  # the first store picks a fresh id
        assert instance_id is not None
        return instance_id

    def reset_instance(self, instance_id: str) -> None:
        """Restore an instance to the pristine state on every backend."""
        for store in self._stores.values():
            store.reset(instance_id)

    def touch_instance(self, instance_id: str) -> bool:
        """Mark an instance as in use on every backend (see :meth:`InstanceStore.touch`);
        False when some backend no longer has it."""
        found = [store.touch(instance_id) for store in self._stores.values()]
        return all(found)

    def delete_instance(self, instance_id: str) -> None:
        """Delete an instance (its database files) on every backend."""
        for store in self._stores.values():
            store.delete(instance_id)

    def instance_db_path(self, site: str, instance_id: str) -> Path:
        """Database file of ``instance_id`` behind ``site`` (open it read-only to evaluate)."""
        return self.store(site).path(instance_id)

    def pristine_db_path(self, site: str) -> Path:
        """The pristine database behind ``site`` (what every instance starts as)."""
        return self.store(site).pristine

    def connect(self, site: str, instance_id: str, readonly: bool = True) -> sqlite3.Connection:
        """Open the instance database behind ``site`` (read-only by default; rows by name)."""
        return connect(self.instance_db_path(site, instance_id), readonly=readonly)

    def reap_idle(self) -> list[str]:
        """Delete instances idle longer than the timeout now (also done every minute)."""
        out: list[str] = []
        for store in self._stores.values():
            out += store.reap()
        return out

    # -- cookies ------------------------------------------------------------------------------

    def instance_cookies(self, instance_id: str) -> list[dict[str, Any]]:
        """Playwright cookies that select ``instance_id`` on every running site.

        Cookies ignore ports, so sites on one host share one cookie.
        """
        self.store(next(iter(self.sites))).path(instance_id)  # raises if unknown
        seen: dict[str, dict[str, Any]] = {}
        for url in self.urls.values():
            host = urllib.parse.urlsplit(url).hostname or ""
            seen.setdefault(host, _instance_cookie(instance_id, url))
        return list(seen.values())

    def sites_cookies(self, site_names: list[str]) -> list[dict[str, Any]]:
        """Playwright cookies that make every page show links to these sites (a cross-site
        task's other sites; see :data:`webagent_r1.sites.base.SITES_COOKIE`)."""
        seen: dict[str, dict[str, Any]] = {}
        for url in self.urls.values():
            host = urllib.parse.urlsplit(url).hostname or ""
            value = ",".join(site_names)
            seen.setdefault(host, {"name": SITES_COOKIE, "value": value, "url": url})
        return list(seen.values())

    def login_cookie(self, site: str, instance_id: str, username: str) -> dict[str, Any]:
        """Log ``username`` in on ``site`` in ``instance_id``; return the Playwright cookie.

        Raises:
            KeyError: Unknown site, instance or user.
        """
        token = login_session(self.instance_db_path(site, instance_id), site, username)
        return {"name": self.sites[site].session_cookie, "value": token, "url": self.urls[site]}

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether the server thread is alive."""
        return self._thread.is_alive()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the servers and delete all instance files."""
        self._stop_event.set()
        for server in self._servers:
            server.should_exit = True
        self._thread.join(timeout)
        for store in self._stores.values():
            store.close()

    def __enter__(self) -> RunningSites:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_sites(
    site_names: list[str] | None = None,
    host: str = "127.0.0.1",
    ports: Ports = None,
    port_offset: int = 0,
    control_token: str | None = None,
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
    home: Path | None = None,
    allow_port_fallback: bool = True,
    latency_ms: float = 0.0,
) -> RunningSites:
    """Start the sites' HTTP servers in a background thread and return a handle.

    Args:
        site_names: Sites to serve (default: all in ``SITES``).
        host: Interface to listen on; URLs use 127.0.0.1 when it is 0.0.0.0.
        ports: Site name -> port (0: a free port), or ``"auto"`` for free ports everywhere.
            Sites not listed use their default port plus ``port_offset``.
        port_offset: Added to default ports (run several stacks side by side).
        control_token: Token of the control endpoints (default: $WEBAGENT_R1_CONTROL_TOKEN
            or random).
        idle_timeout_s: Instances idle longer are deleted (checked every minute).
        home: Cache directory of pristine databases (default: ``config.home_dir()``).
        allow_port_fallback: Use a free port when a requested one is taken.
        latency_ms: Delay every page response by this much, without blocking the server (a
            stand-in for slower real deployments, e.g. in rollout benchmarks).

    Returns:
        A :class:`RunningSites`; call ``stop()`` (or use it as a context manager) when done.
    """
    registry = _registry()
    names = list(site_names or registry)
    unknown = [n for n in names if n not in registry]
    if unknown:
        raise ValueError(f"unknown site(s) {unknown}; available: {sorted(registry)}")
    check_latency(latency_ms, "latency_ms")  # before any socket or store exists
    sites = {n: registry[n] for n in names}
    token = control_token or os.environ.get(CONTROL_TOKEN_ENV) or new_control_token()

    # 1) one pristine database and one instance store per backend, shared by its sites
    stores: dict[str, InstanceStore] = {}
    for site in sites.values():
        b = site.backend
        if b.name not in stores:
            stores[b.name] = InstanceStore(b, b.ensure_pristine(home), idle_timeout_s)

    # 2) bind sockets now, so URLs are known before the servers run and no port race exists
    sockets: dict[str, socket.socket] = {}
    try:
        for name, site in sites.items():
            if ports == "auto":
                port = 0
            else:
                port = (ports or {}).get(name, site.default_port + port_offset)
            sockets[name] = _bind(host, port, allow_port_fallback)
    except OSError:
        for s in sockets.values():
            s.close()
        for store in stores.values():
            store.close()
        raise
    url_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    urls = {n: f"http://{url_host}:{s.getsockname()[1]}" for n, s in sockets.items()}

    # 3) one uvicorn server per site on one event loop in a daemon thread
    servers: dict[str, uvicorn.Server] = {}
    links = {n: (s.title, urls[n]) for n, s in sites.items()}  # for cross-site tasks' links
    for name, site in sites.items():
        app = build_app(site, stores[site.backend.name], token, latency_ms / 1000.0)
        app.state.site_app.cache[SITE_LINKS_KEY] = links
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=30
        )
        servers[name] = uvicorn.Server(config)
    stop_event = threading.Event()
    errors: list[BaseException] = []

    async def reaper() -> None:
        interval = min(60.0, max(1.0, idle_timeout_s / 4))
        last = time.monotonic()
        while not stop_event.is_set():
            await asyncio.sleep(0.5)  # short sleeps: stop() is not kept waiting
            if time.monotonic() - last >= interval:
                last = time.monotonic()
                for store in stores.values():
                    store.reap()

    async def main() -> None:
        reap_task = asyncio.create_task(reaper())
        try:
            await asyncio.gather(*(servers[n].serve(sockets=[sockets[n]]) for n in servers))
        finally:
            stop_event.set()
            reap_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reap_task

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as e:  # reported to the starting thread
            errors.append(e)

    thread = threading.Thread(target=run, name="webagent-sites", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not all(s.started for s in servers.values()):
        if errors or not thread.is_alive() or time.monotonic() > deadline:
            for s in servers.values():
                s.should_exit = True
            thread.join(5)
            for store in stores.values():
                store.close()
            raise RuntimeError(f"the site servers failed to start: {errors or 'timeout'}")
        time.sleep(0.005)
    return RunningSites(sites, urls, stores, token, list(servers.values()), thread, stop_event)


class ServeOptions(TypedDict, total=False):
    """The options of :func:`serve_forever`, passed on to :func:`start_sites` (which says what
    each means and its default)."""

    host: str
    ports: Ports
    port_offset: int
    control_token: str | None
    idle_timeout_s: float
    latency_ms: float


def serve_forever(site_names: list[str] | None = None, **options: Unpack[ServeOptions]) -> None:
    """Serve the sites until Ctrl-C, SIGTERM or SIGHUP, printing URLs, accounts and the
    control token.

    Humans browsing without an instance cookie use the ``default`` instance. Each of these
    signals stops the servers and deletes the instance folders (``kill``, a service manager
    and ``timeout`` send SIGTERM, a closed terminal SIGHUP, which would otherwise end the
    process with no cleanup), also while the sites are still starting: such a signal is noted
    and acted on once the handle that cleans up exists.
    """
    stops = [signal.SIGTERM, signal.SIGINT] + ([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])
    pending: list[int] = []  # a signal sent while the sites start: acted on once they run
    previous = {sig: signal.signal(sig, lambda n, _f: pending.append(n)) for sig in stops}
    try:
        running = start_sites(site_names, **options)
    except BaseException:
        _restore(previous)
        raise
    try:
        for sig in stops:  # Ctrl-C too, even when started with SIGINT ignored (a script's job)
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else _stop)
        if pending:
            raise KeyboardInterrupt
        print("Embedded sites are running (Ctrl-C to stop):")
        for name, url in running.urls.items():
            site = running.sites[name]
            users = ", ".join(f"{u.username} / {u.password}" for u in site.users)
            print(f"  {name:16s} {url}   accounts: {users}")
        print(f"Control header: {CONTROL_HEADER}: {running.control_token}", flush=True)
        while running.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("Stopping.", flush=True)
    finally:
        # a second signal must not cut the cleanup short
        for sig in stops:
            signal.signal(sig, signal.SIG_IGN)
        running.stop()
        _restore(previous)


def _restore(handlers: dict[signal.Signals, Any]) -> None:
    """Put back the signal handlers ``serve_forever`` replaced."""
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def _stop(signum: int, frame: object) -> None:
    """SIGTERM and SIGHUP handler: stop as Ctrl-C does (``serve_forever`` cleans up on
    KeyboardInterrupt)."""
    raise KeyboardInterrupt


class SitesClient:
    """Drive sites started in another process through their control endpoints.

    Offers the instance and login methods of :class:`RunningSites` over HTTP (same machine).

    Args:
        urls: Site name -> base URL.
        control_token: The token printed by ``webagent-r1 sites serve``.
    """

    def __init__(self, urls: Mapping[str, str], control_token: str, timeout: float = 10.0):
        self.urls = dict(urls)
        self._client = httpx.Client(headers={CONTROL_HEADER: control_token}, timeout=timeout)
        self._db_paths: dict[tuple[str, str], Path] = {}

    def create_instance(self, instance_id: str | None = None) -> str:
        """Create an instance on every site (shared backends reuse the id)."""
        for name, url in self.urls.items():
            body = {"instance_id": instance_id} if instance_id else {}
            r = self._client.post(f"{url}/__webagent/instances", json=body)
            r.raise_for_status()
            instance_id = r.json()["instance_id"]
            self._db_paths[(name, instance_id)] = Path(r.json()["db_path"])
        assert instance_id is not None
        return instance_id

    def delete_instance(self, instance_id: str) -> None:
        """Delete an instance on every site."""
        for name, url in self.urls.items():
            self._client.delete(f"{url}/__webagent/instances/{instance_id}")
            self._db_paths.pop((name, instance_id), None)

    def instance_cookies(self, instance_id: str) -> list[dict[str, Any]]:
        """Playwright cookies selecting the instance (one per host)."""
        seen: dict[str, dict[str, Any]] = {}
        for url in self.urls.values():
            host = urllib.parse.urlsplit(url).hostname or ""
            seen.setdefault(host, _instance_cookie(instance_id, url))
        return list(seen.values())

    def login_cookie(self, site: str, instance_id: str, username: str) -> dict[str, Any]:
        """Log ``username`` in on ``site``; return the Playwright cookie."""
        r = self._client.post(
            f"{self.urls[site]}/__webagent/instances/{instance_id}/sessions",
            json={"username": username},
        )
        r.raise_for_status()
        data = r.json()
        return {"name": data["cookie_name"], "value": data["cookie_value"], "url": self.urls[site]}

    def instance_db_path(self, site: str, instance_id: str) -> Path:
        """Database file of an instance this client created (the server runs locally)."""
        return self._db_paths[(site, instance_id)]

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()
