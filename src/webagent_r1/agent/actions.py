"""The agent's action space: parse the model's text into an ``Action`` and format it back.

Syntax of WebRL / WebAgent-R1 (docs/design.md, "Action space"), so their data and checkpoints stay
usable::

    do(action="Click", element="12")
    do(action="Type", argument="red mug", element="5")
    exit(message="answer text")

The parser is a small hand-written tokenizer, never ``eval``: the text comes from a model and
an argument may hold anything (parentheses, commas, ``=``, quotes, newlines). It is tolerant
of form (whitespace, single or double quotes, key order, case of names) and strict about
meaning (unknown actions or keys, missing fields, trailing text, several actions). Every
failure is an ``ActionParseError`` whose short message the env shows the model in
``Observation.error``, so it says what to fix. All scans are linear in the length of the text.
"""

from __future__ import annotations

import re

from webagent_r1.types import ACTION_KINDS, ARGUMENT_KINDS, ELEMENT_KINDS, Action

__all__ = [
    "ActionParseError",
    "describe_action_space",
    "extract_answer",
    "format_action",
    "parse_action",
]


class ActionParseError(ValueError):
    """The model's text is not exactly one valid action; the message says what to fix."""


# Kinds written as ``do(action="<kind>", …)``; the others are functions of their own.
_FUNCTION_KINDS = ("go_backward", "go_forward", "exit")
_DO_KINDS = tuple(k for k in ACTION_KINDS if k not in _FUNCTION_KINDS)
# Case- and spacing-insensitive lookup: "press  enter" -> "Press Enter".
_DO_KIND_BY_KEY = {k.lower(): k for k in _DO_KINDS}
# Keys each function accepts; anything else is an error rather than silently ignored.
_FUNCTION_KEYS: dict[str, tuple[str, ...]] = {
    "do": ("action", "element", "argument"),
    "go_backward": (),
    "go_forward": (),
    "exit": ("message",),
}

# One phrase per action for the system prompt; the prompt is paid for on every turn.
_DESCRIPTIONS: dict[str, str] = {
    "Click": "click element N",
    "Type": "type text into field N",
    "Search": "type text into field N, press Enter",
    "Hover": "hover over element N",
    "Press Enter": "press Enter",
    "Scroll Down": "scroll down",
    "Scroll Up": "scroll up",
    "Select Dropdown Option": "pick option in dropdown N",
    "go_backward": "go back",
    "go_forward": "go forward",
    "exit": 'finish; message is the answer ("" if none)',
}

# Placeholder argument shown in the action-space description (default "text").
_TEMPLATE_ARGUMENTS = {"Select Dropdown Option": "option", "exit": "answer"}

