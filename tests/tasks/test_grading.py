"""Graders that cannot be gamed: for every template of the embedded suite, answers that list
candidates, hedge, or hold the reference inside a longer wrong answer score 0, and the
correct answer scores 1.

Answers (string_match) are graded without a browser; agent-written text (state_match) is read
from a real SQLite file; url_match and program_html containment are checked at the boundary
rules they share.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from webagent_r1.grading.base import EvalContext
from webagent_r1.grading.embedded import (
    answer_includes,
    evaluate,
    fuzzy_match_normalised,
    must_include,
    named_excluded,
    rival_value,
    url_matches,
)
from webagent_r1.sources.embedded.suite import build_suite, select
from webagent_r1.types import Task


def _first_test_task_per_template() -> dict[str, Task]:
    seen: dict[str, Task] = {}
    for t in select(build_suite(), split="test"):
        seen.setdefault(t.extra["template"], t)
    return seen


_TASKS = _first_test_task_per_template()
_STRING = {n: t for n, t in _TASKS.items() if "string_match" in t.eval["eval_types"]}
_STATE_INCLUDES = {
    n: t
    for n, t in _TASKS.items()
    if any("must_include" in c for c in t.eval.get("state_checks") or [])
}


def _ctx(task: Task, answer: str | None, backend: Any = None) -> EvalContext:
    return EvalContext(
        task=task, answer=answer, session=None, url="", instance_id="i1", backend=backend
    )


def _first_alt(p: Any) -> str:
    return str(p[0]) if isinstance(p, (list, tuple)) else str(p).split(" |OR| ")[0]


def _values(task: Task) -> list[str]:
    """The reference values of a string_match task, as an agent would name them."""
    refs = task.eval["reference_answers"]
    if "exact_match" in refs:
        return [str(refs["exact_match"])]
    return [_first_alt(p) for p in refs["must_include"]]


def _rival(value: str) -> str:
    """Another candidate of the same kind: every digit shifted, or another name."""
    if re.search(r"\d", value):
        return re.sub(r"\d", lambda m: str((int(m.group(0)) + 3) % 10), value)
    return "Harbor Bakery" if value.lower() != "harbor bakery" else "Mill Cafe"


def test_every_kind_of_template_is_covered() -> None:
    kinds = {t.extra.get("kind") for t in _STRING.values()}
    assert len(_STRING) >= 30 and len(_STATE_INCLUDES) >= 5, (len(_STRING), kinds)


@pytest.mark.parametrize("name", sorted(_STRING))
async def test_answers_that_game_the_grader_score_zero(name: str) -> None:
    task = _STRING[name]
    values = _values(task)
    right = ", ".join(values)
    assert (await evaluate(_ctx(task, right))).reward == 1.0
    if "must_include" in task.eval["reference_answers"]:  # exact_match takes the value alone
        assert (await evaluate(_ctx(task, f"The answer is {right}."))).reward == 1.0
    first, rival = values[0], _rival(values[0])
    rest = values[1:]
    adversarial = {
        "list of candidates": ", ".join([first, rival, *rest]),
        "list, rival first": ", ".join([rival, first, *rest]),
        "hedge with or": ", ".join([f"{first} or {rival}", *rest]),
        "hedge with maybe": "maybe " + right,
        "inside a longer answer": ", ".join([f"{rival} {first}", *rest]),
        "reference as part of another value": ", ".join([f"{first}9", *rest]),
    }
    for what, answer in adversarial.items():
        res = await evaluate(_ctx(task, answer))
        assert res.reward == 0.0, (what, answer, res.explanation)


def test_must_include_needs_the_whole_value() -> None:
    assert must_include("It was shipped on Jan 3", ["shipped", "jan 3"])
    assert not must_include("It was shipped on Jan 31", ["shipped", "jan 3"])
    assert not must_include("total $112.00", ["$12.00"])
    assert not must_include("12.5 km", ["12"])
    assert must_include("color: red", ["blue |OR| red"])
    assert must_include("the price is -0.5 today", ["-0.5"])


def test_answer_includes_explains_why() -> None:
    assert answer_includes("$12.34, 25 min", ["$12.34", "25 min"]) == (True, "")
    ok, why = answer_includes("$12.34 or $13.00, 25 min", ["$12.34", "25 min"])
    assert not ok and "hedges" in why
    ok, why = answer_includes("$12.34, $13.00, 25 min", ["$12.34", "25 min"])
    assert not ok and "13.00" in why
    ok, why = answer_includes("25 min", ["$12.34", "25 min"])
    assert not ok and "lacks" in why


def test_fuzzy_match_both_directions_only_for_long_text() -> None:
    ref = "The order was cancelled because the customer changed the shipping address"
    assert fuzzy_match_normalised("the order was cancelled because the customer changed the "
                                  "shipping address.", ref)  # fmt: skip
    assert fuzzy_match_normalised(
        "Order cancelled because the customer changed the shipping address", ref
    )
    # The reference inside a much longer answer, and a fragment of it, both fail.
    assert not fuzzy_match_normalised(
        ref + " or maybe it was lost in transit, or the payment failed, or it was a duplicate", ref
    )
    assert not fuzzy_match_normalised("the customer changed", ref)
    # Short references: no containment either way.
    assert fuzzy_match_normalised("Lumen Charger", "lumen charger")
    assert not fuzzy_match_normalised("Lumen Charger Pro", "lumen charger")
    assert not fuzzy_match_normalised("Lumen", "lumen charger")
    assert not fuzzy_match_normalised("Lumen Charger or Volt Cable", "lumen charger")


@pytest.mark.parametrize(
    "answer, ok",
    [
        ("N/A", True),
        ("none", True),
        ("Not found.", True),
        ("It cannot be determined", True),
        ("", False),
        ("not $12.00", False),
        ("It is not Lumen Charger, it is Volt Cable", False),
        ("Volt Cable", False),
    ],
)
def test_na_reference_needs_a_fixed_phrase(answer: str, ok: bool) -> None:
    assert fuzzy_match_normalised(answer, "N/A") is ok


def test_rival_values_in_agent_written_text() -> None:
    assert rival_value("The Mug costs $12.34 at One Stop Market.", ["$12.34"]) is None
    assert rival_value("It costs $12.34, or $14.00 on sale", ["$12.34"]) == "$14.00"
    assert rival_value("Open 09:00 (or 10:00)", ["09:00"]) == "10:00"
    assert rival_value("walk 25 min, maybe 12 min", ["25 min"]) == "12 min"
    assert rival_value("1.2 km or 800 m", ["1.2 km"]) == "800 m"
    # Numbers of other kinds (a product's name) are no rival of a price.
    assert rival_value("The USB Cable 2000 costs $3.50", ["$3.50"]) is None


class _OneDb:
    """A site backend whose every instance is one SQLite file (for state_match)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def instance_db_path(self, site: str, instance_id: str) -> Path:
        return self.path


