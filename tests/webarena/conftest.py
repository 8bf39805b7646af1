"""Fixtures of the WebArena-Lite tests: fake sites, a fake LLM judge, the Lite configs."""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.webarena.fakesites import FakeSite
from webagent_r1.grading.base import EvalContext
from webagent_r1.sources.webarena import WebArenaSites, evaluate, find_lite_file, load_tasks
from webagent_r1.types import Task

FAKE_SITES = ("shopping", "shopping_admin", "reddit", "gitlab", "map")


@pytest.fixture(scope="session")
def lite_tasks() -> list[Task]:
    """The 165 WebArena-Lite test tasks from the installed browsergym-webarenalite."""
    # No skip: a missing data file must fail the run, never pass it as green.
    if find_lite_file() is None:
        pytest.fail(
            "browsergym-webarenalite is not installed, so the 165 WebArena-Lite configs are "
            "missing: run `bash scripts/setup.sh` or `.venv/bin/pip install --no-deps "
            "browsergym-webarenalite`"
        )
    return load_tasks("test")


@pytest.fixture(scope="session")
def fake_sites() -> Iterator[dict[str, FakeSite]]:
    """One fake server per WebArena site (map: directions page only)."""
    sites = {name: FakeSite(name) for name in FAKE_SITES}
    yield sites
    for s in sites.values():
        s.stop()


@pytest.fixture
def wa_sites(fake_sites: dict[str, FakeSite], judge_server: FakeJudge) -> WebArenaSites:
    """``WebArenaSites`` over the fake sites, with the fake judge."""
    from webagent_r1.sources.webarena import OpenAIJudge

    return WebArenaSites(
        {name: s.base_url for name, s in fake_sites.items()},
        judge=OpenAIJudge(judge_server.base_url, "fake-judge", api_key="sk-test"),
        settle_s=0.2,
    )


def by_id(tasks: list[Task]) -> dict[int | str, Task]:
    """Tasks by ``task_id``."""
    return {t.task_id: t for t in tasks}


async def score(task: Task, answer: str | None, sites: WebArenaSites, url: str = "") -> float:
    """``webarena.evaluate``'s reward of an episode that answered ``answer`` and ended on
    ``url`` (no browser: for string_match and url_match)."""
    ctx = EvalContext(
        task=task, answer=answer, session=None, url=url, instance_id=None, backend=sites
    )
    return (await evaluate(ctx)).reward


def with_scoring(sites: WebArenaSites, scoring: str) -> WebArenaSites:
    """A copy of ``sites`` grading by ``scoring`` (``vab`` | ``webarena``)."""
    other = copy.copy(sites)
    other.scoring = scoring
    return other


# --------------------------------------------------------------------------------------
# A fake OpenAI-compatible judge
# --------------------------------------------------------------------------------------


@dataclass
class FakeJudge:
    """A ``/v1/chat/completions`` server with a rule in place of a model.

    fuzzy_match prompts: "correct" when every comma-separated part of the reference is in the
    student answer (case-insensitive), else "incorrect". ua_match prompts: "same" when the
    reported reason shares a word of 5+ letters with the actual one, else "different".
    ``fail_next`` answers 503 that many times first (retries).
    """

    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_next: int = 0
    reply_override: str | None = None
    explains_unless_told: bool = False
    """Explain a "correct" verdict in words that contain "incorrect" unless the prompt asks
    for the verdict alone (as chat models tend to)."""

    def __post_init__(self) -> None:
        handler = type("Handler", (_JudgeHandler,), {"judge": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, prompt: str) -> str:
        if self.reply_override is not None:
            return self.reply_override
        if "reference answer:" in prompt:
            ref = re.search(r"reference answer: (.*)\n", prompt).group(1)  # type: ignore[union-attr]
            pred = re.search(r"student answer: (.*)\n", prompt).group(1)  # type: ignore[union-attr]
            parts = [p.strip().lower() for p in ref.split(",") if p.strip()]
            ok = all(p in pred.lower() for p in parts)
            if ok and self.explains_unless_told and "Only output one" not in prompt:
                return "The student's answer is correct: nothing in it is incorrect."
            return "The student's answer is correct." if ok else "It is incorrect."
        actual = re.search(r"actual unachievable reason: (.*)\n", prompt).group(1)  # type: ignore[union-attr]
        reported = re.search(r"reported unachievable reason: (.*)\n", prompt).group(1)  # type: ignore[union-attr]
        words = {w for w in re.findall(r"[a-z]{5,}", actual.lower())}
        return "same" if words & set(re.findall(r"[a-z]{5,}", reported.lower())) else "different"


class _JudgeHandler(BaseHTTPRequestHandler):
    judge: FakeJudge

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.judge.requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        if self.judge.fail_next > 0:
            self.judge.fail_next -= 1
            status, out = 503, {"error": {"message": "overloaded"}}
        elif self.path != "/v1/chat/completions":
            status, out = 404, {"error": {"message": "no such route"}}
        else:
            reply = self.judge.answer(body["messages"][-1]["content"])
            status, out = 200, {"choices": [{"message": {"role": "assistant", "content": reply}}]}
        data = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="session")
def _judge_singleton() -> Iterator[FakeJudge]:
    judge = FakeJudge()
    yield judge
    judge.server.shutdown()


@pytest.fixture
def judge_server(_judge_singleton: FakeJudge) -> FakeJudge:
    """The fake judge, with its request log and failure counter cleared."""
    _judge_singleton.requests.clear()
    _judge_singleton.fail_next = 0
    _judge_singleton.reply_override = None
    _judge_singleton.explains_unless_told = False
    return _judge_singleton
