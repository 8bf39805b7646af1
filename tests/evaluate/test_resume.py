"""A resumable evaluation: finished tasks are appended as they end, an interrupted run is
continued with ``resume`` (same settings only), and nothing of the first run is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webagent_r1.config import load_config
from webagent_r1.evaluation import run as ev
from webagent_r1.evaluation.run import PROGRESS_FILE, read_partial, run_evaluation
from webagent_r1.rollout.trajectories import read_trajectories, write_trajectories
from webagent_r1.sources.embedded.suite import run_tasks
from webagent_r1.tasks.subset import eval_subset
from webagent_r1.types import Trajectory, Turn


def _tr(group: int, member: int, reward: float = 1.0) -> Trajectory:
    turn = Turn([1], [2], [0.0], "x", None)
    return Trajectory(f"t{group}", group, [turn], reward, "done", {"member": member})


def test_read_partial_keeps_whole_tasks_and_skips_a_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    # task 0 complete (members out of order, member 1 written twice: run again after an
    # earlier kill, the last line counts), task 1 has one of its two episodes
    first = _tr(0, 1, 1.0)
    first.turns[0].text = "a page with a\u2028line separator"  # not a line break in JSONL
    write_trajectories([first, _tr(0, 0), _tr(1, 0), _tr(0, 1, 0.0)], path)
    with path.open("a") as f:
        f.write('{"task_id": "t1", "group_id": 1, "tur')  # the line being written at the kill
    got = read_partial(path, samples=2)
    assert list(got) == [0]
    assert [t.info["member"] for t in got[0]] == [0, 1]
    assert [t.reward for t in got[0]] == [1.0, 0.0]
    assert read_partial(path, samples=1) == {0: got[0][:1], 1: [_tr(1, 0)]}
    assert read_partial(tmp_path / "missing.jsonl", 2) == {}


def test_settings_guard_an_unfinished_evaluation(tmp_path: Path) -> None:
    settings = {"model": "m", "samples": 4, "max_turns": [8], "tasks": ["a", "b"]}
    out = tmp_path / "o"
    with pytest.raises(ValueError, match="no unfinished evaluation"):
        ev._start_or_resume(out, settings, resume=True)
    ev._start_or_resume(out, settings, resume=False)  # nothing there: a fresh start
    ev._write_progress(out, settings)  # written with the first finished task
    assert json.loads((out / PROGRESS_FILE).read_text()) == settings
    with pytest.raises(ValueError, match="add --resume"):
        ev._start_or_resume(out, settings, resume=False)
    with pytest.raises(ValueError, match=r"other settings \(samples differ\)"):
        ev._start_or_resume(out, {**settings, "samples": 2}, resume=True)
    ev._start_or_resume(out, settings, resume=True)  # the same: accepted
    (out / PROGRESS_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="unreadable"):
        ev._start_or_resume(out, settings, resume=True)


class _Killed(RuntimeError):
    pass


@pytest.mark.browser
async def test_an_interrupted_evaluation_resumes_where_it_stopped(tmp_path, monkeypatch) -> None:
    out = tmp_path / "eval"
    cfg = load_config(
        None, [f"run_dir={tmp_path}", "rollout.max_concurrent_episodes=2", "tasks.difficulty=1-2"]
    )
    tasks = eval_subset(run_tasks("test", [], [], ["1-2"]), 5, 0)
    real_write = ev.write_trajectories
    calls = {"n": 0}

    def dies_on_the_third_group(trajs, path, append=False):
        if append:
            calls["n"] += 1
            if calls["n"] == 3:
                raise _Killed("the machine went away")
        return real_write(trajs, path, append)

    # a run that fails before its first task leaves nothing that blocks the next one
    with pytest.raises(ValueError, match="engine"):
        await run_evaluation(cfg, tasks, engine="nonsense", out_dir=out, progress=False)
    assert not (out / PROGRESS_FILE).exists()
    monkeypatch.setattr(ev, "write_trajectories", dies_on_the_third_group)
    with pytest.raises(_Killed):
        await run_evaluation(cfg, tasks, engine="expert", out_dir=out, progress=False)
    monkeypatch.setattr(ev, "write_trajectories", real_write)
    assert (out / PROGRESS_FILE).exists() and not (out / "eval.json").exists()
    partial = out / "trajectories-t15.partial.jsonl"
    first = {i: trs[0].to_dict() for i, trs in read_partial(partial, 1).items()}
    assert len(first) == 2

    with pytest.raises(ValueError, match="add --resume"):
        await run_evaluation(cfg, tasks, engine="expert", out_dir=out, progress=False)
    with pytest.raises(ValueError, match="other settings"):
        await run_evaluation(
            cfg, tasks[:4], engine="expert", out_dir=out, progress=False, resume=True
        )
    summary = await run_evaluation(
        cfg, tasks, engine="expert", out_dir=out, progress=False, resume=True
    )
    (res,) = summary["results"]
    assert res["resumed_tasks"] == 2 and res["episodes"] == 5 and res["success"] == 1.0
    final = read_trajectories(out / res["trajectories"])
    assert [str(t.task_id) for t in final] == [str(t.task_id) for t in tasks]
    assert [t.group_id for t in final] == [0, 1, 2, 3, 4]  # positions kept for seeds and ids
    for i, d in first.items():
        assert final[i].to_dict() == d  # the first run's episodes, not run again
    assert not (out / PROGRESS_FILE).exists() and not partial.exists()
    assert json.loads((out / "eval.json").read_text()) == summary
    # a finished evaluation is not resumable, and a new one in the folder starts afresh
    with pytest.raises(ValueError, match="no unfinished evaluation"):
        await run_evaluation(cfg, tasks, engine="expert", out_dir=out, progress=False, resume=True)
