"""Programmatic evaluators with WebArena semantics, made strict; every one gives a binary reward.

A task's ``eval.eval_types`` lists the checks; the reward is the product of their scores, as in
WebArena (all must pass). Each check also returns a one-line explanation, kept in the
trajectory so a failure can be read later. ``docs/grading.md`` states every rule.

- ``string_match``: the ``exit(message=…)`` answer against ``reference_answers``:
  ``exact_match`` (equal after normalisation), ``must_include`` (every phrase contained at word
  boundaries, and nothing else in the answer but punctuation, a few function words and words
  that restate the intent, so a list of candidates, a hedge or a second value fails, while a
  sentence that restates the question around the value passes), ``fuzzy_match`` (an LLM
  judge when an OpenAI-compatible endpoint is configured, otherwise the deterministic rules
  below: token overlap in both directions for long references, the ``must_include`` rule for
  short ones, and a fixed phrase list for ``N/A``).
- ``url_match``: the final URL against ``reference_url`` (alternatives split by ``|OR|``):
  the final path must equal the reference path or extend it by whole segments (WebArena
  checks plain substring containment, which lets ``/product/12`` accept ``/product/123``),
  and every reference query parameter must be present with the same value.
- ``program_html``: for each ``{url, locator, required_contents}``, open ``url`` (``last`` =
  the final page) in the episode's browser context, evaluate the JS ``locator`` (empty = the
  page's text), and check the contents with exact_match / must_include.
- ``state_match`` (embedded sites): SQL queries on the episode's own site instance, read-only:
  ``state_checks: [{site, sql, params?, expected | must_include | row_count}]``; text the
  agent wrote must not hold a rival value of the same kind (another price, time, …), nor any
  of the check's ``must_exclude`` phrases (known runners-up).

A grader that cannot read the site (a locked or corrupt database, a closed page, a failed
navigation) raises ``EnvError``: the episode is an ``env_error``, retried or dropped, never a
failure to train on. Any other exception is a bug and propagates.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
import unicodedata
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from playwright.async_api import Error as PlaywrightError

from webagent_r1.browser import BrowserError
from webagent_r1.grading.base import EnvError, EvalContext, EvalResult
from webagent_r1.sites.base import UnknownInstanceError
from webagent_r1.tasks.io import TaskError

Check = Callable[[EvalContext], Awaitable[tuple[float, str]]]
Judge = Callable[[str, str, str], Awaitable[bool]]

_FUZZY_JUDGE: Judge | None = None


def set_fuzzy_judge(judge: Judge | None) -> None:
    """Install an LLM judge ``(intent, answer, reference) -> bool`` for fuzzy_match."""
    global _FUZZY_JUDGE
    _FUZZY_JUDGE = judge


def normalize(text: str | None) -> str:
    """Lowercase, strip accents, quotes and punctuation at the ends, collapse whitespace,
    and drop thousands separators in numbers (``$1,234.50`` → ``$1234.50``)."""
    if text is None:
        return ""
    t = unicodedata.normalize("NFKD", str(text))
    t = "".join(c for c in t if not unicodedata.combining(c)).lower()
    t = re.sub(r"(?<=\d),(?=\d{3}\b)", "", t)
    t = re.sub(r"\s+", " ", t).strip()
    return t.strip(" \"'`.,;:!?")


def _as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def exact_match(answer: str | None, reference: str) -> bool:
    """Equal after ``normalize``."""
    return normalize(answer) == normalize(reference)


_WORD = r"[a-z0-9]"


def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    """``phrase`` (normalised) standing alone: not inside a longer word or number, so ``12``
    does not match ``123``, ``12.5`` or ``$112``."""
    body = re.escape(normalize(phrase))
    return re.compile(rf"(?<!{_WORD})(?<!\d[.,]){body}(?!{_WORD})(?![.,]\d)")


def alternatives(p: Any) -> list[str]:
    """A must_include entry's alternatives: a nested list, or ``a |OR| b``."""
    return [str(x) for x in _as_list(p)] if isinstance(p, (list, tuple)) else str(p).split(" |OR| ")


