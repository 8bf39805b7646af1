"""The ``EnvPool`` base class: where the rollout gets an env for each episode.

A pool provides the primitives (``size``, ``acquire``, ``release``, ``close_episodes``);
``lease`` is written once here on top of them. ``rollout/pool.py`` has the local pool and
``make_env_pool``, ``rollout/ray_pool.py`` the pool of Ray browser workers.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import AsyncIterator
from typing import Generic, TypeVar

E = TypeVar("E")
"""The pool's env type (a ``WebEnv``, or a proxy with its ``reset``/``step``/``close_episode``)."""


class EnvPool(abc.ABC, Generic[E]):
    """A set of environments, each running one episode at a time."""

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """How many envs the pool holds (episodes that can run at once)."""

    @abc.abstractmethod
    async def acquire(self) -> E:
        """An idle env, waiting until one is free."""

    @abc.abstractmethod
    async def release(self, env: E) -> None:
        """Give ``env`` back; its episode (if any) is ended first."""

    @abc.abstractmethod
    async def close_episodes(self) -> None:
        """End every open episode of every env (after a cancellation); the pool stays usable."""

    @contextlib.asynccontextmanager
    async def lease(self) -> AsyncIterator[E]:
        """``async with pool.lease() as env``: acquire, release on exit (cancellation too)."""
        env = await self.acquire()
        try:
            yield env
        finally:
            await self.release(env)
