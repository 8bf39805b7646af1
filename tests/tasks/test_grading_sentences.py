"""Answers in a sentence: ``must_include`` lets an answer restate its question around the value,
as an instruction-following model writes it ("The street address of Harbor Cafe is 412 Water
Street."), and still refuses what games the grader: a second candidate (from the intent's
format example, the options it offers, a number it names, or a name it does not hold), a hedge
or a list.

Every answer-graded template of the embedded suite gets a sentence written from its test task's
parameters, graded by ``evaluate`` exactly as an episode's answer is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from webagent_r1.grading.base import EvalContext
from webagent_r1.grading.embedded import answer_includes, evaluate, restating_words
from webagent_r1.sources.embedded.suite import build_suite, select
from webagent_r1.types import Task


def _first_test_task_per_template() -> dict[str, Task]:
    seen: dict[str, Task] = {}
    for t in select(build_suite(), split="test"):
        if "string_match" in t.eval["eval_types"]:
            seen.setdefault(t.extra["template"], t)
    return seen


_TASKS = _first_test_task_per_template()


def _values(task: Task) -> list[str]:
    refs = task.eval["reference_answers"]
    if "exact_match" in refs:
        return [str(refs["exact_match"])]
    return [
        str(p[0]) if isinstance(p, list) else str(p).split(" |OR| ")[0]
        for p in refs["must_include"]
    ]


def _ctx(task: Task, answer: str) -> EvalContext:
    return EvalContext(
        task=task, answer=answer, session=None, url="", instance_id="i1", backend=None
    )


Sentence = Callable[[dict[str, Any], list[str]], str]

# How an instruction-following model answers each question: a sentence that restates it.
SENTENCES: dict[str, Sentence] = {
    "cross.price_and_walking_time": lambda p, v: (
        f"The price of the {p['product']} in the shop is {v[0]}, and the walk from {p['a']} "
        f"to {p['b']} takes {v[1]}."
    ),
    "cross.sku_and_place_at_coordinates": lambda p, v: (
        f"The SKU of the {p['product']} is {v[0]}, and the place at the coordinates "
        f"{p['coords']} is {v[1]}."
    ),
    "gitlab.commits_by_author": lambda p, v: (
        f"{p['name']} has made {v[0]} commits to the project {p['project']}."
    ),
    "gitlab.file_value": lambda p, v: f"The file {p['file']} sets {p['key']} to {v[0]}.",
    "gitlab.issue_assignee": lambda p, v: f'The open issue "{p["title"]}" is assigned to {v[0]}.',
    "gitlab.latest_commit_author": lambda p, v: (
        f"The {p['field']} of the latest commit of the project {p['project']} is {v[0]}."
    ),
    "gitlab.member_role": lambda p, v: (
        f"{p['name']} has the role {v[0]} in the project {p['project']}."
    ),
    "gitlab.most_starred_in_group": lambda p, v: (
        f"The project of the group {p['group']} with the most {p['what']} is {v[0]}."
    ),
    "gitlab.open_issues_with_label": lambda p, v: (
        f'The project {p["project"]} has {v[0]} open issues labelled "{p["label"]}".'
    ),
    "gitlab.star_count": lambda p, v: f"The project {p['project']} has {v[0]} {p['what']}.",
    "map.closest_of_category": lambda p, v: (
        f"The {p['category']} closest to {p['place']} in a straight line is {v[0]}."
    ),
    "map.count_in_neighbourhood": lambda p, v: (
        f"The map lists {v[0]} {p['plural']} in the {p['hood']} neighbourhood."
    ),
    "map.count_nearby": lambda p, v: (
        f"There are {v[0]} {p['plural']} within {p['radius']} of {p['place']}."
    ),
    "map.cycling_time_saved": lambda p, v: (
        f"You save {v[0]} minutes by cycling instead of walking from {p['a']} to {p['b']}."
    ),
    "map.driving_distance": lambda p, v: (
        f"The driving distance from {p['a']} to {p['b']} is {v[0]}."
    ),
    "map.first_turn": lambda p, v: f"The first turn is onto {v[0]}.",
    "map.open_at_time": lambda p, v: (
        f"{v[0].capitalize()}, {p['place']} is open on {p['day']} at {p['time']}."
        if v[0] == "yes"
        else f"{v[0].capitalize()}."
    ),
    "map.opening_time": lambda p, v: f"{p['place']} opens at {v[0]} on {p['day']}s.",
    "map.place_at_coordinates": lambda p, v: (
        f"The place at the coordinates {p['coords']} is {v[0]}."
    ),
    "map.place_coordinates": lambda p, v: f"The coordinates of {p['place']} are {v[0]}, {v[1]}.",
    "map.shortest_walk_of_three": lambda p, v: (
        f"The shortest walk from {p['origin']} is to {v[0]}."
    ),
    "map.street_address": lambda p, v: f"The street address of {p['place']} is {v[0]}.",
    "map.walking_time": lambda p, v: f"It takes {v[0]} to walk from {p['a']} to {p['b']}.",
    "reddit.author_post_count": lambda p, v: (
        f'The author of the post "{p["title"]}" has submitted {v[0]} posts in all.'
    ),
    "reddit.comment_author_joined": lambda p, v: (
        f"The user who wrote the comment joined the site on {v[0]}."
    ),
    "reddit.forum_count": lambda p, v: f"The forum f/{p['forum']} has {v[0]} {p['what']}.",
    "reddit.newest_post_title": lambda p, v: (
        f'The title of the {p["which"]} post in the forum f/{p["forum"]} is "{v[0]}".'
    ),
    "reddit.post_author": lambda p, v: f'The post "{p["title"]}" was submitted by {v[0]}.',
    "reddit.post_comment_count": lambda p, v: f'The post "{p["title"]}" has {v[0]} comments.',
    "reddit.search_count": lambda p, v: f'A forum search for "{p["query"]}" finds {v[0]} posts.',
    "shopping.category_price_extreme": lambda p, v: (
        f"The {p['which']} product in the {p['leaf']} category is the {v[0]}."
    ),
    "shopping.compare_ratings": lambda p, v: f"The {v[0]} have the higher average customer rating.",
    "shopping.my_order_detail": lambda p, v: (
        f"The {p['field']} of my order number {p['order']} is {v[0]}."
    ),
    "shopping.product_price": lambda p, v: f"The price of the {p['product']} is {v[0]}.",
    "shopping.product_rating": lambda p, v: (
        f"The average customer rating of the {p['product']} is {v[0]} out of 5 stars."
    ),
    "shopping.product_sku": lambda p, v: f"The SKU of the {p['product']} is {v[0]}.",
    "shopping.search_result_count": lambda p, v: (
        f'A store search for "{p["query"]}" returns {v[0]} products.'
    ),
    "shopping_admin.bestseller_in_period": lambda p, v: (
        f"According to the Bestsellers Report, the product that sold the most units from "
        f"{p['start']} to {p['end']} is the {v[0]}."
    ),
    "shopping_admin.count_orders_status_month": lambda p, v: (
        f"{v[0]} orders placed in {p['month']} currently have the status {p['status']}."
    ),
    "shopping_admin.customer_contact": lambda p, v: (
        f"The {p['field']} of the customer {p['name']} is {v[0]}."
    ),
    "shopping_admin.largest_order_in_month": lambda p, v: (
        f"{v[0]} placed the order with the highest grand total in {p['month']}, and that "
        f"total was {v[1]}."
    ),
    "shopping_admin.order_customer_email": lambda p, v: (
        f"{v[0]} placed order #{p['order']}, and their email address is {v[1]}."
    ),
    "shopping_admin.order_grand_total": lambda p, v: (
        f"The grand total of order #{p['order']} is {v[0]}."
    ),
    "shopping_admin.sales_report_month": lambda p, v: (
        f"According to the Sales Report, the {p['metric']} in {p['month']} was {v[0]}."
    ),
    "shopping_admin.stock_by_sku": lambda p, v: (
        f"There are {v[0]} units of the product with SKU {p['sku']} in stock."
    ),
}


def _sentence(name: str) -> str:
    task = _TASKS[name]
    return SENTENCES[name](task.instantiation_dict, _values(task))


def test_every_answer_graded_template_has_a_sentence() -> None:
    assert len(_TASKS) >= 40
    assert sorted(_TASKS) == sorted(SENTENCES)


@pytest.mark.parametrize("name", sorted(SENTENCES))
async def test_a_sentence_that_restates_the_question_passes(name: str) -> None:
    task = _TASKS[name]
    res = await evaluate(_ctx(task, _sentence(name)))
    assert res.reward == 1.0, (task.intent, _sentence(name), res.explanation)


def _rival(value: str) -> str:
    """Another candidate of the same kind, named nowhere in the intent: every digit shifted,
    or another place's name."""
    if re.search(r"\d", value):
        return re.sub(r"\d", lambda m: str((int(m.group(0)) + 3) % 10), value)
    return "Harbor Bakery" if value.lower() != "harbor bakery" else "Mill Cafe"


