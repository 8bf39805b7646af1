"""Weight sync and weight-version tags: engines with their own copy, shared models, rollouts."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
from typing import Any

import pytest
import torch

from tests.support.fakes import CLICK, EXIT, FakeEnv, FakeTokenizer, ScriptedEngine, make_tasks
from webagent_r1.policy.base import Completion, Engine, SamplingParams, VersionedEngine
from webagent_r1.rollout.collect import run_episode
from webagent_r1.rollout.trajectories import (
    TrajectoryFileError,
    parse_trajectory_line,
    read_trajectories,
    write_trajectories,
)
from webagent_r1.train.weight_sync import WeightSync, full_state_dict, shares_model

TOK = FakeTokenizer()


class CopyEngine(Engine):
    """Holds its own copy of the weights, as vLLM or a remote server does."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.weight_version = 0
        self.pushes: list[int | None] = []

    async def generate(self, prompts, params) -> list[Completion]:
        raise AssertionError("these tests never sample")

    def update_weights(self, weights: dict[str, torch.Tensor], version: int | None = None) -> None:
        self.weights = {k: v.detach().clone() for k, v in weights.items()}
        self.weight_version = version if version is not None else self.weight_version + 1
        self.pushes.append(version)


class AsyncCopyEngine(CopyEngine):
    async def update_weights(self, weights, version=None) -> None:  # type: ignore[override]
        await asyncio.sleep(0)
        super().update_weights(weights, version)


def _tiny() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


def _train_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> None:
    x = torch.randn(16, 4)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


@pytest.mark.parametrize("engine_cls", [CopyEngine, AsyncCopyEngine])
async def test_pushed_weights_equal_the_trainers_after_every_step(engine_cls) -> None:
    model = _tiny()
    engine = engine_cls(model)
    assert isinstance(engine, VersionedEngine)
    sync = WeightSync(engine, model)
    assert not sync.shared
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    n_bytes = sum(p.numel() * 4 for p in model.parameters())  # fp32
    for step in (1, 2, 3):
        before = {k: v.clone() for k, v in engine.weights.items()}
        _train_step(model, opt)
        m = await sync.push(step)
        state = model.state_dict()
        assert engine.weights.keys() == state.keys()
        assert all(torch.equal(engine.weights[k], state[k]) for k in state)
        assert not all(torch.equal(before[k], state[k]) for k in state)  # it did change
        assert m["sync/version"] == step and m["sync/bytes"] == n_bytes
        assert m["sync/seconds"] >= 0
    assert engine.weight_version == 3 and engine.pushes == [1, 2, 3]
    assert [r.version for r in sync.history] == [1, 2, 3] and sync.version == 3
    assert all(r.pushed and r.bytes == n_bytes for r in sync.history)
    # the engine holds a copy: a later trainer step does not leak into it
    _train_step(model, opt)
    assert not torch.equal(engine.weights["0.weight"], model.state_dict()["0.weight"])


async def test_only_rank_0_pushes_unless_every_rank_has_an_engine() -> None:
    model = _tiny()
    engine = CopyEngine(model)
    sync = WeightSync(engine, model, rank=1)
    m = await sync.push(1)
    assert engine.pushes == [] and engine.weight_version == 0
    assert m["sync/bytes"] == 0 and not sync.history[0].pushed and sync.version == 1
    own = CopyEngine(model)
    await WeightSync(own, model, rank=1, every_rank=True).push(1)
    assert own.pushes == [1]


