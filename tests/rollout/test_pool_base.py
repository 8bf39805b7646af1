"""``EnvPool.lease``: written once over a pool's ``acquire`` and ``release``."""

from __future__ import annotations

import asyncio

import pytest

from webagent_r1.rollout.pool_base import EnvPool


class Recording(EnvPool[str]):
    def __init__(self) -> None:
        self.idle = ["a", "b"]
        self.log: list[str] = []

    @property
    def size(self) -> int:
        return 2

    async def acquire(self) -> str:
        env = self.idle.pop(0)
        self.log.append(f"acquire {env}")
        return env

    async def release(self, env: str) -> None:
        self.log.append(f"release {env}")
        self.idle.append(env)

    async def close_episodes(self) -> None:
        pass


async def test_lease_releases_however_the_block_ends() -> None:
    pool = Recording()
    async with pool.lease() as env:
        assert env == "a" and pool.idle == ["b"]
    with pytest.raises(RuntimeError, match="boom"):
        async with pool.lease() as env:
            raise RuntimeError("boom")

    async def held() -> None:
        async with pool.lease():
            await asyncio.sleep(10)

    task = asyncio.create_task(held())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.log == [f"{op} {e}" for e in "aba" for op in ("acquire", "release")]
    assert sorted(pool.idle) == ["a", "b"]


def test_the_pools_share_it() -> None:
    from tests.support.fakes import FakeEnvPool
    from webagent_r1.rollout.pool import LocalEnvPool
    from webagent_r1.rollout.ray_pool import RayEnvPool

    for cls in (LocalEnvPool, RayEnvPool, FakeEnvPool):
        assert issubclass(cls, EnvPool) and cls.lease is EnvPool.lease
