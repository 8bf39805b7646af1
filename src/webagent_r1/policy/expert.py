"""Scripted experts as a rollout policy, so the same rollout code produces BC data.

An expert is not a token-in/token-out engine: it knows its task (its parameters) and reads
the observation. ``ExpertPolicy`` implements the rollout's ``Policy`` protocol instead:
``begin(task)`` starts the task template's expert generator, and each ``act`` sends it the
current observation and turns the ``Step`` it yields into a ``Completion``:

- text: ``Step.response(thinking)``: ``<think>rationale</think>\\n<answer>action</answer>``,
  or with ``cot=True`` a longer step-by-step rationale (``cot_rationale``);
- token ids: the tokenizer's encoding of that text plus the eos id. They are marked
  trainable: they are exactly the ids behaviour cloning trains on, stored in the trajectory
  next to the prompt ids the rollout built, so BC never re-tokenises anything either;
- log-probs: 0.0 per token (the expert's choice is deterministic).

``FixedLatencyEngine`` wraps a policy and adds a fixed delay per call whatever the batch size:
a stand-in for a GPU inference server in rollout benchmarks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.agent.actions import ActionParseError, parse_action
from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.sources.embedded.suite import template_of
from webagent_r1.tasks.experts import Expert, ExpertError, ExpertFactory, Step, elements
from webagent_r1.types import Action, Observation, Task

__all__ = ["ExpertPolicy", "FixedLatencyEngine", "cot_rationale", "expert_of_template"]

FAILED_ACTION = 'exit(message="")'
"""What a failed expert answers: ends the episode (with reward 0) so it can be reported."""


def expert_of_template(task: Task) -> ExpertFactory:
    """The expert of the embedded-suite template that generated ``task``.

    Raises:
        KeyError: the task does not come from the embedded suite.
    """
    return template_of(task).expert


_NEXT = {
    "Click": "So I click element {element}; the page it opens should bring me closer to the goal.",
    "Type": 'So I type "{argument}" into element {element}.',
    "Search": 'So I search for "{argument}" in element {element}; a results page comes next.',
    "Hover": "So I hover over element {element} to reveal what it hides.",
    "Press Enter": "So I press Enter to submit.",
    "Scroll Down": "So I scroll down to see the rest of the page.",
    "Scroll Up": "So I scroll up to see the top of the page.",
    "Select Dropdown Option": (
        'So I select "{argument}" in element {element}; the page updates with that choice.'
    ),
    "go_backward": "So I go back to the previous page.",
    "go_forward": "So I go forward again.",
    "exit": 'So the task is complete and I finish with the answer "{argument}".',
}


def cot_rationale(step: Step, intent: str, obs: Observation) -> str:
    """A step-by-step rationale for ``step``: the task, the page, the element, what is next.

    Args:
        step: the expert's step (its short rationale is the reason the element matches).
        intent: the task instruction.
        obs: the observation the step was chosen on.

    Returns:
        Four to five sentences, e.g. ``The task asks: … The page is "…" (url) with 23
        interactive elements. The element to use is [4] textbox "Search": I search … So I
        search for "…" in element 4; a results page comes next.``
    """
    try:
        action: Action | None = parse_action(step.action)
    except ActionParseError:
        action = None
    els = elements(obs.text)
    parts = [f"The task asks: {intent.strip()}"]
    page = f'The page is "{obs.title}" ({obs.prompt_url}) with {len(els)} interactive elements.'
    if obs.error:
        page += f" My last action failed: {obs.error}"
    parts.append(page)
    reason = step.rationale.strip()
    if action is not None and action.element is not None:
        el = next((e for e in els if e.id == action.element), None)
        what = f'[{el.id}] {el.role} "{el.name}"' if el else f"element {action.element}"
        parts.append(f"The element to use is {what}: {reason}")
    elif action is not None and action.kind == "exit":
        parts.append(f"The page already gives what the task asks for: {reason}")
    else:
        parts.append(reason)
    if action is not None:
        parts.append(
            _NEXT.get(action.kind, "So I do that.").format(
                element=action.element, argument=action.argument or ""
            )
        )
    return " ".join(parts)


@dataclass
class _ExpertState:
    """One episode's expert: its generator and what went wrong, if anything."""

    task: Task
    gen: Expert
    error: str | None = None
    steps: list[Step] = field(default_factory=list)


