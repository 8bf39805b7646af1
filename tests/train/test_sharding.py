"""Sharded training (``train.sharding: fsdp``, FSDP2 on CPU with gloo).

- config checks and the optimizer-format guard (fast, in process);
- M-GRPO level, in 1- and 2-process gloo groups (torch.multiprocessing): an update of the
  sharded model with uneven micro-batch counts per process equals the one-process update of
  the whole batch, and ``WeightSync`` pushes the gathered weights into each process's own HF
  engine copy (``generation_engine``), which then samples;
- BC under ``accelerate launch`` with 2 processes and sharding ends with the weights of the
  1-process run, its ``model/`` loads with ``from_pretrained``, and a run resumed from its
  step-2 checkpoint (sharded optimizer state) ends exactly where it did.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.support.tiny import make_tiny_model, make_trajectories
from tests.train.launch import launch_two
from webagent_r1.config import ConfigError, TrainConfig, load_config
from webagent_r1.rollout.trajectories import turn_samples, write_trajectories


def test_sharding_config_is_checked() -> None:
    assert TrainConfig().sharding == "none"
    assert TrainConfig(sharding="fsdp").sharding == "fsdp"
    with pytest.raises(ConfigError, match="none, fsdp"):
        TrainConfig(sharding="zero3")
    with pytest.raises(ConfigError, match="lora_r=0"):
        TrainConfig(sharding="fsdp", lora_r=8)
    with pytest.raises(ConfigError, match="trainable_layers=0"):
        TrainConfig(sharding="fsdp", trainable_layers=1)


def test_resuming_with_the_other_sharding_says_how_to_fix_it(tmp_path: Path) -> None:
    from webagent_r1.train.checkpoint import restore_optimizer

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    with pytest.raises(ConfigError, match="train.sharding=fsdp"):
        restore_optimizer(tmp_path, {"sharded_optimizer": "optimizer"}, model, opt)
    restore_optimizer(tmp_path, {"optimizer": opt.state_dict()}, model, opt)  # same layout: ok


def test_grad_norm_and_clip_equals_clip_grad_norm() -> None:
    from webagent_r1.train.dist import grad_norm_and_clip

    torch.manual_seed(0)
    a, b = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    a(torch.randn(5, 4)).pow(2).sum().backward()
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        q.grad = p.grad.clone()
    ref = float(torch.nn.utils.clip_grad_norm_(list(a.parameters()), 0.1))
    assert grad_norm_and_clip(list(b.parameters()), 0.1) == pytest.approx(ref)
    for p, q in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)


# ---------------------------------------------------------------- M-GRPO + weight push


def _rl_batches(world: int) -> tuple[object, list[object]]:
    """The whole batch and each process's share (uneven: rank 0 gets most trajectories)."""
    from webagent_r1.train.rl import RLBatch

    trajs = make_trajectories(7, seed=11)
    advs = [1.0, -0.5, 0.25, -1.0, 0.75, -0.25, 0.5]

    def batch(idx: list[int]) -> RLBatch:
        out = RLBatch()
        for j, i in enumerate(idx):
            for s in turn_samples(trajs[i], advs[i]):
                out.samples.append(s)
                out.traj.append(j)
        out.n_traj = len(idx)
        return out

    whole = batch(list(range(7)))
    shares = [list(range(6)), [6]] if world == 2 else [list(range(7))]
    return whole, [batch(s) for s in shares]


