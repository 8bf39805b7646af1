"""WebEnv over real Chromium and local fixture pages: episode lifecycle, errors, crashes."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time

import pytest

from webagent_r1.browser import Browser, BrowserCrashedError
from webagent_r1.config import EnvConfig
from webagent_r1.grading.base import EnvError, EvalContext, StaticSites
from webagent_r1.grading.embedded import evaluate
from webagent_r1.rollout.env import WebEnv
from webagent_r1.types import Task

from .browser.test_browser_safety import _pids_with
from .conftest import browser_config

pytestmark = pytest.mark.browser


def _task(evaluator=None, start: str = "__FIXTURE__/index.html") -> Task:
    return Task(
        task_id="t",
        intent="Find the price of the red mug.",
        start_url=start,
        sites=["fixture"],
        evaluator=evaluator,
    )


def _answer_is_12(ctx: EvalContext) -> tuple[float, str]:
    ok = ctx.answer == "$12.00"
    return (1.0 if ok else 0.0), f"answer {ctx.answer!r}"


@pytest.fixture
async def env(browser: Browser, site: str):
    e = WebEnv(browser, EnvConfig(max_turns=3), backend=StaticSites({"fixture": site}))
    yield e
    await e.close()


async def test_reset_observes_start_page(env: WebEnv, site: str) -> None:
    obs = await env.reset(_task())
    assert obs.url == f"{site}/index.html" and obs.title == "Test Shop"
    assert '[1] link "Orbit Golden Charger"' in obs.text and obs.error is None


async def test_exit_ends_episode_with_evaluator_reward(env: WebEnv) -> None:
    await env.reset(_task(_answer_is_12))
    r = await env.step(
        '<think>The table says $12.00.</think><answer>exit(message="$12.00")</answer>'
    )
    assert r.done and r.reward == 1.0
    assert r.info["status"] == "done" and r.info["answer"] == "$12.00"
    await env.reset(_task(_answer_is_12))
    r = await env.step('<answer>exit(message="$13")</answer>')
    assert r.done and r.reward == 0.0 and "'$13'" in r.info["explanation"]


async def test_exit_after_a_failed_action_carries_no_error(env: WebEnv) -> None:
    """The failed click's error is shown for one turn; the exit after it did not fail, so
    neither its observation nor its recorded turn says it did."""
    await env.reset(_task(_answer_is_12))
    r1 = await env.step('<answer>do(action="Click", element="999")</answer>')
    assert r1.observation.error == "element 999 not found on the page"
    r2 = await env.step('<answer>exit(message="$12.00")</answer>')
    assert r2.done and r2.reward == 1.0 and r2.observation.error is None
    assert r2.observation.title == r1.observation.title  # the same page, ended on


async def test_bad_actions_cost_a_turn_and_never_raise(env: WebEnv) -> None:
    await env.reset(_task(_answer_is_12))
    r1 = await env.step("I think I should click something")  # no <answer>
    assert not r1.done and r1.observation.error and "answer" in r1.observation.error
    assert r1.observation.title == "Test Shop"  # page unchanged, still shown
    r2 = await env.step('<answer>do(action="Click", element="999")</answer>')
    assert not r2.done and "999" in r2.observation.error
    r3 = await env.step('<answer>do(action="Klick", element="1")</answer>')
    assert r3.done and r3.info["status"] == "max_turns" and r3.reward == 0.0
    assert r3.info["answer"] is None and r3.info["explanation"] == "answer None"
    with pytest.raises(RuntimeError, match="reset"):
        await env.step("<answer>go_backward()</answer>")


async def test_actions_change_the_page(env: WebEnv) -> None:
    first = await env.reset(_task())
    r = await env.step('<answer>do(action="Click", element="1")</answer>')
    assert r.observation.error is None and r.observation.title == "Orbit Golden Charger"
    line = next(ln for ln in first.text.splitlines() if ln.strip().startswith("[1] "))
    assert r.info["target"] == line.strip()[4:] and "Orbit Golden Charger" in r.info["target"]
    r = await env.step("<answer>go_backward()</answer>")
    assert r.observation.title == "Test Shop" and "target" not in r.info


async def test_the_grader_flags_a_correct_answer_no_page_showed(env: WebEnv) -> None:
    """The embedded suite's grader records whether the answer stood on a page of the episode
    (any page, not only the last); a right answer no page showed is a guess, flagged."""

    def priced(answer: str) -> Task:
        ev = {"eval_types": ["string_match"], "reference_answers": {"exact_match": answer}}
        return dataclasses.replace(_task(evaluate), eval=ev)

    await env.reset(priced("$25.00"))  # the product page's price, seen on the way
    await env.step('<answer>do(action="Click", element="1")</answer>')
    await env.step("<answer>go_backward()</answer>")
    r = await env.step('<answer>exit(message="$25.00")</answer>')
    assert r.reward == 1.0 and r.info["answer_shown"] is True
    assert r.info["explanation"] == "string_match: ok"
    await env.reset(priced("$99.50"))  # on no page of the fixture site
    r = await env.step('<answer>exit(message="$99.50")</answer>')
    assert r.reward == 1.0 and r.info["answer_shown"] is False
    assert "no page the agent was shown" in r.info["explanation"]
    await env.reset(priced("$99.50"))
    r = await env.step('<answer>exit(message="$12.00")</answer>')  # shown, but wrong
    assert r.reward == 0.0 and r.info["answer_shown"] is True
    await env.reset(_task(_answer_is_12))  # not the suite's grader: nothing recorded
    r = await env.step('<answer>exit(message="$12.00")</answer>')
    assert r.reward == 1.0 and "answer_shown" not in r.info


async def test_allow_list_comes_from_the_task_sites(env: WebEnv, other_site: str) -> None:
    await env.reset(_task())
    r = await env.step('<answer>exit(message="x")</answer>')  # no evaluator: reward 0
    assert r.reward == 0.0 and "no evaluator" in r.info["explanation"]
    await env.reset(_task())
    err = await env.session.goto(f"{other_site}/index.html")
    assert err and "blocked" in err


async def test_grade_at_turns_grades_a_running_episode_as_that_budget_would(
    browser: Browser, site: str
) -> None:
    calls: list[str] = []

    def on_product_page(ctx: EvalContext) -> tuple[float, str]:
        calls.append(ctx.url)
        if len(calls) == 2:  # the second grade's first try: the site could not be read
            raise EnvError("database locked")
        ok = ctx.session.page.url.endswith("/product.html") and ctx.answer is None
        return (1.0 if ok else 0.0), f"at {ctx.session.page.url}"

    env = WebEnv(
        browser,
        EnvConfig(max_turns=4, grade_at_turns=[1, 2, 4]),
        backend=StaticSites({"fixture": site}),
    )
    try:
        await env.reset(_task(on_product_page))
        r1 = await env.step('<answer>do(action="Click", element="1")</answer>')
        assert not r1.done and r1.info["graded"]["turn"] == 1
        assert r1.observation.url.endswith("/product.html") and r1.info["graded"]["reward"] == 1.0
        r2 = await env.step("<answer>go_backward()</answer>")  # graded, the fault tried again
        assert not r2.done and r2.info["graded"]["reward"] == 0.0 and len(calls) == 3
        assert r2.observation.title == "Test Shop"  # grading left the agent's tab alone
        r3 = await env.step("nothing")  # turn 3 is not in grade_at_turns
        assert "graded" not in r3.info and len(calls) == 3
        r4 = await env.step("nothing")  # the last turn: graded once, by the episode's end
        assert r4.done and r4.info["status"] == "max_turns" and "graded" not in r4.info
        assert len(calls) == 4
    finally:
        await env.close()


async def test_a_crash_while_grading_mid_episode_ends_it_as_env_error(
    browser: Browser, site: str
) -> None:
    def crashed(ctx: EvalContext) -> float:
        raise EnvError("browser fault") from BrowserCrashedError("the page died")

    env = WebEnv(
        browser, EnvConfig(max_turns=4, grade_at_turns=[1]), backend=StaticSites({"fixture": site})
    )
    try:
        await env.reset(_task(crashed))
        r = await env.step('<answer>do(action="Click", element="1")</answer>')
        assert r.done and r.info["status"] == "env_error" and "the page died" in r.info["error"]
    finally:
        await env.close()


async def test_unreachable_start_page_is_an_env_error(env: WebEnv) -> None:
    with pytest.raises(EnvError, match="start page"):
        await env.reset(_task(start="http://127.0.0.1:9/nothing"))
    assert env.done


async def test_browser_crash_is_env_error_then_recovers(site: str) -> None:
    async with await Browser.launch(browser_config()) as browser:
        env = WebEnv(browser, EnvConfig(max_turns=5), backend=StaticSites({"fixture": site}))
        await env.reset(_task())
        for pid in _pids_with(browser.instance_marker):
            os.kill(pid, signal.SIGKILL)
        r = await env.step('<answer>do(action="Click", element="1")</answer>')
        assert r.done and r.info["status"] == "env_error" and r.reward == 0.0
        # The next reset relaunches Chromium and the episode works.
        obs = await env.reset(_task(_answer_is_12))
        assert obs.title == "Test Shop" and browser.launches == 2
        r = await env.step('<answer>exit(message="$12.00")</answer>')
        assert r.reward == 1.0
        await env.close()


async def _never(*_args, **_kwargs) -> None:
    """A browser call that never returns (as after Chromium was killed mid-call)."""
    await asyncio.Event().wait()


def _hang_timeout(browser: Browser, seconds: float) -> None:
    """Set ``browser.hang_timeout_s``: 1 s only around the injected hang (a loaded machine can
    take longer than that over a healthy reset)."""
    browser.cfg = dataclasses.replace(browser.cfg, hang_timeout_s=seconds)


async def test_a_hung_context_open_is_an_env_error_and_relaunches(site: str) -> None:
    async with await Browser.launch(browser_config()) as browser:
        env = WebEnv(browser, EnvConfig(max_turns=5), backend=StaticSites({"fixture": site}))
        browser._browser.new_context = _never  # this Chromium stops answering
        _hang_timeout(browser, 1.0)
        t0 = time.monotonic()
        with pytest.raises(EnvError, match="hang_timeout_s"):
            await env.reset(_task())
        assert time.monotonic() - t0 < 10 and not browser.is_alive
        _hang_timeout(browser, 60.0)
        # the next reset relaunches Chromium (the hung one is closed or killed) and works
        obs = await env.reset(_task(_answer_is_12))
        assert obs.title == "Test Shop" and browser.launches == 2
        r = await env.step('<answer>exit(message="$12.00")</answer>')
        assert r.reward == 1.0
        await env.close()


async def test_browser_exchanges_take_turns_beyond_the_concurrency(site: str) -> None:
    """Six resets at once on a Chromium with browser.concurrency 2: two open at a time."""
    cfg = dataclasses.replace(browser_config(), concurrency=2)
    assert Browser(browser_config()).concurrency == 4 * (os.cpu_count() or 1)
    async with await Browser.launch(cfg) as browser:
        inflight = peak = 0
        real = browser.new_session

        async def counting(*args: object, **kwargs: object) -> object:
            nonlocal inflight, peak
            inflight += 1
            peak = max(peak, inflight)
            try:
                await asyncio.sleep(0.2)
                return await real(*args, **kwargs)
            finally:
                inflight -= 1

        browser.new_session = counting
        envs = [
            WebEnv(browser, EnvConfig(max_turns=3), backend=StaticSites({"fixture": site}))
            for _ in range(6)
        ]
        observations = await asyncio.gather(*(env.reset(_task()) for env in envs))
        assert peak == 2 and all(o.title == "Test Shop" for o in observations)
        for env in envs:
            await env.close()


async def test_a_slow_exchange_is_not_a_hang_while_chromium_answers(site: str) -> None:
    """A loaded machine: the exchange outlasts hang_timeout_s but Chromium answers its
    probes, so it runs to the end and Chromium is not relaunched."""
    async with await Browser.launch(browser_config()) as browser:
        _hang_timeout(browser, 0.5)
        t0 = time.monotonic()
        async with browser.hang_bound("a slow exchange"):
            await asyncio.sleep(1.6)  # more than three probes
        assert time.monotonic() - t0 >= 1.6 and browser.is_alive and browser.launches == 1


async def test_an_exchange_is_given_up_when_chromium_stops_answering(site: str) -> None:
    async with await Browser.launch(browser_config()) as browser:

        async def no_answer(_browser: object) -> bool:
            return False

        browser._ping = no_answer  # Chromium answers no probe
        _hang_timeout(browser, 0.5)
        t0 = time.monotonic()
        with pytest.raises(BrowserCrashedError, match="did not answer a probe"):
            async with browser.hang_bound("an exchange"):
                await asyncio.sleep(30)
        assert time.monotonic() - t0 < 5 and not browser.is_alive


async def test_a_hung_action_ends_the_episode_as_env_error(site: str) -> None:
    async with await Browser.launch(browser_config()) as browser:
        env = WebEnv(browser, EnvConfig(max_turns=5), backend=StaticSites({"fixture": site}))
        await env.reset(_task())
        env.session.execute = _never
        _hang_timeout(browser, 1.0)
        t0 = time.monotonic()
        r = await env.step('<answer>do(action="Click", element="1")</answer>')
        assert time.monotonic() - t0 < 20
        assert r.done and r.info["status"] == "env_error" and "hang_timeout_s" in r.info["error"]
        _hang_timeout(browser, 60.0)
        obs = await env.reset(_task())
        assert obs.title == "Test Shop" and browser.launches == 2
        await env.close()