# Options an intent offers, besides its format example: every one is a candidate answer.
_CHOICES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "shopping.compare_ratings": lambda p: [p["a"], p["b"]],
    "map.shortest_walk_of_three": lambda p: [p["a"], p["b"], p["c"]],
    "map.open_at_time": lambda p: ["yes", "no"],
    "map.opening_time": lambda p: ["closed"],
}


def _intent_candidates(task: Task) -> list[str]:
    """Values the intent itself names that could be answers: its format example (whole and
    by parts), the options it offers, and each number it holds."""
    out: list[str] = []
    example = re.search(r"\blike:? '?(.+?)'?\.?$", task.intent)
    if example:
        text = example.group(1)
        out += [text] + [x.strip() for x in re.split(r",| or ", text) if x.strip()]
    out += _CHOICES.get(task.extra["template"], lambda p: [])(task.instantiation_dict)
    out += re.findall(r"(?<![\w.])-?\d+(?:[.:]\d+)?(?![\w.])", task.intent)
    values = {v.lower() for v in _values(task)}
    return [c for c in dict.fromkeys(out) if c.lower() not in values]


@pytest.mark.parametrize("name", sorted(SENTENCES))
async def test_the_intents_own_candidates_smuggle_no_second_answer(name: str) -> None:
    """An intent's word may stand beside the value, but not one that is itself a candidate: the
    format example's value, an option the question offers, a number it names; nor a rival that
    the intent does not hold; in a list, a hedge or a sentence."""
    task = _TASKS[name]
    values = _values(task)
    right = ", ".join(values)
    sentence = _sentence(name)
    candidates = _intent_candidates(task)
    if name in _CHOICES or "like" in task.intent:
        assert candidates, task.intent
    rival = _rival(values[0])

    def around(text: str) -> str:
        """The sentence with ``text`` where its first value stands."""
        return re.sub(re.escape(values[0]), lambda _: text, sentence, count=1, flags=re.I)

    adversarial = {
        "rival, not in the intent, listed": f"{right}, {rival}",
        "rival in the sentence": around(f"{values[0]}, {rival}"),
        "either … or in the sentence": around(f"either {values[0]} or {rival}"),
        "two values joined by and": around(f"{values[0]} and {rival}"),
        "sentence, then a rival": f"{sentence} {rival}.",
    }
    for c in candidates:
        adversarial[f"intent candidate {c!r} after"] = f"{right}, {c}"
        adversarial[f"intent candidate {c!r} before"] = f"{c}, {right}"
        adversarial[f"intent candidate {c!r} after the sentence"] = f"{sentence} {c}."
    for what, answer in adversarial.items():
        res = await evaluate(_ctx(task, answer))
        assert res.reward == 0.0, (what, answer, res.explanation)


