"""Expert helpers: finding elements in observation text (pure)."""

from __future__ import annotations

import pytest

from webagent_r1.tasks.experts import ExpertError, elements, find, find_all

PAGE = """[1] link "One Stop Market"
[2] textbox "Search" value="red \\"mug\\""
heading "Orders"
000000400 | Dec 30, 2023 | Benjamin Allen | $147.97 | Pending | [17] link "View"
Nice one | 5 | [20] button "Approve" [21] button "Delete"
[22] combobox "Sort By" value="Best Match" options: "Best Match", "Name: A to Z"
Price [x] of [3 items]"""


def test_elements_at_line_start_and_inside_rows() -> None:
    els = elements(PAGE)
    assert [(e.id, e.role, e.name) for e in els] == [
        ("1", "link", "One Stop Market"),
        ("2", "textbox", "Search"),
        ("17", "link", "View"),
        ("20", "button", "Approve"),
        ("21", "button", "Delete"),
        ("22", "combobox", "Sort By"),
    ]
    assert els[1].value == 'red \\"mug\\"'
    assert els[5].value == "Best Match"


def test_find() -> None:
    assert find(PAGE, "button", "delete").id == "21"
    assert find(PAGE, "link", "View", exact=True).id == "17"
    assert len(find_all(PAGE, "button")) == 2
    with pytest.raises(ExpertError, match="no link named 'Checkout'"):
        find(PAGE, "link", "Checkout")


def test_html_format() -> None:
    html = '<a id="3" href="/p/1">Red Mug</a> <input id="4" name="q" placeholder="Search">'
    assert [(e.id, e.role, e.name) for e in elements(html)] == [
        ("3", "link", "Red Mug"),
        ("4", "textbox", "Search"),
    ]
