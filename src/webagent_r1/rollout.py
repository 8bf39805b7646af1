"""Rolling out episodes: a policy engine acting in a WebEnv, recorded as Trajectories.

``run_episode`` drives one episode turn by turn: it builds the compressed prompt (DESIGN.md,
"Context compression"), tokenises it once with the chat template, asks the engine for a
completion, and stores the exact prompt and completion ids it used, so training never
re-tokenises generated text.
"""

from __future__ import annotations

import time
from typing import Any

from webagent_r1.agent.context import build_messages
from webagent_r1.agent.prompts import format_observation
from webagent_r1.config import AgentConfig
from webagent_r1.env import EnvError, WebEnv
from webagent_r1.policy.base import Engine, SamplingParams
from webagent_r1.types import Task, Trajectory, Turn


def chat_ids(tokenizer: Any, messages: list[dict[str, str]]) -> list[int]:
    """Prompt token ids of ``messages`` with the generation prompt appended."""
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(out, list):  # BatchEncoding in some transformers versions
        out = out["input_ids"]
    return list(out)


def observation_summary(obs_dict: dict[str, Any], limit: int = 200) -> dict[str, Any]:
    """A short record of an observation for trajectory files (the full text is not kept)."""
    return {
        "url": obs_dict.get("url", ""),
        "title": obs_dict.get("title", ""),
        "error": obs_dict.get("error"),
        "text_head": (obs_dict.get("text") or "")[:limit],
    }


async def run_episode(
    env: WebEnv,
    engine: Engine,
    tokenizer: Any,
    task: Task,
    agent_cfg: AgentConfig | None = None,
    params: SamplingParams | None = None,
    group_id: int | str = 0,
) -> Trajectory:
    """Run one episode of ``task`` and return its trajectory.

    A reset or browser failure gives a trajectory with status ``env_error`` (never a training
    failure); the caller decides whether to retry.
    """
    agent_cfg = agent_cfg or AgentConfig()
    params = params or SamplingParams()
    traj = Trajectory(task_id=task.task_id, group_id=group_id)
    t0 = time.perf_counter()
    try:
        obs = await env.reset(task)
    except EnvError as e:
        traj.status, traj.info["error"] = "env_error", str(e)
        return traj
    history: list[tuple[str, str]] = []
    try:
        while True:
            obs_text = format_observation(obs)
            messages = build_messages(task.intent, history, obs_text, agent_cfg)
            prompt_ids = chat_ids(tokenizer, messages)
            g0 = time.perf_counter()
            [comp] = await engine.generate([prompt_ids], params)
            g1 = time.perf_counter()
            result = await env.step(comp.text)
            s1 = time.perf_counter()
            action = None
            if "action" in result.info:
                from webagent_r1.types import Action

                action = Action.from_dict(result.info["action"])
            traj.turns.append(
                Turn(
                    prompt_ids=prompt_ids,
                    completion_ids=list(comp.token_ids),
                    completion_logprobs=list(comp.logprobs),
                    text=comp.text,
                    action=action,
                    observation=observation_summary(result.observation.to_dict()),
                    error=result.info.get("parse_error") or result.observation.error,
                    timings={"generate_s": g1 - g0, "env_s": s1 - g1},
                )
            )
            history.append((comp.text, obs_text))
            obs = result.observation
            if result.done:
                traj.reward = float(result.reward)
                traj.status = result.info.get("status", "done")
                for key in ("answer", "explanation", "error"):
                    if key in result.info:
                        traj.info[key] = result.info[key]
                break
    finally:
        await env.close_episode()
    traj.info["wall_s"] = time.perf_counter() - t0
    return traj
