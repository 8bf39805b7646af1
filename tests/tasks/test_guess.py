"""The constant-answer baseline (``sources/embedded/guess.py``): majority answers and the
grader's verdict.

The synthetic tasks below, per template (train → majority; test → does the guess pass?)::

    t.count  train: exact "2", exact "2 ", must_include ["2"], exact "3"
             → "2" (3 of 4; "2 " and ["2"] are the same answer after normalising)
             test: exact "2" yes, exact "12" no, must_include ["2"] yes,
                   must_include ["2", "km"] no (lacks "km"), fuzzy "2" yes,
                   string_match + url_match with exact "2" no (not graded on the answer alone)
             → 3/6
    t.na     train: fuzzy "N/A", exact "n/a", exact "Blue" → "N/A" (2 of 3)
             test: fuzzy "none" yes (an N/A reference; "n/a" is an N/A answer),
                   exact "N/A" yes, exact "Blue" no, fuzzy "Red" no → 2/4
    t.tie    train: exact "a", exact "b" → "a" (the first seen)
    t.nav    train and test: url_match, no reference answers → no guess; test 0/1
    t.held   test only → no guess; test 0/1

    → 5 of 12 test tasks (the t.count task listed twice counts once).
"""

from __future__ import annotations

from typing import Any

import pytest

from webagent_r1.grading.embedded import reference_failure
from webagent_r1.sources.embedded.guess import (
    Guess,
    answer_graded,
    baseline,
    baseline_line,
    baseline_of_ids,
    guess_passes,
    majority_guesses,
    reference_text,
    split_shares,
    suite_guesses,
)
from webagent_r1.sources.embedded.suite import build_suite, select, spec_for
from webagent_r1.tasks.io import TaskError
from webagent_r1.types import Task

_IDS: dict[str, int] = {}


def task(template: str, split: str, refs: dict[str, Any] | None, *types: str) -> Task:
    """A task of ``template`` with these reference answers (string_match unless ``types``)."""
    k = _IDS[template] = _IDS.get(template, -1) + 1
    ev: dict[str, Any] = {"eval_types": list(types or ["string_match"])}
    if refs is not None:
        ev["reference_answers"] = refs
    if "url_match" in ev["eval_types"]:
        ev["reference_url"] = "__SHOPPING__/x"
    return Task(
        task_id=f"{template}/{k:03d}",
        sites=["shopping"],
        intent="?",
        start_url="__SHOPPING__/",
        eval=ev,
        split=split,
    )


TRAIN = [
    task("t.count", "train", {"exact_match": "2"}),
    task("t.na", "train", {"fuzzy_match": "N/A"}),
    task("t.count", "train", {"exact_match": "2 "}),
    task("t.count", "train", {"must_include": ["2"]}),
    task("t.na", "train", {"exact_match": "n/a"}),
    task("t.count", "train", {"exact_match": "3"}),
    task("t.na", "train", {"exact_match": "Blue"}),
    task("t.tie", "train", {"exact_match": "a"}),
    task("t.tie", "train", {"exact_match": "b"}),
    task("t.nav", "train", None, "url_match"),
]
COUNT_TEST = [
    (task("t.count", "test", {"exact_match": "2"}), True),
    (task("t.count", "test", {"exact_match": "12"}), False),
    (task("t.count", "test", {"must_include": ["2"]}), True),
    (task("t.count", "test", {"must_include": ["2", "km"]}), False),
    (task("t.count", "test", {"fuzzy_match": "2"}), True),
    (task("t.count", "test", {"exact_match": "2"}, "string_match", "url_match"), False),
]
NA_TEST = [
    (task("t.na", "test", {"fuzzy_match": "none"}), True),
    (task("t.na", "test", {"exact_match": "N/A"}), True),
    (task("t.na", "test", {"exact_match": "Blue"}), False),
    (task("t.na", "test", {"fuzzy_match": "Red"}), False),
]
OTHER_TEST = [
    (task("t.nav", "test", None, "url_match"), False),
    (task("t.held", "test", {"exact_match": "2"}), False),
]
TEST = [t for t, _ in COUNT_TEST + NA_TEST + OTHER_TEST]


def test_majority_per_template_after_normalising() -> None:
    g = majority_guesses(TRAIN)
    assert g == {
        "t.count": Guess("t.count", "2", 3, 4),
        "t.na": Guess("t.na", "N/A", 2, 3),
        "t.tie": Guess("t.tie", "a", 1, 2),
    }


