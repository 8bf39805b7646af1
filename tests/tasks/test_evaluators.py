"""Evaluators: one passing and one failing case per eval type (WebArena semantics).

string_match is pure; url_match, program_html and state_match run against a real embedded
site instance in real Chromium.
"""

from __future__ import annotations

import dataclasses

import pytest

from webagent_r1.config import EnvConfig
from webagent_r1.grading.base import EvalContext
from webagent_r1.grading.embedded import (
    answer_shown,
    evaluate,
    exact_match,
    fuzzy_match_normalised,
    must_include,
    normalize,
    url_matches,
)
from webagent_r1.rollout.env import WebEnv
from webagent_r1.types import Task


def _ctx(task: Task, answer: str | None) -> EvalContext:
    return EvalContext(
        task=task, answer=answer, session=None, url="", instance_id=None, backend=None
    )


def _task(ev: dict, **kw) -> Task:
    return Task(
        task_id="t", intent="q", start_url="__SHOPPING__/", sites=["shopping"], eval=ev, **kw
    )


def test_normalize() -> None:
    assert normalize('  "$1,234.50". ') == "$1234.50"
    assert normalize("Café  Noir") == "cafe noir"


def test_answer_shown() -> None:
    page = "Order #000000319\nGrand Total: $1,234.50\nCustomer: José Núñez"
    assert answer_shown("$1234.50", [page])  # thousands separator dropped on both sides
    assert answer_shown("jose nunez", ["q", page])  # case and accents
    assert not answer_shown("$234.50", [page])  # inside a longer number
    assert not answer_shown("000000319 ", ["Order #0000003190"])
    assert not answer_shown("2.3 km", [page, "From Riverton"])  # a guess
    assert answer_shown("José Núñez, $1,234.50", ["x", page])  # a list: every part shown
    assert answer_shown("Alice and Bob", ["alice wrote", "then bob"])  # parts on two pages
    assert not answer_shown("Alice and Carol", ["alice wrote", "then bob"])
    assert not answer_shown("", [page]) and not answer_shown(None, [page])
    assert not answer_shown("x", [])


async def test_evaluate_flags_a_right_answer_no_page_showed() -> None:
    t = _task({"eval_types": ["string_match"], "reference_answers": {"exact_match": "$14.99"}})
    seen = dataclasses.replace(_ctx(t, "$14.99"), shown=["q", "Grand Total $14.99"])
    r = await evaluate(seen)
    assert (r.reward, r.answer_shown, r.explanation) == (1.0, True, "string_match: ok")
    guess = dataclasses.replace(seen, shown=["q", "Grand Total $15.99"])
    r = await evaluate(guess)
    assert r.reward == 1.0 and r.answer_shown is False
    assert r.explanation == "string_match: ok; the answer stood on no page the agent was shown"
    r = await evaluate(dataclasses.replace(guess, answer="$15.99"))  # wrong: no note
    assert r.reward == 0.0 and r.answer_shown is True and "no page" not in r.explanation
    r = await evaluate(dataclasses.replace(guess, answer=None))
    assert r.reward == 0.0 and r.answer_shown is None


def test_matchers() -> None:
    assert exact_match("$12.00", "$12.00 ")
    assert not exact_match("$12.00", "$12.01")
    assert must_include("It was shipped on Jan 3", ["shipped", "jan 3"])
    assert not must_include("It was shipped", ["shipped", "jan 3"])
    assert must_include("color: red", ["blue |OR| red"])
    assert fuzzy_match_normalised("The answer is Lumen Charger", "lumen charger")
    assert not fuzzy_match_normalised("Lumen Charger or Volt Cable", "lumen charger")
    assert not fuzzy_match_normalised("", "lumen charger")
    assert url_matches("http://h:1/search?q=mug&sort=price_asc&p=1", "http://h:1/search?q=mug")
    assert not url_matches("http://h:1/search?q=cup", "http://h:1/search?q=mug")
    assert not url_matches("http://h:1/cart", "http://h:1/search")
    assert not url_matches("http://h:1/product/123", "http://h:1/product/12")
    assert url_matches("http://h:1/product/12/", "http://h:1/product/12")
    assert url_matches("http://h:1/category/a/b", "http://h:1/category/a")


