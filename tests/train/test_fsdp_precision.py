"""FSDP2 mixed precision (``train.sharding: fsdp`` under bf16), on CPU with a one-process gloo
group: the layers gather and compute bf16 weights, the shards and their gradients stay fp32,
and the logits match the unsharded model's under bf16 autocast."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.support.tiny import make_tiny_model
from webagent_r1.train import stage as stage_mod
from webagent_r1.train.sharding import is_sharded, mixed_precision_policy, shard_model


def test_the_policy_is_bf16_weights_and_fp32_reduction() -> None:
    policy = mixed_precision_policy(True)
    assert policy.param_dtype == torch.bfloat16 and policy.reduce_dtype == torch.float32
    assert mixed_precision_policy(False) is None


def _inputs() -> tuple[torch.Tensor, ...]:
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 1, 1]])  # (B, T), right-padded
    mask = (ids != 1).long()
    rows, cols = torch.tensor([0, 0, 1]), torch.tensor([3, 4, 2])  # (N,)
    return ids, mask, rows, cols


def test_sharded_layers_compute_in_bf16_and_keep_fp32_shards(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    from webagent_r1.train.batching import completion_logits

    folder = make_tiny_model(tmp_path / "m")
    plain = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    ref = completion_logits(plain, *_inputs(), autocast_bf16=True)  # (N, V)

    model = shard_model(AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), True)
    assert is_sharded(model)
    seen: list[torch.dtype] = []
    for layer in model.module.model.layers:
        layer.mlp.down_proj.register_forward_pre_hook(lambda m, a: seen.append(m.weight.dtype))
    logits = model(*_inputs(), autocast_bf16=True)  # (N, V)
    assert seen == [torch.bfloat16, torch.bfloat16]  # gathered and computed in bf16
    assert torch.allclose(logits.float(), ref.float(), atol=0.05)
    logits.float().logsumexp(-1).sum().backward()
    params = list(model.parameters())
    assert all(type(p).__name__ == "DTensor" for p in params)
    assert {p.dtype for p in params} == {torch.float32}  # the optimizer's master weights
    assert {p.grad.dtype for p in params if p.grad is not None} == {torch.float32}


@pytest.mark.parametrize("bf16", [True, False])
def test_stages_shard_with_the_runs_precision(monkeypatch: pytest.MonkeyPatch, bf16: bool) -> None:
    from webagent_r1.train.batching import CompletionLM

    got: list[bool] = []
    tiny = torch.nn.Linear(2, 2)
    monkeypatch.setattr(stage_mod, "empty_policy", lambda cfg, path: (tiny, None))
    monkeypatch.setattr(stage_mod, "autocast_enabled", lambda mcfg: bf16)
    monkeypatch.setattr(
        stage_mod,
        "load_sharded_policy",
        lambda cfg, path, bf16, model: got.append(bf16) or CompletionLM(model),
    )
    from webagent_r1.config import load_config

    cfg = load_config(None, ["train.sharding=fsdp", "model.device=cpu"])
    s = stage_mod.Stage(cfg, cfg.bc, "bc")
    s.build_policy(None, 1e-3)
    assert got == [bf16]
