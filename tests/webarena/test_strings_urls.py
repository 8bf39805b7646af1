"""string_match and url_match with WebArena's rules (scoring ``webarena``) and what both
scorings share (no browser; the judge is faked). ``test_scoring.py`` has VAB's rules."""

from __future__ import annotations

import pytest

from tests.webarena.conftest import FakeJudge, by_id, score, with_scoring
from webagent_r1.grading.base import EvalContext
from webagent_r1.sources.webarena import JudgeNotConfiguredError, WebArenaSites, evaluate
from webagent_r1.sources.webarena.grading import (
    clean_answer,
    exact_match,
    must_include,
    string_match,
    url_match,
    word_tokenize,
)
from webagent_r1.types import Task

URLS = {
    "shopping": "http://shop.test:7770",
    "shopping_admin": "http://shop.test:7780/admin",
    "reddit": "http://reddit.test:9999",
    "gitlab": "http://gitlab.test:8023",
    "map": "http://map.test:3000",
}


_by_id, _score = by_id, score


# -- cleaning and matching --------------------------------------------------------------


def test_clean_answer() -> None:
    assert clean_answer("  'Yes' ") == "yes"
    assert clean_answer('"N/A"') == "n/a"
    assert clean_answer("'quoted\"") == "'quoted\""  # only a matching pair is removed
    assert clean_answer("'") == ""


def test_exact_match() -> None:
    assert exact_match("N/A", "n/a")
    assert exact_match("Yes", ' "yes" ')
    assert not exact_match("Yes", "yes.")


def test_word_tokenize_like_nltk() -> None:
    assert word_tokenize("There are 2 reviews.") == ["There", "are", "2", "reviews", "."]
    assert word_tokenize("$0.00 (none)") == ["$", "0.00", "(", "none", ")"]
    assert word_tokenize("2,000 or 2, 3") == ["2,000", "or", "2", ",", "3"]
    assert word_tokenize("it's 5%") == ["it", "'s", "5", "%"]


def test_must_include_tokenizes_one_character_references() -> None:
    # Task 2's reference is "2": a whole token is needed, not a substring.
    assert must_include("2", "there are 2 reviews", tokenize=True)
    assert must_include("2", "2.", tokenize=True)
    assert not must_include("2", "12 reviews", tokenize=True)
    assert not must_include("2", "2nd", tokenize=True)
    assert must_include("2", "12 reviews", tokenize=False)
    # Longer references are substrings either way.
    assert must_include("Impulse Duffle", "the impulse duffle sold best", tokenize=True)


# -- string_match on real Lite configs ----------------------------------------------------


async def test_must_include_tasks(lite_tasks: list[Task]) -> None:
    sites, t = WebArenaSites(URLS, scoring="webarena"), _by_id(lite_tasks)
    answer = "Impulse Duffle, Overnight Duffle, Hawkeye Yoga Short-32-Blue"
    assert await _score(t[0], answer, sites) == 1.0
    assert await _score(t[0], "Impulse Duffle, Overnight Duffle", sites) == 0.0
    assert await _score(t[2], "2", sites) == 1.0  # must_include ["2"], tokenized
    assert await _score(t[2], "There are 12 such reviews", sites) == 0.0
    assert await _score(t[36], "$0", sites) == 1.0  # must_include ["0"]
    assert await _score(t[36], "I spent $10", sites) == 0.0
    assert await _score(t[81], "The user is yjlou", sites) == 1.0  # a string, not a list


async def test_exact_match_tasks(lite_tasks: list[Task]) -> None:
    sites, t = WebArenaSites(URLS), _by_id(lite_tasks)
    assert await _score(t[27], '"N/A"', sites) == 1.0
    assert await _score(t[27], "Nobody complained", sites) == 0.0
    assert await _score(t[27], None, sites) == 0.0  # ran out of turns


async def test_fuzzy_match_through_the_judge(
    lite_tasks: list[Task], wa_sites: WebArenaSites, judge_server: FakeJudge
) -> None:
    t, wa_sites = _by_id(lite_tasks), with_scoring(wa_sites, "webarena")
    # Task 3: fuzzy_match ["driving: 13min", "walking: 1h 45min"]: one judge call per phrase.
    assert await _score(t[3], "Driving: 13min; walking: 1h 45min", wa_sites) == 1.0
    assert len(judge_server.requests) == 2
    judge_server.requests.clear()
    assert await _score(t[3], "walking: 1h 45min only", wa_sites) == 0.0
    assert len(judge_server.requests) == 1  # the first phrase failed: no second call
    req = judge_server.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == "Bearer sk-test"
    assert req["body"]["model"] == "fake-judge" and req["body"]["temperature"] == 0
    prompt = req["body"]["messages"][-1]["content"]
    assert "question: " + t[3].intent in prompt
    assert "reference answer: driving: 13min" in prompt
    assert "student answer: walking: 1h 45min only" in prompt  # cleaned: lowercased