def _worker(rank: int, world: int, port: int, folder: str, ckpt: bool = False) -> None:
    import torch.distributed as dist

    from webagent_r1.policy.base import SamplingParams
    from webagent_r1.policy.hf import load_tokenizer
    from webagent_r1.policy.trainable import load_policy
    from webagent_r1.train.dist import Dist, build_optimizer
    from webagent_r1.train.rl import generation_engine, mgrpo_update
    from webagent_r1.train.sharding import is_sharded, shard_model
    from webagent_r1.train.weight_sync import WeightSync

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    cfg = load_config(
        None,
        [
            f"model.name={folder}",
            "model.device=cpu",
            "model.autocast_bf16=false",
            "train.sharding=fsdp",
            "train.token_budget=64",  # several micro-batches: rank 1 pads to rank 0's count
            "train.max_grad_norm=0.5",
            "rl.mu=2",
            "rl.lr=1e-2",
            f"train.gradient_checkpointing={str(ckpt).lower()}",
        ],
    )
    whole, shares = _rl_batches(world)
    pad_id = load_tokenizer(folder).pad_token_id

    # the reference: one process, no sharding, the whole batch
    torch.manual_seed(0)
    ref, _ = load_policy(cfg, folder)
    ref_opt = build_optimizer(list(ref.parameters()), cfg.rl.lr, cfg.train)
    ref_m = mgrpo_update(ref, ref_opt, whole, cfg, pad_id)

    model, tok = load_policy(cfg, folder)
    model = shard_model(model)
    assert is_sharded(model)
    opt = build_optimizer(list(model.parameters()), cfg.rl.lr, cfg.train)
    engine = generation_engine(cfg, model, tok, source=folder)
    try:
        sync = WeightSync(engine, model, rank=rank, every_rank=True)
        assert not sync.shared and engine.model is not model.module
        m = mgrpo_update(model, opt, shares[rank], cfg, pad_id, Dist(rank, world))
        assert m["train/loss"] == pytest.approx(ref_m["train/loss"], abs=1e-5)
        assert m["train/grad_norm"] == pytest.approx(ref_m["train/grad_norm"], rel=1e-4)
        pushed = asyncio.run(sync.push(1))
        assert sync.history[-1].pushed and pushed["sync/bytes"] > 0
        assert engine.weight_version == 1
        want = ref.state_dict()
        got = engine.model.state_dict()
        assert got.keys() == want.keys()
        for k in want:
            assert torch.allclose(got[k], want[k], atol=1e-5), f"{k}: pushed weights differ"
        start = load_policy(cfg, folder)[0].state_dict()
        assert any(not torch.equal(got[k], v) for k, v in start.items())  # it did train
        # only rank 0 pushes to a shared service, but every process takes part in the gather
        sync0 = WeightSync(engine, model, rank=rank, every_rank=False, version=1)
        asyncio.run(sync0.push(2))
        assert sync0.history[-1].pushed == (rank == 0)
        assert engine.weight_version == (2 if rank == 0 else 1)
        out = engine.generate_sync([[3, 4, 5]], SamplingParams(max_new_tokens=2, seed=0))
        assert len(out[0].token_ids) >= 1  # the copy samples
    finally:
        engine.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    ("world", "ckpt"), [(1, False), (2, False), (2, True)], ids=["1", "2", "2-checkpointing"]
)
def test_sharded_mgrpo_update_and_weight_push(tmp_path: Path, world: int, ckpt: bool) -> None:
    """Sharded M-GRPO update (and with gradient checkpointing, which the update keeps on)
    equal to one unsharded process's on the whole batch; the weights pushed to the copy."""
    import torch.multiprocessing as mp

    make_tiny_model(tmp_path / "model")
    mp.spawn(_worker, args=(world, _free_port(), str(tmp_path / "model"), ckpt), nprocs=world)


# ---------------------------------------------------------------- BC under accelerate


def _overrides(tmp: Path, run: str) -> list[str]:
    return [
        f"model.name={tmp / 'model'}",
        "model.device=cpu",
        "model.autocast_bf16=false",
        f"bc.data={tmp / 'demos.jsonl'}",
        f"run_dir={tmp / run}",
        "bc.steps=4",
        "bc.batch_size=6",
        "bc.lr=3e-3",
        "bc.heldout_fraction=0.1",  # the held-out loss is a collective forward when sharded
        "train.token_budget=64",  # several micro-batches per process, uneven counts
        "train.checkpoint_every=2",
        "train.tensorboard=false",
    ]


def _ckpt(tmp: Path, run: str, step: int) -> Path:
    return tmp / run / "bc" / "checkpoints" / f"step-{step:06d}"


def _launch(tmp: Path, run: str, port: int, *extra: str) -> None:
    out = launch_two(port, "sft", *_overrides(tmp, run), "train.sharding=fsdp", *extra)
    assert out.stdout.count("BC done") == 2, "both processes must run the training loop"


def test_fsdp_two_processes_match_one_and_resume(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    make_tiny_model(tmp_path / "model")
    write_trajectories(make_trajectories(24, seed=5), tmp_path / "demos.jsonl")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    one = [sys.executable, "-m", "webagent_r1.cli", "sft", *_overrides(tmp_path, "one")]
    subprocess.run(one, check=True, env=env, capture_output=True)
    _launch(tmp_path, "fsdp", _free_port())

    a = load_file(_ckpt(tmp_path, "one", 4) / "model" / "model.safetensors")
    final = _ckpt(tmp_path, "fsdp", 4)
    b = load_file(final / "model" / "model.safetensors")
    start = load_file(tmp_path / "model" / "model.safetensors")
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-5), f"{k}: sharded 2 processes differ from 1"
    assert any(not torch.equal(start[k], a[k]) for k in a)
    # an ordinary Hugging Face folder; the optimizer state is sharded, one file per process
    loaded = AutoModelForCausalLM.from_pretrained(final / "model")
    assert torch.equal(loaded.state_dict()["lm_head.weight"], b["lm_head.weight"])
    assert (final / "model" / "tokenizer_config.json").is_file()
    assert len(list((final / "optimizer").glob("*.distcp"))) == 2
    assert "optimizer" not in torch.load(final / "trainer_state.pt", weights_only=False)

    # resume from the step-2 checkpoint (weights from model/, optimizer from its shards)
    ckpts = tmp_path / "resumed" / "bc" / "checkpoints"
    ckpts.mkdir(parents=True)
    shutil.copytree(_ckpt(tmp_path, "fsdp", 2), ckpts / "step-000002")
    _launch(tmp_path, "resumed", _free_port(), "--resume")
    c = load_file(_ckpt(tmp_path, "resumed", 4) / "model" / "model.safetensors")
    for k in b:
        assert torch.equal(b[k], c[k]), f"{k}: the resumed run differs"
