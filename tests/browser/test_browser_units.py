"""Pure parts of the browser layer: budget truncation, rendering, allow-list, option match."""

from __future__ import annotations

import pytest

from webagent_r1.browser import (
    ABOVE_MARKER,
    CHROMIUM_ARGS,
    MORE_BELOW_MARKER,
    TRUNCATED_MARKER,
    AllowList,
    BrowserNotFoundError,
    approx_tokens,
    find_chromium,
    fit_lines,
    match_option,
    normalize_origin,
    render,
)
from webagent_r1.browser import launch as launch_mod
from webagent_r1.browser.observation import to_page_text
from webagent_r1.config import ObservationConfig


def words(s: str) -> int:
    return len(s.split())


def test_fit_lines_keeps_text_within_budget() -> None:
    lines = [f"line {i} a b c" for i in range(10)]  # 5 words each
    text, truncated = fit_lines(lines, 1000, words)
    assert (text, truncated) == ("\n".join(lines), False)
    # the marker is 10 words: 29 words of budget fit 3 lines (15 + 10), not 4 (20 + 10)
    text, truncated = fit_lines(lines, 29, words)
    assert truncated
    assert text.splitlines() == [*lines[:3], TRUNCATED_MARKER]
    assert words(text) <= 29


def test_fit_lines_cuts_inside_an_overlong_first_line() -> None:
    text, truncated = fit_lines(["x" * 1000, "y"], 50)
    assert truncated
    assert text.endswith(TRUNCATED_MARKER)
    assert text.startswith("xxx") and "…" in text
    assert approx_tokens(text) <= 50


def _raw(n: int, y_step: int, scroll_y: int, viewport: int = 500) -> dict:
    lines = [f"Item {i}" for i in range(n)]
    block = {"text": "\n".join(lines), "ys": ",".join(str(i * y_step) for i in range(n))}
    return {
        "html": block,
        "compact": block,
        "scroll": {
            "x": 0,
            "y": scroll_y,
            "viewportWidth": 800,
            "viewportHeight": viewport,
            "pageHeight": n * y_step,
        },
    }


def test_render_full_page_starts_at_scroll_position_when_over_budget() -> None:
    cfg = ObservationConfig(format="compact", max_tokens=60)
    text, truncated = render(_raw(100, 100, 0), cfg, words)
    assert truncated and text.splitlines()[0] == "Item 0"
    # Scrolled to y=1000: the window starts at Item 10; earlier items become one marker line.
    text, truncated = render(_raw(100, 100, 1000), cfg, words)
    lines = text.splitlines()
    assert truncated
    assert lines[0] == ABOVE_MARKER and lines[1] == "Item 10"
    assert lines[-1] == TRUNCATED_MARKER
    assert words(text) <= 60


def test_render_full_page_within_budget_ignores_scroll() -> None:
    cfg = ObservationConfig(format="html", max_tokens=1000)
    text, truncated = render(_raw(5, 100, 300), cfg)
    assert not truncated and text.splitlines()[0] == "Item 0"


def test_render_viewport_only_marks_more_below() -> None:
    cfg = ObservationConfig(viewport_only=True, max_tokens=1000)
    text, _ = render(_raw(5, 100, 0, viewport=200), cfg)
    assert text.splitlines()[-1] == MORE_BELOW_MARKER
    text, _ = render(_raw(5, 100, 300, viewport=200), cfg)  # bottom reached
    assert MORE_BELOW_MARKER not in text


def test_paging_through_an_over_budget_page_shows_every_line_once_in_order() -> None:
    cfg = ObservationConfig(format="compact", max_tokens=50)
    raw = _raw(60, 10, 0, viewport=1000)  # 600 px: one viewport, the browser cannot scroll it
    shown: list[str] = []
    page = to_page_text(raw, cfg, words)
    starts = [page.start]
    while True:
        lines = page.text.splitlines()
        assert words(page.text) <= 50 and page.truncated
        assert (lines[0] == ABOVE_MARKER) == (page.start > 0)
        items = [x for x in lines if x.startswith("Item ")]
        assert items and items[0] == f"Item {page.start}"
        shown += items
        if page.next_start is None:
            assert lines[-1] == items[-1] == "Item 59"  # the end: no "continues" marker
            break
        assert lines[-1] == TRUNCATED_MARKER and page.next_start == page.start + len(items)
        page = to_page_text(raw, cfg, words, start=page.next_start)
        starts.append(page.start)
    assert shown == [f"Item {i}" for i in range(60)]
    assert len(starts) >= 4 and page.line_ys[page.start] == 10 * page.start
    # A page that fits its budget is shown whole, wherever paging had got to.
    whole = to_page_text(raw, ObservationConfig(max_tokens=1000), words, start=30)
    assert (whole.start, whole.next_start, whole.truncated) == (0, None, False)
    # A start past the end (the document got shorter) falls back to the scroll position.
    past = to_page_text(raw, cfg, words, start=99)
    assert past.start == 0 and past.text == to_page_text(raw, cfg, words).text
    # Viewport mode never pages.
    vp = to_page_text(raw, ObservationConfig(viewport_only=True, max_tokens=50), words, start=5)
    assert (vp.start, vp.next_start) == (0, None) and vp.text.startswith("Item 0")


