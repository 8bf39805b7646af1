"""Browser workers as Ray actors, behind the same ``EnvPool`` interface as ``LocalEnvPool``.

When one machine's Chromium processes are not enough (docs/design.md, "Scale-out"), the envs can
live in Ray actors: each ``BrowserWorker`` starts the task source's sites, launches its own
Chromium and holds ``slots`` WebEnvs. ``RayEnvPool`` hands out ``RemoteEnv`` proxies whose
``reset``/``step``/``close_episode`` run in their worker's slot, so ``rollout.collect`` runs
unchanged::

    pool = RayEnvPool(cfg, workers=4, slots_per_worker=8)   # or make_env_pool(cfg, n)
    groups = await collect(tasks, 4, engine, pool, tokenizer)
    await pool.close()

A worker that dies (its process killed, its node lost) or stops answering makes the calls of
its episodes raise ``EnvError``: the rollout records those episodes as ``env_error`` and runs
them again in another slot, and the pool replaces the worker with a fresh actor before its
slots are handed out again (``RayEnvPool.restarts`` counts the replacements).

Ray is an optional dependency (``pip install 'webagent-r1[ray]'``); this module imports it
only when a pool is made.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import os
import pickle
import socket
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.browser import Browser, BrowserError
from webagent_r1.config import Config, EnvConfig
from webagent_r1.grading.base import EnvError, EvaluatorFn
from webagent_r1.rollout.env import WebEnv
from webagent_r1.rollout.pool_base import EnvPool
from webagent_r1.sources import task_source
from webagent_r1.types import Observation, StepResult, Task

__all__ = ["BrowserWorker", "RayEnvPool", "RayNotInstalledError", "RemoteEnv"]

INSTALL_HINT = "pip install 'webagent-r1[ray]'"


class RayNotInstalledError(ImportError):
    """Ray is needed (``rollout.env_pool: ray``) but not installed."""


def import_ray() -> Any:
    """The ``ray`` module.

    Raises:
        RayNotInstalledError: Ray is not installed (the message says how to install it).
    """
    try:
        # heavy: keeps ray off the import path
        import ray

        # heavy: keeps ray off the import path
        import ray.exceptions
    except ImportError:
        raise RayNotInstalledError(
            f"the Ray env pool (rollout.env_pool: ray) needs Ray: {INSTALL_HINT}"
        ) from None
    return ray


# --------------------------------------------------------------------------------------
# The worker (runs inside a Ray actor process)
# --------------------------------------------------------------------------------------


class BrowserWorker:
    """``slots`` WebEnvs over this worker's own Chromium and site backend.

    ``RayEnvPool`` runs it as an async Ray actor (``ray.remote(BrowserWorker)``): every method
    is a coroutine on the actor's one event loop, so the slots' episodes interleave as in a
    ``LocalEnvPool``. Everything heavy happens in ``start`` (not ``__init__``), so that a
    failure comes back as an error with its cause instead of a dead actor.

    Args:
        cfg: the run's config (browser, observation, env and task source sections).
        slots: number of WebEnvs (episodes this worker runs at once).
        env_cfg: turn limit and allowed origins (default ``cfg.env``).
        evaluator: evaluator of tasks without their own (default: the task source's); it is
            pickled to the worker, so it must be a module-level function or similar.
        tokenizer_name: tokenizer of the observation token budget (default ``cfg.init_from
            or cfg.model.name``), loaded with the project's ``load_tokenizer``.
    """

    def __init__(
        self,
        cfg: Config,
        slots: int,
        env_cfg: EnvConfig | None = None,
        evaluator: EvaluatorFn | None = None,
        tokenizer_name: str | None = None,
    ) -> None:
        if slots < 1:
            raise ValueError("a browser worker needs at least one slot (slots >= 1)")
        self.cfg = cfg
        self.slots = slots
        self.env_cfg = env_cfg or cfg.env
        self.evaluator = evaluator
        self.tokenizer_name = tokenizer_name or cfg.init_from or cfg.model.name
        self.envs: list[WebEnv] = []
        self._source: Any = None
        self._browser: Any = None

    async def start(self) -> dict[str, Any]:
        """Start the sites, load the tokenizer, launch Chromium, make the envs (idempotent).

        Returns:
            ``ping()``'s description of this worker.
        """
        if self.envs:
            return await self.ping()
        # heavy: keeps torch, transformers off the import path
        from webagent_r1.policy.hf import load_tokenizer

        tokenizer = load_tokenizer(self.tokenizer_name)

        def count_tokens(text: str) -> int:
            return len(tokenizer(text, add_special_tokens=False).input_ids)

        source = task_source(self.cfg)
        backend = source.start()
        try:
            self._browser = await Browser.launch(self.cfg.browser)
        except BaseException:
            source.stop()
            raise
        self._source = source
        evaluator = self.evaluator or source.evaluator
        self.envs = [
            WebEnv(
                self._browser, self.env_cfg, self.cfg.observation, backend, evaluator, count_tokens
            )
            for _ in range(self.slots)
        ]
        return await self.ping()

    def _env(self, slot: int) -> WebEnv:
        if not self.envs:
            raise RuntimeError("browser worker used before start()")
        return self.envs[slot]

    async def reset(self, slot: int, task: Task) -> tuple[Observation, Task]:
        """``WebEnv.reset`` in ``slot``.

        Returns:
            The first observation, and the task as the reset left it (a backend may fill in
            fields such as MiniWoB++'s intent), without its evaluator, for the caller's copy.
        """
        obs = await self._env(slot).reset(task)
        return obs, dataclasses.replace(task, evaluator=None)

    async def step(self, slot: int, response_text: str) -> StepResult:
        """``WebEnv.step`` in ``slot``."""
        return await self._env(slot).step(response_text)

    async def close_episode(self, slot: int) -> None:
        """``WebEnv.close_episode`` in ``slot``."""
        await self._env(slot).close_episode()

    async def close(self) -> None:
        """End every episode, close Chromium, stop the sites (safe to call twice)."""
        await asyncio.gather(*(env.close() for env in self.envs), return_exceptions=True)
        self.envs = []
        browser, self._browser = self._browser, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        source, self._source = self._source, None
        if source is not None:
            source.stop()

    async def ping(self) -> dict[str, Any]:
        """Where this worker runs and how busy it is."""
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "slots": self.slots,
            "open_episodes": sum(env.session is not None for env in self.envs),
        }


# --------------------------------------------------------------------------------------
# The pool (runs in the driver, next to the rollout)
# --------------------------------------------------------------------------------------


@dataclass
class WorkerState:
    """The driver's view of one browser worker."""

    index: int
    actor: Any = None
    """The current actor handle (None while it is being replaced)."""
    generation: int = 0
    """How many times this worker was replaced; a proxy bound to an older one is stale."""
    restarting: bool = False
    failed: str | None = None
    """Why the worker could not be replaced (its slots are then out of use)."""
    parked: list[RemoteEnv] = field(default_factory=list)
    """Its idle slots, waiting for the replacement actor."""


class RemoteEnv:
    """One slot of a Ray browser worker, with ``WebEnv``'s episode methods.

    Bound to its worker's actor when the pool hands it out. A dead or silent actor makes
    ``reset``/``step`` raise ``EnvError`` (the rollout's env errors are retried) and
    ``close_episode`` return quietly (the episode died with the actor).
    """

    def __init__(self, pool: RayEnvPool, worker: int, slot: int) -> None:
        self.pool = pool
        self.worker = worker
        self.slot = slot
        self.episode_open = False
        """Whether this slot may hold an open episode (a reset was sent, no end seen yet)."""
        self._actor: Any = None
        self._generation = -1

    def __repr__(self) -> str:
        return f"RemoteEnv(worker={self.worker}, slot={self.slot})"

    async def reset(self, task: Task) -> Observation:
        """Start an episode of ``task`` in the worker; fields the reset filled in (such as
        MiniWoB++'s intent) are copied back into ``task``.

        Raises:
            EnvError: the reset failed in the worker, or the worker died or stopped answering.
            TypeError: ``task`` cannot be sent to a worker (its evaluator does not pickle).
        """
        self.episode_open = True
        obs, remote = await self._call("reset", task)
        for f in dataclasses.fields(Task):
            if f.name != "evaluator" and getattr(task, f.name) != getattr(remote, f.name):
                setattr(task, f.name, getattr(remote, f.name))
        return obs

    async def step(self, response_text: str) -> StepResult:
        """Execute one action in the worker.

        Raises:
            EnvError: the worker died or stopped answering.
        """
        result: StepResult = await self._call("step", response_text)
        if result.done:
            self.episode_open = False  # the worker's env closed it
        return result

    async def close_episode(self) -> None:
        """Close the slot's episode, if any (quietly when the worker is gone)."""
        if not self.episode_open or self._actor is None:
            return
        self.episode_open = False
        with contextlib.suppress(EnvError):
            await self._call("close_episode")

    async def _call(self, method: str, *args: Any) -> Any:
        if self._actor is None:
            raise RuntimeError(f"{self!r} used after release(): acquire an env from the pool")
        ray = self.pool.ray
        actor, generation = self._actor, self._generation
        where = f"Ray browser worker {self.worker} (slot {self.slot})"
        try:
            ref = getattr(actor, method).remote(self.slot, *args)
        except (TypeError, pickle.PicklingError) as e:
            task = args[0] if args and isinstance(args[0], Task) else None
            what = f"task {task.task_id!r}" if task is not None else f"{method}()'s arguments"
            raise TypeError(
                f"cannot send {what} to a Ray browser worker ({e}); a task's evaluator must "
                "pickle: use a module-level function, not a closure over a browser or a lock"
            ) from e
        except self.pool.actor_errors as e:
            self.pool._lost(self.worker, generation, f"{type(e).__name__}: {e}")
            raise EnvError(f"{where} died: {_first_line(e)}; it is being replaced") from None
        try:
            return await asyncio.wait_for(ref, self.pool.call_timeout_s)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, (EnvError, BrowserError)):
                raise EnvError(f"{where}: {cause}") from None
            raise
        except self.pool.actor_errors as e:
            self.pool._lost(self.worker, generation, f"{type(e).__name__}: {e}")
            raise EnvError(f"{where} died: {_first_line(e)}; it is being replaced") from None
        except TimeoutError:
            self.pool._lost(self.worker, generation, f"{method}() timed out")
            raise EnvError(
                f"{where} did not answer {method}() within {self.pool.call_timeout_s:g} s; "
                "it is being replaced"
            ) from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


class RayEnvPool(EnvPool[RemoteEnv]):
    """``workers`` Ray actors with ``slots_per_worker`` envs each, as one ``EnvPool``.

    Connects to the Ray cluster at ``address`` when one is given (``"auto"``,
    ``"ray://head:10001"``, or ``$RAY_ADDRESS``), else starts a private local Ray sized to the
    workers; a Ray already initialised in this process is used as it is. Every node that runs
    a worker needs this package and Chromium (``scripts/setup.sh``); each worker serves its own
    copy of the task source's sites on its node, next to its Chromium.

    Workers start on the first ``acquire`` (or ``await pool.start()``). A worker whose actor
    dies or exceeds ``call_timeout_s`` is replaced by a fresh actor with the same slots;
    ``restarts`` counts the replacements. One that cannot be replaced after
    ``restart_attempts`` tries leaves its slots unused; with no worker left, ``acquire``
    raises ``EnvError``.

    Args:
        cfg: the run's config (workers build their browser, sites and envs from it).
        workers: number of actors (default ``cfg.rollout.ray_workers``).
        slots_per_worker: envs per actor (default: ``cfg.rollout.max_concurrent_episodes``
            spread over the workers, rounded up).
        env_cfg: turn limit and allowed origins of the envs (default ``cfg.env``).
        address: Ray cluster to join (default ``cfg.rollout.ray_address``, then
            ``$RAY_ADDRESS``; empty: a local Ray of this pool's own).
        evaluator: evaluator of tasks without their own (default: the task source's in each
            worker); it must pickle.
        tokenizer_name: tokenizer of the observation budget (default ``cfg.init_from or
            cfg.model.name``).
        worker_cpus: Ray CPUs each actor reserves (its Chromium and sites run there).
        call_timeout_s: longest wait for one reset/step before the worker counts as hung.
        start_timeout_s: longest wait for a worker to start (sites, tokenizer, Chromium).
        restart_attempts: tries to replace a lost worker before giving its slots up.

    Raises:
        RayNotInstalledError: Ray is not installed.
        ValueError: a size below 1.
    """

    def __init__(
        self,
        cfg: Config,
        workers: int | None = None,
        slots_per_worker: int | None = None,
        *,
        env_cfg: EnvConfig | None = None,
        address: str | None = None,
        evaluator: EvaluatorFn | None = None,
        tokenizer_name: str | None = None,
        worker_cpus: float = 1.0,
        call_timeout_s: float = 300.0,
        start_timeout_s: float = 600.0,
        restart_attempts: int = 3,
    ) -> None:
        self.ray = import_ray()
        n_workers = cfg.rollout.ray_workers if workers is None else workers
        if slots_per_worker is None:
            slots_per_worker = math.ceil(cfg.rollout.max_concurrent_episodes / max(n_workers, 1))
        if n_workers < 1 or slots_per_worker < 1:
            raise ValueError("a Ray env pool needs workers >= 1 and slots_per_worker >= 1")
        self.cfg = cfg
        self.slots_per_worker = slots_per_worker
        self.env_cfg = env_cfg or cfg.env
        self.evaluator = evaluator
        self.tokenizer_name = tokenizer_name
        self.worker_cpus = worker_cpus
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.restart_attempts = restart_attempts
        self.restarts = 0
        """Workers replaced after their actor died or hung."""
        self.actor_errors: tuple[type[BaseException], ...] = (
            self.ray.exceptions.RayActorError,
            self.ray.exceptions.WorkerCrashedError,
            self.ray.exceptions.LocalRayletDiedError,
        )
        """Ray's errors that mean the actor is gone (not an error raised by its code)."""
        address = cfg.rollout.ray_address if address is None else address
        address = address or os.environ.get("RAY_ADDRESS", "")  # Ray's own convention
        self._owns_ray = not self.ray.is_initialized()
        if self._owns_ray:
            self._init_ray(address, n_workers)
        self._actor_class = self.ray.remote(BrowserWorker)
        self.workers = [WorkerState(i, self._spawn()) for i in range(n_workers)]
        self.envs = [
            RemoteEnv(self, w, s) for w in range(n_workers) for s in range(slots_per_worker)
        ]
        self._idle: asyncio.Queue[RemoteEnv | None] | None = None
        self._started = False
        self._start_lock: asyncio.Lock | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._broken: str | None = None
        self._closed = False

    def _init_ray(self, address: str, n_workers: int) -> None:
        if address:
            self.ray.init(address=address, logging_level=logging.WARNING)
            return
        # A private local instance: nothing leaves the machine (no usage report), no dashboard.
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.ray.init(
            address="local",
            num_cpus=max(1, math.ceil(n_workers * self.worker_cpus)),
            include_dashboard=False,
            logging_level=logging.WARNING,
        )

    def _spawn(self) -> Any:
        """A new actor (it starts its browser and sites in ``start``)."""
        return self._actor_class.options(num_cpus=self.worker_cpus, max_restarts=0).remote(
            self.cfg, self.slots_per_worker, self.env_cfg, self.evaluator, self.tokenizer_name
        )

    @property
    def size(self) -> int:
        """Number of envs (slots over all workers)."""
        return len(self.envs)

    def _queue(self) -> asyncio.Queue[RemoteEnv | None]:
        # Created lazily: an asyncio.Queue must be made inside the loop that uses it.
        if self._idle is None:
            self._idle = asyncio.Queue()
            for env in self.envs:
                self._idle.put_nowait(env)
        return self._idle

    async def _start_actor(self, actor: Any) -> dict[str, Any]:
        return await asyncio.wait_for(actor.start.remote(), self.start_timeout_s)

    async def start(self) -> None:
        """Start every worker (``acquire`` does it when needed).

        Raises:
            EnvError: a worker could not start (the message gives the worker's error).
        """
        if self._started:
            return
        if self._start_lock is None:
            self._start_lock = asyncio.Lock()
        async with self._start_lock:
            if self._started:
                return
            results = await asyncio.gather(
                *(self._start_actor(w.actor) for w in self.workers), return_exceptions=True
            )
            for w, res in zip(self.workers, results, strict=True):
                if isinstance(res, BaseException):
                    why = getattr(res, "cause", None) or res
                    if isinstance(res, TimeoutError):
                        why = f"no answer within {self.start_timeout_s:g} s"
                    raise EnvError(f"Ray browser worker {w.index} could not start: {why}")
            self._started = True

    async def acquire(self) -> RemoteEnv:
        """An idle env of a live worker (waits while all are busy or being replaced).

        Raises:
            EnvError: the workers could not start, or every worker was lost for good.
        """
        if self._closed:
            raise RuntimeError("acquire() on a closed Ray env pool")
        await self.start()
        queue = self._queue()
        while True:
            if self._broken is not None:
                raise EnvError(self._broken)
            env = await queue.get()
            if env is None:  # woken because the pool broke: let the next waiter see it too
                queue.put_nowait(None)
                continue
            w = self.workers[env.worker]
            if w.restarting or w.failed is not None:
                w.parked.append(env)
                continue
            env._actor, env._generation = w.actor, w.generation
            return env

    async def release(self, env: RemoteEnv) -> None:
        """End ``env``'s episode, if still open, and make it idle again."""
        if env.pool is not self:
            raise ValueError("release() got an env that does not belong to this pool")
        try:
            await env.close_episode()
        finally:
            env._actor, env.episode_open = None, False
            w = self.workers[env.worker]
            if w.restarting or w.failed is not None:
                w.parked.append(env)
            else:
                self._queue().put_nowait(env)

    def open_episodes(self) -> int:
        """How many envs may hold an open episode right now (as the driver knows it)."""
        return sum(env.episode_open for env in self.envs)

    async def close_episodes(self) -> None:
        """End every env's open episode; the pool stays usable."""
        await asyncio.gather(*(env.close_episode() for env in self.envs), return_exceptions=True)

    async def ping(self) -> list[dict[str, Any]]:
        """Each live worker's ``BrowserWorker.ping`` (after replacements under way finish)."""
        await self.start()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        live = [w.actor for w in self.workers if w.actor is not None and w.failed is None]
        return list(await asyncio.gather(*(a.ping.remote() for a in live)))

    # ---------------------------------------------------------------- losing workers

    def _lost(self, index: int, generation: int, reason: str) -> None:
        """A proxy saw worker ``index`` (as of ``generation``) die or hang: replace it once."""
        w = self.workers[index]
        if self._closed or w.generation != generation or w.restarting or w.failed is not None:
            return
        w.restarting = True
        task = asyncio.get_running_loop().create_task(self._restart(w, reason))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _restart(self, w: WorkerState, reason: str) -> None:
        old, w.actor = w.actor, None
        with contextlib.suppress(Exception):
            self.ray.kill(old)  # a hung actor must not keep its CPUs
        self.restarts += 1
        errors: list[str] = []
        for attempt in range(self.restart_attempts):
            actor = self._spawn()
            try:
                await self._start_actor(actor)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    self.ray.kill(actor)
                raise
            except Exception as e:
                errors.append(_first_line(getattr(e, "cause", None) or e))
                with contextlib.suppress(Exception):
                    self.ray.kill(actor)
                await asyncio.sleep(2.0**attempt)
                continue
            w.actor, w.generation, w.restarting = actor, w.generation + 1, False
            parked, w.parked = w.parked, []
            for env in parked:
                self._queue().put_nowait(env)
            return
        w.restarting = False
        w.failed = (
            f"Ray browser worker {w.index} was lost ({reason}) and could not be replaced: "
            f"{'; '.join(errors)}"
        )
        if all(x.failed is not None for x in self.workers):
            self._broken = f"every Ray browser worker was lost; the last: {w.failed}"
            self._queue().put_nowait(None)  # wake the waiters

    async def close(self) -> None:
        """Stop every worker (browser, sites, actor); shut Ray down if this pool started it."""
        if self._closed:
            return
        self._closed = True
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        actors = [w.actor for w in self.workers if w.actor is not None]
        if self._started:
            closing = [asyncio.wait_for(a.close.remote(), 30.0) for a in actors]
            await asyncio.gather(*closing, return_exceptions=True)
        for actor in actors:
            with contextlib.suppress(Exception):
                self.ray.kill(actor)
        for w in self.workers:
            w.actor = None
        if self._owns_ray and self.ray.is_initialized():
            self.ray.shutdown()
