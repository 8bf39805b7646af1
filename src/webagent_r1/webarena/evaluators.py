"""WebArena's evaluators, reimplemented with its exact semantics: the reward of a WebArena(-Lite)
episode.

The reward is the product of the scores of ``eval.eval_types`` (all must pass), in order.
These follow WebArena-Lite's evaluators (VAB-WebArena-Lite, as packaged by BrowserGym), not
the stricter embedded-suite evaluators of ``tasks/evaluators.py``, so that scores are
comparable with published WebArena-Lite numbers:

- ``string_match``: the ``exit(message=…)`` answer, cleaned (trimmed, one pair of enclosing
  quotes removed, lowercased), against ``reference_answers``:

  * ``exact_match``: equal after cleaning;
  * ``must_include``: every phrase is a substring; when the list has one phrase of one
    character (``"0"``, ``"2"``), it must be a whole token (``word_tokenize``), so ``"2"``
    does not pass ``"12"``;
  * ``fuzzy_match``: a list: the LLM judge must call the answer "correct" for every phrase;
    ``"N/A"``: the answer is ``N/A``, or else the judge must find the agent's reason for
    giving up the same as ``eval.string_note`` (WebArena's ``ua_match``).

- ``url_match``: the final URL (trailing ``/`` dropped) against ``reference_url``
  (alternatives split by `` |OR| ``): some reference's host+path must be a *substring* of the
  final host+path, and for every query parameter of the references, one of the references'
  values must be among the final URL's values (WebArena's "GOLD in PRED" rule; queries are
  decoded, paths are not).
- ``program_html``: for each ``{url, locator, required_contents}``: ``url`` is ``last`` (the
  page the episode ended on), a URL (opened in that same tab, then up to ``settle_s`` for the
  network to go idle; WebArena sleeps 3 s), or ``func:helper(…)`` giving a URL. ``locator`` is
  empty (the page's full HTML), a JS expression starting with ``document.`` or
  ``[...document.`` (its value as Python's ``str``; ``""`` when it throws), ``lambda:`` + a JS
  function (nothing found fails the task), or ``func:helper(__page__, …)``. The selected
  text must then satisfy ``exact_match``, ``must_include`` (each item may list alternatives
  with `` |OR| ``; no tokenising) or ``fuzzy_match`` (the items joined with ``", "``, judged).

Placeholders (``__SHOPPING__`` …) anywhere in the eval spec become the sites' URLs first.

Known differences from WebArena: an episode that ended without ``exit`` fails
``string_match`` at once (WebArena scores its "Early stop" message, which never matches); a
``must_include`` given as one string (task 81) is read as a one-phrase list (WebArena asserts
a list); ``word_tokenize`` approximates NLTK's tokenizer without its sentence splitter (it
only matters for one-character references); an unknown judge verdict or a helper that cannot
reach the site raises an ``EnvError`` (the episode is an env error) where WebArena crashes.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from webagent_r1.browser import BrowserCrashedError
from webagent_r1.config import ConfigError
from webagent_r1.env import EnvError, EvalContext, EvalResult
from webagent_r1.webarena.helpers import call_helper
from webagent_r1.webarena.judge import Judge, JudgeNotConfiguredError, not_configured_message
from webagent_r1.webarena.sites import WebArenaSites

OR = " |OR| "

# --------------------------------------------------------------------------------------
# Strings
# --------------------------------------------------------------------------------------


def clean_answer(answer: str) -> str:
    """Trim, drop one pair of enclosing ``'…'`` or ``"…"``, lowercase (WebArena's rule)."""
    answer = answer.strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "'\"":
        answer = answer[1:-1]
    elif answer in ("'", '"'):  # WebArena's startswith/endswith test sees one quote as a pair
        answer = ""
    return answer.lower()


def exact_match(ref: str, pred: str) -> bool:
    """Equal after ``clean_answer`` of both."""
    return clean_answer(pred) == clean_answer(ref)


# An approximation of NLTK's ``word_tokenize`` (the improved Treebank rules); punkt's sentence
# splitting is approximated by splitting a period off a word before whitespace or the end.
_TOKEN_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), r)
    for p, r in (
        (r'^"', " `` "),
        (r"(``)", r" \1 "),
        (r"([ \(\[{<])(\"|'{2})", r"\1 `` "),
        (r"([:,])([^\d])", r" \1 \2"),
        (r"([:,])$", r" \1 "),
        (r"\.{2,}", r" \g<0> "),
        (r"[;@#$%&]", r" \g<0> "),
        (r"([^.])(\.)([\]\)}>\"']*)(?=\s|$)", r"\1 \2\3 "),
        (r"[?!]", r" \g<0> "),
        (r"([^'])' ", r"\1 ' "),
        (r"[*]", r" \g<0> "),
        (r"[\]\[\(\)\{\}<>]", r" \g<0> "),
        (r"--", r" -- "),
        (r'"', " '' "),
        (r"(\S)('')", r"\1 \2 "),
        (r"([^' ])('[sS]|'[mM]|'[dD]|') ", r"\1 \2 "),
        (r"([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ", r"\1 \2 "),
    )
)


