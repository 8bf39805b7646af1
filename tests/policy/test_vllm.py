"""The vLLM engine without vLLM: the install guard, the pure mappings, the engine's weight
updates and versions over a stand-in AsyncLLM, and the GPU check's CPU-side math."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from tests.support.fake_vllm import FakeAsyncLLM, logprob_entry, vllm_output

from webagent_r1.config import ConfigError, VLLMConfig, load_config
from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.policy.vllm import (
    LOAD_METHOD,
    WORKER_EXTENSION,
    VLLMEngine,
    VLLMUnavailableError,
    WeightLoaderExtension,
    engine_devices,
    engine_kwargs,
    max_model_len_for,
    sampled_logprobs,
    sampling_kwargs,
    save_shard,
    shard_groups,
    to_completion,
    version_problem,
)


@pytest.fixture
def no_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # `import vllm` raises ImportError


# ---------------------------------------------------------------- the install guard


def test_without_vllm_the_engine_says_how_to_install_it(no_vllm) -> None:
    with pytest.raises(VLLMUnavailableError) as e:
        VLLMEngine("smollm2-135m-instruct")
    msg = str(e.value)
    assert "pip install 'webagent-r1[vllm]'" in msg and "CUDA GPU" in msg and "\n" not in msg
    assert isinstance(e.value, ImportError)
    from webagent_r1.checks.vllm import main
    from webagent_r1.cli import user_error_types

    assert VLLMUnavailableError in user_error_types()  # the CLI prints it as one line
    assert main(["engine"]) == 2  # the GPU check stops before loading anything


async def test_eval_and_training_choose_vllm_by_name(no_vllm) -> None:
    from webagent_r1.evaluation.run import ENGINES, _setup
    from webagent_r1.train.rl import generation_engine

    assert "vllm" in ENGINES
    cfg = load_config(None, ["train.generation_engine=vllm", "vllm.gpu_memory_utilization=0.5"])
    assert cfg.vllm.gpu_memory_utilization == 0.5
    with pytest.raises(VLLMUnavailableError, match="webagent-r1"):
        generation_engine(cfg, model=None, tokenizer=None)
    with pytest.raises(VLLMUnavailableError):
        async with _setup(cfg, "vllm"):
            pass


def test_config_checks() -> None:
    assert load_config(None, []).train.generation_engine == "hf"
    with pytest.raises(ConfigError, match="generation_engine"):
        load_config(None, ["train.generation_engine=sglang"])
    with pytest.raises(ConfigError, match="gpu_memory_utilization"):
        load_config(None, ["vllm.gpu_memory_utilization=0"])
    with pytest.raises(ConfigError, match="sleep_level"):
        VLLMConfig(sleep_level=3)


# ---------------------------------------------------------------- pure mappings


def test_sampling_params_mapping() -> None:
    p = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=33, stop=["</answer>"], seed=5)
    kw = sampling_kwargs(p, seed=6)
    assert kw["temperature"] == 0.7 and kw["top_p"] == 0.9 and kw["max_tokens"] == 33
    assert kw["stop"] == ["</answer>"] and kw["stop"] is not p.stop
    assert kw["seed"] == 6 and kw["logprobs"] == 0 and kw["n"] == 1
    assert kw["include_stop_str_in_output"] is True  # the stop string stays in the text
    greedy = sampling_kwargs(SamplingParams(temperature=0.0, stop=[]))
    assert greedy["temperature"] == 0.0 and greedy["seed"] is None and greedy["stop"] == []


def test_engine_arguments_follow_the_installed_version() -> None:
    cfg = VLLMConfig(gpu_memory_utilization=0.4, max_model_len=2048, enable_sleep_mode=True)
    kw = engine_kwargs("/m", cfg, seed=3)
    assert kw["model"] == kw["tokenizer"] == "/m" and kw["seed"] == 3
    assert kw["gpu_memory_utilization"] == 0.4 and kw["max_model_len"] == 2048
    assert kw["enable_sleep_mode"] is True and kw["worker_extension_cls"] == WORKER_EXTENSION
    without = [k for k in kw if k != "logprobs_mode"]
    with pytest.warns(UserWarning, match="does not know logprobs_mode"):  # never silent
        older = engine_kwargs("/m", cfg, known=without)
    assert "logprobs_mode" not in older and older["dtype"] == "bfloat16"
    # the sampler's log-probs as pi_old need logprobs_mode: refused, not dropped
    with pytest.raises(VLLMUnavailableError, match="rl.old_logprobs=recompute"):
        engine_kwargs("/m", cfg, known=without, needs_logprobs_mode=True)
    assert engine_kwargs("/m", cfg, needs_logprobs_mode=True)["logprobs_mode"] == (
        "processed_logprobs"
    )
    assert engine_kwargs("/m", VLLMConfig(), max_model_len=8192)["max_model_len"] == 8192
    with pytest.raises(VLLMUnavailableError, match="too old"):
        engine_kwargs("/m", cfg, known=["model", "dtype"])
    # the extension vLLM imports in its workers is importable without vLLM
    module, name = WORKER_EXTENSION.rsplit(".", 1)
    assert getattr(sys.modules[module], name) is WeightLoaderExtension


def test_each_ranks_engine_gets_its_own_gpus() -> None:
    # one GPU per engine: rank r's engine on the parent's r-th visible GPU
    assert [engine_devices(r, 1, ["0", "1", "2", "3"]) for r in range(4)] == [
        ["0"],
        ["1"],
        ["2"],
        ["3"],
    ]
    # the parent's own CUDA_VISIBLE_DEVICES entries are kept (here GPUs 4-7 of the machine)
    assert engine_devices(2, 1, ["4", "5", "6", "7"]) == ["6"]
    # tensor parallel 2: the rank's GPU first, then the next, wrapping around
    assert engine_devices(0, 2, ["0", "1", "2", "3"]) == ["0", "1"]
    assert engine_devices(3, 2, ["0", "1", "2", "3"]) == ["3", "0"]
    assert engine_devices(1, 4, ["0", "1", "2", "3"]) == ["1", "2", "3", "0"]
    with pytest.raises(ValueError, match="needs that many GPUs"):
        engine_devices(0, 3, ["0", "1"])
    with pytest.raises(ValueError, match="has no GPU"):
        engine_devices(2, 1, ["0", "1"])


def test_context_length_defaults_to_the_token_budget() -> None:
    assert max_model_len_for(VLLMConfig(), 32768) == 32768
    assert max_model_len_for(VLLMConfig(max_model_len=4096), 32768) == 4096  # set: kept
    assert max_model_len_for(VLLMConfig(), None) is None
    assert VLLMConfig().sleep_level == 2  # the push overwrites the weights anyway


def test_the_installed_version_is_checked() -> None:
    assert version_problem("0.27.1") is None
    assert version_problem("0.27.1+cu130") is None
    kind, why = version_problem("0.28.0")
    assert kind == "warning" and "0.27.1" in why
    kind, why = version_problem("0.8.5")
    assert kind == "error" and "too old" in why and "webagent-r1[vllm]" in why


def test_sampled_logprobs_from_vllm_entries() -> None:
    entries = [
        {5: logprob_entry(-0.5)},
        {7: logprob_entry(-1.25), 9: logprob_entry(-0.1)},
        {2: -0.01},
    ]
    assert sampled_logprobs([5, 7, 2], entries) == [-0.5, -1.25, -0.01]
    with pytest.raises(ValueError, match="logprobs=0"):
        sampled_logprobs([5], None)
    with pytest.raises(ValueError, match="2 log-prob entries for 3"):
        sampled_logprobs([5, 7, 2], entries[:2])
    with pytest.raises(ValueError, match="position 1"):
        sampled_logprobs([5, 8, 2], entries)


def test_output_conversion() -> None:
    c = to_completion(vllm_output([11, 12, 2], "stop", "<answer>x</answer>"), version=4)
    assert c == Completion(
        token_ids=[11, 12, 2],
        logprobs=pytest.approx([-0.1, -0.2, -0.3]),
        text="<answer>x</answer>",
        finish_reason="stop",
        weight_version=4,
    )
    assert isinstance(c.token_ids, list) and c.trainable
    assert to_completion(vllm_output([3], "length")).finish_reason == "length"
    assert to_completion(vllm_output([3], "stop")).weight_version is None
    with pytest.raises(RuntimeError, match="aborted"):
        to_completion(vllm_output([3], "abort"))


def test_weight_shards_split_and_round_trip(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    emb = torch.randn(8, 4)
    items = [("embed.weight", emb), ("lm_head.weight", emb), ("b", torch.ones(3))]  # tied
    groups = shard_groups(items, shard_bytes=128 + 12)  # a fp32 matrix is 128 bytes, b 12
    assert [[n for n, _ in g] for g in groups] == [["embed.weight"], ["lm_head.weight", "b"]]
    assert len(shard_groups(items, shard_bytes=70, dtype=torch.bfloat16)) == 2  # sized in bf16
    assert len(shard_groups(items, shard_bytes=70)) == 3  # too big: one tensor each
    n = save_shard(items, tmp_path / "s.safetensors", torch.bfloat16)
    back = load_file(tmp_path / "s.safetensors")
    assert n == (32 + 32 + 3) * 2 and back["b"].dtype == torch.bfloat16
    assert torch.equal(back["lm_head.weight"], emb.to(torch.bfloat16))


def test_worker_extension_loads_a_shard_into_the_model(tmp_path: Path) -> None:
    got: dict[str, torch.Tensor] = {}

    class Model(torch.nn.Module):
        def load_weights(self, weights) -> None:
            got.update(dict(weights))

    worker = type("Worker", (WeightLoaderExtension,), {})()
    worker.model_runner = SimpleNamespace(model=Model())
    save_shard([("w", torch.arange(4.0))], tmp_path / "w.safetensors")
    assert getattr(worker, LOAD_METHOD)(str(tmp_path / "w.safetensors")) == 1
    assert torch.equal(got["w"], torch.arange(4.0))


# ---------------------------------------------------------------- the engine over a stand-in


def _engine(**cfg: Any) -> tuple[VLLMEngine, FakeAsyncLLM]:
    llm = FakeAsyncLLM()
    eng = VLLMEngine.from_llm(llm, lambda **kw: SimpleNamespace(**kw), VLLMConfig(**cfg))
    return eng, llm


async def test_generate_maps_each_prompt_to_one_seeded_request() -> None:
    eng, llm = _engine()
    comps = await eng.generate([[1, 2], [5]], SamplingParams(seed=10, max_new_tokens=2))
    assert [c.token_ids for c in comps] == [[3, 100], [6, 100]]
    assert [c.weight_version for c in comps] == [0, 0] and comps[0].logprobs == [-0.1, -0.2]
    assert [s for k, s in llm.calls if k == "generate"] == [10, 11]  # seed + row, as HFEngine
    assert len(set(llm.request_ids)) == 2 and eng.generated_tokens == 4
    assert await eng.generate([], SamplingParams()) == []
    with pytest.raises(ValueError, match="at least one token"):
        await eng.generate([[]], SamplingParams())


async def test_update_weights_stages_shards_resets_the_cache_and_sets_the_version(
    tmp_path: Path,
) -> None:
    eng, llm = _engine(weight_dir=str(tmp_path), shard_mb=1, dtype="float16")
    big = torch.randn(1024, 600)  # 1.2 MB in fp16: a shard of its own
    await eng.update_weights({"a": big, "b": torch.ones(4)}, version=3)
    rpcs = [a for k, a in llm.calls if k == LOAD_METHOD]
    assert len(rpcs) == 2 and llm.calls[-1] == ("reset_prefix_cache", None)
    assert torch.equal(llm.loaded["a"], big.half()) and llm.loaded["b"].dtype == torch.float16
    assert eng.weight_version == 3 and not list(tmp_path.iterdir())  # shards removed
    await eng.update_weights([("b", torch.zeros(4))])
    assert eng.weight_version == 4
    [c] = await eng.generate([[1]], SamplingParams())
    assert c.weight_version == 4 and c.text == "v3"  # three shards loaded in all


async def test_an_update_waits_for_requests_in_flight_and_holds_new_ones(tmp_path: Path) -> None:
    eng, llm = _engine(weight_dir=str(tmp_path))
    llm.gate = asyncio.Event()
    old = asyncio.create_task(eng.generate([[1]], SamplingParams()))
    await asyncio.sleep(0.01)
    update = asyncio.create_task(eng.update_weights({"w": torch.ones(2)}, version=1))
    await asyncio.sleep(0.01)
    new = asyncio.create_task(eng.generate([[2]], SamplingParams()))
    await asyncio.sleep(0.01)
    assert not update.done() and LOAD_METHOD not in [k for k, _ in llm.calls]
    assert len(llm.request_ids) == 1  # the new request was held back
    llm.gate.set()
    [a], _, [b] = await asyncio.gather(old, update, new)
    assert (a.weight_version, a.text) == (0, "v0")  # sampled entirely on the old weights
    assert (b.weight_version, b.text) == (1, "v1")


async def test_sleep_and_wake_up(tmp_path: Path) -> None:
    eng, _ = _engine()
    with pytest.raises(RuntimeError, match="enable_sleep_mode"):
        await eng.sleep()
    eng, llm = _engine(enable_sleep_mode=True, sleep_level=2, weight_dir=str(tmp_path))
    assert eng.sleeps
    await eng.sleep()
    assert eng.sleeping and ("sleep", 2) in llm.calls
    with pytest.raises(RuntimeError, match="wake_up"):
        await eng.update_weights({"w": torch.ones(1)})
    pending = asyncio.create_task(eng.generate([[1]], SamplingParams()))
    await asyncio.sleep(0.01)
    assert not pending.done() and not llm.request_ids  # no generation while asleep
    await eng.wake_up()
    await eng.update_weights({"w": torch.ones(1)}, version=1)
    [c] = await pending
    assert c.weight_version == 1 and c.text == "v1" and not eng.sleeping  # held till synced
    eng.close()
    assert llm.calls[-1] == ("shutdown", None)


async def test_weights_wake_before_the_push_and_the_kv_cache_after(tmp_path: Path) -> None:
    eng, llm = _engine(enable_sleep_mode=True, weight_dir=str(tmp_path))
    await eng.sleep()
    assert ("sleep", 2) in llm.calls and eng.asleep == {"weights", "kv_cache"}
    pending = asyncio.create_task(eng.generate([[1]], SamplingParams()))
    await eng.wake_up(tags=["weights"])
    await eng.update_weights({"w": torch.ones(1)}, version=1)
    await asyncio.sleep(0.01)
    assert not pending.done() and not llm.request_ids  # the KV cache still sleeps
    assert ("reset_prefix_cache", None) not in llm.calls  # a dropped cache needs no reset
    await eng.wake_up(tags=["kv_cache"])
    [c] = await pending
    assert c.weight_version == 1 and not eng.sleeping
    wakes = [a for k, a in llm.calls if k == "wake_up"]
    assert wakes == [["weights"], ["kv_cache"]]
    with pytest.raises(ValueError, match="wake_up tags"):
        await eng.wake_up(tags=["everything"])


async def test_a_refused_prefix_cache_reset_is_retried_then_reported(tmp_path: Path) -> None:
    eng, llm = _engine(weight_dir=str(tmp_path))
    llm.resets = [False]  # refused once (requests held blocks), then done
    await eng.update_weights({"w": torch.ones(1)}, version=1)
    assert [k for k, _ in llm.calls].count("reset_prefix_cache") == 2
    assert eng.weight_version == 1
    llm.resets = [False, False, False]
    with pytest.raises(RuntimeError, match="refused to reset its prefix cache"):
        await eng.update_weights({"w": torch.ones(1)}, version=2)
    assert eng.weight_version == 1  # not stamped as synced


async def test_weight_sync_pushes_the_trainers_weights_into_the_engine(tmp_path: Path) -> None:
    from webagent_r1.train.weight_sync import WeightSync

    eng, llm = _engine(weight_dir=str(tmp_path), dtype="auto")
    model = torch.nn.Linear(3, 2)
    sync = WeightSync(eng, model)
    assert not sync.shared
    m = await sync.push(1)
    assert eng.weight_version == 1 and m["sync/bytes"] == (6 + 2) * 4
    assert torch.equal(llm.loaded["weight"], model.weight.detach())


# ---------------------------------------------------------------- GPU check, CPU side


def test_gpu_check_comparison_math() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    from webagent_r1.checks.vllm import compare_to_hf, perturb_, teacher_forced_logprobs

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=50,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    model = LlamaForCausalLM(cfg).eval()
    prompts = [[3, 4, 5], [7, 8]]
    comps = []
    for p in prompts:
        with torch.no_grad():
            greedy = [int(model(input_ids=torch.tensor([p])).logits[0, -1].argmax())]
        ref, is_max = teacher_forced_logprobs(model, p, greedy + [9])
        assert bool(is_max[0])
        comps.append(Completion(greedy + [9], ref.tolist(), "", "length"))
    exact = compare_to_hf(model, prompts, comps)
    assert exact.tokens == 4 and exact.max_abs_diff < 1e-6 and exact.ok
    assert 0.5 <= exact.argmax_agreement <= 1.0
    off = [Completion(c.token_ids, [x + 0.3 for x in c.logprobs], "", "length") for c in comps]
    shifted = compare_to_hf(model, prompts, off)
    assert shifted.mean_abs_diff == pytest.approx(0.3, abs=1e-5) and not shifted.ok
    before = [p.detach().clone() for p in model.parameters()]
    perturb_(model, scale=0.1)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert not compare_to_hf(model, prompts, comps).max_abs_diff < 1e-6


def test_gpu_check_version_stamps(tmp_path: Path) -> None:
    from webagent_r1.checks.vllm import check_versions
    from webagent_r1.rollout.trajectories import write_trajectories
    from webagent_r1.types import Trajectory, Turn

    def traj(version: int) -> Trajectory:
        turn = Turn([1, 2], [3], [-0.1], "", None, weight_version=version)
        return Trajectory("t", 0, [turn], info={"weight_versions": [version]})

    write_trajectories([traj(0)], tmp_path / "step-000000-rank0.jsonl")
    write_trajectories([traj(1)], tmp_path / "step-000001-rank0.jsonl")
    assert check_versions(tmp_path)["ok"]
    write_trajectories([traj(0)], tmp_path / "step-000002-rank0.jsonl")
    res = check_versions(tmp_path)
    assert not res["ok"] and "step-000002" in res["bad"][0]
    assert not check_versions(tmp_path / "none")["ok"]
