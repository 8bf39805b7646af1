"""Collectives build their tensors on the backend's device and refuse any other (gloo, CPU)."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as tdist
import torch.multiprocessing as mp

from webagent_r1.train.dist import Dist, backend_device


def test_backend_device_maps_each_backend_to_where_it_reduces() -> None:
    assert backend_device("nccl", 3) == torch.device("cuda", 3)
    assert backend_device("NCCL") == torch.device("cuda", 0)
    assert backend_device("gloo", 3) == torch.device("cpu")
    assert backend_device("mpi") == torch.device("cpu")
    assert backend_device("cpu:gloo,cuda:nccl", 1) == torch.device("cuda", 1)
    with pytest.raises(ValueError, match="unknown process-group backend"):
        backend_device("carrier-pigeon")


def test_one_process_needs_no_group_and_keeps_the_cpu() -> None:
    d = Dist()
    assert d.device == torch.device("cpu")
    assert d.all_reduce_sum([1.0, 2.0]) == [1.0, 2.0]
    assert d.all_reduce_max(4) == 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, port: int, out: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    tdist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        d = Dist(rank=rank, world=2, device=backend_device(tdist.get_backend()))
        res: dict = {"sum": d.all_reduce_sum([1.0, float(rank)]), "max": d.all_reduce_max(rank)}
        p = torch.nn.Parameter(torch.zeros(3))
        p.grad = torch.full((3,), float(rank + 1))
        d.all_reduce_grads([p])
        res["grad"] = p.grad.tolist()
        # a tensor on another device than the backend's (meta stands in for a GPU tensor
        # handed to gloo, or a CPU tensor handed to NCCL): refused before the collective
        q = torch.nn.Parameter(torch.zeros(3, device="meta"))
        try:
            d.all_reduce_grads([q])
            res["wrong_device"] = "accepted"
        except RuntimeError as e:
            res["wrong_device"] = str(e)
        tdist.barrier()
        out[rank] = res
    finally:
        tdist.destroy_process_group()


def test_gloo_collectives_run_on_cpu_and_refuse_a_wrong_device_tensor() -> None:
    with mp.Manager() as manager:
        out = manager.dict()
        mp.spawn(_worker, args=(_free_port(), out), nprocs=2, join=True)
        res = dict(out)
    for rank in (0, 1):
        assert res[rank]["sum"] == [2.0, 1.0]
        assert res[rank]["max"] == 1
        assert res[rank]["grad"] == [3.0, 3.0, 3.0]
        assert "reduces on cpu" in res[rank]["wrong_device"]
