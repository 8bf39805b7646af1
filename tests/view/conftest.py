"""A small run folder of trajectories for the viewer tests (real Trajectory/Turn/Action)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.types import Action, Task, Trajectory, Turn

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
INJECTION = "<script>alert(1)</script>"
IMG_INJECTION = "<img src=x onerror=alert(2)>"


def _task(task_id: str, site: str, template: str, intent: str) -> Task:
    return Task(
        task_id=task_id,
        intent=intent,
        start_url=f"__{site.upper()}__/",
        sites=[site],
        extra={"template": template},
    )


TASKS = [
    _task("shopping.price/000", "shopping", "shopping.price", "What is the price of the red mug?"),
    _task("forum.upvote/001", "forum", "forum.upvote", "Upvote the newest post about owls"),
    _task("forum.reply/002", "forum", "forum.reply", "Reply 'thanks' to the first comment"),
]


def _turn(text: str, raw: str | None, **kw) -> Turn:
    action = Action(kind="Click", element="3", raw=raw) if raw else None
    return Turn(
        prompt_ids=[1, 2, 3],
        completion_ids=[4, 5],
        completion_logprobs=[-0.5, -0.25],
        text=text,
        action=action,
        **kw,
    )


def _obs(url: str, title: str, head: str, **extra) -> dict:
    return {"url": url, "title": title, "error": None, "text_head": head, **extra}


def make_trajectories() -> tuple[list[Trajectory], list[Trajectory]]:
    """(eval file trajectories, rollout file trajectories): 4 episodes, 2 successes."""
    success = Trajectory(
        task_id="shopping.price/000",
        group_id="g0",
        turns=[
            _turn(
                "<think>The mug page is linked from the home page.</think>"
                '<answer>do(action="Click", element="3")</answer>',
                'do(action="Click", element="3")',
                observation=_obs(
                    "http://127.0.0.1:7770/mug",
                    "Red mug",
                    "[3] link 'Red mug' $12",
                    screenshot="shots/t0.png",
                    target="link 'Red mug'",
                ),
            ),
            _turn(
                '<think>The price is $12.</think><answer>exit(message="$12")</answer>',
                'exit(message="$12")',
                observation=_obs("http://127.0.0.1:7770/mug", "Red mug", "done"),
            ),
        ],
        reward=1.0,
        status="done",
        info={"answer": "$12", "explanation": "answer matches '$12'", "wall_s": 3.25},
    )
    failure = Trajectory(
        task_id="forum.upvote/001",
        group_id="g1",
        turns=[
            _turn(
                f"<think>I will try {INJECTION} here.</think><answer>do(action='Fly')</answer>",
                None,
                observation=_obs("http://127.0.0.1:9999/", "Forum", "front page"),
                error="unknown action 'Fly'",
            ),
            _turn(
                "<think>Click the owl post.</think>",
                f'do(action="Click", element="{IMG_INJECTION}")',
                observation=_obs(
                    "http://127.0.0.1:9999/owls", "Owls", "owls", screenshot="shots/missing.png"
                ),
            ),
        ],
        reward=0.0,
        status="max_turns",
        info={"explanation": "the post was not upvoted"},
    )
    other_success = Trajectory(
        task_id="forum.reply/002",
        group_id="g2",
        turns=[_turn("no tags at all, just words", 'exit(message="")')],
        reward=1.0,
    )
    unknown = Trajectory(task_id="gone.task/404", group_id="g3", turns=[], reward=0.0)
    return [success, failure], [other_success, unknown]


def make_run(root: Path) -> Path:
    """A run folder: eval and rollout trajectory files, a metrics file, one malformed line."""
    evals, rollouts = make_trajectories()
    write_trajectories(evals, root / "rl" / "eval" / "step-000010.jsonl")
    (root / "rl" / "eval" / "shots").mkdir()
    (root / "rl" / "eval" / "shots" / "t0.png").write_bytes(PNG)
    path = root / "rl" / "rollouts" / "step-000001-rank0.jsonl"
    write_trajectories(rollouts, path)
    with path.open("a") as f:
        f.write('{"task_id": "broken", "turns": [\n')
    (root / "rl" / "metrics.jsonl").write_text(
        json.dumps({"step": 1, "train/loss": 0.5}) + "\n" + json.dumps({"step": 2}) + "\n"
    )
    return root


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run")


def make_recipe_run(parent: Path) -> Path:
    """A recipe's run folder with every stage the viewer tells apart: the report tests' run
    (``summary.json``, RL evaluations at steps 0 and 4, rollouts of two steps, an
    ``eval/`` folder) plus the experts' demonstrations, the base model's evaluation and a
    second rank of the first step's rollouts."""
    from tests.report.conftest import make_run, traj

    run = make_run(parent)
    write_trajectories([traj(f"d{i}", 2, 1.0) for i in range(5)], run / "demos.jsonl")
    write_trajectories(
        [
            traj("t1", 3, 0.0, "max_turns"),
            traj("t2", 1, 1.0),
            traj("t3", 2, 0.0),
            traj("t4", 0, 0.0, "env_error"),
        ],
        run / "base" / "eval.jsonl",
    )
    write_trajectories(
        [traj("r2", 1, 1.0), traj("r2", 1, 1.0), traj("r2", 4, 0.0, "max_turns")],
        run / "rl" / "rollouts" / "step-000000-rank1.jsonl",
    )
    return run


@pytest.fixture
def recipe_run(tmp_path: Path) -> Path:
    return make_recipe_run(tmp_path)
