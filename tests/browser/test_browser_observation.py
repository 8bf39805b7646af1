"""Observations of real pages in real Chromium: ids, both formats, hidden content, viewport."""

from __future__ import annotations

import re

import pytest

from webagent_r1.browser import (
    ABOVE_MARKER,
    MORE_BELOW_MARKER,
    TRUNCATED_MARKER,
    BrowserSession,
)
from webagent_r1.config import ObservationConfig
from webagent_r1.types import Action

from .helpers import element_id

pytestmark = pytest.mark.browser

COMPACT = ObservationConfig(format="compact")
HTML = ObservationConfig(format="html")
HIDDEN = [
    "HIDDEN_DISPLAY",
    "HIDDEN_LINK",
    "HIDDEN_VISIBILITY",
    "HIDDEN_ARIA",
    "HIDDEN_ZERO",
    "HIDDEN_BUTTON",
    "HIDDEN_INPUT",
    "csrf",
    "SCRIPT_TEXT",
    "COMMENT_TEXT",
    "SVG_TEXT",
    "CSS tip shown",  # shown only on :hover
    "wrapper",
]


async def test_compact_observation(session: BrowserSession) -> None:
    obs = await session.observe(COMPACT)
    assert obs.title == "Test Shop" and obs.url.endswith("/index.html")
    assert obs.tabs == ["Test Shop"] and obs.active_tab == 0 and obs.error is None
    lines = obs.text.splitlines()
    # Fresh page: ids in document order, starting at 1.
    assert lines[:3] == [
        'heading "Test Shop"',
        '[1] link "Orbit Golden Charger"',
        '[2] link "Long page"',
    ]
    for expected in [
        '[5] textbox "Search" value="old text"',
        '[6] button "Go"',
        '[7] combobox "Sort by" value="Relevance" options: "Relevance", "Price", "Name: A to Z"',
        '[8] checkbox "Remember me"',
        '[9] textbox "Your review"',
        '[10] button "Add to Cart"',
        "Item | Price",
        "Red mug | $12.00",
        "Visible paragraph with spaces.",
    ]:
        assert expected in lines, f"{expected!r} missing from:\n{obs.text}"
    # Label text is carried by its control, not repeated as a line of its own.
    assert "Remember me" not in lines and "Sort by" not in lines


async def test_html_observation(session: BrowserSession) -> None:
    obs = await session.observe(HTML)
    text = obs.text
    assert '<a id="1" href="/product.html">Orbit Golden Charger</a>' in text
    assert '<input id="5" name="q" placeholder="Search products" value="old text">' in text
    assert (
        '<select id="7" name="sort"><option selected>Relevance</option><option>Price</option>'
        "<option>Name: A to Z</option></select>"
    ) in text
    assert '<input id="8" type="checkbox" name="remember"> Remember me' in text
    assert '<button id="10">Add to Cart</button>' in text
    assert "<tr><td>Red mug</td> <td>$12.00</td></tr>" in text
    assert "<h1>Test Shop</h1>" in text
    # Decorative wrappers and original attributes are gone.
    assert "<div" not in text and "<span" not in text and "class=" not in text


async def test_both_formats_share_ids(session: BrowserSession) -> None:
    compact = await session.observe(COMPACT)
    html = await session.observe(HTML)
    compact_ids = re.findall(r"^\[(\d+)\]", compact.text, re.MULTILINE)
    html_ids = re.findall(r' id="(\d+)"', html.text)
    assert compact_ids == html_ids and len(compact_ids) == 15


@pytest.mark.parametrize("cfg", [COMPACT, HTML], ids=["compact", "html"])
async def test_hidden_script_comment_svg_removed(
    session: BrowserSession, cfg: ObservationConfig
) -> None:
    obs = await session.observe(cfg)
    for needle in HIDDEN:
        assert needle not in obs.text, f"{needle!r} should be hidden:\n{obs.text}"


async def test_ids_stable_and_set_on_live_dom(session: BrowserSession) -> None:
    first = await session.observe(COMPACT)
    second = await session.observe(COMPACT)
    assert first.text == second.text
    link = session.page.locator('[data-webagent-id="1"]')
    assert await link.inner_text() == "Orbit Golden Charger"


async def test_new_elements_get_new_ids_old_ones_keep_theirs(session: BrowserSession) -> None:
    before = await session.observe(COMPACT)
    await session.page.evaluate(
        """() => {
          const a = document.createElement('a');
          a.href = '/product.html';
          a.textContent = 'Inserted first';
          document.body.prepend(a);
        }"""
    )
    after = await session.observe(COMPACT)
    assert element_id(after.text, "Inserted first") == "16"
    for name in ("Orbit Golden Charger", "Add to Cart", "Scripted escape"):
        assert element_id(after.text, name) == element_id(before.text, name)


