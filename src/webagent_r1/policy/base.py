"""The inference-engine protocol: token ids in, token ids + log-probs out.

Engines never see text they would have to re-tokenise: the rollout builds prompt ids once
with the chat template and keeps the exact completion ids an engine sampled, so training
uses the ids that were sampled (docs/design.md, "Policy engines").
"""

from __future__ import annotations

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


@runtime_checkable
class Engine(Protocol):
    """An inference engine."""

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt."""
        ...


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


def weight_version_of(engine: Any) -> int | None:
    """The engine's ``weight_version``, or None when it does not track one."""
    v = getattr(engine, "weight_version", None)
    return v if isinstance(v, int) and not isinstance(v, bool) else None
