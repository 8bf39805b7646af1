"""Instances, control endpoints, sessions, reaping: the framework under the sites."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from webagent_r1.sites import (
    CONTROL_HEADER,
    DEFAULT_INSTANCE,
    INSTANCE_COOKIE,
    RunningSites,
    start_sites,
)
from webagent_r1.sites.base import build_app

Client = Callable[..., httpx.Client]


@pytest.mark.parametrize("site", ["shopping", "shopping_admin"])
def test_control_endpoints_reject_missing_or_wrong_token(sites: RunningSites, site: str) -> None:
    base = sites.urls[site]
    for headers in ({}, {CONTROL_HEADER: "wrong"}):
        assert httpx.post(f"{base}/__webagent/instances", headers=headers).status_code == 403
        r = httpx.post(
            f"{base}/__webagent/instances/{DEFAULT_INSTANCE}/sessions",
            json={"username": "admin"},
            headers=headers,
        )
        assert r.status_code == 403
        r = httpx.delete(f"{base}/__webagent/instances/{DEFAULT_INSTANCE}", headers=headers)
        assert r.status_code == 403
        assert httpx.get(f"{base}/__webagent/health", headers=headers).status_code == 403


def test_control_endpoints_create_share_login_delete(sites: RunningSites) -> None:
    auth = {CONTROL_HEADER: sites.control_token}
    shop, admin = sites.urls["shopping"], sites.urls["shopping_admin"]
    r = httpx.post(f"{shop}/__webagent/instances", headers=auth)
    assert r.status_code == 201
    iid = r.json()["instance_id"]
    # The admin shares the shop's backend: the same id is reused, not copied again.
    path = sites.instance_db_path("shopping", iid)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE products SET price = 1.23 WHERE id = 1")
    r = httpx.post(f"{admin}/__webagent/instances", json={"instance_id": iid}, headers=auth)
    assert r.json()["instance_id"] == iid
    assert sites.instance_db_path("shopping_admin", iid) == path
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT price FROM products WHERE id = 1").fetchone()[0] == 1.23
    r = httpx.post(
        f"{admin}/__webagent/instances/{iid}/sessions", json={"username": "admin"}, headers=auth
    )
    body = r.json()
    assert body["cookie_name"] == "shopping_admin_session"
    page = httpx.get(
        admin + "/", cookies={"wa_instance": iid, body["cookie_name"]: body["cookie_value"]}
    )
    assert page.status_code == 200 and "Lifetime Sales" in page.text
    r = httpx.post(
        f"{admin}/__webagent/instances/{iid}/sessions", json={"username": "nobody"}, headers=auth
    )
    assert r.status_code == 404
    assert httpx.delete(f"{shop}/__webagent/instances/{iid}", headers=auth).status_code == 200
    assert not path.exists()
    with pytest.raises(KeyError):
        sites.instance_db_path("shopping", iid)


def test_unknown_instance_cookie_gets_an_error_page(sites: RunningSites, client: Client) -> None:
    with client("shopping", "no-such-instance") as c:
        r = c.get("/")
    assert r.status_code == 404 and "site instance does not exist" in r.text


def test_invalid_instance_id_is_rejected(sites: RunningSites) -> None:
    with pytest.raises(ValueError, match="invalid instance id"):
        sites.create_instance("../etc")


def test_idle_instances_are_reaped(sites: RunningSites) -> None:
    store = sites.store("shopping")
    iid = sites.create_instance()
    assert iid not in store.reap()  # fresh
    assert iid in store.reap(now=time.monotonic() + store.idle_timeout_s + 1)
    assert not store.exists(iid)
    assert store.exists(DEFAULT_INSTANCE)  # never reaped


def test_reset_restores_pristine_state(sites: RunningSites) -> None:
    iid = sites.create_instance()
    with sites.connect("shopping", iid, readonly=False) as db:
        db.execute("DELETE FROM reviews")
    sites.reset_instance(iid)
    with sites.connect("shopping", iid) as db:
        assert db.execute("SELECT COUNT(*) FROM reviews").fetchone()[0] > 0
    sites.delete_instance(iid)


def test_readonly_connection_cannot_write(sites: RunningSites) -> None:
    iid = sites.create_instance()
    db = sites.connect("shopping", iid)
    with pytest.raises(sqlite3.OperationalError):
        db.execute("DELETE FROM reviews")
    db.close()
    sites.delete_instance(iid)


def test_reset_latency(sites: RunningSites) -> None:
    """Create an instance, log in, load the first page: what an episode reset costs."""
    # One HTTP client throughout, as a browser would be: its setup is not the sites' cost.
    with httpx.Client(base_url=sites.urls["shopping"]) as c:
        c.get("/")  # templates compile once per server
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            iid = sites.create_instance()
            cookie = sites.login_cookie("shopping", iid, "emma.lopez")
            c.cookies.clear()
            c.cookies.set("wa_instance", iid)
            c.cookies.set(cookie["name"], cookie["value"])
            assert "Welcome, Emma Lopez!" in c.get("/").text
            times.append(time.perf_counter() - t0)
            sites.delete_instance(iid)
    times.sort()
    median, worst = times[len(times) // 2] * 1000, times[-1] * 1000
    print(
        f"\nreset latency (create instance + login + first page): median {median:.1f} ms, "
        f"max {worst:.1f} ms"
    )
    assert median < 250


def test_latency_delays_pages_without_blocking_the_server(sites: RunningSites) -> None:
    """``latency_s`` waits before each page, not the control endpoints, and lets other
    requests through meanwhile."""
    site = sites.sites["shopping"]
    app = build_app(site, sites.store("shopping"), sites.control_token, latency_s=0.4)
    cookies = {INSTANCE_COOKIE: DEFAULT_INSTANCE}

    async def fetch(client: httpx.AsyncClient, path: str, **kw: Any) -> float:
        t0 = time.perf_counter()
        r = await client.get(path, **kw)
        assert r.status_code == 200, r.text[:200]
        return time.perf_counter() - t0

    async def main() -> tuple[float, list[float], float]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://shop", cookies=cookies
        ) as c:
            await fetch(c, "/")  # templates compiled before timing
            t0 = time.perf_counter()
            each = await asyncio.gather(*(fetch(c, "/") for _ in range(4)))
            together = time.perf_counter() - t0
            control = await fetch(
                c, "/__webagent/health", headers={CONTROL_HEADER: sites.control_token}
            )
            return together, each, control

    together, each, control = asyncio.run(main())
    assert min(each) >= 0.4
    assert together < 3 * 0.4  # four delayed pages at once (one after another: >= 1.6 s)
    assert control < 0.4
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="latency_s"):
            build_app(site, sites.store("shopping"), sites.control_token, latency_s=bad)
        with pytest.raises(ValueError, match="latency_ms"):
            start_sites(["shopping"], latency_ms=bad)


def test_start_sites_serves_pages_with_the_latency_asked(
    sites_home: Path, sites: RunningSites
) -> None:
    with (
        start_sites(["shopping"], ports="auto", home=sites_home, latency_ms=300) as slow,
        # made before timing: a new client costs 0.1-1 s on a loaded machine
        httpx.Client(cookies={INSTANCE_COOKIE: DEFAULT_INSTANCE}) as client,
    ):
        auth = {CONTROL_HEADER: slow.control_token}
        t0 = time.perf_counter()
        assert client.get(f"{slow.urls['shopping']}/__webagent/health", headers=auth).is_success
        control_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        r = client.get(slow.urls["shopping"])
        page_s = time.perf_counter() - t0
    assert r.status_code == 200
    assert page_s >= 0.3 and control_s < 0.3  # milliseconds, not seconds, and pages only
