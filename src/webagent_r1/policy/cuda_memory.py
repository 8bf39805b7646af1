"""Free GPU memory between stages and measure what is left, before a GPU engine starts.

BC and M-GRPO run in one process: BC's tensors are gone when its stage returns, but PyTorch's
caching allocator keeps their blocks reserved, and vLLM refuses to start when the free memory
is below ``vllm.gpu_memory_utilization`` x the GPU's total. ``free_cuda_memory`` collects
garbage (BC's model and optimizer sit in reference cycles), hands the cached blocks back to
the driver (``torch.cuda.empty_cache``) and prints one line with the free memory, so a
refused engine start can be told apart from a leak. On a machine without CUDA it only
collects garbage.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["GIB", "CudaMemory", "cuda_memory", "free_cuda_memory"]

GIB = 2**30


@dataclass(frozen=True)
class CudaMemory:
    """What the current CUDA device has, in GiB."""

    free_gib: float
    """Free on the device (``torch.cuda.mem_get_info``): every process's use subtracted."""
    total_gib: float
    """The device's memory."""
    reserved_gib: float
    """Held by this process's caching allocator (``torch.cuda.memory_reserved``)."""

    @property
    def others_gib(self) -> float:
        """Held by anything but this process's allocator: other processes, CUDA contexts."""
        return max(0.0, self.total_gib - self.free_gib - self.reserved_gib)

    def line(self, what: str) -> str:
        """One log line: free memory ``what`` (e.g. 'before the vLLM engine starts')."""
        return (
            f"cuda memory {what}: {self.free_gib:.1f} GiB free of {self.total_gib:.1f} GiB "
            f"({self.reserved_gib:.1f} GiB reserved by this process, "
            f"{self.others_gib:.1f} GiB held elsewhere)"
        )


def cuda_memory(device: int | None = None) -> CudaMemory | None:
    """A CUDA device's free, total and reserved memory; None without CUDA.

    Args:
        device: its index (None: the current device). Before the process group sets each
            rank's device, pass ``LOCAL_RANK``: otherwise every rank asks GPU 0 and opens a
            CUDA context there.
    """
    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info(device)
    return CudaMemory(free / GIB, total / GIB, torch.cuda.memory_reserved(device) / GIB)


def free_cuda_memory(what: str, say: Callable[[str], None] | None = None) -> CudaMemory | None:
    """Collect garbage, return the allocator's cached blocks to the driver, report the rest.

    Args:
        what: where this happens, for the log line ('before the vLLM engine starts').
        say: where the line goes (default: standard error).

    Returns:
        The memory after freeing; None without CUDA (then only garbage is collected).
    """
    gc.collect()  # a finished stage's model and optimizer are often held by reference cycles
    if not torch.cuda.is_available():
        return None
    torch.cuda.synchronize()  # kernels still using freed blocks finish first
    torch.cuda.empty_cache()
    mem = cuda_memory()
    assert mem is not None
    (say or _to_stderr)(mem.line(what))
    return mem


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
