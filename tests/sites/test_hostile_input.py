"""Hostile input, second pass: memory under distinct long queries, request bodies and form
totals, the instance cookie, control-endpoint JSON and the admin's order comment."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterator

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
    """60 distinct 15 KB searches on the shop and on the forum keep under 4 MB (each query's
    words were cached before: about 200 KB a query)."""
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
    assert grown < 4 * 2**20, f"{grown / 2**20:.1f} MiB kept"


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
