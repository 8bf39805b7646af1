"""``train/credit.py`` and ``webagent-r1 credit``: each trained turn's share of the policy
gradient, checked against values computed by hand from the paper's weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from webagent_r1.cli import app
from webagent_r1.config import load_config
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.train.credit import INVALID, credit_table
from webagent_r1.train.runconfig import save_run_config
from webagent_r1.types import Action, Trajectory, Turn

# rewards [1, 0]: centred ±0.5, population std 0.5, plus the eps of group_advantages
A = 0.5 / (0.5 + 1e-4)


def _turn(kind: str | None, tokens: int) -> Turn:
    action = None if kind is None else Action(kind=kind, element="3", raw=f"{kind}(...)")
    return Turn(
        prompt_ids=[1, 2, 3],
        completion_ids=[4] * tokens,
        completion_logprobs=[-0.5] * tokens,
        text="",
        action=action,
    )


def _traj(
    task: str, group: int, reward: float, turns: list[tuple[str | None, int]], status: str = "done"
) -> Trajectory:
    return Trajectory(
        task_id=f"{task}/{group}",
        group_id=group,
        turns=[_turn(k, n) for k, n in turns],
        reward=reward,
        status=status,  # type: ignore[arg-type]
        info={"task": {"template": task}},
    )


def _step() -> list[Trajectory]:
    """A group whose rewards are equal, then one with mixed rewards (2 and 3 turns) and an
    env error (never trained on)."""
    return [
        _traj("b", 1, 1.0, [("Click", 2)]),
        _traj("b", 1, 1.0, [("Click", 4)]),
        _traj("a", 0, 1.0, [("Click", 2), ("exit", 3)]),
        _traj("a", 0, 0.0, [("Click", 2), (None, 2), ("exit", 1)]),
        _traj("a", 0, 0.0, [("exit", 5)], status="env_error"),
    ]


def _sums(table_rows: dict) -> dict[str, tuple[int, float, float]]:
    return {k: (c.turns, c.positive, c.negative) for k, c in table_rows.items()}


def test_mgrpo_credit_is_the_advantage_over_group_size_times_turns() -> None:
    table = credit_table([[_step()]], load_config(None, []))
    # 1 / (G · |τ_i|) per turn, whatever its tokens: G = 2 trained trajectories
    win, lose = A / (2 * 2), -A / (2 * 3)
    want = {"Click": (2, win, lose), "exit": (2, win, lose), INVALID: (1, 0.0, lose)}
    got = _sums(table.by_kind)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-6), k
    assert table.groups_used == 1 and table.groups_skipped == 1 and table.steps == 1
    assert table.total.net == pytest.approx(0.0, abs=1e-9)  # advantages are centred
    assert set(table.by_template) == {"a"}  # the equal group trained nothing
    # rollouts: the equal group b costs 2 episodes and trains nothing; a's env error counts
    rolled = {k: (r.groups, r.trained, r.episodes, r.successes) for k, r in table.rollouts.items()}
    assert rolled == {"a": (1, 1, 3, 1), "b": (1, 0, 2, 2)}


def test_token_mean_credit_follows_the_tokens_of_each_turn() -> None:
    cfg = load_config(None, ["rl.normalization=token_mean"])
    table = credit_table([[_step()]], cfg)
    n = 2 + 3 + 2 + 2 + 1  # tokens of the trained group
    want = {
        "Click": (2, 2 * A / n, -2 * A / n),
        "exit": (2, 3 * A / n, -1 * A / n),
        INVALID: (1, 0.0, -2 * A / n),
    }
    got = _sums(table.by_kind)
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-6), k


def test_keeping_equal_groups_with_episode_advantages_adds_zero_credit() -> None:
    cfg = load_config(None, ["rl.drop_equal_groups=false"])
    table = credit_table([[_step()]], cfg)
    assert table.groups_used == 2
    # group b's advantages are 0; it only adds trajectories to G (now 4)
    assert table.by_kind["Click"].turns == 4
    assert table.by_kind["Click"].positive == pytest.approx(A / (4 * 2), rel=1e-6)
    assert table.by_template["b"]["Click"].net == 0.0


def _rollouts(run: Path, step: int, rank: int, trajs: list[Trajectory]) -> Path:
    path = run / "rl" / "rollouts" / f"step-{step:06d}-rank{rank}.jsonl"
    write_trajectories(trajs, path)
    return path


def test_cli_reads_the_rollouts_of_a_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _rollouts(run, 0, 0, _step())
    _rollouts(run, 1, 0, _step())
    res = CliRunner().invoke(app, ["credit", str(run), "--json"])
    assert res.exit_code == 0, res.output
    assert "no --config" in res.stderr
    out = json.loads(res.stdout)
    assert out["steps"] == 2 and out["groups_used"] == 2 and out["groups_skipped"] == 2
    assert out["settings"]["advantage"] == "episode"
    assert out["settings"]["reward_requires_exit"] is False
    assert out["by_kind"]["exit"]["positive"] == pytest.approx(2 * A / 4, rel=1e-6)
    assert out["by_template"]["a"]["invalid"]["turns"] == 2
    assert out["rollouts"]["b"] == {"groups": 2, "trained": 0, "episodes": 4, "successes": 4}
    # tables: one per template with --template
    res = CliRunner().invoke(app, ["credit", str(run / "rl"), "--template"])
    assert res.exit_code == 0, res.output
    assert "rl.advantage=episode" in res.stdout and "Share of +" in res.stdout
    assert "reward_requires_exit" not in res.stdout
    rows = [ln.split() for ln in res.stdout.splitlines() if ln.startswith("│ a ")]
    assert ["│", "a", "│", "2", "│", "2", "│", "6", "│", "2", "│"] in rows  # rollouts of a


def test_ranks_of_a_step_share_the_counts_the_weights_divide_by(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _rollouts(run, 0, 0, _step())
    # rank 1: one more mixed group of one-turn episodes; G is now 2 + 2 over the step
    _rollouts(run, 0, 1, [_traj("c", 0, 0.0, [("Type", 1)]), _traj("c", 0, 1.0, [("exit", 1)])])
    res = CliRunner().invoke(app, ["credit", str(run), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["steps"] == 1 and out["groups_used"] == 2
    exit_ = out["by_kind"]["exit"]
    assert exit_["positive"] == pytest.approx(A / (4 * 2) + A / 4, rel=1e-6)
    assert exit_["negative"] == pytest.approx(-A / (4 * 3), rel=1e-6)
    assert out["by_kind"]["Type"]["negative"] == pytest.approx(-A / 4, rel=1e-6)
    assert out["rollouts"]["c"] == {"groups": 1, "trained": 1, "episodes": 2, "successes": 1}


def test_notes_for_broken_lines_and_settings_other_than_the_runs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    path = _rollouts(run, 0, 0, _step())
    with path.open("a") as f:
        f.write('{"task_id": "a/0", "group_id": 0, "turns": [{"completion_ids": 5}]}\n')
        f.write('{"task_id": "a/0", "gro\n')
    (run / "rl" / "metrics.jsonl").write_text(json.dumps({"step": 1, "train/groups_used": 3}))
    res = CliRunner().invoke(app, ["credit", str(run), "--json"])
    assert res.exit_code == 0, res.output
    assert "2 line(s) not trajectories, skipped (step 1's credit is approximate)" in res.stderr
    assert "step 1: 1 group(s) trained here, the run logged 3" in res.stderr
    assert json.loads(res.stdout)["groups_used"] == 1


def test_cli_says_in_one_line_when_there_are_no_rollouts(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["credit", str(tmp_path)])
    assert res.exit_code == 2
    assert "no training rollouts" in res.output
    res = CliRunner().invoke(app, ["credit", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "not found" in res.output


def test_reward_requires_exit_trains_a_success_at_the_turn_limit_as_a_failure() -> None:
    # group b: both graded 1, the second ran to the turn limit without exit
    trajs = _step()
    trajs[1].status = "max_turns"
    default = credit_table([[trajs]], load_config(None, []))
    assert default.groups_used == 1 and "b" not in default.by_template
    table = credit_table([[trajs]], load_config(None, ["rl.reward_requires_exit=true"]))
    assert table.groups_used == 2
    # trained rewards [1, 0]: ±A, over G = 4 trained trajectories, one turn each
    b = table.by_template["b"]["Click"]
    assert (b.turns, b.positive, b.negative) == (2, pytest.approx(A / 4), pytest.approx(-A / 4))
    # group a keeps its advantages; G doubled, so its credit halves
    got = _sums(table.by_template["a"])
    for k, (turns, pos, neg) in _sums(default.by_template["a"]).items():
        assert got[k] == (turns, pytest.approx(pos / 2), pytest.approx(neg / 2))


def test_steps_picks_the_updates_of_a_span(tmp_path: Path) -> None:
    # rollouts step-0 (update 1): the mixed group of _step(); step-1 (update 2): one more
    # mixed group of one-turn episodes, a Type that failed and an exit that succeeded
    run = tmp_path / "run"
    _rollouts(run, 0, 0, _step())
    _rollouts(run, 1, 0, [_traj("c", 0, 0.0, [("Type", 1)]), _traj("c", 0, 1.0, [("exit", 1)])])
    res = CliRunner().invoke(app, ["credit", str(run), "--json", "--steps", "2"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["steps"] == 1 and out["groups_used"] == 1
    assert set(out["by_kind"]) == {"Type", "exit"}
    assert out["by_kind"]["exit"]["positive"] == pytest.approx(A / 2, rel=1e-6)
    assert (
        json.loads(
            CliRunner().invoke(app, ["credit", str(run), "--json", "--steps", "1-2"]).stdout
        )["steps"]
        == 2
    )
    res = CliRunner().invoke(app, ["credit", str(run), "--steps", "5-9"])
    assert res.exit_code == 2 and "no training rollouts of steps 5-9" in res.output
    assert "it has steps 1-2" in res.output
    for bad in ("3-1", "0", "x"):
        res = CliRunner().invoke(app, ["credit", str(run), "--steps", bad])
        assert res.exit_code == 2 and "FIRST-LAST" in res.output, bad


def test_cli_takes_the_runs_own_settings_and_names_credit_settings_that_differ(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    _rollouts(run, 0, 0, _step())
    save_run_config(
        load_config(None, [f"run_dir={run}", "rl.reward_requires_exit=true"]), resume=False
    )
    res = CliRunner().invoke(app, ["credit", str(run / "rl"), "--json"])
    assert res.exit_code == 0, res.output
    assert f"settings: {run / 'config.yaml'} (the run's own)" in res.stderr
    assert "no --config" not in res.stderr and "did not train with" not in res.stderr
    assert json.loads(res.stdout)["settings"]["reward_requires_exit"] is True

    # an override of a setting the credit reads is named; one it does not read is not
    res = CliRunner().invoke(
        app, ["credit", str(run), "--json", "rl.reward_requires_exit=false", "seed=5"]
    )
    assert res.exit_code == 0, res.output
    assert (
        "note: credit under settings the run did not train with (config.yaml): "
        "rl.reward_requires_exit: True → False"
    ) in res.stderr
    note = [ln for ln in res.stderr.splitlines() if "did not train with" in ln]
    assert len(note) == 1 and "seed" not in note[0]
    assert json.loads(res.stdout)["settings"]["reward_requires_exit"] is False

    # --config replaces the run's settings, and is compared with them
    res = CliRunner().invoke(app, ["credit", str(run), "--json", "-c", "configs/r1.yaml"])
    assert res.exit_code == 0, res.output
    assert "(the run's own)" not in res.stderr
    assert "rl.reward_requires_exit: True → False" in res.stderr


def test_cli_reads_the_newest_resume_and_notes_a_resume_that_changed_the_credit(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    _rollouts(run, 0, 0, _step())
    save_run_config(load_config(None, [f"run_dir={run}"]), resume=False)
    save_run_config(
        load_config(None, [f"run_dir={run}", "rl.reward_requires_exit=true", "rl.steps=9"]),
        resume=True,
    )
    res = CliRunner().invoke(app, ["credit", str(run), "--json"])
    assert res.exit_code == 0, res.output
    assert "config.resume-1.yaml (the run's own)" in res.stderr
    assert json.loads(res.stdout)["settings"]["reward_requires_exit"] is True
    assert (
        "note: config.resume-1.yaml changed settings the credit reads "
        "(rl.reward_requires_exit: False → True)"
    ) in res.stderr.replace("\n", " ")
    assert "rl.steps" not in res.stderr  # not a setting the credit reads


def test_cli_says_to_pass_the_recipe_when_the_runs_settings_do_not_load(tmp_path: Path) -> None:
    run = tmp_path / "run"
    _rollouts(run, 0, 0, _step())
    save_run_config(load_config(None, [f"run_dir={run}"]), resume=False)
    path = run / "config.yaml"
    path.write_text(path.read_text() + "retired_setting: 1\n")
    res = CliRunner().invoke(app, ["credit", str(run)])
    assert res.exit_code == 2
    err = " ".join(res.output.split())
    assert "the run's settings do not load" in err and "retired_setting" in err
    assert "pass -c <the recipe the run trained with>" in err
    res = CliRunner().invoke(app, ["credit", str(run), "--json", "-c", "configs/r1.yaml"])
    assert res.exit_code == 0, res.output
    assert "does not load" in res.stderr
