"""What the evaluator does when something breaks: a failure of the infrastructure (judge,
helper site, page) is an ``EnvError`` (the episode is an env error); under ``webarena`` a bug
propagates and a malformed eval spec is a 0 with the reason, under ``vab`` both are env
errors with the reason (VisualAgentBench records an error and reruns the task)."""

from __future__ import annotations

import dataclasses

import pytest
from playwright.async_api import Error as PlaywrightError

from tests.webarena.conftest import FakeJudge, by_id, score
from webagent_r1.browser import Browser, BrowserCrashedError
from webagent_r1.grading.base import EnvError, EvalContext
from webagent_r1.sources.webarena import (
    HelperError,
    JudgeError,
    OpenAIJudge,
    WebArenaSites,
    evaluate,
)
from webagent_r1.sources.webarena import grading as ev_mod
from webagent_r1.types import Task

URLS = {"gitlab": "http://gitlab.test:8023", "map": "http://map.test:3000"}


def _boom(exc: Exception):  # noqa: ANN202 - any rule signature
    def rule(*args: object) -> bool:
        raise exc

    return rule


@pytest.mark.parametrize("exc", [TypeError("bad operand"), KeyError("eval")])
async def test_code_errors_propagate_under_webarena_and_are_env_errors_under_vab(
    lite_tasks: list[Task], monkeypatch: pytest.MonkeyPatch, exc: Exception
) -> None:
    task = by_id(lite_tasks)[27]  # exact_match "N/A"
    for scoring in ("vab", "webarena"):
        broken = dataclasses.replace(ev_mod.RULES[scoring], exact_match=_boom(exc))
        monkeypatch.setitem(ev_mod.RULES, scoring, broken)
    with pytest.raises(type(exc)):
        await score(task, "N/A", WebArenaSites(URLS, scoring="webarena"))
    # VAB's run.py records any exception of its evaluator as an error and reruns the task.
    with pytest.raises(EnvError, match=f"string_match: the evaluator raised {type(exc).__name__}"):
        await score(task, "N/A", WebArenaSites(URLS))


def _ctx(task: Task, sites: WebArenaSites) -> EvalContext:
    return EvalContext(
        task=task, answer="Yes", session=None, url=URLS["gitlab"], instance_id=None, backend=sites
    )


async def test_malformed_spec_scores_zero_under_webarena_env_error_under_vab(
    lite_tasks: list[Task],
) -> None:
    task = dataclasses.replace(by_id(lite_tasks)[45])
    task.eval = {**task.eval, "url_note": "SAME HOST"}  # past validation: a spec we lack
    result = await evaluate(_ctx(task, WebArenaSites(URLS, scoring="webarena")))
    assert result.reward == 0.0 and "bad eval spec" in result.explanation
    assert "SAME HOST" in result.explanation
    # VAB's URLExactEvaluator raises ValueError("Unknown matching rule: …"): an error.
    with pytest.raises(EnvError, match="url_match: the evaluator raised ValueError.*SAME HOST"):
        await evaluate(_ctx(task, WebArenaSites(URLS)))


async def test_judge_without_verdict_is_an_env_error(
    lite_tasks: list[Task], wa_sites: WebArenaSites, judge_server: FakeJudge
) -> None:
    judge_server.reply_override = "I would rather not say."
    with pytest.raises(JudgeError, match="no verdict"):
        await score(by_id(lite_tasks)[3], "driving: 13min, walking: 1h 45min", wa_sites)


async def test_unreachable_judge_is_an_env_error(lite_tasks: list[Task]) -> None:
    judge = OpenAIJudge("http://127.0.0.1:9/v1", "m", max_retries=0, timeout_s=2.0)
    sites = WebArenaSites(URLS, judge=judge)
    with pytest.raises(JudgeError, match="failed 1 times") as e:
        await score(by_id(lite_tasks)[3], "driving: 13min", sites)
    assert isinstance(e.value, EnvError)


async def _page_reward(browser: Browser, task: Task, sites: WebArenaSites, close: bool) -> float:
    session = await browser.new_session()
    try:
        if close:
            await session.page.close()
        ctx = EvalContext(
            task=task,
            answer=None,
            session=session,
            url="about:blank",
            instance_id=None,
            backend=sites,
        )
        return (await evaluate(ctx)).reward
    finally:
        await session.close()


@pytest.mark.browser
async def test_unreachable_helper_site_is_an_env_error_task_117(
    browser: Browser, lite_tasks: list[Task]
) -> None:
    # url func:shopping_get_latest_order_url(): the shop's REST API does not answer.
    sites = WebArenaSites({"shopping": "http://127.0.0.1:9"})
    with pytest.raises(HelperError, match="REST API"):
        await _page_reward(browser, by_id(lite_tasks)[117], sites, close=False)


@pytest.mark.browser
async def test_page_that_cannot_be_read_is_an_env_error_task_29(
    browser: Browser, lite_tasks: list[Task], monkeypatch: pytest.MonkeyPatch
) -> None:
    # url "last", empty locator: the page's HTML.
    sites = WebArenaSites({"shopping": "http://127.0.0.1:9"})
    task = by_id(lite_tasks)[29]
    assert await _page_reward(browser, task, sites, close=False) == 0.0  # a blank page
    with pytest.raises(BrowserCrashedError):  # the tab is gone: the env's crash path
        await _page_reward(browser, task, sites, close=True)

    async def fails(*args: object) -> str:
        raise PlaywrightError("Target page, context or browser has been closed")

    monkeypatch.setattr(ev_mod, "select_content", fails)
    with pytest.raises(EnvError, match="reading the page failed: Target page"):
        await _page_reward(browser, task, sites, close=False)
