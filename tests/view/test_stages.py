"""The viewer counts success per stage (demonstrations, each evaluation, each RL step's
rollouts), never over a whole run folder: a rate over the experts' kept demonstrations and a
model's evaluations together measures nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.view.conftest import TASKS
from webagent_r1.report.viewer import build_viewer, load_run, stage_of
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.types import Trajectory

# Which stage each trajectory file of ``make_recipe_run`` belongs to, written out by hand.
EXPECTED_STAGES = {
    "demos.jsonl": ("demonstrations", "demonstrations"),
    "base/eval.jsonl": ("evaluation: base model", "evaluation"),
    "rl/eval/step-000000.jsonl": ("evaluation: RL step 0 (before the first update)", "evaluation"),
    "rl/rollouts/step-000000-rank0.jsonl": ("rollouts: RL step 1", "rollouts"),
    "rl/rollouts/step-000000-rank1.jsonl": ("rollouts: RL step 1", "rollouts"),
    "rl/rollouts/step-000001-rank0.jsonl": ("rollouts: RL step 2", "rollouts"),
    "rl/eval/step-000004.jsonl": ("evaluation: RL step 4", "evaluation"),
    "eval/trajectories-t15.jsonl": ("evaluation: eval/ (max_turns=15)", "evaluation"),
}


def _page_data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    assert m is not None
    return json.loads(m.group(1))


def _count_file(path: Path) -> tuple[int, int, int]:
    """(episodes, scored, successes) of a trajectory file, read line by line with ``json``."""
    episodes = scored = successes = 0
    for line in path.read_text().splitlines():
        d = json.loads(line)
        episodes += 1
        if d["status"] != "env_error":
            scored += 1
            successes += d["reward"] == 1.0
    return episodes, scored, successes


def _expected(run: Path) -> dict[str, dict]:
    """Each stage's numbers, summed from its files as ``EXPECTED_STAGES`` groups them."""
    out: dict[str, dict] = {}
    for rel, (label, kind) in EXPECTED_STAGES.items():
        n, scored, ok = _count_file(run / rel)
        st = out.setdefault(label, {"kind": kind, "episodes": 0, "scored": 0, "successes": 0})
        st["episodes"] += n
        st["scored"] += scored
        st["successes"] += ok
    for st in out.values():
        st["success"] = st["successes"] / st["scored"]
    return out


def test_each_stage_has_its_own_numbers(recipe_run: Path) -> None:
    data = _page_data(build_viewer(recipe_run, tasks=TASKS).read_text())
    got = {
        st["label"]: {k: st[k] for k in ("kind", "episodes", "scored", "successes", "success")}
        for st in data["stages"]
    }
    expected = _expected(recipe_run)
    assert got == expected
    # the files of each stage, and every episode tagged with its file's stage
    files = {f: st["label"] for st in data["stages"] for f in st["files"]}
    assert files == {rel: label for rel, (label, _) in EXPECTED_STAGES.items()}
    assert all(ep["stage"] == files[ep["file"]] for ep in data["episodes"])
    assert len(data["episodes"]) == sum(st["episodes"] for st in expected.values())
    # in the order the recipe made them
    assert [st["label"] for st in data["stages"]] == [
        "demonstrations",
        "evaluation: base model",
        "evaluation: RL step 0 (before the first update)",
        "rollouts: RL step 1",
        "rollouts: RL step 2",
        "evaluation: RL step 4",
        "evaluation: eval/ (max_turns=15)",
    ]


def test_demonstrations_and_an_evaluation_are_never_one_rate(tmp_path: Path) -> None:
    """The experts' demonstrations (all kept ones succeed) and a model's evaluation in one
    folder: two stages with their own rates, and no rate of the two together in the page."""
    from tests.report.conftest import traj

    run = tmp_path / "run"
    write_trajectories([traj(f"d{i}", 2, 1.0) for i in range(6)], run / "demos.jsonl")
    write_trajectories(
        [traj("e1", 3, 0.0, "max_turns"), traj("e2", 1, 1.0), traj("e3", 2, 0.0)],
        run / "base" / "eval.jsonl",
    )
    run_eps = load_run(run, tasks=[])
    rates = {st.label: (st.episodes, st.successes, st.success) for st in run_eps.stages}
    assert rates == {"demonstrations": (6, 6, 1.0), "evaluation: base model": (3, 1, 1 / 3)}
    html = build_viewer(run, tasks=[]).read_text()
    # the old headline's pooled rate (7 of 9) appears nowhere in the page
    assert "77.8" not in html and "0.777" not in html
    assert "successful (" not in html
    assert "success is counted per stage" in html