async def test_viewport_only_follows_scrolling(session: BrowserSession, site: str) -> None:
    assert await session.goto(f"{site}/long.html") is None
    cfg = ObservationConfig(viewport_only=True)
    top = (await session.observe(cfg)).text.splitlines()
    assert top[0] == 'heading "Top of the long page"'
    assert "Item 1" in top and "Item 30" not in top
    assert top[-1] == MORE_BELOW_MARKER
    # The bottom button is out of view, but it has an id already (ids do not move on scroll).
    full = (await session.observe(ObservationConfig())).text
    button = element_id(full, "Bottom button")

    assert await session.execute(Action("Scroll Down")) is None
    assert await session.page.evaluate("window.scrollY") == 1080
    middle = (await session.observe(cfg)).text.splitlines()
    assert "Item 1" not in middle and "Item 12" in middle and "Item 20" in middle

    for _ in range(10):
        if await session.execute(Action("Scroll Down")) is not None:
            break
    bottom = (await session.observe(cfg)).text.splitlines()
    assert f'[{button}] button "Bottom button"' in bottom and MORE_BELOW_MARKER not in bottom
    assert await session.execute(Action("Scroll Down")) == "already at the bottom of the page"

    assert await session.execute(Action("Scroll Up")) is None
    assert await session.page.evaluate("window.scrollY") > 0
    up = (await session.observe(cfg)).text.splitlines()
    assert up != bottom


async def test_full_page_budget_truncates_and_scroll_reveals_more(
    session: BrowserSession, site: str
) -> None:
    assert await session.goto(f"{site}/long.html") is None

    def count(s: str) -> int:
        return len(s.split())

    cfg = ObservationConfig(max_tokens=80, page_through=False)  # the viewport scroll alone
    first = (await session.observe(cfg, count_tokens=count)).text
    lines = first.splitlines()
    assert lines[0] == 'heading "Top of the long page"' and lines[-1] == TRUNCATED_MARKER
    assert count(first) <= 80 and "Item 60" not in lines
    assert session.last_page_text is not None and session.last_page_text.truncated

    assert await session.execute(Action("Scroll Down")) is None
    second = (await session.observe(cfg, count_tokens=count)).text.splitlines()
    assert second[0] == ABOVE_MARKER
    assert second[1] in ("Item 10", "Item 11")  # the first line at or below the scroll top
    assert count("\n".join(second)) <= 80

    # Without a tokenizer the budget is ~4 characters a token.
    approx = (await session.observe(ObservationConfig(max_tokens=60))).text
    assert len(approx) <= 60 * 4 and approx.endswith(TRUNCATED_MARKER)


def _words(s: str) -> int:
    return len(s.split())


def _double(s: str) -> int:
    return 2 * len(s.split())


async def _page_down(
    session: BrowserSession, cfg: ObservationConfig, count=_words
) -> tuple[list[str], str]:
    """Observe, Scroll Down until the session says there is no more: (every line, last text)."""
    seen: list[str] = []
    text = ""
    for _ in range(40):
        text = (await session.observe(cfg, count_tokens=count)).text
        assert count(text) <= cfg.max_tokens
        seen += [x for x in text.splitlines() if x not in (ABOVE_MARKER, TRUNCATED_MARKER)]
        if await session.execute(Action("Scroll Down")) is not None:
            return seen, text
    raise AssertionError("Scroll Down never reached the bottom")


async def test_scroll_down_pages_through_text_cut_on_a_page_too_short_to_scroll(
    session: BrowserSession, site: str
) -> None:
    rows = [f"Row {i}" for i in range(1, 61)]
    assert await session.goto(f"{site}/dense.html") is None
    assert await session.page.evaluate("document.body.scrollHeight <= window.innerHeight")
    # The viewport scroll alone: the rows past the cut can never be read.
    old = ObservationConfig(max_tokens=50, page_through=False)
    seen, _ = await _page_down(session, old)
    assert "Row 10" in seen and "Row 60" not in seen

    assert await session.goto(f"{site}/dense.html") is None
    cfg = ObservationConfig(max_tokens=50)
    pages = [(await session.observe(cfg, count_tokens=_words)).text]
    assert pages[0].splitlines()[-1] == TRUNCATED_MARKER
    for _ in range(30):
        assert await session.execute(Action("Scroll Down")) is None
        pages.append((await session.observe(cfg, count_tokens=_words)).text)
        if TRUNCATED_MARKER not in pages[-1]:
            break
    # Every row once, in order; each later page says content lies above.
    seen = [x for p in pages for x in p.splitlines() if x.startswith("Row ")]
    assert seen == rows and len(pages) >= 4
    assert all(p.splitlines()[0] == ABOVE_MARKER for p in pages[1:])
    assert await session.execute(Action("Scroll Down")) == "already at the bottom of the page"
    # The last page's button is there to click; the click keeps the page where it is.
    button = element_id(pages[-1], "Last button")
    assert await session.execute(Action("Click", element=button)) is None
    assert await session.page.title() == "clicked"
    assert (await session.observe(cfg, count_tokens=_words)).text == pages[-1]
    # Loading the same URL again is a new document: it starts at the top.
    assert await session.execute(Action("Scroll Down")) == "already at the bottom of the page"
    link = element_id(pages[-1], "Load this page again")
    assert await session.execute(Action("Click", element=link)) is None
    assert (await session.observe(cfg, count_tokens=_words)).text == pages[0]
    for want in pages[1:]:  # the env observes after every action, as here
        assert await session.execute(Action("Scroll Down")) is None
        assert (await session.observe(cfg, count_tokens=_words)).text == want
    # Scroll Up goes back page by page, to the top.
    for want in reversed(pages[:-1]):
        assert await session.execute(Action("Scroll Up")) is None
        assert (await session.observe(cfg, count_tokens=_words)).text == want
    assert await session.execute(Action("Scroll Up")) == "already at the top of the page"
    # A navigation starts over at the top.
    assert await session.execute(Action("Scroll Down")) is None
    assert await session.goto(f"{site}/dense.html") is None
    assert (await session.observe(cfg, count_tokens=_words)).text == pages[0]


