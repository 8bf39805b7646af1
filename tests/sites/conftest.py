"""Fixtures: one set of running sites per test session, on free ports, with a private cache."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from webagent_r1.sites import INSTANCE_COOKIE, RunningSites, start_sites


@pytest.fixture(scope="session")
def sites_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The private cache of pristine databases the session's sites use."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="session")
def sites(sites_home: Path) -> Iterator[RunningSites]:
    """The shop and its admin, served on free ports; pristine DB cached in a temp dir."""
    running = start_sites(["shopping", "shopping_admin"], ports="auto", home=sites_home)
    yield running
    running.stop()


def _client(
    sites: RunningSites, site: str, instance_id: str, username: str | None = None
) -> httpx.Client:
    """An HTTP client browsing ``site`` in ``instance_id`` (logged in as ``username``)."""
    cookies = {INSTANCE_COOKIE: instance_id}
    if username is not None:
        ck = sites.login_cookie(site, instance_id, username)
        cookies[ck["name"]] = ck["value"]
    return httpx.Client(base_url=sites.urls[site], cookies=cookies, follow_redirects=True)


def _visible_text(page: str) -> str:
    """Rough visible text of a page: tags, scripts, styles and closed menus removed."""
    page = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", page)
    page = re.sub(r"(?s)<details>.*?</details>", " ", page)  # closed dropdown menus
    page = re.sub(r"<[^>]+>", " ", page)
    return re.sub(r"\s+", " ", html.unescape(page)).strip()


@pytest.fixture
def client(sites: RunningSites) -> Callable[..., httpx.Client]:
    """``client(site, instance_id, username=None)`` -> an httpx client browsing that site."""
    return lambda site, instance_id, username=None: _client(sites, site, instance_id, username)


@pytest.fixture
def visible_text() -> Callable[[str], str]:
    """Rough visible text of an HTML page."""
    return _visible_text
