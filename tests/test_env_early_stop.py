"""``env.early_stop_after``: an episode ends after k unparsable or k identical actions in a
row, graded as at its turn budget (the paper's evaluation: 5); off by default."""

from __future__ import annotations

import pytest

from webagent_r1.browser import Browser
from webagent_r1.config import ConfigError, EnvConfig
from webagent_r1.grading.base import StaticSites
from webagent_r1.rollout.env import WebEnv, early_stop_reason

from .test_env import _answer_is_12, _task


def test_the_reason_needs_k_in_a_row() -> None:
    assert early_stop_reason([None] * 5, 0) is None  # off
    assert early_stop_reason([None] * 4, 5) is None  # not yet
    assert early_stop_reason(["a", None, None, None, None, None], 5) == (
        "5 unparsable actions in a row"
    )
    assert early_stop_reason(["b", "a", "a", "a", "a", "a"], 5) == "5 identical actions in a row"
    assert early_stop_reason(["a", "a", "b", "a", "a"], 5) is None  # broken run
    assert early_stop_reason(["a", "a", None, "a", "a"], 5) is None  # mixed
    assert EnvConfig().early_stop_after == 0
    with pytest.raises(ConfigError, match="early_stop_after"):
        EnvConfig(early_stop_after=-1)


browser_test = pytest.mark.browser


@browser_test
async def test_an_episode_stops_after_repeated_or_unparsable_actions(
    browser: Browser, site: str
) -> None:
    env = WebEnv(
        browser, EnvConfig(max_turns=30, early_stop_after=3), backend=StaticSites({"fixture": site})
    )
    try:
        await env.reset(_task(_answer_is_12))
        steps = [await env.step("no action here") for _ in range(3)]
        assert [r.done for r in steps] == [False, False, True]
        assert steps[-1].info["early_stop"] == "3 unparsable actions in a row"
        assert steps[-1].info["status"] == "max_turns" and steps[-1].reward == 0.0
        await env.reset(_task(_answer_is_12))
        scroll = '<answer>do(action="Scroll Down")</answer>'
        first = await env.step(scroll)
        other = await env.step('<answer>do(action="Scroll Up")</answer>')
        assert not first.done and not other.done
        steps = [await env.step(scroll) for _ in range(3)]
        assert [r.done for r in steps] == [False, False, True]
        assert steps[-1].info["early_stop"] == "3 identical actions in a row"
        assert env.turn == 5  # well before the 30-turn budget
    finally:
        await env.close()


@browser_test
async def test_without_the_setting_only_the_budget_ends_an_episode(
    browser: Browser, site: str
) -> None:
    env = WebEnv(browser, EnvConfig(max_turns=6), backend=StaticSites({"fixture": site}))
    try:
        await env.reset(_task(_answer_is_12))
        steps = [await env.step("no action here") for _ in range(6)]
        assert [r.done for r in steps] == [False] * 5 + [True]
        assert "early_stop" not in steps[-1].info
    finally:
        await env.close()