def test_paging_up_from_mid_page_ends_each_page_just_above_the_last() -> None:
    cfg = ObservationConfig(format="compact", max_tokens=50)
    raw = _raw(60, 100, 4000)  # scrolled to y=4000: the text starts at Item 40
    page = to_page_text(raw, cfg, words)
    assert page.start == 40 and page.prev_start is not None
    shown = [x for x in page.text.splitlines() if x.startswith("Item ")]
    while page.prev_start is not None:
        above = to_page_text(raw, cfg, words, start=page.prev_start)
        items = [x for x in above.text.splitlines() if x.startswith("Item ")]
        assert words(above.text) <= 50
        # nothing between the two pages (the top page, without the marker, holds more)
        assert items[0] == f"Item {above.start}" and f"Item {page.start - 1}" in items
        assert above.start == 0 or items[-1] == f"Item {page.start - 1}"
        shown = items[: page.start - above.start] + shown
        page = above
    assert page.start == 0 and shown[:40] == [f"Item {i}" for i in range(40)]


def test_paging_moves_past_a_first_line_longer_than_the_budget() -> None:
    lines = ["x " * 100, "after one", "after two"]
    block = {"text": "\n".join(lines), "ys": "0,10,20"}
    raw = {"compact": block, "html": block, "scroll": {"y": 0}}
    cfg = ObservationConfig(format="compact", max_tokens=50)
    first = to_page_text(raw, cfg, words)
    assert first.text.startswith("x x") and "…" in first.text and first.next_start == 1
    second = to_page_text(raw, cfg, words, start=first.next_start)
    assert second.text.splitlines() == [ABOVE_MARKER, "after one", "after two"]
    assert second.next_start is None


def test_allow_list() -> None:
    allow = AllowList(["http://127.0.0.1:7770/", "https://Shop.local"])
    assert allow.allows("http://127.0.0.1:7770/product/1?x=2")
    assert allow.allows("https://shop.local:443/")
    assert not allow.allows("http://127.0.0.1:7771/")
    assert not allow.allows("https://127.0.0.1:7770/")  # scheme is part of the origin
    assert not allow.allows("http://localhost:7770/")
    assert not allow.allows("file:///etc/passwd")
    assert not allow.allows("javascript:alert(1)")
    assert not allow.allows("data:text/html,hi")
    assert not allow.allows("chrome://settings")
    assert allow.allows("about:blank")
    allow.add("http://localhost:9000")
    assert allow.allows("http://localhost:9000/x")
    assert allow.origins == [
        "http://127.0.0.1:7770",
        "http://localhost:9000",
        "https://shop.local:443",
    ]


def test_proxy_bypass_names_each_origin_for_pages_and_sockets() -> None:
    allow = AllowList(["http://127.0.0.1:7770/", "https://Shop.local", "http://[::1]:80"])
    assert allow.proxy_bypass() == (
        "http://127.0.0.1:7770,ws://127.0.0.1:7770,http://[::1]:80,ws://[::1]:80,"
        "https://shop.local:443,wss://shop.local:443"
    )
    # empty: the local hosts on any port (Playwright then keeps loopback unproxied)
    assert AllowList().proxy_bypass() == "127.0.0.1,localhost,[::1]"


def test_empty_allow_list_means_local_hosts() -> None:
    allow = AllowList()
    assert allow.allows("http://127.0.0.1:1234/")
    assert allow.allows("https://localhost/")
    assert not allow.allows("http://example.com/")
    assert not allow.allows("file:///etc/passwd")


def test_normalize_origin_rejects_non_http() -> None:
    assert normalize_origin("http://localhost") == ("http", "localhost", 80)
    with pytest.raises(ValueError, match="http://host:port"):
        normalize_origin("file:///tmp")


def test_match_option() -> None:
    options = [
        {"label": "Relevance", "value": "rel"},
        {"label": "Price", "value": "price"},
        {"label": "Name: A to Z", "value": "name"},
    ]
    assert match_option(options, "price") == 1  # label, case-insensitive
    assert match_option(options, "  name:  a to z ") == 2  # whitespace-insensitive
    assert match_option(options, "rel") == 0  # value fallback
    assert match_option(options, "A to") == 2  # unique substring of a label
    assert match_option(options, "e") is None  # ambiguous
    assert match_option(options, "cheapest") is None


def test_chromium_args_are_the_safe_defaults() -> None:
    assert "--no-sandbox" in CHROMIUM_ARGS and "--disable-quic" in CHROMIUM_ARGS


def test_find_chromium_explicit_and_env(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    exe = tmp_path / "my-chrome"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert find_chromium(str(exe)) == str(exe)
    monkeypatch.setenv("WEBAGENT_R1_CHROMIUM", str(exe))
    assert find_chromium() == str(exe)
    with pytest.raises(BrowserNotFoundError, match="apt-get install -y chromium"):
        find_chromium(str(tmp_path / "missing"))


def test_find_chromium_none_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEBAGENT_R1_CHROMIUM", raising=False)
    monkeypatch.setattr(launch_mod.shutil, "which", lambda name: None)
    monkeypatch.setattr(launch_mod, "_playwright_bundled_chromium", lambda: None)
    with pytest.raises(BrowserNotFoundError) as info:
        find_chromium()
    msg = str(info.value)
    assert "apt-get install -y chromium" in msg and "WEBAGENT_R1_CHROMIUM" in msg
    assert isinstance(info.value, RuntimeError)
