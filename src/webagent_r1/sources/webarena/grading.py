"""WebArena-Lite's evaluators: the reward of a WebArena(-Lite) episode, under one of two
rule sets (``WebArenaSites.scoring``, config ``tasks.webarena.scoring``).

The reward is the product of the scores of ``eval.eval_types`` (all must pass), in order.

Two scorings, because the published WebArena-Lite numbers were graded by two evaluators whose
rules differ on many of the 165 tasks (docs/webarena-lite.md has the table per rule):

- ``vab`` (the default): the rules of VisualAgentBench's WebArena-Lite evaluator
  (THUDM/VisualAgentBench, ``VAB-WebArena-Lite``), which scored WebRL's and WebAgent-R1's
  published numbers. The answer is the exit action's ``message`` read again with
  ``ast.literal_eval`` (``\\n`` is a newline; a malformed literal falls back to our
  parser's reading and is noted, ``ANSWER_FALLBACK``); an episode without exit is graded on
  VAB's ``"Early stop: Reach max steps N"``. Answers and page texts are lowercased and one
  pair of enclosing quotes removed, *not* trimmed; ``must_include`` splits every item into
  `` |OR| `` alternatives and requires a whole token for any reference that is one token
  (nltk 3.8.1's ``word_tokenize``, ``vab_tokenize``; tokens with ``/`` also count by their
  parts), in answers and page texts alike; a ``fuzzy_match`` list is judged once, its items
  joined with ``", "``, by a prompt that ends asking for the verdict alone; ``url_match``
  without ``url_note`` is an exact match, with ``GOLD in PRED`` some reference URL is a raw
  substring of the final URL (after ``localhost`` → ``127.0.0.1`` and dropping a trailing
  ``/``). Every check, page target and judge call runs even after a 0, and any exception
  of a check is an env error with the reason (VAB records an error and reruns the task),
  including its assertion that ``must_include`` is a list (task 81 of the Lite file).
- ``webarena``: WebArena's original rules, as BrowserGym's ``webarenalite`` evaluator
  restores them. Answers are trimmed too; ``must_include`` of an answer tokenizes only a
  one-character reference in a one-item list and has no alternatives, page texts are
  substrings; each ``fuzzy_match`` item is judged on its own with WebArena's prompt;
  ``url_match`` compares decoded host+path (substring) and query values order-free. The
  answer is our parser's reading of the exit message; checks stop at the first 0.

Shared by both:

- ``string_match``: the ``exit(message=…)`` answer, cleaned, against ``reference_answers``:
  ``exact_match`` (equal after cleaning), ``must_include`` (every item), ``fuzzy_match``
  (the judge must say "correct"; "incorrect" or "partially correct" fail), and for
  ``fuzzy_match: "N/A"``: the answer is ``N/A``, or else the judge must find the agent's
  reason for giving up the same as ``eval.string_note`` (WebArena's ``ua_match``).
- ``program_html``: for each ``{url, locator, required_contents}``: ``url`` is ``last`` (the
  page the episode ended on), a URL (opened in that same tab, then up to ``settle_s`` for the
  network to go idle; WebArena sleeps 3 s), or ``func:helper(…)`` giving a URL. ``locator`` is
  empty (the page's full HTML), a JS expression starting with ``document.`` or
  ``[...document.`` (its value as Python's ``str``; ``""`` when it throws), ``lambda:`` + a JS
  function (nothing found fails the task), or ``func:helper(__page__, …)``. The selected
  text must then satisfy ``exact_match``, ``must_include`` (each item may list alternatives
  with `` |OR| ``) or ``fuzzy_match`` (the items joined with ``", "``, judged once).

Placeholders (``__SHOPPING__`` …) anywhere in the eval spec become the sites' URLs first, and
a reference SSH clone URL on ``localhost:2222`` (task 71) gets the GitLab host and SSH port
of the configured sites (``WebArenaSites.gitlab_ssh``).

Known differences of ``webarena`` from WebArena's evaluator: an episode that ended without
``exit`` fails ``string_match`` at once (WebArena scores an "Early stop" message); a
``must_include`` given as one string (task 81) is read as a one-phrase list (WebArena
asserts a list); ``word_tokenize`` approximates NLTK's tokenizer without its sentence
splitter.

Errors: a failure of the infrastructure (the judge gives no verdict or does not answer, a
helper or page cannot reach its site, Playwright fails reading a page) raises an
``EnvError``, so the episode is an env error (retried, then counted as a failure by the
headline score). Under ``vab`` any other exception of a check does too, with the reason;
under ``webarena`` a malformed eval spec (an unknown kind, URL rule or locator) gives 0 with
the reason and a bug (``TypeError``, ``KeyError`` …) propagates.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlparse

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from webagent_r1.browser import BrowserCrashedError
from webagent_r1.config import ConfigError
from webagent_r1.grading.base import EnvError, EvalContext, EvalResult
from webagent_r1.sources.webarena.helpers import call_helper
from webagent_r1.sources.webarena.judge import (
    Judge,
    JudgeNotConfiguredError,
    not_configured_message,
)
from webagent_r1.sources.webarena.sites import WebArenaSites
from webagent_r1.sources.webarena.vab_tokenize import word_tokenize as nltk_word_tokenize

OR = " |OR| "

# --------------------------------------------------------------------------------------
# Strings
# --------------------------------------------------------------------------------------


def clean_answer(answer: str) -> str:
    """Trim, drop one pair of enclosing ``'…'`` or ``"…"``, lowercase (WebArena's rule)."""
    return vab_clean_answer(answer.strip())


def vab_clean_answer(answer: str) -> str:
    """Drop one pair of enclosing ``'…'`` or ``"…"``, lowercase; no trimming (VAB's rule).

    >>> vab_clean_answer(" 'Yes' ")
    " 'yes' "
    """
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "'\"":
        answer = answer[1:-1]
    elif answer in ("'", '"'):  # a startswith/endswith test sees one quote as a pair
        answer = ""
    return answer.lower()


def exact_match(ref: str, pred: str) -> bool:
    """Equal after ``clean_answer`` of both."""
    return clean_answer(pred) == clean_answer(ref)


def vab_exact_match(ref: str, pred: str) -> bool:
    """Equal after ``vab_clean_answer`` of both (surrounding whitespace counts)."""
    return vab_clean_answer(pred) == vab_clean_answer(ref)


# The ``webarena`` scoring's tokenizer: an approximation of NLTK's ``word_tokenize`` (the
# improved Treebank rules); punkt's sentence splitting is approximated by splitting a period
# off a word before whitespace or the end. The ``vab`` scoring uses nltk itself (vab_tokenize).
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


def vab_must_include(ref: str, pred: str) -> bool:
    """VAB's ``must_include``: a reference of one token must be a whole token of ``pred``
    (a token with ``/`` also counts by its parts); longer references are substrings. Tokens
    are nltk 3.8.1's ``word_tokenize`` (``vab_tokenize``), as VAB's.

    >>> vab_must_include("914", "914km"), vab_must_include("914", "914 km")
    (False, True)
    >>> vab_must_include("desk", "white desks"), vab_must_include("b", "a/b")
    (False, True)
    >>> vab_must_include("hollister", "“hollister”")
    True
    """
    clean_ref, clean_pred = vab_clean_answer(ref), vab_clean_answer(pred)
    if len(nltk_word_tokenize(clean_ref)) != 1:
        return clean_ref in clean_pred
    tokens = nltk_word_tokenize(clean_pred)
    tokens += [part for tok in tokens if "/" in tok for part in tok.split("/")]
    return clean_ref in tokens


def vab_must_include_item(item: str, pred: str) -> bool:
    """One ``must_include`` item under VAB: any of its `` |OR| `` alternatives is included."""
    return any(vab_must_include(alt, pred) for alt in item.split(OR))


def webarena_answer_must_include(items: list[str], pred: str) -> bool:
    """WebArena's ``must_include`` of an answer: every item a substring; a one-item list of
    one character must be a whole token. No alternatives."""
    return all(must_include(str(x), pred, tokenize=len(items) == 1) for x in items)


def webarena_page_must_include(item: str, text: str) -> bool:
    """WebArena's ``must_include`` of a page text: any `` |OR| `` alternative a substring."""
    return any(must_include(alt, text) for alt in item.split(OR))


def vab_answer_must_include(items: list[str], pred: str) -> bool:
    """VAB's ``must_include`` of an answer: every item, each with alternatives, tokenized."""
    return all(vab_must_include_item(str(x), pred) for x in items)


def _need_judge(judge: Judge | None) -> Judge:
    if judge is None:
        raise JudgeNotConfiguredError(not_configured_message())
    return judge


async def _judge_fuzzy(
    judge: Judge | None, pred: str, reference: str, intent: str, rules: Rules
) -> bool:
    return await _need_judge(judge).fuzzy_match(pred, reference, intent, prompt=rules.judge_prompt)


async def string_match(
    answer: str | None,
    ev: dict[str, Any],
    intent: str,
    judge: Judge | None,
    scoring: str = "vab",
) -> tuple[float, str]:
    """WebArena's ``StringEvaluator`` under ``scoring``'s rules: (score, explanation)."""
    if answer is None:
        return 0.0, "string_match: the agent gave no answer (no exit)"
    rules = RULES[scoring]
    pred = rules.clean(answer)
    score = 1.0
    for kind, value in (ev.get("reference_answers") or {}).items():
        if kind == "exact_match":
            score *= rules.exact_match(str(value), pred)
        elif kind == "must_include":
            if isinstance(value, str):  # one string in task 81 of WebArena-Lite's file
                if rules.strict:
                    raise ValueError(
                        f"must_include is the string {value!r}, not a list: VisualAgentBench's "
                        "evaluator asserts a list and records an error (the revised file, "
                        "tasks.webarena.test_file: webagent-r1, fixes it)"
                    )
                value = [value]
            score *= rules.answer_must_include([str(x) for x in value], pred)
        elif kind == "fuzzy_match" and value == "N/A":
            # An unachievable task: "N/A" itself passes; otherwise the reason must match.
            score *= rules.exact_match("N/A", pred)
            if score != 1.0:  # both evaluators overwrite the score here, not multiply
                note = str(ev.get("string_note") or "")
                score = float(await _need_judge(judge).ua_match(pred, note, intent))
        elif kind == "fuzzy_match":
            for reference in rules.fuzzy_references([str(x) for x in value]):
                if score == 0.0 and not rules.run_all:
                    break  # stays 0 whatever the judge says: save the call
                score *= await _judge_fuzzy(judge, pred, reference, intent, rules)
        else:
            raise ValueError(f"unknown reference_answers kind {kind!r}")
    refs = ev.get("reference_answers")
    verdict = "ok" if score == 1.0 else f"answer {answer!r} does not match {refs!r}"
    return score, f"string_match: {verdict}"


# --------------------------------------------------------------------------------------
# Reading the answer
# --------------------------------------------------------------------------------------

VAB_EARLY_STOP = "Early stop: Reach max steps {turns}"
"""The answer VAB's ``run.py`` grades when an episode reaches its step limit without exit."""
ANSWER_FALLBACK = "answer read as written: not a Python string literal"
"""Note (in the explanation) of a ``vab`` answer that ``ast.literal_eval`` could not read;
``results.headline`` counts them (``answer_literal_fallbacks``)."""

_LITERAL_ERRORS = (SyntaxError, ValueError, TypeError, MemoryError, RecursionError)


def vab_exit_message(raw: str) -> str | None:
    r"""The ``message`` of an exit action read as VAB's ``create_webrl_id_based_action`` reads
    it: the text from the last ``exit(`` parsed as a Python call, its keyword value through
    ``ast.literal_eval`` (so ``\n`` is a newline and ``\u2019`` a quote). Nothing is executed.

    >>> vab_exit_message(r'exit(message="a\nb \u201cc\u201d")')
    'a\nb “c”'

    Returns:
        The message, or None when VAB could not read it (no ``exit(``, not a call, no
        ``message`` keyword, or a value that is not a string literal).
    """
    if "exit(" not in raw:
        return None
    text = ("exit(" + raw.split("exit(")[-1]).strip()
    try:
        call = ast.parse(text, mode="eval").body
        if not isinstance(call, ast.Call):
            return None
        values = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords}
    except _LITERAL_ERRORS:
        return None
    message = values.get("message")
    return message if isinstance(message, str) else None


