"""Prompt text: the system prompt, the rendering of an observation, and the user-turn format.

Kept short on purpose: the system prompt is part of every turn's prompt, and on a CPU every
prompt token costs prefill time in rollouts and activation memory in training.
"""

from __future__ import annotations

from webagent_r1.agent.actions import describe_action_space
from webagent_r1.types import Observation

__all__ = ["format_observation", "format_user_turn", "system_prompt"]

_INTRO = (
    "You are a web agent completing a task in a browser, one action per turn. Each turn "
    'shows the page as text; interactive elements have ids (id="N" or [N]).'
)
_RULES_THINKING = (
    "Think briefly in <think>...</think>, then give exactly one action in "
    "<answer>...</answer>. Answer questions with exit(message=...)."
)
_RULES_NO_THINKING = (
    "Reply with exactly one action in <answer>...</answer> and nothing else. "
    "Answer questions with exit(message=...)."
)
_EXAMPLE_THINKING = (
    "<think>Element 5 is the search box.</think>\n"
    '<answer>do(action="Search", argument="red mug", element="5")</answer>'
)
_EXAMPLE_NO_THINKING = '<answer>do(action="Search", argument="red mug", element="5")</answer>'


def system_prompt(thinking: bool = True) -> str:
    """The system prompt: setting, action space, response format and one example.

    Args:
        thinking: ``<think>`` then ``<answer>`` (True), or the ``<answer>``-only variant.

    Returns:
        The prompt text (about 250 tokens).
    """
    rules = _RULES_THINKING if thinking else _RULES_NO_THINKING
    example = _EXAMPLE_THINKING if thinking else _EXAMPLE_NO_THINKING
    return f"{_INTRO}\n\nActions:\n{describe_action_space()}\n\n{rules}\n\nExample:\n{example}"


def format_observation(obs: Observation) -> str:
    """Render an observation as the text the model sees.

    Lines: ``URL: …`` (``obs.shown_url`` when set); ``Tabs: …`` only when more than one tab
    is open (one tab is the common case and would waste tokens); ``Error from last action: …``
    when the last action failed (so the model can correct itself); then the page text.

    Args:
        obs: the observation.

    Returns:
        The rendered text.
    """
    lines = [f"URL: {obs.prompt_url}"]
    if len(obs.tabs) > 1:
        tabs = [
            f"[{i}] {title}" + (" (active)" if i == obs.active_tab else "")
            for i, title in enumerate(obs.tabs)
        ]
        lines.append("Tabs: " + ", ".join(tabs))
    if obs.error:
        lines.append(f"Error from last action: {obs.error}")
    lines.append(obs.text)
    return "\n".join(lines)


def format_user_turn(task_intent: str, round_idx: int, obs_text: str, first: bool) -> str:
    """The user message of one turn.

    The task is stated in the first user message only; later turns carry just the round
    number and the observation, so the task costs its tokens once per prompt.

    Args:
        task_intent: the task, e.g. "What is the price of the cheapest red mug?".
        round_idx: the turn index, from 0.
        obs_text: the rendered observation, or a placeholder for a compressed turn.
        first: whether this is the first user message of the prompt.

    Returns:
        ``Task: {intent}\\n\\nRound {k}\\n{obs}`` when first, else ``Round {k}\\n{obs}``.
    """
    turn = f"Round {round_idx}\n{obs_text}"
    return f"Task: {task_intent}\n\n{turn}" if first else turn
