"""OpenAIEngine against a local fake OpenAI-compatible server: real HTTP, fake model."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.support.fakes import CLICK, EXIT, FakeEnvPool, FakeTokenizer, make_tasks, turn_of
from webagent_r1.policy.base import SamplingParams
from webagent_r1.policy.openai import OpenAIEngine, OpenAIEngineError
from webagent_r1.rollout.collect import collect

TOK = FakeTokenizer()


class FakeServer:
    """Completions answer with the characters of a scripted text as ``token_id:N`` tokens;
    ``fail_next`` requests get 503 first; model ``nope`` gets 404."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_next = 0
        self.null_logprob = False
        """Answer the second token's log-prob with null (as some servers do)."""
        app = Starlette(
            routes=[
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
            ]
        )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                return
            time.sleep(0.01)
        raise RuntimeError("fake server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)

    async def _gate(self, request: Request) -> tuple[dict[str, Any], JSONResponse | None]:
        body = await request.json()
        self.requests.append(body)
        if self.fail_next > 0:
            self.fail_next -= 1
            return body, JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        if body.get("model") == "nope":
            msg = {"error": {"message": "The model `nope` does not exist."}}
            return body, JSONResponse(msg, status_code=404)
        return body, None

    async def completions(self, request: Request) -> JSONResponse:
        body, err = await self._gate(request)
        if err is not None:
            return err
        prompt = body["prompt"]
        assert isinstance(prompt, list) and all(isinstance(i, int) for i in prompt)
        text = [CLICK, EXIT][min(turn_of(TOK, prompt), 1)]
        ids = TOK.char_ids(text) + [TOK.eos_token_id]  # non-canonical on purpose
        logprobs: list[float | None] = [-0.5] * len(ids)
        if self.null_logprob:
            logprobs[1] = None
        return JSONResponse(
            {
                "choices": [
                    {
                        "text": text,
                        "finish_reason": "stop",
                        "logprobs": {
                            "tokens": [f"token_id:{i}" for i in ids],
                            "token_logprobs": logprobs,
                        },
                    }
                ]
            }
        )

    async def chat(self, request: Request) -> JSONResponse:
        body, err = await self._gate(request)
        if err is not None:
            return err
        assert body["messages"][0]["role"] == "system"
        # Like OpenAI: the stop string is cut off.
        text = EXIT.removesuffix("</answer>")
        msg = {"role": "assistant", "content": text}
        return JSONResponse({"choices": [{"message": msg, "finish_reason": "stop"}]})


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    s = FakeServer()
    s.start()
    yield s
    s.stop()


PARAMS = SamplingParams(temperature=0.7, max_new_tokens=64, seed=3)


async def test_token_id_path_returns_the_servers_ids(server: FakeServer) -> None:
    engine = OpenAIEngine(server.url, "m", TOK, backoff_s=0.01)
    prompt = TOK.encode("<|system|>hi\n<|user|>go\n<|assistant|>")
    [c] = await engine.generate([prompt], PARAMS)
    assert c.token_ids == TOK.char_ids(CLICK) + [2] and c.logprobs == [-0.5] * len(c.token_ids)
    assert c.text == CLICK and c.trainable and c.finish_reason == "stop"
    req = server.requests[-1]
    assert req["prompt"] == prompt and req["logprobs"] == 1 and req["seed"] == 3
    assert req["stop"] == ["</answer>"] and req["max_tokens"] == 64
    assert req["return_tokens_as_token_ids"] is True
    with pytest.raises(OpenAIEngineError, match="generate_chat"):
        await OpenAIEngine(server.url, "m", TOK, use_token_ids=False).generate([prompt], PARAMS)
    await engine.close()


async def test_a_missing_log_prob_is_refused_for_training(server: FakeServer) -> None:
    """A null log-prob would be a wrong π_old: refused when the tokens are for training;
    kept for evaluation, with the completion marked not trainable."""
    prompt = TOK.encode("<|system|>hi\n<|user|>go\n<|assistant|>")
    server.null_logprob = True
    try:
        engine = OpenAIEngine(server.url, "m", TOK, backoff_s=0.01)
        assert engine.for_training
        with pytest.raises(OpenAIEngineError, match=r"no log-prob for 1 of \d+ .*position 1"):
            await engine.generate([prompt], PARAMS)
        evaluating = OpenAIEngine(server.url, "m", TOK, for_training=False)
        [c] = await evaluating.generate([prompt], PARAMS)
        assert c.text == CLICK and not c.trainable
        assert c.logprobs[1] == 0.0 and len(c.logprobs) == len(c.token_ids)
    finally:
        server.null_logprob = False
    [c] = await evaluating.generate([prompt], PARAMS)
    assert c.trainable and c.logprobs == [-0.5] * len(c.token_ids)
    await engine.close()
    await evaluating.close()


async def test_rollout_through_the_server_keeps_the_servers_ids(server: FakeServer) -> None:
    engine = OpenAIEngine(server.url, "m", TOK)
    groups = await collect(make_tasks(2), 2, engine, FakeEnvPool(4), TOK, progress=False)
    for g in groups:
        for t in g.trajectories:
            assert t.reward == 1.0 and len(t.turns) == 2 and "trainable" not in t.info
            assert t.turns[0].completion_ids == TOK.char_ids(CLICK) + [2]
    await engine.close()


async def test_chat_path_is_text_only_and_not_trainable(server: FakeServer) -> None:
    engine = OpenAIEngine(server.url, "m", TOK, use_token_ids=False)
    assert engine.wants_messages
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    [c] = await engine.generate_chat([msgs], PARAMS)
    assert c.text == EXIT  # the cut-off stop string is restored
    assert c.token_ids == TOK.encode(EXIT) + [2] and not c.trainable
    assert server.requests[-1]["messages"] == msgs
    # Through the rollout: the messages are sent, and the trajectory says it is text-only.
    [g] = await collect(make_tasks(1), 1, engine, FakeEnvPool(1), TOK, progress=False)
    [t] = g.trajectories
    assert t.reward == 1.0 and t.info["trainable"] is False
    await engine.close()


async def test_retries_on_503_then_succeeds(server: FakeServer) -> None:
    engine = OpenAIEngine(server.url, "m", TOK, backoff_s=0.01, max_retries=3)
    server.fail_next = 2
    [c] = await engine.generate([TOK.encode("<|assistant|>")], PARAMS)
    assert c.text == CLICK and engine.retries == 2
    server.fail_next = 5
    with pytest.raises(OpenAIEngineError, match="failed after 4 tries; last: HTTP 503"):
        await engine.generate([TOK.encode("<|assistant|>")], PARAMS)
    server.fail_next = 0
    await engine.close()


async def test_client_errors_are_clear_and_not_retried(server: FakeServer) -> None:
    engine = OpenAIEngine(server.url, "nope", TOK, backoff_s=0.01)
    n = len(server.requests)
    with pytest.raises(OpenAIEngineError, match=r"HTTP 404\): The model `nope` does not exist"):
        await engine.generate([TOK.encode("x")], PARAMS)
    assert len(server.requests) == n + 1 and engine.retries == 0
    await engine.close()


async def test_connection_errors_are_retried() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    engine = OpenAIEngine(f"http://127.0.0.1:{port}/v1", "m", TOK, backoff_s=0.01, max_retries=2)
    with pytest.raises(OpenAIEngineError, match="failed after 3 tries; last: Connect"):
        await engine.generate([TOK.encode("x")], PARAMS)
    assert engine.retries == 2
    await engine.close()
