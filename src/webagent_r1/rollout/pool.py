"""Env pools: where the rollout gets a ``WebEnv`` for each episode.

The rollout talks only to the ``EnvPool`` interface (``rollout/pool_base.py``; docs/design.md,
"Scale-out"): it acquires an env, runs one episode in it, and releases it. ``LocalEnvPool``
holds ``n`` envs over one local Chromium; ``ray_pool.RayEnvPool`` holds them in browser workers
on Ray actors (the env it hands out proxies ``reset``/``step``/``close_episode`` to its actor).
``make_env_pool`` builds the one ``rollout.env_pool`` names, so callers switch by config.

    pool = LocalEnvPool(browser, 8, env_cfg, obs_cfg, backend, evaluate, count_tokens)
    async with pool.lease() as env:
        obs = await env.reset(task)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webagent_r1.browser import Browser
from webagent_r1.config import EnvConfig, ObservationConfig
from webagent_r1.grading.base import EvaluatorFn, SiteBackend
from webagent_r1.rollout.env import WebEnv
from webagent_r1.rollout.pool_base import EnvPool
from webagent_r1.rollout.ray_pool import RayEnvPool


class LocalEnvPool(EnvPool[WebEnv]):
    """``n`` WebEnvs over local Chromium (one browser context per running episode).

    One Chromium's browser process serves every context's navigations and DevTools traffic on
    one main thread; with many episodes at once that thread can become the bottleneck. Pass
    several browsers to spread the envs over them (env ``i`` uses browser ``i % k``).

    Args:
        browser: the Chromium process, or a list of them (owned by the caller, who closes
            them).
        n: number of envs, i.e. episodes that can run at once.
        env_cfg: turn limit and extra origins of every env.
        obs_cfg: observation format and budget.
        backend: where the sites live (``EmbeddedSites``, ``StaticSites`` …).
        evaluator: default evaluator for tasks without their own.
        count_tokens: tokenizer-backed counter for the observation budget.
    """

    def __init__(
        self,
        browser: Browser | list[Browser],
        n: int,
        env_cfg: EnvConfig | None = None,
        obs_cfg: ObservationConfig | None = None,
        backend: SiteBackend | None = None,
        evaluator: EvaluatorFn | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        if n < 1:
            raise ValueError("an env pool needs at least one env (n >= 1)")
        browsers = browser if isinstance(browser, list) else [browser]
        if not browsers:
            raise ValueError("an env pool needs at least one browser")
        self.browsers = browsers
        self.browser = browsers[0]
        self.envs = [
            WebEnv(browsers[i % len(browsers)], env_cfg, obs_cfg, backend, evaluator, count_tokens)
            for i in range(n)
        ]
        self._idle: asyncio.Queue[WebEnv] | None = None

    @property
    def size(self) -> int:
        """Number of envs."""
        return len(self.envs)

    def _queue(self) -> asyncio.Queue[WebEnv]:
        # Created lazily: an asyncio.Queue must be made inside the loop that uses it.
        if self._idle is None:
            self._idle = asyncio.Queue()
            for env in self.envs:
                self._idle.put_nowait(env)
        return self._idle

    async def acquire(self) -> WebEnv:
        """An idle env (waits while all ``n`` are busy)."""
        return await self._queue().get()

    async def release(self, env: WebEnv) -> None:
        """End ``env``'s episode, if still open, and make it idle again."""
        if env not in self.envs:
            raise ValueError("release() got an env that does not belong to this pool")
        try:
            await env.close_episode()
        finally:
            self._queue().put_nowait(env)

    def open_episodes(self) -> int:
        """How many envs have an open browser context right now."""
        return sum(env.session is not None for env in self.envs)

    async def close_episodes(self) -> None:
        """End every env's open episode (its context and site instance)."""
        await asyncio.gather(*(env.close_episode() for env in self.envs), return_exceptions=True)

    async def close(self) -> None:
        """End every episode; the browser itself stays the caller's to close."""
        await asyncio.gather(*(env.close() for env in self.envs), return_exceptions=True)


@dataclass(frozen=True)
class _PoolRequest:
    """What ``make_env_pool`` was asked for (see its arguments)."""

    cfg: Any
    n: int
    browser: Browser | list[Browser] | None
    env_cfg: EnvConfig | None
    backend: SiteBackend | None
    evaluator: EvaluatorFn | None
    count_tokens: Callable[[str], int] | None
    tokenizer_name: str | None


def _local_pool(req: _PoolRequest) -> EnvPool:
    if req.browser is None:
        raise ValueError("rollout.env_pool 'local' needs a launched browser (browser=...)")
    return LocalEnvPool(
        req.browser,
        req.n,
        req.env_cfg or req.cfg.env,
        req.cfg.observation,
        req.backend,
        req.evaluator,
        req.count_tokens,
    )


def _ray_pool(req: _PoolRequest) -> EnvPool:
    # The workers build their own browser, sites and token counter from cfg; the local
    # browser, backend and counter are not used. The evaluator stays the source's default.

    workers = req.cfg.rollout.ray_workers
    return RayEnvPool(
        req.cfg,
        workers,
        -(-req.n // workers),  # n envs spread over the workers, rounded up
        env_cfg=req.env_cfg,
        tokenizer_name=req.tokenizer_name,
    )


ENV_POOL_FACTORIES: dict[str, Callable[[_PoolRequest], EnvPool]] = {
    "local": _local_pool,
    "ray": _ray_pool,
}
"""Env pools by ``rollout.env_pool`` name (the names of ``config.ENV_POOLS``)."""


def make_env_pool(
    cfg: Any,
    n: int,
    *,
    browser: Browser | list[Browser] | None = None,
    env_cfg: EnvConfig | None = None,
    backend: SiteBackend | None = None,
    evaluator: EvaluatorFn | None = None,
    count_tokens: Callable[[str], int] | None = None,
    tokenizer_name: str | None = None,
) -> EnvPool:
    """The env pool ``cfg.rollout.env_pool`` names, with (at least) ``n`` envs.

    ``local``: a ``LocalEnvPool`` over ``browser`` with ``backend``, ``evaluator`` and
    ``count_tokens``. ``ray``: a ``RayEnvPool`` of ``cfg.rollout.ray_workers`` workers at
    ``cfg.rollout.ray_address``, each building its own Chromium, task-source sites, evaluator
    and token counter (tokenizer ``tokenizer_name``, default ``cfg.init_from or
    cfg.model.name``); the local arguments are then unused. Close the pool with
    ``await pool.close()``.

    Args:
        cfg: the run's ``Config``.
        n: envs, i.e. episodes at once (a Ray pool rounds up to a multiple of its workers).
        browser: the local Chromium (or several), owned by the caller; ``local`` only.
        env_cfg: turn limit and allowed origins (default ``cfg.env``).
        backend: the task source's running backend; ``local`` only.
        evaluator: default evaluator; ``local`` only.
        count_tokens: observation-budget token counter; ``local`` only.
        tokenizer_name: the Ray workers' tokenizer; ``ray`` only.

    Raises:
        ValueError: ``local`` without a browser.
        raypool.RayNotInstalledError: ``ray`` without Ray installed.
    """
    factory = ENV_POOL_FACTORIES[cfg.rollout.env_pool]
    return factory(
        _PoolRequest(cfg, n, browser, env_cfg, backend, evaluator, count_tokens, tokenizer_name)
    )
