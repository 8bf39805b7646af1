"""Hostile input, second pass: memory under distinct long queries, request bodies and form
totals, the instance cookie, control-endpoint JSON and the admin's order comment."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from webagent_r1.sites import INSTANCE_COOKIE, RunningSites, start_sites
from webagent_r1.sites.textcache import TextCache, size_of


@pytest.fixture(scope="module")
def every(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSites]:
    """All five sites on free ports, with a private cache of pristine databases."""
    running = start_sites(ports="auto", home=tmp_path_factory.mktemp("home"))
    yield running
    running.stop()


def _client(sites: RunningSites, site: str, iid: str | None = None) -> httpx.Client:
    cookies = {INSTANCE_COOKIE: iid} if iid is not None else {}
    return httpx.Client(base_url=sites.urls[site], cookies=cookies, timeout=60)


def _query(rng: random.Random, size: int = 15_000) -> str:
    """``size`` characters of distinct words (every query unlike the others)."""
    words = " ".join(f"w{rng.randrange(10**9)}" for _ in range(size // 6))
    return words[:size]


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------


def test_distinct_long_queries_leave_no_memory_behind(every: RunningSites) -> None:
    """60 distinct 15 KB searches on the shop and on the forum keep under 8 MB (each query's
    words were cached before: about 200 KB a query, 24 MB for these 120; what stays now is
    the sites' own bounded caches filling with the catalogue's texts, 4-5 MB measured)."""
    rng = random.Random(0)
    clients = [_client(every, "shopping"), _client(every, "reddit")]
    for c in clients:  # the catalogue's words, cached once
        assert c.get("/search", params={"q": "mug"}).status_code == 200
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(60):
            q = _query(rng)
            for c in clients:
                assert c.get("/search", params={"q": q}).status_code == 200
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        for c in clients:
            c.close()
    assert grown < 8 * 2**20, f"{grown / 2**20:.1f} MiB kept"


def test_text_cache_is_bounded_in_bytes_and_least_recently_used() -> None:
    calls: list[str] = []

    def words(text: str) -> tuple[str, ...]:
        calls.append(text)
        return tuple(text.split())

    cache = TextCache(words, max_bytes=64_000)
    texts = [f"text {i} " + "x" * 200 for i in range(1_000)]
    for t in texts:
        assert cache(t) == tuple(t.split())
    assert 0 < cache.nbytes <= 64_000 and len(cache) < 1_000
    calls.clear()
    assert cache(texts[-1]) and calls == []  # the newest stays
    cache(texts[0])
    assert calls == [texts[0]]  # the oldest went
    big = "y " * 5_000  # over a sixteenth of the budget: computed, never kept
    assert cache(big) == tuple(big.split()) and (big,) not in cache._entries
    assert size_of(("ab", frozenset({"c"}))) > size_of(("ab",))


# --------------------------------------------------------------------------------------------
# Request bodies
# --------------------------------------------------------------------------------------------


def _logged_in(sites: RunningSites, site: str, iid: str, user: str) -> httpx.Client:
    c = _client(sites, site, iid)
    ck = sites.login_cookie(site, iid, user)
    c.cookies.set(ck["name"], ck["value"])
    return c


def test_an_oversized_form_gets_a_413_and_nothing_is_stored(every: RunningSites) -> None:
    """A body over 1 MiB (declared, or streamed without a length) is refused before it is
    parsed; a form under the cap is served as before."""
    iid = every.create_instance()
    db = every.connect("shopping", iid)
    before = db.execute("SELECT count(*) FROM reviews").fetchone()[0]
    fields = {f"f{i}": "x" * 20_000 for i in range(60)}  # 1.2 MB in 60 fields
    with _logged_in(every, "shopping", iid, "emma.lopez") as c:
        r = c.post("/product/1/review", data={**fields, "title": "t", "body": "b", "rating": "5"})
        assert r.status_code == 413 and "larger than the site accepts" in r.text

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
            yield b"title=t&rating=5&body=b"
            for _ in range(40):
                yield b"&pad=" + b"y" * 50_000

        r = c.post(
            "/product/1/review",
            content=chunks(),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 413
        files = {f"f{i}": ("a.txt", b"z" * 100_000) for i in range(12)}  # multipart
        assert c.post("/product/1/review", files=files).status_code == 413
        ok = {"nickname": "n", "title": "Fine", "body": "ok", "rating": "5"}
        r = c.post("/product/1/review", data=ok)
        assert r.status_code in (200, 303)
    assert db.execute("SELECT count(*) FROM reviews").fetchone()[0] == before + 1


def test_control_endpoints_refuse_deep_or_huge_json_with_a_400(every: RunningSites) -> None:
    headers = {"X-WebAgent-Control": every.control_token, "content-type": "application/json"}
    url = every.urls["map"] + "/__webagent/instances"
    with httpx.Client(timeout=60) as c:
        r = c.post(url, content=b"[" * 100_000 + b"]" * 100_000, headers=headers)
        assert r.status_code == 400 and "nested deeper than 64" in r.json()["error"]
        deep = '{"a":' * 70 + "1" + "}" * 70  # parses, but deeper than the limit
        r = c.post(url, content=deep.encode(), headers=headers)
        assert r.status_code == 400 and "nested deeper" in r.json()["error"]
        r = c.post(url, content=b'"' + b"x" * (2**20 + 10) + b'"', headers=headers)
        assert r.status_code == 400 and "over 1048576 bytes" in r.json()["error"]
        assert c.post(url, content=b"null", headers=headers).status_code == 400
        r = c.post(url, content=b'{"instance_id": "ok-1"}', headers=headers)
        assert r.status_code == 201


# --------------------------------------------------------------------------------------------
# The instance cookie
# --------------------------------------------------------------------------------------------


def test_an_empty_instance_cookie_is_not_the_shared_instance(every: RunningSites) -> None:
    with _client(every, "shopping", "") as c:
        r = c.get("/")
        assert r.status_code == 404 and "site instance does not exist" in r.text
    with _client(every, "shopping") as c:  # no cookie at all: the shared instance
        assert c.get("/").status_code == 200


def test_the_instance_cookie_is_http_only(every: RunningSites) -> None:
    iid = every.create_instance()
    cookies = every.instance_cookies(iid)
    assert cookies and all(c["httpOnly"] is True for c in cookies)
    from webagent_r1.sites.server import SitesClient

    remote = SitesClient(every.urls, every.control_token)
    assert all(c["httpOnly"] is True for c in remote.instance_cookies(iid))


# --------------------------------------------------------------------------------------------
# The admin's order comment
# --------------------------------------------------------------------------------------------


def test_an_order_comment_over_its_cap_is_refused_not_cut(every: RunningSites) -> None:
    iid = every.create_instance()
    db = every.connect("shopping_admin", iid)
    oid = db.execute("SELECT id FROM orders WHERE status = 'pending' LIMIT 1").fetchone()[0]
    count = "SELECT count(*) FROM order_comments WHERE order_id = ?"
    n = db.execute(count, (oid,)).fetchone()[0]
    with _logged_in(every, "shopping_admin", iid, "admin") as admin:
        admin.follow_redirects = True
        r = admin.post(f"/orders/{oid}/status", data={"status": "shipped", "comment": "c" * 2_001})
        assert "Comment is too long: use at most 2,000 characters." in r.text
        assert db.execute(count, (oid,)).fetchone()[0] == n
        status = db.execute("SELECT status FROM orders WHERE id = ?", (oid,)).fetchone()[0]
        assert status == "pending"
        r = admin.post(f"/orders/{oid}/status", data={"status": "shipped", "comment": "c" * 2_000})
        assert r.status_code == 200
    row = db.execute(
        "SELECT comment FROM order_comments WHERE order_id = ? ORDER BY id DESC", (oid,)
    ).fetchone()
    assert row[0] == "c" * 2_000


# --------------------------------------------------------------------------------------------
# Stopping ``sites serve``
# --------------------------------------------------------------------------------------------


def _serve(tmp_path: Path) -> tuple[subprocess.Popen[str], Path]:
    """``webagent-r1 sites serve --site map`` with its instance folders under a private TMPDIR."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(tmp),
        "WEBAGENT_R1_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"),
    }
    cmd = [sys.executable, "-c", "from webagent_r1.cli import main; main()", "sites", "serve"]
    proc = subprocess.Popen(
        [*cmd, "--site", "map", "--port-offset", "20100"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, tmp


def test_sites_serve_cleans_up_on_sighup(tmp_path: Path) -> None:
    """A closed terminal (SIGHUP) stops ``sites serve`` as Ctrl-C does."""
    proc, tmp = _serve(tmp_path)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if "Control header" in line:
                break
        assert any(tmp.iterdir())
        proc.send_signal(signal.SIGHUP)
        rest, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0 and "Stopping." in rest and "Traceback" not in rest
    assert list(tmp.iterdir()) == []


def test_sites_serve_cleans_up_on_a_sigterm_while_starting(tmp_path: Path) -> None:
    """SIGTERM sent the moment the first instance folder exists, while the servers are still
    starting, is held back and then stops the server with its cleanup."""
    proc, tmp = _serve(tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not any(tmp.iterdir()) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "Traceback" not in out and "Embedded sites are running" not in out  # stopped early
    assert list(tmp.iterdir()) == []
