"""One M-GRPO step end to end: embedded sites, real Chromium, rollout, update, checkpoint, eval."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.support.tiny import make_tiny_model, make_trajectories, tiny_config
from webagent_r1.config import load_config
from webagent_r1.policy.base import Completion, Engine
from webagent_r1.policy.trainable import load_policy
from webagent_r1.rollout.trajectories import read_trajectories, turn_samples, write_trajectories
from webagent_r1.train.batching import collate, completion_logprobs
from webagent_r1.train.checkpoint import latest_checkpoint
from webagent_r1.train.metrics import read_metrics
from webagent_r1.train.rl import train_rl
from webagent_r1.types import Task, Trajectory

pytestmark = pytest.mark.browser


def _config(tmp_path: Path, model: Path, *extra: str):
    """A tiny-model RL run in ``tmp_path/run``: groups of 2, one task a step, one eval task."""
    return load_config(
        None,
        [
            f"model.name={model}",
            "model.device=cpu",
            f"run_dir={tmp_path / 'run'}",
            "rollout.group_size=2",
            "rollout.max_concurrent_episodes=2",
            "rl.tasks_per_step=1",
            "rl.eval_tasks=1",
            "train.tensorboard=false",
            *extra,
        ],
    )


def _one_step(tmp_path: Path, *extra: str):
    """``_config`` for one M-GRPO step of one-turn episodes, 4 tokens a turn, tiny model."""
    model = make_tiny_model(tmp_path / "model")
    return _config(
        tmp_path, model, "env.max_turns=1", "rollout.max_new_tokens=4", "rl.steps=1", *extra
    )


async def _step_rollouts(cfg: Any, tmp_path: Path) -> tuple[Any, Path, list[Trajectory]]:
    """Train ``cfg``; its result, its stage folder and step 0's rollouts."""
    res = await train_rl(cfg, progress=False)
    stage = tmp_path / "run" / "rl"
    return res, stage, read_trajectories(stage / "rollouts" / "step-000000-rank0.jsonl")


async def test_one_rl_step_with_real_browsers(tmp_path: Path) -> None:
    model = make_tiny_model(tmp_path / "model")
    cfg = _config(
        tmp_path,
        model,
        "env.max_turns=2",
        "rollout.max_new_tokens=6",
        "rl.steps=1",
        "rl.drop_equal_groups=false",  # the random model fails: still run the update
    )
    res = await train_rl(cfg, progress=False)
    stage = tmp_path / "run" / "rl"
    assert latest_checkpoint(stage / "checkpoints") == res.checkpoint
    assert (res.checkpoint / "model" / "config.json").is_file()
    rollouts = read_trajectories(stage / "rollouts" / "step-000000-rank0.jsonl")
    assert len(rollouts) == 2 and all(t.turns for t in rollouts)
    for t in rollouts:
        assert t.status in ("done", "max_turns")
        assert all(turn.prompt_ids and turn.completion_ids for turn in t.turns)
    rows = read_metrics(stage / "metrics.jsonl")
    steps = [r for r in rows if "train/loss" in r]
    assert len(steps) == 1 and steps[0]["train/groups_used"] == 1
    assert steps[0]["rollout/success"] == 0.0
    assert 0 < steps[0]["sys/rss_gb"] <= steps[0]["sys/peak_rss_gb"]
    evals = [r for r in rows if "eval/success" in r]
    assert [r["step"] for r in evals] == [0, 1]  # before and after
    history = json.loads((stage / "eval_history.json").read_text())
    assert len(history) == 2


