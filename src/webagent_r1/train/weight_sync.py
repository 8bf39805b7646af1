"""Weight sync: after every optimizer step, the sampler gets the trainer's new weights.

Every engine carries a ``weight_version`` (``policy/base.py: VersionedEngine``): the trainer's
optimizer-step count of the weights it samples from, stamped on each completion, so each turn
of a trajectory records the policy it came from (``Turn.weight_version``).

``WeightSync.push(step)`` handles both kinds of engine:

- an engine that shares the trainer's model object (``HFEngine`` in ``train_rl``) already sees
  the new weights: only its version changes (under its lock);
- an engine that holds its own copy (``VLLMEngine``, a remote server, the ``HFEngine`` copy of a
  sharded trainer) gets the trainer's weights streamed (``iter_push_weights``): one parameter
  at a time, gathered (a model sharded by ``train/sharding.py``: ``full_tensor``, a collective
  every process takes part in, even one that does not push), LoRA merged on the fly under the
  base model's names, cast to the engine's dtype (bf16). vLLM consumes the stream in bounded
  shards, an HF copy copies each tensor into its model under its lock; an engine that takes
  neither gets a state dict built from the stream. A model an ``accelerate`` accelerator
  sharded is gathered whole by ``accelerator.get_state_dict`` (then streamed).

Which processes push: by default rank 0 only (one inference service for all trainers); with
``every_rank=True`` each process pushes to its own engine (an in-process vLLM per trainer
process, as ``train_rl`` builds it).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import torch

from webagent_r1.policy.base import Engine
from webagent_r1.policy.trainable import unwrap_model
from webagent_r1.train.sharding import full_state_dict as sharded_full_state_dict
from webagent_r1.train.sharding import is_sharded

__all__ = [
    "SYNC_PATHS",
    "SyncRecord",
    "WeightSync",
    "empty_device_cache",
    "full_state_dict",
    "iter_push_weights",
    "shares_model",
    "state_dict_bytes",
    "update_then_push",
]


@dataclass
class SyncRecord:
    """One ``push``: which step's weights, how long it took, how much was sent."""

    step: int
    version: int
    seconds: float
    bytes: int
    pushed: bool
    """False when nothing was sent (a shared model, or a process that does not push)."""
    largest: int = 0
    """Bytes of the largest tensor sent (the push streams one parameter at a time)."""
    path: str = "none"
    """How the weights got there (``SYNC_PATHS``): 'ipc' (vLLM's in-GPU transfer), 'files'
    (staged shards), 'copy' (into an in-process HF copy), 'state_dict' (a whole state dict
    handed to the engine), 'shared' (nothing to send), 'none' (this process does not push)."""


SYNC_PATHS = {"none": 0, "shared": 1, "copy": 2, "state_dict": 3, "files": 4, "ipc": 5}
"""``sync/path``'s number for each ``SyncRecord.path`` (metrics are numbers)."""


def shares_model(engine: Engine, model: Any) -> bool:
    """Whether ``engine`` samples from the trainer's very model object (no copy to update)."""
    own = engine.model
    return own is not None and own is unwrap_model(model)


def state_dict_bytes(state_dict: dict[str, torch.Tensor]) -> int:
    """Bytes of the tensors of ``state_dict``."""
    return sum(t.numel() * t.element_size() for t in state_dict.values())


