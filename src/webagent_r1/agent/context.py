"""Dynamic context compression (docs/design.md, "Context compression"; WebAgent-R1 §3).

Turn k's prompt is the system prompt, the task, every earlier turn's full response with a
placeholder instead of its observation, and the current full observation. Pages are by far
the longest part of a prompt, so dropping the old ones keeps the prompt roughly constant in
length however long the episode runs, while the agent still sees everything it did.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from webagent_r1.agent.prompts import format_user_turn, system_prompt
from webagent_r1.config import AgentConfig

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "HistoryTurn",
    "Message",
    "build_messages",
    "build_uncompressed_messages",
    "strip_think",
]

Message = dict[str, str]
"""A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""

DEFAULT_PLACEHOLDER = "[page omitted]"


@dataclass(frozen=True)
class HistoryTurn:
    """One earlier turn of the episode.

    Attributes:
        response: the agent's full response in that turn (``<think>``/``<answer>``).
        observation_text: the rendered observation the agent saw before responding.
    """

    response: str
    observation_text: str


# Think tags and the answer opener, in one pass; the answer opener ends the thinking region.
_TAG = re.compile(r"<\s*(/?)\s*(think|answer)\s*>", re.IGNORECASE)


def strip_think(text: str) -> str:
    """Remove the ``<think>…</think>`` blocks of a response, keeping the rest.

    Only tags before the answer are considered, so an ``<answer>`` whose argument mentions
    ``<think>`` is kept intact. A closing ``</think>`` with no opener (chat templates that put
    ``<think>`` in the prompt) drops everything before it; an unclosed ``<think>`` drops up
    to the answer, or to the end.

    Args:
        text: a model response.

    Returns:
        The response without its thinking, stripped of surrounding whitespace.
    """
    pieces: list[str] = []
    pos = 0  # start of the text not yet copied or dropped
    open_at: int | None = None  # start of the unclosed <think>, if inside one
    seen_think = False
    for m in _TAG.finditer(text):
        closing, name = m.group(1) == "/", m.group(2).lower()
        if name == "answer":
            if not closing:
                if open_at is not None:
                    pos, open_at = m.start(), None
                break
            continue
        if not closing and open_at is None:
            pieces.append(text[pos : m.start()])
            open_at = m.start()
        elif closing and open_at is not None:
            pos, open_at = m.end(), None
        elif closing and not seen_think:
            # Stray leading </think>: the template opened the thinking block in the prompt.
            pieces, pos = [], m.end()
        seen_think = True
    if open_at is not None:
        pos = len(text)
    pieces.append(text[pos:])
    return "".join(pieces).strip()


def _as_turn(item: HistoryTurn | tuple[str, str]) -> HistoryTurn:
    return item if isinstance(item, HistoryTurn) else HistoryTurn(item[0], item[1])


def build_messages(
    intent: str,
    history: Sequence[HistoryTurn | tuple[str, str]],
    current_observation: str,
    cfg: AgentConfig,
    *,
    placeholder: str = DEFAULT_PLACEHOLDER,
) -> list[Message]:
    """Chat messages of the current turn's prompt, with earlier observations compressed.

    Messages: the system prompt; for each earlier turn k a user message (``Round k`` and its
    observation, or ``placeholder`` when compressed) and the assistant's response; then the
    current user message with the full current observation. The task line is in the first
    user message only.

    Args:
        intent: the task intent.
        history: earlier turns, oldest first, as ``HistoryTurn`` or
            ``(response, observation_text)`` pairs.
        current_observation: the rendered current observation (always shown in full).
        cfg: ``thinking`` picks the system prompt; the last ``keep_last_observations``
            observations (the current one included) stay in full; ``strip_earlier_thinking``
            removes ``<think>`` blocks from earlier responses.
        placeholder: text that replaces a compressed observation.

    Returns:
        The messages, ready for a chat template.
    """
    turns = [_as_turn(t) for t in history]
    # Earlier observations kept in full: the current one counts against the budget.
    first_full = len(turns) - (cfg.keep_last_observations - 1)
    messages: list[Message] = [{"role": "system", "content": system_prompt(cfg.thinking)}]
    for k, turn in enumerate(turns):
        obs = turn.observation_text if k >= first_full else placeholder
        response = strip_think(turn.response) if cfg.strip_earlier_thinking else turn.response
        messages.append({"role": "user", "content": format_user_turn(intent, k, obs, k == 0)})
        messages.append({"role": "assistant", "content": response})
    current = format_user_turn(intent, len(turns), current_observation, not turns)
    messages.append({"role": "user", "content": current})
    return messages


def build_uncompressed_messages(
    intent: str,
    history: Sequence[HistoryTurn | tuple[str, str]],
    current_observation: str,
    cfg: AgentConfig,
) -> list[Message]:
    """The prompt without compression: every observation and every full response.

    The baseline that compression is measured against; only ``cfg.thinking`` is used.

    Args:
        intent: the task intent.
        history: earlier turns, oldest first.
        current_observation: the rendered current observation.
        cfg: the agent config (``thinking`` picks the system prompt).

    Returns:
        The messages, ready for a chat template.
    """
    full = AgentConfig(
        thinking=cfg.thinking,
        keep_last_observations=len(history) + 1,
        strip_earlier_thinking=False,
    )
    return build_messages(intent, history, current_observation, full)
