"""The KL reference: the LoRA policy with its adapters disabled (no copy), else a frozen copy."""

from __future__ import annotations

from pathlib import Path

import torch

from webagent_r1.config import load_config
from webagent_r1.policy.trainable import load_policy
from webagent_r1.train.dist import frozen_copy_dtype, load_reference, reference_context


def _cfg(tiny_dir: Path, *extra: str):
    return load_config(None, [f"model.name={tiny_dir}", "model.device=cpu", *extra])


def test_lora_reference_is_the_policy_with_adapters_disabled(tiny_dir: Path) -> None:
    cfg = _cfg(tiny_dir, "train.lora_r=4", "rl.beta=0.01")
    model, _ = load_policy(cfg)
    ref = load_reference(cfg, None, model)
    assert ref is model  # no second copy of the weights
    with torch.no_grad():  # trained adapters: the policy now differs from its base
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    base, _ = load_policy(_cfg(tiny_dir))  # an independent reference: the base model
    ids = torch.tensor([[1, 5, 9, 13, 2]])
    with torch.no_grad():
        policy = model(input_ids=ids).logits
        with reference_context(model, ref):
            as_ref = ref(input_ids=ids).logits
        expected = base(input_ids=ids).logits
        after = model(input_ids=ids).logits
    assert torch.allclose(as_ref, expected, atol=1e-5)
    assert not torch.allclose(policy, expected, atol=1e-3)
    assert torch.equal(after, policy)  # adapters back on after the reference's forward


def test_full_fine_tuning_reference_is_a_frozen_copy(tiny_dir: Path) -> None:
    cfg = _cfg(tiny_dir, "rl.beta=0.01")
    model, _ = load_policy(cfg)
    ref = load_reference(cfg, None, model)
    assert ref is not model and not any(p.requires_grad for p in ref.parameters())
    assert next(ref.parameters()).dtype == torch.float32  # CPU: the policy's own dtype
    with reference_context(model, ref):  # nothing to disable
        pass


def test_frozen_copies_are_bf16_on_a_gpu_under_autocast() -> None:
    gpu = load_config(None, ["model.device=cuda", "model.autocast_bf16=true"]).model
    assert frozen_copy_dtype(gpu) == "bfloat16"
    cpu = load_config(None, ["model.device=cpu", "model.autocast_bf16=true"]).model
    assert frozen_copy_dtype(cpu) == cpu.dtype
    fp32 = load_config(None, ["model.device=cuda", "model.autocast_bf16=false"]).model
    assert frozen_copy_dtype(fp32) == fp32.dtype
