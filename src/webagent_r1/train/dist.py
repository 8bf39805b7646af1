"""What both trainers set up: the distributed context, the policy model, optimizer, schedule.

The trainers run as one process or under ``accelerate launch`` with several: ``Dist`` wraps
the process group (gloo on CPU, nccl on GPU). Gradients are all-reduced once per optimizer
step (summed: every loss is a weighted sum whose weights are normalised over all processes'
tokens), which works the same for full fine-tuning and LoRA and never needs DDP's forward
wrapper, so the sampler can share the very model object the optimizer updates. With
``train.sharding: fsdp`` the model is sharded instead (``train/sharding.py``) and FSDP reduces
the gradients itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import math
import os
from dataclasses import dataclass
from typing import Any

import torch

from webagent_r1.config import Config, ModelConfig, TrainConfig
from webagent_r1.policy.precision import autocast_enabled, pick_device
from webagent_r1.policy.trainable import load_policy

__all__ = [
    "BACKEND_DEVICE",
    "Dist",
    "backend_device",
    "build_optimizer",
    "frozen_copy_dtype",
    "grad_buckets",
    "grad_norm_and_clip",
    "load_reference",
    "reference_context",
    "lr_factor",
    "trainable_parameters",
    "update_rms",
]


BACKEND_DEVICE = {"nccl": "cuda", "gloo": "cpu", "mpi": "cpu"}
"""Device type of the tensors each ``torch.distributed`` backend reduces (NCCL: CUDA only)."""


def backend_device(backend: str, local_rank: int = 0) -> torch.device:
    """The device whose tensors ``backend``'s collectives take.

    Args:
        backend: a ``torch.distributed`` backend name ('nccl', 'gloo', 'mpi'), or a
            per-device list such as 'cpu:gloo,cuda:nccl' (then CUDA, where NCCL is fastest).
        local_rank: this process's GPU on its machine (used for CUDA).

    Raises:
        ValueError: a backend this table does not know.
    """
    names = [part.split(":")[-1].strip().lower() for part in backend.split(",")]
    kinds = {BACKEND_DEVICE.get(n) for n in names}
    if None in kinds:
        raise ValueError(
            f"unknown process-group backend {backend!r}: use one of {sorted(BACKEND_DEVICE)}"
        )
    return torch.device("cuda", local_rank) if "cuda" in kinds else torch.device("cpu")


@dataclass
class Dist:
    """This process's place among the training processes.

    ``device`` is where the tensors handed to collectives must live: CUDA for NCCL (which has
    no CPU path: a CPU tensor fails with "No backend type associated with device type cpu"),
    the CPU for gloo. Every collective here builds its tensors on it and checks them
    (``_on_device``), so a wrong-device tensor fails on a CPU test with gloo too.
    """

    rank: int = 0
    world: int = 1
    device: torch.device = dataclasses.field(default_factory=lambda: torch.device("cpu"))
    grad_bucket_mb: int = 256
    """Largest buffer ``all_reduce_grads`` builds, in MB (``dist.grad_bucket_mb``)."""

    @property
    def main(self) -> bool:
        """The process that logs, evaluates and writes checkpoints."""
        return self.rank == 0

    @classmethod
    def init(cls, timeout_min: int = 60, grad_bucket_mb: int = 256) -> Dist:
        """Join the process group that ``accelerate launch`` / ``torchrun`` describe, if any.

        Args:
            timeout_min: how long a collective waits for the slowest process before the job
                aborts (``dist.timeout_min``; NCCL's own default is 10 minutes, less than a
                rank's evaluation share can take).
            grad_bucket_mb: ``all_reduce_grads``' bucket size (``dist.grad_bucket_mb``).
        """
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls(grad_bucket_mb=grad_bucket_mb)
        # heavy: torch.distributed loads only when this runs
        import torch.distributed as dist

        local = int(os.environ.get("LOCAL_RANK", "0"))
        if torch.cuda.is_available():  # one GPU per process: device "cuda" is this one
            torch.cuda.set_device(local)
        if not dist.is_initialized():
            backend = "nccl" if torch.cuda.is_available() else "gloo"
            timeout = datetime.timedelta(minutes=timeout_min)
            dist.init_process_group(backend=backend, timeout=timeout)
        device = backend_device(str(dist.get_backend()), local)
        rank, world = dist.get_rank(), dist.get_world_size()
        return cls(rank=rank, world=world, device=device, grad_bucket_mb=grad_bucket_mb)

    def _on_device(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` itself, after checking it lives where this backend reduces.

        Raises:
            RuntimeError: ``t`` is on another device type (a bug: NCCL would fail at once).
        """
        if t.device.type != self.device.type:
            raise RuntimeError(
                f"a collective got a tensor on {t.device} but this process group reduces on "
                f"{self.device.type} (build it with device=dist.device)"
            )
        return t

    def all_reduce_sum(self, values: list[float]) -> list[float]:
        """Element-wise sum of ``values`` over all processes."""
        if self.world == 1:
            return list(values)
        # heavy: torch.distributed loads only when this runs
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=self.device)  # (n,)
        dist.all_reduce(self._on_device(t))
        return t.cpu().tolist()

    def all_reduce_max(self, value: int) -> int:
        """The largest ``value`` over all processes."""
        if self.world == 1:
            return value
        # heavy: torch.distributed loads only when this runs
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.long, device=self.device)  # (1,)
        dist.all_reduce(self._on_device(t), op=dist.ReduceOp.MAX)
        return int(t.item())

    def all_reduce_grads(self, params: list[torch.nn.Parameter]) -> None:
        """Sum gradients over processes, in place, in buckets of ``grad_bucket_mb``.

        Each bucket of consecutive same-dtype gradients is flattened into one buffer,
        reduced and copied back into the gradients themselves; a gradient at least a bucket
        large is reduced where it lies, without a copy. Extra memory: one bucket (the old
        whole flat copy plus per-parameter clones held about 3x the gradients).
        """
        if self.world == 1:
            return
        # heavy: torch.distributed loads only when this runs
        import torch.distributed as dist

        for p in params:
            if p.grad is None:  # every process must hand the collective the same layout
                p.grad = torch.zeros_like(p)
        grads = [p.grad for p in params if p.grad is not None]
        for bucket in grad_buckets(grads, self.grad_bucket_mb * 2**20):
            if len(bucket) == 1 and bucket[0].is_contiguous():
                dist.all_reduce(self._on_device(bucket[0]))  # in place: no copy at all
                continue
            flat = torch.cat([g.reshape(-1) for g in bucket])  # (bucket numels,)
            dist.all_reduce(self._on_device(flat))
            i = 0
            for g in bucket:
                n = g.numel()
                g.copy_(flat[i : i + n].view_as(g))
                i += n
            del flat

    def barrier(self) -> None:
        if self.world > 1:
            # heavy: torch.distributed loads only when this runs
            import torch.distributed as dist

            dist.barrier()

    def all_gather_object(self, obj: Any) -> list[Any]:
        """``obj`` of every process, in rank order, on every process."""
        if self.world == 1:
            return [obj]
        # heavy: torch.distributed loads only when this runs
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def gather_object(self, obj: Any) -> list[Any] | None:
        """``obj`` of every process, in rank order, on the main process (None elsewhere).
        Every process must call it."""
        if self.world == 1:
            return [obj]
        # heavy: torch.distributed loads only when this runs
        import torch.distributed as dist

        out: list[Any] | None = [None] * self.world if self.main else None
        dist.gather_object(obj, out, dst=0)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        """``obj`` of the main process, on every process."""
        if self.world == 1:
            return obj
        # heavy: torch.distributed loads only when this runs
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]


