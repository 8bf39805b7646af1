"""benchmarks/decode.py on a tiny random model: both cache layouts decode the same tokens."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.scripts import load_script
from tests.support.tiny import make_tiny_model


def load_bench():
    return load_script("benchmarks/decode.py", "bench_decode_under_test")


def test_decode_bench_times_both_layouts_on_the_same_tokens(tmp_path: Path) -> None:
    bench = load_bench()
    model = make_tiny_model(tmp_path / "model")
    out = bench.run(str(model), batches=(1, 3), prompt_len=12, new_tokens=5, reps=1)
    assert [r["batch"] for r in out["results"]] == [1, 3]
    for r in out["results"]:
        assert r["same_tokens"] is True
        assert r["reserved_s"] > 0 and r["concat_s"] > 0 and r["ratio"] > 0
        assert r["reserved_tokens_per_s"] > 0 and r["concat_tokens_per_s"] > 0
    # the real reserve_cache is back after the concatenating side ran
    from webagent_r1.policy import hf

    assert hf.reserve_cache.__name__ == "reserve_cache"


def test_decode_bench_rejects_bad_sizes(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        load_bench().run(str(tmp_path), batches=(0,))


def test_drop_bench_times_both_sides_on_chat_prompts(tmp_path: Path) -> None:
    bench = load_bench()
    model = make_tiny_model(tmp_path / "model")
    out = bench.run_drop(str(model), batches=(3,), prompt_len=60, new_tokens=5, reps=1)
    [r] = out["results"]
    assert r["batch"] == 3 and r["prompt_tokens"] >= 20
    assert 1 <= r["mean_length"] <= r["max_length"] <= 5
    assert r["drop_s"] > 0 and r["keep_s"] > 0 and r["ratio"] > 0
    assert isinstance(r["same_tokens"], bool) and r["rows_dropped_per_call"] >= 0
    with pytest.raises(ValueError, match="must be >= 1"):
        bench.run_drop(str(model), batches=(2,), reps=0)


def test_prefill_bench_times_both_sides_and_counts_their_padding(tmp_path: Path) -> None:
    bench = load_bench()
    model = make_tiny_model(tmp_path / "model")
    out = bench.run_prefill(str(model), batches=(4,), prompt_len=40, new_tokens=3, reps=1)
    [r] = out["results"]
    assert r["batch"] == 4 and r["grouped_s"] > 0 and r["one_batch_s"] > 0
    # own parts of 8, 16, 24 and 32 tokens: one batch pads 24 + 16 + 8 = 48 tokens
    assert r["one_batch_padding"] == 48
    assert r["grouped_padding"] < r["one_batch_padding"]
