"""The LLM judge of WebArena's ``fuzzy_match``, over any OpenAI-compatible chat endpoint.

WebArena grades free-form answers with GPT-4 (``gpt-4-1106-preview``, temperature 0):
``fuzzy_match`` asks whether an answer is semantically equivalent to the reference
("correct" / "incorrect" / "partially correct"; only "correct" passes), and for tasks whose
reference is ``N/A`` ``ua_match`` asks whether the agent's reason for giving up matches the
real one ("same" / "different"). The prompts below are WebArena's, word for word, so scores
stay comparable; the fuzzy_match prompt comes in two endings (``FUZZY_PROMPTS``): WebArena's
("Conclude the judgement by correct/incorrect/partially correct.") and VisualAgentBench's,
which asks for the verdict alone (a judge that explains itself may write "incorrect" while
calling the answer correct, and any reply containing "incorrect" fails). The model and
endpoint are the user's choice.

Settings come from arguments or the environment: ``WA_JUDGE_BASE_URL`` (e.g.
``https://api.openai.com/v1`` or a local vLLM ``http://127.0.0.1:8000/v1``), ``WA_JUDGE_MODEL``
and ``WA_JUDGE_API_KEY`` (default ``$OPENAI_API_KEY``; none for a local server).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from webagent_r1.config import ConfigError
from webagent_r1.grading.base import EnvError

ENV_BASE_URL = "WA_JUDGE_BASE_URL"
ENV_MODEL = "WA_JUDGE_MODEL"
ENV_API_KEY = "WA_JUDGE_API_KEY"
WEBARENA_JUDGE_MODEL = "gpt-4-1106-preview"
"""The model WebArena's published scores used."""


class JudgeNotConfiguredError(ConfigError):
    """A task needs the LLM judge and none is configured."""


class JudgeError(EnvError):
    """The judge endpoint failed or gave no verdict (the episode is an env error, not a 0)."""


def not_configured_message(n_tasks: int | None = None) -> str:
    """One sentence saying which tasks need a judge and how to configure one."""
    who = f"{n_tasks} of these tasks use" if n_tasks else "this task uses"
    return (
        f"{who} WebArena's fuzzy_match, which needs an LLM judge: set {ENV_BASE_URL} (an "
        f"OpenAI-compatible endpoint, e.g. https://api.openai.com/v1) and {ENV_MODEL} (WebArena "
        f"used {WEBARENA_JUDGE_MODEL}), and {ENV_API_KEY} if the endpoint needs a key"
    )


class Judge(Protocol):
    """What the evaluators ask a judge (both return the verdict as a bool)."""

    async def fuzzy_match(
        self, pred: str, reference: str, question: str, *, prompt: str = "vab"
    ) -> bool:
        """Is ``pred`` semantically equivalent to ``reference`` as an answer to ``question``?
        ``prompt`` names the prompt's wording (``FUZZY_PROMPTS``)."""
        ...

    async def ua_match(self, pred: str, reference: str, question: str) -> bool:
        """Does the reported reason ``pred`` for an unachievable task match ``reference``?"""
        ...


WEBARENA_FUZZY_ENDING = "Conclude the judgement by correct/incorrect/partially correct."
VAB_FUZZY_ENDING = (
    "Conclude the judgement by 'correct', 'incorrect', or 'partially correct'. Only output one "
    "of these options, and nothing else."
)


def fuzzy_match_messages(
    pred: str, reference: str, question: str, ending: str = WEBARENA_FUZZY_ENDING
) -> list[dict[str, str]]:
    """WebArena's ``llm_fuzzy_match`` prompt, with the last line ``ending``."""
    message = (
        "Help a teacher to grade the answer of a student given a question. Keep in mind that "
        "the student may use different phrasing or wording to answer the question. The goal "
        "is to evaluate whether the answer is semantically equivalent to the reference "
        "answer.\n"
        f"question: {question}\n"
        f"reference answer: {reference}\n"
        "all the string 'N/A' that you see is a special sequence that means 'not achievable'\n"
        f"student answer: {pred}\n"
        f"{ending}"
    )
    return [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": message},
    ]


def vab_fuzzy_match_messages(pred: str, reference: str, question: str) -> list[dict[str, str]]:
    """VisualAgentBench's ``llm_fuzzy_match`` prompt: WebArena's, asking for the verdict alone."""
    return fuzzy_match_messages(pred, reference, question, VAB_FUZZY_ENDING)


FUZZY_PROMPTS: dict[str, Callable[[str, str, str], list[dict[str, str]]]] = {
    "vab": vab_fuzzy_match_messages,
    "webarena": fuzzy_match_messages,
}
"""fuzzy_match prompt wording by scoring (``tasks.webarena.scoring``)."""


