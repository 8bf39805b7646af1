"""HFEngine request-level batching, on a tiny random Llama (no pretrained weights)."""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import Any

import pytest
import torch

from tests.support.fakes import FakeTokenizer
from tests.support.tiny import one_thread, tiny_llama
from webagent_r1.policy import hf as hf_module
from webagent_r1.policy.base import SamplingParams
from webagent_r1.policy.hf import (
    HFEngine,
    prefill_chunks,
    reserve_cache,
    row_seeds,
    rows_can_be_dropped,
)

TOK = FakeTokenizer()
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=6, stop=[])


@pytest.fixture(scope="module")
def model():
    with one_thread():
        yield tiny_llama(TOK.vocab_size).eval()


def _engine(model, **kw) -> HFEngine:
    return HFEngine(model, TOK, autocast_bf16=False, **kw)


PROMPTS = [TOK.encode(s) for s in ("hello there", "a b c", "the red mug", "zz")]


async def test_concurrent_calls_share_one_batch_and_get_their_own_rows(model) -> None:
    engine = _engine(model, batch_wait_ms=200)
    outs = await asyncio.gather(*(engine.generate([p], GREEDY) for p in PROMPTS))
    assert engine.batch_sizes == [4]
    ref = engine.generate_sync(PROMPTS, GREEDY)
    for [got], want in zip(outs, ref, strict=True):
        # the worker thread's kernels may sum in another order than this thread's
        assert got.token_ids == want.token_ids
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-5)
        assert len(got.token_ids) == 6 and got.finish_reason == "length"
        assert got.text == TOK.decode(got.token_ids, skip_special_tokens=True)
    engine.close()


async def test_batches_respect_params_and_max_batch_size(model) -> None:
    engine = _engine(model, batch_wait_ms=200, max_batch_size=2)
    hot = SamplingParams(temperature=1.0, max_new_tokens=6, stop=[])
    calls = [engine.generate([p], GREEDY) for p in PROMPTS[:3]]
    calls += [engine.generate([p], hot) for p in PROMPTS[:2]]
    outs = await asyncio.gather(*calls)
    assert all(len(o) == 1 for o in outs)
    # Greedy 3 requests → batches of 2 and 1; sampled 2 → one batch; never mixed.
    assert sorted(engine.batch_sizes) == [1, 2, 2] and len(engine.batch_sizes) == 3
    # A call larger than max_batch_size is split but answered as one list, in order.
    big = await engine.generate(PROMPTS, GREEDY)
    assert [c.token_ids for c in big] == [
        c.token_ids for c in engine.generate_sync(PROMPTS, GREEDY)
    ]
    engine.close()


def test_row_seeds_make_a_row_independent_of_its_neighbours(model) -> None:
    assert row_seeds(SamplingParams(seed=5), 3) == [5, 6, 7]
    assert row_seeds(SamplingParams(), 2) == [None, None]
    engine = _engine(model)
    hot = SamplingParams(temperature=1.0, max_new_tokens=8, stop=[], seed=11)
    p, q, r = TOK.encode("hello"), TOK.encode("abcde"), TOK.encode("vwxyz")
    a = engine._generate_batch([p, q], hot, [11, 1])
    b = engine._generate_batch([p, r], hot, [11, 2])
    assert a[0].token_ids == b[0].token_ids
    # Two rows with the same prompt and different seeds differ (with overwhelming odds).
    c = engine._generate_batch([p, p], hot, [11, 12])
    assert c[0].token_ids == a[0].token_ids and c[1].token_ids != c[0].token_ids
    # generate_sync: row b uses seed + b, so identical prompts still get distinct samples.
    d = engine.generate_sync([p, p], hot)
    assert d[0].token_ids == a[0].token_ids and d[1].token_ids == c[1].token_ids


