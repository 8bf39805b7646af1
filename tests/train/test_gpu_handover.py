"""Stage hand-over on a GPU, with CUDA faked: memory freed and measured before the vLLM engine
starts, and ``train`` refusing a recipe whose memory plan does not fit, before any stage."""

from __future__ import annotations

import dataclasses
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from webagent_r1.config import ConfigError, VLLMConfig, load_config
from webagent_r1.policy import cuda_memory as cm
from webagent_r1.policy.cuda_memory import GIB, CudaMemory, free_cuda_memory
from webagent_r1.policy.vllm import VLLMEngine, check_startup_memory
from webagent_r1.train import recipe
from webagent_r1.train.memory_plan import MemoryPlanError

ROOT = Path(__file__).resolve().parents[2]
devices: list[int | None] = []
QWEN = str(ROOT / "configs" / "gpu" / "qwen2.5-3b-r1.yaml")


def fake_cuda(
    monkeypatch: pytest.MonkeyPatch, calls: list[str], free: float, total: float, reserved=0.0
) -> None:
    """CUDA functions that record their calls (and in ``devices`` the device asked
    about); memory in GiB."""
    devices.clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("synchronize"))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))

    def mem_get_info(*a: Any) -> tuple[int, int]:
        calls.append("mem_get_info")
        devices.append(a[0] if a else None)
        return int(free * GIB), int(total * GIB)

    monkeypatch.setattr(torch.cuda, "mem_get_info", mem_get_info)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: int(reserved * GIB))
    monkeypatch.setattr(cm.gc, "collect", lambda *a: calls.append("gc") or 0)


