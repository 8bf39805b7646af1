"""WebEnv: one episode of one task over one browser context.

``reset(task)`` opens a fresh browser context restricted to the task's sites, prepares the site
state (an isolated instance and a login, through a ``SiteBackend``) and returns the first
observation. ``step(response_text)`` parses the agent's action from its raw text, executes it,
and returns the next observation. A malformed action or a bad element costs a turn and comes
back as ``Observation.error``; it never raises. The episode ends on ``exit(message=…)``, after
``max_turns`` turns, after ``early_stop_after`` unparsable or identical actions in a row (when
set; status ``max_turns``, ``info["early_stop"]`` says why), or, for backends whose page runs
the episode itself (MiniWoB++, ``PageEpisodes``), when the page says it is done; the task's
evaluator then gives a binary reward. A crashed browser, or an evaluator that raises
``EnvError`` (it could not read the site), ends the episode with status ``env_error`` (never a
failure to train on), and the next ``reset`` relaunches Chromium if it died. At the turns in
``EnvConfig.grade_at_turns`` a running episode is also graded as a budget ending there would
grade it (``info["graded"]``), so one rollout at the longest turn budget scores the shorter
ones too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from webagent_r1.agent.actions import ActionParseError, parse_action
from webagent_r1.browser import Browser, BrowserCrashedError, BrowserSession
from webagent_r1.config import EnvConfig, ObservationConfig
from webagent_r1.grading.base import (
    EnvError,
    EvalContext,
    EvalResult,
    EvaluatorFn,
    PageEpisodes,
    SiteBackend,
    StaticSites,
)
from webagent_r1.types import Action, Observation, StepResult, Task


def early_stop_reason(recent: list[str | None], k: int) -> str | None:
    """Why an episode ends before its turn budget (``env.early_stop_after``), or None.

    Args:
        recent: each turn's action so far (any comparable key), None for an unparsable one.
        k: the run length that stops the episode (0: never).

    Returns:
        '<k> unparsable actions in a row' or '<k> identical actions in a row' when the last
        ``k`` actions are that, else None.
    """
    if k <= 0 or len(recent) < k:
        return None
    last = recent[-k:]
    if all(a is None for a in last):
        return f"{k} unparsable actions in a row"
    if last[0] is not None and all(a == last[0] for a in last):
        return f"{k} identical actions in a row"
    return None


class WebEnv:
    """One episode at a time over one browser context of a shared Chromium.

    Args:
        browser: the shared Chromium process (one per env pool).
        cfg: turn limit and extra allowed origins.
        obs_cfg: observation format and budget.
        backend: where sites live; defaults to ``StaticSites()`` (task URLs used as they are).
        evaluator: default evaluator when a task has no ``evaluator`` of its own.
        count_tokens: tokenizer-backed counter for the observation budget.
    """

    def __init__(
        self,
        browser: Browser,
        cfg: EnvConfig | None = None,
        obs_cfg: ObservationConfig | None = None,
        backend: SiteBackend | None = None,
        evaluator: EvaluatorFn | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.browser = browser
        self.cfg = cfg or EnvConfig()
        self.obs_cfg = obs_cfg or ObservationConfig()
        self.backend: SiteBackend = backend or StaticSites()
        # the prompt's view of URLs (optional backend hook, see SiteBackend)
        self._display_url: Callable[[str], str] | None = getattr(self.backend, "display_url", None)
        self.evaluator = evaluator
        self.count_tokens = count_tokens
        self.session: BrowserSession | None = None
        self.task: Task | None = None
        self.instance_id: str | None = None
        self.turn = 0
        self.done = True
        self.history: list[Action] = []
        self._recent: list[str | None] = []
        """Each turn's action (its JSON), None where it did not parse (``early_stop_reason``)."""
        self._last_obs: Observation | None = None
        self._seen: list[str] = []
        """The task's intent and each observation's title and text (``EvalContext.shown``)."""
        self.episode_tag = ""
        """Random tag of the current episode (screenshot file names)."""
        self.reset_ms: float | None = None
        """Wall time of the last reset (context, instance, login, first page, observation)."""
        self._page_episodes = self.backend if isinstance(self.backend, PageEpisodes) else None

    # ---------------------------------------------------------------- episode lifecycle

    async def reset(self, task: Task) -> Observation:
        """Start an episode: fresh context, site state, login, first page.

        Raises:
            EnvError: the start page cannot be loaded or the site backend failed (the caller
                counts this as ``env_error``).
        """
        t0 = time.perf_counter()
        await self.close_episode()
        await self.browser.ensure_alive()
        self.task, self.turn, self.done, self.history = task, 0, False, []
        self._recent = []
        self._seen = [task.intent]
        self.episode_tag = uuid.uuid4().hex[:8]
        origins = sorted(set(self.backend.origins(task)) | set(self.cfg.allow_origins))
        try:
            async with self.browser.slot(), self._hang_bound("opening the episode"):
                self.session = await self.browser.new_session(allowed_origins=origins)
                self.instance_id = await self.backend.begin(task, self.session)
                err = await self.session.goto(self.backend.resolve_url(task.start_url))
                if err:
                    raise EnvError(f"task {task.task_id}: start page failed: {err}")
                if self._page_episodes is not None:
                    await self._page_episodes.start_episode(task, self.session)
                self._last_obs = await self._observe()
        except BrowserCrashedError as e:
            self.done = True
            raise EnvError(f"browser crashed during reset: {e}") from e
        except EnvError:
            self.done = True
            raise
        except Exception as e:  # a site backend failure: report, never hang
            self.done = True
            raise EnvError(f"task {task.task_id}: reset failed: {e}") from e
        self.reset_ms = 1000 * (time.perf_counter() - t0)
        return self._last_obs

    async def step(self, response_text: str) -> StepResult:
        """Parse one action from the agent's raw text, execute it, return the result.

        Raises:
            RuntimeError: when called without an active episode (a bug in the caller).
        """
        if self.done or self.session is None or self.task is None:
            raise RuntimeError("step() called without an active episode: call reset() first")
        self.turn += 1
        t0 = time.perf_counter()
        info: dict[str, Any] = {"turn": self.turn}
        keep_alive = getattr(self.backend, "keep_alive", None)
        # The instance is in use however slow the turns; one that is gone ends the episode.
        iid = self.instance_id
        if keep_alive is not None and iid is not None and keep_alive(iid) is False:
            gone = EnvError(f"the episode's site instance {iid!r} is gone")
            return await self._crash(gone, info, what="site fault")
        try:
            action = parse_action(response_text)
        except ActionParseError as e:
            action = None
            info["parse_error"] = str(e)
        try:
            if action is None:
                obs = self._with_error(self._last_obs, info["parse_error"])
            elif action.kind == "exit":
                self.history.append(action)
                # exit cannot fail: the page it ends on keeps no error of the action before
                obs = self._with_error(self._last_obs, None)
                info["action"] = action.to_dict()
                return await self._finish(obs, "done", action.argument, info, t0)
            else:
                self.history.append(action)
                info["action"] = action.to_dict()
                target = self._element_line(action.element)
                if target is not None:
                    info["target"] = target
                async with self.browser.slot(), self._hang_bound(f"the action {action.kind}"):
                    err = await self.session.execute(action)
                    obs = await self._observe()
                    if err:
                        obs.error = self._shown(err)  # e.g. a blocked navigation's URL
                    if self.cfg.screenshot_dir:
                        await self._screenshot(info)
                if self._page_episodes is not None and await self._page_episodes.episode_done(
                    self.session
                ):
                    self._last_obs = obs
                    info["page_done"] = True
                    return await self._finish(obs, "done", None, info, t0)
            if self.turn in self.cfg.grade_at_turns and self.turn < self.cfg.max_turns:
                info["graded"] = await self._grade_now(obs)
        except BrowserCrashedError as e:
            return await self._crash(e, info)
        self._last_obs = obs
        info["step_s"] = time.perf_counter() - t0
        self._recent.append(json.dumps(action.to_dict(), sort_keys=True) if action else None)
        stop = early_stop_reason(self._recent, self.cfg.early_stop_after)
        if stop is not None:
            info["early_stop"] = stop
        if self.turn >= self.cfg.max_turns or stop is not None:
            return await self._finish(obs, "max_turns", None, info, t0)
        return StepResult(observation=obs, done=False, reward=0.0, info=info)

    async def close_episode(self) -> None:
        """Release the episode's context and site instance (safe to call twice)."""
        session, self.session = self.session, None
        instance, self.instance_id = self.instance_id, None
        if session is not None:
            # A dead browser has nothing left to close.
            with contextlib.suppress(Exception):
                await session.close()
        if instance is not None:
            with contextlib.suppress(Exception):
                await self.backend.end(instance)

    async def close(self) -> None:
        """End the current episode, if any."""
        self.done = True
        await self.close_episode()

    # ---------------------------------------------------------------- helpers

    def _element_line(self, element: str | None) -> str | None:
        """How the page the agent acted on names ``element`` (``button "Upvote"``; a table
        row's cell alone), for reading episodes; None when the action names no element on it
        or the page is not in the compact format."""
        if element is None or self._last_obs is None:
            return None
        # At a line's start, or as a table row's cell ("cell | [45] link 'View' | cell").
        pattern = rf"(?:^|\| )\s*\[{re.escape(element)}\] ?([^|\n]*)"
        m = re.search(pattern, self._last_obs.text, re.M)
        return m.group(1).strip()[:120] if m else None

    def _hang_bound(self, what: str) -> contextlib.AbstractAsyncContextManager[None]:
        """Bound a browser exchange against a hung Chromium (``Browser.hang_bound``): the
        episode then ends as an env error and Chromium is relaunched at the next reset."""
        return self.browser.hang_bound(what)

    async def _screenshot(self, info: dict[str, Any]) -> None:
        """Save the page after this turn's action; a failure is noted, never fatal."""
        assert self.session is not None and self.task is not None and self.cfg.screenshot_dir
        folder = Path(self.cfg.screenshot_dir)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", str(self.task.task_id))
        path = folder / f"{safe}-{self.episode_tag}-t{self.turn:02d}.png"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            await self.session.screenshot(path)
            info["screenshot"] = str(path.resolve())
        except BrowserCrashedError:
            raise
        except Exception as e:
            info["screenshot_error"] = str(e)[:200]

    async def _observe(self) -> Observation:
        assert self.session is not None
        obs = await self.session.observe(self.obs_cfg, count_tokens=self.count_tokens)
        # What the prompt shows: URLs through the backend's display_url when it has one (the
        # embedded sites show their default ports, so prompts do not depend on the run's
        # ports); ``url`` stays the real one, for the graders, the experts and the logs.
        show = self._display_url
        if show is not None:
            obs = dataclasses.replace(
                obs,
                shown_url=show(obs.url) if obs.url else None,
                text=show(obs.text),  # cross-site links in observation.format=html
                tabs=[show(t) for t in obs.tabs],  # an untitled tab is listed by its URL
                error=None if obs.error is None else show(obs.error),
            )
        self._seen.append(f"{obs.title}\n{obs.text}")
        return obs

    def _shown(self, text: str) -> str:
        """``text`` as the prompt shows it (see ``_observe``)."""
        return text if self._display_url is None else self._display_url(text)

    @staticmethod
    def _with_error(obs: Observation | None, error: str | None) -> Observation:
        assert obs is not None
        return dataclasses.replace(obs, tabs=list(obs.tabs), error=error)

    async def _finish(
        self,
        obs: Observation | None,
        status: str,
        answer: str | None,
        info: dict[str, Any],
        t0: float,
    ) -> StepResult:
        assert self.task is not None and self.session is not None
        self.done = True
        try:
            result = await self._evaluate(answer, obs.url if obs else "")
        except BrowserCrashedError as e:
            return await self._crash(e, info)
        except EnvError as e:  # the grader could not read the site: no reward to give
            return await self._crash(e, info, what="grader fault")
        info.update(
            status=status,
            answer=answer,
            explanation=result.explanation,
            step_s=time.perf_counter() - t0,
        )
        if result.answer_shown is not None:
            info["answer_shown"] = result.answer_shown
        await self.close_episode()
        assert obs is not None
        return StepResult(observation=obs, done=True, reward=result.reward, info=info)

    async def _grade_now(self, obs: Observation) -> dict[str, Any]:
        """Grade the episode as if its budget ended at this turn (``cfg.grade_at_turns``):
        what ``_finish`` would grade on ``max_turns``, with no answer, the episode going on.
        A grader fault is tried once more, then gives a ``None`` reward (that budget's
        episode is an env error); a crashed browser ends the episode as at any step."""
        fault: EnvError | None = None
        for _ in range(2):
            try:
                result = await self._evaluate(None, obs.url)
            except EnvError as e:
                if isinstance(e.__cause__, BrowserCrashedError):
                    raise e.__cause__ from None
                fault = e
                continue
            return {"turn": self.turn, "reward": result.reward, "explanation": result.explanation}
        return {"turn": self.turn, "reward": None, "explanation": f"grader fault: {fault}"}

    async def _crash(
        self, e: Exception, info: dict[str, Any], what: str = "browser crashed"
    ) -> StepResult:
        """End the episode as ``env_error`` (never graded, never trained on)."""
        self.done = True
        info.update(status="env_error", error=f"{what}: {e}")
        await self.close_episode()
        obs = Observation(url="", title="", text="", error=info["error"])
        return StepResult(observation=obs, done=True, reward=0.0, info=info)

    async def _evaluate(self, answer: str | None, url: str) -> EvalResult:
        assert self.task is not None and self.session is not None
        fn = self.task.evaluator or self.evaluator
        if fn is None:
            return EvalResult(0.0, "no evaluator configured for this task")
        ctx = EvalContext(
            task=self.task,
            answer=answer,
            session=self.session,
            url=url,
            instance_id=self.instance_id,
            backend=self.backend,
            history=list(self.history),
            shown=list(self._seen),
            turn=self.turn,
        )
        out = fn(ctx)
        if inspect.isawaitable(out):
            out = await out
        if isinstance(out, EvalResult):
            return out
        if isinstance(out, tuple):
            return EvalResult(float(out[0]), str(out[1]))
        return EvalResult(float(out))
