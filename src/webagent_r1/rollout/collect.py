"""Rolling out episodes: a policy acting in WebEnvs, recorded as Trajectories.

Every turn builds the compressed prompt (docs/design.md, "Context compression"), tokenises it once
with the chat template, asks the policy for a completion, and stores the exact prompt and
completion ids it used, so training never re-tokenises generated text.

``run_episode`` drives one episode. ``collect`` rolls out groups of G trajectories per task
in one of two modes, selected by name from ``ROLLOUT_MODES``:

- ``async``: up to ``max_concurrent_episodes`` episodes run as independent asyncio tasks, each
  generating and stepping its browser at its own pace; a finished episode's slot starts the
  next one at once. The engine merges concurrent requests into batches (``HFEngine``), so
  generation for some episodes overlaps page loads of others.
- ``lockstep``: the baseline of the published code: per turn, one batched generation for all
  live episodes of a batch, then the env steps one after another, and the next batch starts
  only when every episode of this one has ended.

Both return the same structure: one ``Group`` per task, in task order, with G trajectories.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from webagent_r1.agent.context import Message, build_messages
from webagent_r1.agent.prompts import format_observation
from webagent_r1.browser import BrowserError
from webagent_r1.config import AgentConfig, RolloutConfig
from webagent_r1.grading.base import EnvError
from webagent_r1.policy.base import Completion, Engine, SamplingParams
from webagent_r1.progress import Bar
from webagent_r1.rollout.env import WebEnv
from webagent_r1.rollout.pool import EnvPool
from webagent_r1.types import Action, Observation, Task, Trajectory, Turn, describe_task

__all__ = [
    "ROLLOUT_MODES",
    "EnginePolicy",
    "Group",
    "Policy",
    "RolloutStats",
    "TurnInput",
    "as_policy",
    "chat_ids",
    "collect",
    "observation_summary",
    "run_episode",
    "sampling_params",
    "state_key",
    "turn_seed",
    "turns_by_outcome",
    "turns_by_outcome_metrics",
]

T = TypeVar("T")


def chat_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Prompt token ids of ``messages`` with the generation prompt appended."""
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(out, list):  # BatchEncoding in some transformers versions
        out = out["input_ids"]
    return list(out)


