"""Memory plan: what one GPU holds in each phase of an M-GRPO step, and whether it fits.

``webagent-r1 plan-memory -c configs/gpu/<recipe>.yaml --gpus N --gpu-mem-gb M`` prints it.
Everything is computed from the model's shape (``ModelShape``: a table of the registry's
models, or a local folder's ``config.json``) and the recipe; nothing is loaded.

Per GPU, in GiB (2**30 bytes):

- parameters: the master weights in ``model.dtype``, divided over the GPUs under
  ``train.sharding: fsdp``;
- gradients and AdamW state (two moments): of the trainable parameters (all, or the LoRA
  adapters), in ``model.dtype``, sharded alike; the gradients live during the update only
  (``update_then_push`` frees them after the last optimizer step);
- reference (``rl.beta > 0``): under LoRA none (the policy with adapters disabled), else a
  frozen copy in ``frozen_copy_dtype`` (bf16 on a GPU), sharded like the policy under FSDP
  (``train/fsdp_load.py``: 1/N per GPU; its forwards gather two layers and its root unit at
  a time, before the update's own forward, so they add nothing to the update's peak), else
  whole on every GPU;
- sampler copy: the full bf16 copy the HF engine samples from when the trainer is sharded;
  none when it shares the trainer's model; vLLM's weights are in its share;
- vLLM share: ``vllm.gpu_memory_utilization`` of the GPU while vLLM is awake; with sleep mode
  it is free during the update and only its bf16 weights are back during the push;
- FSDP gather: two decoder layers unsharded at once (the one computing and the prefetched)
  and the root unit (embeddings, final norm, head; unsharded for the whole forward and
  backward), in bf16 under mixed precision (``MixedPrecisionPolicy``: bf16 gathers, fp32
  reduction), else in the master dtype;
- gradient reduction: under FSDP one unit's unsharded gradient (the larger of a decoder layer
  and the root) and, under mixed precision, its fp32 copy for the reduce-scatter; unsharded
  on several GPUs, one all-reduce bucket (``dist.grad_bucket_mb``: the sum is in place);
- activations at ``train.token_budget`` tokens: with gradient checkpointing the residual
  stream at every layer input plus one layer recomputed, otherwise every layer's saved
  tensors (``activation_bytes``), plus the LM head's logits at the completion positions;
- rollout KV cache of the HF engine: ``rollout.max_batch_size`` rows of the rollout context;
- push buffer: the largest parameter gathered in fp32 and cast to bf16 (the push streams one
  parameter at a time); for vLLM also the chunk being handed over (``vllm.shard_mb`` of bf16
  tensors on the GPU): its CUDA IPC handles under the in-GPU transfer (the engine reads them
  in place, no copy), the tensors about to be staged as a file otherwise (``push_path`` says
  which; the same GPU bytes either way, the files also take twice a chunk of host memory);
- overhead: CUDA context, cuBLAS workspace, allocator slack (``OVERHEAD_GIB``).

The peak is the largest of three phases: rollout, update, push.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from webagent_r1.config import Config, ConfigError

__all__ = [
    "KNOWN_SHAPES",
    "MemoryPlan",
    "MemoryPlanError",
    "check_plan_fits",
    "ModelShape",
    "format_plan",
    "plan_memory",
    "shape_for",
]

GIB = 2**30
OVERHEAD_GIB = 1.5
"""CUDA context, cuBLAS/NCCL workspaces and allocator slack, per GPU."""
PROMPT_OVERHEAD_TOKENS = 1024
"""Tokens of a turn's prompt besides the observation: system prompt, task, action history."""
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class ModelShape:
    """The dimensions of a Llama/Qwen2-style decoder that memory depends on."""

    hidden: int
    layers: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool
    """Whether the LM head shares the input embeddings' weights."""
    qkv_bias: bool = False
    """Biases on the q/k/v projections (Qwen2)."""

    @property
    def kv_dim(self) -> int:
        """Width of the k (or v) projection: key/value heads × head size."""
        return self.kv_heads * (self.hidden // self.heads)

    def module_dims(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear module of one decoder layer."""
        h, kv, i = self.hidden, self.kv_dim, self.intermediate
        return {
            "q_proj": (h, h),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (h, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer (projections, biases, two norms)."""
        n = sum(a * b for a, b in self.module_dims().values()) + 2 * self.hidden
        return n + (self.hidden + 2 * self.kv_dim if self.qkv_bias else 0)

    @property
    def params(self) -> int:
        """All parameters: embeddings, layers, final norm, an untied head."""
        embed = self.vocab * self.hidden
        return embed * (1 if self.tied else 2) + self.layers * self.layer_params + self.hidden

    @property
    def largest_param(self) -> int:
        """Elements of the largest single tensor (the embeddings)."""
        return max(self.vocab * self.hidden, self.hidden * self.intermediate)

    def lora_params(self, r: int, targets: list[str] | tuple[str, ...]) -> int:
        """Parameters of rank-``r`` LoRA adapters (A: in × r, B: r × out) on ``targets``."""
        dims = self.module_dims()
        unknown = [t for t in targets if t not in dims]
        if unknown:
            raise ValueError(f"the memory plan knows no LoRA target {unknown}: use {list(dims)}")
        return self.layers * sum(r * (dims[t][0] + dims[t][1]) for t in targets)


KNOWN_SHAPES = {
    "smollm2-135m-instruct": ModelShape(576, 30, 1536, 9, 3, 49152, tied=True),
    "qwen2.5-3b-instruct": ModelShape(2048, 36, 11008, 16, 2, 151936, tied=True, qkv_bias=True),
    "llama-3.1-8b-instruct": ModelShape(4096, 32, 14336, 32, 8, 128256, tied=False),
}
"""Shapes of the registry's models (their Hugging Face ``config.json``)."""


def shape_from_hf_config(c: dict[str, Any]) -> ModelShape:
    """A ``ModelShape`` from a Hugging Face Llama/Qwen2 ``config.json`` dict."""
    return ModelShape(
        hidden=int(c["hidden_size"]),
        layers=int(c["num_hidden_layers"]),
        intermediate=int(c["intermediate_size"]),
        heads=int(c["num_attention_heads"]),
        kv_heads=int(c.get("num_key_value_heads") or c["num_attention_heads"]),
        vocab=int(c["vocab_size"]),
        tied=bool(c.get("tie_word_embeddings", False)),
        qkv_bias=c.get("model_type") == "qwen2" or bool(c.get("attention_bias", False)),
    )


def shape_for(name: str) -> ModelShape:
    """The shape of model ``name``: a registry name, or a folder with a ``config.json``.

    Raises:
        ValueError: neither (the plan never downloads a model).
    """
    if name in KNOWN_SHAPES:
        return KNOWN_SHAPES[name]
    cfg_file = os.path.join(name, "config.json")
    if os.path.isfile(cfg_file):
        with open(cfg_file) as f:
            return shape_from_hf_config(json.load(f))
    raise ValueError(
        f"no shape known for model {name!r}: use one of {sorted(KNOWN_SHAPES)} or a local "
        "model folder with a config.json"
    )


def activation_bytes_per_token_layer(s: ModelShape, act_bytes: int, residual_bytes: int) -> int:
    """Bytes one token saves for the backward pass in one decoder layer.

    In ``act_bytes`` (2 under bf16 autocast): the projections' inputs and outputs (norm
    outputs 2h, q/k/v h + 2kv, attention output h, gate/up/act/product 4I); in fp32: the two
    norms' inputs (RMSNorm computes in fp32); in ``residual_bytes``: the residual stream at
    the two residual adds. Attention scores are not stored (SDPA).
    """
    h, kv, i = s.hidden, s.kv_dim, s.intermediate
    return act_bytes * (4 * h + 2 * kv + 4 * i) + 4 * 2 * h + residual_bytes * 2 * h


@dataclass
class MemoryPlan:
    """Per-GPU memory of a recipe, in GiB, and whether its peak fits."""

    model: str
    gpus: int
    gpu_mem_gib: float
    params_b: float
    """Parameters of the model, in billions."""
    trainable_b: float
    parameters: float
    gradients: float
    optimizer: float
    reference: float
    sampler_copy: float
    vllm_share: float
    fsdp_gather: float
    grad_reduce: float
    activations: float
    rollout_kv: float
    push_buffer: float
    overhead: float
    push_path: str
    """How the push reaches the sampler: 'ipc' (vLLM's in-GPU transfer, files where the
    installed vLLM lacks it), 'files', 'copy' (the HF sampler copy), 'none' (shared model)."""
    rollout_peak: float
    update_peak: float
    push_peak: float

    @property
    def peak(self) -> float:
        """The largest of the three phases."""
        return max(self.rollout_peak, self.update_peak, self.push_peak)

    @property
    def fits(self) -> bool:
        """Whether the peak fits the GPU's memory."""
        return self.peak <= self.gpu_mem_gib

    def to_dict(self) -> dict[str, Any]:
        """Every field plus ``peak`` and ``fits`` (for JSON)."""
        return {**asdict(self), "peak": self.peak, "fits": self.fits}


def rollout_context(cfg: Config) -> int:
    """Tokens of one turn's prompt and completion: the observation, the rest of the prompt,
    the completion (capped by the token budget)."""
    ctx = cfg.observation.max_tokens + PROMPT_OVERHEAD_TOKENS + cfg.rollout.max_new_tokens
    return min(ctx, cfg.train.token_budget)


def _reduction_terms(
    cfg: Config, s: ModelShape, gpus: int, trainable: int, bf16: bool
) -> tuple[float, float]:
    """Bytes of (FSDP's unsharded units, the gradient reduction's buffers) per GPU.

    FSDP (``train/sharding.py``): two decoder layers and the root unit gathered, in bf16 under
    mixed precision; one unit's unsharded gradient (bf16 under mixed precision, plus its fp32
    copy for the reduce-scatter). Unsharded on several GPUs: one all-reduce bucket
    (``Dist.all_reduce_grads`` sums in place, a bucket at a time). One GPU, unsharded: none.
    """
    master = DTYPE_BYTES[cfg.model.dtype]
    if cfg.train.sharding == "fsdp":
        gathered = 2 if bf16 else master
        root = s.params - s.layers * s.layer_params  # embeddings, final norm, untied head
        unit = max(s.layer_params, root)
        grad_bytes = 2 + 4 if bf16 else master
        return (2 * s.layer_params + root) * gathered, unit * grad_bytes
    if gpus > 1:
        return 0.0, min(cfg.dist.grad_bucket_mb * 2**20, trainable * master)
    return 0.0, 0.0


def plan_memory(
    cfg: Config, gpus: int, gpu_mem_gib: float, shape: ModelShape | None = None
) -> MemoryPlan:
    """The per-GPU memory plan of ``cfg`` on ``gpus`` GPUs of ``gpu_mem_gib`` GiB each.

    Args:
        cfg: the recipe (model, train, rl, rollout, vllm, observation sections).
        gpus: training processes, one GPU each.
        gpu_mem_gib: memory of one GPU.
        shape: the model's shape (default: ``shape_for(cfg.model.name)``).

    Raises:
        ValueError: a model whose shape is unknown, or fewer than one GPU.
    """
    if gpus < 1:
        raise ValueError(f"--gpus must be >= 1, got {gpus}")
    s = shape or shape_for(cfg.model.name)
    t, rl, mcfg = cfg.train, cfg.rl, cfg.model
    # heavy: keeps torch, transformers off the import path
    from webagent_r1.train.dist import frozen_copy_dtype

    master = DTYPE_BYTES[mcfg.dtype]
    shards = gpus if t.sharding == "fsdp" else 1
    p = s.params
    lora = t.lora_r > 0
    trainable = s.lora_params(t.lora_r, list(t.lora_target_modules)) if lora else p
    frozen_bytes = DTYPE_BYTES[frozen_copy_dtype(mcfg)]
    vllm = t.generation_engine == "vllm"
    vc = cfg.vllm

    parameters = p * master / shards
    gradients = trainable * master / shards
    optimizer = 2 * trainable * master / shards
    reference = 0.0 if (rl.beta <= 0 or lora) else p * frozen_bytes / shards
    sampler_copy = p * frozen_bytes if (t.sharding == "fsdp" and not vllm) else 0.0
    vllm_share = vc.gpu_memory_utilization * gpu_mem_gib * GIB if vllm else 0.0
    vllm_weights = p * 2 / vc.tensor_parallel_size if vllm else 0.0
    bf16 = mcfg.autocast_bf16 is not False  # 'auto' on a GPU with bf16: autocast
    fsdp_gather, grad_reduce = _reduction_terms(cfg, s, gpus, trainable, bf16)

    tokens = t.token_budget
    ctx = rollout_context(cfg)
    residual = master  # the residual stream stays in the master dtype under autocast
    per_layer = activation_bytes_per_token_layer(s, 2 if bf16 else master, residual)
    if t.gradient_checkpointing:
        layers_act = tokens * (s.layers * residual * s.hidden + per_layer)
    else:
        layers_act = tokens * s.layers * per_layer
    # the head runs at completion positions only: each sample of the micro-batch brings at
    # most max_new_tokens of them; logits bf16, their fp32 log-softmax and its gradient
    completion = min(tokens, math.ceil(tokens / ctx) * cfg.rollout.max_new_tokens)
    logits = completion * s.vocab * (2 + 4 + 4)
    activations = layers_act + logits
    rollout_kv = 0.0 if vllm else cfg.rollout.max_batch_size * ctx * s.layers * 2 * s.kv_dim * 2
    push_buffer = s.largest_param * (4 + 2) if (vllm or sampler_copy) else 0.0
    if vllm:  # the chunk handed over (IPC handles, or tensors to stage), below the next one
        push_buffer += min(vc.shard_mb * 2**20, p * 2)
    push_path = (
        ("files" if vc.weight_transfer == "files" or vc.tensor_parallel_size > 1 else "ipc")
        if vllm
        else "copy"
        if sampler_copy
        else "none"
    )
    overhead = OVERHEAD_GIB * GIB

    resident = parameters + optimizer + reference + sampler_copy + overhead
    rollout_peak = resident + (vllm_share if vllm else rollout_kv)
    asleep = vllm and vc.enable_sleep_mode
    update_peak = (
        resident
        + gradients
        + fsdp_gather
        + grad_reduce
        + activations
        + (vllm_share if vllm and not asleep else 0)
    )
    push_peak = resident + fsdp_gather + push_buffer + (vllm_weights if asleep else vllm_share)
    g = GIB
    return MemoryPlan(
        model=mcfg.name,
        gpus=gpus,
        gpu_mem_gib=gpu_mem_gib,
        params_b=p / 1e9,
        trainable_b=trainable / 1e9,
        parameters=parameters / g,
        gradients=gradients / g,
        optimizer=optimizer / g,
        reference=reference / g,
        sampler_copy=sampler_copy / g,
        vllm_share=vllm_share / g,
        fsdp_gather=fsdp_gather / g,
        grad_reduce=grad_reduce / g,
        activations=activations / g,
        rollout_kv=rollout_kv / g,
        push_buffer=push_buffer / g,
        overhead=overhead / g,
        push_path=push_path,
        rollout_peak=rollout_peak / g,
        update_peak=update_peak / g,
        push_peak=push_peak / g,
    )


ROWS = [
    ("parameters", "master weights"),
    ("gradients", "trainable, update only"),
    ("optimizer", "AdamW moments"),
    ("reference", "KL reference"),
    ("sampler_copy", "HF sampler copy"),
    ("vllm_share", "vLLM while awake"),
    ("fsdp_gather", "FSDP unsharded layers"),
    ("grad_reduce", "gradient reduction"),
    ("activations", "at the token budget"),
    ("rollout_kv", "HF engine KV cache"),
    ("push_buffer", "one parameter (+ a vLLM chunk) pushed"),
    ("overhead", "CUDA context, slack"),
    ("rollout_peak", "phase: rollout"),
    ("update_peak", "phase: update"),
    ("push_peak", "phase: weight push"),
]


def format_plan(plan: MemoryPlan) -> str:
    """The plan as a table, one row per part, then the verdict."""
    head = (
        f"{plan.model}: {plan.params_b:.2f}B parameters ({plan.trainable_b:.3f}B trainable), "
        f"{plan.gpus} GPU(s) of {plan.gpu_mem_gib:g} GiB; per GPU:"
    )
    lines = [head]
    for key, what in ROWS:
        lines.append(f"  {key:<14}{getattr(plan, key):>8.1f} GiB  {what}")
    lines.append(f"  push path     {plan.push_path}")
    verdict = "fits" if plan.fits else "does NOT fit"
    lines.append(f"  peak {plan.peak:.1f} GiB of {plan.gpu_mem_gib:g} GiB: {verdict}")
    return "\n".join(lines)


class MemoryPlanError(ConfigError):
    """The recipe's memory plan does not fit the GPU ``train`` runs on.

    The message is one line (the CLI prints it as an error); ``table`` holds the plan's
    table (``format_plan``), which ``check_plan_fits`` prints first."""

    def __init__(self, message: str, table: str = "") -> None:
        super().__init__(message)
        self.table = table


def check_plan_fits(
    cfg: Config,
    gpus: int,
    total_gib: float,
    others_gib: float = 0.0,
    say: Callable[[str], None] | None = None,
) -> MemoryPlan | None:
    """Refuse a recipe whose plan does not fit this GPU, before any stage starts.

    Args:
        cfg: the recipe.
        gpus: training processes (``WORLD_SIZE``), one GPU each.
        total_gib: the GPU's memory (``torch.cuda.mem_get_info``'s total).
        others_gib: memory other processes already hold on it (not available to the run).
        say: where the plan's table goes when it does not fit (default: standard error).

    Returns:
        The plan (computed for ``total_gib``, as vLLM's share is a fraction of it); None when
        the model's shape is unknown (a hub id without a local ``config.json``: no plan).

    Raises:
        MemoryPlanError: the peak exceeds ``total_gib - others_gib``; the table is printed
            first, the message says what to change.
    """
    try:
        plan = plan_memory(cfg, gpus, total_gib)
    except ValueError:
        return None
    available = total_gib - others_gib
    if plan.peak <= available:
        return plan
    table = format_plan(plan)
    (say or (lambda text: print(text, file=sys.stderr, flush=True)))(table)
    held = f", {others_gib:.1f} GiB of it held by other processes" if others_gib >= 0.05 else ""
    raise MemoryPlanError(
        f"the memory plan's peak, {plan.peak:.1f} GiB per GPU, does not fit the "
        f"{available:.1f} GiB available on this GPU ({total_gib:.1f} GiB{held}; the plan is "
        "above): shrink the recipe (train.token_budget, vllm.gpu_memory_utilization, "
        "vllm.enable_sleep_mode=true, train.lora_r, train.sharding=fsdp on more GPUs), or set "
        "train.memory_check=false to start anyway (the plan is an upper bound)",
        table,
    )
