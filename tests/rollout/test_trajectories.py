"""Trajectory JSONL files: round trip with exact ids, and validation errors with line numbers."""

from __future__ import annotations

import json

import pytest

from webagent_r1.rollout.trajectories import (
    TrajectoryFileError,
    read_trajectories,
    turn_samples,
    write_trajectories,
)
from webagent_r1.types import Action, Trajectory, Turn


def _traj(i: int = 0, reward: float = 1.0) -> Trajectory:
    turns = [
        Turn(
            prompt_ids=[5, 6, 7],
            completion_ids=[101, 102, 2],
            completion_logprobs=[-0.1, -0.25, -0.5],
            text='<answer>do(action="Click", element="1")</answer>',
            action=Action("Click", element="1", raw='do(action="Click", element="1")'),
            observation={"url": "http://x/", "title": "T", "error": None, "text_head": "…"},
            timings={"gen_start": 1.0, "gen_end": 2.0, "env_start": 2.0, "env_end": 2.5},
        ),
        Turn([5, 6, 7, 8], [9], [-1e-9], '<answer>exit(message="ü")</answer>', None),
    ]
    return Trajectory(f"task/{i}", i, turns, reward, "done", {"answer": "ü"})


def test_round_trip_keeps_everything(tmp_path) -> None:
    trajs = [_traj(0), _traj(1, reward=0.0)]
    path = tmp_path / "sub" / "t.jsonl"
    assert write_trajectories(trajs, path) == 2
    assert len(path.read_text().splitlines()) == 2
    back = read_trajectories(path)
    assert [t.to_dict() for t in back] == [t.to_dict() for t in trajs]
    assert back[0].turns[0].action == trajs[0].turns[0].action
    assert write_trajectories([_traj(2)], path, append=True) == 1
    assert [t.task_id for t in read_trajectories(path)] == ["task/0", "task/1", "task/2"]
    # Samples from the file equal samples from memory.
    assert turn_samples(back[0]) == turn_samples(trajs[0])


def _file(tmp_path, lines: list[str]):
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def _line(t: Trajectory, **changes) -> str:
    d = t.to_dict()
    d.update(changes)
    return json.dumps(d)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "bad.jsonl:2: not valid JSON"),
        ("[1, 2]", "bad.jsonl:2: a line must hold one JSON object"),
        (json.dumps({"task_id": 1}), r"bad.jsonl:2: missing field\(s\) \['group_id', 'turns'\]"),
        (_line(_traj(), reward=0.5), "bad.jsonl:2: reward must be 0 or 1, got 0.5"),
        (_line(_traj(), status="crashed"), "bad.jsonl:2: status must be one of"),
    ],
)
def test_malformed_lines_name_their_line(tmp_path, bad: str, message: str) -> None:
    p = _file(tmp_path, [_line(_traj()), bad])
    with pytest.raises(TrajectoryFileError, match=message):
        read_trajectories(p)


def test_turn_level_validation(tmp_path) -> None:
    t = _traj()
    t.turns[1].completion_logprobs = [-0.1, -0.2]
    with pytest.raises(TrajectoryFileError, match="turn 1: 2 logprobs for 1 completion ids"):
        read_trajectories(_file(tmp_path, ["", _line(_traj()), "", json.dumps(t.to_dict())]))
    with pytest.raises(TrajectoryFileError, match="bad.jsonl:4: turn 1"):
        read_trajectories(_file(tmp_path, ["", _line(_traj()), "", json.dumps(t.to_dict())]))
    t = _traj()
    t.turns[0].completion_ids = [1, "x", 2]
    with pytest.raises(TrajectoryFileError, match="turn 0: completion_ids"):
        read_trajectories(_file(tmp_path, [json.dumps(t.to_dict())]))
    d = _traj().to_dict()
    d["turns"][0]["unknown_field"] = 1
    with pytest.raises(TrajectoryFileError, match="bad.jsonl:1: not a trajectory"):
        read_trajectories(_file(tmp_path, [json.dumps(d)]))


def test_writing_refuses_invalid_trajectories(tmp_path) -> None:
    with pytest.raises(TrajectoryFileError, match="reward must be 0 or 1"):
        write_trajectories([_traj(reward=0.3)], tmp_path / "x.jsonl")
    with pytest.raises(FileNotFoundError, match="not found"):
        read_trajectories(tmp_path / "missing.jsonl")
