"""vLLM's in-GPU weight transfer (``policy/vllm.py``) over stand-in engines, on CPU.

The choice of path (an engine with and without the weight-transfer API, the config, tensor
parallelism), the chunks sent as pickled handles, the fallback to files when the transfer
raises (mid-push and at set-up), and ``sync/path`` as ``WeightSync`` logs it.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from tests.support.fake_vllm import (
    FakeAsyncLLM,
    FakeTransferLLM,
    fake_handle,
    transfer_request_classes,
)

from webagent_r1.config import ConfigError, VLLMConfig
from webagent_r1.policy.vllm import (
    LOAD_METHOD,
    VLLMEngine,
    choose_weight_transfer,
    ipc_update_info,
    transfer_capable,
)

KNOWN = ["model", "worker_extension_cls", "weight_transfer_config"]


def test_the_path_is_chosen_from_the_config_and_the_installed_vllm() -> None:
    assert choose_weight_transfer(VLLMConfig(), KNOWN)[0] == "ipc"
    assert choose_weight_transfer(VLLMConfig(weight_transfer="ipc"), KNOWN)[0] == "ipc"
    assert choose_weight_transfer(VLLMConfig(weight_transfer="files"), KNOWN)[0] == "files"
    path, why = choose_weight_transfer(VLLMConfig(), ["model", "worker_extension_cls"])
    assert path == "files" and "weight_transfer_config" in why
    path, why = choose_weight_transfer(VLLMConfig(tensor_parallel_size=2), KNOWN)
    assert path == "files" and "one GPU" in why
    with pytest.raises(ConfigError, match="weight_transfer"):
        VLLMConfig(weight_transfer="nccl")


def test_capability_is_read_off_the_engine() -> None:
    assert transfer_capable(FakeTransferLLM())
    assert not transfer_capable(FakeAsyncLLM())  # no init_weight_transfer_engine
    assert not transfer_capable(SimpleNamespace(init_weight_transfer_engine=1, update_weights=2))


def test_update_info_carries_names_dtypes_shapes_and_pickled_handles() -> None:
    import base64
    import pickle

    t = [("a", torch.ones(2, 3, dtype=torch.bfloat16)), ("b", torch.zeros(4))]
    info = ipc_update_info(t, fake_handle)
    assert info["names"] == ["a", "b"] and info["dtype_names"] == ["bfloat16", "float32"]
    assert info["shapes"] == [[2, 3], [4]]
    handles = pickle.loads(base64.b64decode(info["ipc_handles_pickled"]))
    assert torch.equal(handles[0]["fake-gpu"], t[0][1]) and isinstance(
        info["ipc_handles_pickled"], str
    )


def _engine(llm: object, tmp: Path, **cfg: object) -> VLLMEngine:
    conf = VLLMConfig(weight_dir=str(tmp), shard_mb=1, dtype="bfloat16", **cfg)
    return VLLMEngine.from_llm(llm, lambda **kw: SimpleNamespace(**kw), conf)


def _weights() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {"a": torch.randn(1024, 600), "b": torch.randn(1024, 600), "c": torch.randn(7)}


async def test_an_engine_with_the_api_takes_the_weights_without_files(tmp_path: Path) -> None:
    llm = FakeTransferLLM()
    eng = _engine(llm, tmp_path)
    assert eng.use_weight_transfer(*transfer_request_classes(), handle=fake_handle)
    w = _weights()
    await eng.update_weights(w, version=1)
    assert eng.push_path == "ipc" and eng.transfer == "ipc"
    assert LOAD_METHOD not in [k for k, _ in llm.calls]  # no file staged
    assert set(llm.via_ipc) == set(w)
    for k, t in w.items():
        assert torch.equal(llm.via_ipc[k], t.to(torch.bfloat16))
    kinds = [k for k, _ in llm.calls]
    assert kinds.count("init_weight_transfer_engine") == 1
    assert kinds.index("start_weight_update") < kinds.index("update_weights")
    assert kinds.index("finish_weight_update") > len(kinds) - 3  # then the cache reset
    assert kinds[-1] == "reset_prefix_cache" and eng.weight_version == 1
    await eng.update_weights(w, version=2)
    assert [k for k, _ in llm.calls].count("init_weight_transfer_engine") == 1  # once only
    assert not list(tmp_path.iterdir())


async def test_an_engine_without_the_api_keeps_the_files(tmp_path: Path) -> None:
    llm = FakeAsyncLLM()
    eng = _engine(llm, tmp_path)
    assert not eng.use_weight_transfer(*transfer_request_classes(), handle=fake_handle)
    w = _weights()
    await eng.update_weights(w, version=1)
    assert eng.push_path == "files" and eng.transfer == "files"
    assert set(llm.loaded) == set(w) and LOAD_METHOD in [k for k, _ in llm.calls]


@pytest.mark.parametrize("fail_at", [0, 1], ids=["first-chunk", "second-chunk"])
async def test_a_failing_transfer_falls_back_to_files(tmp_path: Path, fail_at: int) -> None:
    llm = FakeTransferLLM(fail_at=fail_at)
    eng = _engine(llm, tmp_path)
    eng.use_weight_transfer(*transfer_request_classes(), handle=fake_handle)
    w = _weights()
    with pytest.warns(UserWarning, match="falls back|failed sending chunk"):
        await eng.update_weights(w, version=1)
    assert eng.push_path == "files" and eng.transfer == "files" and eng.transfer_failures == 1
    assert len(llm.via_ipc) == fail_at  # the chunks before the failure went in-GPU
    for k, t in w.items():  # every weight arrived, one way or the other
        assert torch.equal(llm.loaded[k], t.to(torch.bfloat16)), k
    assert eng.weight_version == 1
    n = llm.updates
    await eng.update_weights(w, version=2)  # files from now on
    assert llm.updates == n and eng.push_path == "files"


async def test_a_refused_set_up_falls_back_to_files(tmp_path: Path) -> None:
    llm = FakeTransferLLM(fail_init=True)
    eng = _engine(llm, tmp_path)
    eng.use_weight_transfer(*transfer_request_classes(), handle=fake_handle)
    with pytest.warns(UserWarning, match="setting the transfer up"):
        await eng.update_weights(_weights(), version=1)
    assert eng.push_path == "files" and llm.updates == 0 and set(llm.loaded) == {"a", "b", "c"}


async def test_weight_sync_logs_the_path(tmp_path: Path) -> None:
    from webagent_r1.train.weight_sync import SYNC_PATHS, WeightSync

    llm = FakeTransferLLM(fail_at=2)  # one chunk a push: the third push fails
    eng = _engine(llm, tmp_path)
    eng.use_weight_transfer(*transfer_request_classes(), handle=fake_handle)
    model = torch.nn.Linear(3, 2)
    said: list[str] = []
    sync = WeightSync(eng, model, say=said.append)
    m = await sync.push(1)
    assert m["sync/path"] == SYNC_PATHS["ipc"] and sync.history[-1].path == "ipc"
    assert len(said) == 1 and said[0].startswith("weight push: ipc")
    await sync.push(2)
    assert len(said) == 1  # unchanged: nothing said
    with pytest.warns(UserWarning):
        m = await sync.push(3)  # the second transfer call raises: files
    assert m["sync/path"] == SYNC_PATHS["files"] and said[-1].startswith("weight push: files")
    shared = WeightSync(
        SimpleNamespace(model=None, lock=None, weight_version=0), model, shared=True
    )
    assert (await shared.push(1))["sync/path"] == SYNC_PATHS["shared"]


async def test_an_unfinished_transfer_stops_the_push(tmp_path: Path) -> None:
    # the chunks went in-GPU but vLLM did not finish the update: their state is unknown and
    # the stream is spent, so the push raises instead of stamping a new weight version
    llm = FakeTransferLLM(fail_finish=True)
    eng = _engine(llm, tmp_path)
    eng.use_weight_transfer(*transfer_request_classes(), handle=fake_handle)
    with (
        pytest.warns(UserWarning, match="finishing the update"),
        pytest.raises(RuntimeError, match="did not finish the in-GPU weight update"),
    ):
        await eng.update_weights(_weights(), version=1)
    assert eng.weight_version != 1 and eng.transfer == "files"
