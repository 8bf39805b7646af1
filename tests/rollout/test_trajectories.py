"""Trajectory JSONL files: round trip with exact ids, and validation errors with line numbers."""

from __future__ import annotations

import json

import pytest

from webagent_r1.rollout.trajectories import (
    TrajectoryFileError,
    cut_to_budget,
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


def _long(n: int, status: str = "max_turns", reward: float = 0.0, **info) -> Trajectory:
    turns = [Turn([1, 2], [3], [-0.5], f"turn {k}", None) for k in range(n)]
    return Trajectory("task/7", 7, turns, reward, status, {"member": 1, **info})


def test_cut_to_budget_takes_the_grade_recorded_at_that_turn() -> None:
    graded = {
        "4": {"reward": 1.0, "explanation": "saved"},
        "6": {"reward": 0.0, "explanation": "x"},
    }
    tr = _long(8, "done", graded_at=graded, answer="$3", answer_shown=True, explanation="no")
    four = cut_to_budget(tr, 4)
    assert [t.text for t in four.turns] == ["turn 0", "turn 1", "turn 2", "turn 3"]
    assert (four.reward, four.status) == (1.0, "max_turns")
    assert four.info["explanation"] == "saved" and four.info["cut_from_turns"] == 8
    assert four.info["member"] == 1 and "answer" not in four.info  # cut before the exit
    assert "answer_shown" not in four.info
    assert cut_to_budget(tr, 6).reward == 0.0 and len(cut_to_budget(tr, 6).turns) == 6
    assert len(tr.turns) == 8 and tr.info["explanation"] == "no"  # the original is kept


def test_cut_to_budget_keeps_an_episode_that_ended_within_the_budget() -> None:
    done = _long(3, status="done", reward=1.0)
    assert cut_to_budget(done, 3) is done and cut_to_budget(done, 5) is done
    early_error = _long(2, status="env_error", error="browser crashed")
    assert cut_to_budget(early_error, 4) is early_error


def test_cut_to_budget_without_a_grade_is_an_env_error_not_a_failure() -> None:
    missing = cut_to_budget(_long(8), 4)
    assert (missing.status, missing.reward, len(missing.turns)) == ("env_error", 0.0, 4)
    assert "not graded at turn 4" in missing.info["error"]
    fault = {"4": {"reward": None, "explanation": "grader fault: site down"}}
    assert cut_to_budget(_long(8, graded_at=fault), 4).info["error"] == "grader fault: site down"
    # an env error after the budget's turn: the budget saw a healthy episode and its grade
    later = _long(6, status="env_error", error="crash", graded_at={"4": {"reward": 1.0}})
    assert (cut_to_budget(later, 4).status, cut_to_budget(later, 4).reward) == ("max_turns", 1.0)
    # an env error in the budget's last turn (no grade recorded): still that error
    at = cut_to_budget(_long(4, status="env_error", error="crash in turn 4"), 4)
    assert (at.status, at.info["error"]) == ("env_error", "crash in turn 4")
