"""One reader and checker for the files a user hands in: task files, trajectory files, configs.

Every loader reads through ``read_text`` and ``parse_json`` and checks fields with a
``Fields`` checker, so that every refusal is the loader's own ``LoadError`` subclass with a
one-line message ``<file>:<line>: <field> <what is wrong>``: never a ``TypeError``,
``UnicodeDecodeError`` or ``RecursionError`` from deep inside.

- Text: UTF-8, or UTF-16/32 as JSON detects them (so a file an editor saved as UTF-16 reads
  too); anything else (latin-1 …) is refused with the line of the first bad byte.
- JSON: at most ``MAX_DEPTH`` levels of nesting (deeper input would exhaust the interpreter's
  stack in the parser or in whatever walks the value later); integers of any length are
  refused past ``MAX_INT_DIGITS`` digits by Python itself and reported here.
- JSONL: one reader, ``read_jsonl``, for every command (loaders, ``report``, ``failures``,
  ``view``, ``credit``): records are separated by ``\\n`` only, as they are written
  (``str.splitlines`` would also split a record inside a string at U+2028, U+0085 or a form
  feed), so what a writer wrote always reads back.
- Numbers: ``bool`` is never a number; NaN and infinities are refused wherever a field
  feeds a computation; integers are bounded by what a 64-bit integer (an SQLite INTEGER, a
  tensor's ``int64``) holds.
"""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from webagent_r1.errors import LoadError

__all__ = [
    "MAX_DEPTH",
    "MAX_INT",
    "MISSING",
    "Fields",
    "decode_text",
    "json_depth_ok",
    "jsonl_lines",
    "parse_json",
    "read_json_entries",
    "read_jsonl",
    "read_text",
    "show",
]

MAX_DEPTH = 64
"""Deepest nesting of lists and objects a loaded file may have (real files use under 10)."""

MAX_INT = 2**63 - 1
"""Largest integer a field may hold (and ``-MAX_INT`` the smallest): what an SQLite INTEGER
and an ``int64`` tensor hold; 2**70 would pass a type check and fail deep inside."""

MISSING: Any = object()
"""Default of ``Fields`` checks: the field must be present."""


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlong, _SHORT.maxstring, _SHORT.maxother = (
    3,
    4,
    40,
    80,
    80,
)
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = _SHORT.maxfrozenset = 6


def show(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a message stays one short line).

    The value is cut before it is written out: a string to its first ``limit`` characters,
    a container to its first few items (``reprlib``), so quoting a value of gigabytes (a YAML
    alias bomb) costs no more than quoting a short one.
    """
    if isinstance(value, str | bytes):
        text = repr(value[: limit + 1])
    else:
        try:
            text = _SHORT.repr(value)
        except ValueError:  # an integer past Python's 4,300-digit limit
            text = f"<an integer of {value.bit_length()} bits>" if isinstance(value, int) else "?"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def decode_text(data: bytes, where: str, error: type[LoadError]) -> str:
    """``data`` as text: UTF-8, or UTF-16/32 as JSON detects them (a byte-order mark, or
    the zero bytes around the first ASCII characters), as ``json.loads`` does for bytes.

    Raises:
        error: the bytes are not text in that encoding (names the line of the first bad byte).
    """
    encoding = json.detect_encoding(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise error(
            f"{where}:{line}: not {encoding.upper()} text (byte {data[e.start]:#04x}): save the "
            "file as UTF-8"
        ) from None


def read_text(path: str | Path, error: type[LoadError], what: str = "file") -> str:
    """The text of file ``path`` (see ``decode_text``).

    Raises:
        error: the file is missing, unreadable, or not text.
    """
    p = Path(path)
    if not p.is_file():
        raise error(f"{what} {str(p)!r} not found")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise error(f"{what} {str(p)!r} cannot be read: {e.strerror or e}") from None
    return decode_text(data, str(p), error)


def json_depth_ok(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists and dicts at most ``limit`` deep (no recursion).

    Level by level, keeping only the containers of each level (a trajectory's long lists of
    token ids cost one comprehension each, not one step each).
    """
    level = [value] if type(value) in (list, dict) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return False
        below: list[Any] = []
        for v in level:
            below += [c for c in (v.values() if type(v) is dict else v) if type(c) in (list, dict)]
        level = below
    return True


