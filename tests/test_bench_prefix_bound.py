"""benchmarks/prefix_bound.py: the prompt tokens an unbounded prefix cache leaves to compute,
checked against counts worked out by hand."""

from __future__ import annotations

from pathlib import Path

from tests.support.scripts import load_script
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.types import Trajectory, Turn


def load_bench():
    return load_script("benchmarks/prefix_bound.py", "bench_prefix_bound_under_test")


def _turn(prompt: list[int], completion: list[int], start: float) -> Turn:
    return Turn(
        prompt_ids=prompt,
        completion_ids=completion,
        completion_logprobs=[-1.0] * len(completion),
        text="",
        action=None,
        timings={"gen_start": start},
    )


def test_each_prompt_reuses_its_longest_prefix_among_earlier_requests(tmp_path: Path) -> None:
    # episode a: turn 0 at t=1, turn 1 at t=3 (its prompt extends turn 0's prompt + completion
    # for 5 tokens, then departs); episode b: the same first prompt at t=2, then a prompt at
    # t=4 that shares only [1, 2] with anything earlier
    a = Trajectory(
        task_id="a",
        group_id=0,
        turns=[_turn([1, 2, 3, 4], [5, 6], 1.0), _turn([1, 2, 3, 4, 5, 9, 9], [7], 3.0)],
        reward=0.0,
        status="done",
    )
    b = Trajectory(
        task_id="b",
        group_id=1,
        turns=[_turn([1, 2, 3, 4], [8], 2.0), _turn([1, 2, 7, 7, 7], [7], 4.0)],
        reward=0.0,
        status="done",
    )
    path = tmp_path / "traj.jsonl"
    write_trajectories([b, a], path)  # file order differs from generation order
    out = load_bench().main([path])
    # computed: 4 (nothing held) + 0 (duplicate) + 2 (5 of 7 held) + 3 (2 of 5 held)
    assert (out["requested"], out["computed"]) == (4 + 4 + 7 + 5, 4 + 0 + 2 + 3)
    assert out["by_turn"][0] == {"requested": 8, "computed_frac": 0.5}
    assert out["by_turn"][1] == {"requested": 12, "computed_frac": 5 / 12}
    assert out["episodes"] == 2 and out["turns"] == 4
