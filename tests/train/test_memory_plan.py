"""The memory plan: parameter counts, hand-computed parts, and every GPU recipe fits."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from webagent_r1.config import load_config
from webagent_r1.train.memory_plan import (
    GIB,
    KNOWN_SHAPES,
    OVERHEAD_GIB,
    ModelShape,
    format_plan,
    plan_memory,
    shape_for,
)

ROOT = Path(__file__).resolve().parents[2]
TOY = ModelShape(hidden=8, layers=2, intermediate=16, heads=2, kv_heads=1, vocab=32, tied=False)


def test_parameter_counts_match_the_published_models() -> None:
    # the counts Hugging Face reports for these checkpoints
    assert KNOWN_SHAPES["llama-3.1-8b-instruct"].params == 8_030_261_248
    assert KNOWN_SHAPES["qwen2.5-3b-instruct"].params == 3_085_938_688
    assert KNOWN_SHAPES["smollm2-135m-instruct"].params == 134_515_008


def test_shape_of_a_local_folder_and_of_an_unknown_name(tiny_dir: Path) -> None:
    from transformers import AutoModelForCausalLM

    s = shape_for(str(tiny_dir))
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    assert s.params == sum(p.numel() for p in model.parameters())
    with pytest.raises(ValueError, match="no shape known"):
        shape_for("no-such-model")


def _toy_cfg(*extra: str):
    return load_config(
        None,
        [
            "model.device=cuda",
            "model.dtype=float32",
            "model.autocast_bf16=true",
            "train.token_budget=64",
            "train.gradient_checkpointing=false",
            "rollout.max_new_tokens=16",
            "rollout.max_batch_size=4",
            "rl.beta=0.1",
            *extra,
        ],
    )


def test_hand_computed_plan_of_a_toy_model() -> None:
    # by hand: kv width 4; a layer 64+32+32+64 (attention) + 3*128 (MLP) + 16 (norms) = 592;
    # all: 2*32*8 (embeddings, untied head) + 2*592 + 8 (final norm) = 1704 parameters
    assert TOY.params == 1704
    plan = plan_memory(_toy_cfg(), gpus=1, gpu_mem_gib=2.0, shape=TOY)
    b = {k: getattr(plan, k) * GIB for k in ("parameters", "gradients", "optimizer")}
    assert b == {"parameters": 6816, "gradients": 6816, "optimizer": 13632}  # fp32, AdamW: 2x
    assert plan.reference * GIB == 3408  # a bf16 copy on a GPU
    assert plan.sampler_copy == 0 and plan.vllm_share == 0 and plan.push_buffer == 0
    # activations per token and layer: bf16 2*(4*8 + 2*4 + 4*16) = 208, fp32 norm inputs
    # 4*2*8 = 64, fp32 residual 4*2*8 = 64 -> 336; 64 tokens * 2 layers * 336 = 43008;
    # logits at min(64, 1 row * 16) completion positions * 32 * (2 + 4 + 4) bytes = 5120
    assert plan.activations * GIB == 43008 + 5120
    assert plan.rollout_kv * GIB == 4 * 64 * 2 * 2 * 4 * 2  # rows, ctx, layers, k+v, kv, bf16
    over = OVERHEAD_GIB * GIB
    assert plan.update_peak * GIB == pytest.approx(6816 + 6816 + 13632 + 3408 + 48128 + over)
    assert plan.rollout_peak * GIB == pytest.approx(6816 + 13632 + 3408 + 8192 + over)
    assert plan.fits and "fits" in format_plan(plan)
    assert not plan_memory(_toy_cfg(), 1, 1.5, shape=TOY).fits  # the overhead alone: 1.5 GiB


def test_lora_sharding_and_vllm_parts() -> None:
    lora = plan_memory(
        _toy_cfg("train.lora_r=2", "train.lora_target_modules=[q_proj,v_proj]"), 1, 1.0, TOY
    )
    # A and B of q (8x8) and v (8x4) on 2 layers: 2 * (2*(8+8) + 2*(8+4)) = 112
    assert lora.trainable_b * 1e9 == pytest.approx(112)
    assert lora.gradients * GIB == 112 * 4 and lora.reference == 0  # adapters disabled
    fsdp = plan_memory(_toy_cfg("train.sharding=fsdp"), 4, 1.0, TOY)
    assert fsdp.parameters * GIB == 6816 / 4 and fsdp.optimizer * GIB == 13632 / 4
    assert fsdp.sampler_copy * GIB == 3408  # the HF engine samples from a full bf16 copy
    # bf16 gathers (mixed precision): two layers and the root (embeddings, head, final norm:
    # 1704 - 2*592 = 520 parameters); one unit's bf16 gradient and its fp32 copy: 592 * 6
    assert fsdp.fsdp_gather * GIB == (2 * 592 + 520) * 2
    assert fsdp.grad_reduce * GIB == 592 * (2 + 4)
    fp32 = plan_memory(_toy_cfg("train.sharding=fsdp", "model.autocast_bf16=false"), 4, 1.0, TOY)
    assert fp32.fsdp_gather * GIB == (2 * 592 + 520) * 4 and fp32.grad_reduce * GIB == 592 * 4
    assert fsdp.push_buffer * GIB == 32 * 8 * 6  # the embeddings, fp32 gathered + bf16 cast
    v = plan_memory(
        _toy_cfg("train.generation_engine=vllm", "vllm.gpu_memory_utilization=0.5"), 1, 2.0, TOY
    )
    assert v.vllm_share == 1.0 and v.rollout_kv == 0
    assert v.update_peak - plan_memory(_toy_cfg(), 1, 2.0, TOY).update_peak == pytest.approx(1.0)
    asleep = plan_memory(
        _toy_cfg("train.generation_engine=vllm", "vllm.enable_sleep_mode=true"), 1, 2.0, TOY
    )
    assert asleep.update_peak == pytest.approx(plan_memory(_toy_cfg(), 1, 2.0, TOY).update_peak)
    with pytest.raises(ValueError, match="gpus"):
        plan_memory(_toy_cfg(), 0, 1.0, TOY)


def test_the_reference_is_sharded_and_the_push_holds_a_chunk() -> None:
    # the bf16 reference of 1704 parameters (3408 bytes) whole on one GPU, 1/4 on each of 4
    assert plan_memory(_toy_cfg(), 1, 2.0, TOY).reference * GIB == 3408
    fsdp = plan_memory(_toy_cfg("train.sharding=fsdp"), 4, 1.0, TOY)
    assert fsdp.reference * GIB == 3408 / 4 and fsdp.push_path == "copy"
    # vLLM: the embeddings gathered in fp32 and cast (32*8*6), plus the chunk handed over:
    # vllm.shard_mb, here more than all weights in bf16 (3408)
    v = plan_memory(_toy_cfg("train.generation_engine=vllm"), 1, 2.0, TOY)
    assert v.push_buffer * GIB == 32 * 8 * 6 + 3408 and v.push_path == "ipc"
    files = plan_memory(
        _toy_cfg("train.generation_engine=vllm", "vllm.weight_transfer=files"), 1, 2.0, TOY
    )
    assert files.push_path == "files" and files.push_buffer == v.push_buffer
    tp = plan_memory(
        _toy_cfg("train.generation_engine=vllm", "vllm.tensor_parallel_size=2"), 1, 2.0, TOY
    )
    assert tp.push_path == "files"  # CUDA IPC handles reach one GPU
    assert "push path     ipc" in format_plan(v)
    qwen = load_config(str(ROOT / "configs" / "gpu" / "qwen2.5-3b-r1.yaml"), [])
    # 3B: the 151936 x 2048 embeddings in fp32 + bf16, and one 512 MB chunk
    want = 151936 * 2048 * 6 + 512 * 2**20
    assert plan_memory(qwen, 1, 79.0).push_buffer * GIB == pytest.approx(want)


def test_the_gradient_all_reduce_holds_one_bucket() -> None:
    one = plan_memory(_toy_cfg(), 1, 2.0, TOY)
    two = plan_memory(_toy_cfg(), 2, 2.0, TOY)
    assert one.grad_reduce == 0 and two.grad_reduce * GIB == 6816  # all grads fit one bucket
    assert two.update_peak - one.update_peak == pytest.approx(6816 / GIB)
    qwen = load_config(str(ROOT / "configs" / "gpu" / "qwen2.5-3b-r1.yaml"), [])
    # 3B's 12.3 GB of fp32 gradients: one 256 MB bucket, not the old flat copy and clones
    assert plan_memory(qwen, 8, 79.0).grad_reduce == pytest.approx(256 / 1024)
    small = load_config(
        str(ROOT / "configs" / "gpu" / "qwen2.5-3b-r1.yaml"), ["dist.grad_bucket_mb=64"]
    )
    assert plan_memory(small, 8, 79.0).grad_reduce == pytest.approx(64 / 1024)


def _header_commands(path: Path) -> list[list[str]]:
    """Overrides of each ``accelerate launch`` command in a recipe's header comment."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("#") and "accelerate launch" in line:
            out.append([t for t in shlex.split(line.lstrip("# ")) if "=" in t])
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "gpu").glob("*.yaml")), ids=str)
def test_every_gpu_recipe_fits_what_its_header_says(path: Path) -> None:
    header = path.read_text().split("\n", 4)[:4]
    assert any("on one GPU" in line for line in header), "the header names its GPU count"
    plan = plan_memory(load_config(str(path), []), gpus=1, gpu_mem_gib=79.0)
    assert plan.fits, format_plan(plan)
    for overrides in _header_commands(path):  # the documented multi-GPU command: 8 x 80 GB
        if "train.lora_r=0" in overrides:
            assert any(o.startswith("bc.lr=") for o in overrides), "full FT needs its own bc.lr"
        plan = plan_memory(load_config(str(path), overrides), gpus=8, gpu_mem_gib=79.0)
        assert plan.fits, format_plan(plan)


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "gpu").glob("*.yaml")), ids=str)
def test_every_gpu_recipe_samples_with_a_sleeping_vllm(path: Path) -> None:
    cfg = load_config(str(path), [])
    assert cfg.train.generation_engine == "vllm"  # HF sampling: hours a step on a GPU
    assert cfg.vllm.enable_sleep_mode  # awake during the update it would not fit beside it
    plan = plan_memory(cfg, gpus=1, gpu_mem_gib=79.0)
    awake = plan_memory(load_config(str(path), ["vllm.enable_sleep_mode=false"]), 1, 79.0)
    assert awake.update_peak - plan.update_peak == pytest.approx(0.3 * 79.0)