def word_tokenize(text: str) -> list[str]:
    """Split ``text`` into words and punctuation like NLTK's ``word_tokenize`` (approximately).

    >>> word_tokenize("there are 2, not 12 (or $3).")
    ['there', 'are', '2', ',', 'not', '12', '(', 'or', '$', '3', ')', '.']
    """
    t = f" {text} "
    for pattern, repl in _TOKEN_RULES:
        t = pattern.sub(repl, t)
    return t.split()


def must_include(ref: str, pred: str, tokenize: bool = False) -> bool:
    """``ref`` is in ``pred`` after cleaning both; with ``tokenize`` and a one-character
    ``ref``, it must be one of ``pred``'s tokens (so ``"0"`` does not pass ``"10"``)."""
    clean_ref, clean_pred = clean_answer(ref), clean_answer(pred)
    if tokenize and len(clean_ref) == 1 and len(word_tokenize(clean_ref)) == 1:
        return clean_ref in word_tokenize(clean_pred)
    return clean_ref in clean_pred


def _need_judge(judge: Judge | None) -> Judge:
    if judge is None:
        raise JudgeNotConfiguredError(not_configured_message())
    return judge


async def string_match(
    answer: str | None, ev: dict[str, Any], intent: str, judge: Judge | None
) -> tuple[float, str]:
    """WebArena's ``StringEvaluator``: (score, explanation)."""
    if answer is None:
        return 0.0, "string_match: the agent gave no answer (no exit)"
    pred = clean_answer(answer)
    score = 1.0
    for kind, value in (ev.get("reference_answers") or {}).items():
        if kind == "exact_match":
            score *= exact_match(str(value), pred)
        elif kind == "must_include":
            value = [value] if isinstance(value, str) else value  # one string in task 81
            for phrase in value:
                score *= must_include(str(phrase), pred, tokenize=len(value) == 1)
        elif kind == "fuzzy_match" and value == "N/A":
            # An unachievable task: "N/A" itself passes; otherwise the reason must match.
            score *= exact_match("N/A", pred)
            if score != 1.0:  # WebArena overwrites the score here, it does not multiply
                note = str(ev.get("string_note") or "")
                score = float(await _need_judge(judge).ua_match(pred, note, intent))
        elif kind == "fuzzy_match":
            for reference in value:
                if score == 0.0:
                    break  # stays 0 whatever the judge says: save the call
                score *= await _need_judge(judge).fuzzy_match(pred, str(reference), intent)
        else:
            raise ValueError(f"unknown reference_answers kind {kind!r}")
    refs = ev.get("reference_answers")
    verdict = "ok" if score == 1.0 else f"answer {answer!r} does not match {refs!r}"
    return score, f"string_match: {verdict}"


# --------------------------------------------------------------------------------------
# URLs
# --------------------------------------------------------------------------------------


def _parse_url(url: str) -> tuple[str, dict[str, list[str]]]:
    parts = urlparse(url)
    return parts.netloc + parts.path, parse_qs(parts.query)


def url_match(page_url: str, reference_url: str, url_note: str | None = None) -> float:
    """WebArena's ``URLEvaluator`` ("GOLD in PRED"): 1.0 when the final URL matches.

    >>> url_match("http://s/f/books/12/x?sort=new", "http://s/f/books |OR| http://s/f/art")
    1.0

    Raises:
        ValueError: an unknown ``url_note`` rule.
    """
    rule = url_note or "GOLD in PRED"
    if rule != "GOLD in PRED":
        raise ValueError(f"unknown url_note matching rule {rule!r}")
    pred_base, pred_query = _parse_url(page_url.rstrip("/"))
    ref_bases: list[str] = []
    ref_queries: dict[str, set[str]] = {}
    for ref in reference_url.split(OR):
        base, query = _parse_url(ref.rstrip("/"))
        ref_bases.append(base)
        for k, values in query.items():
            ref_queries.setdefault(k, set()).update(values)
    # Substring containment, as WebArena (so a reference /f/books also accepts /f/bookshelf).
    base_ok = any(b in pred_base for b in ref_bases)
    query_ok = all(any(v in pred_query.get(k, []) for v in vs) for k, vs in ref_queries.items())
    return float(base_ok and query_ok)


# --------------------------------------------------------------------------------------
# Page contents
# --------------------------------------------------------------------------------------


async def _open(page: Page, url: str, settle_s: float) -> None:
    """Load ``url`` in ``page`` and let its scripts settle (GitLab renders client-side)."""
    try:
        await page.goto(url, wait_until="load")
    except PlaywrightError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise EnvError(f"program_html could not open {url}: {first}") from e
    if settle_s > 0:
        with contextlib.suppress(PlaywrightTimeoutError):
            await page.wait_for_load_state("networkidle", timeout=settle_s * 1000)