def vab_read_answer(ctx: EvalContext) -> tuple[str, str]:
    """The answer VAB grades for an episode, and a note on how it was read ("" when plain).

    An exit's message is read again from the action's text with ``vab_exit_message``; one
    that is not a string literal falls back to our parser's reading (``ANSWER_FALLBACK``).
    An episode without exit is graded on VAB's early-stop text (``VAB_EARLY_STOP`` with the
    turns taken), as VAB's ``run.py`` grades it, so an unachievable task still asks the judge.
    """
    if ctx.answer is None:
        text = VAB_EARLY_STOP.format(turns=ctx.turn)
        return text, f"no exit: graded VAB's {text!r}"
    last = ctx.history[-1] if ctx.history else None
    if last is None or last.kind != "exit" or not last.raw:
        return ctx.answer, ""  # no action text to read again (an answer given directly)
    message = vab_exit_message(last.raw)
    if message is None:
        return ctx.answer, ANSWER_FALLBACK
    return message, ""


def plain_answer(ctx: EvalContext) -> tuple[str | None, str]:
    """The answer as our action parser read it (None without exit), with no note."""
    return ctx.answer, ""


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


def _vab_clean_url(url: str) -> str:
    url = url.replace("localhost", "127.0.0.1")
    return url[:-1] if url.endswith("/") else url


