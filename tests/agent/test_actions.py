"""Tests of agent/actions.py: parsing, formatting and the action-space description."""

from __future__ import annotations

import contextlib
import time

import pytest

from webagent_r1.agent.actions import (
    ActionParseError,
    describe_action_space,
    extract_answer,
    format_action,
    parse_action,
)
from webagent_r1.types import ACTION_KINDS, Action


def _kef(a: Action) -> tuple[str, str | None, str | None]:
    return a.kind, a.element, a.argument


# --------------------------------------------------------------------------------------
# extract_answer
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>t</think><answer>go_backward()</answer>", "go_backward()"),
        ("<answer>  \n go_forward() \n</answer>", "go_forward()"),
        ("<answer>a</answer> then <answer>b</answer>", "b"),  # the last block wins
        ("<answer>a</answer> then <answer>b", "b"),  # engine stopped on </answer>
        ("<think>x</think>\n<answer>go_backward()", "go_backward()"),
        ("<ANSWER>x</Answer >", "x"),
        ("< answer >x< / answer >", "x"),
        ("<answer></answer>", ""),
        ("no tags at all", None),
        ("", None),
        # Tags mentioned inside the thinking are not the answer.
        ('<think>use <answer> tags</think><answer>exit(message="1")</answer>', 'exit(message="1")'),
        # A stray leading </think> (template opened the thinking in the prompt).
        ("reasoning</think>\n<answer>go_forward()</answer>", "go_forward()"),
        # A </think> inside an argument is not the end of the thinking.
        (
            '<answer>do(action="Type", argument="</think>", element="5")</answer>',
            'do(action="Type", argument="</think>", element="5")',
        ),
        (
            '<think>a</think><answer>do(action="Type", argument="</think>", element="5")',
            'do(action="Type", argument="</think>", element="5")',
        ),
        # A closing tag inside a quoted argument does not end the block.
        (
            '<answer>do(action="Type", argument="</answer>", element="5")</answer>',
            'do(action="Type", argument="</answer>", element="5")',
        ),
        # Unbalanced quotes in free text: the first closing tag ends the block.
        ("<answer>I don't know</answer>", "I don't know"),
        ("<answer>don't</answer><answer>go_forward()</answer>", "go_forward()"),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


# --------------------------------------------------------------------------------------
# parse_action: every kind
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('do(action="Click", element="12")', ("Click", "12", None)),
        ('do(action="Type", argument="red mug", element="5")', ("Type", "5", "red mug")),
        ('do(action="Search", argument="mugs", element="5")', ("Search", "5", "mugs")),
        ('do(action="Hover", element="3")', ("Hover", "3", None)),
        ('do(action="Press Enter")', ("Press Enter", None, None)),
        ('do(action="Scroll Down")', ("Scroll Down", None, None)),
        ('do(action="Scroll Up")', ("Scroll Up", None, None)),
        (
            'do(action="Select Dropdown Option", argument="Blue", element="7")',
            ("Select Dropdown Option", "7", "Blue"),
        ),
        ("go_backward()", ("go_backward", None, None)),
        ("go_forward()", ("go_forward", None, None)),
        ('exit(message="answer text")', ("exit", None, "answer text")),
        ('exit(message="")', ("exit", None, "")),
        ('do(action="Type", argument="", element="5")', ("Type", "5", "")),  # clear a field
    ],
)
def test_parse_every_kind(text: str, expected: tuple) -> None:
    assert _kef(parse_action(text)) == expected
    # The same inside a full response.
    response = f"<think>I should act.</think>\n<answer>{text}</answer>"
    action = parse_action(response)
    assert _kef(action) == expected
    assert action.raw == text


def test_every_kind_is_covered() -> None:
    kinds = {
        parse_action(t).kind
        for t in [
            'do(action="Click", element="1")',
            'do(action="Type", argument="a", element="1")',
            'do(action="Search", argument="a", element="1")',
            'do(action="Hover", element="1")',
            'do(action="Press Enter")',
            'do(action="Scroll Down")',
            'do(action="Scroll Up")',
            'do(action="Select Dropdown Option", argument="a", element="1")',
            "go_backward()",
            "go_forward()",
            'exit(message="a")',
        ]
    }
    assert kinds == set(ACTION_KINDS)


