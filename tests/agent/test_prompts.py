"""Tests of agent/prompts.py: system prompt, observation rendering and user turns."""

from __future__ import annotations

import dataclasses

from webagent_r1.agent.actions import describe_action_space, parse_action
from webagent_r1.agent.prompts import format_observation, format_user_turn, system_prompt
from webagent_r1.types import Observation


def test_system_prompt_thinking() -> None:
    text = system_prompt(thinking=True)
    assert describe_action_space() in text
    assert "<think>...</think>" in text and "<answer>...</answer>" in text
    assert "exactly one action" in text
    # The example response is itself a valid response.
    example = text.split("Example:\n", 1)[1]
    assert example.startswith("<think>")
    assert parse_action(example).kind == "Search"
    # Short: about 250 tokens; ~4 characters per token is a generous upper bound here.
    assert len(text) < 1100


def test_system_prompt_no_thinking() -> None:
    text = system_prompt(thinking=False)
    assert "<think>" not in text
    assert "<answer>...</answer>" in text
    example = text.split("Example:\n", 1)[1]
    assert example == '<answer>do(action="Search", argument="red mug", element="5")</answer>'
    assert parse_action(example).element == "5"
    assert len(text) < len(system_prompt(thinking=True))


def test_format_observation_minimal() -> None:
    obs = Observation(url="http://127.0.0.1:9000/", title="Shop", text='[1] link "Home"')
    assert format_observation(obs) == 'URL: http://127.0.0.1:9000/\n[1] link "Home"'
    shown = dataclasses.replace(obs, shown_url="http://127.0.0.1:7770/")
    assert format_observation(shown) == 'URL: http://127.0.0.1:7770/\n[1] link "Home"'


def test_format_observation_one_tab_is_not_shown() -> None:
    obs = Observation(url="u", title="t", text="page", tabs=["Shop"])
    assert format_observation(obs) == "URL: u\npage"


def test_format_observation_tabs_and_error() -> None:
    obs = Observation(
        url="http://x/admin",
        title="Admin",
        text='[3] button "Save"',
        tabs=["Shop", "Admin"],
        active_tab=1,
        error='Click needs element="N"',
    )
    assert format_observation(obs) == (
        "URL: http://x/admin\n"
        "Tabs: [0] Shop, [1] Admin (active)\n"
        'Error from last action: Click needs element="N"\n'
        '[3] button "Save"'
    )


def test_format_user_turn() -> None:
    assert format_user_turn("Find the mug", 0, "PAGE", first=True) == (
        "Task: Find the mug\n\nRound 0\nPAGE"
    )
    assert format_user_turn("Find the mug", 3, "PAGE", first=False) == "Round 3\nPAGE"
