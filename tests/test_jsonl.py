"""One JSONL reader for every command: records split at ``\\n`` only, the same one-line
errors from the loaders, ``report``, ``failures`` and ``view``, and integers range-checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.test_types import WEBARENA_ENTRY
from webagent_r1.cli import app
from webagent_r1.report.load import read_episode_stats, scan_trajectories
from webagent_r1.report.viewer import load_run
from webagent_r1.rollout.trajectories import (
    TrajectoryFileError,
    read_trajectories,
    write_trajectories,
)
from webagent_r1.tasks import TaskError, load_tasks, write_tasks
from webagent_r1.types import Task, Trajectory, Turn

SEPARATORS = "\u2028\u2029\u0085\x0b\x0c\x1c\x1d\x1e"
"""Characters ``str.splitlines`` splits at, besides ``\\n`` and ``\\r``."""


def _traj(text: str = "exit", reward: float = 1.0) -> Trajectory:
    turn = Turn([5, 6], [7, 8], [-0.5, -0.25], f"<answer>{text}</answer>", None)
    return Trajectory("t/1", 0, [turn], reward, "done", {"note": text})


def _line(**patch: Any) -> str:
    d = _traj().to_dict()
    turn = patch.pop("turn", {})
    d["turns"][0].update(turn)
    d.update(patch)
    return json.dumps(d)


def test_write_tasks_then_load_tasks_keeps_line_separators_inside_records(tmp_path: Path) -> None:
    task = Task.from_dict({**WEBARENA_ENTRY, "intent": f"Find{SEPARATORS}the product"})
    path = tmp_path / "tasks.jsonl"
    write_tasks([task, Task.from_dict({**WEBARENA_ENTRY, "task_id": 1})], path)
    loaded = load_tasks(path)
    assert [t.intent for t in loaded][0] == f"Find{SEPARATORS}the product"


def test_every_reader_reads_what_write_trajectories_wrote(tmp_path: Path) -> None:
    path = tmp_path / "run" / "eval.jsonl"
    write_trajectories([_traj(f"a{SEPARATORS}b"), _traj("c", reward=0.0)], path)
    assert [t.info["note"] for t in read_trajectories(path)] == [f"a{SEPARATORS}b", "c"]
    st = read_episode_stats(path, "eval")
    assert st.success == [True, False] and st.bad_lines == 0
    seen: list[Trajectory] = []
    assert scan_trajectories(path, seen.append) == 0 and len(seen) == 2
    run = load_run(tmp_path / "run")
    assert run.bad_lines == 0 and len(run.episodes) == 2


def test_utf16_files_read_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_bytes((_line() + "\n" + _line(reward=0) + "\n").encode("utf-16"))
    assert len(read_trajectories(path)) == 2
    assert read_episode_stats(path, "e").success == [True, False]
    res = CliRunner().invoke(app, ["failures", str(path)])
    assert res.exit_code == 0, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)


BAD_LINES = [
    (_line(reward="1"), "reward must be 0 or 1, got '1'"),
    (_line(turn={"completion_logprobs": [float("nan"), -0.1]}), "completion_logprobs[0]"),
    (_line(turn={"prompt_ids": [5, 2**70]}), "prompt_ids[1] must be token ids (integers in"),
    ("[" * 5000 + "]" * 5000, "JSON nested deeper than 64 levels"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_LINES, ids=["reward", "nan", "2^70", "deep"])
def test_report_failures_view_and_loaders_refuse_a_line_alike(
    tmp_path: Path, bad: str, message: str
) -> None:
    """The loaders raise ``file:2: <message>``; the report, ``failures`` and the viewer skip
    the line with that same error instead of counting a success (or a traceback)."""
    run = tmp_path / "run"
    run.mkdir()
    path = run / "eval.jsonl"
    path.write_text(_line(reward=0) + "\n" + bad + "\n")
    with pytest.raises(TrajectoryFileError) as e:
        read_trajectories(path)
    assert str(e.value).startswith(f"{path}:2: ") and message in str(e.value)
    st = read_episode_stats(path, "e")
    assert st.success == [False] and st.bad_lines == 1
    assert st.first_bad == str(e.value)
    errors: list[str] = []
    assert scan_trajectories(path, lambda _t: None, errors) == 1 and errors == [str(e.value)]
    viewed = load_run(run)
    assert viewed.bad_lines == 1 and "eval.jsonl:2: " in viewed.notes[0]
    assert message in viewed.notes[0]
    res = CliRunner().invoke(app, ["failures", str(path)])
    assert res.exit_code == 0 and "Traceback" not in res.output
    assert message in " ".join(res.output.split())


def test_a_file_that_is_not_text_is_one_line_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_bytes(_line().replace("exit", "caf\u00e9").encode("latin-1"))
    with pytest.raises(TrajectoryFileError, match=r"eval.jsonl:1: not UTF-8 text"):
        read_trajectories(path)
    res = CliRunner().invoke(app, ["failures", str(path)])
    assert res.exit_code == 2 and "not UTF-8 text" in res.output and "Traceback" not in res.output


def test_integers_past_64_bits_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({**WEBARENA_ENTRY, "task_id": 2**70}) + "\n")
    with pytest.raises(TaskError, match=r"tasks.jsonl:1: task_id must be an integer or"):
        load_tasks(path)
    traj = tmp_path / "t.jsonl"
    traj.write_text(_line(turn={"weight_version": 2**64}) + "\n")
    with pytest.raises(TrajectoryFileError, match="weight_version must be a non-negative"):
        read_trajectories(traj)


def test_read_jsonl_skips_or_raises_with_the_line(tmp_path: Path) -> None:
    from webagent_r1.inputs import read_jsonl

    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n{"a": "x\u2028y"}\n')
    skipped: list[str] = []
    rows = read_jsonl(path, TaskError, skipped=skipped, name="rows.jsonl")
    assert rows == [(1, {"a": 1}), (4, {"a": "x\u2028y"})]
    assert skipped == ["rows.jsonl:3: not valid JSON (Expecting value at line 1)"]
    with pytest.raises(TaskError, match=r"^rows.jsonl:3: not valid JSON"):
        read_jsonl(path, TaskError, name="rows.jsonl")