async def test_cancelled_request_is_never_decoded(model) -> None:
    engine = _engine(model, batch_wait_ms=0)
    engine.lock.acquire()  # the worker will block on the lock with the first request
    try:
        first = asyncio.ensure_future(engine.generate([PROMPTS[0]], GREEDY))
        await asyncio.sleep(0.3)  # the worker took it and waits for the lock
        second = asyncio.ensure_future(engine.generate([PROMPTS[1]], GREEDY))
        await asyncio.sleep(0.05)
        second.cancel()
        await asyncio.sleep(0.05)
    finally:
        engine.lock.release()
    [c] = await first
    assert len(c.token_ids) == 6
    with pytest.raises(asyncio.CancelledError):
        await second
    await asyncio.sleep(0.1)
    assert engine.batch_sizes == [1]
    engine.close()


async def test_errors_reach_their_callers_and_the_worker_survives(model, monkeypatch) -> None:
    engine = _engine(model)
    with pytest.raises(ValueError, match="at least one token"):
        await engine.generate([[]], GREEDY)
    real = engine._generate_batch

    def boom(*a, **k):
        raise RuntimeError("decode failed")

    monkeypatch.setattr(engine, "_generate_batch", boom)
    with pytest.raises(RuntimeError, match="decode failed"):
        await engine.generate([PROMPTS[0]], GREEDY)
    monkeypatch.setattr(engine, "_generate_batch", real)
    [c] = await engine.generate([PROMPTS[0]], GREEDY)
    assert len(c.token_ids) == 6
    engine.close()


def test_update_weights_loads_under_the_lock(model) -> None:
    engine = _engine(model)
    before = engine.generate_sync([PROMPTS[0]], GREEDY)[0].token_ids
    state = {k: v.clone() for k, v in model.state_dict().items()}
    seen = []
    orig = model.load_state_dict

    def spy(sd, strict=True):
        seen.append(engine.lock.locked())
        return orig(sd, strict=strict)

    model.load_state_dict = spy
    try:
        # While another thread decodes (holds the lock), the update waits.
        engine.lock.acquire()
        t = threading.Thread(target=engine.update_weights, args=(state,))
        t.start()
        time.sleep(0.1)
        assert t.is_alive() and not seen
        engine.lock.release()
        t.join(5)
        assert seen == [True]
        new = {k: v.clone() for k, v in state.items()}
        new["lm_head.weight"] = torch.zeros_like(new["lm_head.weight"])
        new["lm_head.weight"][7] = 1.0  # every hidden state now prefers token 7 or none
        engine.update_weights(new)
        after = engine.generate_sync([PROMPTS[0]], GREEDY)[0].token_ids
        assert after != before
        engine.update_weights(state)
        assert engine.generate_sync([PROMPTS[0]], GREEDY)[0].token_ids == before
    finally:
        del model.load_state_dict


