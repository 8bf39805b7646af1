"""The ``vab`` scoring against VisualAgentBench's evaluator, rule by rule.

Each test gives an input both evaluators would see (the model's exit action as it wrote it,
a Lite task), the score VisualAgentBench gives, worked out by hand from its code
(``VAB-WebArena-Lite/new/evaluators.py``, ``run.py`` and ``create_webrl_id_based_action`` in
``browser_env/actions.py``, which WebAgent-R1's ``Eval/`` copies) and written in the test,
and checks ours. Where the ``webarena`` scoring or our earlier reading differ, that is shown
too, so each test fails if the vab rule is lost.

VAB's steps, as the comments below cite them:

- reading: the text from the last ``exit(`` is parsed with ``ast.parse`` and the
  ``message`` keyword through ``ast.literal_eval``; without exit, ``run.py`` grades
  ``create_stop_action(f"Early stop: Reach max steps {max_steps}")``.
- ``StringEvaluator``: ``pred = clean_answer(answer)`` (one pair of enclosing ASCII quotes
  dropped, lowercased, not trimmed); ``must_include``: when ``word_tokenize(ref)`` is one
  token, ``ref in word_tokenize(pred)`` (plus the parts of tokens with ``/``), else a
  substring; ``fuzzy_match: "N/A"``: ``exact_match`` with "N/A", else ``ua_match`` by the
  judge with ``string_note``.
- ``run.py``: any exception of the evaluator goes to ``error.txt`` and the task is not
  scored (``get_unfinished`` runs it again).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.webarena.conftest import FakeJudge, by_id
from tests.webarena.fakesites import FakeSite
from webagent_r1.agent.actions import parse_action
from webagent_r1.browser import Browser
from webagent_r1.config import EnvConfig
from webagent_r1.grading.base import EnvError, EvalContext
from webagent_r1.rollout.env import WebEnv
from webagent_r1.sources.webarena import OpenAIJudge, WebArenaSites, evaluate
from webagent_r1.sources.webarena.grading import (
    ANSWER_FALLBACK,
    vab_answer_must_include,
    vab_clean_answer,
    vab_exit_message,
)
from webagent_r1.sources.webarena.results import headline
from webagent_r1.types import Task, Trajectory

URLS = {"shopping": "http://shop.test:7770", "gitlab": "http://gitlab.test:8023"}


def _ctx(task: Task, sites: WebArenaSites, action: str | None, turn: int = 1) -> EvalContext:
    """An episode that ended with the model's ``action`` text (None: out of turns)."""
    history = [] if action is None else [parse_action(f"<answer>{action}</answer>")]
    return EvalContext(
        task=task,
        answer=None if action is None else history[-1].argument,
        session=None,  # type: ignore[arg-type]  # string checks read no page
        url="",
        instance_id=None,
        backend=sites,
        history=history,
        turn=turn,
    )


async def _reward(task: Task, action: str | None, scoring: str = "vab", turn: int = 1) -> float:
    sites = WebArenaSites(URLS, scoring=scoring)
    return (await evaluate(_ctx(task, sites, action, turn))).reward


# -- must_include tokens: nltk 3.8.1's word_tokenize -------------------------------------


@pytest.mark.parametrize(
    ("task_id", "action", "vab"),
    [
        # Curly quotes. pred = "“hollister” is the top brand" (no ASCII quote pair to drop);
        # NLTKWordTokenizer's STARTING_QUOTES/ENDING_QUOTES split “ and ”: tokens
        # ['“', 'hollister', '”', 'is', …] hold "hollister" → 1.0.
        (32, 'exit(message="“Hollister” is the top brand")', 1.0),
        # A contraction with a curly apostrophe. pred = "hollister’s"; ENDING_QUOTES split
        # ’: ['hollister', '’', 's'] → 1.0.
        (32, 'exit(message="Hollister’s")', 1.0),
        # A plain contraction: "hollister's" → ['hollister', "'s"] → 1.0.
        (32, 'exit(message="Hollister\'s")', 1.0),
        # A number with a period, which Punkt reads as an ordinal. pred (lowercased first) =
        # "25. that is the total."; "25." is ##number## and the next word "that" is lower
        # case with upper-case occurrences in the English model's ortho context, so the
        # ortho heuristic says no sentence starts there: one sentence, and
        # NLTKWordTokenizer splits only its final period: ['25.', 'that', …, 'total', '.']
        # has no "25" → 0.0.
        (33, 'exit(message="25. That is the total.")', 0.0),
        # The same answer without the period: ['25', 'that', …] → 1.0.
        (33, 'exit(message="25 That is the total.")', 1.0),
        # The same rule on task 49 (must_include "1"): "1. kilian made one commit." →
        # ['1.', 'kilian', …] → 0.0 (WebArena's regex splits the period off: 1.0).
        (49, 'exit(message="1. Kilian made one commit.")', 0.0),
        # An abbreviation of the English model (u.s) keeps its period and does not end the
        # sentence: "maine, vermont and massachusetts (u.s. states)." → ['maine', ',',
        # 'vermont', 'and', 'massachusetts', '(', 'u.s.', 'states', ')', '.'] → all three
        # references of task 20 are tokens → 1.0.
        (20, 'exit(message="Maine, Vermont and Massachusetts (U.S. states).")', 1.0),
    ],
)
async def test_must_include_tokens_are_nltks(
    lite_tasks: list[Task], task_id: int, action: str, vab: float
) -> None:
    task = by_id(lite_tasks)[task_id]
    assert await _reward(task, action) == vab
    # WebArena's rule for a one-item list of more than one character is a substring: 1.0.
    assert await _reward(task, action, "webarena") == 1.0


