"""collect() in real Chromium over the fixture pages: overlap, modes, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fakes import FakeTokenizer, ScriptedEngine
from webagent_r1.browser import Browser
from webagent_r1.config import EnvConfig
from webagent_r1.grading.base import EvalContext, StaticSites
from webagent_r1.rollout.collect import RolloutStats, collect
from webagent_r1.rollout.pool import EnvPool, LocalEnvPool
from webagent_r1.types import Task

pytestmark = pytest.mark.browser

TOK = FakeTokenizer()
CLICK = '<think>Open it.</think><answer>do(action="Click", element="1")</answer>'
EXIT = '<think>The page says $25.00.</think><answer>exit(message="$25.00")</answer>'


def _answer_is_25(ctx: EvalContext) -> tuple[float, str]:
    return float(ctx.answer == "$25.00"), f"answer {ctx.answer!r} on {ctx.url}"


def _tasks(n: int) -> list[Task]:
    return [
        Task(
            task_id=f"fx{i}",
            intent="What does the Orbit Golden Charger cost?",
            start_url="__FIXTURE__/index.html",
            sites=["fixture"],
        )
        for i in range(n)
    ]


def _pool(browser: Browser, site: str, n: int) -> LocalEnvPool:
    return LocalEnvPool(
        browser, n, EnvConfig(max_turns=4), None, StaticSites({"fixture": site}), _answer_is_25
    )


def _contexts(browser: Browser) -> int:
    """Contexts open for episodes (the context pool's clean ones not counted)."""
    if browser._browser is None:
        return 0
    return len(browser._browser.contexts) - browser.pooled_contexts


@pytest.mark.parametrize("mode", ["async", "lockstep"])
async def test_collect_in_chromium(browser: Browser, site: str, mode: str) -> None:
    pool = _pool(browser, site, 3)
    assert isinstance(pool, EnvPool)
    engine = ScriptedEngine(TOK, [CLICK, EXIT], latency_s=0.05)
    stats = RolloutStats()
    tasks = _tasks(2)
    groups = await collect(
        tasks,
        2,
        engine,
        pool,
        TOK,
        max_concurrent_episodes=3,
        progress=True,
        mode=mode,
        stats=stats,
    )
    assert [g.task.task_id for g in groups] == ["fx0", "fx1"]
    for g in groups:
        assert len(g.trajectories) == 2 and g.rewards == [1.0, 1.0]
        for t in g.trajectories:
            assert [u.action.kind for u in t.turns] == ["Click", "exit"]
            assert t.turns[0].observation["title"] == "Orbit Golden Charger"
    assert stats.episodes == 4 and stats.turns == 8 and stats.successes == 4
    assert pool.open_episodes() == 0
    turns = [u for g in groups for t in g.trajectories for u in t.turns]
    gens = [(u.timings["gen_start"], u.timings["gen_end"]) for u in turns]
    envs = [(u.timings["env_start"], u.timings["env_end"]) for u in turns]
    overlap = any(g0 < e1 and e0 < g1 for g0, g1 in gens for e0, e1 in envs)
    # Async overlaps one episode's generation with another's browser work; lockstep never.
    assert overlap == (mode == "async")
    await pool.close()


@pytest.mark.parametrize("when", ["mid_turn", "during_reset"])
async def test_cancellation_closes_every_context(browser: Browser, site: str, when: str) -> None:
    before = _contexts(browser)
    pool = _pool(browser, site, 3)
    engine = ScriptedEngine(TOK, [CLICK, EXIT])
    engine.gate = asyncio.Event()  # generation never returns: episodes wait mid-turn
    job = asyncio.create_task(
        collect(_tasks(4), 2, engine, pool, TOK, max_concurrent_episodes=3, progress=False)
    )
    if when == "mid_turn":
        for _ in range(600):
            await asyncio.sleep(0.05)
            if len(engine.calls) == 3:
                break
        assert len(engine.calls) == 3 and _contexts(browser) == before + 3
    else:
        await asyncio.sleep(0.02)  # resets are under way
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert pool.open_episodes() == 0
    assert _contexts(browser) == before


async def test_pool_spreads_envs_over_several_browsers(browser: Browser, site: str) -> None:
    """Envs alternate between the browsers given; episodes run in both at once."""
    from webagent_r1.config import BrowserConfig

    second = await Browser.launch(BrowserConfig())
    try:
        pool = LocalEnvPool(
            [browser, second],
            4,
            EnvConfig(max_turns=4),
            None,
            StaticSites({"fixture": site}),
            _answer_is_25,
        )
        assert [e.browser for e in pool.envs] == [browser, second, browser, second]
        engine = ScriptedEngine(TOK, [CLICK, EXIT], latency_s=0.2)
        seen: list[int] = []

        async def count_contexts() -> None:
            while True:
                seen.append(min(_contexts(browser), _contexts(second)))
                await asyncio.sleep(0.02)

        watcher = asyncio.create_task(count_contexts())
        groups = await collect(_tasks(2), 2, engine, pool, TOK, max_concurrent_episodes=4)
        watcher.cancel()
        assert all(g.rewards == [1.0, 1.0] for g in groups)
        assert max(seen) >= 1  # both Chromium processes held an episode at the same time
        assert pool.open_episodes() == 0 and _contexts(second) == 0
        with pytest.raises(ValueError, match="at least one browser"):
            LocalEnvPool([], 1)
    finally:
        await second.close()
