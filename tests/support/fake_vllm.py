"""A stand-in for vLLM's ``AsyncLLM``: the parts ``VLLMEngine`` uses, no vLLM needed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import torch


def logprob_entry(x: float) -> SimpleNamespace:
    """A vLLM ``Logprob`` entry of log-probability ``x``."""
    return SimpleNamespace(logprob=x, rank=1, decoded_token="t")


def vllm_output(ids: list[int], reason: str = "stop", text: str = "ok") -> SimpleNamespace:
    """A vLLM ``CompletionOutput`` of ``ids``, the i-th with log-prob ``-0.1 * (i + 1)``."""
    return SimpleNamespace(
        token_ids=tuple(ids),
        logprobs=[{t: logprob_entry(-0.1 * (i + 1))} for i, t in enumerate(ids)],
        text=text,
        finish_reason=reason,
        stop_reason=None,
    )


class FakeAsyncLLM:
    """The parts of vLLM's AsyncLLM the engine uses; completions echo the weights' version."""

    def __init__(self) -> None:
        self.version = 0
        self.calls: list[tuple[str, Any]] = []
        self.loaded: dict[str, torch.Tensor] = {}
        self.gate: asyncio.Event | None = None
        self.request_ids: list[str] = []
        self.active = 0
        self.resets: list[bool] = []  # what reset_prefix_cache answers next (then True)

    async def generate(self, prompt: dict, sp: Any, request_id: str):
        self.request_ids.append(request_id)
        self.calls.append(("generate", sp.seed))
        self.active += 1
        try:
            if self.gate is not None:
                await self.gate.wait()
            ids = [prompt["prompt_token_ids"][-1] + 1, 100 + self.version]
            yield SimpleNamespace(outputs=[vllm_output(ids, "length", f"v{self.version}")])
        finally:
            self.active -= 1

    async def collective_rpc(self, method: str, timeout=None, args=(), kwargs=None):
        from safetensors.torch import load_file

        assert self.active == 0, "weights changed while a request was in flight"
        self.calls.append((method, args))
        self.loaded.update(load_file(args[0]))  # the shard exists while the workers load it
        self.version += 1
        return [len(self.loaded)]

    async def reset_prefix_cache(self) -> bool:
        self.calls.append(("reset_prefix_cache", None))
        return self.resets.pop(0) if self.resets else True

    async def sleep(self, level: int = 1) -> None:
        self.calls.append(("sleep", level))

    async def wake_up(self, tags=None) -> None:
        self.calls.append(("wake_up", tags))

    def shutdown(self) -> None:
        self.calls.append(("shutdown", None))
