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


class FakeTransferLLM(FakeAsyncLLM):
    """A stand-in ``AsyncLLM`` that also has vLLM's weight-transfer API (ipc backend).

    Its ``update_weights`` unpickles the chunk's handles as vLLM's workers do; the tests'
    handles are the tensors themselves (``fake_handle``), no CUDA needed. ``fail_at``: the
    0-based ``update_weights`` call that raises (None: none); ``fail_init``: the set-up raises;
    ``fail_finish``: ``finish_weight_update`` raises.
    """

    def __init__(
        self, fail_at: int | None = None, fail_init: bool = False, fail_finish: bool = False
    ) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.fail_init = fail_init
        self.fail_finish = fail_finish
        self.updates = 0
        self.via_ipc: dict[str, torch.Tensor] = {}

    async def init_weight_transfer_engine(self, request: Any) -> None:
        self.calls.append(("init_weight_transfer_engine", request.init_info))
        if self.fail_init:
            raise RuntimeError("Weight transfer not configured")

    async def start_weight_update(self) -> None:
        self.calls.append(("start_weight_update", None))

    async def finish_weight_update(self) -> None:
        self.calls.append(("finish_weight_update", None))
        if self.fail_finish:
            raise RuntimeError("post-load processing failed")

    async def update_weights(self, request: Any) -> None:
        import base64
        import pickle

        info = request.update_info
        self.calls.append(("update_weights", list(info["names"])))
        k = self.updates
        self.updates += 1
        if self.fail_at is not None and k >= self.fail_at:
            raise RuntimeError("IPC handle not found for GPU UUID")
        handles = pickle.loads(base64.b64decode(info["ipc_handles_pickled"]))
        assert len(handles) == len(info["names"]) == len(info["shapes"])
        for name, dtype, shape, h in zip(
            info["names"], info["dtype_names"], info["shapes"], handles, strict=True
        ):
            t = h["fake-gpu"]
            assert str(t.dtype) == f"torch.{dtype}" and list(t.shape) == shape
            self.via_ipc[name] = t.clone()
            self.loaded[name] = t.clone()


def fake_handle(t: torch.Tensor) -> dict[str, torch.Tensor]:
    """A stand-in for a CUDA IPC handle: the tensor itself, keyed by a fake GPU UUID."""
    return {"fake-gpu": t}


def transfer_request_classes() -> tuple[Any, Any]:
    """Stand-ins for vLLM's ``WeightTransferInitRequest`` / ``WeightTransferUpdateRequest``."""
    return (lambda init_info: SimpleNamespace(init_info=init_info)), (
        lambda update_info: SimpleNamespace(update_info=update_info)
    )