def _db_with(path: Path, rows: dict[str, str]) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT OR REPLACE INTO t VALUES (?, ?)", list(rows.items()))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("name", sorted(_STATE_INCLUDES))
async def test_agent_written_text_with_rival_candidates_scores_zero(name: str, tmp_path) -> None:
    """Each template that checks text the agent wrote (a comment, a post, an issue): the text
    with the facts passes; the same text also naming a rival value of a fact (another price,
    time, distance) or a known runner-up (``must_exclude``) fails, and so does text with only
    part of a fact."""
    src = _STATE_INCLUDES[name]
    checks = [c for c in src.eval["state_checks"] if "must_include" in c]
    phrases = [_first_alt(p) for c in checks for p in c["must_include"]]
    excluded = [x for c in checks for x in c.get("must_exclude") or []]
    good = "For the record: " + "; ".join(phrases) + "."
    rivals = [_rival(p) for p in phrases if rival_value(_rival(p), [p]) is not None]
    bad = {"part of each fact": "For the record: " + "; ".join(p[: len(p) // 2] for p in phrases)}
    if rivals:
        bad["rival values"] = good + " Or perhaps " + ", ".join(rivals) + "."
    if excluded:
        bad["a runner-up"] = good + f" Or {excluded[0]}."
        bad["the last runner-up"] = f"{excluded[-1]}, " + good
    if name in ("cross.closest_place_reply", "cross.closest_place_issue"):
        assert excluded, "a closest-place template must name its runners-up"
    cases = [(good, 1.0)] + [(text, 0.0) for text in bad.values()]
    for i, (text, want) in enumerate(cases):
        db = tmp_path / f"{i}.sqlite"
        _db_with(db, {"x": text})
        task = Task(
            task_id=src.task_id,
            intent=src.intent,
            start_url=src.start_url,
            sites=src.sites,
            eval={
                "eval_types": ["state_match"],
                "state_checks": [
                    {
                        "sql": "SELECT body FROM t WHERE k = 'x'",
                        "must_include": c["must_include"],
                        "must_exclude": c.get("must_exclude") or [],
                    }
                    for c in checks
                ],
            },
        )
        res = await evaluate(_ctx(task, "done", _OneDb(db)))
        assert res.reward == want, (text, res.explanation)


def test_runner_up_inside_the_right_name_is_no_rival() -> None:
    assert named_excluded("It is Blue Owl Cafe.", ["Blue Owl Cafe"], ["Owl Cafe"]) is None
    assert named_excluded("Blue Owl Cafe or Owl Cafe", ["Blue Owl Cafe"], ["Owl Cafe"]) == (
        "Owl Cafe"
    )


def test_url_match_needs_the_page_not_a_url_that_mentions_it() -> None:
    ref = "http://h:1/product/12"
    assert url_matches("http://h:1/product/12?tab=reviews", ref)
    assert not url_matches("http://h:1/search?q=/product/12", ref)
    assert not url_matches("http://h:1/product/123", ref)
    assert not url_matches("http://h:1/x/product/12", ref)
