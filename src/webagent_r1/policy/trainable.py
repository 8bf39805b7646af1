"""The trainable policy: a Hugging Face causal LM loaded for training or evaluation.

- ``load_policy(cfg, path)``: the model (fp32 master weights unless ``model.dtype`` says
  otherwise, train mode) and its tokenizer, from ``cfg.init_from`` / ``cfg.model.name`` or a
  checkpoint folder (a LoRA checkpoint loads onto its base model); LoRA adapters
  (``train.lora_r``) or frozen lower layers (``train.trainable_layers``) as configured.
- ``freeze_lower_layers(model, n)``: only the top ``n`` decoder layers (and the final norm)
  trainable.
- ``unwrap_model(model)``: the causal LM inside DDP / PEFT wrappers.
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from webagent_r1.config import Config, ModelConfig, TrainConfig
from webagent_r1.policy.hf import load_tokenizer
from webagent_r1.policy.models import resolve_model
from webagent_r1.policy.precision import pick_device

__all__ = ["freeze_lower_layers", "load_policy", "unwrap_model"]


def load_policy(cfg: Config, path: str | None = None) -> tuple[Any, Any]:
    """The trainable policy and its tokenizer.

    Args:
        cfg: ``model`` (name, dtype, device) and ``train`` (LoRA, gradient checkpointing).
        path: a model folder (e.g. a checkpoint's ``model/``) to load instead of
            ``cfg.init_from`` / ``cfg.model.name``. A LoRA checkpoint folder (with
            ``adapter_config.json``) is loaded onto its base model.

    Returns:
        (model in train mode with fp32 master weights unless ``model.dtype`` says otherwise,
        tokenizer).
    """
    # heavy: transformers loads only when this runs
    from transformers import AutoModelForCausalLM

    source = path or cfg.init_from or cfg.model.name
    src = resolve_model(source) if not os.path.isdir(source) else source
    mcfg: ModelConfig = cfg.model
    dtype = getattr(torch, mcfg.dtype)
    device = pick_device(mcfg.device)
    adapter = os.path.isfile(os.path.join(src, "adapter_config.json"))
    if adapter:
        with open(os.path.join(src, "adapter_config.json")) as f:
            base_name = json.load(f)["base_model_name_or_path"]
        model = AutoModelForCausalLM.from_pretrained(resolve_model(base_name), dtype=dtype)
    else:
        model = AutoModelForCausalLM.from_pretrained(src, dtype=dtype)
    tok_src = src if os.path.isfile(os.path.join(src, "tokenizer_config.json")) else source
    tokenizer = load_tokenizer(tok_src if not adapter else src)
    model.to(device)
    tcfg: TrainConfig = cfg.train
    if tcfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    if adapter:
        # heavy: keeps peft off the import path
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, src, is_trainable=True)
    elif tcfg.lora_r > 0:
        model = _with_lora(model, tcfg)
    elif tcfg.trainable_layers > 0:
        freeze_lower_layers(model, tcfg.trainable_layers)
    model.train()
    return model, tokenizer


def freeze_lower_layers(model: Any, n: int) -> None:
    """Leave only the top ``n`` decoder layers and the final norm trainable.

    The input embeddings stay frozen (and with them an LM head tied to them, as in small
    models): were they trainable, every layer's activations would be kept for the backward
    pass and nothing would be saved. An untied LM head trains.

    Raises:
        ValueError: the model has no ``model.layers`` stack or fewer than ``n`` layers.
    """
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(
            f"train.trainable_layers needs a decoder with model.layers; "
            f"{type(model).__name__} has none (use train.lora_r instead)"
        )
    if n > len(layers):
        raise ValueError(f"train.trainable_layers={n} but the model has {len(layers)} layers")
    model.requires_grad_(False)
    for layer in layers[len(layers) - n :]:
        layer.requires_grad_(True)
    norm = getattr(inner, "norm", None)
    if norm is not None:
        norm.requires_grad_(True)
    head, emb = model.get_output_embeddings(), model.get_input_embeddings()
    if head is not None and emb is not None and head.weight is not emb.weight:
        head.requires_grad_(True)  # an untied head trains without a backward through layers


def _with_lora(model: Any, tcfg: TrainConfig) -> Any:
    try:
        # heavy: keeps peft off the import path
        from peft import LoraConfig, get_peft_model
    except ImportError:  # pragma: no cover - peft is a core dependency
        raise RuntimeError("train.lora_r > 0 needs the peft package: pip install peft") from None
    lcfg = LoraConfig(
        r=tcfg.lora_r,
        lora_alpha=tcfg.lora_alpha,
        lora_dropout=tcfg.lora_dropout,
        target_modules=list(tcfg.lora_target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lcfg)


def unwrap_model(model: Any) -> Any:
    """The causal LM inside DDP / PEFT wrappers (PEFT's LoRA layers stay injected in it)."""
    while hasattr(model, "module"):
        model = model.module
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    return model