def vab_url_match(page_url: str, reference_url: str, url_note: str | None = None) -> float:
    """VAB's ``URLExactEvaluator``: without ``url_note`` the final URL must equal a reference;
    with ``GOLD in PRED`` a reference must be a raw substring of it (no decoding, queries in
    the reference's order). Both sides: ``localhost`` → ``127.0.0.1``, one trailing ``/``
    dropped.

    >>> vab_url_match("http://s/a?x=1&y=2", "http://s/a?y=2&x=1", "GOLD in PRED")
    0.0
    >>> vab_url_match("http://s/a/", "http://s/a |OR| http://s/b")
    1.0

    Raises:
        ValueError: an unknown ``url_note`` rule.
    """
    rule = url_note if url_note is not None else "EXACT"
    pred = _vab_clean_url(page_url)
    refs = [_vab_clean_url(r) for r in reference_url.split(OR)]
    if rule == "EXACT":
        return float(pred in refs)
    if rule == "GOLD in PRED":
        return float(any(r in pred for r in refs))
    raise ValueError(f"unknown url_note matching rule {rule!r}")


# --------------------------------------------------------------------------------------
# The two scorings
# --------------------------------------------------------------------------------------


def _each(items: list[str]) -> list[str]:
    return items


def _joined(items: list[str]) -> list[str]:
    return [", ".join(items)]


