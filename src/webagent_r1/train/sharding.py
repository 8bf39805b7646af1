"""Sharded training (``train.sharding: fsdp``): parameters, gradients and optimizer state split
over the training processes, the ZeRO-3 layout, with PyTorch's FSDP2 (``fully_shard``).

Wrapping: every decoder layer is one FSDP unit (its weights are gathered just before its
forward and freed after it, again in the backward), and the root unit, a ``CompletionLM``
around the causal LM, holds what is left (embeddings, final norm, LM head). The root must be a
module whose own ``forward`` runs the whole model: ``batching.completion_logits`` calls the
decoder and the head separately, and FSDP gathers a unit's weights in hooks around ``forward``.

What changes for the trainers (``bc.py``, ``rl.py``):

- gradients are reduce-scattered by FSDP in every backward, summed (not averaged: our losses
  are already normalised over every process's tokens, as with ``Dist.all_reduce_grads``, which
  is skipped);
- every forward and backward is a collective, so all processes run as many micro-batches as
  the busiest one (``Dist.all_reduce_max``; the extra ones are ``batching.padding_batch``,
  loss × 0), and every process computes the held-out loss;
- the gradient norm is the global one (``setup.grad_norm_and_clip`` reduces DTensor norms);
- the HF sampler cannot share the sharded model: each process samples from its own full copy,
  which ``WeightSync`` refreshes from ``full_state_dict`` (a gather on every process);
- checkpoints: ``model/`` is still a plain Hugging Face folder (the full state dict gathered to
  rank 0); the optimizer state stays sharded, one file per process, in ``optimizer/``
  (``torch.distributed.checkpoint``), which loads into any number of processes.

Precision: under bf16 (``model.autocast_bf16`` resolved on), every unit runs with FSDP2's
``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``: the shards stay fp32
master weights (the optimizer steps on them), the all-gathers carry and the forward computes
bf16 weights, gradients are reduce-scattered in fp32 and land on the fp32 shards. That halves
the bytes each gather moves, and autocast (still on around the forwards) finds the weights in
bf16 already, so it keeps no cached bf16 copy of each gathered layer until the forward ends.

One process works too: it joins a one-process group, so the same code runs (nothing is split).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from webagent_r1.train.batching import CompletionLM

__all__ = [
    "full_state_dict",
    "is_sharded",
    "load_sharded_optimizer",
    "mixed_precision_policy",
    "save_sharded_optimizer",
    "shard_model",
]


def is_sharded(model: Any) -> bool:
    """Whether ``model`` was wrapped by ``shard_model`` (FSDP2)."""
    # heavy: torch.distributed.fsdp loads only when this runs
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _ensure_process_group(device: torch.device) -> None:
    """A one-process group when no launcher started several (FSDP needs a group)."""
    # heavy: torch.distributed loads only when this runs
    import torch.distributed as dist

    if dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)


def mixed_precision_policy(bf16: bool) -> Any:
    """FSDP2's precision for the units: bf16 weights in the gathers and the forward, fp32
    gradient reduction (``MixedPrecisionPolicy``); None (everything in the master dtype)
    when ``bf16`` is False."""
    if not bf16:
        return None
    # heavy: torch.distributed.fsdp loads only when this runs
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def shard_model(model: Any, bf16: bool = False, device: torch.device | None = None) -> CompletionLM:
    """Wrap a causal LM for fully sharded training (each decoder layer, then the root).

    Args:
        model: a plain Hugging Face causal LM with a ``model.layers``-style decoder stack,
            already on its device (``policy.trainable.load_policy``); not PEFT-wrapped.
        bf16: gather and compute in bf16, reduce gradients in fp32
            (``mixed_precision_policy``); the shards stay in the model's dtype.
        device: where the shards live (default: the model's device); needed for a model on
            the ``meta`` device (``fsdp_load``), whose shards are allocated afterwards.

    Returns:
        The root FSDP unit: a ``CompletionLM`` whose ``module`` is ``model``; its parameters
        are now DTensors holding this process's shard.

    Raises:
        ValueError: the model has no decoder layer stack to shard.
    """
    # heavy: torch.distributed loads only when this runs
    import torch.distributed as dist

    # heavy: torch.distributed.device_mesh loads only when this runs
    from torch.distributed.device_mesh import init_device_mesh

    # heavy: torch.distributed.fsdp loads only when this runs
    from torch.distributed.fsdp import FSDPModule, fully_shard

    layers = getattr(model.get_decoder(), "layers", None)
    if layers is None or len(layers) == 0:
        raise ValueError(
            f"train.sharding=fsdp shards decoder layers (model.layers); "
            f"{type(model).__name__} has none: use train.sharding=none"
        )
    device = device or next(model.parameters()).device
    _ensure_process_group(device)
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    policy = mixed_precision_policy(bf16)
    kw = {"mp_policy": policy} if policy is not None else {}
    for layer in layers:
        fully_shard(layer, mesh=mesh, **kw)
    root = CompletionLM(model)
    fully_shard(root, mesh=mesh, **kw)
    for m in root.modules():
        if isinstance(m, FSDPModule):
            # Sum, never average: every loss is already weighted over all processes' tokens.
            # A plain SUM also keeps gloo (CPU) working, which has no pre-multiplied sum.
            m.set_gradient_divide_factor(1.0)
            m.set_force_sum_reduction_for_comms(True)
    return root


def _strip_root(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Keys of the causal LM: without the ``CompletionLM`` wrapper's ``module.`` prefix."""
    n = len("module.")
    return {(k[n:] if k.startswith("module.") else k): v for k, v in state.items()}


def full_state_dict(model: Any, all_ranks: bool = True) -> dict[str, torch.Tensor]:
    """The sharded model's full state dict, under the causal LM's own parameter names.

    A collective: every process must call it, in the same order.

    Args:
        model: from ``shard_model``.
        all_ranks: every process gets the full tensors, on the model's device (an engine per
            process needs them); False: only rank 0 gets them, on the CPU (a checkpoint),
            the other processes an empty dict.
    """
    # heavy: torch.distributed.checkpoint.state_dict loads only when this runs
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=not all_ranks)
    return _strip_root(get_model_state_dict(model, options=opts))