async def test_unachievable_task_uses_ua_match(
    lite_tasks: list[Task], wa_sites: WebArenaSites, judge_server: FakeJudge
) -> None:
    t114 = _by_id(lite_tasks)[114]  # fuzzy_match "N/A", string_note "System message: We
    # cannot add order history."
    assert await _score(t114, "N/A", wa_sites) == 1.0
    assert judge_server.requests == []  # N/A itself needs no judge
    reason = "I cannot add a comment to the order history"
    assert await _score(t114, reason, wa_sites) == 1.0
    prompt = judge_server.requests[-1]["body"]["messages"][-1]["content"]
    assert "actual unachievable reason: System message: We cannot add order history." in prompt
    assert await _score(t114, "Done, the comment was added", wa_sites) == 0.0


async def test_no_judge_is_a_clear_error(lite_tasks: list[Task]) -> None:
    t3 = _by_id(lite_tasks)[3]
    with pytest.raises(JudgeNotConfiguredError, match="WA_JUDGE_BASE_URL"):
        await _score(t3, "driving: 13min", WebArenaSites(URLS))


async def test_string_note_overrides_earlier_failures_as_webarena() -> None:
    # WebArena *sets* the score in the N/A branch (it does not multiply).
    class Same:
        async def ua_match(self, pred: str, reference: str, question: str) -> bool:
            return True

    ev = {"reference_answers": {"exact_match": "x", "fuzzy_match": "N/A"}, "string_note": "r"}
    score, _ = await string_match("y", ev, "q", Same())  # type: ignore[arg-type]
    assert score == 1.0


# -- url_match ------------------------------------------------------------------------------


def test_url_match_gold_in_pred() -> None:
    ref = "http://r/f/machinelearning |OR| http://r/f/singularity |OR| http://r/f/technology"
    assert url_match("http://r/f/singularity/", ref) == 1.0
    assert url_match("http://r/f/technology/134852/ai-experts", ref) == 1.0
    assert url_match("http://r/f/gaming", ref) == 0.0
    # Substring containment, as WebArena: /product/12 accepts /product/123.
    assert url_match("http://s/product/123", "http://s/product/12") == 1.0
    # Queries: decoded and compared by value; extra parameters are fine.
    search = "http://s/catalogsearch/result/?q=switch+accessories"
    assert url_match("http://s/catalogsearch/result/?q=switch%20accessories&p=2", search) == 1.0
    assert url_match("http://s/catalogsearch/result/?q=switch", search) == 0.0
    issues = "http://g/a/b/-/issues/?sort=created_date&label_name%5B%5D=question"
    assert url_match("http://g/a/b/-/issues/?label_name[]=question&sort=created_date", issues)
    assert url_match("http://g/a/b/-/issues/?label_name[]=bug&sort=created_date", issues) == 0.0
    # Only a trailing "/" of the whole URL is dropped: "/issues/?…" wants "/issues/" (WebArena).
    assert url_match("http://g/a/b/-/issues?label_name[]=question&sort=created_date", issues) == 0
    with pytest.raises(ValueError, match="EXACT"):
        url_match("http://a", "http://a", "EXACT")


async def test_url_match_tasks_resolve_placeholders(lite_tasks: list[Task]) -> None:
    sites = WebArenaSites(URLS, scoring="webarena")
    t66 = _by_id(lite_tasks)[66]  # __SHOPPING__/catalogsearch/result/?q=switch+accessories
    found = (
        "http://shop.test:7770/catalogsearch/result/?q=switch+accessories&product_list_order=name"
    )
    assert await _score(t66, None, sites, url=found) == 1.0
    other_shop = "http://elsewhere:7770/catalogsearch/result/?q=switch+accessories"
    assert await _score(t66, None, sites, url=other_shop) == 0.0
    assert await _score(t66, None, sites, url=found.replace("switch", "xbox")) == 0.0
    # Task 45: string_match (exact "Yes") then url_match; both must pass.
    t45 = _by_id(lite_tasks)[45]
    issue = "http://gitlab.test:8023/a11yproject/a11yproject.com/-/issues/719"
    assert await _score(t45, "yes", sites, url=issue) == 1.0
    assert await _score(t45, "yes", sites, url=issue.replace("719", "71")) == 0.0
    assert await _score(t45, "no", sites, url=issue) == 0.0


async def test_evaluate_needs_webarena_sites(lite_tasks: list[Task]) -> None:
    from webagent_r1.config import ConfigError
    from webagent_r1.grading.base import StaticSites

    ctx = EvalContext(
        task=lite_tasks[0],
        answer="x",
        session=None,
        url="",
        instance_id=None,
        backend=StaticSites(),
    )
    with pytest.raises(ConfigError, match="WebArenaSites"):
        await evaluate(ctx)
