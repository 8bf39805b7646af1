"""vLLM engine: an ``Engine`` over vLLM's asynchronous engine, in-process, on GPU.

Token ids go in (a ``TokensPrompt``: no re-tokenisation), and each request asks for the
log-prob of its sampled tokens (``logprobs=0``), so a completion carries exactly what the
trainer needs: ids, their log-probs, the text (for parsing the action) and the finish reason.
Many episodes call ``generate`` at once; vLLM's own scheduler batches their requests.

Weights: the engine holds its own copy. ``update_weights(weights, version)`` takes a state dict
or a stream of (name, tensor) pairs (``WeightSync`` streams them, one parameter at a time),
hands them over in chunks of at most ``vllm.shard_mb``, one of two ways (``push_path``):

- ``ipc`` (``vllm.weight_transfer: auto`` where the installed vLLM has the weight-transfer
  API, ``weight_transfer_config``, and the engine spans one GPU): vLLM's own in-GPU transfer
  with its ``ipc`` backend. Each chunk goes as CUDA IPC handles of the trainer's bf16 tensors
  (``init_weight_transfer_engine`` once, then ``start_weight_update`` / ``update_weights`` /
  ``finish_weight_update`` where the release has them): no file, no copy through the host.
  Written against vLLM's API and not yet run on a GPU; any failure falls back to files, for
  the rest of that push and the later ones, with a warning.
- ``files``: staged as safetensors shards (``/dev/shm`` when it has room) that every vLLM
  worker loads in place through ``collective_rpc`` into ``WeightLoaderExtension`` (a worker
  extension, ``worker_extension_cls``).

Either way the model's own ``load_weights`` takes them (so Hugging Face parameter names work,
fused q/k/v included); then the prefix cache is reset, since its KV entries came from the old
weights. An update waits for the requests in flight and holds new
ones back until it is done, so every completion is stamped with the one ``weight_version``
that produced it. ``sleep()`` / ``wake_up()`` (``vllm.enable_sleep_mode``) free vLLM's GPU
memory while the trainer updates on the same GPU.

Written against the vLLM V1 API (``vllm.v1.engine.async_llm.AsyncLLM``: ``from_engine_args``,
``generate``, ``collective_rpc``, ``reset_prefix_cache``, ``sleep``, ``wake_up(tags)``,
``shutdown``). The ``vllm`` extra pins ``VLLM_VERSION`` (the release built for the set-up's
torch); ``require_vllm`` says so when another is installed. Engine arguments the installed
vLLM does not know are left out with a warning, except ``logprobs_mode`` when the caller takes
vLLM's log-probs as pi_old (``needs_logprobs_mode``): without it vLLM returns the log-probs
before temperature, and the engine refuses to start. (The trainer recomputes pi_old with vLLM:
in bf16 a sampler's log-probs differ from the trainer's, and ``rl.old_logprobs: sampler`` is
refused.) Not yet run on a GPU.

Devices: ``AsyncLLM`` runs its engine core (and, with tensor parallelism, its workers) in
child processes, which do not inherit the parent's ``torch.cuda.set_device``: the engine of
local rank r is started with ``CUDA_VISIBLE_DEVICES`` naming its GPUs (``engine_devices``:
r's own GPU first, then the next ``tensor_parallel_size - 1``).

The pure parts (sampling-parameter mapping, output conversion, shard staging) are separate
functions, tested on CPU without vLLM.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import itertools
import os
import pickle
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from webagent_r1.config import VLLMConfig
from webagent_r1.policy.base import Completion, Engine, SamplingParams
from webagent_r1.policy.cuda_memory import CudaMemory, free_cuda_memory
from webagent_r1.policy.models import resolve_model

__all__ = [
    "INSTALL_HINT",
    "LOAD_METHOD",
    "VLLMEngine",
    "VLLMUnavailableError",
    "WeightLoaderExtension",
    "check_startup_memory",
    "choose_weight_transfer",
    "cuda_ipc_handle",
    "ipc_update_info",
    "transfer_capable",
    "engine_devices",
    "engine_kwargs",
    "max_model_len_for",
    "require_vllm",
    "version_problem",
    "sampled_logprobs",
    "sampling_kwargs",
    "save_shard",
    "iter_shard_groups",
    "shard_groups",
    "to_completion",
]

INSTALL_HINT = (
    "the vllm engine needs vLLM, which runs on CUDA GPUs only (no CPU wheel): on a GPU "
    "machine, pip install 'webagent-r1[vllm]'"
)
VLLM_VERSION = "0.27.1"
"""The vLLM release the ``vllm`` extra pins (it requires torch 2.13.0, the set-up's torch)."""
MIN_VLLM_VERSION = (0, 10, 2)
"""Oldest release with what the engine needs: V1 ``AsyncLLM.collective_rpc``,
``worker_extension_cls``, ``logprobs_mode``, ``wake_up(tags)``."""
WORKER_EXTENSION = "webagent_r1.policy.vllm.WeightLoaderExtension"
"""Qualified name of the worker extension (vLLM imports it in its worker processes)."""
LOAD_METHOD = "webagent_load_weight_shard"
"""The extension's method that ``collective_rpc`` calls on every worker."""
TRANSFER_BACKEND = "ipc"
"""vLLM's weight-transfer backend the engine asks for (CUDA IPC: trainer and engine share the
GPU)."""
TRANSFER_METHODS = ("init_weight_transfer_engine", "update_weights")
"""The ``AsyncLLM`` methods the in-GPU weight transfer needs (``transfer_capable``)."""


class VLLMUnavailableError(ImportError):
    """vLLM is not installed (or too old); the message says how to install it."""


def _release(version: str) -> tuple[int, ...]:
    """(major, minor, patch) of a version string such as '0.27.1' or '0.11.0rc2+cu130'."""
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def version_problem(version: str) -> tuple[str, str] | None:
    """What is wrong with vLLM ``version``: ('error', why) when it is too old to work,
    ('warning', why) when it is not the pinned release, None when it is the pinned one."""
    if _release(version) < MIN_VLLM_VERSION:
        least = ".".join(map(str, MIN_VLLM_VERSION))
        return (
            "error",
            f"vLLM {version} is too old for the vllm engine (needs >= {least}): "
            f"pip install 'webagent-r1[vllm]' (vLLM {VLLM_VERSION})",
        )
    if _release(version) != _release(VLLM_VERSION):
        return (
            "warning",
            f"vLLM {version} is installed; the vllm engine is written and pinned for "
            f"{VLLM_VERSION} (pip install 'webagent-r1[vllm]'); other releases may differ",
        )
    return None


def require_vllm() -> Any:
    """The ``vllm`` module, its version checked (``version_problem``).

    Raises:
        VLLMUnavailableError: vLLM is not installed (it has no CPU build) or too old.
    """
    try:
        # heavy: keeps vllm off the import path
        import vllm
    except ImportError:
        raise VLLMUnavailableError(INSTALL_HINT) from None
    problem = version_problem(str(getattr(vllm, "__version__", "0")))
    if problem is not None:
        kind, why = problem
        if kind == "error":
            raise VLLMUnavailableError(why)
        warnings.warn(why, stacklevel=2)
    return vllm


def engine_devices(local_rank: int, tensor_parallel: int, visible: Sequence[str]) -> list[str]:
    """The GPUs (``CUDA_VISIBLE_DEVICES`` entries) of local rank ``local_rank``'s engine.

    The rank's own GPU comes first (its trainer pushes weights there), then the next
    ``tensor_parallel - 1`` ones, wrapping around: with tensor parallelism several ranks'
    engines share a GPU (``vllm.gpu_memory_utilization`` is per engine).

    Args:
        local_rank: this process's rank on its machine (its GPU is ``visible[local_rank]``).
        tensor_parallel: GPUs one engine spans (``vllm.tensor_parallel_size``).
        visible: the GPUs this machine's processes see (the parent's
            ``CUDA_VISIBLE_DEVICES`` entries, or '0'..'n-1').

    Raises:
        ValueError: the rank has no GPU, or the engine needs more GPUs than are visible.
    """
    n = len(visible)
    if not 0 <= local_rank < n:
        raise ValueError(f"local rank {local_rank} has no GPU: {n} visible ({list(visible)})")
    if not 1 <= tensor_parallel <= n:
        raise ValueError(
            f"vllm.tensor_parallel_size={tensor_parallel} needs that many GPUs; {n} are visible"
        )
    return [str(visible[(local_rank + k) % n]) for k in range(tensor_parallel)]


def max_model_len_for(cfg: VLLMConfig, token_budget: int | None) -> int | None:
    """``vllm.max_model_len``, or when unset the recipe's ``train.token_budget`` (the longest
    sample the trainer takes in one micro-batch; the model's own limit, e.g. 131k tokens for
    Llama-3.1, would reserve KV cache for contexts the run never uses)."""
    if cfg.max_model_len is not None:
        return cfg.max_model_len
    return token_budget


# --------------------------------------------------------------------------------------
# Pure mapping between our types and vLLM's (tested on CPU with stand-in objects)
# --------------------------------------------------------------------------------------


def sampling_kwargs(params: SamplingParams, seed: int | None = None) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for one request of ``params``.

    Args:
        params: our sampling parameters (temperature 0 = greedy in both).
        seed: this request's seed (``row_seeds``: one per prompt of a call); None: unseeded.
    """
    return {
        "n": 1,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_new_tokens,
        "stop": list(params.stop),
        "include_stop_str_in_output": True,  # our contract: the stop string is kept
        "seed": seed,
        "logprobs": 0,  # the sampled token's log-prob only
        "skip_special_tokens": True,  # text for parsing, as HFEngine decodes it
    }


def engine_kwargs(
    model_path: str,
    cfg: VLLMConfig,
    seed: int = 0,
    known: Iterable[str] | None = None,
    *,
    needs_logprobs_mode: bool = False,
    max_model_len: int | None = None,
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.AsyncEngineArgs`` for ``cfg``.

    Args:
        model_path: a local Hugging Face model folder (``resolve_model``).
        cfg: the ``vllm`` config section.
        seed: the engine's base seed.
        known: the field names of the installed ``AsyncEngineArgs``; arguments it lacks are
            left out with a warning (None keeps all).
        needs_logprobs_mode: the caller takes the sampler's log-probs as pi_old: a vLLM
            without ``logprobs_mode`` is refused.
        max_model_len: the context length (``max_model_len_for``; default ``cfg``'s).

    Raises:
        VLLMUnavailableError: the installed vLLM has no worker extensions (too old to update
            weights in place), or no ``logprobs_mode`` when ``needs_logprobs_mode``.
    """
    kw: dict[str, Any] = {
        "model": model_path,
        "tokenizer": model_path,
        "dtype": cfg.dtype,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "max_model_len": max_model_len if max_model_len is not None else cfg.max_model_len,
        "enable_sleep_mode": cfg.enable_sleep_mode,
        "enable_prefix_caching": cfg.enable_prefix_caching,
        "enforce_eager": cfg.enforce_eager,
        "seed": seed,
        "worker_extension_cls": WORKER_EXTENSION,
        "logprobs_mode": cfg.logprobs_mode,
        "disable_log_stats": True,
    }
    if known is None:
        return kw
    names = set(known)
    if "worker_extension_cls" not in names:
        raise VLLMUnavailableError(
            "this vLLM is too old to update weights in place (no worker_extension_cls): "
            "pip install 'vllm>=0.8.5'"
        )
    if needs_logprobs_mode and "logprobs_mode" not in names:
        raise VLLMUnavailableError(
            "this vLLM has no logprobs_mode: its log-probs are taken before temperature and "
            "cannot serve as pi_old; set rl.old_logprobs=recompute or pip install "
            f"'webagent-r1[vllm]' (vLLM {VLLM_VERSION})"
        )
    dropped = sorted(k for k in kw if k not in names)
    if dropped:
        warnings.warn(
            f"the installed vLLM does not know {', '.join(dropped)}: left out "
            f"(the vllm engine is pinned for vLLM {VLLM_VERSION})",
            stacklevel=2,
        )
    return {k: v for k, v in kw.items() if k in names}


def sampled_logprobs(token_ids: Sequence[int], logprobs: Any) -> list[float]:
    """The log-prob of each sampled id from vLLM's per-position logprob entries.

    Args:
        token_ids: the sampled ids.
        logprobs: one entry per position, each a mapping id → ``Logprob`` (``.logprob``) or
            id → float, holding at least the sampled id (``logprobs=0`` returns just it).

    Raises:
        ValueError: no log-probs (the request did not ask for them), a length mismatch, or a
            position without its sampled id.
    """
    if logprobs is None:
        raise ValueError("vLLM returned no log-probs: the request must set logprobs=0")
    entries = list(logprobs)
    if len(entries) != len(token_ids):
        raise ValueError(
            f"vLLM returned {len(entries)} log-prob entries for {len(token_ids)} sampled ids"
        )
    out = []
    for pos, (tok, entry) in enumerate(zip(token_ids, entries, strict=True)):
        if tok not in entry:
            raise ValueError(f"position {pos}: the sampled id {tok} has no log-prob")
        lp = entry[tok]
        out.append(float(getattr(lp, "logprob", lp)))
    return out


def to_completion(output: Any, version: int | None = None) -> Completion:
    """Our ``Completion`` from a vLLM ``CompletionOutput`` (``token_ids``, ``logprobs``,
    ``text``, ``finish_reason``), stamped with the weight version it was sampled from.

    Raises:
        RuntimeError: vLLM aborted the request.
    """
    reason = output.finish_reason
    if reason == "abort":
        raise RuntimeError("vLLM aborted the request (engine shutting down or out of memory)")
    ids = [int(t) for t in output.token_ids]
    return Completion(
        token_ids=ids,
        logprobs=sampled_logprobs(ids, output.logprobs),
        text=output.text,
        finish_reason="length" if reason == "length" else "stop",
        weight_version=version,
    )


# --------------------------------------------------------------------------------------
# Weight staging: safetensors shards the workers load (tested on CPU)
# --------------------------------------------------------------------------------------


def iter_shard_groups(
    items: Iterable[tuple[str, torch.Tensor]], shard_bytes: int, dtype: torch.dtype | None = None
) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Split (name, tensor) pairs, in order, into groups of at most ``shard_bytes`` each (a
    larger tensor gets a group of its own); sizes counted in ``dtype`` when given. Lazy: a
    group is handed on before the next pair is taken from ``items``."""
    group: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, t in items:
        n = t.numel() * (torch.empty((), dtype=dtype).element_size() if dtype else t.element_size())
        if group and size + n > shard_bytes:
            yield group
            group, size = [], 0
        group.append((name, t))
        size += n
    if group:
        yield group


def shard_groups(
    items: Sequence[tuple[str, torch.Tensor]], shard_bytes: int, dtype: torch.dtype | None = None
) -> list[list[tuple[str, torch.Tensor]]]:
    """``iter_shard_groups`` as a list."""
    return list(iter_shard_groups(items, shard_bytes, dtype))


def save_shard(
    items: Sequence[tuple[str, torch.Tensor]], path: str | Path, dtype: torch.dtype | None = None
) -> int:
    """Write (name, tensor) pairs as one safetensors file on CPU, cast to ``dtype``.

    Tensors that share storage (tied embeddings) are written as separate copies, which
    safetensors requires.

    Returns:
        Bytes of tensor data written.
    """
    # heavy: keeps safetensors off the import path
    from safetensors.torch import save_file

    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, t in items:
        c = t.detach().to("cpu", dtype=dtype or t.dtype)
        ptr = c.untyped_storage().data_ptr()
        if ptr in seen or not c.is_contiguous():
            c = c.contiguous().clone()
        seen.add(c.untyped_storage().data_ptr())
        out[name] = c
    save_file(out, str(path))
    return sum(t.numel() * t.element_size() for t in out.values())


def staging_dir(cfg: VLLMConfig, need_bytes: int) -> Path:
    """Where shards are written: ``cfg.weight_dir``, else /dev/shm when it has room for two
    shards, else the temporary folder."""
    if cfg.weight_dir:
        path = Path(cfg.weight_dir)
        path.mkdir(parents=True, exist_ok=True)
        return path
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 2 * need_bytes:
        return shm
    return Path(tempfile.gettempdir())


class WeightLoaderExtension:
    """Mixed into vLLM's GPU worker class (``worker_extension_cls``); runs in the workers.

    ``self`` is the worker, so ``self.model_runner.model`` is its model.
    """

    def webagent_load_weight_shard(self, path: str) -> int:
        """Load one safetensors shard into the worker's model in place; returns tensors read."""
        # heavy: keeps safetensors off the import path
        from safetensors.torch import load_file

        weights = load_file(path)
        model: Any = self.model_runner.model  # type: ignore[attr-defined]
        model = getattr(model, "runnable", model)  # under a CUDA-graph wrapper in some releases
        model.load_weights(weights.items())
        return len(weights)


# --------------------------------------------------------------------------------------
# In-GPU weight transfer (vLLM's weight-transfer API, ipc backend)
# --------------------------------------------------------------------------------------


def choose_weight_transfer(cfg: VLLMConfig, known: Iterable[str]) -> tuple[str, str]:
    """How the engine will take pushed weights: ('ipc' or 'files', why).

    Args:
        cfg: ``vllm.weight_transfer`` ('auto', 'ipc', 'files') and ``tensor_parallel_size``.
        known: the installed ``AsyncEngineArgs``' field names.
    """
    if cfg.weight_transfer == "files":
        return "files", "vllm.weight_transfer=files"
    if "weight_transfer_config" not in set(known):
        return "files", "the installed vLLM has no weight-transfer API (weight_transfer_config)"
    if cfg.tensor_parallel_size != 1:
        return "files", "CUDA IPC handles reach one GPU, the engine spans several"
    return "ipc", "vLLM's in-GPU weight transfer (ipc backend)"


def transfer_capable(llm: Any) -> bool:
    """Whether ``llm`` (an ``AsyncLLM``) has the weight-transfer methods the push calls."""
    return all(callable(getattr(llm, m, None)) for m in TRANSFER_METHODS)


def cuda_ipc_handle(t: torch.Tensor) -> dict[str, Any]:
    """``t``'s CUDA IPC handle keyed by its GPU's UUID, as vLLM's ipc backend reads it (the
    receiving worker finds its own GPU by UUID: device indices differ between processes)."""
    # heavy: torch.multiprocessing loads only when this runs
    from torch.multiprocessing.reductions import reduce_tensor

    uuid_ = str(torch.cuda.get_device_properties(t.device).uuid)
    return {uuid_: reduce_tensor(t)}


def ipc_update_info(
    tensors: Sequence[tuple[str, torch.Tensor]], handle: Any = cuda_ipc_handle
) -> dict[str, Any]:
    """The ``update_info`` of one chunk for vLLM's ipc backend: names, dtype names, shapes and
    the handles, pickled and base64-encoded (a string crosses vLLM's process boundary as is;
    the workers unpickle it with ``VLLM_ALLOW_INSECURE_SERIALIZATION=1``).

    The tensors must stay alive until the workers have loaded them."""
    handles = [handle(t) for _, t in tensors]
    return {
        "names": [name for name, _ in tensors],
        "dtype_names": [str(t.dtype).removeprefix("torch.") for _, t in tensors],
        "shapes": [list(t.shape) for _, t in tensors],
        "ipc_handles_pickled": base64.b64encode(pickle.dumps(handles)).decode("ascii"),
    }


def _transfer_requests() -> tuple[Any, Any, Any] | None:
    """vLLM's (``WeightTransferConfig``, init request, update request) classes, or None when
    the installed vLLM lacks them."""
    try:
        # heavy: keeps vllm off the import path
        from vllm.config.weight_transfer import WeightTransferConfig

        # heavy: keeps vllm off the import path
        from vllm.distributed.weight_transfer.base import (
            WeightTransferInitRequest,
            WeightTransferUpdateRequest,
        )
    except ImportError:
        return None
    return WeightTransferConfig, WeightTransferInitRequest, WeightTransferUpdateRequest


# --------------------------------------------------------------------------------------
# The engine
# --------------------------------------------------------------------------------------


def check_startup_memory(mem: CudaMemory | None, cfg: VLLMConfig) -> None:
    """Refuse to start an engine that vLLM would refuse: it needs
    ``gpu_memory_utilization`` x the GPU's total free when it starts.

    Args:
        mem: the device's memory after freeing (``free_cuda_memory``); None: no CUDA here,
            nothing to check.
        cfg: the ``vllm`` section.

    Raises:
        RuntimeError: too little is free; the message says how much and what to change.
    """
    if mem is None:
        return
    need = cfg.gpu_memory_utilization * mem.total_gib
    if mem.free_gib + 1e-9 >= need:
        return
    raise RuntimeError(
        f"vLLM needs vllm.gpu_memory_utilization={cfg.gpu_memory_utilization:g} x "
        f"{mem.total_gib:.1f} GiB = {need:.1f} GiB free to start, but {mem.free_gib:.1f} GiB "
        f"is ({mem.reserved_gib:.1f} GiB held by this process, {mem.others_gib:.1f} GiB "
        "elsewhere): lower vllm.gpu_memory_utilization, set vllm.enable_sleep_mode=true, or "
        "free the GPU (webagent-r1 plan-memory -c <recipe> shows the plan)"
    )


def _visible_gpus() -> list[str]:
    """This machine's GPUs as the parent process sees them."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip():
        return [d.strip() for d in env.split(",") if d.strip()]
    return [str(i) for i in range(torch.cuda.device_count())]


@contextlib.contextmanager
def _engine_gpus(tensor_parallel: int) -> Any:
    """``CUDA_VISIBLE_DEVICES`` of this rank's engine (``engine_devices``) while its child
    processes start; the parent's own CUDA context is set up already and keeps its GPUs."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(
        engine_devices(local, tensor_parallel, _visible_gpus())
    )
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def _model_folder(name: str) -> str:
    path = resolve_model(name)
    if os.path.isfile(os.path.join(path, "adapter_config.json")):
        raise ValueError(
            f"{path} holds LoRA adapters only; vLLM needs full weights: pass the merged model "
            "(train.merge_lora_on_save=true) or the base model (the trainer pushes its weights)"
        )
    return path


