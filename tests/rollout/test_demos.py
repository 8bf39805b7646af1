"""Expert demonstrations through the rollout: reward-1 trajectories, exact ids, <think>."""

from __future__ import annotations

import pytest

from tests.support.fakes import FakeTokenizer
from webagent_r1.agent.actions import parse_action
from webagent_r1.config import Config
from webagent_r1.policy.expert import ExpertPolicy, cot_rationale
from webagent_r1.policy.hf import load_tokenizer
from webagent_r1.rollout.demos import collect_demos, demo_failure
from webagent_r1.sites import SITES
from webagent_r1.sources.embedded.suite import build_suite, select
from webagent_r1.tasks.experts import Step
from webagent_r1.types import Observation, Trajectory


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(Config().model.name)


def _short_tasks(n: int) -> list:
    """The first train task of ``n`` quick templates (1-2 expert steps), one per template."""
    seen: dict[str, object] = {}
    for t in select(build_suite(), split="train"):
        if t.extra.get("difficulty") == "1-2":
            seen.setdefault(t.extra["template"], t)
    return list(seen.values())[:n]


def test_cot_rationale_explains_task_page_element_and_next_step() -> None:
    obs = Observation(
        url="http://shop/", title="One Stop Market", text='[4] textbox "Search"\n[5] button "Go"'
    )
    step = Step('do(action="Search", argument="red mug", element="4")', "I search for it.")
    text = cot_rationale(step, "What is the price of the red mug?", obs)
    assert text.startswith("The task asks: What is the price of the red mug?")
    assert '"One Stop Market" (http://shop/) with 2 interactive elements' in text
    assert 'The element to use is [4] textbox "Search": I search for it.' in text
    assert text.endswith('So I search for "red mug" in element 4; a results page comes next.')
    done = cot_rationale(Step('exit(message="$3")', "It costs $3."), "Price?", obs)
    assert "already gives what the task asks for: It costs $3." in done
    assert done.endswith('finish with the answer "$3".')


async def test_expert_policy_ids_are_the_text_encoding_plus_eos() -> None:
    tok = FakeTokenizer()

    def expert(_p: dict):
        obs = yield None
        yield Step('exit(message="hi")', f"Seen {obs.title}.")

    policy = ExpertPolicy(tok, expert_of=lambda _task: expert)
    from webagent_r1.types import Task

    state = policy.begin(Task(task_id="x", intent="Say hi.", start_url="/"))

    class Inp:
        observation = Observation(url="/", title="Home", text="")

    [c] = await policy.act([state], [Inp()], None)
    assert c.text == '<think>Seen Home.</think>\n<answer>exit(message="hi")</answer>'
    assert c.token_ids == tok.encode(c.text) + [2] and c.trainable
    assert c.logprobs == [0.0] * len(c.token_ids)
    [c2] = await policy.act([state], [Inp()], None)  # the expert has nothing more to say
    assert "expert failed" in c2.text and parse_action(c2.text).kind == "exit"
    policy.end(state)
    assert policy.failures == {"x": "expert stopped without exit()"}


def test_demo_failure_reasons() -> None:
    t = Trajectory("a", 0, [], 1.0, "done")
    assert demo_failure(t) is None
    assert demo_failure(t, "boom") == "expert: boom"
    assert demo_failure(Trajectory("a", 0, [], 0.0, "done", {"explanation": "x"})).startswith(
        "reward 0"
    )
    assert demo_failure(Trajectory("a", 0, [], 0.0, "max_turns")).startswith("status max_turns")


@pytest.mark.browser
@pytest.mark.parametrize("cot", [False, True])
async def test_demos_are_reward_1_with_think_rationale(embedded_sites, tokenizer, cot) -> None:
    tasks = _short_tasks(3)
    assert len(tasks) >= 2
    kept, report = await collect_demos(
        tasks, tokenizer, cot=cot, concurrency=3, sites=embedded_sites, progress=False
    )
    assert report.failures == [] and report.total_kept == len(tasks) == len(kept)
    assert sum(report.kept.values()) == len(tasks) and report.kept.keys() == {
        t.extra["template"] for t in tasks
    }
    for traj in kept:
        assert traj.reward == 1.0 and traj.status == "done" and traj.turns
        for turn in traj.turns:
            assert turn.text.startswith("<think>") and "</think>\n<answer>" in turn.text
            think = turn.text.split("</think>")[0]
            assert ("The task asks:" in think) == cot
            # The ids BC trains on: the response's encoding plus <|im_end|>, as stored.
            ids = tokenizer.encode(turn.text, add_special_tokens=False)
            assert turn.completion_ids == ids + [tokenizer.eos_token_id]
            assert tokenizer.decode(turn.prompt_ids).endswith("<|im_start|>assistant\n")
            assert turn.error is None
        # The prompt is the policy's: system prompt, task, current page.
        first = tokenizer.decode(traj.turns[0].prompt_ids)
        task = next(t for t in tasks if t.task_id == traj.task_id)
        assert f"Task: {task.intent}" in first and "Round 0" in first
        # the sites run on free ports; the prompt shows each at its default port
        real = embedded_sites.urls[task.sites[0]]
        shown = f"http://127.0.0.1:{SITES[task.sites[0]].default_port}"
        assert f"URL: {shown}/" in first
        assert real == shown or real not in first
        assert real == shown or all(real not in t.text for t in traj.turns)
        if cot:  # the rationale names the page by the URL the prompt shows
            assert f"({shown}/" in traj.turns[0].text
