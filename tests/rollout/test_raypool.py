"""RayEnvPool: browser workers on Ray actors behind the EnvPool interface.

The Ray tests share one pool (one local Ray, two workers of two slots) for the module: the
scripted experts give the same groups as through a LocalEnvPool, and a worker killed in the
middle of a rollout is replaced without losing a group.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from webagent_r1.config import Config, ConfigError, load_config
from webagent_r1.grading.embedded import evaluate
from webagent_r1.policy.expert import ExpertPolicy
from webagent_r1.policy.hf import load_tokenizer
from webagent_r1.rollout.collect import Group, RolloutStats, collect
from webagent_r1.rollout.pool import EnvPool, LocalEnvPool, make_env_pool
from webagent_r1.sources.embedded.suite import build_suite, select
from webagent_r1.types import Task


def _short_tasks(n: int) -> list[Task]:
    """The first train task of ``n`` quick templates (1-2 expert steps), one per template."""
    seen: dict[str, Task] = {}
    for t in select(build_suite(), split="train"):
        if t.extra.get("difficulty") == "1-2":
            seen.setdefault(t.extra["template"], t)
    return list(seen.values())[:n]


def _shape(groups: list[Group]) -> list[Any]:
    """What must not depend on where the browsers run (URLs do: each worker has its ports)."""
    return [
        (
            g.task.task_id,
            [
                (
                    t.status,
                    t.reward,
                    [
                        (u.action.kind, u.action.element, u.action.argument)
                        for u in t.turns
                        if u.action
                    ],
                    len(t.turns),
                )
                for t in g.trajectories
            ],
        )
        for g in groups
    ]


async def _until_dead(actor: Any, timeout_s: float = 60.0) -> None:
    """Wait until a killed actor stops answering (``ray.kill`` takes effect asynchronously)."""
    import ray

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        try:
            await asyncio.wait_for(actor.ping.remote(), 5)
        except (TimeoutError, ray.exceptions.RayActorError):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the killed actor still answers after {timeout_s:g} s")


# ------------------------------------------------------------------ without Ray


def test_env_pool_config_and_local_factory() -> None:
    cfg = Config()
    assert (cfg.rollout.env_pool, cfg.rollout.ray_workers, cfg.rollout.ray_address) == (
        "local",
        2,
        "",
    )
    cfg = load_config(None, ["rollout.env_pool=ray", "rollout.ray_address=auto"])
    assert cfg.rollout.env_pool == "ray" and cfg.rollout.ray_address == "auto"
    for override, message in [
        ("rollout.env_pool=docker", "rollout.env_pool must be one of 'local', 'ray'"),
        ("rollout.ray_workers=0", "rollout.ray_workers must be >= 1"),
    ]:
        with pytest.raises(ConfigError, match=message):
            load_config(None, [override])
    pool = make_env_pool(Config(), 3, browser=object())  # type: ignore[arg-type]
    assert isinstance(pool, LocalEnvPool) and pool.size == 3
    with pytest.raises(ValueError, match="needs a launched browser"):
        make_env_pool(Config(), 3)


def test_without_ray_the_pool_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from webagent_r1.rollout.ray_pool import RayEnvPool, RayNotInstalledError

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    with pytest.raises(ImportError, match=r"pip install 'webagent-r1\[ray\]'") as info:
        RayEnvPool(Config())
    assert "\n" not in str(info.value)
    with pytest.raises(RayNotInstalledError, match=r"webagent-r1\[ray\]"):
        make_env_pool(load_config(None, ["rollout.env_pool=ray"]), 4)


# ------------------------------------------------------------------ with Ray


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer(Config().model.name)


@pytest.fixture(scope="module")
async def ray_pool() -> AsyncIterator[Any]:
    """Two workers of two slots on a local Ray started by the pool (shut down by close)."""
    ray = pytest.importorskip("ray")
    from webagent_r1.rollout.ray_pool import RayEnvPool

    assert not ray.is_initialized()
    pool = RayEnvPool(Config(), workers=2, slots_per_worker=2)
    yield pool
    await pool.close()
    assert not ray.is_initialized()


@pytest.mark.browser
async def test_ray_pool_collects_the_same_groups_as_a_local_pool(
    ray_pool: Any, browser: Any, embedded_sites: Any, tokenizer: Any
) -> None:
    cfg = Config()
    tasks = _short_tasks(3)

    def count_tokens(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False).input_ids)

    local = LocalEnvPool(
        browser, 4, cfg.env, cfg.observation, embedded_sites, evaluate, count_tokens
    )
    try:
        expected = await collect(
            tasks, 2, ExpertPolicy(tokenizer), local, tokenizer, progress=False
        )
    finally:
        await local.close()
    assert isinstance(ray_pool, EnvPool) and ray_pool.size == 4
    stats = RolloutStats()
    groups = await collect(
        tasks,
        2,
        ExpertPolicy(tokenizer),
        ray_pool,
        tokenizer,
        max_concurrent_episodes=4,
        progress=False,
        stats=stats,
    )
    assert _shape(groups) == _shape(expected)
    assert all(g.rewards == [1.0, 1.0] for g in groups)
    assert stats.env_errors == 0 and ray_pool.restarts == 0 and ray_pool.open_episodes() == 0
    infos = await ray_pool.ping()
    assert len({i["pid"] for i in infos}) == 2 and all(i["open_episodes"] == 0 for i in infos)


@pytest.mark.browser
async def test_a_killed_worker_is_replaced_and_no_group_is_lost(
    ray_pool: Any, tokenizer: Any
) -> None:
    import ray

    tasks = _short_tasks(3)
    pids = {i["pid"] for i in await ray_pool.ping()}
    restarts = ray_pool.restarts
    expert = ExpertPolicy(tokenizer)
    stats = RolloutStats()
    killed: list[int] = []

    class KillAWorkerMidEpisode:
        """The experts, but after the first finished episode one worker's actor is killed
        while an episode is open on it (this turn's step then finds it dead)."""

        def begin(self, task: Task) -> Any:
            return expert.begin(task)

        def end(self, state: Any) -> None:
            expert.end(state)

        async def act(self, states: list[Any], inputs: list[Any], params: Any) -> list[Any]:
            busy = [e for e in ray_pool.envs if e.episode_open]
            if not killed and stats.episodes >= 1 and busy:
                actor = ray_pool.workers[busy[0].worker].actor
                ray.kill(actor)
                killed.append(busy[0].worker)
                await _until_dead(actor)  # dead before we go on
            return await expert.act(states, inputs, params)

    groups = await collect(
        tasks,
        2,
        KillAWorkerMidEpisode(),
        ray_pool,
        tokenizer,
        max_concurrent_episodes=4,
        progress=False,
        stats=stats,
    )
    assert killed
    assert [g.task.task_id for g in groups] == [t.task_id for t in tasks]
    for g in groups:
        assert len(g.trajectories) == 2 and g.rewards == [1.0, 1.0]
        assert all(t.status == "done" for t in g.trajectories)
    # The lost episodes were env errors, run again: none dropped, none a failure.
    assert stats.env_errors >= 1 and stats.dropped == 0
    assert stats.episodes == stats.successes == 6
    assert any(t.info["attempt"] >= 1 for g in groups for t in g.trajectories)
    assert ray_pool.restarts >= restarts + 1
    after = {i["pid"] for i in await ray_pool.ping()}  # the replacement answers
    assert len(after) == 2 and len(after - pids) == 1
