"""Tests of agent/context.py: dynamic context compression and thinking removal."""

from __future__ import annotations

import pytest

from webagent_r1.agent.context import (
    HistoryTurn,
    build_messages,
    build_uncompressed_messages,
    strip_think,
)
from webagent_r1.agent.prompts import system_prompt
from webagent_r1.config import AgentConfig

INTENT = "Buy a red mug"
R0 = '<think>search</think>\n<answer>do(action="Search", argument="red mug", element="5")</answer>'
R1 = '<think>open it</think>\n<answer>do(action="Click", element="12")</answer>'
R2 = '<think>add</think>\n<answer>do(action="Click", element="30")</answer>'
HISTORY = [("OBS0", R0), ("OBS1", R1), ("OBS2", R2)]


def _history(kind: str = "tuple") -> list:
    if kind == "tuple":
        return [(r, o) for o, r in HISTORY]
    return [HistoryTurn(response=r, observation_text=o) for o, r in HISTORY]


@pytest.mark.parametrize("kind", ["tuple", "dataclass"])
def test_compressed_messages_exact(kind: str) -> None:
    msgs = build_messages(INTENT, _history(kind), "OBS3", AgentConfig(), placeholder="[gone]")
    assert msgs == [
        {"role": "system", "content": system_prompt(thinking=True)},
        {"role": "user", "content": "Task: Buy a red mug\n\nRound 0\n[gone]"},
        {"role": "assistant", "content": R0},
        {"role": "user", "content": "Round 1\n[gone]"},
        {"role": "assistant", "content": R1},
        {"role": "user", "content": "Round 2\n[gone]"},
        {"role": "assistant", "content": R2},
        {"role": "user", "content": "Round 3\nOBS3"},
    ]


def test_keep_last_two_observations_and_strip_thinking() -> None:
    cfg = AgentConfig(thinking=False, keep_last_observations=2, strip_earlier_thinking=True)
    msgs = build_messages(INTENT, _history(), "OBS3", cfg)
    assert msgs == [
        {"role": "system", "content": system_prompt(thinking=False)},
        {"role": "user", "content": "Task: Buy a red mug\n\nRound 0\n[page omitted]"},
        {
            "role": "assistant",
            "content": '<answer>do(action="Search", argument="red mug", element="5")</answer>',
        },
        {"role": "user", "content": "Round 1\n[page omitted]"},
        {"role": "assistant", "content": '<answer>do(action="Click", element="12")</answer>'},
        {"role": "user", "content": "Round 2\nOBS2"},
        {"role": "assistant", "content": '<answer>do(action="Click", element="30")</answer>'},
        {"role": "user", "content": "Round 3\nOBS3"},
    ]


def test_first_turn_has_task_and_full_observation() -> None:
    msgs = build_messages(INTENT, [], "OBS0", AgentConfig())
    assert msgs[1:] == [{"role": "user", "content": "Task: Buy a red mug\n\nRound 0\nOBS0"}]


def test_keep_more_observations_than_turns_keeps_all() -> None:
    cfg = AgentConfig(keep_last_observations=10)
    assert build_messages(INTENT, _history(), "OBS3", cfg) == build_uncompressed_messages(
        INTENT, _history(), "OBS3", cfg
    )


def test_uncompressed_keeps_everything() -> None:
    cfg = AgentConfig(strip_earlier_thinking=True)  # ignored by the uncompressed baseline
    msgs = build_uncompressed_messages(INTENT, _history(), "OBS3", cfg)
    assert [m["content"] for m in msgs[1:]] == [
        "Task: Buy a red mug\n\nRound 0\nOBS0",
        R0,
        "Round 1\nOBS1",
        R1,
        "Round 2\nOBS2",
        R2,
        "Round 3\nOBS3",
    ]


def _length(msgs: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in msgs)


def test_compression_keeps_prompt_short() -> None:
    cfg = AgentConfig()
    page = "x" * 2000
    response = '<think>next</think><answer>do(action="Click", element="12")</answer>'

    def lengths(turn: int) -> tuple[int, int]:
        history = [(response, page)] * turn
        return (
            _length(build_messages(INTENT, history, page, cfg)),
            _length(build_uncompressed_messages(INTENT, history, page, cfg)),
        )

    compressed_10, uncompressed_10 = lengths(10)
    assert compressed_10 < 0.3 * uncompressed_10
    # From turn 2 to turn 10 the compressed prompt grows only by the 8 extra responses and
    # their "Round k\n[page omitted]" headers (plus one digit for "Round 10").
    compressed_2, _ = lengths(2)
    headers = sum(len(f"Round {k}\n[page omitted]") for k in range(2, 10)) + 1
    assert compressed_10 - compressed_2 == 8 * len(response) + headers


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think>\n<answer>x</answer>", "<answer>x</answer>"),
        ("<answer>x</answer>", "<answer>x</answer>"),
        (
            "pre <think>a</think> mid <think>b</think> <answer>x</answer>",
            "pre  mid  <answer>x</answer>",
        ),
        ("<think>\nmulti\nline\n</think><answer>x</answer>", "<answer>x</answer>"),
        # Chat templates that open <think> in the prompt: a stray leading closer.
        ("reasoning</think>\n<answer>x</answer>", "<answer>x</answer>"),
        # Unclosed thinking: dropped up to the answer, or entirely.
        ("<think>cut off <answer>x</answer>", "<answer>x</answer>"),
        ("<think>cut off", ""),
        # Think tags inside the answer belong to the argument and stay.
        (
            '<think>a</think><answer>do(action="Type", argument="<think>", element="1")</answer>',
            '<answer>do(action="Type", argument="<think>", element="1")</answer>',
        ),
        ("<THINK>a</THINK><answer>x</answer>", "<answer>x</answer>"),
        ("no tags", "no tags"),
    ],
)
def test_strip_think(text: str, expected: str) -> None:
    assert strip_think(text) == expected