def _find_phrases(text: str, phrases: list[str] | str, mask: str = " ") -> tuple[str, str | None]:
    """Mask every occurrence of each phrase (its first alternative found) in normalised
    ``text`` with ``mask``; return the masked text and the first phrase with no alternative
    found."""
    for p in _as_list(phrases):
        for alt in alternatives(p):
            pat = _phrase_pattern(alt)
            if normalize(alt) and pat.search(text):
                text = pat.sub(mask, text)
                break
        else:
            return text, str(p)
    return text, None


def must_include(text: str | None, phrases: list[str] | str) -> bool:
    """Every phrase (or, for a nested list or ``a |OR| b``, one of its alternatives) is in
    ``text`` at word boundaries. For page and database text; answers use ``answer_includes``."""
    return _find_phrases(normalize(text), phrases)[1] is None


def answer_shown(answer: str | None, texts: Iterable[str]) -> bool:
    """Whether the agent was shown its answer: the normalised answer stands alone (as
    ``must_include`` finds a phrase) in one of ``texts`` (the task's intent and the pages the
    episode showed), or, for a list (parts split at ``,``, ``;`` or `` and ``), each part
    does. False for an empty answer. A flag to read, not a grade: a correct answer that no
    page showed is a guess or a value the agent derived (a count, a sum)."""
    norm = [normalize(t) for t in texts]
    whole = normalize(answer)
    if not whole:
        return False
    if any(_phrase_pattern(whole).search(t) for t in norm):
        return True
    parts = [p for p in (normalize(x) for x in re.split(r",|;|\band\b", whole)) if p]
    return len(parts) > 1 and all(any(_phrase_pattern(p).search(t) for t in norm) for p in parts)


FRAME_WORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "is",
        "are",
        "was",
        "were",
        "it",
        "its",
        "and",
        "both",
        "answer",
        "answers",
        "final",
        "of",
        "at",
        "in",
        "on",
        "to",
        "by",
        "for",
        "from",
        "with",
        "there",
        "this",
        "that",
        "has",
        "have",
        "had",
    }  # fmt: skip
)
"""Words an answer may hold besides the reference values (``The answer is 12``): function
words that can name no candidate. Besides these, only words that restate the task's intent
(``restating_words``) may be left over; anything else makes a must_include answer fail."""

AUXILIARIES: dict[str, str] = {
    "has": "have",
    "had": "have",
    "having": "have",
    "does": "do",
    "did": "do",
    "doing": "do",
    "done": "do",
}
"""Forms of an auxiliary verb read as its base form, so ``X has 3 open issues`` restates ``How
many open issues does X have?``; regular endings are handled by ``_forms``."""

HEDGES = (
    "or",
    "either",
    "maybe",
    "perhaps",
    "possibly",
    "probably",
    "likely",
    "might",
    "could be",
    "not sure",
    "unsure",
    "i think",
    "i believe",
    "i guess",
)
"""Phrases that hedge between candidates; named in the explanation when they sink an answer."""

_TOKEN = re.compile(r"[a-z0-9]+(?:[.:'][a-z0-9]+)*")


def _hedge_in(text: str) -> str | None:
    """The first hedge phrase standing alone in normalised ``text``."""
    return next((h for h in HEDGES if _phrase_pattern(h).search(text)), None)