def save_sharded_optimizer(model: Any, optimizer: Any, folder: str | Path) -> None:
    """Write each process's optimizer shard into ``folder`` (a collective).

    ``torch.distributed.checkpoint`` layout: one ``.distcp`` file per process and a
    ``.metadata`` index, keyed by parameter name, so it loads into another process count.
    """
    # heavy: torch.distributed.checkpoint loads only when this runs
    import torch.distributed.checkpoint as dcp

    # heavy: torch.distributed.checkpoint.state_dict loads only when this runs
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    dcp.save({"optimizer": get_optimizer_state_dict(model, optimizer)}, checkpoint_id=str(folder))


def load_sharded_optimizer(model: Any, optimizer: Any, folder: str | Path) -> None:
    """Load what ``save_sharded_optimizer`` wrote into ``optimizer`` (a collective)."""
    # heavy: torch.distributed.checkpoint loads only when this runs
    import torch.distributed.checkpoint as dcp

    # heavy: torch.distributed.checkpoint.state_dict loads only when this runs
    from torch.distributed.checkpoint.state_dict import (
        get_optimizer_state_dict,
        set_optimizer_state_dict,
    )

    # The template: this process's shards with a zero state, for DCP to fill in (torch
    # creates that state with a zero-lr step, and only when no parameter holds a gradient).
    optimizer.zero_grad(set_to_none=True)
    state = {"optimizer": get_optimizer_state_dict(model, optimizer)}
    dcp.load(state, checkpoint_id=str(folder))
    set_optimizer_state_dict(model, optimizer, state["optimizer"])
