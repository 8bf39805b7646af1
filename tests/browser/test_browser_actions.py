"""Every action kind on real pages, and the errors an agent can provoke."""

from __future__ import annotations

import statistics
import time

import pytest

from webagent_r1.browser import BrowserSession
from webagent_r1.config import ObservationConfig
from webagent_r1.types import ACTION_KINDS, Action

from .helpers import element_id

pytestmark = pytest.mark.browser

CFG = ObservationConfig(format="compact")


async def act(session: BrowserSession, kind: str, name: str | None = None, arg: str | None = None):
    """Observe, find the element called ``name``, execute; returns (error, next observation)."""
    element = element_id((await session.observe(CFG)).text, name) if name else None
    error = await session.execute(Action(kind, element=element, argument=arg))
    return error, await session.observe(CFG)


async def test_click_link_navigates(session: BrowserSession) -> None:
    error, obs = await act(session, "Click", "Orbit Golden Charger")
    assert error is None
    assert obs.url.endswith("/product.html") and obs.title == "Orbit Golden Charger"
    assert "Price: $25.00" in obs.text.splitlines()


async def test_click_button_and_checkbox(session: BrowserSession) -> None:
    error, obs = await act(session, "Click", "Add to Cart")
    assert error is None and '[10] button "Added 1"' in obs.text
    error, obs = await act(session, "Click", "Remember me")
    assert error is None and '[8] checkbox "Remember me" checked' in obs.text


async def test_type_clears_the_field_first(session: BrowserSession) -> None:
    error, obs = await act(session, "Type", "Search", "red mug")
    assert error is None
    assert '[5] textbox "Search" value="red mug"' in obs.text
    assert await session.page.input_value("#q") == "red mug"  # not "old textred mug"
    error, obs = await act(session, "Type", "Your review", "Great\nmug")
    assert error is None and '[9] textbox "Your review" value="Great mug"' in obs.text


async def test_search_types_and_submits(session: BrowserSession) -> None:
    error, obs = await act(session, "Search", "Search", "blue mug")
    assert error is None
    assert obs.url.endswith("/search.html?q=blue+mug")
    assert "You searched for: blue mug" in obs.text


async def test_press_enter_submits_the_focused_form(session: BrowserSession) -> None:
    assert (await act(session, "Type", "Search", "teapot"))[0] is None
    error, obs = await act(session, "Press Enter")
    assert error is None
    assert obs.url.endswith("/search.html?q=teapot") and "You searched for: teapot" in obs.text


async def test_hover(session: BrowserSession) -> None:
    error, obs = await act(session, "Hover", "Hover me")
    assert error is None
    assert "Hovered!" in obs.text  # mouseover handler
    assert '[11] button "Hover me CSS tip shown"' in obs.text  # :hover style


async def test_select_dropdown_option(session: BrowserSession) -> None:
    error, obs = await act(session, "Select Dropdown Option", "Sort by", "price")
    assert error is None and '[7] combobox "Sort by" value="Price"' in obs.text
    assert await session.page.input_value("#sort") == "price"
    error, obs = await act(session, "Select Dropdown Option", "Sort by", "name")  # by value
    assert error is None and 'value="Name: A to Z"' in obs.text


async def test_select_missing_option_lists_options(session: BrowserSession) -> None:
    error, _ = await act(session, "Select Dropdown Option", "Sort by", "Cheapest")
    assert error == (
        'option \'Cheapest\' not found in element 7; options: "Relevance", "Price", "Name: A to Z"'
    )
    error, _ = await act(session, "Select Dropdown Option", "Add to Cart", "x")
    assert error is not None and "not a dropdown" in error


async def test_go_back_and_forward(session: BrowserSession) -> None:
    error, _ = await act(session, "go_backward")
    assert error == "cannot go back: no previous page"
    await act(session, "Click", "Orbit Golden Charger")
    error, obs = await act(session, "go_backward")
    assert error is None and obs.url.endswith("/index.html")
    error, obs = await act(session, "go_forward")
    assert error is None and obs.url.endswith("/product.html")
    error, _ = await act(session, "go_forward")
    assert error == "cannot go forward: no next page"


