"""Sharded loading (``train/fsdp_load.py``) in a 2-process gloo group on CPU.

- the policy: rank 0 alone calls the loader (rank 1 builds on ``meta`` and never reads a
  weight file), and the sharded model's full state, buffers and logits equal the model
  loaded normally; with tied embeddings the tie survives;
- the KL reference sharded like the policy: its log-probs of each process's share (uneven:
  rank 1 pads its micro-batches) equal the unsharded reference's.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch

from tests.support.tiny import make_tiny_model, make_trajectories
from webagent_r1.config import load_config
from webagent_r1.rollout.trajectories import turn_samples


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cfg(folder: str, *extra: str) -> object:
    return load_config(
        None,
        [
            f"model.name={folder}",
            "model.device=cpu",
            "model.autocast_bf16=false",
            "train.sharding=fsdp",
            "train.token_budget=64",  # several micro-batches: rank 1 pads to rank 0's count
            *extra,
        ],
    )


def _shares(rank: int) -> tuple[list[object], list[object]]:
    """All samples and this process's share (uneven: rank 0 has most of them)."""
    trajs = make_trajectories(5, seed=3)
    per = [turn_samples(t, 0.5) for t in trajs]
    mine = per[:4] if rank == 0 else per[4:]
    return [s for p in per for s in p], [s for p in mine for s in p]


def _worker(rank: int, world: int, port: int, folder: str) -> None:
    import torch.distributed as dist

    from webagent_r1.policy.trainable import load_policy
    from webagent_r1.train.dist import Dist
    from webagent_r1.train.fsdp_load import (
        empty_policy,
        load_sharded_policy,
        load_sharded_reference,
    )
    from webagent_r1.train.rl import _all_logprobs, _old_and_ref_logprobs
    from webagent_r1.train.sharding import full_state_dict, is_sharded

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        cfg = _cfg(folder, "rl.beta=0.1", "rl.old_logprobs=recompute")
        group = Dist(rank, world)
        calls: list[str | None] = []

        def counting_loader(c: object, path: str | None) -> tuple[object, object]:
            calls.append(path)
            return load_policy(c, path)

        skeleton, tok = empty_policy(cfg, folder)
        assert tok.pad_token_id is not None
        assert all(p.device.type == "meta" for p in skeleton.parameters())
        root = load_sharded_policy(cfg, folder, model=skeleton, loader=counting_loader)
        assert is_sharded(root)
        assert len(calls) == (1 if rank == 0 else 0), f"rank {rank} loaded {len(calls)} times"
        assert not any(p.device.type == "meta" for p in root.parameters())
        got = full_state_dict(root)
        want_model = load_policy(cfg, folder)[0]
        want = want_model.state_dict()
        assert got.keys() == want.keys()
        for k in want:
            assert torch.equal(got[k], want[k]), f"{k} differs from the normally loaded model"
        bufs = dict(want_model.named_buffers())
        for name, buf in root.module.named_buffers():
            assert torch.equal(buf, bufs[name]), f"buffer {name} not broadcast"
        inner = root.module
        if want_model.config.tie_word_embeddings:
            assert inner.lm_head.weight is inner.model.embed_tokens.weight
        # the forwards (rotary buffers included) agree: each process's uneven share
        _, mine = _shares(rank)
        pad = tok.pad_token_id
        a = _all_logprobs(want_model, mine, pad, 64, 1.0, False)
        b = _all_logprobs(root, mine, pad, 64, 1.0, False, group)
        assert a.shape == b.shape and torch.allclose(a, b, atol=1e-5)

        # the KL reference, sharded like the policy, against the unsharded one
        ref = load_sharded_reference(cfg, folder)
        assert is_sharded(ref) and not any(p.requires_grad for p in ref.parameters())
        assert not ref.training
        plain = load_policy(cfg, folder)[0].eval()
        _, ref_lp = _old_and_ref_logprobs(root, ref, mine, cfg, pad, 1.0, False, group)
        _, plain_lp = _old_and_ref_logprobs(want_model, plain, mine, cfg, pad, 1.0, False, Dist())
        assert ref_lp is not None and plain_lp is not None
        assert ref_lp.shape == plain_lp.shape and ref_lp.numel() > 0
        assert torch.allclose(ref_lp, plain_lp, atol=1e-5)
        # a process without samples still takes part in the reference's gathers
        _, none = _old_and_ref_logprobs(
            root, ref, mine if rank == 0 else [], cfg, pad, 1.0, False, group
        )
        assert (none is None) == (rank == 1)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_rank0_loads_and_the_shards_equal_a_normal_load(tmp_path: Path, tied: bool) -> None:
    """Rank 1 never calls the loader; policy and reference match the unsharded ones."""
    import torch.multiprocessing as mp

    make_tiny_model(tmp_path / "model", tie_word_embeddings=tied)
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path / "model")), nprocs=2)