def test_shared_prefix_and_duplicate_prompts_are_computed_once(model) -> None:
    """A batch's common prefix runs once and identical prompts run once, yet every row gets
    what it would get alone, and the log-probs are those of a full forward over its own
    prompt + completion (what the trainer recomputes)."""
    engine = _engine(model)
    head = TOK.encode("you are a web agent " * 5)  # a shared 'system prompt'
    prompts = [head + TOK.encode(s) for s in ("find the red mug", "a b c", "find the red mug")]
    prompts.append(head + TOK.encode("zz"))
    assert len(head) >= engine.min_shared_prefix
    got = engine.generate_sync(prompts, GREEDY)
    n = sum(len(p) for p in prompts)
    # computed: the head once, then each distinct prompt's own tokens once
    assert engine.prefill_tokens == len(head) + sum(len(p) - len(head) for p in prompts[1:])
    assert engine.saved_prefill_tokens == n - engine.prefill_tokens > 2 * len(head)
    for p, g in zip(prompts, got, strict=True):
        [alone] = engine.generate_sync([p], GREEDY)
        assert g.token_ids == alone.token_ids
        torch.testing.assert_close(torch.tensor(g.logprobs), torch.tensor(alone.logprobs))
        ids = torch.tensor([p + g.token_ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0, len(p) - 1 : -1], -1)
        want = logp.gather(-1, torch.tensor(g.token_ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(g.logprobs), want, atol=1e-5, rtol=1e-5)
    engine.close()


needs_layers = pytest.mark.skipif(
    hf_module.DynamicLayer is None, reason="transformers < 4.54 has no per-layer cache objects"
)


def _cache_kw(model) -> str:
    """The KV-cache argument of ``model.forward`` (transformers 5 renames it ``cache``)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _forward(model, ids: torch.Tensor, past: Any = None, **kw: Any) -> tuple[torch.Tensor, Any]:
    """Logits (B, T, V) and the KV cache after ``ids`` (B, T)."""
    name = _cache_kw(model)
    out = model(input_ids=ids, use_cache=True, **({name: past} if past is not None else {}), **kw)
    return out.logits, getattr(out, name)


def _decode(model, ids: torch.Tensor, steps: int, room: int | None) -> tuple[torch.Tensor, Any]:
    """Greedy-decode ``steps`` tokens after ``ids`` (B, T); ``room``: reserve_cache first."""
    with torch.no_grad():
        logits, past = _forward(model, ids)
        if room is not None:
            assert reserve_cache(past, room) == model.config.num_hidden_layers
        out = [logits[:, -1]]
        for t in range(steps):
            nxt = out[-1].argmax(-1, keepdim=True)  # (B, 1)
            pos = torch.full_like(nxt, ids.shape[1] + t)
            logits, past = _forward(model, nxt, past, position_ids=pos)
            out.append(logits[:, -1])
    return torch.stack(out, 1), past  # (B, steps + 1, V)


@needs_layers
def test_reserved_cache_decodes_in_place_with_the_same_logits(model) -> None:
    """Decoding into a reserved cache writes each token into the buffer (no copy of the
    cache) and gives exactly the logits of the concatenating cache; past the room, it falls
    back to concatenation, frees the room and stays exact."""
    torch.manual_seed(1)
    ids = torch.randint(3, TOK.vocab_size, (3, 9))  # (B, T)
    want, _ = _decode(model, ids, 8, None)
    got, past = _decode(model, ids, 8, 8)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    layer = past.layers[0]
    assert layer.keys.shape[-2] == 9 + 8
    assert layer.keys.data_ptr() == layer._kbuf.data_ptr()  # still the reserved buffer
    short, past = _decode(model, ids, 8, 3)  # outgrows its room after 3 tokens
    torch.testing.assert_close(short, want, rtol=0, atol=0)
    assert past.layers[0]._kbuf is None and past.layers[0].keys.shape[-2] == 9 + 8


@needs_layers
def test_reserved_cache_keeps_its_room_when_rows_are_selected(model) -> None:
    """Selecting rows (as the engine does when finished rows leave a batch) copies them into
    new buffers with the same room, so decoding goes on in place and stays exact."""
    torch.manual_seed(2)
    ids = torch.randint(3, TOK.vocab_size, (3, 7))
    with torch.no_grad():
        _, past = _forward(model, ids)
        reserve_cache(past, 4)
        past.batch_select_indices(torch.tensor([2, 0]))
        layer = past.layers[0]
        assert layer.keys.data_ptr() == layer._kbuf.data_ptr() and layer._kbuf.shape[:3] == (
            2,
            2,
            7 + 4,
        )
        nxt = torch.tensor([[5], [6]])
        got = _forward(model, nxt, past)[0][:, -1]
        want = model(input_ids=torch.cat([ids[[2, 0]], nxt], 1)).logits[:, -1]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert layer.keys.data_ptr() == layer._kbuf.data_ptr() and layer.keys.shape[-2] == 8


@needs_layers
def test_reserved_cache_falls_back_when_its_states_are_replaced(model) -> None:
    """States replaced behind the layer's back (same batch size, so only the buffer identity
    tells) are never written over: the layer concatenates instead."""
    torch.manual_seed(2)
    ids = torch.randint(3, TOK.vocab_size, (2, 7))
    with torch.no_grad():
        _, past = _forward(model, ids)
        reserve_cache(past, 4)
        for layer in past.layers:  # what DynamicLayer's own row selection does
            hf_module.DynamicLayer.batch_select_indices(layer, torch.tensor([1, 0]))
        assert past.layers[0].keys.data_ptr() != past.layers[0]._kbuf.data_ptr()
        nxt = torch.tensor([[5], [6]])
        got = _forward(model, nxt, past)[0][:, -1]
        want = model(input_ids=torch.cat([ids[[1, 0]], nxt], 1)).logits[:, -1]
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert past.layers[0]._kbuf is None and past.layers[0].keys.shape[:3] == (2, 2, 8)


@needs_layers
def test_engine_output_is_unchanged_by_the_reserved_cache(model, monkeypatch) -> None:
    """Greedy and seeded sampling give the same ids and log-probs with and without it, over
    a batch with a shared prefix and a duplicate prompt (the prefill paths before it)."""
    head = TOK.encode("you are a web agent " * 2)
    prompts = [head + TOK.encode(s) for s in ("find the red mug", "a b", "zz top", "a b")]
    sampled = SamplingParams(temperature=0.8, max_new_tokens=10, stop=[], seed=7)
    reserved: list[int] = []
    real = hf_module.reserve_cache

    def spy(past: Any, extra: int) -> int:
        reserved.append(real(past, extra))
        return reserved[-1]

    outs = []
    for fake in (spy, lambda past, extra: 0):
        monkeypatch.setattr(hf_module, "reserve_cache", fake)
        engine = _engine(model)
        engine.min_shared_prefix = 4
        outs.append([engine.generate_sync(prompts, p) for p in (GREEDY, sampled)])
        assert engine.saved_prefill_tokens > len(head) * 3
        engine.close()
    assert reserved == [model.config.num_hidden_layers] * 2  # the reserved path ran
    for a, b in zip(outs[0], outs[1], strict=True):
        assert [c.token_ids for c in a] == [c.token_ids for c in b]
        assert [c.logprobs for c in a] == [c.logprobs for c in b]


LONG = SamplingParams(temperature=0.0, max_new_tokens=12, stop=[])


def _stops_of_first_rows(
    engine: HFEngine, prompts: list[list[int]], params: SamplingParams, n: int
) -> set[int]:
    """End-of-sequence ids that stop each of the first ``n`` rows early and none of the
    others (chosen from a run without them)."""
    free = engine.generate_sync(prompts, params)
    rest = {t for c in free[n:] for t in c.token_ids}
    return {next(t for t in c.token_ids[1:8] if t not in rest) for c in free[:n]}


@pytest.mark.parametrize("fraction", [0.0, 0.5], ids=["every_stop", "half_stopped"])
def test_finished_rows_leave_the_batch_and_the_rest_decode_alike(model, fraction) -> None:
    """Rows that stopped are dropped from the cache, and the rows after them (which move up
    in the batch) keep their own sampling generators and get the ids and log-probs they get
    when every row decodes to the end."""
    prompts = [TOK.encode(s) for s in ("hello there", "a b c", "the red mug", "zz", "hello")]
    sampled = SamplingParams(temperature=0.9, max_new_tokens=12, stop=[], seed=3)
    for params in (LONG, sampled):
        keep = _engine(model)
        keep.drop_finished_fraction = 2.0  # never
        keep.eos_ids |= _stops_of_first_rows(keep, prompts, params, 3)
        drop = _engine(model)
        drop.drop_finished_fraction = fraction
        drop.eos_ids = set(keep.eos_ids)
        want = keep.generate_sync(prompts, params)
        got = drop.generate_sync(prompts, params)
        assert all(w.finish_reason == "stop" and len(w.token_ids) < 9 for w in want[:3])
        assert any(w.finish_reason == "length" for w in want[3:])  # moved up, decoded on
        for g, w in zip(got, want, strict=True):
            assert g.token_ids == w.token_ids and g.finish_reason == w.finish_reason
            torch.testing.assert_close(
                torch.tensor(g.logprobs), torch.tensor(w.logprobs), atol=1e-5, rtol=1e-5
            )
        assert keep.dropped_rows == 0 and drop.dropped_rows >= 1


@pytest.mark.parametrize("answer_early", [True, False], ids=["answer_early", "at_batch_end"])
async def test_a_request_is_answered_when_its_rows_stop_not_when_the_batch_ends(
    model, answer_early: bool
) -> None:
    """Two requests share a batch; the one whose row stops early gets its answer while the
    other still decodes (counted in forwards of the model), unless ``answer_early`` is off."""
    engine = _engine(model, batch_wait_ms=300)
    engine.answer_early = answer_early
    early, late = TOK.encode("hello"), TOK.encode("a b c")
    free = engine.generate_sync([early, late], LONG)
    # the early row stops at the first of its tokens the other row never samples
    stop_at = next(i for i, t in enumerate(free[0].token_ids) if t not in free[1].token_ids)
    assert stop_at < 8
    engine.eos_ids.add(free[0].token_ids[stop_at])
    forwards = [0]

    def count(*_: Any) -> None:  # slow forwards: the caller resumes well within one
        forwards[0] += 1
        time.sleep(0.02)

    hook = model.register_forward_hook(count)
    seen: dict[str, int] = {}
    try:

        async def call(name: str, prompt: list[int]) -> list[Any]:
            out = await engine.generate([prompt], LONG)
            seen[name] = forwards[0]
            return out

        [a], [b] = await asyncio.gather(call("early", early), call("late", late))
    finally:
        hook.remove()
    assert engine.batch_sizes[-1] == 2
    assert len(a.token_ids) == stop_at + 1 and a.finish_reason == "stop" and len(b.token_ids) == 12
    assert (seen["early"] < seen["late"]) is answer_early and seen["late"] == forwards[0]
    engine.close()


@needs_layers
def test_rows_are_dropped_only_from_caches_of_plain_key_value_layers(model) -> None:
    """Layers with more state than keys and values (recurrent, quantised, subclasses) would
    keep rows that selection leaves behind: such caches keep every row."""
    with torch.no_grad():
        _, past = _forward(model, torch.randint(3, TOK.vocab_size, (2, 5)))
    assert rows_can_be_dropped(past)
    reserve_cache(past, 3)
    assert rows_can_be_dropped(past)

    class StatefulLayer(hf_module.DynamicLayer):
        pass

    past.layers[1].__class__ = StatefulLayer
    assert not rows_can_be_dropped(past)
    assert not rows_can_be_dropped(None) and not rows_can_be_dropped((torch.zeros(1),))


def test_prefill_chunks_group_prompts_of_like_length() -> None:
    # sorted 300, 310 | 790, 800: 3 x 790 = 2370 > 1.1 x 1400, so 790 starts a group
    assert prefill_chunks([300, 800, 310, 790], 1.1) == [[0, 2], [3, 1]]
    assert prefill_chunks([300, 800, 310, 790], float("inf")) == [[0, 2, 3, 1]]
    assert prefill_chunks([5, 5, 6], 1.0) == [[0, 1], [2]]  # no padding at all
    assert prefill_chunks([7], 1.1) == [[0]]
    with pytest.raises(ValueError, match="max_pad_ratio"):
        prefill_chunks([3, 4], 0.9)


@needs_layers
@pytest.mark.parametrize("shared_head", [True, False])
def test_prefill_in_length_groups_matches_one_padded_batch_and_a_full_forward(
    model, shared_head: bool
) -> None:
    """Prompts of very different lengths are prefilled in groups, their caches merged: every
    row samples what one padded batch samples, with the log-probs of a plain forward over its
    own prompt and completion, and less padding is computed."""
    head = TOK.encode("you are a web agent " * 5) if shared_head else []
    own = ("zz", "find the red mug " * 6, "a b c", "find the red mug " * 6, "q " * 40, "yy")
    prompts = [head + TOK.encode(s) for s in own]
    params = SamplingParams(temperature=0.7, max_new_tokens=6, stop=[], seed=3)
    got, padded = {}, {}
    for ratio in (1.1, float("inf")):
        engine = _engine(model, max_batch_size=len(prompts))
        engine.max_pad_ratio = ratio
        got[ratio] = engine.generate_sync(prompts, params)
        # every position a prefill forward ran: prompt tokens (with the prefix cache, the end
        # of a held prefix again where a row's suffix is short) and padding
        padded[ratio] = engine.padded_prefill_tokens + engine.prefill_tokens
        engine.close()
    assert padded[1.1] < 0.6 * padded[float("inf")]
    for a, b, p in zip(got[1.1], got[float("inf")], prompts, strict=True):
        assert a.token_ids == b.token_ids
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs))
        # sampled at T = 0.7: the stored log-probs are of the tempered distribution
        ids = torch.tensor([p + a.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0, len(p) - 1 : -1] / 0.7
        want = torch.log_softmax(logits, -1).gather(-1, torch.tensor(a.token_ids)[:, None])[:, 0]
        torch.testing.assert_close(torch.tensor(a.logprobs), want, atol=1e-5, rtol=1e-5)


@needs_layers
def test_prefill_falls_back_to_one_batch_when_caches_cannot_be_merged(model, monkeypatch) -> None:
    """A model whose cache layers hold more than keys and values (here: said to) is prefilled
    as one padded batch from then on, with the same outputs."""
    prompts = [TOK.encode(s) for s in ("zz", "find the red mug " * 6, "q " * 30)]
    engine = _engine(model, max_batch_size=3)
    want = engine.generate_sync(prompts, GREEDY)
    monkeypatch.setattr(hf_module, "rows_can_be_dropped", lambda past: False)
    got = engine.generate_sync(prompts, GREEDY)
    assert engine._merge_ok is False
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs))
    engine.close()


@needs_layers
@pytest.mark.parametrize("cache_mb", [0.0, 64.0])
def test_merged_prefill_cache_equals_one_padded_batch_where_unmasked(model, cache_mb) -> None:
    """The merged cache holds what one padded batch holds: equal keys and values at every
    position a row attends to, in order, and the same next positions; without the prefix
    cache the very same layout (masks, positions, length)."""
    head = TOK.encode("you are a web agent " * 5)
    prompts = [head + TOK.encode(s) for s in ("zz", "find the red mug " * 6, "q " * 30, "a")]
    out = {}
    for ratio in (1.1, float("inf")):
        engine = _engine(model, prefix_cache_mb=cache_mb)
        engine.max_pad_ratio = ratio
        with torch.no_grad():
            out[ratio] = engine._prefill(prompts)
    (lg_a, mask_a, pos_a, past_a), (lg_b, mask_b, pos_b, past_b) = out[1.1], out[float("inf")]
    if not cache_mb:
        assert torch.equal(mask_a, mask_b) and torch.equal(pos_a, pos_b)
    assert torch.equal(pos_a[:, -1], pos_b[:, -1])
    assert torch.equal(mask_a.sum(1), mask_b.sum(1))
    assert past_a.get_seq_length() == mask_a.shape[1] and past_b.get_seq_length() == mask_b.shape[1]
    torch.testing.assert_close(lg_a, lg_b, atol=1e-5, rtol=1e-5)
    for la, lb in zip(past_a.layers, past_b.layers, strict=True):
        for a, b in ((la.keys, lb.keys), (la.values, lb.values)):  # (B, H, T, D)
            sel_a = a.transpose(1, 2)[mask_a.bool()]  # (N, H, D) real positions, row by row
            sel_b = b.transpose(1, 2)[mask_b.bool()]
            torch.testing.assert_close(sel_a, sel_b, atol=1e-5, rtol=1e-5)