_ANSWER_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"<\s*/\s*answer\s*>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<\s*think\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*think\s*>", re.IGNORECASE)
# Inside an answer: a backslash escape, a quote, or a closing tag; used to find the closing
# tag that is not inside a quoted argument.
_ANSWER_TOKEN = re.compile(r"""\\.|["']|<\s*/\s*answer\s*>""", re.IGNORECASE | re.DOTALL)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WS = re.compile(r"\s*")
# Text that starts like a call, e.g. 'do(' or 'exit ('; used to treat a reply as a bare action.
_CALL_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*\(")
_KNOWN_CALL = re.compile(r"\b(?:do|go_backward|go_forward|exit)\s*\(", re.IGNORECASE)
# A string body ends at the first unescaped quote of its kind; \\. skips escaped characters.
_STRING_END = {q: re.compile(r"\\.|" + q, re.DOTALL) for q in ('"', "'")}
_UNESCAPE = re.compile(r"\\(.)", re.DOTALL)
# An unquoted value (tolerated for element=12); stops at separators.
_BARE_VALUE = re.compile(r"[^\s,()=\"']+")
_ELEMENT_ID = re.compile(r"[0-9]+", re.ASCII)


def _quote(text: str, limit: int = 40) -> str:
    """``text`` in double quotes for an error message, shortened so errors stay short."""
    if len(text) > limit:
        text = text[:limit] + "…"
    return f'"{text}"'


# --------------------------------------------------------------------------------------
# Finding the answer in a response
# --------------------------------------------------------------------------------------


def extract_answer(text: str) -> str | None:
    """Return the content of the last ``<answer>…</answer>`` block of a response.

    The closing tag is searched outside quoted strings, so an argument may itself contain
    ``</answer>``; when quotes are unbalanced (free text such as "don't") the first closing
    tag ends the block. A missing closing tag at the end of the text is tolerated (generation
    engines often stop on ``</answer>`` and drop it). Tags inside the ``<think>`` block are
    ignored: the search starts after the ``</think>`` that ends the thinking.

    Args:
        text: the model's full response.

    Returns:
        The stripped content of the last answer block ("" for an empty one), or None when
        the text has no ``<answer>`` tag.
    """
    pos = _thinking_end(text)
    answer: str | None = None
    # Once a quote-aware scan runs to the end of the text without finding a closing tag, the
    # rest is scanned plainly; this keeps the whole search linear on adversarial input.
    quote_aware = True
    while True:
        opener = _ANSWER_OPEN.search(text, pos)
        if opener is None:
            return answer
        start = opener.end()
        close: tuple[int, int] | None = None
        if quote_aware:
            close = _find_close_outside_quotes(text, start)
            quote_aware = close is not None
        if close is None:
            plain = _ANSWER_CLOSE.search(text, start)
            close = (plain.start(), plain.end()) if plain else None
        if close is None:
            return text[start:].strip()
        answer = text[start : close[0]].strip()
        pos = close[1]


def _thinking_end(text: str) -> int:
    """Index where the answer search starts: after the first ``</think>`` of the thinking.

    A ``</think>`` counts when the thinking starts before any answer tag (a ``<think>``
    opener, or a stray closer from a template that opened ``<think>`` in the prompt); one
    that only appears after the first ``<answer>`` is part of an argument, not thinking.
    """
    think_end = _THINK_CLOSE.search(text)
    if think_end is None:
        return 0
    first_answer = _ANSWER_OPEN.search(text, 0, think_end.start())
    if first_answer is None:
        return think_end.end()
    think_open = _THINK_OPEN.search(text, 0, first_answer.start())
    return think_end.end() if think_open else 0


def _find_close_outside_quotes(text: str, start: int) -> tuple[int, int] | None:
    """Span of the first closing answer tag after ``start`` that is not inside quotes."""
    quote: str | None = None
    for m in _ANSWER_TOKEN.finditer(text, start):
        tok = m.group()
        if tok in ('"', "'"):
            if quote is None:
                quote = tok
            elif quote == tok:
                quote = None
        elif quote is None and tok[0] == "<":
            return m.start(), m.end()
    return None


# --------------------------------------------------------------------------------------
# Tokenizing one call: name(key="value", …)
# --------------------------------------------------------------------------------------


def _skip_ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches


def _read_string(text: str, pos: int) -> tuple[str, int]:
    """Read a quoted string starting at ``text[pos]`` (the quote); return (value, end)."""
    q = text[pos]
    for m in _STRING_END[q].finditer(text, pos + 1):
        if m.group() == q:
            body = text[pos + 1 : m.start()]
            # Only \\ and escaped quotes are escapes; any other backslash is literal, so a
            # model typing C:\new or a regex gets exactly what it wrote.
            value = _UNESCAPE.sub(
                lambda e: e.group(1) if e.group(1) in "\"'\\" else e.group(0), body
            )
            return value, m.end()
    raise ActionParseError(f"unclosed quote ({q}) in the action; close every string")


def _tokenize_call(text: str) -> tuple[str, dict[str, tuple[str, bool]], int]:
    """Parse ``name(key=value, …)`` at the start of ``text``.

    Returns:
        (lower-cased name, {lower-cased key: (value, was_quoted)}, index after ``)``).
    """
    pos = _skip_ws(text, 0)
    m = _IDENT.match(text, pos)
    if m is None:
        raise ActionParseError(
            f'expected an action like do(action="Click", element="12"), got {_quote(text)}'
        )
    name = m.group().lower()
    if name not in _FUNCTION_KEYS:
        raise ActionParseError(
            f"unknown function {_quote(m.group())}; use do(…), go_backward(), go_forward() "
            "or exit(message=…)"
        )
    pos = _skip_ws(text, m.end())
    if not text.startswith("(", pos):
        raise ActionParseError(f'expected "(" after {name}')
    pos += 1
    args: dict[str, tuple[str, bool]] = {}
    while True:
        pos = _skip_ws(text, pos)
        if pos >= len(text):
            raise ActionParseError('missing closing ")" of the action')
        if text[pos] == ")":
            return name, args, pos + 1
        km = _IDENT.match(text, pos)
        if km is None:
            raise ActionParseError(f'arguments must be written key="value" in {name}(…)')
        key = km.group().lower()
        pos = _skip_ws(text, km.end())
        if not text.startswith("=", pos):
            raise ActionParseError(f'expected "=" after {key}; write {key}="…"')
        pos = _skip_ws(text, pos + 1)
        if pos < len(text) and text[pos] in "\"'":
            value, pos = _read_string(text, pos)
            quoted = True
        else:
            vm = _BARE_VALUE.match(text, pos)
            if vm is None:
                raise ActionParseError(f'missing value of {key}; write {key}="…"')
            value, pos, quoted = vm.group(), vm.end(), False
        if key in args:
            raise ActionParseError(f"{key} is given twice")
        args[key] = (value, quoted)
        pos = _skip_ws(text, pos)
        if text.startswith(",", pos):
            pos += 1  # a trailing comma before ")" is accepted, as in Python
        elif not text.startswith(")", pos):
            if pos >= len(text):
                raise ActionParseError('missing closing ")" of the action')
            raise ActionParseError(f'expected "," or ")" after the value of {key}')


# --------------------------------------------------------------------------------------
# Meaning: which fields each action needs
# --------------------------------------------------------------------------------------


def _normalise_element(value: str) -> str:
    """Check an element id is a non-negative integer and drop leading zeros."""
    v = value.strip()
    if not _ELEMENT_ID.fullmatch(v):
        raise ActionParseError(f"element must be a number, got {_quote(value)}")
    # lstrip instead of int(): int() refuses strings over 4300 digits.
    return v.lstrip("0") or "0"


def _canonical_kind(kind: str) -> str:
    """Canonical name of an action kind, matched case- and spacing-insensitively."""
    if kind in _FUNCTION_KINDS:
        return kind
    found = _DO_KIND_BY_KEY.get(" ".join(kind.split()).lower())
    if found is None:
        raise ActionParseError(f"unknown action {_quote(kind)}; valid: {', '.join(_DO_KINDS)}")
    return found


def _check_fields(kind: str, element: str | None, argument: str | None) -> str | None:
    """Check ``kind`` gets exactly the fields it needs; return the normalised element."""
    if kind == "exit":
        if argument is None:
            raise ActionParseError('exit needs message="…" (use "" when there is no answer)')
        if element is not None:
            raise ActionParseError("exit takes no element")
        return None
    if kind in ELEMENT_KINDS:
        if element is None:
            raise ActionParseError(f'{kind} needs element="N"')
        element = _normalise_element(element)
    elif element is not None:
        raise ActionParseError(f"{kind} takes no element")
    if kind in ARGUMENT_KINDS:
        if argument is None:
            raise ActionParseError(f'{kind} needs argument="…"')
    elif argument is not None:
        raise ActionParseError(f"{kind} takes no argument")
    return element


def _build_action(name: str, args: dict[str, tuple[str, bool]], raw: str) -> Action:
    """Turn a tokenized call into a validated ``Action``."""
    allowed = _FUNCTION_KEYS[name]
    for key in args:
        if key not in allowed:
            takes = ", ".join(allowed) if allowed else "no arguments"
            raise ActionParseError(f"unknown key {_quote(key)}; {name}() takes {takes}")
    for key, (value, quoted) in args.items():
        # Only an element id may be unquoted (element=12): anything else would be ambiguous.
        if not quoted and key != "element":
            raise ActionParseError(f'{key} must be a quoted string: {key}="{value}"')
    values = {k: v for k, (v, _) in args.items()}
    if name == "do":
        if "action" not in values:
            raise ActionParseError('do() needs action="…", e.g. do(action="Click", element="1")')
        kind = _canonical_kind(values["action"])
        argument = values.get("argument")
    else:
        kind = name
        argument = values.get("message")
    element = _check_fields(kind, values.get("element"), argument)
    return Action(kind=kind, element=element, argument=argument, raw=raw)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def parse_action(text: str) -> Action:
    """Parse a model response (or a bare action string) into exactly one ``Action``.

    A response that starts with a call of the action space (``do(…``, ``exit(…``) is parsed
    as a bare action, so an argument may contain ``<answer>``; otherwise the content of the
    last ``<answer>`` block is parsed. Text with no answer tag that starts like some other
    call (``click(12)``) is parsed too, so that its error names the problem.

    Args:
        text: the model's full response, e.g. ``<think>…</think><answer>do(…)</answer>``,
            or a bare action such as ``go_backward()``.

    Returns:
        The action with a canonical ``kind``, a normalised numeric ``element`` and ``raw`` set
        to the parsed action text.

    Raises:
        ActionParseError: no answer, an empty answer, or not exactly one valid action; the
            message is short and says what to fix.
    """
    stripped = text.strip()
    answer = None if _KNOWN_CALL.match(stripped) else extract_answer(text)
    if answer is not None:
        if not answer:
            raise ActionParseError("empty <answer></answer>; put one action inside it")
        body = answer
    elif _CALL_START.match(stripped):
        # A bare action (no tags), or a reply that was prefilled with "<answer>".
        body = stripped
    else:
        raise ActionParseError("no <answer>…</answer> found; put one action inside it")
    name, args, end = _tokenize_call(body)
    rest = body[end:].strip()
    if rest and _ANSWER_CLOSE.fullmatch(rest):
        rest = ""
    if rest:
        if _KNOWN_CALL.search(rest):
            raise ActionParseError("more than one action; give exactly one per turn")
        raise ActionParseError(f"unexpected text after the action: {_quote(rest)}")
    return _build_action(name, args, body[:end].strip())


def _escape(value: str) -> str:
    """Escape backslashes and double quotes so ``parse_action`` reads ``value`` back."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def _render(kind: str, element: str | None, argument: str | None) -> str:
    """Canonical text of an action, without validation (also used for the N templates)."""
    if kind in ("go_backward", "go_forward"):
        return f"{kind}()"
    if kind == "exit":
        return f'exit(message="{_escape(argument or "")}")'
    parts = [f'action="{kind}"']
    if argument is not None:
        parts.append(f'argument="{_escape(argument)}"')
    if element is not None:
        parts.append(f'element="{element}"')
    return f"do({', '.join(parts)})"


def format_action(action: Action) -> str:
    """Canonical text of ``action``; ``parse_action`` reads it back to an equal action.

    Args:
        action: the action; ``kind`` may be in any case (it is normalised).

    Returns:
        E.g. ``do(action="Type", argument="red mug", element="5")`` or ``go_backward()``.

    Raises:
        ActionParseError: unknown kind, or fields missing or not allowed for the kind.
    """
    kind = _canonical_kind(action.kind)
    element = _check_fields(kind, action.element, action.argument)
    return _render(kind, element, action.argument)


def describe_action_space() -> str:
    """The action space for the system prompt: one line per action with its meaning."""
    lines = []
    for kind in ACTION_KINDS:
        element = "N" if kind in ELEMENT_KINDS else None
        argument = _TEMPLATE_ARGUMENTS.get(kind, "text" if kind in ARGUMENT_KINDS else None)
        lines.append(f"{_render(kind, element, argument)}: {_DESCRIPTIONS[kind]}")
    return "\n".join(lines)