def grad_buckets(grads: list[torch.Tensor], limit_bytes: int) -> list[list[torch.Tensor]]:
    """``grads`` in order, grouped into buckets of at most ``limit_bytes`` each, one dtype
    and device a bucket; a tensor larger than the limit is a bucket of its own."""
    out: list[list[torch.Tensor]] = []
    size = 0
    for g in grads:
        n = g.numel() * g.element_size()
        last = out[-1] if out else None
        same = last is not None and (last[0].dtype, last[0].device) == (g.dtype, g.device)
        if last is not None and same and size + n <= limit_bytes:
            last.append(g)
            size += n
        else:
            out.append([g])
            size = n
    return out


def frozen_copy_dtype(mcfg: ModelConfig) -> str:
    """Dtype of a frozen copy of the policy (the KL reference, the sampler of a sharded
    trainer): bfloat16 on a GPU that runs the policy under bf16 autocast (the forwards run in
    bf16 anyway; half the memory of fp32), else the policy's own ``model.dtype``."""
    device = pick_device(mcfg.device)
    if device.type == "cuda" and autocast_enabled(mcfg, device):
        return "bfloat16"
    return mcfg.dtype


def load_reference(cfg: Config, path: str | None, model: Any) -> Any:
    """The frozen KL reference policy.

    Under LoRA it is ``model`` itself, run with its adapters disabled
    (``reference_context``): the base weights, no second copy. Otherwise a frozen copy loaded
    from ``path`` in ``frozen_copy_dtype``.
    """
    if hasattr(model, "disable_adapter"):
        return model
    ref_cfg = dataclasses.replace(
        cfg, model=dataclasses.replace(cfg.model, dtype=frozen_copy_dtype(cfg.model))
    )
    ref, _ = load_policy(ref_cfg, path)
    return ref.eval().requires_grad_(False)


