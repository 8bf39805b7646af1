"""Precision chosen by measurement (model.autocast_bf16) and model FLOPs / MFU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from webagent_r1.config import ConfigError, load_config
from webagent_r1.policy import precision
from webagent_r1.policy.hf import autocast_ctx
from webagent_r1.policy.precision import (
    FlopsMeter,
    ModelSize,
    Peak,
    choose_autocast,
    model_size,
    peak_flops,
    raise_peak,
    sequences_flops,
    time_layers,
)

CPU = torch.device("cpu")
SHAPES = ((4, 8), (8, 4))


def stub(fp32: float, bf16: float, calls: list[bool] | None = None):
    def timer(shapes, autocast: bool) -> float:
        if calls is not None:
            calls.append(autocast)
        return bf16 if autocast else fp32

    return timer


def refuse(*_args) -> float:
    raise AssertionError("a set value must not be timed")


@pytest.mark.parametrize(("setting", "want"), [(True, True), (False, False)])
def test_true_and_false_are_obeyed_without_timing(setting: bool, want: bool) -> None:
    c = choose_autocast(setting, CPU, SHAPES, timer=refuse)
    assert (c.autocast, c.source) == (want, "setting")


@pytest.mark.parametrize(("fp32", "bf16", "want"), [(0.10, 0.17, False), (0.20, 0.11, True)])
def test_auto_picks_the_faster_of_the_two_timings(fp32: float, bf16: float, want: bool) -> None:
    c = choose_autocast("auto", CPU, SHAPES, timer=stub(fp32, bf16))
    assert c.autocast is want
    assert (c.fp32_s, c.bf16_s, c.source) == (fp32, bf16, "measured")
    assert ("bf16 autocast" if want else "fp32") in c.describe()


def test_auto_is_cached_per_machine_and_shapes(tmp_path: Path) -> None:
    cache = tmp_path / "precision.json"
    calls: list[bool] = []
    first = choose_autocast("auto", CPU, SHAPES, timer=stub(0.3, 0.1, calls), cache=cache)
    assert first.source == "measured" and calls == [False, True]
    again = choose_autocast("auto", CPU, SHAPES, timer=refuse, cache=cache)
    assert (again.autocast, again.source, again.fp32_s, again.bf16_s) == (True, "cache", 0.3, 0.1)
    # other shapes are another entry: timed again
    other = choose_autocast("auto", CPU, ((2, 2),), timer=stub(0.1, 0.3, calls), cache=cache)
    assert other.source == "measured" and other.autocast is False
    assert len(json.loads(cache.read_text())) == 2


def test_a_broken_cache_is_measured_again_and_rewritten(tmp_path: Path) -> None:
    cache = tmp_path / "precision.json"
    cache.write_text("{not json")
    c = choose_autocast("auto", CPU, SHAPES, timer=stub(0.1, 0.2), cache=cache)
    assert c.source == "measured"
    assert len(json.loads(cache.read_text())) == 1


def test_auto_on_a_gpu_follows_its_bf16_support(monkeypatch: pytest.MonkeyPatch) -> None:
    for supported in (True, False):
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda s=supported: s)
        c = choose_autocast("auto", torch.device("cuda"), SHAPES, timer=refuse)
        assert (c.autocast, c.source) == (supported, "cuda")


def test_the_config_takes_auto_true_false_and_refuses_others() -> None:
    assert load_config(None, []).model.autocast_bf16 == "auto"
    assert load_config(None, ["model.autocast_bf16=true"]).model.autocast_bf16 is True
    assert load_config(None, ["model.autocast_bf16=false"]).model.autocast_bf16 is False
    with pytest.raises(ConfigError, match="auto, true or false"):
        load_config(None, ["model.autocast_bf16=sometimes"])


def test_autocast_ctx_obeys_enabled_on_the_cpu() -> None:
    with autocast_ctx(CPU, True):
        assert torch.is_autocast_enabled("cpu")
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with autocast_ctx(CPU, False):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


def test_time_layers_really_times() -> None:
    assert time_layers(((8, 16), (16, 8)), autocast=False, tokens=4, reps=1) > 0


def test_resolve_autocast_prints_once_and_reuses(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("WEBAGENT_R1_HOME", str(tmp_path))
    monkeypatch.setattr(precision, "_resolved", {})
    calls: list[bool] = []
    monkeypatch.setattr(precision, "time_layers", stub(0.2, 0.1, calls))
    # choose_autocast's default timer was bound at definition: route through the stub
    real = precision.choose_autocast
    monkeypatch.setattr(
        precision,
        "choose_autocast",
        lambda s, d, sh, cache=None: real(s, d, sh, timer=precision.time_layers, cache=cache),
    )
    mcfg = load_config(None, ["model.device=cpu"]).model
    assert precision.autocast_enabled(mcfg) is True
    assert precision.autocast_enabled(mcfg) is True
    assert calls == [False, True]  # once per process
    assert capsys.readouterr().err.count("precision: bf16 autocast") == 1
    assert (tmp_path / "precision.json").exists()


# ------------------------------------------------------------------ FLOPs and MFU


def test_sequences_flops_by_hand() -> None:
    size = ModelSize(params=100, layers=2, hidden=4, through=100, trainable=100, layers_through=2)
    # two sequences of 3 and 1 tokens: 4 tokens, keys 6 + 1 = 7, every position scored
    fwd = 2 * 100 * 4 + 4 * 2 * 4 * 7  # 800 + 224
    assert sequences_flops([3, 1], size, train=False) == fwd
    # full fine-tuning: 6 · P · T and attention three times its forward
    assert sequences_flops([3, 1], size, train=True) == 6 * 100 * 4 + 3 * 224
    frozen = ModelSize(params=100, layers=2, hidden=4, through=60, trainable=50, layers_through=1)
    assert sequences_flops([3, 1], frozen, train=True) == fwd + 2 * (60 + 50) * 4 + 8 * 1 * 4 * 7


def test_the_head_runs_at_scored_positions_only() -> None:
    # 100 parameters of which a 40-parameter head, frozen; 2 of the 4 tokens are scored
    size = ModelSize(100, 2, 4, through=100, trainable=60, layers_through=2, head=40)
    attn = 4 * 2 * 4 * 7
    fwd = 2 * 60 * 4 + 2 * 40 * 2 + attn
    assert sequences_flops([3, 1], size, train=False, scored=[2, 0]) == fwd
    # backward: the body's activations and weights (60 + 60 per token), the head's
    # activation gradient at the scored positions only (no weight gradient), attention x2
    bwd = 2 * (60 + 60) * 4 + 2 * 40 * 2 + 2 * attn
    assert sequences_flops([3, 1], size, train=True, scored=[2, 0]) == fwd + bwd
    trained_head = ModelSize(100, 2, 4, 100, 100, 2, head=40, head_trainable=True)
    assert sequences_flops([3, 1], trained_head, train=True, scored=[2, 0]) == fwd + bwd + 160


def test_model_size_counts_what_a_backward_runs_through(tmp_path: Path) -> None:
    from tests.support.tiny import make_tiny_model
    from transformers import AutoModelForCausalLM

    from webagent_r1.policy.trainable import freeze_lower_layers

    model = AutoModelForCausalLM.from_pretrained(make_tiny_model(tmp_path / "m"))  # 2 layers
    n = sum(p.numel() for p in model.parameters())
    full = model_size(model)
    assert (full.params, full.through, full.trainable, full.layers, full.hidden) == (n, n, n, 2, 32)
    freeze_lower_layers(model, 1)
    layer = sum(p.numel() for p in model.model.layers[0].parameters())
    emb = model.get_input_embeddings().weight.numel()
    top = model_size(model)
    assert top.through == n - layer
    assert top.trainable == n - layer - emb  # the top layer, the final norm, the (untied) head
    assert top.layers_through == 1
    assert (top.head, top.head_trainable) == (model.get_output_embeddings().weight.numel(), True)


def test_peak_flops_is_measured_once_and_cached(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(precision, "_peaks", {})
    cache = tmp_path / "precision.json"
    p = peak_flops(False, CPU, timer=lambda autocast: 5e9, cache=cache)
    assert (p.flops, p.precision, p.source) == (5e9, "fp32", "measured")
    monkeypatch.setattr(precision, "_peaks", {})
    p = peak_flops(False, CPU, timer=lambda autocast: 1 / 0, cache=cache)
    assert (p.flops, p.source) == (5e9, "cache")
    assert peak_flops(True, torch.device("cuda"), timer=lambda a: 1 / 0).flops == 0.0


def test_a_peak_measured_under_load_is_raised_to_what_the_model_achieved(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(precision, "_peaks", {})
    cache = tmp_path / "precision.json"
    low = peak_flops(False, CPU, timer=lambda autocast: 5e9, cache=cache)  # a busy machine
    assert raise_peak(low, 4e9, cache) is low  # below the peak: nothing changes
    high = raise_peak(low, 8e9, cache)
    assert (high.flops, high.precision, high.source) == (8e9, "fp32", "achieved")
    assert peak_flops(False, CPU, timer=lambda autocast: 1 / 0, cache=cache) == high
    monkeypatch.setattr(precision, "_peaks", {})  # a later process reads it from the cache
    assert peak_flops(False, CPU, timer=lambda autocast: 1 / 0, cache=cache).flops == 8e9
    monkeypatch.setattr(precision, "cache_path", lambda: cache)
    meter = FlopsMeter.__new__(FlopsMeter)
    meter.peak = Peak(5e9, "fp32", "measured")
    out = meter.metrics("train", 2e10, 2.0)  # 1e10 FLOP/s: above the measured peak
    assert out == {"train/flops_per_s": 1e10, "train/mfu": 1.0}
    assert meter.metrics("train", 5e9, 1.0)["train/mfu"] == 0.5


def test_flops_meter_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    meter = FlopsMeter.__new__(FlopsMeter)
    meter.size = ModelSize(10, 1, 2, 10, 10, 1)
    meter.peak = Peak(1000.0, "fp32", "measured")
    assert meter.metrics("train", 500.0, 2.0) == {"train/flops_per_s": 250.0, "train/mfu": 0.25}
    meter.peak = Peak(0.0, "bf16", "none")
    assert meter.metrics("rollout", 500.0, 2.0) == {"rollout/flops_per_s": 250.0}


def test_flops_meter_counts_a_pi_old_forward_only_when_one_runs() -> None:
    from types import SimpleNamespace as NS

    meter = FlopsMeter.__new__(FlopsMeter)
    meter.size = ModelSize(100, 2, 4, through=100, trainable=100, layers_through=2)
    samples = [NS(input_ids=[1] * 30, prompt_len=20), NS(input_ids=[1] * 12, prompt_len=4)]
    batch = NS(samples=samples)
    train = sequences_flops([30, 12], meter.size, True, [10, 8])
    forward = sequences_flops([30, 12], meter.size, False, [10, 8])
    assert forward < train

    def rl(old: str, mu: int = 1, beta: float = 0.0) -> NS:
        return NS(old_logprobs=old, mu=mu, beta=beta)

    assert meter.update(batch, rl("sampler")) == pytest.approx(train)
    # mu = 1, recomputed: the training forward gives pi_old, no pass of its own
    assert meter.update(batch, rl("recompute")) == pytest.approx(train)
    assert meter.update(batch, rl("recompute"), fuse_old=False) == pytest.approx(train + forward)
    assert meter.update(batch, rl("recompute", mu=2)) == pytest.approx(2 * train + forward)
    assert meter.update(batch, rl("sampler", beta=0.1)) == pytest.approx(train + forward)


@pytest.mark.parametrize(
    ("overrides", "want"),
    [
        (["rl.old_logprobs=auto", "model.autocast_bf16=false"], "sampler"),
        (["rl.old_logprobs=auto", "model.autocast_bf16=true"], "recompute"),
        (
            ["rl.old_logprobs=auto", "model.dtype=bfloat16", "model.autocast_bf16=false"],
            "recompute",
        ),
        (["rl.old_logprobs=auto", "train.generation_engine=vllm"], "recompute"),
        (["rl.old_logprobs=sampler", "model.autocast_bf16=false"], "sampler"),
        (["rl.old_logprobs=recompute", "model.autocast_bf16=true"], "recompute"),
    ],
)
def test_old_logprobs_auto_takes_the_sampler_only_in_fp32(overrides: list, want: str) -> None:
    cfg = load_config(None, ["model.device=cpu", *overrides])
    assert precision.resolve_old_logprobs(cfg, torch.device("cpu")) == want


def test_old_logprobs_sampler_is_refused_under_bf16() -> None:
    cfg = load_config(None, ["model.device=cpu", "rl.old_logprobs=sampler"])
    with pytest.raises(ConfigError, match="rl.old_logprobs=auto or recompute"):
        precision.resolve_old_logprobs(
            load_config(
                None, ["model.device=cpu", "rl.old_logprobs=sampler", "model.autocast_bf16=true"]
            ),
            torch.device("cpu"),
        )
    assert cfg.rl.old_logprobs == "sampler"
    with pytest.raises(ConfigError, match="'recompute', 'sampler' or 'auto'"):
        load_config(None, ["rl.old_logprobs=trainer"])


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        ("fpu avx2 avx512f avx512_bf16 amx_bf16", "amx_bf16"),
        ("fpu avx2 avx512f avx512_bf16", "avx512_bf16"),
        ("fpu avx2 avx512f", "avx512f"),
        ("fpu avx2", "avx2"),
        ("fpu sse2", "no avx2"),
    ],
)
def test_machine_name_tells_cpus_of_one_model_name_apart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: str, want: str
) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(f"model name\t: AMD EPYC\nflags\t\t: {flags}\n")
    real_open = open
    monkeypatch.setattr(
        "builtins.open",
        lambda p, *a, **k: real_open(info if p == "/proc/cpuinfo" else p, *a, **k),
    )
    assert precision.machine_name(CPU) == f"AMD EPYC ({want})"


@pytest.mark.parametrize(
    ("overrides", "want"),
    [
        (["model.autocast_bf16=true"], "cpu, bf16 autocast"),
        (["model.autocast_bf16=false"], "cpu, float32"),
    ],
)
def test_run_numerics_names_the_resolved_precision(overrides: list, want: str) -> None:
    cfg = load_config(None, ["model.device=cpu", *overrides])
    numerics, machine = precision.run_numerics(cfg.model)
    assert numerics == want
    assert machine.startswith(precision.cpu_model())
