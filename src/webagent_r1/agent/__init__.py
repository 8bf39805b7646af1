"""The agent's text layer: prompts, context compression and action parsing (pure, no I/O)."""

from webagent_r1.agent.actions import (
    ActionParseError,
    describe_action_space,
    extract_answer,
    format_action,
    parse_action,
)
from webagent_r1.agent.context import (
    DEFAULT_PLACEHOLDER,
    HistoryTurn,
    Message,
    build_messages,
    build_uncompressed_messages,
    strip_think,
)
from webagent_r1.agent.prompts import format_observation, format_user_turn, system_prompt

__all__ = [
    "DEFAULT_PLACEHOLDER",
    "ActionParseError",
    "HistoryTurn",
    "Message",
    "build_messages",
    "build_uncompressed_messages",
    "describe_action_space",
    "extract_answer",
    "format_action",
    "format_observation",
    "format_user_turn",
    "parse_action",
    "strip_think",
    "system_prompt",
]