def parse_json(text: str, where: str, error: type[LoadError]) -> Any:
    """One JSON document.

    ``NaN`` and ``Infinity`` literals parse (Python writes them); the fields that must be
    finite are checked by the loaders.

    Raises:
        error: not JSON, nested deeper than ``MAX_DEPTH``, or an integer too long to read.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise error(_at(where, f"not valid JSON ({e.msg} at line {e.lineno})")) from None
    except RecursionError:
        raise error(_at(where, f"JSON nested deeper than {MAX_DEPTH} levels")) from None
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        raise error(_at(where, f"unreadable JSON value ({e})")) from None
    if not json_depth_ok(value):
        raise error(_at(where, f"JSON nested deeper than {MAX_DEPTH} levels"))
    return value


def read_json_entries(
    path: str | Path, error: type[LoadError], what: str, single_object: bool = True
) -> list[tuple[str, Any]]:
    """The entries of a JSON list file, or of a JSONL file (one entry a line).

    Args:
        path: the file (``.jsonl``: one JSON value a line, blank lines skipped).
        error: the loader's error class.
        what: what the file holds, for messages (``"task file"``).
        single_object: a JSON file may hold one object instead of a list.

    Returns:
        ``(where, value)`` pairs: ``where`` is ``name:line`` (JSONL) or ``name[index]``.

    Raises:
        error: missing file, not text, not JSON, too deep, or not a list.
    """
    p = Path(path)
    if p.suffix == ".jsonl":
        return [(f"{p.name}:{i}", v) for i, v in read_jsonl(p, error, what, name=p.name)]
    text = read_text(p, error, what)
    data = parse_json(text, p.name, error)
    if isinstance(data, dict) and single_object:
        data = [data]
    if not isinstance(data, list):
        raise error(f"{p.name}: expected a JSON list of entries, got {type(data).__name__}")
    return [(f"{p.name}[{i}]", d) for i, d in enumerate(data)]


def check_unique_ids(
    ids: Iterable[Any], name: str, error: type[LoadError], quote: Callable[[Any], str] = show
) -> None:
    """Raise ``error`` at the first task_id of file ``name`` seen twice (quoted by ``quote``)."""
    seen: set[Any] = set()
    for task_id in ids:
        if task_id in seen:
            raise error(f"{name}: duplicate task_id {quote(task_id)}")
        seen.add(task_id)


def jsonl_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of every non-blank line of JSONL text, split at ``\\n`` only:
    a record's strings may hold U+2028, U+0085 and the other characters ``str.splitlines``
    also splits at."""
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield lineno, line


def read_jsonl(
    path: str | Path,
    error: type[LoadError],
    what: str = "file",
    convert: Callable[[Any], Any] | None = None,
    skipped: list[str] | None = None,
    name: str | None = None,
) -> list[tuple[int, Any]]:
    """The records of a JSONL file: the one reader of every command.

    Text as ``read_text`` reads it (UTF-8, or UTF-16/32), records split by ``jsonl_lines``,
    each parsed by ``parse_json`` (nesting and integer limits) and then by ``convert``.

    Args:
        path: the file.
        error: the loader's error class.
        what: what the file holds, for messages (``"trajectory file"``).
        convert: checks and converts one parsed record; raises ``error`` (a ``LoadError``)
            with a message without the location, which is added here.
        skipped: None: the first bad record raises; a list: each bad record's one-line error
            (``file:line: …``) is appended and the record left out (a report over a run
            still writing its last line).
        name: how messages name the file (default: the path as given).

    Returns:
        ``(line number, record)`` of every record read.

    Raises:
        error: the file is missing, unreadable or not text (even with ``skipped``), or, without
            ``skipped``, a record is malformed: ``<file>:<line>: <what is wrong>``.
    """
    p = Path(path)
    label = str(p) if name is None else name
    out: list[tuple[int, Any]] = []
    for lineno, line in jsonl_lines(read_text(p, error, what)):
        try:
            value = parse_json(line, "", error)
            out.append((lineno, value if convert is None else convert(value)))
        except LoadError as e:
            message = f"{label}:{lineno}: {e}"
            if skipped is None:
                raise error(message) from None
            skipped.append(message)
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -MAX_INT <= v <= MAX_INT


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