async def test_scroll_down_skips_no_line_when_the_budget_is_under_a_screen(
    session: BrowserSession, site: str
) -> None:
    assert await session.goto(f"{site}/long.html") is None
    items = [f"Item {i}" for i in range(1, 61)]
    whole = (await session.observe(ObservationConfig(), count_tokens=_words)).text.splitlines()
    assert [x for x in whole if x in items] == items
    # At two tokens a word, a page holds 3-4 items, a screen about 11: the viewport skips some.
    old, _ = await _page_down(
        session, ObservationConfig(max_tokens=50, page_through=False), _double
    )
    assert [x for x in old if x in items] != items
    assert await session.goto(f"{site}/long.html") is None
    seen, last = await _page_down(session, ObservationConfig(max_tokens=50), _double)
    assert [x for x in seen if x in items] == items
    assert "Bottom button" in last
    # Text that starts mid-page (the browser scrolled there): Scroll Up pages back from it.
    assert await session.goto(f"{site}/long.html") is None
    await session.page.evaluate("window.scrollTo(0, 3000)")
    cfg = ObservationConfig(max_tokens=50)
    mid = (await session.observe(cfg, count_tokens=_double)).text.splitlines()
    assert mid[0] == ABOVE_MARKER and mid[1] == "Item 30"
    assert await session.execute(Action("Scroll Up")) is None
    up = (await session.observe(cfg, count_tokens=_double)).text.splitlines()
    assert up[-2:] == ["Item 29", TRUNCATED_MARKER]
    assert await session.page.evaluate("window.scrollY") > 0  # the viewport followed


async def test_password_values_are_masked(session: BrowserSession) -> None:
    await session.page.evaluate(
        """() => {
          const i = document.createElement('input');
          i.type = 'password';
          i.placeholder = 'Password';
          i.value = 'hunter2';
          document.body.prepend(i);
        }"""
    )
    for cfg in (COMPACT, HTML):
        text = (await session.observe(cfg)).text
        assert "hunter2" not in text and "••••" in text
    # Nothing was observed before the insertion, so the new field is first in document order.
    lines = (await session.observe(COMPACT)).text.splitlines()
    assert lines[0] == '[1] textbox "Password" type=password value="••••"'


async def test_open_shadow_dom_is_observed_and_actionable(session: BrowserSession) -> None:
    await session.page.evaluate(
        """() => {
          const host = document.createElement('div');
          host.attachShadow({ mode: 'open' }).innerHTML = '<p>Inside the shadow</p>' +
            '<button onclick="this.textContent = \\'Pressed\\'">Shadow</button>';
          document.body.prepend(host);
        }"""
    )
    text = (await session.observe(COMPACT)).text
    assert "Inside the shadow" in text.splitlines()
    button = element_id(text, "Shadow")
    assert await session.execute(Action("Click", element=button)) is None
    assert f'[{button}] button "Pressed"' in (await session.observe(COMPACT)).text


async def test_closed_details_hide_their_content(session: BrowserSession, site: str) -> None:
    assert await session.goto(f"{site}/menu.html") is None
    obs = await session.observe(COMPACT)
    assert "Chargers" not in obs.text
    assert not re.search(r"^\[\d+\] link$", obs.text, re.MULTILINE)  # no nameless links
    summary = element_id(obs.text, "Electronics")
    assert await session.execute(Action("Click", element=summary)) is None
    opened = await session.observe(COMPACT)
    assert re.search(r'^\[\d+\] link "Chargers"$', opened.text, re.MULTILINE)


async def test_whitespace_between_elements_separates_text(
    session: BrowserSession, site: str
) -> None:
    assert await session.goto(f"{site}/spacing.html") is None
    lines = (await session.observe(COMPACT)).text.splitlines()
    assert "Page 1 of 40 1" in lines  # not "Page 1 of 401"
    assert "$9.99" in lines  # runs without whitespace between them still join
