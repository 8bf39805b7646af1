"""Programmatic evaluators with WebArena semantics; every one gives a binary reward.

A task's ``eval.eval_types`` lists the checks; the reward is the product of their scores, as in
WebArena (all must pass). Each check also returns a one-line explanation, kept in the
trajectory so a failure can be read later.

- ``string_match``: the ``exit(message=…)`` answer against ``reference_answers``:
  ``exact_match`` (equal after normalisation), ``must_include`` (every phrase contained),
  ``fuzzy_match`` (an LLM judge when an OpenAI-compatible endpoint is configured, otherwise the
  deterministic normaliser below: equal or containing after normalisation).
- ``url_match``: the final URL against ``reference_url`` (alternatives split by ``|OR|``):
  the final path must equal the reference path or extend it by whole segments (WebArena
  checks plain substring containment, which lets ``/product/12`` accept ``/product/123``),
  and every reference query parameter must be present with the same value.
- ``program_html``: for each ``{url, locator, required_contents}``, open ``url`` (``last`` =
  the final page) in the episode's browser context, evaluate the JS ``locator`` (empty = the
  page's text), and check the contents with exact_match / must_include.
- ``state_match`` (embedded sites): SQL queries on the episode's own site instance, read-only:
  ``state_checks: [{site, sql, params?, expected | must_include | row_count}]``.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from webagent_r1.env import EvalContext, EvalResult

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


def must_include(answer: str | None, phrases: list[str] | str) -> bool:
    """Every phrase (or, for a nested list, any of its alternatives) is in the answer."""
    a = normalize(answer)
    for p in _as_list(phrases):
        alts = _as_list(p) if isinstance(p, (list, tuple)) else str(p).split(" |OR| ")
        if not any(normalize(x) in a for x in alts):
            return False
    return True


def fuzzy_match_normalised(answer: str | None, reference: str) -> bool:
    """Deterministic stand-in for WebArena's LLM judge: equal, or one contains the other,
    after normalisation; ``N/A`` references need an answer that says so."""
    a, r = normalize(answer), normalize(reference)
    if r in ("n/a", "na", "none"):
        return a in ("n/a", "na", "none", "") or "not" in a.split()
    return bool(a) and (a == r or r in a)


async def check_string_match(ctx: EvalContext) -> tuple[float, str]:
    refs = ctx.task.eval.get("reference_answers") or {}
    if ctx.answer is None:
        return 0.0, "string_match: the agent gave no answer (no exit)"
    for kind, ref in refs.items():
        if kind == "exact_match":
            if not exact_match(ctx.answer, ref):
                return 0.0, f"string_match: answer {ctx.answer!r} != {ref!r}"
        elif kind == "must_include":
            if not must_include(ctx.answer, ref):
                return 0.0, f"string_match: answer {ctx.answer!r} lacks one of {ref!r}"
        elif kind == "fuzzy_match":
            for r in _as_list(ref):
                ok = (
                    await _FUZZY_JUDGE(ctx.task.intent, ctx.answer, str(r))
                    if _FUZZY_JUDGE is not None
                    else fuzzy_match_normalised(ctx.answer, str(r))
                )
                if not ok:
                    return 0.0, f"string_match: answer {ctx.answer!r} !~ {r!r}"
        else:
            raise ValueError(f"unknown reference_answers kind {kind!r}")
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
        raise ValueError("url_match needs eval.reference_url")
    final = ctx.session.page.url if ctx.session is not None else ctx.url
    if any(url_matches(final, r) for r in alts):
        return 1.0, "url_match: ok"
    return 0.0, f"url_match: final URL {final} does not match {ref}"


async def check_program_html(ctx: EvalContext) -> tuple[float, str]:
    specs = ctx.task.eval.get("program_html") or []
    if not specs:
        raise ValueError("program_html needs eval.program_html entries")
    for spec in specs:
        url = spec.get("url", "last")
        locator = spec.get("locator", "") or ""
        page = ctx.session.page
        temp = None
        if url != "last":
            if url.startswith("func:"):
                raise ValueError(f"program_html url helper {url!r} is only for WebArena sites")
            temp = await ctx.session.context.new_page()
            await temp.goto(ctx.backend.resolve_url(url), wait_until="domcontentloaded")
            page = temp
        try:
            if not locator.strip():
                content = await page.evaluate("() => document.body.innerText")
            elif locator.startswith(("document.", "[...document")):
                content = await page.evaluate(
                    f"() => {{ try {{ return {locator}; }} catch (e) {{ return ''; }} }}"
                )
            else:
                raise ValueError(f"program_html locator {locator!r} must be a JS expression")
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
        raise ValueError("state_match needs an embedded site instance")
    path = path_fn(site, ctx.instance_id)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = None
    return conn


async def check_state_match(ctx: EvalContext) -> tuple[float, str]:
    checks = ctx.task.eval.get("state_checks") or []
    if not checks:
        raise ValueError("state_match needs eval.state_checks")
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
        if "must_include" in c and not must_include(str(value or ""), c["must_include"]):
            return 0.0, f"state_match: {desc}: {value!r} lacks {c['must_include']!r}"
    return 1.0, "state_match: ok"


CHECKS: dict[str, Check] = {
    "string_match": check_string_match,
    "url_match": check_url_match,
    "program_html": check_program_html,
    "state_match": check_state_match,
}


async def evaluate(ctx: EvalContext) -> EvalResult:
    """Run every check in ``ctx.task.eval['eval_types']``; reward = product of the scores.

    A malformed eval spec is reported in the explanation with reward 0 (never a crash of the
    episode), so one broken task cannot stop a training run.
    """
    types_ = ctx.task.eval.get("eval_types") or []
    if not types_:
        return EvalResult(0.0, "task has no eval_types")
    notes = []
    reward = 1.0
    for t in types_:
        fn = CHECKS.get(t)
        if fn is None:
            return EvalResult(0.0, f"unknown eval type {t!r}; known: {', '.join(CHECKS)}")
        try:
            score, note = await fn(ctx)
        except (ValueError, KeyError, sqlite3.Error) as e:
            score, note = 0.0, f"{t}: evaluator error: {e}"
        notes.append(note)
        reward *= score
        if reward == 0.0:
            break
    return EvalResult(reward, "; ".join(notes))