class ExpertPolicy:
    """The scripted experts, acting through the rollout's ``Policy`` protocol.

    Args:
        tokenizer: encodes response texts; its eos id ends every completion.
        thinking: put the rationale in ``<think>`` (False: ``<answer>`` only).
        cot: expand the rationale into an explicit chain (``cot_rationale``).
        expert_of: the expert factory of a task (default: its embedded-suite template's).
    """

    def __init__(
        self,
        tokenizer: Any,
        thinking: bool = True,
        cot: bool = False,
        expert_of: Callable[[Task], ExpertFactory] = expert_of_template,
    ) -> None:
        self.tokenizer = tokenizer
        self.thinking = thinking
        self.cot = cot
        self.expert_of = expert_of
        self.eos_id: int = tokenizer.eos_token_id
        self.failures: dict[str, str] = {}
        """Task id → why its expert gave up (the episode then ends with reward 0)."""

    def begin(self, task: Task) -> _ExpertState:
        """Start the task's expert (primed: it waits for the first observation)."""
        gen = self.expert_of(task)(dict(task.instantiation_dict))
        state = _ExpertState(task, gen)
        try:
            next(gen)
        except (StopIteration, ExpertError) as e:
            state.error = f"expert failed to start: {e!r}"
        return state

    async def act(
        self, states: list[_ExpertState], inputs: list[Any], params: SamplingParams
    ) -> list[Completion]:
        """Each episode's next expert step as a completion (``inputs`` are ``TurnInput``)."""
        return [self._act(s, i.observation) for s, i in zip(states, inputs, strict=True)]

    def end(self, state: _ExpertState) -> None:
        """Close the generator; record a failure."""
        state.gen.close()
        if state.error is not None:
            self.failures[str(state.task.task_id)] = state.error

    def encode(self, text: str) -> list[int]:
        """The ids BC trains on: the text's encoding plus the eos id."""
        return list(self.tokenizer.encode(text, add_special_tokens=False)) + [self.eos_id]

    def _act(self, state: _ExpertState, obs: Observation) -> Completion:
        step: Step | None = None
        if state.error is None:
            try:
                step = state.gen.send(obs)
                if step is None:
                    state.error = "expert yielded no step"
            except StopIteration:
                state.error = "expert stopped without exit()"
            except ExpertError as e:
                state.error = f"step {len(state.steps) + 1}: {e}"
        if step is None:
            step = Step(FAILED_ACTION, f"The expert failed: {state.error}")
        else:
            state.steps.append(step)
            if self.cot:
                step = Step(step.action, cot_rationale(step, state.task.intent, obs))
        text = step.response(self.thinking)
        ids = self.encode(text)
        return Completion(
            token_ids=ids,
            logprobs=[0.0] * len(ids),
            text=text,
            finish_reason="stop",
            trainable=True,
        )


class FixedLatencyEngine:
    """A policy that answers after a fixed delay per call, whatever the batch size.

    Stands in for a GPU inference server in rollout benchmarks: a batched server's latency
    hardly depends on the batch size, so the rollout's job is to keep its batches full and
    the browsers busy meanwhile.

    Args:
        inner: the policy whose answers are returned (e.g. an ``ExpertPolicy``).
        latency_s: delay of every ``act`` call.
    """

    def __init__(self, inner: Any, latency_s: float = 0.05) -> None:
        self.inner = inner
        self.latency_s = latency_s
        self.calls = 0

    def begin(self, task: Task) -> Any:
        return self.inner.begin(task)

    async def act(
        self, states: list[Any], inputs: list[Any], params: SamplingParams
    ) -> list[Completion]:
        self.calls += 1
        await asyncio.sleep(self.latency_s)
        return await self.inner.act(states, inputs, params)

    def end(self, state: Any) -> None:
        self.inner.end(state)