def reference_context(model: Any, ref_model: Any) -> Any:
    """The context the reference's forwards run in: adapters disabled when the reference is
    the LoRA policy itself (``load_reference``), else nothing."""
    if ref_model is model and hasattr(model, "disable_adapter"):
        return model.disable_adapter()
    return contextlib.nullcontext()


def trainable_parameters(model: Any) -> list[torch.nn.Parameter]:
    """Parameters the optimizer updates (all, or the LoRA adapters only)."""
    return [p for p in model.parameters() if p.requires_grad]


def grad_norm_and_clip(params: list[torch.nn.Parameter], max_norm: float) -> float:
    """Global L2 norm of the gradients of ``params``, clipped to ``max_norm`` (0: not clipped).

    Sharded parameters (FSDP's DTensors) hold a shard of each gradient: the norm of the
    shards is reduced over the processes (``full_tensor``), so every process clips alike.
    """
    with_grad = [p for p in params if p.grad is not None]
    if not with_grad:
        return 0.0
    norm = torch.nn.utils.get_total_norm([p.grad for p in with_grad])
    if hasattr(norm, "full_tensor"):  # a DTensor: partial norms of the local shards
        norm = norm.full_tensor()
    if max_norm > 0:  # (what clip_grad_norm_ does, with the reduced norm)
        torch.nn.utils.clip_grads_with_norm_(with_grad, max_norm, norm)
    return float(norm)


def update_rms(optimizer: Any, dist: Dist) -> float:
    """RMS, over every parameter the AdamW ``optimizer`` has stepped, of the change its last
    step made to a weight (in weight units), recomputed from its moments.

    AdamW moves a weight by ``lr · m̂ / (√v̂ + eps)`` (plus ``lr · weight_decay · θ``). On its
    first step that is ``lr`` times the gradient's sign, whatever the gradient's size, and over
    its first few steps it stays a large fraction of ``lr``: then the step size, not the signal
    in the batch, sets how far the policy moves. The sum runs over this process's shards
    (FSDP's DTensors) and is reduced over the processes.
    """

    def local(t: torch.Tensor) -> torch.Tensor:
        return t.to_local() if hasattr(t, "to_local") else t

    sq, n = 0.0, 0.0
    for group in optimizer.param_groups:
        if "betas" not in group:  # not an Adam-type optimizer: nothing to recompute from
            continue
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        for p in group["params"]:
            st = optimizer.state.get(p)
            if not st or "exp_avg" not in st:
                continue
            t = float(st["step"])
            with torch.no_grad():
                denom = local(st["exp_avg_sq"]).sqrt() / math.sqrt(1 - b2**t) + eps
                u = local(st["exp_avg"]) / denom * (lr / (1 - b1**t))
                if wd:
                    u = u + lr * wd * local(p.detach())  # θ after the step: a tiny difference
                sq += float(u.float().pow(2).sum())
                n += u.numel()
    sq, n = dist.all_reduce_sum([sq, n])
    return math.sqrt(sq / n) if n else 0.0


def build_optimizer(params: list[torch.nn.Parameter], lr: float, tcfg: TrainConfig) -> Any:
    """AdamW over ``params`` (``foreach`` off: deterministic and lean on CPU)."""
    b1, b2 = tcfg.adam_betas
    return torch.optim.AdamW(
        params, lr=lr, betas=(b1, b2), weight_decay=tcfg.weight_decay, foreach=False
    )


def lr_factor(step: int, warmup: int, total: int, schedule: str) -> float:
    """Multiplier of the peak learning rate at optimizer step ``step`` (0-based).

    1) linear warm-up over ``warmup`` steps; 2) then constant, linear decay to 0.1, or cosine
    decay to 0.1 over the remaining steps.
    """
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "linear":
        return 1.0 - 0.9 * progress
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))