async def test_bc_term_trains_on_demonstrations_when_no_group_has_an_advantage(
    tmp_path: Path,
) -> None:
    """With ``rl.bc_coef``, an update whose groups all have equal rewards (zero advantage)
    still moves the weights, by the demonstrations' term alone; without it, they stay."""
    data = tmp_path / "demos.jsonl"
    write_trajectories(make_trajectories(4, seed=3), data)
    moved = {}
    for coef in (0.0, 1.0):
        run = tmp_path / f"coef{coef}"
        cfg = _one_step(
            run,
            "rl.drop_equal_groups=false",  # the random model fails: keep its groups
            f"bc.data={data}",
            f"rl.bc_coef={coef}",
            "rl.bc_batch_size=3",
        )
        _, stage, rollouts = await _step_rollouts(cfg, run)
        assert rollouts and all(t.reward == 0.0 for t in rollouts)
        [row] = [r for r in read_metrics(stage / "metrics.jsonl") if "train/loss" in r]
        moved[coef] = row["train/update_rms"]
        assert ("train/bc_loss" in row) == (coef > 0)
        if coef:
            assert row["train/bc_loss"] > 0
    assert moved[0.0] == 0.0 and moved[1.0] > 0


async def test_pg_coef_zero_is_the_same_run_without_the_policy_gradient(tmp_path: Path) -> None:
    """``rl.pg_coef=0`` skips the rollouts and updates on the BC term alone: its weights equal
    those of the same run with the policy gradient whose groups all carried no advantage (the
    random model fails every episode), and its steps log no rollout figure."""
    data = tmp_path / "demos.jsonl"
    write_trajectories(make_trajectories(4, seed=3), data)
    weights, rows = {}, {}
    for pg in (1.0, 0.0):
        run = tmp_path / f"pg{pg}"
        cfg = _one_step(run, f"bc.data={data}", "rl.bc_coef=1.0", "rl.bc_batch_size=3")
        cfg = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, steps=2, pg_coef=pg))
        res, stage, rollouts = await _step_rollouts(cfg, run)
        assert (len(rollouts) > 0) == (pg > 0)  # the control wrote no episode
        if pg:
            assert all(t.reward == 0.0 for t in rollouts)  # no advantage: BC term alone
        model, _ = load_policy(dataclasses.replace(cfg, init_from=str(res.checkpoint / "model")))
        weights[pg] = [p.detach().clone() for p in model.parameters()]
        rows[pg] = [r for r in read_metrics(stage / "metrics.jsonl") if "train/bc_loss" in r]
    assert len(rows[0.0]) == len(rows[1.0]) == 2
    assert all(r.get("rollout/skipped") == 1.0 for r in rows[0.0])
    assert not any("rollout/success" in r for r in rows[0.0])
    assert all("rollout/success" in r for r in rows[1.0])
    for a, b in zip(rows[0.0], rows[1.0], strict=True):
        assert a["train/bc_loss"] == pytest.approx(b["train/bc_loss"], rel=1e-6)
    start = [p.detach() for p in load_policy(cfg)[0].parameters()]
    moved = sum(float((a - s).abs().sum()) for a, s in zip(weights[0.0], start, strict=True))
    assert moved > 0
    for a, b in zip(weights[0.0], weights[1.0], strict=True):
        assert torch.allclose(a, b, atol=1e-6)


async def test_time_budget_stops_early_with_a_final_eval(tmp_path: Path) -> None:
    model = make_tiny_model(tmp_path / "model")
    cfg = _config(
        tmp_path,
        model,
        "env.max_turns=1",
        "rollout.max_new_tokens=4",
        "rl.steps=5",
        "rl.time_budget_min=0.0001",  # any step overruns it: stop after the first
        "tasks.difficulty=1-2",
    )
    res = await train_rl(cfg, progress=False)
    assert res.steps == 1
    assert res.checkpoint.name == "step-000001"
    assert [h["step"] for h in res.eval_history] == [0, 1]  # the final eval still ran
    # the stage's clock: the last checkpoint keeps it (saved after the final evaluation), the
    # result adds the closing; it starts after the policy loaded, so within this process's time
    from webagent_r1.train.checkpoint import load_trainer_state

    kept = load_trainer_state(res.checkpoint)["wall_s"]
    assert 0 < kept < res.stage_s <= res.wall_s