def ua_match_messages(pred: str, reference: str, question: str) -> list[dict[str, str]]:
    """WebArena's ``llm_ua_match`` prompt (unachievable tasks)."""
    message = (
        f"task: {question}\n"
        f"actual unachievable reason: {reference}\n"
        f"reported unachievable reason: {pred}\n"
        "The task described above is inherently unachievable due to the reason specified "
        "under 'actual unachievable reason'. An individual previously attempted this task and "
        "was unable to complete it. They provided a reason for their failure, which is listed "
        "under 'reported unachievable reason'. Your role is to review both the actual and "
        "reported reasons. Determine if the reported reason aligns with the actual reason, "
        "even if implicitly. If the stated reason is in line with the actual reason, respond "
        "with 'same'. Otherwise, respond with 'different'."
    )
    return [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": message},
    ]


def fuzzy_verdict(response: str) -> bool:
    """WebArena's reading of a fuzzy_match reply: "partially correct" and "incorrect" fail.

    Raises:
        JudgeError: the reply says neither (WebArena asserts here).
    """
    r = response.lower()
    if "partially correct" in r or "incorrect" in r:
        return False
    if "correct" in r:
        return True
    raise JudgeError(f"the judge's reply has no verdict (correct/incorrect): {response[:200]!r}")


def ua_verdict(response: str) -> bool:
    """WebArena's reading of a ua_match reply: "different" fails, "same" passes.

    Raises:
        JudgeError: the reply says neither.
    """
    r = response.lower()
    if "different" in r:
        return False
    if "same" in r:
        return True
    raise JudgeError(f"the judge's reply has no verdict (same/different): {response[:200]!r}")


@dataclass(eq=False, repr=False)
class OpenAIJudge:
    """A judge over an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: endpoint root including the version, e.g. ``https://api.openai.com/v1``.
        model: model name, e.g. ``gpt-4-1106-preview`` (WebArena's).
        api_key: bearer token; None for a local server without auth.
        timeout_s: timeout of one request.
        max_retries: retries after the first try on 429, 5xx and connection errors.
        backoff_s: first retry delay, doubled each retry.
        max_tokens: reply budget (WebArena: 768).
    """

    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 1.0
    max_tokens: int = 768

    def __post_init__(self) -> None:
        if not self.base_url or not self.model:
            raise JudgeNotConfiguredError(not_configured_message())
        self.base_url = self.base_url.rstrip("/")

    @classmethod
    def from_env(
        cls,
        env: Mapping[str, str] | None = None,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
    ) -> OpenAIJudge | None:
        """A judge from arguments, else ``WA_JUDGE_*`` variables; None when neither is set.

        Raises:
            JudgeNotConfiguredError: a base URL without a model, or a model without a URL.
        """
        env = os.environ if env is None else env
        base_url = base_url or env.get(ENV_BASE_URL) or None
        model = model or env.get(ENV_MODEL) or None
        api_key = api_key or env.get(ENV_API_KEY) or env.get("OPENAI_API_KEY") or None
        if base_url is None and model is None:
            return None
        if base_url is None or model is None:
            missing = ENV_BASE_URL if base_url is None else ENV_MODEL
            raise JudgeNotConfiguredError(
                f"the fuzzy_match judge is half configured: set {missing} too "
                f"({ENV_BASE_URL} = an OpenAI-compatible endpoint, {ENV_MODEL} = its model)"
            )
        return cls(base_url, model, api_key)

    def __repr__(self) -> str:
        return f"OpenAIJudge(base_url={self.base_url!r}, model={self.model!r})"

    async def fuzzy_match(
        self, pred: str, reference: str, question: str, *, prompt: str = "vab"
    ) -> bool:
        messages = FUZZY_PROMPTS[prompt](pred, reference, question)
        return fuzzy_verdict(await self.complete(messages))

    async def ua_match(self, pred: str, reference: str, question: str) -> bool:
        return ua_verdict(await self.complete(ua_match_messages(pred, reference, question)))

    async def complete(self, messages: list[dict[str, str]]) -> str:
        """Send one chat request (temperature 0, as WebArena) and return the reply text.

        Raises:
            JudgeError: a 4xx other than 429, or failures after every retry.
        """
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "top_p": 1.0,
            "max_tokens": self.max_tokens,
        }
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = f"{self.base_url}/chat/completions"
        last = ""
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            for attempt in range(self.max_retries + 1):
                if attempt:
                    await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
                try:
                    r = await client.post(url, json=body, headers=headers)
                except httpx.HTTPError as e:
                    last = f"{type(e).__name__}: {e}"
                    continue
                if r.status_code == 429 or r.status_code >= 500:
                    last = f"HTTP {r.status_code}: {r.text[:200]}"
                    continue
                if r.status_code != 200:
                    raise JudgeError(
                        f"the judge at {url} refused the request (HTTP {r.status_code}): "
                        f"{r.text[:200]}"
                    )
                try:
                    content = r.json()["choices"][0]["message"]["content"]
                except (ValueError, KeyError, IndexError, TypeError):
                    raise JudgeError(
                        f"the judge at {url} sent no chat reply: {r.text[:200]}"
                    ) from None
                return str(content or "")
        raise JudgeError(f"the judge at {url} failed {self.max_retries + 1} times; last: {last}")