# -- reading the answer: ast.literal_eval ---------------------------------------------------


async def test_newline_escape_in_an_answer_task_32(lite_tasks: list[Task]) -> None:
    # The model writes a backslash and an n. VAB: literal_eval gives a newline, pred =
    # "top brands:\nhollister\nnike"; word_tokenize → ['top', 'brands', ':', 'hollister',
    # 'nike'] → "hollister" → 1.0. Read as written ("…:\\nhollister\\nnike") the token
    # would be "\\nhollister" → 0.
    task = by_id(lite_tasks)[32]
    action = r'exit(message="Top brands:\nHollister\nNike")'
    assert vab_exit_message(action) == "Top brands:\nHollister\nNike"
    assert parse_action(action).argument == r"Top brands:\nHollister\nNike"
    assert not vab_answer_must_include(["Hollister"], vab_clean_answer(r"Top brands:\nHollister"))
    assert await _reward(task, action) == 1.0


async def test_unicode_escape_in_an_answer_task_32(lite_tasks: list[Task]) -> None:
    # \u201c … \u201d become “ ” (literal_eval), which word_tokenize splits off → 1.0;
    # read as written, "\\u201chollister\\u201d" is one token → 0.
    task = by_id(lite_tasks)[32]
    assert await _reward(task, r'exit(message="\u201cHollister\u201d")') == 1.0
    written = r"\u201cHollister\u201d"  # read as written: one token, no "hollister"
    assert not vab_answer_must_include(["Hollister"], vab_clean_answer(written))


async def test_malformed_literal_falls_back_and_is_counted(lite_tasks: list[Task]) -> None:
    # "\x" is not a valid escape: ast.parse raises SyntaxError, so VAB cannot read the action
    # at all (it would ask the model again); we grade the text as written and count it.
    task = by_id(lite_tasks)[32]
    action = r'exit(message="Hollister C:\x")'
    assert vab_exit_message(action) is None
    sites = WebArenaSites(URLS)
    result = await evaluate(_ctx(task, sites, action))
    assert result.reward == 1.0 and ANSWER_FALLBACK in result.explanation
    episode = Trajectory(task_id=32, group_id=0, reward=1.0, status="done")
    episode.info["explanation"] = result.explanation
    clean = Trajectory(task_id=32, group_id=0, reward=1.0, status="done")
    clean.info["explanation"] = "string_match: ok"
    assert headline([task, task], [episode, clean])["answer_literal_fallbacks"] == 1


# -- errors: an exception is an env error, never 0; every evaluator runs -------------------


class RaisingJudge:
    """A judge whose call raises, as an API client does on a refused request."""

    def __init__(self) -> None:
        self.calls = 0

    async def fuzzy_match(self, pred: str, reference: str, question: str, **kw: Any) -> bool:
        self.calls += 1
        raise RuntimeError("the judge's API refused the request")

    async def ua_match(self, pred: str, reference: str, question: str) -> bool:
        self.calls += 1
        raise RuntimeError("the judge's API refused the request")


async def test_raising_judge_is_an_env_error_task_3(lite_tasks: list[Task]) -> None:
    # VAB: llm_fuzzy_match raises inside StringEvaluator; run.py catches it, writes
    # error.txt and records no score: the task is run again. Ours: an env error with the
    # reason, under vab; WebArena's rule lets a bug propagate.
    task = by_id(lite_tasks)[3]
    judge = RaisingJudge()
    sites = WebArenaSites(URLS, judge=judge)
    with pytest.raises(EnvError, match="string_match: the evaluator raised RuntimeError: the j"):
        await evaluate(_ctx(task, sites, 'exit(message="driving: 13min")'))
    assert judge.calls == 1
    sites.scoring = "webarena"
    with pytest.raises(RuntimeError):
        await evaluate(_ctx(task, sites, 'exit(message="driving: 13min")'))


async def test_every_evaluator_runs_after_a_zero_task_45(lite_tasks: list[Task]) -> None:
    # Task 45: string_match (exact "Yes") then url_match. VAB's EvaluatorComb calls every
    # evaluator: with a wrong answer (0) the URL check still runs, and a rule it does not
    # know raises ValueError("Unknown matching rule") → an error, not 0.
    task = by_id(lite_tasks)[45]
    task = dataclasses.replace(task, eval={**task.eval, "url_note": "SAME HOST"})
    with pytest.raises(EnvError, match="url_match: the evaluator raised ValueError"):
        await _reward(task, 'exit(message="No")')
    assert await _reward(task, 'exit(message="No")', "webarena") == 0.0  # stops at the 0