async def test_string_match_pass_and_fail() -> None:
    t = _task({"eval_types": ["string_match"], "reference_answers": {"exact_match": "$9.99"}})
    assert (await evaluate(_ctx(t, "$9.99"))).reward == 1.0
    res = await evaluate(_ctx(t, "$10.99"))
    assert res.reward == 0.0 and "$10.99" in res.explanation
    res = await evaluate(_ctx(t, None))
    assert res.reward == 0.0 and "no answer" in res.explanation


async def test_malformed_spec_is_a_task_error_not_a_reward() -> None:
    """A spec the evaluators cannot run is a bug in the task: never a reward of 0 to train on."""
    from webagent_r1.tasks import TaskError

    with pytest.raises(TaskError, match="unknown eval type"):
        await evaluate(_ctx(_task({"eval_types": ["nonsense"]}), "x"))
    with pytest.raises(TaskError, match="url_match needs"):
        await evaluate(_ctx(_task({"eval_types": ["url_match"]}), "x"))


@pytest.fixture
async def env(browser, embedded_sites):
    e = WebEnv(browser, EnvConfig(max_turns=5), backend=embedded_sites, evaluator=evaluate)
    yield e
    await e.close()


def _product(embedded_sites) -> tuple[int, str]:
    import sqlite3

    from webagent_r1.sites import SITES

    conn = sqlite3.connect(SITES["shopping"].backend.ensure_pristine())
    row = conn.execute(
        "SELECT id, name FROM products WHERE status='enabled' ORDER BY id LIMIT 1"
    ).fetchone()
    conn.close()
    return int(row[0]), str(row[1])


@pytest.mark.browser
async def test_url_match_pass_and_fail(env, embedded_sites) -> None:
    pid, _ = _product(embedded_sites)
    ev = {"eval_types": ["url_match"], "reference_url": f"__SHOPPING__/product/{pid}"}
    good = _task(ev)
    good.start_url = f"__SHOPPING__/product/{pid}"
    await env.reset(good)
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.done and r.reward == 1.0, r.info
    bad = _task(ev)  # starts (and stays) on the home page
    await env.reset(bad)
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.done and r.reward == 0.0 and "does not match" in r.info["explanation"]


@pytest.mark.browser
async def test_program_html_pass_and_fail(env, embedded_sites) -> None:
    pid, name = _product(embedded_sites)
    spec = [
        {
            "url": f"__SHOPPING__/product/{pid}",
            "locator": "document.querySelector('h1').outerText",
            "required_contents": {"exact_match": name},
        }
    ]
    t = _task({"eval_types": ["program_html"], "program_html": spec})
    await env.reset(t)
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.reward == 1.0, r.info
    spec[0]["required_contents"] = {"must_include": ["definitely not on the page"]}
    await env.reset(t)
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.reward == 0.0 and "lacks" in r.info["explanation"]


@pytest.mark.browser
async def test_state_match_pass_and_fail(env, embedded_sites) -> None:
    pid, _ = _product(embedded_sites)
    checks = [
        {
            "site": "shopping",
            "sql": "SELECT price FROM products WHERE id = ?",
            "params": [pid],
            "expected": 1.23,
            "description": "price changed to $1.23",
        }
    ]
    t = _task({"eval_types": ["state_match"], "state_checks": checks}, user="emma.lopez")
    # Pass: change the episode's own instance (as a successful agent would) before exit.
    await env.reset(t)
    conn = embedded_sites.running.connect("shopping", env.instance_id, readonly=False)
    conn.execute("UPDATE products SET price = 1.23 WHERE id = ?", (pid,))
    conn.commit()
    conn.close()
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.reward == 1.0, r.info
    # Fail: a fresh episode gets a fresh instance, where the price is the pristine one.
    await env.reset(t)
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.reward == 0.0 and "price changed" in r.info["explanation"]
