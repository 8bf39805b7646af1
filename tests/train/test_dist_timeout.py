"""Collectives that wait: ``dist.timeout_min`` reaches ``init_process_group``; gradients are
summed in place, bucket by bucket, to the same result as one flat buffer; shares are dealt
so that processes differ by at most one task."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
import torch
import torch.distributed as tdist

from tests.train.test_curriculum import group, make_tasks
from webagent_r1.config import ConfigError, load_config
from webagent_r1.train import stage as stage_mod
from webagent_r1.train.curriculum import Curriculum, collect_step
from webagent_r1.train.dist import Dist, grad_buckets


def _fake_group(monkeypatch: pytest.MonkeyPatch, seen: dict[str, Any]) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(tdist, "is_initialized", lambda: False)
    monkeypatch.setattr(tdist, "init_process_group", lambda **kw: seen.update(kw))
    monkeypatch.setattr(tdist, "get_backend", lambda *a: "gloo")
    monkeypatch.setattr(tdist, "get_rank", lambda *a: 1)
    monkeypatch.setattr(tdist, "get_world_size", lambda *a: 2)


def test_the_timeout_reaches_init_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    _fake_group(monkeypatch, seen)
    d = Dist.init()
    assert seen == {"backend": "gloo", "timeout": datetime.timedelta(minutes=60)}
    assert (d.rank, d.world, d.device) == (1, 2, torch.device("cpu"))
    d = Dist.init(timeout_min=5, grad_bucket_mb=8)
    assert seen["timeout"] == datetime.timedelta(minutes=5) and d.grad_bucket_mb == 8


def test_stages_take_the_timeout_from_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    got: list[tuple[int, int]] = []
    monkeypatch.setattr(stage_mod.Dist, "init", classmethod(lambda cls, t, b: got.append((t, b))))
    cfg = load_config(None, ["dist.timeout_min=90", "dist.grad_bucket_mb=64"])
    stage_mod.Stage(cfg, cfg.bc, "bc")
    assert got == [(90, 64)]
    assert load_config(None, []).dist.timeout_min == 60
    with pytest.raises(ConfigError, match="dist.timeout_min must be >= 1"):
        load_config(None, ["dist.timeout_min=0"])


def _old_all_reduce_grads(params: list[torch.nn.Parameter], reduce: Any) -> None:
    """What ``all_reduce_grads`` did before buckets: one flat copy, then per-parameter clones."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    reduce(flat)
    i = 0
    for p, g in zip(params, grads, strict=True):
        n = g.numel()
        p.grad = flat[i : i + n].view_as(p).clone()
        i += n


def _params(seed: int) -> list[torch.nn.Parameter]:
    g = torch.Generator().manual_seed(seed)
    shapes = [(300, 200), (7,), (1000, 300), (5, 3), (64, 64), (11,)]
    ps = [torch.nn.Parameter(torch.zeros(s)) for s in shapes]
    for i, p in enumerate(ps):
        if i != 3:  # one parameter without a gradient (e.g. unused this step)
            p.grad = torch.randn(p.shape, generator=g)
    return ps


def test_bucketed_in_place_sum_equals_the_flat_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # the other process holds gradients 0.5 x ours: the sum is 1.5 x ours
    sizes: list[int] = []

    def fake_all_reduce(t: torch.Tensor, *a: Any, **k: Any) -> None:
        sizes.append(t.numel() * t.element_size())
        t.mul_(1.5)

    old, new = _params(0), _params(0)
    _old_all_reduce_grads(old, fake_all_reduce)
    sizes.clear()
    monkeypatch.setattr(tdist, "all_reduce", fake_all_reduce)
    before = [p.grad for p in new]
    Dist(rank=0, world=2, grad_bucket_mb=1).all_reduce_grads(new)
    for a, b in zip(old, new, strict=True):
        assert torch.equal(a.grad, b.grad)
    assert all(p.grad is g for p, g in zip(new, before, strict=True) if g is not None)  # in place
    limit = 2**20
    # (1000, 300) fp32 is 1.2 MB: reduced where it lies; every other buffer within 1 MB
    assert sorted(sizes, reverse=True)[0] == 1000 * 300 * 4
    assert all(s <= limit for s in sizes if s != 1000 * 300 * 4) and len(sizes) >= 3


def test_grad_buckets_keep_order_dtype_and_limit() -> None:
    a, b, c = torch.zeros(10), torch.zeros(10), torch.zeros(10, dtype=torch.bfloat16)
    big = torch.zeros(100)
    assert [[id(t) for t in bk] for bk in grad_buckets([a, b, c, big, a], 80)] == [
        [id(a), id(b)],  # 40 + 40 bytes
        [id(c)],  # another dtype starts a bucket
        [id(big)],  # larger than the limit: alone
        [id(a)],
    ]
    assert grad_buckets([], 80) == []


async def test_every_process_gets_a_share_within_one_task_of_the_others() -> None:
    # 3 processes, 16 tasks a step: shares 6, 5, 5; together every drawn task once
    tasks = make_tasks({"a": 40})
    shares: dict[int, list[str]] = {}
    for rank in range(3):
        cur = Curriculum(tasks, "uniform", seed=0)

        async def collect(mine: list, rnd: int, rank: int = rank) -> list:
            shares[rank] = [t.task_id for t in mine]
            return [group(t, [1.0, 0.0]) for t in mine]

        await collect_step(cur, 0, 16, collect, lambda v: [3 * x for x in v], rank, 3)
    sizes = sorted(len(s) for s in shares.values())
    assert sizes == [5, 5, 6] and max(sizes) - min(sizes) <= 1
    dealt = [t for s in shares.values() for t in s]
    assert len(dealt) == len(set(dealt)) == 16