class VLLMEngine(Engine):
    """Engine over an in-process vLLM ``AsyncLLM`` (its engine core runs in a child process).

    Args:
        model: registry name, local folder or hub id of the model (full weights).
        cfg: the ``vllm`` config section.
        seed: vLLM's base seed (requests with a seed use their own).
        token_budget: the recipe's ``train.token_budget``: the context length when
            ``vllm.max_model_len`` is unset (``max_model_len_for``).
        needs_logprobs_mode: refuse a vLLM without ``logprobs_mode`` (log-probs meant as
            pi_old).

    Raises:
        VLLMUnavailableError: vLLM is not installed or too old (CUDA GPUs only).
    """

    def __init__(
        self,
        model: str,
        cfg: VLLMConfig | None = None,
        *,
        seed: int = 0,
        token_budget: int | None = None,
        needs_logprobs_mode: bool = False,
    ) -> None:
        vllm = require_vllm()
        cfg = cfg or VLLMConfig()
        try:
            # heavy: keeps vllm off the import path
            from vllm.engine.arg_utils import AsyncEngineArgs

            # heavy: keeps vllm off the import path
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError:
            raise VLLMUnavailableError(
                f"vLLM {getattr(vllm, '__version__', '?')} has no V1 AsyncLLM: "
                "pip install 'vllm>=0.8.5'"
            ) from None
        path = _model_folder(model)
        known = [f.name for f in dataclasses.fields(AsyncEngineArgs)]
        kw = engine_kwargs(
            path,
            cfg,
            seed,
            known,
            needs_logprobs_mode=needs_logprobs_mode,
            max_model_len=max_model_len_for(cfg, token_budget),
        )
        transfer, why = choose_weight_transfer(cfg, known)
        classes = _transfer_requests() if transfer == "ipc" else None
        if transfer == "ipc":
            try:
                if classes is None:
                    raise ImportError("no vllm.distributed.weight_transfer")
                kw["weight_transfer_config"] = classes[0](backend=TRANSFER_BACKEND)
            except Exception as e:  # no classes, or a release without the ipc backend
                transfer, why = "files", f"vLLM's weight transfer has no ipc backend here ({e})"
            else:  # the workers unpickle the chunks' IPC handles
                os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
        if cfg.weight_transfer == "ipc" and transfer != "ipc":
            warnings.warn(f"vllm.weight_transfer=ipc: {why}; pushing through files", stacklevel=2)
        # vLLM refuses to start below gpu_memory_utilization x total free: hand back what an
        # earlier stage (BC, an evaluation) left in the caching allocator, and say what is free
        check_startup_memory(free_cuda_memory("before the vLLM engine starts"), cfg)
        with _engine_gpus(cfg.tensor_parallel_size):  # the child processes see these GPUs
            llm = AsyncLLM.from_engine_args(AsyncEngineArgs(**kw))
        extra: dict[str, Any] = {}
        try:  # only the final output of each request (no per-token streaming)
            # heavy: keeps vllm off the import path
            from vllm.sampling_params import RequestOutputKind

            extra["output_kind"] = RequestOutputKind.FINAL_ONLY
        except ImportError:  # pragma: no cover - older releases: the last output is final
            pass
        self._setup(llm, vllm.SamplingParams, cfg, extra)
        self.model_path = path
        if transfer == "ipc" and classes is not None:
            self.use_weight_transfer(classes[1], classes[2])

    @classmethod
    def from_llm(
        cls,
        llm: Any,
        sampling_cls: Any,
        cfg: VLLMConfig | None = None,
        sampling_extra: dict[str, Any] | None = None,
    ) -> VLLMEngine:
        """An engine over an already built ``AsyncLLM``-like object (and tests' stand-ins)."""
        self = cls.__new__(cls)
        self._setup(llm, sampling_cls, cfg or VLLMConfig(), sampling_extra or {})
        self.model_path = ""
        return self

    def _setup(
        self, llm: Any, sampling_cls: Any, cfg: VLLMConfig, sampling_extra: dict[str, Any]
    ) -> None:
        self.llm = llm
        self.cfg = cfg
        self._sampling_cls = sampling_cls
        self._sampling_extra = sampling_extra
        self.weight_version = 0
        """Version of the weights in force (``VersionedEngine``)."""
        self.asleep: set[str] = set()
        """What sleeps now: 'weights' and/or 'kv_cache' (``wake_up(tags)`` wakes part)."""
        self.generated_tokens = 0
        """Completion tokens sampled so far."""
        self.synced_bytes = 0
        """Weight bytes handed to the workers so far."""
        self.transfer = "files"
        """How the next push goes: 'ipc' (``use_weight_transfer``) or 'files'."""
        self.push_path: str | None = None
        """How the last push went: 'ipc', or 'files' (also after an ipc push fell back)."""
        self.transfer_failures = 0
        """In-GPU transfers that failed (each falls back to files for good)."""
        self._requests: tuple[Any, Any] | None = None
        self._ipc_handle: Any = cuda_ipc_handle
        self._transfer_ready = False
        self._ids = itertools.count()
        self._prefix = uuid.uuid4().hex[:8]
        self._inflight = 0
        self._idle = asyncio.Event()  # set while no generate call is in flight
        self._idle.set()
        self._open = asyncio.Event()  # cleared while weights change or the engine sleeps
        self._open.set()
        self._changing = asyncio.Lock()  # one weight update / sleep / wake-up at a time

    def use_weight_transfer(
        self, init_request: Any, update_request: Any, handle: Any = cuda_ipc_handle
    ) -> bool:
        """Push through vLLM's in-GPU weight transfer from now on, where the engine has it
        (``transfer_capable``); otherwise keep the files.

        Args:
            init_request: vLLM's ``WeightTransferInitRequest`` class (``init_info=``).
            update_request: vLLM's ``WeightTransferUpdateRequest`` class (``update_info=``).
            handle: a tensor's IPC handle (``cuda_ipc_handle``; tests pass a stand-in).

        Returns:
            Whether the transfer is in use.
        """
        if not transfer_capable(self.llm):
            self.transfer = "files"
            return False
        self._requests = (init_request, update_request)
        self._ipc_handle = handle
        self.transfer = "ipc"
        return True

    takes_weight_stream = True
    """``update_weights`` consumes (name, tensor) pairs lazily (``WeightSync`` streams them)."""

    @property
    def weight_dtype(self) -> torch.dtype | None:
        """The dtype weights are staged in (``vllm.dtype``; None for 'auto')."""
        return None if self.cfg.dtype == "auto" else getattr(torch, self.cfg.dtype)

    @property
    def sleeps(self) -> bool:
        """Whether the trainer should put the engine to sleep during updates."""
        return self.cfg.enable_sleep_mode

    # ---------------------------------------------------------------- Engine

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt (row b seeded with ``params.seed + b``).

        Waits while the weights are being updated or the engine sleeps; every completion of
        the call comes from the one weight version stamped on it.
        """
        # heavy: keeps transformers off the import path
        from webagent_r1.policy.hf import row_seeds

        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        while not self._open.is_set():  # closed again by the time this waiter runs: wait on
            await self._open.wait()
        self._inflight += 1
        self._idle.clear()
        version = self.weight_version
        seeds = row_seeds(params, len(prompts))
        try:
            outs = await asyncio.gather(
                *(self._one(p, params, s) for p, s in zip(prompts, seeds, strict=True))
            )
        finally:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()
        comps = [to_completion(o, version) for o in outs]
        self.generated_tokens += sum(len(c.token_ids) for c in comps)
        return comps

    async def _one(self, prompt: list[int], params: SamplingParams, seed: int | None) -> Any:
        sp = self._sampling_cls(**sampling_kwargs(params, seed), **self._sampling_extra)
        request_id = f"webagent-{self._prefix}-{next(self._ids)}"
        final = None
        async for out in self.llm.generate({"prompt_token_ids": list(prompt)}, sp, request_id):
            final = out
        if final is None or not final.outputs:
            raise RuntimeError(f"vLLM returned no output for request {request_id}")
        return final.outputs[0]

    # ---------------------------------------------------------------- weights

    async def update_weights(
        self,
        weights: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]],
        version: int | None = None,
    ) -> None:
        """Load new weights into every worker in place and set ``weight_version``.

        Args:
            weights: a state dict or (name, tensor) pairs, Hugging Face names (the model's
                ``load_weights`` maps them); any device and dtype (cast to ``vllm.dtype``).
            version: the new version (default: one more than now).

        Raises:
            RuntimeError: the engine is asleep (call ``wake_up`` first).
        """
        items = iter(weights.items()) if isinstance(weights, Mapping) else iter(weights)
        dtype = self.weight_dtype
        shard_bytes = self.cfg.shard_mb * 2**20
        async with self._changing:
            if "weights" in self.asleep:
                raise RuntimeError(
                    "the vLLM engine's weights are asleep: call wake_up(['weights']) before "
                    "update_weights()"
                )
            self._open.clear()
            try:
                await self._update(items, dtype, shard_bytes, version)
            finally:
                if not self.asleep:  # a KV cache still asleep keeps generation waiting
                    self._open.set()

    async def _update(
        self,
        items: Iterator[tuple[str, torch.Tensor]],
        dtype: torch.dtype | None,
        shard_bytes: int,
        version: int | None,
    ) -> None:
        """Hand the chunks over (in-GPU transfer, else staged shards), have every worker load
        them, reset the prefix cache (gate closed)."""
        await self._idle.wait()  # requests in flight finish on the old weights
        via_ipc = self.transfer == "ipc" and await self._ipc_begin()
        files = False
        folder: Path | None = None
        # groups formed as the stream is consumed: at most one shard's tensors held at once
        # (no enumerate: its reused result tuple would keep the previous group alive)
        numbers = itertools.count()
        for group in iter_shard_groups(items, shard_bytes, dtype):
            k = next(numbers)
            if via_ipc:
                try:
                    await self._ipc_send(group, dtype)
                    group.clear()
                    del group
                    continue
                except Exception as e:  # this chunk and the rest go through files
                    self._ipc_failed(f"sending chunk {k}", e)
                    via_ipc = False
                    await self._ipc_end()  # the chunks sent so far in force, or a stop
            files = True
            folder = folder or staging_dir(self.cfg, shard_bytes)
            path = folder / f"webagent-weights-{self._prefix}-{os.getpid()}-{k}.safetensors"
            try:
                self.synced_bytes += await asyncio.to_thread(save_shard, group, path, dtype)
                # emptied now: the worker thread's finished call may still hold the list
                group.clear()
                await self.llm.collective_rpc(LOAD_METHOD, args=(str(path),))
            finally:
                path.unlink(missing_ok=True)
            del group  # freed before the stream gathers the next shard
        if via_ipc:
            await self._ipc_end()
        self.push_path = "files" if files or not via_ipc else "ipc"
        if "kv_cache" not in self.asleep:  # (an asleep cache is dropped: nothing to reset)
            await self._reset_prefix_cache()  # cached KV came from the old weights
        self.weight_version = self.weight_version + 1 if version is None else version

    async def _ipc_begin(self) -> bool:
        """Set the transfer up (once) and open an update; False (and files from now on) when
        vLLM refuses."""
        assert self._requests is not None
        try:
            if not self._transfer_ready:
                await self.llm.init_weight_transfer_engine(self._requests[0](init_info={}))
                self._transfer_ready = True
            start = getattr(self.llm, "start_weight_update", None)  # newer releases only
            if callable(start):
                await start()
        except Exception as e:
            self._ipc_failed("setting the transfer up", e)
            return False
        return True

    async def _ipc_send(self, group: list[tuple[str, torch.Tensor]], dtype: Any) -> None:
        """One chunk through vLLM's ipc backend: the cast tensors stay alive until every
        worker has loaded them (``update_weights`` returns after the workers)."""
        assert self._requests is not None
        tensors = [(n, t.detach().to(dtype or t.dtype).contiguous()) for n, t in group]
        info = ipc_update_info(tensors, self._ipc_handle)
        await self.llm.update_weights(self._requests[1](update_info=info))
        self.synced_bytes += sum(t.numel() * t.element_size() for _, t in tensors)
        del tensors

    async def _ipc_end(self) -> None:
        """Close the update where the release has ``finish_weight_update``.

        Raises:
            RuntimeError: vLLM did not finish it. The chunks sent in-GPU may not be in force
                (the finish step runs vLLM's post-load processing) and the stream they came
                from is spent, so no fallback can resend them: the run stops rather than
                sample from weights nobody knows.
        """
        finish = getattr(self.llm, "finish_weight_update", None)
        if not callable(finish):
            return
        try:
            await finish()
        except Exception as e:
            self._ipc_failed("finishing the update", e)
            raise RuntimeError(
                f"vLLM did not finish the in-GPU weight update ({type(e).__name__}: {e}); its "
                "weights are unknown, so the run stops: resume from the last checkpoint with "
                "vllm.weight_transfer=files"
            ) from e

    def _ipc_failed(self, stage: str, err: BaseException) -> None:
        """Warn, and push through files from now on."""
        self.transfer_failures += 1
        self.transfer = "files"
        warnings.warn(
            f"vLLM's in-GPU weight transfer failed {stage} ({type(err).__name__}: {err}): "
            "pushing through files from now on",
            stacklevel=3,
        )

    async def _reset_prefix_cache(self) -> None:
        """Drop the prefix cache; vLLM refuses (returns False) while requests hold blocks.

        Raises:
            RuntimeError: still refused after the requests in flight finished.
        """
        for _ in range(3):
            if await self.llm.reset_prefix_cache() is not False:
                return
            await self._idle.wait()
            await asyncio.sleep(0.05)
        raise RuntimeError(
            "vLLM refused to reset its prefix cache after a weight update: cached KV from "
            "the old weights would be reused (set vllm.enable_prefix_caching=false)"
        )

    @property
    def sleeping(self) -> bool:
        """Whether any part of the engine sleeps (no generation until all of it is awake)."""
        return bool(self.asleep)

    # ---------------------------------------------------------------- GPU sharing

    async def sleep(self, level: int | None = None) -> None:
        """Free vLLM's GPU memory (``vllm.enable_sleep_mode``) after the requests in flight.

        Args:
            level: 1 offloads the weights to CPU memory, 2 drops them (default
                ``vllm.sleep_level``; 2 suits training, whose push overwrites them anyway);
                the KV cache is dropped either way.
        """
        if not self.cfg.enable_sleep_mode:
            raise RuntimeError("sleep() needs vllm.enable_sleep_mode=true when the engine starts")
        async with self._changing:
            if self.sleeping:
                return
            self._open.clear()
            try:
                await self._idle.wait()
                await self.llm.sleep(level or self.cfg.sleep_level)
            except BaseException:
                self._open.set()
                raise
            self.asleep = {"weights", "kv_cache"}

    async def wake_up(self, tags: Sequence[str] | None = None) -> None:
        """Take GPU memory back: ``tags`` 'weights' and/or 'kv_cache' (None: both).

        Training wakes the weights, pushes, then wakes the KV cache: the push's gathers never
        share the GPU with a KV cache. Generation resumes once both are awake (after the
        weight sync, for level 2).
        """
        want = set(tags) if tags is not None else {"weights", "kv_cache"}
        unknown = want - {"weights", "kv_cache"}
        if unknown:
            raise ValueError(f"wake_up tags must be 'weights' or 'kv_cache', got {sorted(unknown)}")
        async with self._changing:
            todo = sorted(want & self.asleep, reverse=True)  # weights before kv_cache
            if not todo:
                return
            await self.llm.wake_up(tags=todo)
            self.asleep -= set(todo)
            if not self.asleep:
                self._open.set()

    def close(self) -> None:
        """Shut the engine core down (its process and GPU memory)."""
        self.llm.shutdown()