@dataclass(frozen=True)
class Rules:
    """The rules of one scoring (the points where VAB's and WebArena's evaluators differ)."""

    clean: Callable[[str], str]
    """Cleans an answer before matching."""
    exact_match: Callable[[str, str], bool]
    """``(reference, text)``: ``exact_match`` of answers and page texts."""
    answer_must_include: Callable[[list[str], str], bool]
    """``(items, cleaned answer)``: ``must_include`` of an answer (all items)."""
    page_must_include: Callable[[str, str], bool]
    """``(item, page text)``: one ``must_include`` item of a page check."""
    fuzzy_references: Callable[[list[str]], list[str]]
    """A ``fuzzy_match`` list → the references the judge is asked about, one call each."""
    judge_prompt: str
    """The judge's fuzzy_match prompt (``judge.FUZZY_PROMPTS``)."""
    url_match: Callable[[str, str, str | None], float]
    """``(final URL, reference_url, url_note)`` → 1.0 or 0.0."""
    read_answer: Callable[[EvalContext], tuple[str | None, str]]
    """The episode → (the answer ``string_match`` grades, a note on how it was read)."""
    run_all: bool
    """Run every check, page target and judge call even after a 0 (VAB), else stop at the
    first 0 (saves judge calls and page loads; the reward is the same)."""
    strict: bool
    """Any exception of a check makes the episode an env error, as VAB records an error and
    reruns the task (its assertions included: a ``must_include`` string); else a malformed
    spec scores 0 with the reason and a bug propagates."""


RULES: dict[str, Rules] = {
    "vab": Rules(
        clean=vab_clean_answer,
        exact_match=vab_exact_match,
        answer_must_include=vab_answer_must_include,
        page_must_include=vab_must_include_item,
        fuzzy_references=_joined,
        judge_prompt="vab",
        url_match=vab_url_match,
        read_answer=vab_read_answer,
        run_all=True,
        strict=True,
    ),
    "webarena": Rules(
        clean=clean_answer,
        exact_match=exact_match,
        answer_must_include=webarena_answer_must_include,
        page_must_include=webarena_page_must_include,
        fuzzy_references=_each,
        judge_prompt="webarena",
        url_match=url_match,
        read_answer=plain_answer,
        run_all=False,
        strict=False,
    ),
}
"""Scoring name (``tasks.webarena.scoring``) → its rules; ``vab`` scored the paper's numbers."""


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
    """WebArena's ``HTMLContentEvaluator`` under ``sites.scoring``: (score, explanation)."""
    rules = RULES[sites.scoring]
    failed: str | None = None  # the first target that failed (``rules.run_all`` goes on)
    for i, target in enumerate(ev.get("program_html") or []):
        what = f"program_html[{i}] ({target.get('locator') or 'page'})"
        selected = await select_content(page, target, sites)
        if selected is None:  # both evaluators stop here
            return 0.0, failed or f"{what}: nothing selected at {page.url}"
        req = target.get("required_contents") or {}
        if "exact_match" in req:
            ok = rules.exact_match(str(req["exact_match"]), selected)
        elif "must_include" in req:
            ok = all(rules.page_must_include(str(item), selected) for item in req["must_include"])
        elif "fuzzy_match" in req:
            reference = ", ".join(str(x) for x in req["fuzzy_match"])
            ok = await _judge_fuzzy(sites.judge, selected, reference, intent, rules)
        else:
            raise ValueError(f"unknown required_contents {sorted(req)}")
        if not ok:
            shown = selected if len(selected) <= 120 else selected[:117] + "..."
            failed = failed or f"{what}: {shown!r} does not satisfy {req!r}"
            if not rules.run_all:
                break
    return (0.0, failed) if failed else (1.0, "program_html: ok")