async def select_content(page: Page, target: dict[str, Any], sites: WebArenaSites) -> str | None:
    """Navigate as ``target['url']`` says and read ``target['locator']``; None = nothing."""
    url = target["url"]
    if url.startswith("func:"):
        url = str(await call_helper(url, sites, page))
    if url != "last":
        await _open(page, url, sites.settle_s)
    locator: str = target["locator"]
    if not locator.strip():
        return await page.content()
    if locator.startswith(("document.", "[...document.")):
        for prep in target.get("prep_actions") or []:
            with contextlib.suppress(PlaywrightError):
                await page.evaluate(f"() => {prep}")
        try:
            # str() of the Python value, as WebArena: a missing value reads "None".
            return str(await page.evaluate(f"() => {locator}")) or ""
        except PlaywrightError:
            return ""  # the element is not there: the page is wrong
    if locator.startswith("lambda:"):
        try:
            value = await page.evaluate(locator.removeprefix("lambda:"))
        except PlaywrightError:
            return None
        return str(value) if value else None
    if locator.startswith("func:"):
        value = await call_helper(locator, sites, page)
        return None if value is None else str(value)
    raise ValueError(f"unknown program_html locator {locator[:60]!r}")


async def program_html(
    page: Page, ev: dict[str, Any], intent: str, sites: WebArenaSites
) -> tuple[float, str]:
    """WebArena's ``HTMLContentEvaluator``: (score, explanation)."""
    for i, target in enumerate(ev.get("program_html") or []):
        what = f"program_html[{i}] ({target.get('locator') or 'page'})"
        selected = await select_content(page, target, sites)
        if selected is None:
            return 0.0, f"{what}: nothing selected at {page.url}"
        req = target.get("required_contents") or {}
        if "exact_match" in req:
            ok = exact_match(str(req["exact_match"]), selected)
        elif "must_include" in req:
            ok = all(
                any(must_include(alt, selected) for alt in str(content).split(OR))
                for content in req["must_include"]
            )
        elif "fuzzy_match" in req:
            reference = ", ".join(str(x) for x in req["fuzzy_match"])
            ok = await _need_judge(sites.judge).fuzzy_match(selected, reference, intent)
        else:
            raise ValueError(f"unknown required_contents {sorted(req)}")
        if not ok:
            shown = selected if len(selected) <= 120 else selected[:117] + "..."
            return 0.0, f"{what}: {shown!r} does not satisfy {req!r}"
    return 1.0, "program_html: ok"


# --------------------------------------------------------------------------------------
# The episode's reward
# --------------------------------------------------------------------------------------


async def _check_string(ctx: EvalContext, ev: dict[str, Any], sites: WebArenaSites) -> Any:
    return await string_match(ctx.answer, ev, ctx.task.intent, sites.judge)


async def _check_url(ctx: EvalContext, ev: dict[str, Any], sites: WebArenaSites) -> Any:
    final = ctx.session.page.url if ctx.session is not None else ctx.url
    score = url_match(final, ev.get("reference_url") or "", ev.get("url_note"))
    if score == 1.0:
        return 1.0, "url_match: ok"
    return 0.0, f"url_match: final URL {final} does not match {ev.get('reference_url')}"


async def _check_html(ctx: EvalContext, ev: dict[str, Any], sites: WebArenaSites) -> Any:
    if ctx.session is None:
        raise ValueError("program_html needs the episode's browser session")
    return await program_html(ctx.session.page, ev, ctx.task.intent, sites)


CHECKS: dict[str, Callable[[EvalContext, dict[str, Any], WebArenaSites], Awaitable[Any]]] = {
    "string_match": _check_string,
    "url_match": _check_url,
    "program_html": _check_html,
}
"""Eval type → check; each returns (score, one-line explanation)."""


async def evaluate(ctx: EvalContext) -> EvalResult:
    """The reward of a finished WebArena(-Lite) episode: the product of its checks.

    Use with ``WebEnv(backend=WebArenaSites(…))``: the backend gives the site URLs, the REST
    account and the judge. Checks stop at the first 0 (the product stays 0; it saves judge
    calls and page loads). A malformed eval spec gives 0 with the reason.

    Raises:
        ConfigError: the env's backend is not a ``WebArenaSites``.
        JudgeNotConfiguredError: the task needs the LLM judge and none is configured.
        EnvError: the judge or a site failed (the episode is an env error, not a failure).
        BrowserCrashedError: the browser died while reading a page.
    """
    sites = ctx.backend
    if not isinstance(sites, WebArenaSites):
        raise ConfigError(
            "webarena.evaluate needs the WebArena sites: build the env with "
            "WebEnv(backend=WebArenaSites.from_env())"
        )
    ev: dict[str, Any] = sites.substitute_all(ctx.task.eval)  # type: ignore[assignment]
    types_ = ev.get("eval_types") or []
    if not types_:
        return EvalResult(0.0, "task has no eval_types")
    reward, notes = 1.0, []
    for t in types_:
        check = CHECKS.get(t)
        if check is None:
            return EvalResult(0.0, f"unknown eval type {t!r}; known: {', '.join(CHECKS)}")
        try:
            score, note = await check(ctx, ev, sites)
        except (ConfigError, EnvError, BrowserCrashedError):
            raise
        except (ValueError, KeyError, TypeError) as e:
            score, note = 0.0, f"{t}: evaluator error: {e}"
        reward *= score
        notes.append(note)
        if reward == 0.0:
            break
    return EvalResult(reward, "; ".join(notes))
