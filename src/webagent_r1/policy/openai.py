"""Engine over an OpenAI-compatible HTTP server (vLLM, SGLang, TGI, hosted APIs).

Two paths:

- ``use_token_ids=True`` (vLLM and other servers that accept token-id prompts): the
  ``/v1/completions`` endpoint gets the prompt as a list of ints and returns the sampled
  tokens with their log-probs (``logprobs=1``; ``return_tokens_as_token_ids`` makes vLLM name
  each token ``token_id:<id>``). The completion's ids are the server's own, so it is
  trainable.
- ``use_token_ids=False`` (chat-only APIs): the ``/v1/chat/completions`` endpoint gets the
  chat messages. Only text comes back, so ``token_ids`` are the local tokenizer's encoding of
  that text (plus eos when the model stopped), not ids the server sampled, and the completion
  is marked ``trainable=False``: good for evaluation, never for policy-gradient training.

A token-id completion whose log-probs the server left out (``null``) cannot give π_old: with
``for_training=True`` (the default) that raises ``OpenAIEngineError``; with ``False``
(evaluation) the completion is kept and marked ``trainable=False``.

Requests are retried with exponential backoff on 429, 5xx and connection errors; any other
4xx is a configuration problem and raises ``OpenAIEngineError`` with the server's message.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
from typing import Any

import httpx

from webagent_r1.policy.base import Completion, Engine, SamplingParams

__all__ = ["OpenAIEngine", "OpenAIEngineError"]

_TOKEN_ID = re.compile(r"^token_id:(\d+)$")
_RETRY_STATUS = {408, 409, 425, 429}


class OpenAIEngineError(RuntimeError):
    """The server refused the request (4xx) or kept failing after every retry."""


class OpenAIEngine(Engine):
    """Engine over an OpenAI-compatible server.

    Args:
        base_url: server root, e.g. ``http://127.0.0.1:8000/v1``.
        model: the served model's name.
        tokenizer: the model's tokenizer (decoding token-id answers, encoding chat answers,
            eos id).
        use_token_ids: completions endpoint with token-id prompts (True) or chat endpoint.
        api_key: bearer token; default ``$OPENAI_API_KEY`` (none for a local server).
        max_retries: retries of one request after the first try.
        backoff_s: first retry delay; doubled each retry (with jitter), capped at 30 s.
        timeout_s: timeout of one HTTP request.
        max_concurrency: requests in flight at once.
        extra_body: extra JSON fields of every request (server-specific options).
        for_training: the token-id completions are meant for training: a sampled token
            without a log-prob raises instead of being marked not trainable.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer: Any,
        use_token_ids: bool = True,
        api_key: str | None = None,
        max_retries: int = 5,
        backoff_s: float = 0.5,
        timeout_s: float = 120.0,
        max_concurrency: int = 64,
        extra_body: dict[str, Any] | None = None,
        for_training: bool = True,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.tokenizer = tokenizer
        self.use_token_ids = use_token_ids
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.extra_body = dict(extra_body or {})
        self.for_training = for_training
        self._sem = asyncio.Semaphore(max_concurrency)
        self._client: httpx.AsyncClient | None = None
        self.retries = 0
        """Retries made so far (for tests and metrics)."""

    @property
    def wants_messages(self) -> bool:
        """Whether the rollout must call ``generate_chat`` (the chat path) instead."""
        return not self.use_token_ids

    # ---------------------------------------------------------------- public API

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """One completion per token-id prompt, through ``/completions`` (concurrently).

        Raises:
            OpenAIEngineError: the engine is on the chat path, or the server refused.
        """
        if not self.use_token_ids:
            raise OpenAIEngineError(
                "this engine uses the chat endpoint (use_token_ids=False): call generate_chat "
                "with messages, or set use_token_ids=True for a server that takes token ids"
            )
        return list(await asyncio.gather(*(self._complete(p, params) for p in prompts)))

    async def generate_chat(
        self, conversations: list[list[dict[str, str]]], params: SamplingParams
    ) -> list[Completion]:
        """One completion per conversation, through ``/chat/completions`` (not trainable)."""
        return list(await asyncio.gather(*(self._chat(m, params) for m in conversations)))

    async def close(self) -> None:
        """Close the HTTP client (a later request opens a new one)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    # ---------------------------------------------------------------- requests

    def _sampling_body(self, params: SamplingParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        return body

    async def _complete(self, prompt: list[int], params: SamplingParams) -> Completion:
        body = self._sampling_body(params)
        body.update(
            prompt=list(prompt),
            logprobs=1,
            # vLLM extensions: name tokens by id, keep the stop string, keep special tokens.
            return_tokens_as_token_ids=True,
            include_stop_str_in_output=True,
            skip_special_tokens=False,
        )
        body.update(self.extra_body)
        data = await self._post("/completions", body)
        choice = self._first_choice(data)
        lp = choice.get("logprobs") or {}
        tokens, logprobs = lp.get("tokens"), lp.get("token_logprobs")
        if tokens is None or logprobs is None or len(tokens) != len(logprobs):
            raise OpenAIEngineError(
                "the server returned no per-token logprobs: it must support logprobs=1 on "
                "/completions (vLLM does); use use_token_ids=False for chat-only servers"
            )
        ids = [self._token_id(t) for t in tokens]
        missing = [k for k, x in enumerate(logprobs) if x is None]
        if missing and self.for_training:
            raise OpenAIEngineError(
                f"the server returned no log-prob for {len(missing)} of {len(ids)} sampled "
                f"tokens (first at position {missing[0]}): training needs every token's "
                "log-prob as π_old; for evaluation only, use for_training=False (such "
                "completions are then marked not trainable)"
            )
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return Completion(
            token_ids=ids,
            # placeholders where missing: the completion is then not trainable
            logprobs=[float(x) if x is not None else 0.0 for x in logprobs],
            text=text,
            finish_reason=_finish(choice.get("finish_reason")),
            trainable=not missing,
        )

    async def _chat(self, messages: list[dict[str, str]], params: SamplingParams) -> Completion:
        body = self._sampling_body(params)
        body["messages"] = messages
        body.update(self.extra_body)
        data = await self._post("/chat/completions", body)
        choice = self._first_choice(data)
        text = (choice.get("message") or {}).get("content") or ""
        finish = _finish(choice.get("finish_reason"))
        if finish == "stop":
            text = _restore_stop(text, params.stop, choice.get("stop_reason"))
        ids = list(self.tokenizer.encode(text, add_special_tokens=False))
        if finish == "stop" and self.tokenizer.eos_token_id is not None:
            ids.append(self.tokenizer.eos_token_id)
        return Completion(
            token_ids=ids,
            logprobs=[0.0] * len(ids),
            text=text,
            finish_reason=finish,
            trainable=False,
        )

    def _token_id(self, token: str) -> int:
        m = _TOKEN_ID.match(token)
        if m:
            return int(m.group(1))
        tid = self.tokenizer.convert_tokens_to_ids(token)
        if tid is None or tid == getattr(self.tokenizer, "unk_token_id", None):
            raise OpenAIEngineError(
                f"cannot map the returned token {token!r} to an id: the server must support "
                "return_tokens_as_token_ids (vLLM >= 0.5)"
            )
        return int(tid)

    @staticmethod
    def _first_choice(data: Any) -> dict[str, Any]:
        try:
            return data["choices"][0]
        except (KeyError, IndexError, TypeError):
            raise OpenAIEngineError(f"malformed server answer: {str(data)[:200]}") from None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=headers, timeout=self.timeout_s
            )
        return self._client

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        """POST with retries: 429 / 5xx / connection errors back off and retry."""
        last = ""
        for attempt in range(self.max_retries + 1):
            if attempt:
                self.retries += 1
                delay = min(30.0, self.backoff_s * 2 ** (attempt - 1))
                await asyncio.sleep(delay * (0.5 + random.random() / 2))
            try:
                async with self._sem:
                    r = await self._http().post(path, json=body)
            except (httpx.TransportError, httpx.TimeoutException) as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if r.status_code == 200:
                return r.json()
            detail = _error_detail(r)
            if r.status_code >= 500 or r.status_code in _RETRY_STATUS:
                last = f"HTTP {r.status_code}: {detail}"
                continue
            raise OpenAIEngineError(
                f"{self.base_url}{path} refused the request (HTTP {r.status_code}): {detail}"
            )
        raise OpenAIEngineError(
            f"{self.base_url}{path} failed after {self.max_retries + 1} tries; last: {last}"
        )


def _finish(reason: Any) -> str:
    return "length" if reason == "length" else "stop"


def _restore_stop(text: str, stops: list[str], stop_reason: Any) -> str:
    """Put back the stop string an OpenAI-style server cut off (our actions end with it)."""
    if any(text.endswith(s) for s in stops):
        return text
    if isinstance(stop_reason, str) and stop_reason in stops:
        return text + stop_reason
    if len(stops) == 1 and stops[0] not in text:
        # The model stopped on our only stop string (or on eos): keep the answer closed.
        return text + stops[0] if "<answer>" in text else text
    return text


def _error_detail(r: httpx.Response) -> str:
    try:
        d = r.json()
        if isinstance(d, dict) and isinstance(d.get("error"), dict):
            return str(d["error"].get("message", d["error"]))
        return str(d)[:300]
    except ValueError:
        return r.text[:300]
