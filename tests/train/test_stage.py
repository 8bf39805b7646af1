"""The stage loop (``train/stage.py``) without a model: what runs when, in which order."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from webagent_r1.config import load_config
from webagent_r1.train.checkpoint import load_trainer_state
from webagent_r1.train.metrics import read_metrics
from webagent_r1.train.stage import Stage


class Recorder(Stage):
    """A stage whose steps, evaluations, saves and reports only record themselves."""

    def __init__(
        self, tmp: Path, *overrides: str, stop_after: int | None = None, awaits: bool = False
    ) -> None:
        cfg = load_config(
            None,
            [f"run_dir={tmp}", "train.tensorboard=false", "train.keep_checkpoints=100", *overrides],
        )
        super().__init__(cfg, cfg.bc, "bc", progress=False)
        self.stop_after = stop_after
        self.awaits = awaits
        self.calls: list[str] = []
        self.lrs: list[float] = []

    async def setup(self) -> None:
        self.opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        self.model = SimpleNamespace(save_pretrained=lambda p: Path(p).mkdir(parents=True))
        self.open_logger()

    async def begin(self) -> None:
        self.calls.append("begin")

    async def step(self, step: int) -> dict[str, float]:
        if self.awaits:
            await asyncio.sleep(0)
        self.calls.append(f"step {step}")
        self.lrs.append(self.opt.param_groups[0]["lr"])
        return {"train/loss": float(step)}

    async def evaluate(self, step: int) -> dict[str, float]:
        self.calls.append(f"eval {step}")
        return {"eval/score": 10.0 * step}

    def report(self, done: int, metrics: dict[str, float]) -> None:
        self.calls.append(f"report {done}")

    def over_budget(self, done: int) -> bool:
        self.calls.append(f"budget {done}")
        return self.stop_after is not None and done >= self.stop_after

    def save(self, step: int) -> None:
        self.calls.append(f"save {step}")
        super().save(step)

    async def close(self) -> None:
        self.calls.append("close")
        await super().close()


def test_steps_evaluations_and_checkpoints_on_their_cadence(tmp_path: Path) -> None:
    overrides = ("bc.steps=4", "bc.eval_every=2", "train.checkpoint_every=3")
    stage = Recorder(tmp_path, *overrides, "bc.warmup_steps=2", "bc.lr=0.5")
    final = stage.run_sync()
    assert stage.calls == [
        "begin",
        "step 0",
        "budget 1",
        "report 1",
        "step 1",
        "budget 2",
        "report 2",
        "eval 2",
        "step 2",
        "budget 3",
        "report 3",
        "save 3",
        "step 3",  # the last step: no budget check (a collective under several processes)
        "report 4",
        "eval 4",
        "save 4",
        "close",
    ]
    assert final == tmp_path / "bc" / "checkpoints" / "step-000004"
    assert stage.lrs == [0.25, 0.5, 0.5, 0.5]  # linear warm-up over 2 steps, then bc.lr
    rows = read_metrics(tmp_path / "bc" / "metrics.jsonl")
    # an evaluation is a row of its own after its step's
    assert [(r["step"], sorted(k for k in r if "/" in k)) for r in rows] == [
        (1, ["train/loss"]),
        (2, ["train/loss"]),
        (2, ["eval/score"]),
        (3, ["train/loss"]),
        (4, ["train/loss"]),
        (4, ["eval/score"]),
    ]
    state = load_trainer_state(final)
    assert state["step"] == 4 and {"rng", "optimizer"} <= set(state)


def test_an_evaluation_can_join_its_step_row(tmp_path: Path) -> None:
    stage = Recorder(tmp_path, "bc.steps=2", "bc.eval_every=0")
    stage.eval_joins_step = True
    stage.run_sync()
    assert stage.calls == [
        "begin",
        "step 0",
        "budget 1",
        "report 1",
        "step 1",
        "eval 2",  # before its step is logged and reported
        "report 2",
        "save 2",
        "close",
    ]
    rows = read_metrics(tmp_path / "bc" / "metrics.jsonl")
    assert [r.get("eval/score") for r in rows] == [None, 20.0]


def test_over_budget_makes_the_step_the_last(tmp_path: Path) -> None:
    stage = Recorder(tmp_path, "bc.steps=5", "bc.eval_every=0", stop_after=2)
    final = stage.run_sync()
    assert stage.calls[-5:] == ["budget 2", "report 2", "eval 2", "save 2", "close"]
    assert "step 2" not in stage.calls
    assert final.name == "step-000002"


def test_nothing_to_do_saves_the_start_as_final(tmp_path: Path) -> None:
    stage = Recorder(tmp_path, "bc.steps=0")
    final = stage.run_sync()
    assert stage.calls == ["begin", "close", "save 0"]
    assert final.name == "step-000000"


def test_run_sync_refuses_a_stage_that_awaits(tmp_path: Path) -> None:
    stage = Recorder(tmp_path, "bc.steps=1", awaits=True)
    with pytest.raises(RuntimeError, match="awaited"):
        stage.run_sync()
    assert stage.calls == ["begin", "close"]  # closed on the way out


async def test_run_in_an_event_loop_awaits_the_steps(tmp_path: Path) -> None:
    stage = Recorder(tmp_path, "bc.steps=1", awaits=True)
    final = await stage.run()
    assert stage.calls == ["begin", "step 0", "report 1", "eval 1", "save 1", "close"]
    assert final.name == "step-000001"