async def test_sampled_evaluation_with_pass_at_k(tmp_path: Path) -> None:
    """``rl.eval_samples=2``: two sampled episodes per eval task, pass@2 logged; the samples
    of a task differ (greedy would repeat itself) and every evaluation draws the same seeds."""
    model = make_tiny_model(tmp_path / "model")
    cfg = _config(
        tmp_path,
        model,
        "env.max_turns=1",
        "rollout.max_new_tokens=6",
        "rl.steps=1",
        "rl.eval_tasks=2",
        "rl.eval_samples=2",
        "rl.eval_temperature=1.0",
        "rl.drop_equal_groups=true",  # the random model fails: no update, weights unchanged
        "tasks.difficulty=1-2",
    )
    res = await train_rl(cfg, progress=False)
    stage = tmp_path / "run" / "rl"
    first = read_trajectories(stage / "eval" / "step-000000.jsonl")
    last = read_trajectories(stage / "eval" / "step-000001.jsonl")
    assert len(first) == 4 and len({t.task_id for t in first}) == 2
    by_task: dict[str, list[list[int]]] = {}
    for t in first:
        by_task.setdefault(t.task_id, []).append(t.turns[0].completion_ids)
    assert all(a != b for a, b in by_task.values())
    # no update happened (all groups equal): same weights, same seeds, same samples
    key = sorted((t.task_id, t.turns[0].completion_ids) for t in first)
    assert key == sorted((t.task_id, t.turns[0].completion_ids) for t in last)
    assert all(h["eval/pass_at_2"] == 0.0 and h["eval/episodes"] == 4 for h in res.eval_history)
    assert res.eval_history[-1]["step"] == 1


async def test_dynamic_curriculum_collects_extra_groups_and_keeps_its_state(
    tmp_path: Path,
) -> None:
    """The random model fails every episode: no group is mixed, so ``dynamic`` rolls out its
    one allowed extra group, logs it, and the checkpoint keeps the success estimates."""
    from webagent_r1.train.checkpoint import load_trainer_state

    cfg = _one_step(
        tmp_path,
        "rl.curriculum=dynamic",
        "rl.dynamic_max_extra=1",
        "tasks.difficulty=1-2",
    )
    res, stage, rollouts = await _step_rollouts(cfg, tmp_path)
    assert len(rollouts) == 4 and len({t.task_id for t in rollouts}) == 2  # 2 groups of 2
    [row] = [r for r in read_metrics(stage / "metrics.jsonl") if "curriculum/mixed_frac" in r]
    assert row["curriculum/extra_groups"] == 1 and row["curriculum/mixed_frac"] == 0.0
    assert row["curriculum/discarded"] == 2 and row["train/groups_used"] == 0
    state = load_trainer_state(res.checkpoint)["curriculum"]
    assert state == json.loads(json.dumps(state))  # plain JSON-able data
    assert any(k.startswith("curriculum/p/") for k in row)