# --------------------------------------------------------------------------------------
# The episode's reward
# --------------------------------------------------------------------------------------


async def _check_string(ctx: EvalContext, ev: dict[str, Any], sites: WebArenaSites) -> Any:
    answer, how = RULES[sites.scoring].read_answer(ctx)
    score, note = await string_match(answer, ev, ctx.task.intent, sites.judge, sites.scoring)
    return score, f"{note} ({how})" if how else note


async def _check_url(ctx: EvalContext, ev: dict[str, Any], sites: WebArenaSites) -> Any:
    final = ctx.session.page.url if ctx.session is not None else ctx.url
    rules = RULES[sites.scoring]
    score = rules.url_match(final, ev.get("reference_url") or "", ev.get("url_note"))
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
    account and the judge. The rules are those of ``sites.scoring`` (``RULES``). Under
    ``vab`` every check runs, and any exception of a check makes the episode an env error
    with the reason, as VAB records an error and reruns the task. Under ``webarena`` checks
    stop at the first 0 (the product stays 0; it saves judge calls and page loads), a
    malformed eval spec (a ``ValueError``: unknown kind, rule or locator) gives 0 with the
    reason and a bug (``TypeError``, ``KeyError`` …) propagates.

    Raises:
        ConfigError: the env's backend is not a ``WebArenaSites``.
        JudgeNotConfiguredError: the task needs the LLM judge and none is configured.
        EnvError: the judge, a helper's site or Playwright failed, or (``vab``) any check
            raised (the episode is an env error, not a failure).
        BrowserCrashedError: the browser died while reading a page.
        TypeError, KeyError: (``webarena``) a bug of the evaluator; never turned into a score.
    """
    sites = ctx.backend
    if not isinstance(sites, WebArenaSites):
        raise ConfigError(
            "webarena.evaluate needs the WebArena sites: build the env with "
            "WebEnv(backend=WebArenaSites.from_env())"
        )
    rules = RULES[sites.scoring]
    ev: dict[str, Any] = sites.substitute_all(ctx.task.eval)  # type: ignore[assignment]
    types_ = ev.get("eval_types") or []
    if not types_:
        return EvalResult(0.0, "task has no eval_types")
    reward, notes = 1.0, []
    for t in types_:
        check = CHECKS.get(t)
        if check is None:
            unknown = f"unknown eval type {t!r}; known: {', '.join(CHECKS)}"
            if rules.strict:  # VAB's evaluator_router raises
                raise EnvError(f"{unknown} (an error under the vab scoring)")
            return EvalResult(0.0, unknown)
        try:
            score, note = await check(ctx, ev, sites)
        except (ConfigError, EnvError, BrowserCrashedError):  # a setup error; already env
            raise
        except PlaywrightError as e:  # the page could not be read: not the agent's doing
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise EnvError(f"{t}: reading the page failed: {first}") from e
        except Exception as e:
            if rules.strict:  # VAB: an exception is an error, the task is run again
                first = (str(e).strip().splitlines() or [""])[0][:200]
                raise EnvError(
                    f"{t}: the evaluator raised {type(e).__name__}: {first} (an env error "
                    "under the vab scoring, as VisualAgentBench's; rerun the episode)"
                ) from e
            if not isinstance(e, ValueError):
                raise
            score, note = 0.0, f"{t}: bad eval spec: {e}"  # a spec no evaluator knows
        reward *= score
        notes.append(note)
        if reward == 0.0 and not rules.run_all:
            break
    return EvalResult(reward, "; ".join(notes))
