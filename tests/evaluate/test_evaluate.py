"""Evaluation: confidence intervals, pass@k and failure reasons (pure), and real evaluations
of the experts (100%, test-time-scaling sweep with reuse) and of a bad engine (0%, reasons)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webagent_r1.config import Config, load_config
from webagent_r1.evaluation.run import EvalReport, evaluate_policy, run_evaluation
from webagent_r1.policy.base import Completion, Engine, SamplingParams
from webagent_r1.rollout.trajectories import read_trajectories
from webagent_r1.sources.embedded.guess import baseline
from webagent_r1.sources.embedded.source import EmbeddedSource
from webagent_r1.sources.embedded.suite import run_tasks
from webagent_r1.tasks.subset import eval_subset
from webagent_r1.types import Action, Task, Trajectory, Turn, failure_reason


def _traj(task: Task, reward: float, status: str = "done", actions: int = 1) -> Trajectory:
    turns = [
        Turn([1], [2], [0.0], "x", Action("Click", "3") if k < actions else None) for k in range(2)
    ]
    info = {"explanation": "expected 'blue', got 'red'"} if status == "done" else {}
    return Trajectory(task.task_id, 0, turns, reward, status, info)  # type: ignore[arg-type]


def test_report_pass_at_k_breakdowns_and_reasons() -> None:
    tasks = eval_subset(run_tasks("test", ["map"], [], []), 2, 0)
    a, b = tasks
    # two samples per task: a succeeds once, b never (once out of turns, once a wrong answer)
    report = EvalReport(
        trajectories=[_traj(a, 1.0), _traj(a, 0.0), _traj(b, 0.0, "max_turns", 0), _traj(b, 0.0)],
        tasks=[a, a, b, b],
        samples=2,
    )
    assert report.success_rate == 0.25
    assert report.pass_at_k() == 0.5
    res = report.result()
    # Two tasks of two samples: the interval is a bootstrap over tasks (1 of 2, 0 of 2):
    # resampled rates 0.5 (p 1/4), 0.25 (p 1/2), 0 (p 1/4) → [0, 0.5] (see tests/test_stats.py)
    assert res["by_site"] == {"map": {"success": 0.25, "ci": [0.0, 0.5], "n": 4}}
    assert res["ci"] == [0.0, 0.5] and res["ci_method"] == "task-bootstrap"
    assert res["unscored_tasks"] == [] and res["pass_at_k_short_tasks"] == 0
    assert sum(v["n"] for v in res["by_kind"].values()) == 4 and "?" not in res["by_kind"]
    assert res["failures"] == {
        "ran out of turns: no valid action in any turn": 1,
        "wrong result: expected 'blue', got 'red'": 2,
    }
    assert failure_reason(_traj(a, 1.0)) is None
    assert res["successes_at_turn_limit"] == 0
    with pytest.raises(ValueError):
        report.by("colour")


def test_report_counts_successes_that_ran_to_the_turn_limit() -> None:
    [a] = eval_subset(run_tasks("test", ["map"], [], []), 1, 0)
    trajs = [_traj(a, 1.0), _traj(a, 1.0, "max_turns"), _traj(a, 0.0, "max_turns")]
    res = EvalReport(trajectories=trajs, tasks=[a, a, a], samples=3).result()
    assert res["successes_at_turn_limit"] == 1 and res["success"] == pytest.approx(2 / 3)


def test_report_counts_successes_whose_answer_no_page_showed() -> None:
    [a] = eval_subset(run_tasks("test", ["map"], [], []), 1, 0)
    trajs = [_traj(a, 1.0), _traj(a, 1.0), _traj(a, 0.0), _traj(a, 1.0)]
    trajs[0].info["answer_shown"] = True
    trajs[1].info["answer_shown"] = False  # counted: a success, flagged
    trajs[2].info["answer_shown"] = False  # a failure: not counted
    res = EvalReport(trajectories=trajs, tasks=[a] * 4, samples=4).result()
    assert res["successes_answer_not_shown"] == 1 and res["success"] == pytest.approx(3 / 4)


def test_report_keeps_tasks_with_no_scored_episode() -> None:
    """A task whose every episode was an env error is reported, not silently dropped; a task
    with one env error counts pass@k over its scored episodes."""
    tasks = eval_subset(run_tasks("test", ["map"], [], []), 3, 0)
    a, b, c = tasks
    report = EvalReport(
        trajectories=[
            _traj(a, 1.0),
            _traj(a, 0.0),
            _traj(b, 0.0, "env_error"),
            _traj(b, 0.0, "env_error"),
            _traj(c, 1.0),
            _traj(c, 0.0, "env_error"),
        ],
        tasks=[a, a, b, b, c, c],
        env_errors=3,
        samples=2,
    )
    res = report.result()
    assert res["unscored_tasks"] == [str(b.task_id)]
    assert res["tasks"] == 3 and res["episodes"] == 3
    # a: 1 of 2 → pass@2 = 1; c: 1 of 1 scored (short) → pass@1 = 1; b not averaged
    assert res["pass_at_k"] == 1.0 and res["pass_at_k_short_tasks"] == 1
    assert res["success"] == pytest.approx(2 / 3)
    assert report.per_task()[str(b.task_id)] == []


def test_cli_eval_prints_the_baseline_under_the_table(monkeypatch, tmp_path: Path) -> None:
    """``webagent-r1 eval`` on the embedded suite prints the constant-answer line; the
    evaluation itself is replaced by a stub (no browser)."""
    from typer.testing import CliRunner

    import webagent_r1.cli as cli
    import webagent_r1.evaluation.run as ev

    seen: dict[str, list[Task]] = {}

    async def fake_run_evaluation(cfg, tasks, **kw):
        seen["tasks"] = tasks
        res = {
            "max_turns": 5,
            "success": 0.5,
            "ci": [0.2, 0.8],
            "episodes": 6,
            "pass_at_k": None,
            "by_site": {"shopping": {"success": 0.5, "ci": [0.2, 0.8], "n": 6}},
            "failures": {},
        }
        return {"engine": "expert", "results": [res], "guess_baseline": baseline(tasks).to_dict()}

    monkeypatch.setattr(ev, "run_evaluation", fake_run_evaluation)
    res = CliRunner().invoke(
        cli.app,
        [
            "eval",
            "--engine",
            "expert",
            "--split",
            "test",
            "--final",  # test: the guard's flag (the ledger goes to run_dir)
            "tasks.templates=[shopping.search_result_count]",
            f"run_dir={tmp_path}",
        ],
    )
    assert res.exit_code == 0, res.output
    assert len(seen["tasks"]) == 6  # the template's 6 test tasks; "2" answers 4 of them
    line = (
        "constant-answer baseline: a policy answering each template's most common training "
        "answer would score 4/6 (66.7%) on these tasks"
    )
    assert line in " ".join(res.output.split())
    assert res.output.index("constant-answer") > res.output.index("shopping")


class _OwnRunPerBudget(EmbeddedSource):
    grades_mid_episode = False


def _cfg(tmp_path: Path, *extra: str) -> Config:
    return load_config(
        None,
        [
            f"run_dir={tmp_path}",
            "rollout.max_concurrent_episodes=3",
            "tasks.difficulty=1-2",
            *extra,
        ],
    )


@pytest.mark.browser
async def test_experts_score_100_and_the_sweep_scores_shorter_budgets_from_one_rollout(
    tmp_path: Path,
) -> None:
    out = tmp_path / "eval"
    cfg = _cfg(tmp_path, f"env.screenshot_dir={out / 'screenshots'}")
    tasks = eval_subset(run_tasks("test", [], [], ["1-2", "3-5"]), 6, 0)
    summary = await run_evaluation(
        cfg, tasks, engine="expert", max_turns=[3, 15], out_dir=out, progress=False
    )
    assert json.loads((out / "eval.json").read_text()) == summary
    assert "numerics" not in summary  # the experts sample nothing: no precision to record
    # the embedded suite: the constant-answer baseline of these 6 tasks, each counted once
    assert summary["guess_baseline"] == baseline(tasks).to_dict()
    assert summary["guess_baseline"]["tasks"] == 6
    short, full = summary["results"]
    assert (short["max_turns"], full["max_turns"]) == (3, 15)
    assert full["success"] == 1.0 and full["episodes"] == 6 and "cut_from" not in full
    assert full["ci"][0] > 0.5 and full["ci"][1] == 1.0
    assert short["cut_from"] == 15 and short["episodes"] == 6
    long = read_trajectories(out / full["trajectories"])
    # the experts read their answers off the pages: none flagged as a guess
    flags = [t.info["answer_shown"] for t in long if "answer_shown" in t.info]
    assert flags and all(flags) and full["successes_answer_not_shown"] == 0
    fits = sum(len(t.turns) <= 3 for t in long)
    assert 0 < fits < 6, "the sample should mix short and long expert solutions"
    cut = read_trajectories(out / short["trajectories"])
    assert [len(t.turns) for t in cut] == [min(len(t.turns), 3) for t in long]
    assert all(
        t.status == "max_turns" for t, lt in zip(cut, long, strict=True) if len(lt.turns) > 3
    )
    # The reference: the same tasks run again, alone, at a 3-turn budget. A cut-off episode is
    # graded on the state it reached (a nav or change task may pass), as a real budget does.
    alone = await run_evaluation(
        cfg, tasks, engine="expert", max_turns=[3], out_dir=tmp_path / "alone", progress=False
    )
    ref = read_trajectories(tmp_path / "alone" / alone["results"][0]["trajectories"])
    assert [(t.reward, t.status, len(t.turns)) for t in cut] == [
        (t.reward, t.status, len(t.turns)) for t in ref
    ]
    assert short["success"] == alone["results"][0]["success"]
    assert fits / 6 <= short["success"] < 1.0
    # A source whose graders may move the agent's tab runs each budget on its own.
    per = await run_evaluation(
        cfg,
        tasks,
        engine="expert",
        max_turns=[3, 15],
        out_dir=tmp_path / "per",
        progress=False,
        source=_OwnRunPerBudget.from_config(cfg),
    )
    assert not any("cut_from" in r for r in per["results"])
    ran = read_trajectories(tmp_path / "per" / per["results"][0]["trajectories"])
    assert [(t.reward, t.status, len(t.turns)) for t in ran] == [
        (t.reward, t.status, len(t.turns)) for t in ref
    ]
    assert all("graded_at" not in t.info for t in ran)
    # a screenshot after every action, stored relative to the trajectory file, and the viewer
    # embeds them
    acted = [t for tr in long for t in tr.turns if t.action and t.action.kind != "exit"]
    assert acted
    for turn in acted:
        shot = turn.observation["screenshot"]
        assert not Path(shot).is_absolute() and (out / shot).read_bytes()[:4] == b"\x89PNG"
    from webagent_r1.report.viewer import build_viewer

    html = build_viewer(out).read_text()
    assert html.count("data:image/png;base64,") >= len(acted)


class _Babbler(Engine):
    """A deliberately bad engine: polite text, never an action."""

    def __init__(self, tokenizer) -> None:
        self.ids = tokenizer("I am not sure what to do here.", add_special_tokens=False).input_ids
        self.eos = tokenizer.eos_token_id

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        text = "I am not sure what to do here."
        return [Completion([*self.ids, self.eos], [0.0] * (len(self.ids) + 1), text, "stop")]


@pytest.mark.browser
async def test_a_bad_engine_scores_0_with_reasons(browser, embedded_sites, tmp_path) -> None:
    from webagent_r1.grading.embedded import evaluate
    from webagent_r1.policy.hf import load_tokenizer
    from webagent_r1.rollout.pool import LocalEnvPool

    cfg = _cfg(tmp_path, "env.max_turns=2")
    tok = load_tokenizer(cfg.model.name)
    tasks = eval_subset(run_tasks("test", [], [], ["1-2"]), 3, 0)
    pool = LocalEnvPool(browser, 3, cfg.env, cfg.observation, embedded_sites, evaluate)
    try:
        report = await evaluate_policy(_Babbler(tok), tok, tasks, pool, progress=False)
    finally:
        await pool.close()
    assert report.success_rate == 0.0 and len(report.trajectories) == 3
    assert report.failures() == {"ran out of turns: no valid action in any turn": 3}
    for tr in report.trajectories:
        assert tr.status == "max_turns" and len(tr.turns) == 2
        assert all(t.error and "action" in t.error.lower() for t in tr.turns)


def test_eval_subset_spans_the_sites_before_a_second_template_of_any() -> None:
    """Three templates of site a, one each of b and c (2 tasks each): a 3-task subset takes
    one template per site, not a's three (the first three by name); a 5-task subset takes
    every template once; the same call gives the same tasks."""

    def task(template: str, k: int) -> Task:
        site = template.split(".")[0]
        return Task(f"{template}/{k}", "x", "http://x/", [site], extra={"template": template})

    names = ["a.one", "a.three", "a.two", "b.one", "c.one"]
    tasks = [task(name, k) for name in names for k in range(2)]
    three = eval_subset(tasks, 3, seed=0)
    assert sorted(t.sites[0] for t in three) == ["a", "b", "c"]
    five = eval_subset(tasks, 5, seed=0)
    assert sorted(t.extra["template"] for t in five) == sorted(names)
    assert [t.task_id for t in eval_subset(tasks, 5, seed=0)] == [t.task_id for t in five]


def test_eval_subset_of_every_template_spans_every_site() -> None:
    """The every-template recipes evaluate 48 test tasks of the suite's 103 templates: every
    site and the cross-site templates are in the subset, each with several tasks (taken in
    name order, the first 48 templates were all cross-site, GitLab and map ones)."""
    tasks = run_tasks("test", [], [], [])
    subset = eval_subset(tasks, 48, 0)
    per_site: dict[str, int] = {}
    for t in subset:
        key = str(t.extra["template"]).split(".")[0]
        per_site[key] = per_site.get(key, 0) + 1
    assert len(subset) == 48 and len({t.task_id for t in subset}) == 48
    assert set(per_site) == {str(t.extra["template"]).split(".")[0] for t in tasks}
    assert min(per_site.values()) >= 4


def test_eval_summary_reports_the_prompt_tokens_the_engine_ran() -> None:
    from webagent_r1.evaluation.run import _prefill_summary

    assert _prefill_summary((300, 1200)) == {
        "prefill": {"computed": 300, "requested": 1200, "computed_frac": 0.25}
    }
    assert _prefill_summary(None) == {}  # the experts, an OpenAI server: not counted
    assert _prefill_summary((0, 0)) == {}  # every task resumed: nothing ran


def test_an_hf_evaluation_records_the_precision_it_sampled_in() -> None:
    from webagent_r1.config import load_config
    from webagent_r1.evaluation.run import _numerics
    from webagent_r1.policy.precision import cpu_model

    cfg = load_config(None, ["model.device=cpu", "model.autocast_bf16=false"])
    got = _numerics(cfg, "hf")
    assert got["numerics"] == "cpu, float32" and got["machine"].startswith(cpu_model())
    cfg = load_config(None, ["model.device=cpu", "model.autocast_bf16=true"])
    assert _numerics(cfg, "hf")["numerics"] == "cpu, bf16 autocast"
    assert _numerics(cfg, "openai") == {} and _numerics(cfg, "expert") == {}