async def test_min_mixed_groups_rolls_out_whole_rounds_before_one_update(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``rl.min_mixed_groups``: the random model mixes no group, so the step rolls out
    further rounds of B tasks in real browsers until the cap, all logged as one step; the
    rounds count a group as mixed by the rewards it trains on."""
    from webagent_r1.rollout.collect import Group  # heavy: only this test builds a group
    from webagent_r1.train import rl as rl_module  # heavy: to wrap the trainer's collect_step

    seen: list[Any] = []
    real = rl_module.collect_step

    async def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return await real(*args, **kwargs)

    monkeypatch.setattr(rl_module, "collect_step", recording)
    cfg = _one_step(
        tmp_path,
        "rl.curriculum=mixed",
        "rl.min_mixed_groups=1",
        "rl.dynamic_max_extra=4",
        "rl.reward_requires_exit=true",
        "tasks.difficulty=1-2",
    )
    _, stage, rollouts = await _step_rollouts(cfg, tmp_path)
    # B = 1 task: the first round and four more, each its own task
    assert len(rollouts) == 10 and len({t.task_id for t in rollouts}) == 5
    [row] = [r for r in read_metrics(stage / "metrics.jsonl") if "curriculum/mixed_frac" in r]
    assert row["curriculum/rounds"] == 5 and row["curriculum/extra_groups"] == 4
    assert row["curriculum/discarded"] == 5 and row["train/groups_used"] == 0
    # graded [1, 0], but the success ran out of turns: trained [0, 0], not mixed
    lone = [dataclasses.replace(rollouts[0], reward=1.0, status="max_turns"), rollouts[1]]
    assert seen[0]["rewards_of"](Group(None, lone)) == [0.0, 0.0]  # type: ignore[arg-type]


async def test_one_rl_step_on_miniwob_training_seeds(tmp_path: Path) -> None:
    """The trainer takes its tasks, pages and evaluator from the task source: one M-GRPO
    step on MiniWoB++ training seeds, evaluated on validation seeds (``rl.eval_split``)."""
    cfg = _one_step(
        tmp_path,
        "tasks.source=miniwob",
        "tasks.miniwob.tasks=[click-button]",
        "rl.drop_equal_groups=false",
    )
    _, stage, rollouts = await _step_rollouts(cfg, tmp_path)
    assert len(rollouts) == 2
    assert all(t.status in ("done", "max_turns") for t in rollouts)
    [train_id] = {t.task_id for t in rollouts}  # one task, a group of 2
    name, seed = train_id.rsplit("/", 1)
    assert "click-button" in name and int(seed) >= cfg.tasks.miniwob.train_seeds[0]
    [ev] = read_trajectories(stage / "eval" / "step-000000.jsonl")
    val = range(*cfg.tasks.miniwob.val_seeds)
    assert int(ev.task_id.rsplit("/", 1)[1]) in val  # a validation seed, the default split


class ExpertForSome(Engine):
    """A policy over the trainer's own HF engine that lets the scripted expert play every
    other episode of a task (it succeeds) and the engine the rest (the random model fails),
    so every group of two has mixed rewards. The expert's answers are stamped with the
    engine's weight version, as the engine's own are; ``use_expert=False`` leaves every
    episode to the engine."""

    def __init__(self, engine: Any, tokenizer: Any, use_expert: bool = True) -> None:
        from webagent_r1.policy.expert import ExpertPolicy
        from webagent_r1.rollout.collect import EnginePolicy

        self.engine = engine
        self.model = engine.model  # the trainer's model: WeightSync sees a shared engine
        self.lock = engine.lock
        self.expert = ExpertPolicy(tokenizer)
        self.sampler = EnginePolicy(engine)
        self.use_expert = use_expert
        self.started: Counter[str] = Counter()

    @property
    def weight_version(self) -> int:
        return self.engine.weight_version

    @weight_version.setter
    def weight_version(self, version: int) -> None:
        self.engine.weight_version = version

    def begin(self, task: Task) -> tuple[str, Any]:
        k = self.started[str(task.task_id)]
        self.started[str(task.task_id)] += 1
        if self.use_expert and k % 2 == 0:
            return ("expert", self.expert.begin(task))
        return ("engine", None)

    async def act(self, states: list[Any], inputs: list[Any], params: Any) -> list[Completion]:
        out: list[Completion] = []
        for (kind, state), turn in zip(states, inputs, strict=True):
            if kind == "expert":
                [c] = await self.expert.act([state], [turn], params)
                out.append(dataclasses.replace(c, weight_version=self.engine.weight_version))
            else:
                out.extend(await self.sampler.act([state], [turn], params))
        return out

    def end(self, state: tuple[str, Any]) -> None:
        if state[0] == "expert":
            self.expert.end(state[1])

    async def generate(self, prompts: list[list[int]], params: Any) -> list[Completion]:
        return await self.engine.generate(prompts, params)

    def close(self) -> None:
        self.engine.close()


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


@pytest.mark.parametrize("use_expert", [True, False])
async def test_an_rl_step_on_a_mixed_group_moves_the_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, use_expert: bool
) -> None:
    """One M-GRPO step in real Chromium where the expert wins one episode of the group and
    the random model loses the other: a real gradient step is taken (the weights move, and
    the advantage-weighted log-likelihood of the group's actions rises); with both episodes
    lost the group is skipped and the weights stay as they were."""
    import webagent_r1.train.rl as rl_module

    model = make_tiny_model(tmp_path / "model")
    make_engine = rl_module.generation_engine

    def mixed(cfg: Any, m: Any, tok: Any, source: str | None = None) -> ExpertForSome:
        return ExpertForSome(make_engine(cfg, m, tok, source), tok, use_expert)

    monkeypatch.setattr(rl_module, "generation_engine", mixed)
    cfg = _config(
        tmp_path,
        model,
        "env.max_turns=4",
        "rollout.max_new_tokens=6",
        "rl.steps=1",
        "rl.lr=1e-4",
        "tasks.difficulty=1-2",
        "model.autocast_bf16=false",
    )
    res = await train_rl(cfg, progress=False)
    stage = tmp_path / "run" / "rl"
    rollouts = read_trajectories(stage / "rollouts" / "step-000000-rank0.jsonl")
    assert len(rollouts) == 2 and all(t.status != "env_error" for t in rollouts)
    assert all(u.weight_version == 0 for t in rollouts for u in t.turns)  # sampled from step 0
    [row] = [r for r in read_metrics(stage / "metrics.jsonl") if "train/groups_used" in r]
    assert row["train/turns_dropped_stale"] == 0
    # mean turns by outcome: the won episode's, the lost ones' (no key for an absent outcome)
    won = [len(t.turns) for t in rollouts if t.reward == 1.0]
    lost = [len(t.turns) for t in rollouts if t.reward != 1.0]
    assert row["rollout/turns_failure"] == pytest.approx(sum(lost) / len(lost))
    assert row["rollout/turns"] == pytest.approx(sum(won + lost) / len(rollouts))
    if won:
        assert row["rollout/turns_success"] == pytest.approx(sum(won) / len(won))
    else:
        assert "rollout/turns_success" not in row
    before, after = _weights(model), _weights(res.checkpoint / "model")
    moved = max(float((after[k] - before[k]).abs().max()) for k in before)
    if not use_expert:
        assert [t.reward for t in rollouts] == [0.0, 0.0]
        assert row["train/groups_used"] == 0 and row["train/groups_skipped_equal"] == 1
        assert moved == 0.0
        return
    assert sorted(t.reward for t in rollouts) == [0.0, 1.0]
    assert row["rollout/success"] == 0.5 and row["train/groups_used"] == 1
    assert row["train/ratio_mean"] == pytest.approx(1.0, abs=1e-5)  # μ = 1, π_old recomputed
    assert moved > 0.0
    # the update climbs the objective it was given: Σ_i A_i mean_j mean_t log π(a_ijt)
    score = {}
    for name, folder in (("before", model), ("after", res.checkpoint / "model")):
        policy, _ = load_policy(tiny_config(folder))
        score[name] = _objective(policy, rollouts)
    assert score["after"] > score["before"], score


def _objective(model: Any, trajs: list[Trajectory]) -> float:
    """Σ_i A_i (1/|τ_i|) Σ_j mean_t log π(a_ijt) of a group of two (A = ±1)."""
    total = 0.0
    for traj in trajs:
        samples = turn_samples(traj)
        mb = collate(samples, list(range(len(samples))), pad_id=1)
        with torch.no_grad():
            logp = completion_logprobs(model, mb, autocast_bf16=False)  # (N,)
        per_turn = [float(logp[mb.sample == k].mean()) for k in range(len(samples))]
        total += (1.0 if traj.reward else -1.0) * sum(per_turn) / len(per_turn)
    return total