# -- no answer: graded as VAB grades the early stop ------------------------------------


async def test_empty_answer_on_an_na_task_asks_the_judge_task_114(
    lite_tasks: list[Task], judge_server: FakeJudge
) -> None:
    # Task 114: fuzzy_match "N/A", string_note "System message: We cannot add order
    # history.". exit(message="") → pred "" → exact_match("N/A", "") = 0 → score =
    # ua_match(pred="", ref=string_note): the judge decides.
    task = by_id(lite_tasks)[114]
    sites = WebArenaSites(URLS, judge=OpenAIJudge(judge_server.base_url, "m"))
    ctx = _ctx(task, sites, 'exit(message="")')
    judge_server.reply_override = "different"
    assert (await evaluate(ctx)).reward == 0.0
    judge_server.reply_override = "same"
    assert (await evaluate(ctx)).reward == 1.0
    prompts = [r["body"]["messages"][-1]["content"] for r in judge_server.requests]
    assert len(prompts) == 2 and all("reported unachievable reason: \n" in p for p in prompts)


async def test_no_exit_is_graded_on_vabs_early_stop_text(
    lite_tasks: list[Task], judge_server: FakeJudge
) -> None:
    # Out of turns: VAB grades "Early stop: Reach max steps 15" (max_steps = 15). On N/A
    # task 114 that reaches the judge (ua_match with pred "early stop: reach max steps
    # 15"); ours did 0 at once, and still does under webarena.
    task = by_id(lite_tasks)[114]
    sites = WebArenaSites(URLS, judge=OpenAIJudge(judge_server.base_url, "m"))
    judge_server.reply_override = "same"
    assert (await evaluate(_ctx(task, sites, None, turn=15))).reward == 1.0
    (req,) = judge_server.requests
    prompt = req["body"]["messages"][-1]["content"]
    assert "reported unachievable reason: early stop: reach max steps 15\n" in prompt
    sites.scoring = "webarena"
    assert (await evaluate(_ctx(task, sites, None, turn=15))).reward == 0.0
    assert len(judge_server.requests) == 1
    # Task 33 (must_include "25"): "early stop: reach max steps 25" tokenizes to [… '25']:
    # VAB passes an episode that ran out of 25 turns; 24 turns fail.
    assert await _reward(by_id(lite_tasks)[33], None, turn=25) == 1.0
    assert await _reward(by_id(lite_tasks)[33], None, turn=24) == 0.0
    assert await _reward(by_id(lite_tasks)[33], None, "webarena", turn=25) == 0.0


# -- through WebEnv: the episode's turns, its action text and its env error ---------------


@pytest.mark.browser
async def test_vab_rules_through_webenv(browser: Browser, fake_sites: dict[str, FakeSite]) -> None:
    """A whole episode on the fake reddit: the env hands the evaluator the exit's text and
    the turns taken, and a raising judge ends the episode as an env error."""
    sites = WebArenaSites({"reddit": fake_sites["reddit"].base_url})
    task = Task(
        task_id="vab-episode",
        intent="How many posts are on the front page?",
        start_url="__REDDIT__/",
        sites=["reddit"],
        eval={"eval_types": ["string_match"], "reference_answers": {"must_include": ["3"]}},
        evaluator=evaluate,
    )
    env = WebEnv(browser, EnvConfig(max_turns=3), backend=sites)
    try:
        # "\n" written as a backslash and an n: VAB reads "Posts:", a newline, "3" →
        # ['posts', ':', '3'] → 1.0 (as written: ['posts', ':', '\\n3'] → 0).
        await env.reset(task)
        done = await env.step(r'<answer>exit(message="Posts:\n3")</answer>')
        assert done.done and done.reward == 1.0, done.info
        # Out of 3 turns: VAB grades "early stop: reach max steps 3", whose tokens end in
        # "3" → 1.0 (the turn count reaches the evaluator).
        await env.reset(task)
        for _ in range(3):
            last = await env.step('<answer>do(action="Scroll Down")</answer>')
        assert last.done and last.info["status"] == "max_turns"
        assert last.reward == 1.0 and "Reach max steps 3" in last.info["explanation"]
        # A judge that raises: the episode is an env error, never a 0.
        sites.judge = RaisingJudge()
        judged = Task(
            task_id="vab-judged",
            intent=task.intent,
            start_url=task.start_url,
            sites=["reddit"],
            eval={"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ["3"]}},
            evaluator=evaluate,
        )
        await env.reset(judged)
        failed = await env.step('<answer>exit(message="3")</answer>')
        assert failed.done and failed.info["status"] == "env_error"
        assert "the evaluator raised RuntimeError" in failed.info["error"]
    finally:
        await env.close()