# --------------------------------------------------------------------------------------
# parse_action: tolerated variations of form
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("do(action='Click', element='12')", ("Click", "12", None)),
        ('do( action = "Click" ,\n  element = "12" )', ("Click", "12", None)),
        ('do(element="12", action="Click")', ("Click", "12", None)),  # key order
        ('do(action="click", element="12")', ("Click", "12", None)),  # kind case
        ('do(action="SCROLL   down")', ("Scroll Down", None, None)),  # kind spacing
        ('do(action=" press enter ")', ("Press Enter", None, None)),
        ('DO(ACTION="Click", ELEMENT="12")', ("Click", "12", None)),  # key/function case
        ('Exit(message="x")', ("exit", None, "x")),
        ("go_backward( )", ("go_backward", None, None)),
        ('do(action="Click", element=12)', ("Click", "12", None)),  # unquoted id
        ('do(action="Click", element=" 12 ")', ("Click", "12", None)),
        ('do(action="Click", element="007")', ("Click", "7", None)),
        ('do(action="Click", element="0")', ("Click", "0", None)),
        ('do(action="Click", element="12",)', ("Click", "12", None)),  # trailing comma
        ('  \n do(action="Click", element="12")  \n', ("Click", "12", None)),
        # A reply prefilled with "<answer>" keeps only the closing tag.
        ('do(action="Click", element="12")</answer>', ("Click", "12", None)),
        # Escaped quotes, both styles.
        (r'do(action="Type", argument="say \"hi\"", element="5")', ("Type", "5", 'say "hi"')),
        (r"do(action='Type', argument='it\'s', element='5')", ("Type", "5", "it's")),
        ("""do(action="Type", argument="it's", element="5")""", ("Type", "5", "it's")),
        ("""do(action='Type', argument='say "hi"', element='5')""", ("Type", "5", 'say "hi"')),
        # Backslashes: \\ is one backslash, other backslashes are literal.
        (r'exit(message="a\\b")', ("exit", None, "a\\b")),
        (r'exit(message="C:\new")', ("exit", None, "C:\\new")),
    ],
)
def test_parse_variants(text: str, expected: tuple) -> None:
    assert _kef(parse_action(text)) == expected


# --------------------------------------------------------------------------------------
# parse_action: adversarial content
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argument",
    [
        'a ") b',
        "f(x, y=1), g()",
        "a = b, c = d",
        "line one\nline two\n",
        '<answer>do(action="Click", element="1")</answer>',
        "</answer>",
        "<think>not thinking</think>",
        "日本語 – émoji 🙂",
        "back\\slash \\\" mix '",
        "",
        " padded ",
    ],
)
def test_round_trip_adversarial_arguments(argument: str) -> None:
    for kind in ("Type", "Search", "Select Dropdown Option"):
        action = Action(kind=kind, element="5", argument=argument)
        text = format_action(action)
        assert _kef(parse_action(text)) == (kind, "5", argument)
        wrapped = f"<think>x</think><answer>{text}</answer>"
        assert _kef(parse_action(wrapped)) == (kind, "5", argument)
    exit_text = format_action(Action(kind="exit", argument=argument))
    assert _kef(parse_action(exit_text)) == ("exit", None, argument)


def test_raw_newlines_inside_argument() -> None:
    text = '<answer>do(action="Type", argument="a\n(b)\n", element="5")</answer>'
    assert parse_action(text).argument == "a\n(b)\n"