def test_without_cuda_only_garbage_is_collected(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(cm.gc, "collect", lambda *a: calls.append("gc") or 0)
    lines: list[str] = []
    assert free_cuda_memory("before M-GRPO", lines.append) is None
    assert calls == ["gc"] and lines == []


def test_freeing_collects_then_empties_the_cache_then_measures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    fake_cuda(monkeypatch, calls, free=60.0, total=80.0, reserved=4.0)
    lines: list[str] = []
    mem = free_cuda_memory("before M-GRPO", lines.append)
    assert calls == ["gc", "synchronize", "empty_cache", "mem_get_info"]
    assert mem == CudaMemory(60.0, 80.0, 4.0) and mem.others_gib == pytest.approx(16.0)
    assert lines == [
        "cuda memory before M-GRPO: 60.0 GiB free of 80.0 GiB (4.0 GiB reserved by this "
        "process, 16.0 GiB held elsewhere)"
    ]


def test_an_engine_vllm_would_refuse_is_refused_with_the_fix() -> None:
    cfg = VLLMConfig(gpu_memory_utilization=0.3)
    check_startup_memory(None, cfg)  # no CUDA: nothing to check
    check_startup_memory(CudaMemory(24.0, 80.0, 0.0), cfg)  # 0.3 x 80 = 24: enough
    with pytest.raises(RuntimeError, match="enable_sleep_mode") as e:
        check_startup_memory(CudaMemory(23.0, 80.0, 10.0), cfg)
    assert "24.0 GiB free" in str(e.value) and "\n" not in str(e.value)


def _fake_vllm(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    """A ``vllm`` package with what ``VLLMEngine.__init__`` imports; starting records."""

    @dataclasses.dataclass
    class AsyncEngineArgs:
        model: str = ""
        tokenizer: str = ""
        dtype: str = ""
        gpu_memory_utilization: float = 0.0
        tensor_parallel_size: int = 1
        max_model_len: int | None = None
        enable_sleep_mode: bool = False
        enable_prefix_caching: bool = True
        enforce_eager: bool = False
        seed: int = 0
        worker_extension_cls: str = ""
        logprobs_mode: str = ""
        disable_log_stats: bool = True

    class AsyncLLM:
        @classmethod
        def from_engine_args(cls, args: Any) -> AsyncLLM:
            calls.append("engine starts")
            return cls()

    mods = {
        "vllm": types.SimpleNamespace(__version__="0.27.1", SamplingParams=dict),
        "vllm.engine": types.ModuleType("vllm.engine"),
        "vllm.engine.arg_utils": types.SimpleNamespace(AsyncEngineArgs=AsyncEngineArgs),
        "vllm.v1": types.ModuleType("vllm.v1"),
        "vllm.v1.engine": types.ModuleType("vllm.v1.engine"),
        "vllm.v1.engine.async_llm": types.SimpleNamespace(AsyncLLM=AsyncLLM),
        "vllm.sampling_params": types.SimpleNamespace(
            RequestOutputKind=types.SimpleNamespace(FINAL_ONLY=2)
        ),
    }
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")


def test_memory_is_freed_and_checked_before_the_vllm_engine_starts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[str] = []
    _fake_vllm(monkeypatch, calls)
    (tmp_path / "config.json").write_text("{}")
    fake_cuda(monkeypatch, calls, free=30.0, total=80.0)
    VLLMEngine(str(tmp_path), VLLMConfig(gpu_memory_utilization=0.3))
    assert calls == ["gc", "synchronize", "empty_cache", "mem_get_info", "engine starts"]
    calls.clear()
    fake_cuda(monkeypatch, calls, free=20.0, total=80.0)  # BC's blocks still held elsewhere
    with pytest.raises(RuntimeError, match="24.0 GiB free to start"):
        VLLMEngine(str(tmp_path), VLLMConfig(gpu_memory_utilization=0.3))
    assert "engine starts" not in calls


# ---------------------------------------------------------------- train's memory check


def _gpu_cfg(*extra: str):
    return load_config(
        QWEN, ["train.generation_engine=vllm", "vllm.enable_sleep_mode=true", *extra]
    )


def test_train_refuses_a_recipe_whose_plan_does_not_fit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[str] = []
    fake_cuda(monkeypatch, calls, free=40.0, total=40.0)  # a 40 GiB card
    with pytest.raises(MemoryPlanError) as e:
        recipe.check_device_memory(_gpu_cfg())
    msg = str(e.value)
    assert isinstance(e.value, ConfigError)  # the CLI prints it as one line, no traceback
    assert "does not fit the 40.0 GiB available" in msg and "train.memory_check=false" in msg
    table = e.value.table.splitlines()
    assert any(line.strip().startswith("update_peak") for line in table)
    assert "does NOT fit" in table[-1] and "\n" not in msg
    assert e.value.table in capsys.readouterr().err  # the table is printed before the error
    # an 80 GB card fits; another process holding 30 GiB of it does not
    fake_cuda(monkeypatch, calls, free=79.0, total=79.0)
    plan = recipe.check_device_memory(_gpu_cfg())
    assert plan is not None and plan.fits and plan.gpu_mem_gib == 79.0
    fake_cuda(monkeypatch, calls, free=49.0, total=79.0)
    with pytest.raises(MemoryPlanError, match="30.0 GiB of it held by other processes"):
        recipe.check_device_memory(_gpu_cfg())
    # rank 3 of a launch asks its own GPU (the group has not set the device yet)
    monkeypatch.setenv("LOCAL_RANK", "3")
    fake_cuda(monkeypatch, calls, free=79.0, total=79.0)
    recipe.check_device_memory(_gpu_cfg())
    assert devices == [3]
    # skipped: switched off, no M-GRPO stage, a CPU run
    assert recipe.check_device_memory(_gpu_cfg("train.memory_check=false")) is None
    assert recipe.check_device_memory(_gpu_cfg("rl.steps=0")) is None
    assert recipe.check_device_memory(_gpu_cfg("model.device=cpu")) is None


def test_without_cuda_the_check_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert recipe.check_device_memory(_gpu_cfg()) is None


class _Stop(Exception):
    pass


def test_train_checks_before_any_stage_and_frees_between_bc_and_mgrpo(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import webagent_r1.train.bc as bc
    import webagent_r1.train.rl as rl

    calls: list[str] = []
    fake_cuda(monkeypatch, calls, free=79.0, total=79.0)
    monkeypatch.setattr(recipe, "ensure_demos", lambda *a, **k: calls.append("demos"))
    res = types.SimpleNamespace(checkpoint=tmp_path / "bc", heldout_loss=0.0)
    monkeypatch.setattr(bc, "train_bc", lambda *a, **k: calls.append("bc") or res)

    async def train_rl(*a: Any, **k: Any) -> None:
        calls.append("rl")
        raise _Stop

    monkeypatch.setattr(rl, "train_rl", train_rl)
    cfg = _gpu_cfg(f"run_dir={tmp_path / 'run'}", "rl.eval_base=false", "rl.eval_tasks=2")
    with pytest.raises(_Stop):
        recipe.run_recipe(cfg, progress=False)
    assert calls.index("mem_get_info") < calls.index("demos") < calls.index("bc")
    between = calls[calls.index("bc") : calls.index("rl")]
    assert between[1:] == ["gc", "synchronize", "empty_cache", "mem_get_info"]
    # a recipe too large for the card stops before the demonstrations
    calls.clear()
    fake_cuda(monkeypatch, calls, free=30.0, total=30.0)
    with pytest.raises(MemoryPlanError):
        recipe.run_recipe(dataclasses.replace(cfg, run_dir=str(tmp_path / "r2")), progress=False)
    assert "demos" not in calls and "bc" not in calls