HARBOR = "What is the street address of Harbor Cafe?"


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        ("The street address of Harbor Cafe is 412 Water Street.", True),
        ("Harbor Cafe's street address is 412 Water Street", False),  # "cafe's" is no word of it
        ("Harbor Cafe: 412 Water Street", True),
        ("412 Water Street", True),
        ("It is at 412 Water Street.", True),
        ("The street address of Harbor Cafe is 412 Water Street or 18 Mill Lane.", False),
        ("The street address of Harbor Cafe is either 412 Water Street or 18 Mill Lane", False),
        ("412 Water Street, 18 Mill Lane", False),
        ("412 Water Street; Harbor Bakery is at 18 Mill Lane", False),
        ("I think the street address of Harbor Cafe is 412 Water Street.", False),
        ("Harbor Cafe is not at 412 Water Street.", False),
        ("The street address of Harbor Cafe is 412 Water Street Extension.", False),
    ],
)
def test_the_issue_example(answer: str, ok: bool) -> None:
    assert answer_includes(answer, ["412 Water Street"], HARBOR)[0] is ok, answer


def test_without_an_intent_only_frame_words_stand_beside_the_value() -> None:
    assert answer_includes("The answer is 412 Water Street.", ["412 Water Street"])[0]
    ok, why = answer_includes("The street address of Harbor Cafe is 412 Water Street.",
                              ["412 Water Street"])  # fmt: skip
    assert not ok and "street address" in why


def test_an_intent_word_that_is_a_rival_value_is_refused() -> None:
    count = "How many schools are within 1 km of Old Barrel Diner? Answer with a number."
    assert answer_includes("8 schools are within 1 km of Old Barrel Diner.", ["8"], count)[0]
    for smuggled in ("8, 1", "1, 8", "8 or 1", "8 (1)", "The answer is 8, 1."):
        assert not answer_includes(smuggled, ["8"], count)[0], smuggled
    assert answer_includes("1", ["1"], count)[0]  # the reference may equal the intent's number
    # a price the intent names is a rival of a price answer
    price = "The Lumen Charger cost $12.00 last week. What does it cost now?"
    assert answer_includes("The Lumen Charger costs $14.00 now.", ["$14.00"], price)[0]
    ok, why = answer_includes("$14.00, $12.00", ["$14.00"], price)
    assert not ok and "$12.00" in why
    # "mkdocs" of mkdocs.yml is no word of the intent: no second value
    value = "What value does the file mkdocs.yml set for theme? Answer with the value only."
    assert not answer_includes("material, mkdocs", ["material"], value)[0]
    # words of a clause that offers a choice are candidates, not a restatement
    choice = "Which has more stars: the Lumen Charger or the Volt Cable?"
    assert not answer_includes("Lumen Charger, Volt Cable", ["Lumen Charger"], choice)[0]
    assert answer_includes("The Lumen Charger has more stars.", ["Lumen Charger"], choice)[0]
    assert "volt" not in restating_words(choice) and "star" in restating_words(choice)
