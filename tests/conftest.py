"""Shared fixtures: fixture pages over HTTP, one real Chromium, and the embedded sites."""

from __future__ import annotations

import functools
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from webagent_r1.browser import Browser, find_chromium
from webagent_r1.config import BrowserConfig
from webagent_r1.sites.episodes import EmbeddedSites

PAGES = Path(__file__).resolve().parent / "fixtures" / "pages"


class _QuietHandler(SimpleHTTPRequestHandler):
    """Serves the fixture pages; ``/redirect?to=URL`` answers 302 to URL (an open redirect)."""

    def do_GET(self) -> None:
        if self.path.startswith("/redirect?to="):
            self.send_response(302)
            self.send_header("Location", self.path.split("to=", 1)[1])
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


def _serve() -> tuple[ThreadingHTTPServer, str]:
    handler = functools.partial(_QuietHandler, directory=str(PAGES))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture(scope="session")
def site() -> Iterator[str]:
    """Origin of a local server of tests/fixtures/pages (the allowed site)."""
    server, origin = _serve()
    yield origin
    server.shutdown()


@pytest.fixture(scope="session")
def other_site() -> Iterator[str]:
    """A second local server on another port, never on the allow-list."""
    server, origin = _serve()
    yield origin
    server.shutdown()


def browser_config() -> BrowserConfig:
    """The default timeouts: no test waits for one to expire, and a loaded CI machine is slow."""
    return BrowserConfig()


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Browser]:
    """One Chromium for the whole test run."""
    # No skip when Chromium is missing: scripts/setup.sh installs it, and a skipped browser
    # test must never pass as green.
    find_chromium()
    b = await Browser.launch(browser_config())
    yield b
    await b.close()


@pytest.fixture(scope="session")
def embedded_sites() -> Iterator[EmbeddedSites]:
    """All embedded sites on free ports, shared by the whole test run."""
    sites = EmbeddedSites.start()
    yield sites
    sites.stop()