class Fields:
    """Type and range checks of one JSON object's fields, raising one error class.

    Each check returns the value (or ``default`` when the field is absent and a default is
    given) and raises ``error("<where>: <field> must be ..., got ...")`` otherwise.

    Args:
        d: the object (must be a dict; ``Fields`` refuses anything else).
        where: ``file:line`` or ``file[index]`` of the object.
        error: the loader's error class.
        prefix: prepended to field names in messages (``"turn 2: "``).
    """

    def __init__(self, d: Any, where: str, error: type[LoadError], prefix: str = "") -> None:
        if not isinstance(d, dict):
            raise error(_at(where, f"{prefix}expected a JSON object, got {type(d).__name__}"))
        self.d, self.where, self.error, self.prefix = d, where, error, prefix

    def fail(self, key: str, problem: str) -> LoadError:
        """The error for field ``key`` (raise it)."""
        return self.error(_at(self.where, f"{self.prefix}{key} {problem}"))

    def _get(self, key: str, default: Any, want: str) -> Any:
        if key in self.d:
            return self.d[key]
        if default is MISSING:
            raise self.fail(key, f"is missing (it must be {want})")
        return default

    def check(self, key: str, ok: Callable[[Any], bool], want: str, default: Any = MISSING) -> Any:
        """Field ``key`` when ``ok(value)``; ``want`` says what it must be."""
        v = self._get(key, default, want)
        if not (key not in self.d and default is not MISSING) and not ok(v):
            raise self.fail(key, f"must be {want}, got {show(v)}")
        return v

    def id(self, key: str, default: Any = MISSING) -> int | str:
        """An identifier: an integer or a non-empty string."""
        return self.check(
            key,
            lambda v: _is_int(v) or (isinstance(v, str) and v.strip() != ""),
            "an integer or a non-empty string",
            default,
        )

    def text(self, key: str, default: Any = MISSING, nonempty: bool = False) -> str:
        """A string (non-empty when ``nonempty``)."""
        want = "a non-empty string" if nonempty else "a string"
        return self.check(
            key, lambda v: isinstance(v, str) and (not nonempty or v.strip() != ""), want, default
        )

    def optional_text(self, key: str) -> str | None:
        """A string or null (absent: None)."""
        return self.check(key, lambda v: v is None or isinstance(v, str), "a string or null", None)

    def flag(self, key: str, default: Any = MISSING) -> bool:
        """A JSON boolean (``true``/``false``; not ``"yes"`` or 1)."""
        return self.check(key, lambda v: isinstance(v, bool), "true or false", default)

    def mapping(self, key: str, default: Any = MISSING) -> dict[str, Any]:
        """A JSON object."""
        return self.check(key, lambda v: isinstance(v, dict), "an object", default)

    def integer(
        self, key: str, lo: int | None = None, hi: int | None = None, default: Any = MISSING
    ) -> int:
        """An integer in [lo, hi] (either bound optional; never past ±``MAX_INT``)."""
        want = "an integer" + _bounds(lo, hi)
        return self.check(
            key,
            lambda v: _is_int(v) and (lo is None or v >= lo) and (hi is None or v <= hi),
            want,
            default,
        )

    def number(
        self,
        key: str,
        lo: float | None = None,
        hi: float | None = None,
        choices: Sequence[float] | None = None,
        default: Any = MISSING,
    ) -> float:
        """A finite number (not a bool, not a string) in [lo, hi] or among ``choices``."""
        want = (
            _either([f"{c:g}" for c in choices])
            if choices is not None
            else "a finite number" + _bounds(lo, hi)
        )

        def ok(v: Any) -> bool:
            if not _is_number(v) or not math.isfinite(v):
                return False
            if choices is not None:
                return v in choices
            return (lo is None or v >= lo) and (hi is None or v <= hi)

        return self.check(key, ok, want, default)

    def one_of(self, key: str, options: Sequence[Any], default: Any = MISSING) -> Any:
        """One of ``options`` (compared by type and value: ``"1"`` is not ``1``)."""
        return self.check(
            key,
            lambda v: any(type(v) is type(o) and v == o for o in options),
            "one of " + ", ".join(map(repr, options)),
            default,
        )

    def items(self, key: str, ok: Callable[[Any], bool], want: str, default: Any = MISSING) -> list:
        """A list whose every item passes ``ok``; the message names the first bad index."""
        v = self.check(key, lambda x: isinstance(x, list), f"a list of {want}", default)
        if key in self.d:
            for i, item in enumerate(v):
                if not ok(item):
                    raise self.fail(f"{key}[{i}]", f"must be {want}, got {show(item)}")
        return v

    def names(
        self, key: str, known: Iterable[str], noun: str = "name", default: Any = MISSING
    ) -> list[str]:
        """A list of names from ``known`` (unknown ones named with the known ones)."""
        allowed = tuple(known)
        v = self.items(key, lambda x: isinstance(x, str), "names", default)
        bad = [x for x in v if x not in allowed]
        if bad:
            raise self.fail(key, f"has unknown {noun}(s) {show(bad)}; known: {', '.join(allowed)}")
        return v


def _either(options: Sequence[str]) -> str:
    """``a, b or c``."""
    return ", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]


def _at(where: str, message: str) -> str:
    """``where: message``, or the message alone when the caller adds the location."""
    return f"{where}: {message}" if where else message


def _bounds(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f" in [{lo:g}, {hi:g}]"
    if lo is not None:
        return f" >= {lo:g}"
    if hi is not None:
        return f" <= {hi:g}"
    return ""
