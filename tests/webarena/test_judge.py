"""The fuzzy_match judge over an OpenAI-compatible endpoint (a local fake server)."""

from __future__ import annotations

import pytest

from tests.webarena.conftest import FakeJudge
from webagent_r1.grading.base import EnvError
from webagent_r1.sources.webarena import JudgeError, JudgeNotConfiguredError, OpenAIJudge
from webagent_r1.sources.webarena.judge import fuzzy_verdict, ua_verdict


def test_verdicts_read_as_webarena() -> None:
    assert fuzzy_verdict("The answer is correct.") is True
    assert fuzzy_verdict("Partially correct: it misses the year") is False
    assert fuzzy_verdict("INCORRECT") is False
    assert ua_verdict("Same.") is True
    assert ua_verdict("They are different") is False
    with pytest.raises(JudgeError, match="no verdict"):
        fuzzy_verdict("I am not sure")
    with pytest.raises(JudgeError, match="no verdict"):
        ua_verdict("maybe")


def test_from_env() -> None:
    assert OpenAIJudge.from_env({}) is None
    j = OpenAIJudge.from_env(
        {"WA_JUDGE_BASE_URL": "http://h/v1/", "WA_JUDGE_MODEL": "m", "OPENAI_API_KEY": "k"}
    )
    assert j is not None and (j.base_url, j.model, j.api_key) == ("http://h/v1", "m", "k")
    j = OpenAIJudge.from_env({"WA_JUDGE_MODEL": "m"}, base_url="http://x/v1", api_key="a")
    assert j is not None and (j.base_url, j.api_key) == ("http://x/v1", "a")
    with pytest.raises(JudgeNotConfiguredError, match="set WA_JUDGE_MODEL"):
        OpenAIJudge.from_env({"WA_JUDGE_BASE_URL": "http://h/v1"})
    with pytest.raises(JudgeNotConfiguredError, match="set WA_JUDGE_BASE_URL"):
        OpenAIJudge.from_env({"WA_JUDGE_MODEL": "m"})


async def test_judge_calls_the_endpoint(judge_server: FakeJudge) -> None:
    judge = OpenAIJudge(judge_server.base_url, "judge-model")
    assert await judge.fuzzy_match("the hilton, 1.4km", "hilton, 1.4km", "where?") is True
    assert await judge.fuzzy_match("the marriott", "hilton", "where?") is False
    body = judge_server.requests[0]["body"]
    assert judge_server.requests[0]["auth"] is None  # no key: no header
    assert body["model"] == "judge-model" and body["max_tokens"] == 768
    assert body["messages"][0] == {"role": "system", "content": "You are a helpful assistant"}
    assert await judge.ua_match("the product does not exist", "product missing", "buy x") is True


async def test_judge_retries_then_fails_clearly(judge_server: FakeJudge) -> None:
    judge = OpenAIJudge(judge_server.base_url, "m", max_retries=2, backoff_s=0.01)
    judge_server.fail_next = 2
    assert await judge.fuzzy_match("a", "a", "q") is True  # two 503s, then an answer
    judge_server.fail_next = 3
    with pytest.raises(JudgeError, match="failed 3 times; last: HTTP 503"):
        await judge.fuzzy_match("a", "a", "q")
    bad_route = OpenAIJudge(judge_server.base_url.removesuffix("/v1") + "/nope", "m")
    with pytest.raises(JudgeError, match="HTTP 404"):
        await bad_route.fuzzy_match("a", "a", "q")
    judge_server.reply_override = "Hmm."
    with pytest.raises(JudgeError, match="no verdict"):
        await judge.fuzzy_match("a", "a", "q")
    assert issubclass(JudgeError, EnvError)  # an env error for the episode, not a 0


async def test_unreachable_judge(judge_server: FakeJudge) -> None:
    judge = OpenAIJudge("http://127.0.0.1:9/v1", "m", max_retries=1, backoff_s=0.01, timeout_s=2)
    with pytest.raises(JudgeError, match="failed 2 times"):
        await judge.fuzzy_match("a", "a", "q")