def test_demonstrations_named_by_the_summary(tmp_path: Path, monkeypatch) -> None:
    """``bc.data`` may have any name: the file ``summary.json`` names is the demonstrations."""
    from tests.report.conftest import traj

    run = tmp_path / "runs" / "r"
    write_trajectories([traj("d", 1, 1.0)], run / "bc-data.jsonl")
    write_trajectories([traj("e", 1, 0.0)], run / "base" / "eval.jsonl")
    summary = {"stages": {"demos": {"file": "runs/r/bc-data.jsonl"}}}
    (run / "summary.json").write_text(json.dumps(summary))
    want = {
        "demonstrations bc-data.jsonl": "demonstrations",
        "evaluation: base model": "evaluation",
    }
    monkeypatch.chdir(tmp_path)  # the recipe's paths are relative to where it ran
    assert {st.label: st.kind for st in load_run(run, tasks=[]).stages} == want
    elsewhere = tmp_path / "elsewhere"  # the viewer started from another folder
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert {st.label: st.kind for st in load_run(run, tasks=[]).stages} == want


def test_runs_inside_an_experiment_folder_stay_apart(tmp_path: Path) -> None:
    from tests.report.conftest import traj

    root = tmp_path / "exp"
    write_trajectories(
        [traj("a", 1, 1.0)], root / "bc" / "seed-0" / "rl" / "eval" / "step-000010.jsonl"
    )
    write_trajectories(
        [traj("a", 1, 0.0)], root / "bc" / "seed-1" / "rl" / "eval" / "step-000010.jsonl"
    )
    write_trajectories(
        [traj("a", 1, 1.0), traj("b", 1, 1.0)],
        root / "bc" / "seed-1" / "eval-val" / "trajectories-t8.partial.jsonl",
    )
    got = {st.label: (st.episodes, st.successes) for st in load_run(root, tasks=[]).stages}
    assert got == {
        "bc/seed-0 · evaluation: RL step 10": (1, 1),
        "bc/seed-1 · evaluation: RL step 10": (1, 0),
        "bc/seed-1 · evaluation: eval-val/ (max_turns=8, unfinished)": (2, 2),
    }


@pytest.mark.parametrize(
    ("rel", "kind", "label"),
    [
        ("demos.jsonl", "demonstrations", "demonstrations"),
        ("data/demos-r1.jsonl", "demonstrations", "data · demonstrations demos-r1.jsonl"),
        ("base/eval.jsonl", "evaluation", "evaluation: base model"),
        ("rl/eval/step-000012.jsonl", "evaluation", "evaluation: RL step 12"),
        ("rl/rollouts/step-000003-rank2.jsonl", "rollouts", "rollouts: RL step 4"),
        ("trajectories-t5.jsonl", "evaluation", "evaluation (max_turns=5)"),
        ("tts/trajectories-t15.jsonl", "evaluation", "evaluation: tts/ (max_turns=15)"),
        ("out.jsonl", "trajectories", "out.jsonl"),
        ("rl/eval/notes.jsonl", "trajectories", "rl/eval/notes.jsonl"),
    ],
)
def test_stage_of(rel: str, kind: str, label: str) -> None:
    assert stage_of(rel)[1:] == (kind, label)


def test_env_errors_are_left_out_of_a_stage_rate(tmp_path: Path) -> None:
    write_trajectories(
        [
            Trajectory(task_id="a", group_id="g", reward=1.0),
            Trajectory(task_id="b", group_id="g", reward=0.0, status="env_error"),
        ],
        tmp_path / "trajectories-t4.jsonl",
    )
    (st,) = load_run(tmp_path, tasks=[]).stages
    assert (st.episodes, st.scored, st.successes, st.success) == (2, 1, 1, 1.0)
