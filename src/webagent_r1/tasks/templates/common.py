"""What the template modules share: the registry, sampling memo, expert helpers, eval specs.

- ``Registry``: a module's templates, in the order they are registered; a template is
  declared on its expert (``@TEMPLATES.template(...)``, after its sampler and eval builder),
  with the module's defaults (sites, start URL) and its kind's grading filled in.
- ``db_memo``: a memo of query results per pristine database file.
- Expert helpers that read the observation only: ``seek``, ``grab``, ``more_below``,
  ``line_after``.
- WebArena ``eval`` spec builders: ``string_eval``, ``answer_eval``, ``url_eval``, ``page_check``,
  ``state_check`` and ``state_eval``.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Callable, Generator
from typing import Any

from webagent_r1.tasks.experts import (
    Element,
    Expert,
    ExpertError,
    ExpertFactory,
    Step,
    find,
    maybe,
    scroll_down,
)
from webagent_r1.tasks.template import Template
from webagent_r1.types import Observation

Params = dict[str, Any]
Sub = Generator["Step | None", Observation, Any]
"""A sub-expert (used with ``yield from``): yields steps, returns what it found."""
Solver = Callable[[Params, Observation], Expert]
"""A template's expert as written: ``solve(params, obs)`` from the start observation."""

H1 = "document.querySelector('h1').innerText"
"""``program_html`` locator of a page's main heading."""


# --------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------


class Registry(list[Template]):
    """A template module's templates, in registration order (the suite's order).

    Args:
        **defaults: ``Template`` fields that every template of the module shares unless it
            says otherwise (``sites``, ``start_url``, ...).
    """

    def __init__(self, **defaults: Any) -> None:
        super().__init__()
        self.defaults = defaults

    def add(self, **fields: Any) -> Template:
        """Register a template built from the module's defaults and ``fields``."""
        t = Template(**{**self.defaults, **fields})
        t.sites = list(t.sites)
        self.append(t)
        return t

    def template(self, **fields: Any) -> Callable[[Solver], Solver]:
        """Declare a template on its expert: ``@TEMPLATES.template(id=..., name=..., ...)``.

        The decorated solver gets the public parameters and the start observation; the
        template's ``expert`` is the factory that receives that observation first
        (``started``). ``info`` templates grade with ``answer_eval`` unless ``fields`` give
        an ``evaluation``. Returns the solver unchanged.
        """

        def declare(solve: Solver) -> Solver:
            grading = {"evaluation": answer_eval} if fields.get("kind") == "info" else {}
            self.add(**{**grading, **fields}, expert=started(solve))
            return solve

        return declare


def started(solve: Solver) -> ExpertFactory:
    """The expert factory of a solver: its generator first yields None to receive the start
    observation, then runs ``solve(params, obs)`` (same name, for reports)."""

    @functools.wraps(solve)
    def expert(p: Params) -> Expert:
        obs = yield None
        yield from solve(p, obs)

    return expert


# --------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------


_MEMOS: dict[tuple[str, str], dict[Any, Any]] = {}


def db_memo(conn: sqlite3.Connection, scope: str) -> dict[Any, Any]:
    """A memo of query results for one database file and one ``scope`` (a module's name).

    The pristine file's name carries the seed's version, so its contents never change; other
    databases (in memory) get a throw-away dict.
    """
    db_file = conn.execute("PRAGMA database_list").fetchone()[2] or ""
    return _MEMOS.setdefault((scope, db_file), {}) if db_file else {}


def user_id(conn: sqlite3.Connection, username: str) -> int:
    """The id of the account ``username`` in a site's ``users`` table."""
    return int(conn.execute("SELECT id FROM users WHERE username = ?", (username,)).fetchone()[0])


# --------------------------------------------------------------------------------------------
# Expert helpers (read the observation only)
# --------------------------------------------------------------------------------------------


def more_below(obs: Observation) -> bool:
    """Whether the page continues below the observed part."""
    return "scroll down to see more" in obs.text


def seek(
    obs: Observation, role: str, name: str, why: str, exact: bool = False
) -> Generator[Step, Observation, tuple[Element, Observation]]:
    """Find an element, scrolling down (a few times at most) while the page continues.

    Returns:
        The element and the observation it is on.

    Raises:
        ExpertError: the element is not on the page.
    """
    for _ in range(6):
        el = maybe(obs, role, name, exact)
        if el is not None:
            return el, obs
        if not more_below(obs):
            break
        obs = yield scroll_down(why)
    return find(obs, role, name, exact), obs


