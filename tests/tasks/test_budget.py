"""Page budget (pure part): the line a step needs, its token offset, percentiles, fit shares.

The token counter here counts whitespace-separated words, so every expected value is
worked out by hand from the tiny page below.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from webagent_r1.browser.observation import TRUNCATED_MARKER
from webagent_r1.tasks.budget import (
    TurnNeed,
    answer_line,
    element_line,
    measure_turn,
    needed_tokens,
    parse_budgets,
    percentile,
    summarize,
)
from webagent_r1.types import Action

# Words per line: 2, 3, 3, 4, 5 (17 in all).
PAGE = "\n".join(
    [
        'heading "Shop"',
        '[4] textbox "Search"',
        "Mug | $12.00",
        '[7] link "Red mug"',
        '[13] button "Add to cart"',
    ]
)
MARK = "[cut]"  # one word


def words(text: str) -> int:
    return len(text.split())


def test_element_line_compact_and_html() -> None:
    assert element_line(PAGE, "4") == 1
    assert element_line(PAGE, "7") == 3
    assert element_line(PAGE, "13") == 4
    assert element_line(PAGE, "1") is None  # "[13]" is not element 1
    html = '<h1>Shop</h1>\n<input id="4" placeholder="Search">\n<a id="7" href="/p/1">Red mug</a>'
    assert element_line(html, "7") == 2
    assert element_line(html, "1") is None


def test_answer_line_whole_words_case_and_ids_left_out() -> None:
    assert answer_line(PAGE, "$12.00") == 2
    assert answer_line(PAGE, "RED   Mug") == 3
    assert answer_line(PAGE, "mug") == 2  # the first line that has it
    assert answer_line(PAGE, "3") is None  # only in the id [13]
    assert answer_line(PAGE, "12") is None  # "$12.00" is another number
    assert answer_line(PAGE, "cart") == 4
    assert answer_line(PAGE, "car") is None  # inside a word
    assert answer_line(PAGE, "") is None
    assert answer_line("Open 13\nCount: 3", "3") == 1
    assert answer_line('[3] link "Say \\"hi\\""', 'say "hi"') == 0
    assert answer_line('<p>x</p>\n<a id="2">Tom &amp; Jerry</a>', "Tom & Jerry") == 1
    # Several values: the line by which all of them have appeared.
    assert answer_line(PAGE, "Red mug, $12.00") == 3
    assert answer_line(PAGE, "shop, , search") == 1
    assert answer_line(PAGE, "Red mug, $13.00") is None
    assert answer_line("Mug | $1,200", "$1,200") == 0  # found whole, never split


def test_needed_tokens_is_offset_plus_marker_unless_the_page_fits() -> None:
    # Line 3 ends after 2+3+3+4 = 12 words; cut there, the marker adds one: 13 <= 17.
    assert needed_tokens(PAGE, 3, words, MARK) == (12, 13)
    assert needed_tokens(PAGE, 1, words, MARK) == (5, 6)
    # The last line: 17 + marker = 18, but the whole page (17) fits uncut.
    assert needed_tokens(PAGE, 4, words, MARK) == (17, 17)
    # The default marker is the observation builder's: 10 words.
    assert needed_tokens(PAGE, 0, words) == (2, 12)
    with pytest.raises(IndexError):
        needed_tokens(PAGE, 5, words, MARK)


def test_measure_turn_kinds() -> None:
    def turn(action: Action | None, info: bool = True, text: str = PAGE) -> TurnNeed:
        return measure_turn(text, action, words, info, "shop.t", "9", 2, marker=MARK)

    click = turn(Action("Click", element="7"))
    assert (click.kind, click.line, click.offset, click.needed, click.note) == (
        "element",
        3,
        12,
        13,
        "",
    )
    assert (click.template, click.task_id, click.turn, click.page_tokens) == ("shop.t", "9", 2, 17)
    typed = turn(Action("Type", element="4", argument="red mug"))
    assert (typed.kind, typed.needed) == ("element", 6)
    answer = turn(Action("exit", argument="$12.00"))
    assert (answer.kind, answer.line, answer.offset, answer.needed) == ("answer", 2, 8, 9)
    missing = turn(Action("exit", argument="4 items"))
    assert (missing.kind, missing.needed, missing.note) == ("answer", None, "not on page")
    done = turn(Action("exit", argument="done"), info=False)
    assert (done.kind, done.needed, done.note) == ("other", None, "")
    scroll = turn(Action("Scroll Down"))
    assert (scroll.kind, scroll.needed) == ("scroll", None)
    assert turn(Action("go_backward")).kind == "other"
    assert turn(None).kind == "other"
    gone = turn(Action("Click", element="99"))
    assert (gone.kind, gone.needed, gone.note) == ("element", None, "element not shown")
    assert not click.cut
    assert turn(Action("Click", element="4"), text=f"{PAGE}\n{TRUNCATED_MARKER}").cut


def test_percentile_nearest_rank() -> None:
    values = [5, 1, 9, 3]  # sorted 1 3 5 9
    assert percentile(values, 50) == 3  # ceil(0.5 * 4) = 2nd
    assert percentile(values, 90) == 9  # ceil(3.6) = 4th
    assert percentile(values, 25) == 1
    assert percentile(values, 100) == 9
    assert percentile([7], 90) == 7
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 0)


def _need(template: str, task: str, kind: str, needed: int | None, note: str = "") -> TurnNeed:
    return TurnNeed(template, task, 0, kind, 100, None, None, needed, note)


def test_summarize_rows_and_fit_shares() -> None:
    needs = [
        _need("a", "1", "element", 10),
        _need("a", "1", "scroll", None),
        _need("a", "1", "element", 30),
        _need("a", "2", "element", 20),
        _need("b", "3", "element", 50),
        _need("b", "3", "answer", None, "not on page"),
        _need("c", "4", "other", None),
    ]
    needs[2].cut = True
    a, b, c, everything = summarize(needs, [20, 40])
    assert (a.name, a.episodes, a.turns, a.measured, a.scrolls, a.cut) == ("a", 2, 4, 3, 1, 1)
    assert (a.median, a.p90, a.max) == (20, 30, 30)  # 2nd and 3rd of 10 20 30
    assert a.fits == pytest.approx({20: 2 / 3, 40: 1.0})
    assert (b.measured, b.median, b.p90, b.max, b.not_on_page) == (1, 50, 50, 50, 1)
    assert b.fits == {20: 0.0, 40: 0.0}
    assert (c.measured, c.median, c.fits) == (0, None, {})
    assert everything.name == "all" and (everything.episodes, everything.turns) == (4, 7)
    # All four values 10 20 30 50: median = 2nd, p90 = ceil(3.6) = 4th.
    assert (everything.median, everything.p90, everything.max) == (20, 50, 50)
    assert everything.fits == {20: 0.5, 40: 0.75}
    assert everything.to_dict()["fits"] == {"20": 0.5, "40": 0.75}
    assert summarize([], [300])[0].name == "all"


def test_parse_budgets() -> None:
    assert parse_budgets("600, 300,300") == [300, 600]
    for bad in ("", "abc", "0", "-5", "3.5", "300,,600", "²"):
        with pytest.raises(ValueError, match="--budgets"):
            parse_budgets(bad)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "webagent_r1.cli", "tasks", "budget", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budgets", "300,lots"], "--budgets takes whole token counts"),
        (["--template", "shopping.no_such"], "unknown template 'shopping.no_such'"),
        (["tasks.difficulty=[11+]"], "tasks.difficulty must be among"),
        (["--rollout-tokens", "10"], "observation.max_tokens must be at least 50"),
        (["--split", "nope"], "split must be one of"),
        (
            ["--template", "shopping.product_sku", "tasks.difficulty=[1-2]"],
            "no train task of template 'shopping.product_sku' passes the config's tasks filter",
        ),
    ],
)
def test_cli_bad_input_is_one_line_error(args: list[str], message: str) -> None:
    out = _cli(*args)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and out.stderr.strip().count("\n") == 0
    assert "Traceback" not in out.stderr