def _forms(word: str) -> set[str]:
    """The word and what it may be an inflection of, so that ``opens``, ``takes``, ``listed``
    and ``cafes`` restate ``open``, ``take``, ``list`` and ``cafe``: an auxiliary's base form,
    and the word less one regular ending (``-s``, ``-es``, ``-d``, ``-ed``, ``-ing``)."""
    word = AUXILIARIES.get(word, word)
    out = {word}
    for ending in ("s", "es", "d", "ed", "ing"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            out.add(word[: -len(ending)])
    return out


_EXAMPLE = re.compile(
    r"(?<![a-z0-9])(?:like|e\.g\.|eg|such as|for example|for instance)(?![a-z0-9])"
    r".*?(?:[.?!;](?=\s|$)|$)"
)
"""A format example of an intent (``like 412 Water Street.``), to the end of its sentence."""

_CLAUSE_END = re.compile(r"[.?!;:](?=\s|$)")
_CHOICE = re.compile(r"(?<![a-z0-9])(?:or|nor|either|whether)(?![a-z0-9])")


def _restating_clauses(intent: str | None) -> list[list[str]]:
    """The token sequences of the intent's clauses that may be restated: format examples
    removed, and every clause that offers a choice (``or``: ``Answer yes or no``, ``the
    Velocita Poles or the Summit Headlamp``) dropped, since its words are candidates."""
    text = _EXAMPLE.sub(" . ", normalize(intent))
    clauses = (c for c in _CLAUSE_END.split(text) if not _CHOICE.search(c))
    return [tokens for c in clauses if (tokens := _TOKEN.findall(c))]


def restating_words(intent: str | None) -> frozenset[str]:
    """The intent's words an answer may use to restate the question beside its value (``The
    street address of Harbor Cafe is 412 Water Street`` for ``What is the street address of
    Harbor Cafe?``), with their possible base forms (``_forms``). Words of a format example or
    of a clause offering a choice are left out: they are, or may be, other candidates."""
    return frozenset(f for tokens in _restating_clauses(intent) for w in tokens for f in _forms(w))


_MASK = "\x00"
"""Stands where a reference phrase was taken out of an answer: words on either side of it
are not neighbours."""


def _restates(
    tokens: list[str], i: int, allowed: frozenset[str], beside: set[tuple[str, str, int]]
) -> bool:
    """Whether ``tokens[i]`` restates the intent: a frame word, or one of its words; a word
    with a digit (``2023``, ``09:15``, the ``1`` of ``within 1 km``) only beside a word it
    stands beside in the intent (``beside``: (number, word form, side) triples), so that an
    intent's number on its own, which may be a rival candidate (``8, 1`` for ``How many
    schools are within 1 km …?``), fails."""
    w = tokens[i]
    if w in FRAME_WORDS:
        return True
    if not _forms(w) & allowed:
        return False
    if not any(c.isdigit() for c in w):
        return True
    before = i > 0 and any((w, f, -1) in beside for f in _forms(tokens[i - 1]))
    after = i + 1 < len(tokens) and any((w, f, 1) in beside for f in _forms(tokens[i + 1]))
    return before or after


def answer_includes(
    answer: str | None, phrases: list[str] | str, intent: str | None = None
) -> tuple[bool, str]:
    """must_include for an agent's answer, stricter than WebArena's substring test: every
    phrase is present at word boundaries and what is left is only punctuation,
    ``FRAME_WORDS`` and words that restate ``intent`` (``restating_words``), so a list of
    candidates, a hedge, the reference inside a longer answer, or a second value of the same
    kind (``rival_value``) fails, while ``The street address of Harbor Cafe is 412 Water
    Street`` passes for ``What is the street address of Harbor Cafe?``.

    Returns:
        (passed, why): ``why`` says what failed (empty when passed).
    """
    rest, missing = _find_phrases(normalize(answer), phrases, f" {_MASK} ")
    if missing is not None:
        return False, f"lacks {missing!r}"
    hedge = _hedge_in(rest)
    if hedge is not None:
        return False, f"hedges ({hedge!r})"
    rival = rival_value(rest, phrases)
    if rival is not None:
        return False, f"names another candidate ({rival!r})"
    allowed = restating_words(intent)
    beside = {
        (n, f, side)
        for tokens in _restating_clauses(intent)
        for a, b in zip(tokens, tokens[1:], strict=False)
        for n, other, side in ((a, b, 1), (b, a, -1))
        if any(c.isdigit() for c in n)
        for f in _forms(other)
    }
    extra = []
    for run in rest.split(_MASK):
        tokens = _TOKEN.findall(run)
        extra += [w for i, w in enumerate(tokens) if not _restates(tokens, i, allowed, beside)]
    if extra:
        return False, f"says more than the reference ({' '.join(extra[:6])!r})"
    return True, ""


NA_REFERENCES = frozenset({"n/a", "na", "none", "not applicable"})
"""References that mean the task has no answer (WebArena's unachievable tasks)."""

NA_ANSWERS = frozenset(
    {
        "n/a",
        "na",
        "none",
        "not applicable",
        "not available",
        "not found",
        "no answer",
        "unanswerable",
        "cannot be determined",
        "it cannot be determined",
        "there is none",
        "there is no such information",
        "this information is not available",
        "the information is not available",
        "it does not exist",
        "does not exist",
        "unknown",
    }
)
"""Whole answers (normalised) that say a task has no answer; nothing else passes an N/A
reference (a bare "not" inside an answer is no such statement)."""

LONG_TEXT_WORDS = 8
"""A reference of at least this many words is long text, graded by overlap in both
directions; a shorter one is a value, graded like must_include."""

FUZZY_OVERLAP = 0.8
"""Share of the reference's words the answer must hold, and of the answer's words the
reference must hold, for a long-text fuzzy match."""


def _overlap(answer: list[str], reference: list[str]) -> tuple[float, float]:
    """(recall, precision) of answer tokens against reference tokens, as multisets."""
    common = sum((Counter(answer) & Counter(reference)).values())
    return common / max(1, len(reference)), common / max(1, len(answer))


def fuzzy_match_normalised(answer: str | None, reference: str, intent: str | None = None) -> bool:
    """Deterministic stand-in for WebArena's LLM judge.

    ``N/A`` references need an answer from ``NA_ANSWERS``; a long-text reference (at least
    ``LONG_TEXT_WORDS`` words) needs ``FUZZY_OVERLAP`` of its words in the answer and as large
    a share of the answer's words in it, and no hedge; a short one is graded like
    must_include by ``answer_includes`` (words restating ``intent`` allowed).
    """
    a, r = normalize(answer), normalize(reference)
    if r in NA_REFERENCES:
        return a in NA_ANSWERS
    ref_tokens = _TOKEN.findall(r)
    if len(ref_tokens) < LONG_TEXT_WORDS:
        return answer_includes(answer, [reference], intent)[0]
    if _hedge_in(a) is not None and _hedge_in(r) is None:
        return False
    recall, precision = _overlap(_TOKEN.findall(a), ref_tokens)
    return recall >= FUZZY_OVERLAP and precision >= FUZZY_OVERLAP


def reference_failure(
    answer: str | None, kind: str, ref: Any, task_id: Any = "?", intent: str | None = None
) -> str | None:
    """One ``reference_answers`` entry against an answer, by the deterministic rules (no LLM
    judge): None if it passes, else why not.

    Args:
        answer: the agent's answer text.
        kind: ``exact_match``, ``must_include`` or ``fuzzy_match``.
        ref: the entry's reference (a string, or phrases for must_include and fuzzy_match).
        task_id: named in the error.
        intent: the task's intent, whose words a must_include answer may restate.

    Raises:
        TaskError: an unknown kind.
    """
    if kind == "exact_match":
        return None if exact_match(answer, ref) else f"answer {answer!r} != {ref!r}"
    if kind == "must_include":
        ok, why = answer_includes(answer, ref, intent)
        return None if ok else f"answer {answer!r} {why} (must include {ref!r})"
    if kind == "fuzzy_match":
        for r in _as_list(ref):
            if not fuzzy_match_normalised(answer, str(r), intent):
                return f"answer {answer!r} !~ {r!r}"
        return None
    raise TaskError(f"task {task_id}: unknown reference_answers kind {kind!r}")


async def _string_check(ctx: EvalContext, kind: str, ref: Any) -> str | None:
    """One reference_answers entry against the answer: None if it passes, else why not
    (fuzzy_match by the LLM judge when one is installed, else ``reference_failure``)."""
    answer = ctx.answer
    if kind == "fuzzy_match" and _FUZZY_JUDGE is not None:
        for r in _as_list(ref):
            if not await _FUZZY_JUDGE(ctx.task.intent, answer or "", str(r)):
                return f"answer {answer!r} !~ {r!r}"
        return None
    return reference_failure(answer, kind, ref, ctx.task.task_id, ctx.task.intent)


async def check_string_match(ctx: EvalContext) -> tuple[float, str]:
    refs = ctx.task.eval.get("reference_answers") or {}
    if ctx.answer is None:
        return 0.0, "string_match: the agent gave no answer (no exit)"
    for kind, ref in refs.items():
        why = await _string_check(ctx, kind, ref)
        if why is not None:
            return 0.0, f"string_match: {why}"
    return 1.0, "string_match: ok"


def _url_parts(url: str) -> tuple[str, dict[str, list[str]]]:
    parts = urlsplit(unquote(url))
    path = parts.netloc + parts.path.rstrip("/")
    return path, parse_qs(parts.query)


def url_matches(final_url: str, reference: str) -> bool:
    """url_match: the final path equals the reference path or extends it by whole segments,
    and the reference query parameters are all present (values equal)."""
    pred_path, pred_q = _url_parts(final_url)
    ref_path, ref_q = _url_parts(reference)
    # Containment at path-segment boundaries: /product/12 must not accept /product/123.
    if not (pred_path == ref_path or (pred_path + "/").startswith(ref_path + "/")):
        return False
    return all(set(v) <= set(pred_q.get(k, [])) for k, v in ref_q.items())


async def check_url_match(ctx: EvalContext) -> tuple[float, str]:
    ref = ctx.task.eval.get("reference_url") or ""
    alts = [ctx.backend.resolve_url(r.strip()) for r in ref.split(" |OR| ") if r.strip()]
    if not alts:
        raise TaskError("url_match needs eval.reference_url")
    final = ctx.session.page.url if ctx.session is not None else ctx.url
    if any(url_matches(final, r) for r in alts):
        return 1.0, "url_match: ok"
    return 0.0, f"url_match: final URL {final} does not match {ref}"


VALUE_KINDS: dict[str, re.Pattern[str]] = {
    "money": re.compile(r"(?<![a-z0-9])\$\d+(?:\.\d+)?(?![a-z0-9])"),
    "clock time": re.compile(r"(?<![a-z0-9:])\d{1,2}:\d{2}(?![0-9:])"),
    "duration": re.compile(r"(?<![a-z0-9.])(?:\d+ ?h(?: \d+ ?min)?|\d+ ?min)(?![a-z0-9])"),
    "distance": re.compile(r"(?<![a-z0-9.])\d+(?:\.\d+)? ?(?:km|m)(?![a-z0-9])"),
}
"""Kinds of value a phrase can be; normalised text matched whole by one of these."""


def rival_value(text: str | None, phrases: list[str] | str) -> str | None:
    """A value in ``text`` of the same kind as a phrase but different from every phrase (a
    second price when the reference is one price), or None.

    For text the agent wrote (a comment, a post), where ``must_include`` alone would pass a
    list of candidates.
    """
    t = normalize(text)
    wanted = [normalize(x) for p in _as_list(phrases) for x in alternatives(p)]
    for pat in VALUE_KINDS.values():
        if not any(pat.fullmatch(w) for w in wanted):
            continue
        for m in pat.finditer(t):
            if m.group(0) not in wanted:
                return m.group(0)
    return None


def named_excluded(text: str | None, phrases: list[str] | str, exclude: list[str]) -> str | None:
    """The first ``exclude`` phrase (a known rival candidate: a runner-up place) named in
    ``text`` outside the ``phrases`` it must include, or None. Masking the phrases first keeps
    a rival whose name is part of the right answer's name from failing the right answer."""
    rest, _ = _find_phrases(normalize(text), phrases)
    return next((x for x in exclude if normalize(x) and _phrase_pattern(x).search(rest)), None)


async def check_program_html(ctx: EvalContext) -> tuple[float, str]:
    specs = ctx.task.eval.get("program_html") or []
    if not specs:
        raise TaskError("program_html needs eval.program_html entries")
    for spec in specs:
        url = spec.get("url", "last")
        locator = spec.get("locator", "") or ""
        page = ctx.session.page
        temp = None
        if url != "last" and url.startswith("func:"):
            raise TaskError(f"program_html url helper {url!r} is only for WebArena sites")
        try:
            if url != "last":  # a page of its own, closed however it ends: the agent's tab
                temp = await ctx.session.context.new_page()  # stays as it was
                await temp.goto(ctx.backend.resolve_url(url), wait_until="domcontentloaded")
                page = temp
            if not locator.strip():
                content = await page.evaluate("() => document.body.innerText")
            elif locator.startswith(("document.", "[...document")):
                content = await page.evaluate(
                    f"() => {{ try {{ return {locator}; }} catch (e) {{ return ''; }} }}"
                )
            else:
                raise TaskError(f"program_html locator {locator!r} must be a JS expression")
        finally:
            if temp is not None:
                await temp.close()
        content = "" if content is None else str(content)
        req = spec.get("required_contents") or {}
        if "exact_match" in req and not exact_match(content, req["exact_match"]):
            return 0.0, f"program_html: {locator or 'page'} is {content[:80]!r}"
        if "must_include" in req and not must_include(content, req["must_include"]):
            return 0.0, f"program_html: {locator or 'page'} lacks {req['must_include']!r}"
    return 1.0, "program_html: ok"


def _state_db(ctx: EvalContext, site: str) -> sqlite3.Connection:
    path_fn = getattr(ctx.backend, "instance_db_path", None)
    if path_fn is None or ctx.instance_id is None:
        raise TaskError("state_match needs an embedded site instance")
    try:
        path = path_fn(site, ctx.instance_id)
    except UnknownInstanceError as e:  # the instance is gone (reaped, or the sites restarted)
        raise EnvError(f"state_match: the episode's site instance is gone: {e}") from e
    conn = sqlite3.connect(_read_only_uri(path), uri=True)
    conn.row_factory = None
    return conn


def _read_only_uri(path: str | Path) -> str:
    """A read-only SQLite URI of ``path`` (``?``, ``#`` and ``%`` in it percent-encoded)."""
    return Path(path).resolve().as_uri() + "?mode=ro"


SIDE_EFFECTS = "state_match: side effects:"
"""How the explanation starts when a write budget failed the episode (``report.failures``)."""
BOOKKEEPING_TABLES = frozenset({"sessions", "site_clock"})
"""Tables an episode writes without acting on the site (its login session, the instance's
clock); never side effects."""
EVENT_ROWS = {"notes": "system = 1"}
"""Rows a site writes to log a change it makes elsewhere (GitLab's "closed", "assigned to @x"
notes): the change itself is counted in its own table, so these are left out of the diff
(assigning the wrong person and then the right one is one changed issue, not two notes)."""


def _footprint(ctx: EvalContext) -> dict[str, int]:
    """Rows the episode changed, per ``site.table``: the primary keys (rowids where a table has
    none) whose row differs between the instance and the pristine database (inserted, updated
    or deleted; a row changed and changed back is no change), bookkeeping left out.
    Sites sharing one database count once, under the first of the task's sites."""
    pristine_fn = getattr(ctx.backend, "pristine_db_path", None)
    if pristine_fn is None:
        raise TaskError("a write budget needs a backend with pristine databases")
    out: dict[str, int] = {}
    seen: set[str] = set()
    for site in ctx.task.sites:
        pristine = str(pristine_fn(site))
        if pristine in seen:
            continue
        seen.add(pristine)
        conn = _state_db(ctx, site)
        try:
            conn.execute("ATTACH DATABASE ? AS pristine", (_read_only_uri(pristine),))
            tables = {
                schema: {
                    r[0]
                    for r in conn.execute(
                        f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table' "
                        "AND name NOT LIKE 'sqlite_%'"
                    )
                }
                for schema in ("main", "pristine")
            }
            for table in sorted(tables["main"] | tables["pristine"]):
                if table in BOOKKEEPING_TABLES:
                    continue
                q = f'"{table}"'
                if table not in tables["main"] or table not in tables["pristine"]:
                    # created or dropped by the episode: every row of it changed
                    schema = "main" if table in tables["main"] else "pristine"
                    n = conn.execute(f"SELECT COUNT(*) FROM {schema}.{q}").fetchone()[0]
                    if n:
                        out[f"{site}.{table}"] = int(n)
                    continue
                info = conn.execute(f"PRAGMA main.table_info({q})").fetchall()
                pk = [f'"{r[1]}"' for r in sorted(info, key=lambda r: r[5]) if r[5] > 0]
                key = ", ".join(pk) if pk else "_rowid"
                cols = "*" if pk else "rowid AS _rowid, *"
                where = f" WHERE NOT ({EVENT_ROWS[table]})" if table in EVENT_ROWS else ""
                n = conn.execute(
                    f"SELECT COUNT(*) FROM (SELECT DISTINCT {key} FROM ("
                    f"SELECT * FROM (SELECT {cols} FROM main.{q}{where} "
                    f"EXCEPT SELECT {cols} FROM pristine.{q}{where}) "
                    f"UNION ALL SELECT * FROM (SELECT {cols} FROM pristine.{q}{where} "
                    f"EXCEPT SELECT {cols} FROM main.{q}{where})))"
                ).fetchone()[0]
                if n:
                    out[f"{site}.{table}"] = int(n)
        finally:
            conn.close()
    return out


def _side_effects(ctx: EvalContext, writes: dict[str, int]) -> str | None:
    """What the episode changed beyond its write budget, or None when it stayed within."""
    over = [
        f"{n} row{'s' if n != 1 else ''} of {key} (the task changes at most {writes.get(key, 0)})"
        for key, n in _footprint(ctx).items()
        if n > writes.get(key, 0)
    ]
    return "; ".join(over) or None


async def check_state_match(ctx: EvalContext) -> tuple[float, str]:
    # SQLite reads block: off the event loop, which steps the other episodes meanwhile
    return await asyncio.to_thread(_state_match, ctx)


def _state_match(ctx: EvalContext) -> tuple[float, str]:
    checks = ctx.task.eval.get("state_checks") or []
    if not checks:
        raise TaskError("state_match needs eval.state_checks")
    writes = ctx.task.eval.get("writes")
    if writes is not None:
        extra = _side_effects(ctx, writes)
        if extra is not None:
            return 0.0, f"{SIDE_EFFECTS} {extra}"
    for c in checks:
        site = c.get("site") or (ctx.task.sites[0] if ctx.task.sites else "")
        conn = _state_db(ctx, site)
        try:
            rows = conn.execute(c["sql"], c.get("params", [])).fetchall()
        finally:
            conn.close()
        desc = c.get("description") or c["sql"]
        if "row_count" in c:
            if len(rows) != int(c["row_count"]):
                return 0.0, f"state_match: {desc}: {len(rows)} rows, want {c['row_count']}"
            continue
        value = rows[0][0] if rows and rows[0] else None
        if "expected" in c:
            exp = c["expected"]
            ok = (
                abs(float(value) - float(exp)) < 1e-6
                if isinstance(exp, (int, float)) and isinstance(value, (int, float))
                else normalize(str(value)) == normalize(str(exp))
            )
            if not ok:
                return 0.0, f"state_match: {desc}: got {value!r}, want {exp!r}"
        if "must_include" in c:
            text = str(value or "")
            if not must_include(text, c["must_include"]):
                return 0.0, f"state_match: {desc}: {value!r} lacks {c['must_include']!r}"
            rival = rival_value(text, c["must_include"])
            if rival is not None:
                return 0.0, f"state_match: {desc}: {value!r} also names {rival!r}"
            named = named_excluded(text, c["must_include"], c.get("must_exclude") or [])
            if named is not None:
                return 0.0, f"state_match: {desc}: {value!r} also names {named!r}"
    return 1.0, "state_match: ok"


CHECKS: dict[str, Check] = {
    "string_match": check_string_match,
    "url_match": check_url_match,
    "program_html": check_program_html,
    "state_match": check_state_match,
}


_FAULTS: dict[type[BaseException], str] = {
    sqlite3.Error: "database fault",
    PlaywrightError: "browser fault",
    BrowserError: "browser fault",
    OSError: "file fault",
}
"""Exceptions that mean the grader could not read the site, not that the agent failed."""


async def evaluate(ctx: EvalContext) -> EvalResult:
    """Run every check in ``ctx.task.eval['eval_types']``; reward = product of the scores.

    Raises:
        EnvError: a check could not read the site (database locked or corrupt, page closed,
            navigation failed): the episode is an ``env_error``, never a reward of 0.
        TaskError: the task's eval spec cannot be run (a bug in the task, not the agent's
            failure).
    """
    types_ = ctx.task.eval.get("eval_types") or []
    if not types_:
        raise TaskError(f"task {ctx.task.task_id} has no eval_types")
    notes = []
    reward = 1.0
    for t in types_:
        fn = CHECKS.get(t)
        if fn is None:
            raise TaskError(
                f"task {ctx.task.task_id}: unknown eval type {t!r}; known: {', '.join(CHECKS)}"
            )
        try:
            score, note = await fn(ctx)
        except tuple(_FAULTS) as e:
            what = next(v for k, v in _FAULTS.items() if isinstance(e, k))
            raise EnvError(f"task {ctx.task.task_id}: {t}: {what}: {e}") from e
        notes.append(note)
        reward *= score
        if reward == 0.0:
            break
    shown = None
    if "string_match" in types_ and ctx.answer is not None:
        shown = answer_shown(ctx.answer, ctx.shown)
        if reward == 1.0 and not shown:  # said where a reader of the episode looks
            notes.append("the answer stood on no page the agent was shown")
    return EvalResult(reward, "; ".join(notes), answer_shown=shown)