def posted(obs: Observation, text: str, what: str) -> Sub:
    """After posting ``text`` (a comment or reply): the site's confirmation or the text in view.

    The site sends the browser to the new comment's anchor. On a long thread that anchor is
    near the end, the page opens a screen above it, and the observation's budget can cut the
    page before the new comment (the confirmation is at the top, above the text). Then this
    scrolls down until the text shows.

    Returns:
        The observation and a sentence saying what showed the post landed.

    Raises:
        ExpertError: neither shows, on any page down to the end.
    """
    for _ in range(6):
        if "comment was posted" in obs.text:
            return obs, f"The site confirms that my {what} was posted."
        if any(line.strip() == text for line in obs.text.splitlines()):
            return obs, f"My {what} is shown in the thread."
        if not more_below(obs):
            break
        obs = yield scroll_down(f"I scroll down to check that my {what} is in the thread.")
    raise ExpertError(f"expert: the {what} was not posted ({obs.url})")


def grab(obs: Observation, pattern: str, what: str) -> str:
    """The first group of the first match of ``pattern`` (multi-line) in the observation.

    Raises:
        ExpertError: no match (``what`` names the missing thing).
    """
    m = re.search(pattern, obs.text, re.MULTILINE)
    if not m:
        raise ExpertError(f"expert: no {what} on {obs.url}")
    return m.group(1)


def line_after(obs: Observation, el: Element) -> str:
    """The text line right after an element's line (a listing's details line); empty if none."""
    lines = obs.text.splitlines()
    for i, line in enumerate(lines):
        if re.search(rf"(?:^|\s)\[{el.id}\] ", line):
            return lines[i + 1] if i + 1 < len(lines) else ""
    return ""


# --------------------------------------------------------------------------------------------
# Eval specs (WebArena's ``eval`` format)
# --------------------------------------------------------------------------------------------


def string_eval(ref: Any, kind: str = "exact_match") -> dict[str, Any]:
    """A ``string_match`` spec: the answer must match ``ref`` (``exact_match``,
    ``fuzzy_match``, or ``must_include`` with a list of phrases)."""
    return {"eval_types": ["string_match"], "reference_answers": {kind: ref}}


def answer_eval(p: Params) -> dict[str, Any]:
    """A ``string_match`` spec with the instance's ``_answer`` as the one value the answer must
    give: ``must_include``, so a sentence that restates the question around it passes (the
    grader allows the intent's own words, never a second candidate)."""
    return string_eval([p["_answer"]], "must_include")


def page_check(
    shows: Any, locator: str = H1, url: str = "last", kind: str = "exact_match"
) -> dict[str, Any]:
    """A ``program_html`` check: the text at ``locator`` (empty: the whole page) on ``url``
    (``last``: the last page) is exactly ``shows`` (``kind="must_include"``: holds each of
    the phrases ``shows``)."""
    return {"url": url, "locator": locator, "required_contents": {kind: shows}}


def url_eval(url: str, shows: str | None = None, locator: str = H1) -> dict[str, Any]:
    """A ``url_match`` spec for reaching ``url``.

    Args:
        url: the reference URL (alternatives joined with `` |OR| ``).
        shows: also require the text at ``locator`` on the last page to be exactly this
            (``url_match`` accepts longer paths, so a prefix of another page's URL needs it).
        locator: where ``shows`` must be (default: the main heading).
    """
    if shows is None:
        return {"eval_types": ["url_match"], "reference_url": url}
    return {
        "eval_types": ["url_match", "program_html"],
        "reference_url": url,
        "program_html": [page_check(shows, locator)],
    }


_UNSET: Any = object()


def state_check(
    sql: str,
    params: list[Any] | None = None,
    *,
    description: str,
    expected: Any = _UNSET,
    row_count: int | None = None,
    must_include: list[str] | None = None,
    must_exclude: list[str] | None = None,
    site: str | None = None,
) -> dict[str, Any]:
    """One ``state_match`` check: a SQL query on the episode's database.

    Args:
        sql: the query (``?`` placeholders).
        params: its parameters (None: the query has none).
        description: what the check asserts, for reports.
        expected: the value of the first column of the first row.
        row_count: the number of rows instead (or as well).
        must_include: phrases the first column of the first row must contain.
        must_exclude: phrases it must not contain (left out of the check when empty).
        site: the site whose database the query runs on (default: the task's first site).
    """
    check: dict[str, Any] = {}
    if site is not None:
        check["site"] = site
    check["sql"] = sql
    if params is not None:
        check["params"] = params
    if expected is not _UNSET:
        check["expected"] = expected
    if row_count is not None:
        check["row_count"] = row_count
    if must_include is not None:
        check["must_include"] = must_include
    if must_exclude:
        check["must_exclude"] = must_exclude
    check["description"] = description
    return check


def state_eval(*checks: dict[str, Any], pages: list[dict[str, Any]] | None = None) -> dict:
    """A ``state_match`` spec of ``checks`` (with ``program_html`` ``pages`` checks, if any)."""
    if not pages:
        return {"eval_types": ["state_match"], "state_checks": list(checks)}
    return {
        "eval_types": ["state_match", "program_html"],
        "state_checks": list(checks),
        "program_html": pages,
    }
