"""Loading a sharded (FSDP2) model with its weights read once, by rank 0.

Without this every process of an ``accelerate launch`` read the whole pretrained model from
disk, in fp32, before ``shard_model`` kept its shard: 8 processes, 8 full copies in host
memory at once (32 GB each for an 8B model). Here:

1. every process builds the model on the ``meta`` device from its ``config.json``
   (``empty_policy``: no weight is read, no memory is allocated), with the same set-up as
   ``load_policy`` (gradient checkpointing, train mode);
2. every process shards it (``shard_model``) and allocates its shards, uninitialised
   (``to_empty``);
3. rank 0 alone loads the pretrained weights on the host (``load_policy`` on the CPU) and
   ``set_model_state_dict(..., StateDictOptions(full_state_dict=True,
   broadcast_from_rank0=True))`` broadcasts them one tensor at a time, each process keeping
   its shard;
4. buffers that are no part of the state dict (the rotary embedding's frequencies) are
   broadcast from rank 0's model too: ``to_empty`` left them uninitialised.

The KL reference of a sharded policy is loaded the same way (``load_sharded_reference``),
frozen, in ``frozen_copy_dtype``: each process holds 1/N of it instead of a full copy.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import torch

from webagent_r1.config import Config
from webagent_r1.policy.hf import load_tokenizer
from webagent_r1.policy.models import resolve_model
from webagent_r1.policy.precision import pick_device
from webagent_r1.policy.trainable import load_policy
from webagent_r1.train.dist import frozen_copy_dtype
from webagent_r1.train.sharding import shard_model

__all__ = [
    "empty_policy",
    "load_sharded_policy",
    "load_sharded_reference",
    "materialise_from_rank0",
]

Loader = Callable[[Config, str | None], tuple[Any, Any]]
"""``load_policy``'s signature: (config, path) -> (model, tokenizer)."""


def _source(cfg: Config, path: str | None) -> tuple[str, str]:
    """(the name asked for, the folder it resolves to), as ``load_policy`` resolves them."""
    source = path or cfg.init_from or cfg.model.name
    return source, (source if os.path.isdir(source) else resolve_model(source))


def empty_policy(cfg: Config, path: str | None = None) -> tuple[Any, Any]:
    """The policy ``load_policy(cfg, path)`` would return, on the ``meta`` device: built from
    the model's ``config.json``, no weight file read, no memory allocated.

    Raises:
        ValueError: ``path`` is a LoRA adapter folder (sharding trains full weights only).
    """
    # heavy: transformers loads only when this runs
    from transformers import AutoConfig, AutoModelForCausalLM

    source, src = _source(cfg, path)
    if os.path.isfile(os.path.join(src, "adapter_config.json")):
        raise ValueError(
            f"{src} is a LoRA adapter; train.sharding=fsdp trains full weights "
            "(merge it first: train.merge_lora_on_save=true)"
        )
    config = AutoConfig.from_pretrained(src)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, cfg.model.dtype))
    tok_src = src if os.path.isfile(os.path.join(src, "tokenizer_config.json")) else source
    tokenizer = load_tokenizer(tok_src)
    if cfg.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    model.train()
    return model, tokenizer


def _on_host(cfg: Config) -> Config:
    """``cfg`` with the model loaded on the CPU (rank 0's host copy)."""
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, device="cpu"))


def materialise_from_rank0(root: Any, host_model: Any | None, device: torch.device) -> None:
    """Fill a sharded model built on ``meta`` with rank 0's weights (a collective).

    Args:
        root: from ``shard_model`` over a ``meta`` model, on every process.
        host_model: the loaded model on rank 0 (its state dict and buffers are sent); None
            on the other processes.
        device: where the shards live (the process group's device).
    """
    # heavy: torch.distributed loads only when this runs
    import torch.distributed as dist

    # heavy: torch.distributed.checkpoint.state_dict loads only when this runs
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    rank = dist.get_rank()
    root.to_empty(device=device)  # this process's shards, uninitialised
    full: dict[str, torch.Tensor] = {}
    if rank == 0:
        assert host_model is not None, "rank 0 must hand over the loaded model"
        full = {f"module.{k}": v for k, v in host_model.state_dict().items()}
    opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    set_model_state_dict(root, full, options=opts)
    # buffers outside the state dict (rotary frequencies): to_empty left them uninitialised
    src = dict(host_model.named_buffers()) if rank == 0 and host_model is not None else {}
    with torch.no_grad():
        for name, buf in root.module.named_buffers():
            t = src[name].to(device) if rank == 0 else torch.empty_like(buf, device=device)
            dist.broadcast(t, src=0)
            buf.copy_(t)


def load_sharded_policy(
    cfg: Config,
    path: str | None = None,
    bf16: bool = False,
    *,
    model: Any = None,
    loader: Loader = load_policy,
) -> Any:
    """The policy sharded over the process group, its weights read from disk by rank 0 only.

    Args:
        cfg: ``model`` (name, dtype, device) and ``train`` (gradient checkpointing).
        path: what ``load_policy`` would load (a checkpoint's ``model/``, ...).
        bf16: FSDP2 mixed precision (``shard_model``).
        model: the ``meta`` model from ``empty_policy`` (default: built here).
        loader: loads the full model on rank 0 (``load_policy``; tests count its calls).

    Returns:
        The root FSDP unit (``shard_model``), its shards filled with the pretrained weights.
    """
    # heavy: torch.distributed loads only when this runs
    import torch.distributed as dist

    skeleton = model if model is not None else empty_policy(cfg, path)[0]
    device = pick_device(cfg.model.device)
    root = shard_model(skeleton, bf16=bf16, device=device)
    host = loader(_on_host(cfg), path)[0] if dist.get_rank() == 0 else None
    materialise_from_rank0(root, host, device)
    del host
    return root


def load_sharded_reference(cfg: Config, path: str | None, bf16: bool = False) -> Any:
    """The frozen KL reference of a sharded policy, sharded like it (a collective).

    In ``frozen_copy_dtype`` (bf16 on a GPU that runs under bf16 autocast), loaded from
    ``path`` by rank 0 only, no gradient checkpointing (it never runs a backward); in eval
    mode with its parameters frozen. Each process holds 1/N of it, and its forwards gather
    layer by layer like the policy's: every process must run as many as the busiest one.
    """
    ref_cfg = dataclasses.replace(
        cfg,
        model=dataclasses.replace(cfg.model, dtype=frozen_copy_dtype(cfg.model)),
        train=dataclasses.replace(cfg.train, gradient_checkpointing=False),
    )
    root = load_sharded_policy(ref_cfg, path, bf16=bf16)
    return root.eval().requires_grad_(False)