def test_long_input_is_linear() -> None:
    n = 100_000
    inputs = [
        f'do(action="Type", argument="{"x" * n}", element="5")',
        f"<think>{'y' * n}</think><answer>go_backward()</answer>",
        "<answer>" * (n // 8),
        '<answer>do(action="Type", argument="' + "\\" * n,
        "<answer>'\"</answer>" * (n // 20),
        "(" * n,
        'do(action="Click", element="' + "1" * n + '")',
        "<think>" * (n // 7) + "<answer>go_forward()</answer>",
        "x" * n,
    ]
    start = time.perf_counter()
    for text in inputs:
        with contextlib.suppress(ActionParseError):
            parse_action(text)
    # All together take ~0.2 s; a quadratic scan would take minutes on any of them.
    assert time.perf_counter() - start < 2.0


def test_long_argument_parses() -> None:
    action = parse_action(f'do(action="Type", argument="{"x" * 100_000}", element="5")')
    assert action.argument == "x" * 100_000


# --------------------------------------------------------------------------------------
# parse_action: malformed input -> ActionParseError with a helpful message
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("I will click the button.", "no <answer>…</answer> found; put one action inside it"),
        ("", "no <answer>…</answer> found; put one action inside it"),
        ("<think>hmm</think>", "no <answer>…</answer> found; put one action inside it"),
        ("<answer>  </answer>", "empty <answer></answer>; put one action inside it"),
        (
            'do(action="Klick", element="1")',
            'unknown action "Klick"; valid: Click, Type, Search, Hover, Press Enter, Scroll Down, '
            "Scroll Up, Select Dropdown Option",
        ),
        ('do(action="Click")', 'Click needs element="N"'),
        ('do(action="Type", element="5")', 'Type needs argument="…"'),
        ('do(action="Search", argument="x")', 'Search needs element="N"'),
        ('do(action="Click", element="abc")', 'element must be a number, got "abc"'),
        ('do(action="Click", element="-1")', 'element must be a number, got "-1"'),
        ('do(action="Click", element="")', 'element must be a number, got ""'),
        ('do(action="Click", element="١٢")', 'element must be a number, got "١٢"'),
        ('do(action="Click", element=abc)', 'element must be a number, got "abc"'),
        ('do(action="Click", element="12)', 'unclosed quote (") in the action; close every string'),
        (
            'do(action="Click", element="12") now',
            'unexpected text after the action: "now"',
        ),
        (
            'do(action="Click", element="12")\ndo(action="Click", element="13")',
            "more than one action; give exactly one per turn",
        ),
        (
            '<answer>go_backward(); exit(message="x")</answer>',
            "more than one action; give exactly one per turn",
        ),
        (
            'do(action="Click", element="12", foo="1")',
            'unknown key "foo"; do() takes action, element, argument',
        ),
        ('exit(answer="42")', 'unknown key "answer"; exit() takes message'),
        ('go_backward(element="1")', 'unknown key "element"; go_backward() takes no arguments'),
        ("exit()", 'exit needs message="…" (use "" when there is no answer)'),
        ('do(element="1")', 'do() needs action="…", e.g. do(action="Click", element="1")'),
        ('do(action="Scroll Down", element="3")', "Scroll Down takes no element"),
        ('do(action="Click", argument="x", element="3")', "Click takes no argument"),
        ('do(action="Click", element="1", element="2")', "element is given twice"),
        ('do(action=Click, element="1")', 'action must be a quoted string: action="Click"'),
        ('do("Click", element="1")', 'arguments must be written key="value" in do(…)'),
        ('do(action="Click" element="1")', 'expected "," or ")" after the value of action'),
        ('do(action="Click", element="1"', 'missing closing ")" of the action'),
        ('do(action=, element="1")', 'missing value of action; write action="…"'),
        ('do(action "Click")', 'expected "=" after action; write action="…"'),
        (
            "click(12)",
            'unknown function "click"; use do(…), go_backward(), go_forward() or exit(message=…)',
        ),
        (
            '<answer>do(action="Exit", message="x")</answer>',
            'unknown key "message"; do() takes action, element, argument',
        ),
    ],
)
def test_malformed(text: str, message: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(text)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_error_quotes_are_shortened() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(f'do(action="{"K" * 500}")')
    assert len(str(info.value)) < 200
    assert '"' + "K" * 40 + '…"' in str(info.value)


# --------------------------------------------------------------------------------------
# format_action
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "text"),
    [
        (Action("Click", element="12"), 'do(action="Click", element="12")'),
        (Action("Type", "5", "red mug"), 'do(action="Type", argument="red mug", element="5")'),
        (Action("Search", "5", "x"), 'do(action="Search", argument="x", element="5")'),
        (Action("Hover", "3"), 'do(action="Hover", element="3")'),
        (Action("Press Enter"), 'do(action="Press Enter")'),
        (Action("Scroll Down"), 'do(action="Scroll Down")'),
        (Action("Scroll Up"), 'do(action="Scroll Up")'),
        (
            Action("Select Dropdown Option", "7", "Blue"),
            'do(action="Select Dropdown Option", argument="Blue", element="7")',
        ),
        (Action("go_backward"), "go_backward()"),
        (Action("go_forward"), "go_forward()"),
        (Action("exit", argument='say "hi"'), r'exit(message="say \"hi\"")'),
        (Action("exit", argument="a\\b"), r'exit(message="a\\b")'),
        (Action("click", element="12"), 'do(action="Click", element="12")'),  # normalised
    ],
)
def test_format_action(action: Action, text: str) -> None:
    assert format_action(action) == text
    parsed = parse_action(text)
    assert (parsed.kind.lower(), parsed.element, parsed.argument) == (
        action.kind.lower(),
        action.element,
        action.argument,
    )
    assert format_action(parsed) == text  # canonical text is a fixed point


def test_format_rejects_invalid_actions() -> None:
    with pytest.raises(ActionParseError, match='Click needs element="N"'):
        format_action(Action("Click"))
    with pytest.raises(ActionParseError, match="unknown action"):
        format_action(Action("Teleport"))
    with pytest.raises(ActionParseError, match="element must be a number"):
        format_action(Action("Click", element="x"))


def test_describe_action_space() -> None:
    text = describe_action_space()
    lines = text.splitlines()
    assert len(lines) == len(ACTION_KINDS)
    assert lines[0] == 'do(action="Click", element="N"): click element N'
    assert lines[-1].startswith('exit(message="answer"): ')
    assert all(": " in line for line in lines)
    assert len(text) < 700  # paid on every turn