async def test_link_opening_a_new_tab_is_followed(session: BrowserSession) -> None:
    error, obs = await act(session, "Click", "Open in new tab")
    assert error is None
    assert obs.tabs == ["Test Shop", "Orbit Golden Charger"] and obs.active_tab == 1
    assert obs.url.endswith("/product.html") and obs.title == "Orbit Golden Charger"
    # Actions now apply to the new tab.
    error, obs = await act(session, "Click", "Home")
    assert error is None and obs.tabs == ["Test Shop", "Test Shop"]


async def test_window_open_popup_is_followed(session: BrowserSession) -> None:
    error, obs = await act(session, "Click", "Popup")
    assert error is None
    assert obs.active_tab == 1 and len(obs.tabs) == 2
    assert "You searched for: popup" in obs.text


async def test_closing_the_active_tab_falls_back(session: BrowserSession) -> None:
    await act(session, "Click", "Open in new tab")
    await session.page.close()
    obs = await session.observe(CFG)
    assert obs.tabs == ["Test Shop"] and obs.active_tab == 0


async def test_errors_are_returned_not_raised(session: BrowserSession) -> None:
    await session.observe(CFG)
    cases = [
        (Action("Click", element="42"), "element 42 not found on the page"),
        (Action("Click", element="abc"), "element 'abc' not found on the page (ids are numbers)"),
        (Action("Click"), "action 'Click' needs an element id"),
        (Action("Type", element="5"), "action 'Type' needs an argument"),
        (
            Action("Type", element="6", argument="x"),
            "element 6 (button 'Go') cannot be typed into; Type needs a text box",
        ),
        (
            Action("Type", element="7", argument="x"),
            "element 7 (select 'Sort by') is a dropdown: use Select Dropdown Option",
        ),
        (Action("Fly"), "unknown action 'Fly'"),
    ]
    for action, expected in cases:
        error = await session.execute(action)
        assert error is not None and error.startswith(expected), (action, error)
    assert session.page.url.endswith("/index.html")


async def test_exit_is_a_no_op(session: BrowserSession) -> None:
    before = (await session.observe(CFG)).text
    assert await session.execute(Action("exit", argument="$12.00")) is None
    assert (await session.observe(CFG)).text == before


async def test_action_and_observation_timings(session: BrowserSession, site: str) -> None:
    """Local pages: observing and acting stay well under a second (typically 10-150 ms)."""
    timings: dict[str, list[float]] = {}

    def timed(key: str, t0: float) -> None:
        timings.setdefault(key, []).append((time.perf_counter() - t0) * 1000)

    for _ in range(3):
        assert await session.goto(f"{site}/long.html") is None
        for action in (Action("Scroll Down"), Action("Scroll Up")):
            t0 = time.perf_counter()
            assert await session.execute(action) is None
            timed(action.kind, t0)
        assert await session.goto(f"{site}/index.html") is None
        for fmt in ("compact", "html"):
            t0 = time.perf_counter()
            await session.observe(ObservationConfig(format=fmt))
            timed(f"observe/{fmt}", t0)
        steps = [
            Action("Type", element="5", argument="a"),
            Action("Click", element="10"),
            Action("Hover", element="11"),
            Action("Select Dropdown Option", element="7", argument="Price"),
            Action("Click", element="1"),
            Action("go_backward"),
        ]
        for action in steps:
            t0 = time.perf_counter()
            error = await session.execute(action)
            timed(action.kind + (" (navigates)" if action.element == "1" else ""), t0)
            assert error is None, (action, error)
    medians = {k: round(statistics.median(v), 1) for k, v in timings.items()}
    print("median ms:", medians)
    assert all(ms < 1000 for ms in medians.values()), medians
    assert set(ACTION_KINDS) >= {k.split(" (")[0] for k in timings if "/" not in k}


async def test_select_that_submits_its_form_is_awaited(session: BrowserSession, site: str) -> None:
    assert await session.goto(f"{site}/autosort.html") is None
    obs = await session.observe(ObservationConfig())
    sort = element_id(obs.text, "Sort By")
    assert (
        await session.execute(Action("Select Dropdown Option", element=sort, argument="Price"))
        is None
    )
    after = await session.observe(ObservationConfig())
    assert after.url.endswith("sort=price")
    assert "sorted by price" in after.text
