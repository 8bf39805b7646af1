"""Deterministic stand-ins for rollout tests: a tokenizer, a scripted engine, envs, a pool.

``FakeTokenizer`` has multi-character pieces and single characters, so one text has several
tokenisations: ``encode`` gives the canonical (longest-piece) one, and ``ScriptedEngine``
deliberately returns a non-canonical one (characters only), so a test can tell whether the
rollout kept the engine's ids or re-tokenised the text.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.agent.actions import ActionParseError, parse_action
from webagent_r1.grading.base import EnvError
from webagent_r1.policy.base import Completion, Engine, SamplingParams
from webagent_r1.rollout.pool_base import EnvPool
from webagent_r1.types import Observation, StepResult, Task

PIECES = ["<think>", "</think>", "<answer>", "</answer>", "<|user|>", "<|system|>"]
PIECES += ["<|assistant|>", 'do(action="', "Click", "exit(message=", "element", "ab", "the "]
CHAR_BASE = 100


@dataclass
class _Enc:
    input_ids: list[int]


class FakeTokenizer:
    """Pieces (ids 3..) and characters (``CHAR_BASE + ord(c)``); pad 0, eos 2."""

    pad_token_id = 0
    eos_token_id = 2
    unk_token_id = 1
    pad_token = "<pad>"
    eos_token = "<eos>"

    def __init__(self) -> None:
        self.pieces = {p: 3 + i for i, p in enumerate(PIECES)}
        self.by_id = {v: k for k, v in self.pieces.items()}
        self.by_id[2] = "<eos>"

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        out, i = [], 0
        longest = sorted(self.pieces, key=len, reverse=True)
        while i < len(text):
            for p in longest:
                if text.startswith(p, i):
                    out.append(self.pieces[p])
                    i += len(p)
                    break
            else:
                out.append(CHAR_BASE + ord(text[i]))
                i += 1
        return out

    def char_ids(self, text: str) -> list[int]:
        """A non-canonical tokenisation: one id per character."""
        return [CHAR_BASE + ord(c) for c in text]

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        out = []
        for i in ids:
            if i == 2:
                if not skip_special_tokens:
                    out.append("<eos>")
            elif i in self.by_id:
                out.append(self.by_id[i])
            elif i >= CHAR_BASE:
                out.append(chr(i - CHAR_BASE))
        return "".join(out)

    def __call__(self, text: str, add_special_tokens: bool = False) -> _Enc:
        return _Enc(self.encode(text))

    def convert_tokens_to_ids(self, token: str) -> int:
        return self.pieces.get(token, self.unk_token_id)

    def apply_chat_template(
        self, messages: list[dict[str, str]], add_generation_prompt: bool = True, tokenize=True
    ) -> list[int]:
        text = "".join(f"<|{m['role']}|>{m['content']}\n" for m in messages)
        if add_generation_prompt:
            text += "<|assistant|>"
        return self.encode(text)

    @property
    def vocab_size(self) -> int:
        return CHAR_BASE + 128


def turn_of(tok: FakeTokenizer, prompt: list[int]) -> int:
    """Which turn a prompt belongs to (earlier assistant messages in it)."""
    return tok.decode(prompt).count("<|assistant|>") - 1


class ScriptedEngine(Engine):
    """Answers turn k of every episode with ``script[k]``, as non-canonical ids.

    Every completion's ids are the characters of the text plus eos, its log-probs
    ``-0.01 * (position + 1)``; ``sampled`` keeps every completion returned, in order.
    """

    def __init__(
        self, tok: FakeTokenizer, script: list[str], latency_s: float = 0.0, fail: bool = False
    ) -> None:
        self.tok = tok
        self.script = script
        self.latency_s = latency_s
        self.fail = fail
        self.calls: list[int] = []
        self.sampled: list[Completion] = []
        self.seeds: list[int | None] = []
        self.gate: asyncio.Event | None = None

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        self.calls.append(len(prompts))
        self.seeds.append(params.seed)
        if self.gate is not None:
            await self.gate.wait()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self.fail:
            raise RuntimeError("engine exploded")
        out = []
        for p in prompts:
            text = self.script[min(turn_of(self.tok, p), len(self.script) - 1)]
            ids = self.tok.char_ids(text) + [self.tok.eos_token_id]
            comp = Completion(
                token_ids=ids,
                logprobs=[-0.01 * (i + 1) for i in range(len(ids))],
                text=self.tok.decode(ids, skip_special_tokens=True),
                finish_reason="stop",
            )
            self.sampled.append(comp)
            out.append(comp)
        return out


CLICK = '<think>Open the product.</think><answer>do(action="Click", element="1")</answer>'
EXIT = '<think>the price is there.</think><answer>exit(message="$12.00")</answer>'


@dataclass
class FakeEnv:
    """A WebEnv stand-in: a two-page site; ``exit`` with ``task.extra['answer']`` earns 1.

    ``task.extra['fail_resets']`` resets of that task raise EnvError first (shared counter in
    ``failures``); ``step_s`` makes every reset and step take that long.
    """

    failures: dict[str, int]
    step_s: float = 0.0
    max_turns: int = 5
    session: Any = None
    task: Task | None = None
    turn: int = 0
    log: list[tuple[str, float, float]] = field(default_factory=list)

    async def reset(self, task: Task) -> Observation:
        await self.close_episode()
        key = str(task.task_id)
        if self.failures.get(key, 0) < task.extra.get("fail_resets", 0):
            self.failures[key] = self.failures.get(key, 0) + 1
            raise EnvError(f"task {key}: site down")
        await asyncio.sleep(self.step_s)
        self.session, self.task, self.turn = object(), task, 0
        return Observation(url="http://x/", title="Home", text='[1] link "Orbit Golden Charger"')

    async def step(self, text: str) -> StepResult:
        assert self.session is not None and self.task is not None
        await asyncio.sleep(self.step_s)
        self.turn += 1
        try:
            action = parse_action(text)
        except ActionParseError as e:
            obs = Observation(url="http://x/", title="Home", text="", error=str(e))
            return StepResult(obs, self.turn >= self.max_turns, 0.0, {"parse_error": str(e)})
        info: dict[str, Any] = {"action": action.to_dict()}
        if action.kind == "exit":
            reward = float(action.argument == self.task.extra.get("answer"))
            info.update(status="done", answer=action.argument, explanation="fake")
            await self.close_episode()
            return StepResult(Observation("http://x/p", "Product", "$12.00"), True, reward, info)
        obs = Observation(url="http://x/p", title="Product", text="Price: $12.00")
        done = self.turn >= self.max_turns
        if done:
            info.update(status="max_turns")
            await self.close_episode()
        return StepResult(obs, done, 0.0, info)

    async def close_episode(self) -> None:
        self.session = None

    async def close(self) -> None:
        await self.close_episode()


class FakeEnvPool(EnvPool[FakeEnv]):
    """``n`` FakeEnvs behind the EnvPool interface."""

    def __init__(self, n: int, step_s: float = 0.0, max_turns: int = 5) -> None:
        self.failures: dict[str, int] = {}
        self.envs = [FakeEnv(self.failures, step_s, max_turns) for _ in range(n)]
        self._idle: asyncio.Queue[FakeEnv] | None = None

    @property
    def size(self) -> int:
        return len(self.envs)

    def _q(self) -> asyncio.Queue[FakeEnv]:
        if self._idle is None:
            self._idle = asyncio.Queue()
            for e in self.envs:
                self._idle.put_nowait(e)
        return self._idle

    async def acquire(self) -> FakeEnv:
        return await self._q().get()

    async def release(self, env: FakeEnv) -> None:
        await env.close_episode()
        self._q().put_nowait(env)

    def open_episodes(self) -> int:
        return sum(e.session is not None for e in self.envs)

    async def close_episodes(self) -> None:
        for e in self.envs:
            await e.close_episode()


def make_tasks(n: int, **extra: Any) -> list[Task]:
    return [
        Task(
            task_id=f"t{i}",
            intent="Find the price of the charger.",
            start_url="http://x/",
            extra={"answer": "$12.00", **extra},
        )
        for i in range(n)
    ]