def observation_summary(
    obs_dict: dict[str, Any],
    limit: int = 200,
    screenshot: str | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    """A short record of an observation for trajectory files (the full text is not kept);
    ``target``: the element the action acted on, as the page before it named it."""
    out = {
        "url": obs_dict.get("url", ""),
        "title": obs_dict.get("title", ""),
        "error": obs_dict.get("error"),
        "text_head": (obs_dict.get("text") or "")[:limit],
    }
    if screenshot:
        out["screenshot"] = screenshot
    if target:
        out["target"] = target
    return out


STATE_KEY_CHARS = 16
"""Hex characters of a ``Turn.state_key`` (64 bits of SHA-1)."""


def state_key(obs: Observation) -> str:
    """The anchor-state key of a turn: a short hash of the observation its prompt showed.

    The hash covers the URL as the prompt shows it and ``format_observation(obs)`` (tabs, the
    previous action's error and the page text as the model saw them); equal keys mean the same
    page in the same state (the embedded sites render a task instance deterministically), which
    GiGPO's step groups rely on (``algos/gigpo.py``).

    Args:
        obs: the observation before the action (the one the turn's prompt was built from).

    Returns:
        The first ``STATE_KEY_CHARS`` hex characters of the SHA-1 of the rendered text.
    """
    text = f"{obs.prompt_url}\n{format_observation(obs)}"  # one page, one key on every worker
    data = text.encode("utf-8", errors="surrogatepass")  # a page may hold a lone surrogate
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()[:STATE_KEY_CHARS]


# --------------------------------------------------------------------------------------
# Policies: what acts in an episode (an engine over token ids, or a scripted expert)
# --------------------------------------------------------------------------------------


@dataclass
class TurnInput:
    """Everything a policy may look at to act in one turn of one episode."""

    prompt_ids: list[int]
    """The chat-templated prompt (context compression applied): what an engine conditions on."""
    messages: list[Message]
    """The same prompt as chat messages (for text-only APIs)."""
    observation: Observation
    """The current observation (for scripted experts)."""
    seed: int | None = None
    """Sampling seed of this turn (derived from ``SamplingParams.seed``; None = unseeded)."""


@runtime_checkable
class Policy(Protocol):
    """Acts in many episodes at once.

    ``begin`` makes per-episode state (None for a stateless engine; an expert's generator for
    a scripted expert), ``act`` answers one turn of each of several episodes (a batch in
    lockstep, usually one in async mode), ``end`` drops the state.
    """

    def begin(self, task: Task) -> Any:
        """Per-episode state for an episode of ``task``."""
        ...

    async def act(
        self, states: list[Any], inputs: list[TurnInput], params: SamplingParams
    ) -> list[Completion]:
        """One completion per episode (``states[i]`` and ``inputs[i]`` belong together)."""
        ...

    def end(self, state: Any) -> None:
        """The episode of ``state`` is over."""
        ...


class EnginePolicy:
    """The policy of an inference engine: prompt ids in, sampled ids out.

    Unseeded turns of a batch go to the engine in one ``generate`` call. Seeded turns go as
    concurrent one-prompt calls, each with its own seed, so an episode's samples do not depend
    on which other episodes shared its batch (``HFEngine`` merges them into one decode again).
    An engine with ``wants_messages = True`` (a chat-only API) gets the messages instead.

    Completions that come back without a ``weight_version`` from an engine that has one are
    stamped with the engine's version when the request was made (engines that can change
    weights mid-request, such as ``HFEngine`` and ``VLLMEngine``, stamp their own).

    Args:
        engine: the engine.
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def begin(self, task: Task) -> None:
        return None

    async def act(
        self, states: list[Any], inputs: list[TurnInput], params: SamplingParams
    ) -> list[Completion]:
        version = self.engine.weight_version
        return [
            c
            if c.weight_version is not None or version is None
            else dataclasses.replace(c, weight_version=version)
            for c in await self._generate(inputs, params)
        ]

    async def _generate(self, inputs: list[TurnInput], params: SamplingParams) -> list[Completion]:
        generate_chat = getattr(self.engine, "generate_chat", None)
        if getattr(self.engine, "wants_messages", False) and generate_chat is not None:
            return await generate_chat([i.messages for i in inputs], params)
        if all(i.seed is None for i in inputs):
            return await self.engine.generate([i.prompt_ids for i in inputs], params)
        calls = [
            self.engine.generate([i.prompt_ids], dataclasses.replace(params, seed=i.seed))
            for i in inputs
        ]
        return [c for [c] in await asyncio.gather(*calls)]

    def end(self, state: Any) -> None:
        return None


def as_policy(engine: Engine | Policy) -> Policy:
    """``engine`` itself when it is already a Policy, else an ``EnginePolicy`` over it."""
    if isinstance(engine, Policy):
        return engine
    return EnginePolicy(engine)


def sampling_params(cfg: RolloutConfig, seed: int | None = None) -> SamplingParams:
    """The rollout's sampling parameters from its config (``seed``: e.g. ``Config.seed``)."""
    return SamplingParams(
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        max_new_tokens=cfg.max_new_tokens,
        seed=seed,
    )


def turn_seed(base: int | None, group: int, member: int, attempt: int, turn: int) -> int | None:
    """The sampling seed of one turn: distinct per group member, attempt and turn."""
    if base is None:
        return None
    return (base * 1_000_003 + group * 100_003 + member * 1_009 + attempt * 101 + turn) % 2**31


# --------------------------------------------------------------------------------------
# One episode, as a small state machine both modes drive
# --------------------------------------------------------------------------------------

_ENV_ERRORS = (EnvError, BrowserError)
"""Failures of the environment (not of the policy): the episode is an env_error."""


async def _finish_even_if_cancelled(coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro``; if the caller is cancelled meanwhile, let it finish, then re-raise.

    Used for ``reset``: cancelled halfway, it could open a browser context that nothing
    records, and so nothing closes.
    """
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await task
        raise


class _Episode:
    """One episode's progress: history, current observation and the trajectory so far."""

    def __init__(
        self,
        task: Task,
        group_id: int | str,
        policy: Policy,
        tokenizer: Any,
        agent_cfg: AgentConfig,
        seed_of: Callable[[int], int | None],
    ) -> None:
        self.task = task
        self.policy = policy
        self.tokenizer = tokenizer
        self.agent_cfg = agent_cfg
        self.seed_of = seed_of
        self.traj = Trajectory(task_id=task.task_id, group_id=group_id)
        self.history: list[tuple[str, str]] = []
        self.obs: Observation | None = None
        self.state: Any = None
        self.done = False
        self.t0 = time.time()
        self.t_end: float | None = None  # when the episode ended (its last step or env error)

    async def reset(self, env: WebEnv) -> None:
        """Start the episode; an env failure ends it as ``env_error``."""
        self.t0 = time.time()
        try:
            self.obs = await _finish_even_if_cancelled(env.reset(self.task))
        except _ENV_ERRORS as e:
            self._env_error(f"reset failed: {e}")
            return
        # What the episode was (some sources, e.g. MiniWoB++, know the intent only after
        # reset), so a trajectory file is readable without the task list that made it.
        self.traj.info["task"] = describe_task(self.task)
        self.state = self.policy.begin(self.task)

    def turn_input(self) -> TurnInput:
        """The prompt of the current turn."""
        assert self.obs is not None
        obs_text = format_observation(self.obs)
        messages = build_messages(self.task.intent, self.history, obs_text, self.agent_cfg)
        return TurnInput(
            prompt_ids=chat_ids(self.tokenizer, messages),
            messages=messages,
            observation=self.obs,
            seed=self.seed_of(len(self.traj.turns)),
        )

    async def step(
        self, env: WebEnv, inp: TurnInput, comp: Completion, g0: float, g1: float
    ) -> None:
        """Execute ``comp`` in ``env`` and record the turn (timestamps in ``time.time()``)."""
        e0 = time.time()
        try:
            result = await env.step(comp.text)
        except _ENV_ERRORS as e:
            self._env_error(f"step failed: {e}")
            return
        e1 = time.time()
        action = Action.from_dict(result.info["action"]) if "action" in result.info else None
        self.traj.turns.append(
            Turn(
                prompt_ids=inp.prompt_ids,
                completion_ids=list(comp.token_ids),
                completion_logprobs=list(comp.logprobs),
                text=comp.text,
                action=action,
                observation=observation_summary(
                    result.observation.to_dict(),
                    screenshot=result.info.get("screenshot"),
                    target=result.info.get("target"),
                ),
                error=result.info.get("parse_error") or result.observation.error,
                timings={
                    "gen_start": g0,
                    "gen_end": g1,
                    "env_start": e0,
                    "env_end": e1,
                    "generate_s": g1 - g0,
                    "env_s": e1 - e0,
                },
                weight_version=comp.weight_version,
                state_key=state_key(inp.observation),
            )
        )
        if not comp.trainable:
            self.traj.info["trainable"] = False
        if "graded" in result.info:  # as a budget of this many turns would have ended it
            g = result.info["graded"]
            self.traj.info.setdefault("graded_at", {})[str(g["turn"])] = {
                "reward": g["reward"],
                "explanation": g["explanation"],
            }
        assert self.obs is not None
        self.history.append((comp.text, format_observation(self.obs)))
        self.obs = result.observation
        if result.done:
            self.done, self.t_end = True, time.time()
            self.traj.reward = float(result.reward)
            self.traj.status = result.info.get("status", "done")
            for key in ("answer", "explanation", "error", "answer_shown"):
                if key in result.info:
                    self.traj.info[key] = result.info[key]

    def _env_error(self, msg: str) -> None:
        self.done, self.t_end = True, time.time()
        self.traj.status, self.traj.reward = "env_error", 0.0
        self.traj.info["error"] = msg

    def close(self) -> None:
        """Record the wall time (from reset to the episode's end, not to this call: in lockstep
        a batch's episodes are closed together) and the weight versions sampled from; drop the
        policy's state."""
        self.traj.info["wall_s"] = (self.t_end or time.time()) - self.t0
        versions = {t.weight_version for t in self.traj.turns if t.weight_version is not None}
        self.traj.info["weight_versions"] = sorted(versions)
        if self.state is not None:
            self.policy.end(self.state)
            self.state = None


async def _run_one(
    env: WebEnv, ep: _Episode, params: SamplingParams, on_turn: Callable[[Turn], None]
) -> Trajectory:
    """Drive ``ep`` to its end in ``env`` (async mode: the episode alone, at its own pace)."""
    try:
        await ep.reset(env)
        while not ep.done:
            inp = ep.turn_input()
            g0 = time.time()
            [comp] = await ep.policy.act([ep.state], [inp], params)
            g1 = time.time()
            n_turns = len(ep.traj.turns)
            await ep.step(env, inp, comp, g0, g1)
            if len(ep.traj.turns) > n_turns:
                on_turn(ep.traj.turns[-1])
    finally:
        ep.close()
        await env.close_episode()
    return ep.traj


async def run_episode(
    env: WebEnv,
    engine: Engine | Policy,
    tokenizer: Any,
    task: Task,
    agent_cfg: AgentConfig | None = None,
    params: SamplingParams | None = None,
    group_id: int | str = 0,
) -> Trajectory:
    """Run one episode of ``task`` and return its trajectory.

    Args:
        env: the environment (its episode is closed at the end, however it ends).
        engine: an inference engine, or a ``Policy`` (e.g. ``ExpertPolicy``).
        tokenizer: builds the prompt ids (chat template).
        task: the task.
        agent_cfg: prompt and context-compression options.
        params: sampling parameters; with a ``seed``, each turn gets its own derived seed.
        group_id: stored in the trajectory.

    Returns:
        The trajectory. A reset or browser failure gives status ``env_error`` (never a
        training failure); the caller decides whether to retry.
    """
    params = params or SamplingParams()
    ep = _Episode(
        task,
        group_id,
        as_policy(engine),
        tokenizer,
        agent_cfg or AgentConfig(),
        lambda turn: turn_seed(params.seed, 0, 0, 0, turn),
    )
    return await _run_one(env, ep, params, lambda _turn: None)


# --------------------------------------------------------------------------------------
# Collecting groups
# --------------------------------------------------------------------------------------


@dataclass
class Group:
    """The G trajectories of one task (one M-GRPO group), in member order."""

    task: Task
    trajectories: list[Trajectory]

    @property
    def rewards(self) -> list[float]:
        """Rewards of the members."""
        return [t.reward for t in self.trajectories]

    @property
    def usable(self) -> list[Trajectory]:
        """Members to train on (env errors are never failures: they are left out)."""
        return [t for t in self.trajectories if t.status != "env_error"]


@dataclass
class RolloutStats:
    """Counters of ``collect`` calls (pass an instance to ``collect`` to receive them; one
    passed to several calls, as the rounds of a training step, sums them)."""

    episodes: int = 0
    """Episodes finished (env errors that exhausted their retries included)."""
    successes: int = 0
    """Finished episodes with reward 1."""
    turns: int = 0
    """Env steps taken."""
    tokens: int = 0
    """Completion tokens generated."""
    env_errors: int = 0
    """Episode attempts that ended in an env error (each was retried or dropped)."""
    dropped: int = 0
    """Episodes still failing with env errors after all retries (left out of training)."""
    generate_s: float = 0.0
    """Sum of the turns' generation waits (overlapping ones counted each)."""
    env_s: float = 0.0
    """Sum of the turns' env step times."""
    wall_s: float = 0.0
    """Wall time of the collection (summed over the calls)."""

    def record(self, traj: Trajectory) -> None:
        """Count a finished episode."""
        self.episodes += 1
        if traj.status == "env_error":
            self.dropped += 1
        elif traj.reward == 1.0:
            self.successes += 1

    def record_turn(self, turn: Turn) -> None:
        """Count one env step."""
        self.turns += 1
        self.tokens += len(turn.completion_ids)
        self.generate_s += turn.timings.get("generate_s", 0.0)
        self.env_s += turn.timings.get("env_s", 0.0)

    def metrics(self) -> dict[str, float]:
        """Metrics with the ``rollout/`` prefix."""
        wall = max(self.wall_s, 1e-9)
        valid = self.episodes - self.dropped
        return {
            "rollout/episodes": self.episodes,
            "rollout/success_rate": self.successes / valid if valid else 0.0,
            "rollout/env_errors": self.env_errors,
            "rollout/dropped": self.dropped,
            "rollout/turns": self.turns,
            "rollout/tokens": self.tokens,
            "rollout/trajectories_per_s": self.episodes / wall,
            "rollout/env_steps_per_s": self.turns / wall,
            "rollout/tokens_per_s": self.tokens / wall,
            "rollout/wall_s": self.wall_s,
        }


def turns_by_outcome(trajectories: Iterable[Trajectory]) -> list[float]:
    """Turns of successful and of failed episodes, as sums that add over processes.

    A success has reward 1 (as ``RolloutStats`` counts), a failure any other reward; an
    episode that ended in an env error is neither.

    Returns:
        ``[turns of successes, successes, turns of failures, failures]``.
    """
    out = [0.0, 0.0, 0.0, 0.0]
    for t in trajectories:
        if t.status == "env_error":
            continue
        k = 0 if t.reward == 1.0 else 2
        out[k] += len(t.turns)
        out[k + 1] += 1
    return out


def turns_by_outcome_metrics(sums: Sequence[float]) -> dict[str, float]:
    """``rollout/turns``, ``rollout/turns_success`` and ``rollout/turns_failure``: mean turns
    per scored episode, per successful and per failed one, from ``turns_by_outcome``'s sums
    (of one process or summed over all; env-error attempts are in none); a key is left out
    when there was no episode of its kind."""
    succ_turns, succ, fail_turns, fail = sums
    out: dict[str, float] = {}
    if succ + fail:
        out["rollout/turns"] = (succ_turns + fail_turns) / (succ + fail)
    if succ:
        out["rollout/turns_success"] = succ_turns / succ
    if fail:
        out["rollout/turns_failure"] = fail_turns / fail
    return out


class _Progress:
    """A rich progress bar: episodes done, success so far, env-steps/s, tokens/s."""

    def __init__(self, total: int, stats: RolloutStats, enabled: bool, label: str) -> None:
        self.stats = stats
        self.base = dataclasses.replace(stats)  # counts of earlier calls sharing ``stats``
        self.t0 = time.time()
        self.enabled, self.total, self.label = enabled, total, label
        self.bar: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            self.bar = Bar(self.label, self.total)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.update()
            self.bar.close()

    def line(self) -> tuple[int, str]:
        """This call's episodes done and the bar's text (earlier calls' counts left out)."""
        s, b = self.stats, self.base
        dt = max(time.time() - self.t0, 1e-9)
        episodes = s.episodes - b.episodes
        valid = episodes - (s.dropped - b.dropped)
        info = (
            f"success {s.successes - b.successes}/{valid} · "
            f"{(s.turns - b.turns) / dt:.2f} steps/s · {(s.tokens - b.tokens) / dt:.0f} tok/s · "
            f"env errors {s.env_errors - b.env_errors}"
        )
        return episodes, info

    def update(self) -> None:
        if self.bar is None:
            return
        done, info = self.line()
        self.bar.update(completed=done, info=info)


@dataclass
class _Job:
    """One episode to run: member ``member`` of group ``group``."""

    group: int
    member: int
    attempt: int = 0


@dataclass
class _Run:
    """What both modes share: the inputs of ``collect`` and the results so far."""

    tasks: list[Task]
    group_size: int
    policy: Policy
    env_pool: EnvPool
    tokenizer: Any
    agent_cfg: AgentConfig
    params: SamplingParams
    max_concurrent_episodes: int
    max_env_retries: int
    stats: RolloutStats
    progress: _Progress
    on_group: Callable[[Group], None] | None
    slots: list[list[Trajectory | None]] = field(default_factory=list)
    group_ids: list[int] | None = None

    def episode(self, job: _Job) -> _Episode:
        gid = job.group if self.group_ids is None else self.group_ids[job.group]
        return _Episode(
            self.tasks[job.group],
            gid,
            self.policy,
            self.tokenizer,
            self.agent_cfg,
            lambda turn: turn_seed(self.params.seed, gid, job.member, job.attempt, turn),
        )

    def on_turn(self, turn: Turn) -> None:
        self.stats.record_turn(turn)
        self.progress.update()

    def finish(self, job: _Job, traj: Trajectory) -> _Job | None:
        """Record an ended episode; returns the retry job when it must run again."""
        traj.info.update(member=job.member, attempt=job.attempt)
        if traj.status == "env_error":
            self.stats.env_errors += 1
            if job.attempt < self.max_env_retries:
                self.progress.update()
                return _Job(job.group, job.member, job.attempt + 1)
        self.stats.record(traj)
        self.progress.update()
        slots = self.slots[job.group]
        slots[job.member] = traj
        if self.on_group is not None and all(t is not None for t in slots):
            self.on_group(Group(self.tasks[job.group], [t for t in slots if t is not None]))
        return None

    def groups(self) -> list[Group]:
        out = []
        for task, slots in zip(self.tasks, self.slots, strict=True):
            assert all(t is not None for t in slots), "collect ended with an incomplete group"
            out.append(Group(task, [t for t in slots if t is not None]))
        return out


async def _collect_async(run: _Run) -> None:
    """Async mode: a pool of episode slots, each refilled as soon as its episode ends.

    An env-error episode is retried at once in the same slot (with a fresh env lease).
    """
    queue: asyncio.Queue[_Job] = asyncio.Queue()
    for g in range(len(run.tasks)):
        for m in range(run.group_size):
            queue.put_nowait(_Job(g, m))

    async def slot() -> None:
        while not queue.empty():
            job: _Job | None = queue.get_nowait()
            while job is not None:
                async with run.env_pool.lease() as env:
                    traj = await _run_one(env, run.episode(job), run.params, run.on_turn)
                job = run.finish(job, traj)

    n = max(1, min(run.max_concurrent_episodes, queue.qsize()))
    # A TaskGroup cancels every slot when one fails or the caller is cancelled; each slot's
    # episode then closes its context on the way out.
    try:
        async with asyncio.TaskGroup() as tg:
            for _ in range(n):
                tg.create_task(slot())
    except BaseExceptionGroup as eg:
        # Report the first failure itself (an engine's HTTP error, a bug), not a group.
        raise eg.exceptions[0] from None


async def _collect_lockstep(run: _Run) -> None:
    """Lockstep baseline: batches of episodes advance turn by turn together.

    Per turn: one batched ``act`` for all live episodes of the batch, then the env steps one
    after another; the next batch starts when all of this batch's episodes have ended (the
    group barrier). Resets are sequential too. Episodes that hit an env error are re-run in a
    later batch.
    """
    if run.env_pool.size < min(run.max_concurrent_episodes, len(run.tasks) * run.group_size):
        raise ValueError(
            f"lockstep needs an env per episode of a batch: the pool has {run.env_pool.size} "
            f"envs, max_concurrent_episodes is {run.max_concurrent_episodes}; make them equal"
        )
    jobs = [_Job(g, m) for g in range(len(run.tasks)) for m in range(run.group_size)]
    while jobs:
        batch, jobs = jobs[: run.max_concurrent_episodes], jobs[run.max_concurrent_episodes :]
        envs: list[WebEnv] = []
        eps = [run.episode(job) for job in batch]
        try:
            for _ in batch:
                envs.append(await run.env_pool.acquire())
            for ep, env in zip(eps, envs, strict=True):
                await ep.reset(env)
            while True:
                live = [i for i, ep in enumerate(eps) if not ep.done]
                if not live:
                    break
                inputs = [eps[i].turn_input() for i in live]
                g0 = time.time()
                comps = await run.policy.act([eps[i].state for i in live], inputs, run.params)
                g1 = time.time()
                for i, inp, comp in zip(live, inputs, comps, strict=True):
                    n_turns = len(eps[i].traj.turns)
                    await eps[i].step(envs[i], inp, comp, g0, g1)
                    if len(eps[i].traj.turns) > n_turns:
                        run.on_turn(eps[i].traj.turns[-1])
        finally:
            for ep in eps:
                ep.close()
            for env in envs:
                await run.env_pool.release(env)
        for job, ep in zip(batch, eps, strict=True):
            retry = run.finish(job, ep.traj)
            if retry is not None:
                jobs.append(retry)


CollectFn = Callable[[_Run], Awaitable[None]]
ROLLOUT_MODES: dict[str, CollectFn] = {"async": _collect_async, "lockstep": _collect_lockstep}
"""Rollout modes by name (``RolloutConfig.mode``)."""


async def collect(
    tasks: list[Task],
    group_size: int,
    engine: Engine | Policy,
    env_pool: EnvPool,
    tokenizer: Any,
    agent_cfg: AgentConfig | None = None,
    params: SamplingParams | None = None,
    max_concurrent_episodes: int = 8,
    max_env_retries: int = 2,
    progress: bool = True,
    *,
    mode: str = "async",
    stats: RolloutStats | None = None,
    on_group: Callable[[Group], None] | None = None,
    group_ids: Sequence[int] | None = None,
) -> list[Group]:
    """Roll out ``group_size`` trajectories of every task.

    Args:
        tasks: the tasks; one group each, returned in this order.
        group_size: trajectories per task (G).
        engine: an inference engine, or a ``Policy`` such as ``ExpertPolicy``.
        env_pool: where episodes get their env (one env per running episode).
        tokenizer: builds prompt ids with the chat template.
        agent_cfg: prompt and context-compression options.
        params: sampling parameters; with a ``seed``, every turn of every episode gets its own
            seed derived from it (``turn_seed``), so both modes sample alike.
        max_concurrent_episodes: episodes running at once (async) or per batch (lockstep).
        max_env_retries: times an env-error episode is run again; after that it stays in its
            group with status ``env_error`` (never a failure to train on; see ``Group.usable``).
        progress: show a progress bar on stderr.
        mode: ``"async"`` or ``"lockstep"`` (``ROLLOUT_MODES``).
        stats: filled with the collection's counters when given.
        on_group: called with each group as soon as its G members have finished.
        group_ids: each task's group id (its trajectories' ``group_id`` and the base of its
            sampling seeds); default its position in ``tasks``. A resumed evaluation passes
            the tasks' positions in the whole run, so they sample as they would have.

    Returns:
        One ``Group`` per task, each with ``group_size`` trajectories in member order.

    Raises:
        ValueError: unknown mode or a bad size.
        asyncio.CancelledError: when cancelled (Ctrl-C); every episode's browser context
            and site instance is closed before it propagates.
    """
    if mode not in ROLLOUT_MODES:
        raise ValueError(f"unknown rollout mode {mode!r}; choose one of {sorted(ROLLOUT_MODES)}")
    if group_ids is not None and len(group_ids) != len(tasks):
        raise ValueError(f"group_ids: {len(group_ids)} ids for {len(tasks)} tasks")
    if group_size < 1 or max_concurrent_episodes < 1 or max_env_retries < 0:
        raise ValueError(
            "group_size and max_concurrent_episodes must be >= 1, max_env_retries >= 0"
        )
    stats = stats if stats is not None else RolloutStats()
    t0 = time.time()
    bar = _Progress(len(tasks) * group_size, stats, progress, f"rollout ({mode})")
    run = _Run(
        tasks=list(tasks),
        group_size=group_size,
        policy=as_policy(engine),
        env_pool=env_pool,
        tokenizer=tokenizer,
        agent_cfg=agent_cfg or AgentConfig(),
        params=params or SamplingParams(),
        max_concurrent_episodes=max_concurrent_episodes,
        max_env_retries=max_env_retries,
        stats=stats,
        progress=bar,
        on_group=on_group,
        slots=[[None] * group_size for _ in tasks],
        group_ids=None if group_ids is None else list(group_ids),
    )
    with bar:
        try:
            await ROLLOUT_MODES[mode](run)
        except BaseException:
            # Cancelled or failed: whatever episode is still open loses its context now.
            await asyncio.shield(env_pool.close_episodes())
            raise
        finally:
            stats.wall_s += time.time() - t0  # summed over the calls sharing ``stats``
    return run.groups()
