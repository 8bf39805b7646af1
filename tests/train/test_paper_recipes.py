"""``configs/gpu/*-paper.yaml``: the paper's released training settings, and the evaluation
command in each header matches its evaluation script."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from webagent_r1.config import load_config

ROOT = Path(__file__).resolve().parents[2]
PAPER = sorted((ROOT / "configs" / "gpu").glob("*-paper.yaml"))


def test_both_models_have_a_paper_recipe() -> None:
    assert [p.name for p in PAPER] == ["llama3.1-8b-r1-paper.yaml", "qwen2.5-3b-r1-paper.yaml"]


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.name)
def test_the_papers_training_settings(path: Path) -> None:
    cfg = load_config(str(path), [])
    assert cfg.rollout.group_size == 4 and cfg.rollout.max_new_tokens == 1024
    assert cfg.train.max_grad_norm == 0.01 and list(cfg.train.adam_betas) == [0.9, 0.99]
    assert cfg.train.schedule == "constant" and cfg.rl.warmup_steps == 0
    assert cfg.rl.tasks_per_step == 16 and cfg.rl.steps == 40  # one epoch of 647 tasks
    assert cfg.rl.beta == 0.001 and cfg.rl.mu == 1 and cfg.env.max_turns == 15
    if cfg.train.lora_r == 0:
        assert cfg.rl.lr == 1e-6
    ours = load_config(str(path).replace("-paper", ""), [])
    assert cfg.model == ours.model and cfg.bc == ours.bc and cfg.vllm == ours.vllm


@pytest.mark.parametrize("path", PAPER, ids=lambda p: p.name)
def test_the_header_evaluates_as_the_paper_does(path: Path) -> None:
    [line] = [x for x in path.read_text().splitlines() if "webagent-r1 eval" in x]
    args = shlex.split(line.lstrip("# "))
    opts = dict(zip(args, args[1:], strict=False))  # each option and the word after it
    assert opts["--temperature"] == "1.0" and opts["--max-turns"] == "30"
    assert opts["-c"] == f"configs/gpu/{path.name}" and opts["--engine"] == "vllm"
    overrides = [a for a in args if "=" in a and not a.startswith("-")]
    cfg = load_config(str(path), overrides)
    assert cfg.rollout.max_new_tokens == 2048 and cfg.env.early_stop_after == 5
    for over in [line for line in path.read_text().splitlines() if "accelerate launch" in line]:
        assert f"-c configs/gpu/{path.name}" in over  # the full fine-tuning command runs this file
