"""The inference-engine base class: token ids in, token ids + log-probs out.

Engines never see text they would have to re-tokenise: the rollout builds prompt ids once
with the chat template and keeps the exact completion ids an engine sampled, so training
uses the ids that were sampled (docs/design.md, "Policy engines").
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class SamplingParams:
    """How to sample one completion."""

    temperature: float = 1.0
    """0 means greedy decoding."""
    top_p: float = 1.0
    """Nucleus sampling mass."""
    max_new_tokens: int = 256
    """Upper bound on completion length."""
    stop: list[str] = field(default_factory=lambda: ["</answer>"])
    """Generation stops after any of these strings (the stop string is kept)."""
    seed: int | None = None
    """Per-request seed for reproducible sampling."""

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0 (0 = greedy)")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")


@dataclass
class Completion:
    """One sampled completion."""

    token_ids: list[int]
    """The exact sampled ids (end-of-sequence id included when it was sampled)."""
    logprobs: list[float]
    """Log-probability of each sampled id under the sampling policy."""
    text: str
    """Decoded text of ``token_ids`` (for parsing the action, never for training)."""
    finish_reason: str
    """'stop' (eos or a stop string) or 'length'."""
    trainable: bool = True
    """False when the ids are not the engine's own (e.g. a text-only API)."""
    weight_version: int | None = None
    """``weight_version`` of the engine's weights this completion was sampled from (the
    trainer's optimizer-step count, see ``train/weight_sync.py``); None when the engine does
    not track versions."""


def prefill_counts(engine: Any) -> tuple[int, int] | None:
    """``Engine.prefill_counts`` of ``engine``, or None for an object without the method (a
    ``Policy``, a test's fake)."""
    counts = getattr(engine, "prefill_counts", None)
    return counts() if counts is not None else None


class Engine(abc.ABC):
    """An inference engine: ``generate`` samples; the rest has a default for engines that
    do not need it.

    The class attributes are what the rollout and the trainer read of every engine; an engine
    that has more to say sets them (as instance attributes or properties). ``close``,
    ``sleep`` and ``wake_up`` do nothing here; an engine that holds resources or gives its GPU
    memory back during updates overrides them (each may be a coroutine function).
    """

    weight_version: int | None = None
    """Version of the weights in force (``VersionedEngine``); None: the engine does not
    track one (completions are then not stamped)."""
    sleeps: bool = False
    """Whether the trainer puts the engine to sleep during updates (``sleep`` /
    ``wake_up``)."""
    lock: Any = None
    """A lock held while the engine decodes or its weights change (a ``threading.Lock``), or
    None: an engine sharing the trainer's model must have one."""
    takes_weight_stream: bool = False
    """Whether ``update_weights`` consumes (name, tensor) pairs lazily (else it gets a state
    dict, or a model of its own has them copied in)."""
    push_path: str | None = None
    """How the last ``update_weights`` reached the engine ('ipc': in-GPU transfer, 'files':
    staged shards), or None: the engine does not say."""
    weight_dtype: Any = None
    """The ``torch.dtype`` pushed weights are cast to; None: the dtype of ``model`` when it is
    a torch module, else each tensor's own."""
    model: Any = None
    """The model object the engine samples from when it runs in this process, else None
    (``WeightSync`` finds out whether it is the trainer's own)."""

    @abc.abstractmethod
    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt."""

    def close(self) -> Any:
        """Release the engine's resources (nothing here). May be a coroutine function:
        callers await what it returns when that is awaitable."""
        return None

    def prefill_counts(self) -> tuple[int, int] | None:
        """Prompt tokens run through the model and prompt tokens requested, since the engine
        started (the difference was served by shared prefixes, duplicate prompts or a prefix
        cache), or None when the engine does not count them."""
        return None

    async def sleep(self, level: int | None = None) -> None:
        """Give the engine's GPU memory back while the trainer updates (nothing here)."""
        return None

    async def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Take back what ``sleep`` gave (``tags``: parts to wake, None: all; nothing here)."""
        return None


@runtime_checkable
class VersionedEngine(Protocol):
    """An engine that knows which version of the policy weights it samples from.

    ``weight_version`` is 0 at start and then the trainer's optimizer-step count of the weights
    in force. An engine that shares the trainer's model object (``HFEngine`` in the trainer)
    has its version set by ``WeightSync`` after each update; one that holds its own copy
    (vLLM, a remote server) receives the new weights through ``update_weights``. Engines stamp
    each ``Completion`` with the version it was sampled from.
    """

    weight_version: int

    def update_weights(self, weights: Any, version: int | None = None) -> Any:
        """Load ``weights`` (a state dict, or (name, tensor) pairs) and set ``weight_version``
        to ``version`` (default: one more). May be a coroutine function."""
        ...