def test_the_grader_decides_each_test_task() -> None:
    g = majority_guesses(TRAIN)
    for t, want in COUNT_TEST:
        assert guess_passes(t, g["t.count"].answer) is want, t.eval
    for t, want in NA_TEST:
        assert guess_passes(t, g["t.na"].answer) is want, t.eval


def test_baseline_counts_each_task_once() -> None:
    b = baseline([*TEST, TEST[0]], majority_guesses(TRAIN))
    assert (b.successes, b.tasks) == (5, 12)
    assert b.by_template == {"t.count": (3, 6), "t.na": (2, 4), "t.nav": (0, 1), "t.held": (0, 1)}
    assert b.outcomes == {str(t.task_id): ok for t, ok in COUNT_TEST + NA_TEST + OTHER_TEST}
    d = b.to_dict()
    assert (d["successes"], d["tasks"]) == (5, 12)
    assert d["by_template"]["t.na"] == {"guess": "N/A", "successes": 2, "tasks": 4}
    assert d["by_template"]["t.nav"] == {"guess": None, "successes": 0, "tasks": 1}
    assert b.line() == baseline_line(5, 12)
    assert baseline_line(5, 12) == (
        "constant-answer baseline: a policy answering each template's most common training "
        "answer would score 5/12 (41.7%) on these tasks"
    )


def test_reference_text_of_each_kind() -> None:
    mi = task("t.x", "test", {"must_include": ["Charles |OR| Chuck", ["x@y.z", "x@y.com"]]})
    assert reference_text(mi) == "Charles, x@y.z"
    assert guess_passes(mi, "Charles, x@y.z") and not guess_passes(mi, "Charles")
    assert reference_text(task("t.x", "test", {"fuzzy_match": ["a b", "c"]})) == "a b, c"
    both = task("t.x", "test", {"exact_match": "7", "must_include": ["7"]})
    assert reference_text(both) == "7"
    assert reference_text(task("t.x", "test", None, "url_match")) is None
    mixed = task("t.x", "test", {"exact_match": "7"}, "string_match", "program_html")
    assert not answer_graded(mixed) and reference_text(mixed) is None
    assert not answer_graded(task("t.x", "test", {}))


def test_reference_failure_is_the_graders_rule() -> None:
    assert reference_failure("The answer is 2", "must_include", ["2"]) is None
    assert "hedges ('or')" in str(reference_failure("2 or 3", "must_include", ["2"]))
    assert reference_failure("2", "exact_match", "12") == "answer '2' != '12'"
    with pytest.raises(TaskError, match="task t/1: unknown reference_answers kind 'regex'"):
        reference_failure("2", "regex", "2", "t/1")


def test_the_suite_guesses_search_result_count_as_2() -> None:
    """Read off the suite: shopping.search_result_count's answer is "2" for 21 of its 40
    training instances and 4 of its 6 test instances."""
    g = suite_guesses()
    assert g["shopping.search_result_count"] == Guess("shopping.search_result_count", "2", 21, 40)
    guess, ok, n = split_shares("test")["shopping.search_result_count"]
    assert (guess.answer, ok, n) == ("2", 4, 6)
    assert "shopping.add_to_cart" not in g and "shopping.product_page" not in g  # change, nav
    assert "shopping.compare_ratings" not in g  # held out: no training instances


def test_every_suite_answer_passes_its_own_task() -> None:
    """``reference_text`` is an answer the grader passes, for every answer-graded task."""
    tasks = build_suite(spec_for("wide"))
    graded = [t for t in tasks if answer_graded(t)]
    assert graded
    bad = [t.task_id for t in graded if not guess_passes(t, reference_text(t) or "")]
    assert bad == []


def test_baseline_of_ids() -> None:
    test = select(build_suite(spec_for("test")), split="test", template="gitlab.member_role")
    b = baseline_of_ids([str(t.task_id) for t in test])
    assert b is not None and b.by_template == {"gitlab.member_role": (4, 6)}
    assert baseline_of_ids(["click-button/1"]) is None  # a MiniWoB++ task
    assert baseline_of_ids(["gitlab.member_role/999"]) is None  # no such instance
    assert baseline_of_ids([]) is None
