"""Unit tests of the static trajectory viewer (no browser: the page's HTML and its data)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.view.conftest import INJECTION, TASKS
from webagent_r1.report.viewer import NoTrajectoriesError, build_viewer, extract_thinking, load_run


def _page_data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1))


@pytest.mark.parametrize(
    ("text", "thinking"),
    [
        ("<think> a plan </think><answer>x</answer>", "a plan"),
        ("the template opened it</think><answer>x</answer>", "the template opened it"),
        ("<THINK>cut off while thinking", "cut off while thinking"),
        ("<think>cut off<answer>exit()</answer>", "cut off"),
        ("<answer>do()</answer>", ""),
        ("", ""),
    ],
)
def test_extract_thinking(text: str, thinking: str) -> None:
    assert extract_thinking(text) == thinking


def test_build_viewer_writes_one_self_contained_page(run_dir: Path) -> None:
    path = build_viewer(run_dir, tasks=TASKS)
    assert path == run_dir / "viewer.html" and path.is_file()
    html = path.read_text()
    # Self-contained: no external resource, CSS and JS inline.
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "<style>" in html and "<script>" in html
    # Model output is never markup: the injection is escaped inside the JSON data.
    assert INJECTION not in html and "<img src=x" not in html
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in html

    data = _page_data(html)
    eps = {e["task_id"]: e for e in data["episodes"]}
    assert len(data["episodes"]) == 4
    ok = eps["shopping.price/000"]
    assert ok["site"] == "shopping" and ok["template"] == "shopping.price"
    assert ok["intent"] == "What is the price of the red mug?"
    assert ok["file"] == "rl/eval/step-000010.jsonl" and ok["line"] == 1
    assert (ok["reward"], ok["success"], ok["status"], ok["n_turns"]) == (1.0, True, "done", 2)
    assert (ok["answer"], ok["explanation"], ok["wall_s"]) == ("$12", "answer matches '$12'", 3.25)
    t0 = ok["turns"][0]
    assert t0["thinking"] == "The mug page is linked from the home page."
    assert t0["action"] == 'do(action="Click", element="3")'
    assert t0["target"] == "link 'Red mug'" and ok["turns"][1]["target"] == ""
    assert t0["obs"]["title"] == "Red mug" and t0["obs"]["text_head"].startswith("[3] link")
    assert t0["screenshot"].startswith("data:image/png;base64,iVBOR")
    # No token ids in the page.
    assert "prompt_ids" not in html and "completion_logprobs" not in html

    bad = eps["forum.upvote/001"]
    assert bad["success"] is False and bad["site"] == "forum" and bad["status"] == "max_turns"
    assert bad["turns"][0]["error"] == "unknown action 'Fly'"
    assert bad["turns"][0]["action"] == ""  # shown as "(no valid action)"
    assert bad["turns"][0]["thinking"] == f"I will try {INJECTION} here."
    assert bad["turns"][1]["screenshot"] is None  # the file is missing
    assert bad["explanation"] == "the post was not upvoted"

    assert eps["forum.reply/002"]["file"] == "rl/rollouts/step-000001-rank0.jsonl"
    # A response without tags is kept whole, since there is no thinking to show.
    assert eps["forum.reply/002"]["turns"][0]["text"] == "no tags at all, just words"
    unknown = eps["gone.task/404"]
    assert (unknown["intent"], unknown["site"], unknown["template"]) == ("", "", "")

    # The malformed line is counted, metrics.jsonl is skipped, both are noted.
    assert data["bad_lines"] == 1 and data["skipped_files"] == 1
    notes = " ".join(data["notes"])
    assert "rl/metrics.jsonl: skipped, not a trajectory file" in notes
    assert "rl/rollouts/step-000001-rank0.jsonl:3: not valid JSON" in notes


def test_out_path_and_notes_callback(run_dir: Path, tmp_path: Path) -> None:
    notes: list[str] = []
    out = build_viewer(run_dir, tmp_path / "pages" / "v.html", tasks=TASKS, on_note=notes.append)
    assert out == tmp_path / "pages" / "v.html" and out.is_file()
    assert len(notes) == 2


def test_default_lookup_uses_the_embedded_suite(run_dir: Path, monkeypatch) -> None:
    import webagent_r1.report.viewer as viewer

    monkeypatch.setattr(viewer, "build_suite", lambda spec=None: TASKS[:1])
    run = load_run(run_dir)
    by_id = {e["task_id"]: e for e in run.episodes}
    assert by_id["shopping.price/000"]["site"] == "shopping"
    assert by_id["forum.upvote/001"]["site"] == ""


def test_folder_without_trajectories_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(NoTrajectoriesError, match="no trajectories under"):
        build_viewer(tmp_path, tasks=TASKS)
    with pytest.raises(FileNotFoundError, match="not found"):
        build_viewer(tmp_path / "nope", tasks=TASKS)


def test_placeholder_names_in_data_are_left_alone(tmp_path: Path) -> None:
    from webagent_r1.rollout.trajectories import write_trajectories
    from webagent_r1.types import Trajectory

    write_trajectories(
        [Trajectory(task_id="__JS__ __DATA__", group_id="g", info={"answer": "__CSS__"})],
        tmp_path / "t.jsonl",
    )
    data = _page_data(build_viewer(tmp_path, tasks=[]).read_text())
    assert data["episodes"][0]["task_id"] == "__JS__ __DATA__"
    assert data["episodes"][0]["answer"] == "__CSS__"


def test_cli_view(run_dir: Path, tmp_path: Path, monkeypatch) -> None:
    import webagent_r1.report.viewer as viewer
    from webagent_r1.cli import app

    built: list[object] = []
    monkeypatch.setattr(viewer, "build_suite", lambda spec=None: built.append(spec) or TASKS)
    out = tmp_path / "v.html"
    res = CliRunner().invoke(app, ["view", str(run_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(built) == 1  # the tasks came from the stand-in suite
    assert str(out) in res.stdout and out.resolve().as_uri() in res.stdout
    assert out.is_file()


def test_cli_view_empty_folder_is_one_line_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", "webagent_r1.cli", "view", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2
    assert "no trajectories under" in res.stderr and "Traceback" not in res.stderr


def test_unknown_tasks_show_what_the_rollout_recorded(tmp_path: Path) -> None:
    """MiniWoB++ (intent known only after reset) and other sources' episodes are readable
    without their task list; a malformed record is ignored, not fatal."""
    from webagent_r1.rollout.trajectories import write_trajectories
    from webagent_r1.types import Trajectory

    recorded = {"intent": "Click on the button.", "site": "miniwob", "template": "miniwob.b"}
    write_trajectories(
        [
            Trajectory(task_id="miniwob.b/3", group_id="g", info={"task": recorded}),
            Trajectory(task_id="other/1", group_id="g", info={"task": "not a record"}),
        ],
        tmp_path / "t.jsonl",
    )
    by_id = {e["task_id"]: e for e in load_run(tmp_path, tasks=[]).episodes}
    assert {k: by_id["miniwob.b/3"][k] for k in recorded} == recorded
    assert (by_id["other/1"]["intent"], by_id["other/1"]["site"]) == ("", "")


def _strict_json(text: str) -> dict:
    """``json.loads`` as a browser's ``JSON.parse`` does it: NaN and Infinity are errors."""

    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_become_null_so_the_page_data_parses(tmp_path: Path) -> None:
    from webagent_r1.rollout.trajectories import write_trajectories
    from webagent_r1.types import Trajectory

    write_trajectories(
        [
            Trajectory(task_id="a", group_id="g", info={"wall_s": float("nan")}),
            Trajectory(task_id="b", group_id="g", info={"wall_s": float("inf"), "x": [-1e999]}),
            Trajectory(task_id="c", group_id="g", info={"wall_s": 2.5}),
        ],
        tmp_path / "t.jsonl",
    )
    html = build_viewer(tmp_path, tasks=[]).read_text()
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    assert m is not None
    data = _strict_json(m.group(1))
    walls = {e["task_id"]: e["wall_s"] for e in data["episodes"]}
    assert walls == {"a": None, "b": None, "c": 2.5}