def test_fp32_frozen_copies_would_not_fit_8b_on_eight_gpus() -> None:
    path = ROOT / "configs" / "gpu" / "llama3.1-8b-r1.yaml"
    [overrides] = _header_commands(path)
    hf = [*overrides, "model.autocast_bf16=false", "train.generation_engine=hf"]  # a copy each
    bad = plan_memory(load_config(str(path), hf), 8, 79.0)
    assert bad.sampler_copy == pytest.approx(8_030_261_248 * 4 / GIB)
    assert bad.reference == pytest.approx(8_030_261_248 * 4 / 8 / GIB)  # sharded like the policy
    assert not bad.fits


def test_plan_memory_command() -> None:
    import json
    import subprocess
    import sys

    def cli(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "webagent_r1.cli", "plan-memory", *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)

    cfg = "configs/gpu/qwen2.5-3b-r1.yaml"
    out = cli("-c", cfg, "--gpus", "1", "--gpu-mem-gb", "80", "--json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["fits"] and plan["model"] == "qwen2.5-3b-instruct" and plan["gpus"] == 1
    small = cli("-c", cfg, "--gpu-mem-gb", "40")  # does not fit: said, exit 1
    assert small.returncode == 1 and "does NOT fit" in small.stdout
    bad = cli("model.name=no-such-model")
    assert bad.returncode == 2 and "no shape known" in bad.stderr
    assert "Traceback" not in bad.stderr