class _Accelerator:
    """Records get_state_dict calls (a collective: every process must take part)."""

    def __init__(self) -> None:
        self.calls = 0

    def get_state_dict(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        self.calls += 1
        return model.state_dict()


async def test_sharded_gather_runs_on_every_rank_but_only_rank_0_pushes() -> None:
    model = _tiny()
    for rank, pushed in ((0, [7]), (1, [])):
        acc, engine = _Accelerator(), CopyEngine(model)
        await WeightSync(engine, model, rank=rank, accelerator=acc).push(7)
        assert acc.calls == 1 and engine.pushes == pushed


class SharedEngine(Engine):
    """Samples from the trainer's model object, like HFEngine in train_rl."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.lock = threading.Lock()
        self.weight_version = 0

    async def generate(self, prompts, params) -> list[Completion]:
        raise AssertionError("these tests never sample")

    def update_weights(self, weights: Any, version: int | None = None) -> None:
        raise AssertionError("a shared engine needs no copy")


async def test_shared_model_engine_only_gets_its_version_bumped() -> None:
    model = _tiny()
    engine = SharedEngine(model)
    sync = WeightSync(engine, model, version=4)  # a resumed run starts at step 4
    assert sync.shared and shares_model(engine, model) and engine.weight_version == 4
    m = await sync.push(5)
    assert engine.weight_version == 5 and m["sync/bytes"] == 0 and not sync.history[0].pushed


def _tiny_llama(vocab: int = 64, hidden: int = 16, layers: int = 1) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        pad_token_id=1,
        eos_token_id=2,
        bos_token_id=0,
    )
    return LlamaForCausalLM(cfg)


def test_lora_model_is_pushed_merged_under_base_names() -> None:
    from peft import LoraConfig, get_peft_model

    base = _tiny_llama()
    names = set(base.state_dict())
    peft_model = get_peft_model(
        base, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    )
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.normal_()  # B starts at zero: make the adapters matter
    want = copy.deepcopy(peft_model).merge_and_unload().state_dict()
    got = full_state_dict(peft_model)
    assert set(got) == names
    assert all(torch.allclose(got[k], want[k], atol=1e-6) for k in names)
    # the trainer's model is left unmerged
    q = "model.layers.0.self_attn.q_proj"
    assert not torch.allclose(
        got[f"{q}.weight"],
        dict(peft_model.named_parameters())[f"base_model.model.{q}.base_layer.weight"],
    )


def test_hf_engine_stamps_the_version_in_force() -> None:
    from webagent_r1.policy.hf import HFEngine

    class Tok:
        pad_token_id, eos_token_id = 1, 2

        def decode(self, ids, skip_special_tokens=True) -> str:
            return " ".join(map(str, ids))

    model = _tiny_llama().eval()
    engine = HFEngine(model, Tok(), autocast_bf16=False)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=2, stop=[])
    assert engine.generate_sync([[5, 6, 7]], greedy)[0].weight_version == 0
    sync = WeightSync(engine, model)
    assert sync.shared
    asyncio.run(sync.push(3))
    assert engine.generate_sync([[5, 6, 7]], greedy)[0].weight_version == 3
    engine.update_weights(model.state_dict(), 9)
    assert engine.weight_version == 9
    engine.update_weights(model.state_dict())
    assert engine.generate_sync([[5]], greedy)[0].weight_version == 10


class UpdatedBetweenTurns(ScriptedEngine):
    """A scripted engine whose weights change after every call (a sync between two turns)."""

    def __init__(self, *a: Any, stamp: bool = False, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.weight_version = 0
        self.stamp = stamp

    async def generate(self, prompts, params) -> list[Completion]:
        out = await super().generate(prompts, params)
        if self.stamp:  # an engine that knows better stamps its own completions
            out = [
                Completion(c.token_ids, c.logprobs, c.text, c.finish_reason, weight_version=70)
                for c in out
            ]
        self.weight_version += 1
        return out


async def test_rollout_tags_each_turn_with_the_version_in_force(tmp_path) -> None:
    engine = UpdatedBetweenTurns(TOK, [CLICK, EXIT])
    [task] = make_tasks(1)
    traj = await run_episode(FakeEnv({}), engine, TOK, task, params=SamplingParams(seed=3))
    assert len(traj.turns) == 2 and traj.reward == 1.0
    assert [t.weight_version for t in traj.turns] == [0, 1]
    assert traj.info["weight_versions"] == [0, 1]
    # the tags survive the trajectory file
    write_trajectories([traj], tmp_path / "t.jsonl")
    [back] = read_trajectories(tmp_path / "t.jsonl")
    assert [t.weight_version for t in back.turns] == [0, 1]
    assert back.info["weight_versions"] == [0, 1]


async def test_engine_stamps_win_and_untracked_engines_give_none() -> None:
    [task] = make_tasks(1)
    stamped = UpdatedBetweenTurns(TOK, [CLICK, EXIT], stamp=True)
    traj = await run_episode(FakeEnv({}), stamped, TOK, task)
    assert [t.weight_version for t in traj.turns] == [70, 70]
    plain = await run_episode(FakeEnv({}), ScriptedEngine(TOK, [CLICK, EXIT]), TOK, task)
    assert [t.weight_version for t in plain.turns] == [None, None]
    assert plain.info["weight_versions"] == []


async def test_old_trajectory_lines_without_versions_still_load() -> None:
    [task] = make_tasks(1)
    traj = await run_episode(FakeEnv({}), UpdatedBetweenTurns(TOK, [CLICK, EXIT]), TOK, task)
    d = traj.to_dict()
    for t in d["turns"]:
        del t["weight_version"]  # written before the field existed
    del d["info"]["weight_versions"]
    old = parse_trajectory_line(json.dumps(d))
    assert [t.weight_version for t in old.turns] == [None, None]
    assert old.turns[0].completion_ids == traj.turns[0].completion_ids
    d["turns"][0]["weight_version"] = "v1"
    with pytest.raises(TrajectoryFileError, match="weight_version"):
        parse_trajectory_line(json.dumps(d))


class SleepyEngine(CopyEngine):
    """Records the order of sleep / wake-up / push calls, as the vLLM engine sees them."""

    sleeps = True

    def __init__(self, model: torch.nn.Module, log: list[str]) -> None:
        super().__init__(model)
        self.log = log

    async def sleep(self, level: int | None = None) -> None:
        self.log.append("sleep")

    async def wake_up(self, tags: list[str] | None = None) -> None:
        self.log.append(f"wake:{','.join(tags or ['all'])}")

    def update_weights(self, weights, version=None) -> None:  # type: ignore[override]
        self.log.append("push")
        super().update_weights(weights, version)


async def test_sleeping_engine_order_frees_grads_and_cache_before_waking() -> None:
    from webagent_r1.train.weight_sync import update_then_push

    model = _tiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    log: list[str] = []
    engine = SleepyEngine(model, log)
    sync = WeightSync(engine, model, shared=False)

    def update() -> dict[str, float]:
        log.append("update")
        _train_step(model, opt)
        assert all(p.grad is not None for p in model.parameters())
        return {"train/loss": 1.0}

    def empty_cache() -> None:
        assert all(p.grad is None for p in model.parameters()), "grads still allocated"
        log.append("empty_cache")

    metrics = await update_then_push(engine, sync, opt, update, 1, empty_cache=empty_cache)
    assert log == [
        "sleep",
        "update",
        "empty_cache",
        "wake:weights",
        "push",
        "empty_cache",
        "wake:kv_cache",
    ]
    assert metrics["train/loss"] == 1.0 and metrics["sync/version"] == 1.0
    for k, v in model.state_dict().items():
        assert torch.equal(engine.weights[k], v)  # the pushed weights are the updated ones
    # an engine that does not sleep: update, freed grads, push; no sleep or wake-up
    log.clear()
    plain = CopyEngine(model)
    await update_then_push(
        plain, WeightSync(plain, model, shared=False), opt, update, 2, empty_cache=empty_cache
    )
    assert log == ["update", "empty_cache"] and plain.pushes == [2]


def _lora_tiny(**shape: int):
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(
        _tiny_llama(**shape), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"])
    )
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_()  # B starts at zero: make the adapters matter
    return model


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_streamed_push_equals_the_full_state_dict_in_bf16(lora: bool) -> None:
    from webagent_r1.train.weight_sync import iter_push_weights

    model = _lora_tiny() if lora else _tiny_llama()
    want = full_state_dict(model)  # the whole-dict path (PEFT's own merge) as the reference
    before = {k: v.clone() for k, v in model.state_dict().items()}
    got = dict(iter_push_weights(model, torch.bfloat16))
    assert got.keys() == want.keys()
    for k in want:
        assert got[k].dtype == torch.bfloat16
        assert torch.equal(got[k], want[k].to(torch.bfloat16)), k
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())  # model left as it was


async def test_streamed_push_into_vllm_holds_at_most_one_shard(tmp_path) -> None:
    """The engine consumes the stream in shards: the tensors alive at any time stay within
    one shard plus one parameter, far below the whole state dict."""
    import weakref

    from tests.support.fake_vllm import FakeAsyncLLM
    from webagent_r1.config import VLLMConfig
    from webagent_r1.policy.vllm import VLLMEngine
    from webagent_r1.train.weight_sync import iter_push_weights

    model = _lora_tiny(vocab=2048, hidden=256, layers=4)  # about 6.6 MB in bf16
    llm = FakeAsyncLLM()
    cfg = VLLMConfig(weight_dir=str(tmp_path), shard_mb=1, dtype="bfloat16")
    engine = VLLMEngine.from_llm(llm, lambda **kw: kw, cfg)
    alive: list[weakref.ref] = []
    peak = [0]
    real = iter_push_weights

    def watched(*a: Any, **kw: Any):
        for name, t in real(*a, **kw):
            alive[:] = [r for r in alive if r() is not None]
            alive.append(weakref.ref(t))
            live = [x for x in (r() for r in alive) if x is not None]
            peak[0] = max(peak[0], sum(x.numel() * x.element_size() for x in live))
            del live
            yield name, t

    import webagent_r1.train.weight_sync as ws

    ws.iter_push_weights, saved = watched, ws.iter_push_weights
    try:
        sync = WeightSync(engine, model, shared=False)
        metrics = await sync.push(1)
    finally:
        ws.iter_push_weights = saved
    want = {k: v.to(torch.bfloat16) for k, v in full_state_dict(model).items()}
    total = sum(v.numel() * v.element_size() for v in want.values())
    assert llm.loaded.keys() == want.keys()
    assert all(torch.equal(llm.loaded[k], want[k]) for k in want)
    assert metrics["sync/bytes"] == total and engine.weight_version == 1
    largest = max(v.numel() * v.element_size() for v in want.values())
    assert metrics["sync/largest_bytes"] == largest
    shard = cfg.shard_mb * 2**20
    assert total > 2 * shard  # several shards: the bound below means something
    assert peak[0] <= shard + largest < total