def test_screenshots_outside_the_run_folder_are_not_embedded(tmp_path: Path) -> None:
    from tests.view.conftest import PNG
    from webagent_r1.rollout.trajectories import write_trajectories
    from webagent_r1.types import Trajectory, Turn

    run = tmp_path / "runs" / "r1"
    (run / "evals" / "shots").mkdir(parents=True)
    (run / "evals" / "shots" / "ok.png").write_bytes(PNG)
    (tmp_path / "private.png").write_bytes(PNG)
    (run / "evals" / "shots" / "link.png").symlink_to(tmp_path / "private.png")
    names = [
        "shots/ok.png",
        "../../../private.png",
        str(tmp_path / "private.png"),
        "shots/link.png",
        "shots/../../../../private.png",
    ]
    turns = [
        Turn(
            prompt_ids=[1],
            completion_ids=[2],
            completion_logprobs=[-0.1],
            text="",
            action=None,
            observation=o,
        )
        for o in ({"screenshot": n} for n in names)
    ]
    write_trajectories(
        [Trajectory(task_id="t", group_id="g", turns=turns)], run / "evals" / "e.jsonl"
    )
    shots = [t["screenshot"] for t in load_run(run, tasks=[]).episodes[0]["turns"]]
    assert shots[0] is not None and shots[0].startswith("data:image/png;base64,")
    assert shots[1:] == [None] * 4