def _merged_lora_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The state dict of a PEFT model with its adapters merged, under the base names."""
    model.merge_adapter()
    try:
        inner = unwrap_model(model)
        out = {}
        for name, t in inner.state_dict().items():
            if ".lora_" in name:
                continue
            # clone: unmerge_adapter changes the merged weights back in place
            out[name.replace(".base_layer.", ".")] = t.detach().clone()
        return out
    finally:
        model.unmerge_adapter()


def _lora_layers(inner: Any) -> dict[str, Any]:
    """PEFT LoRA layers of ``inner`` by module name (those that can give their delta)."""
    return {
        name: m
        for name, m in inner.named_modules()
        if hasattr(m, "get_delta_weight") and hasattr(m, "lora_A") and hasattr(m, "base_layer")
    }


def _merged(layer: Any, base: torch.Tensor) -> torch.Tensor:
    """``base`` plus the delta (B A, scaled) of each active adapter of ``layer``: one new
    tensor the size of ``base``; the model is left unchanged."""
    merged = None
    for name in layer.active_adapters:
        if name not in layer.lora_A:
            continue
        delta = layer.get_delta_weight(name)  # (out, in), a new tensor
        merged = delta if merged is None else merged.add_(delta)
    if merged is None:
        return base
    return merged.to(base.dtype).add_(base)


def iter_push_weights(
    model: Any, dtype: torch.dtype | None = None, accelerator: Any = None
) -> Iterator[tuple[str, torch.Tensor]]:
    """The trainer's weights one parameter at a time, as an inference engine loads them.

    Never a whole state dict at once: a sharded (FSDP2) parameter is gathered
    (``full_tensor``, a collective: every process must consume the stream, in the same
    order) and cast to ``dtype`` before the next one is gathered; a LoRA layer's weight is
    merged on the fly (``base + B A``) without touching the model; other tensors are cast
    one by one. At most one parameter's full fp32 tensor and its cast copy exist at a time,
    beyond what the consumer keeps.

    Args:
        model: the trainer's model (DDP / PEFT wrapped, or sharded by ``train/sharding.py``).
        dtype: what the engine loads (e.g. bfloat16); None keeps each tensor's dtype.
        accelerator: an ``accelerate`` accelerator that sharded the model: its gathered
            state dict is streamed (it gathers all at once itself).

    Yields:
        (name under the causal LM's own parameter names, detached tensor).
    """

    def cast(t: torch.Tensor) -> torch.Tensor:
        return t.detach() if dtype is None else t.detach().to(dtype)

    if accelerator is not None:
        for name, t in accelerator.get_state_dict(model).items():
            yield name, cast(t)
        return
    if is_sharded(model):
        prefix = "module."
        for name, t in model.state_dict().items():
            full = t.full_tensor() if hasattr(t, "full_tensor") else t  # all-gather one
            yield (name[len(prefix) :] if name.startswith(prefix) else name), cast(full)
            del full
        return
    inner = unwrap_model(model)
    lora = _lora_layers(inner) if hasattr(model, "merge_adapter") else {}
    suffix = ".base_layer.weight"
    with torch.no_grad():
        for name, t in inner.state_dict().items():
            if ".lora_" in name:
                continue
            if name.endswith(suffix) and name[: -len(suffix)] in lora:
                yield (
                    name.replace(".base_layer.", "."),
                    cast(_merged(lora[name[: -len(suffix)]], t)),
                )
            else:
                yield name.replace(".base_layer.", "."), cast(t)


def full_state_dict(
    model: Any, accelerator: Any = None, all_ranks: bool = True
) -> dict[str, torch.Tensor]:
    """The trainer model's full state dict, as an inference engine loads it.

    Args:
        model: the trainer's model (may be wrapped in DDP / PEFT, or sharded by
            ``train/sharding.py``: then call it on every process).
        accelerator: an ``accelerate.Accelerator`` when one prepared the model: its
            ``get_state_dict`` gathers sharded weights (call it on every process).
        all_ranks: for a sharded model, every process gets the full weights on its device
            (an engine per process); False: rank 0 gets them on the CPU, the others nothing.

    Returns:
        Parameter name → tensor (detached; engines copy what they keep).
    """
    if is_sharded(model):
        return sharded_full_state_dict(model, all_ranks=all_ranks)
    if accelerator is not None:
        return dict(accelerator.get_state_dict(model))
    if hasattr(model, "merge_adapter") and hasattr(model, "unmerge_adapter"):
        return _merged_lora_state_dict(model)
    return {k: v.detach() for k, v in unwrap_model(model).state_dict().items()}


@dataclass(eq=False, repr=False)
class WeightSync:
    """Keeps an engine's weights and ``weight_version`` in step with the trainer.

    Args:
        engine: the sampling engine.
        model: the trainer's model.
        rank: this process's rank.
        every_rank: every process pushes to its own engine (in-process engines); False: only
            rank 0 pushes (one engine serves all processes).
        accelerator: gathers sharded weights (see ``full_state_dict``); a model sharded by
            ``train/sharding.py`` needs none.
        shared: whether the engine shares ``model``; None finds out (``shares_model``).
        version: the version of the weights at start (the step a resumed run starts from).
        say: where a line goes when the push path changes (the first push, a fallback to
            files); None: nowhere.
    """

    engine: Engine
    model: Any
    _: KW_ONLY
    rank: int = 0
    every_rank: bool = False
    accelerator: Any = None
    shared: bool | None = None
    version: int = 0
    say: Callable[[str], None] | None = None
    history: list[SyncRecord] = field(default_factory=list, init=False)
    """One record per ``push``, in order."""

    def __post_init__(self) -> None:
        if self.shared is None:
            self.shared = shares_model(self.engine, self.model)
        if self.shared:
            self._set_shared_version(self.version)

    @property
    def pushes(self) -> bool:
        """Whether this process sends weights to its engine."""
        return self.every_rank or self.rank == 0

    async def push(self, step: int) -> dict[str, float]:
        """Give the engine the trainer's weights after optimizer step ``step``.

        Returns:
            ``sync/…`` metrics of this push (``sync/seconds``, ``sync/bytes``,
            ``sync/version``).
        """
        t0 = time.perf_counter()
        nbytes, largest, pushed, path = 0, 0, False, "none"
        if self.shared:
            self._set_shared_version(step)
            path = "shared"
        else:
            # Under sharding each gather is a collective: every process takes part.
            sharded = self.accelerator is not None or is_sharded(self.model)
            if self.pushes:
                tally = [0, 0]  # bytes sent, largest tensor
                stream = _tallied(
                    iter_push_weights(self.model, _engine_dtype(self.engine), self.accelerator),
                    tally,
                )
                path = await _deliver(self.engine, stream, step)
                nbytes, largest, pushed = tally[0], tally[1], True
            elif sharded:
                for _ in iter_push_weights(self.model, accelerator=self.accelerator):
                    pass  # this process's part of each gather; nothing to send
        self.version = step
        rec = SyncRecord(step, step, time.perf_counter() - t0, nbytes, pushed, largest, path)
        before = self.history[-1].path if self.history else None
        self.history.append(rec)
        if self.say is not None and pushed and path != before:
            self.say(f"weight push: {path} ({PATH_WORDS.get(path, path)}), {rec.seconds:.2f} s")
        return self.metrics()

    def metrics(self) -> dict[str, float]:
        """``sync/…`` metrics of the latest push (empty before the first)."""
        if not self.history:
            return {}
        rec = self.history[-1]
        return {
            "sync/seconds": rec.seconds,
            "sync/bytes": float(rec.bytes),
            "sync/largest_bytes": float(rec.largest),
            "sync/version": float(rec.version),
            "sync/path": float(SYNC_PATHS[rec.path]),
            "sync/total_seconds": sum(r.seconds for r in self.history),
        }

    def _set_shared_version(self, version: int) -> None:
        lock = self.engine.lock
        if lock is None:
            self.engine.weight_version = version
            return
        with lock:  # no batch is stamped while the version changes
            self.engine.weight_version = version


PATH_WORDS = {
    "ipc": "vLLM's in-GPU weight transfer",
    "files": "safetensors shards staged on the host",
    "copy": "copied into the engine's model",
    "state_dict": "a state dict handed to the engine",
}
"""What each push path means, for the line ``WeightSync`` says when it changes."""


def _tallied(
    stream: Iterator[tuple[str, torch.Tensor]], tally: list[int]
) -> Iterator[tuple[str, torch.Tensor]]:
    """``stream`` unchanged, adding each tensor's bytes to ``tally[0]`` and keeping the
    largest in ``tally[1]``."""
    for name, t in stream:
        n = t.numel() * t.element_size()
        tally[0] += n
        tally[1] = max(tally[1], n)
        yield name, t


def _engine_dtype(engine: Engine) -> torch.dtype | None:
    """The dtype ``engine`` loads weights in: its ``weight_dtype``, else its own model's
    (an HF copy), else None (each tensor's own)."""
    if engine.weight_dtype is not None:
        return engine.weight_dtype
    own = engine.model
    if isinstance(own, torch.nn.Module):
        return next(own.parameters()).dtype
    return None


async def _deliver(engine: Any, stream: Iterator[tuple[str, torch.Tensor]], version: int) -> str:
    """Hand ``stream`` to ``engine`` without building a whole state dict where possible.

    An engine that takes a stream (``takes_weight_stream``: vLLM) consumes it in bounded
    chunks (in-GPU transfer or staged files, its ``push_path`` says which); an in-process HF
    copy (``model`` and ``lock``) has each tensor copied into its model under its lock; any
    other engine gets a state dict (``update_weights(dict)``).

    Returns:
        The path taken (a ``SYNC_PATHS`` key).
    """
    if engine.takes_weight_stream:
        res = engine.update_weights(stream, version)
        kind = None
    elif isinstance(engine.model, torch.nn.Module) and engine.lock is not None:
        _copy_into(engine, stream, version)
        return "copy"
    else:
        res = engine.update_weights(dict(stream), version)
        kind = "state_dict"
    if inspect.isawaitable(res):
        await res
    said = getattr(engine, "push_path", None)
    return kind or (said if said in SYNC_PATHS else "files")


def _copy_into(engine: Any, stream: Iterator[tuple[str, torch.Tensor]], version: int) -> None:
    """Copy each streamed tensor into ``engine.model`` in place, then set the version, all
    under the engine's lock (no decode sees half-updated weights).

    Raises:
        KeyError: the stream and the engine's model disagree on the parameter names.
    """
    with engine.lock, torch.no_grad():
        own = engine.model.state_dict()  # tensors sharing the parameters' storage
        seen = set()
        for name, t in stream:
            if name not in own:
                raise KeyError(f"the pushed weight {name!r} is not in the engine's model")
            own[name].copy_(t)
            seen.add(name)
        missing = sorted(set(own) - seen)
        if missing:
            raise KeyError(f"the push left out {len(missing)} weights, e.g. {missing[:3]}")
        engine.weight_version = version


def empty_device_cache() -> bool:
    """Hand the CUDA caching allocator's free blocks back to the driver (``empty_cache``), so
    that a vLLM engine waking up on the same GPU can take them; False without CUDA."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    torch.cuda.empty_cache()
    return True


async def update_then_push(
    engine: Engine,
    sync: WeightSync,
    optimizer: Any,
    update: Callable[[], dict[str, float]],
    step: int,
    *,
    empty_cache: Callable[[], Any] = empty_device_cache,
) -> dict[str, float]:
    """One update between rollouts, with the engine's GPU memory handed over and back.

    For an engine that sleeps (vLLM with ``vllm.enable_sleep_mode``), in this order:
    sleep (level ``vllm.sleep_level``; 2 drops the weights, which the push overwrites anyway),
    ``update()``, gradients freed (``zero_grad(set_to_none=True)``: they would stay allocated
    until the next update), ``empty_cache`` (the trainer's allocator keeps what it freed
    otherwise, and the engine could not take it back), wake the weights, push, ``empty_cache``
    again (the push's gathered tensors), wake the KV cache. An engine that does not sleep
    gets the update, the freed gradients and the push.

    Args:
        engine: the sampling engine (``sleeps``, ``sleep``, ``wake_up(tags)`` when it sleeps).
        sync: pushes the trainer's weights into ``engine``.
        optimizer: the trainer's optimizer (its gradients are freed after the update).
        update: runs the update; returns its metrics.
        step: the optimizer-step count after the update (the pushed weights' version).
        empty_cache: frees the device allocator's cached blocks (tests count the calls).

    Returns:
        The update's metrics and the push's ``sync/…`` metrics.
    """
    sleeps = bool(engine.sleeps)
    if sleeps:
        await engine.sleep()
    metrics = dict(update())
    optimizer.zero_grad(set_to_none=True)  # nothing reads them until the next update
    empty_cache()
    if sleeps:
        await engine.wake_up(tags=["weights"])
    metrics.update(await sync.push(step))
    if sleeps:
        empty_cache()
        await engine.wake_up(tags=["kv_cache"])
    return metrics
