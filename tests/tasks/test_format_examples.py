"""An intent's format example ("like 12.3 km", "e.g. On Hold") is never the task's answer.

An example that equals the reference lets a policy that copies the example out of the
question pass without reading a page. The suite is generated, so this is checked over every
task of the wide suite (the default train and test splits plus the extra instances)."""

from __future__ import annotations

import pytest

from webagent_r1.grading.embedded import answer_shown
from webagent_r1.sources.embedded.suite import build_suite, spec_for

# Answers named in the question by design or by its wording, not by a format example (None:
# any answer of the template): a choice between the options the intent lists, yes or no,
# "closed" offered beside the time format, or a value that is also a word of the question
# ("within 1 km" and the count 1; the value "mkdocs" of the file mkdocs.yml).
NAMED_IN_THE_QUESTION: dict[str, set[str] | None] = {
    "shopping.compare_ratings": None,
    "map.shortest_walk_of_three": None,
    "map.open_at_time": None,
    "map.count_nearby": {"1"},
    "gitlab.file_value": {"mkdocs"},
    "map.opening_time": {"closed"},
}


@pytest.fixture(scope="module")
def wide_tasks() -> list[dict]:
    """The wide suite's tasks as dicts, generated once for the module's tests."""
    return [t.to_dict() for t in build_suite(spec_for("wide"))]


def _named(template: str, ref: str) -> bool:
    if template not in NAMED_IN_THE_QUESTION:
        return False
    answers = NAMED_IN_THE_QUESTION[template]
    return answers is None or ref in answers


def _references(task: dict) -> list[str]:
    refs = (task.get("eval") or {}).get("reference_answers") or {}
    out: list[str] = []
    for value in refs.values():
        out += [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)]
    return out


def test_no_intent_shows_its_own_answer_as_a_format_example(wide_tasks: list[dict]) -> None:
    graded = [t for t in wide_tasks if _references(t)]
    assert len(graded) > 500  # the check runs over the suite's answer-graded tasks
    leaks = [
        (t["task_id"], ref)
        for t in graded
        for ref in _references(t)
        if not _named(t["template"], ref) and answer_shown(ref, [t["intent"]])
    ]
    assert not leaks, f"intents that show their answer: {leaks[:10]}"


# State-changing tasks whose graded text is given in the intent by design: the text to enter
# (a product's description), or a choice between the products the intent names.
GIVEN_IN_THE_QUESTION = {"shopping_admin.create_product", "cross.cheaper_product_post"}


def test_no_intent_shows_the_fact_its_state_check_looks_for(wide_tasks: list[dict]) -> None:
    # A change task that posts a looked-up fact (a distance, a price, an opening time) is
    # graded on that fact's text in the site's database: its example must not be that text.
    checked = 0
    leaks = []
    for t in wide_tasks:
        if t["template"] in GIVEN_IN_THE_QUESTION:
            continue
        for check in (t.get("eval") or {}).get("state_checks") or []:
            phrases = check.get("must_include") or []
            phrases = [phrases] if isinstance(phrases, str) else phrases
            for phrase in phrases:
                checked += 1
                if isinstance(phrase, str) and answer_shown(phrase, [t["intent"]]):
                    leaks.append((t["task_id"], phrase))
    assert checked > 300
    assert not leaks, f"intents that show their graded text: {leaks[:10]}"


def test_the_check_finds_an_example_that_is_the_answer() -> None:
    # The old driving-distance wording on a task whose distance is that example.
    intent = "What is the driving distance from A to B? Answer like 2.3 km or 850 m."
    assert answer_shown("2.3 km", [intent]) and answer_shown("850 m", [intent])
    assert not answer_shown("2.4 km", [intent])
