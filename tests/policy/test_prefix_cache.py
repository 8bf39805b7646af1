"""The HF engine's prefix cache on a tiny random Llama: multi-turn episodes with context
compression sample the same tokens with the cache on and off, under a tiny byte budget too,
and the cache never outlives the weights it was computed with."""

from __future__ import annotations

import hashlib

import pytest
import torch
from tests.support.fakes import FakeTokenizer
from tests.support.tiny import one_thread, tiny_llama

from webagent_r1.agent.context import build_messages
from webagent_r1.config import AgentConfig
from webagent_r1.policy import hf as hf_module
from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.policy.hf import CacheEntry, HFEngine, PrefixCache

pytestmark = pytest.mark.skipif(
    hf_module.DynamicLayer is None, reason="transformers < 4.54 has no per-layer cache objects"
)

TOK = FakeTokenizer()
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=8, stop=[])
SAMPLED = SamplingParams(temperature=1.0, max_new_tokens=8, stop=[], seed=11)
AGENT = AgentConfig(keep_last_observations=1, strip_earlier_thinking=False)


@pytest.fixture(scope="module")
def model():
    with one_thread():
        # peaked logits (initializer_range 0.3): greedy completions differ between prompts
        yield tiny_llama(TOK.vocab_size, max_position_embeddings=1024, initializer_range=0.3).eval()


def _page(task: int, episode: int, turn: int, last: str) -> str:
    """A page that depends on the task, the episode (after the first turn) and the last
    response, as a real environment's next page does."""
    if turn == 0:
        return f"page of task {task}: " + "item a b c " * (3 + task)
    h = hashlib.sha256(f"{task}/{episode}/{turn}/{last}".encode()).hexdigest()[:6]
    return f"page {h} after turn {turn}: " + "row x y " * (2 + turn)


def _prompt(task: int, history: list[tuple[str, str]], page: str) -> list[int]:
    """Turn prompt ids: the agent's compressed messages (earlier pages replaced by the
    placeholder) in a plain chat layout."""
    msgs = build_messages(f"find item {task} in the shop", history, page, AGENT)
    return TOK.encode("".join(f"<|{m['role']}|>{m['content']}" for m in msgs) + "<|assistant|>")


def run_episodes(
    engine: HFEngine, params: SamplingParams, tasks: int = 3, group: int = 2, turns: int = 3
) -> list[list[Completion]]:
    """Episodes of ``tasks`` x ``group``, every turn's prompts of all of them decoded as one
    batch (several groups in one batch); the next prompt holds the response re-tokenised, as
    a rollout's does. Returns each episode's completions."""
    eps = [(t, g) for t in range(tasks) for g in range(group)]
    history: list[list[tuple[str, str]]] = [[] for _ in eps]
    pages = [_page(t, g, 0, "") for t, g in eps]
    out: list[list[Completion]] = [[] for _ in eps]
    for turn in range(turns):
        prompts = [_prompt(t, history[i], pages[i]) for i, (t, _) in enumerate(eps)]
        for i, c in enumerate(engine.generate_sync(prompts, params)):
            out[i].append(c)
            history[i].append((c.text, pages[i]))
            pages[i] = _page(*eps[i], turn + 1, c.text)
    return out


def _engine(model, cache_mb: float) -> HFEngine:
    return HFEngine(model, TOK, autocast_bf16=False, max_batch_size=16, prefix_cache_mb=cache_mb)


def _assert_same(got: list[list[Completion]], want: list[list[Completion]]) -> None:
    for ep_got, ep_want in zip(got, want, strict=True):
        for a, b in zip(ep_got, ep_want, strict=True):
            assert a.token_ids == b.token_ids, "the prefix cache changed a sampled token"
            torch.testing.assert_close(
                torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5, rtol=1e-5
            )


@pytest.mark.parametrize("params", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_multi_turn_episodes_sample_alike_with_the_cache_on_and_off(model, params) -> None:
    off, on = _engine(model, 0), _engine(model, 64)
    want, got = run_episodes(off, params), run_episodes(on, params)
    _assert_same(got, want)
    # the cache did the work: later turns and the second batch's prompts reused held entries
    assert on.cached_prefix_tokens > 0
    assert on.prefill_tokens < 0.8 * off.prefill_tokens
    requested = on.prefill_tokens + on.saved_prefill_tokens
    assert requested == off.prefill_tokens + off.saved_prefill_tokens


def test_a_tiny_budget_evicts_and_still_samples_alike(model) -> None:
    want = run_episodes(_engine(model, 0), GREEDY)
    probe = _engine(model, 64)
    run_episodes(probe, GREEDY, turns=1)
    entry = max(e.nbytes for e in probe.prefix_cache.entries.values())
    tiny = _engine(model, 2.5 * entry / 2**20)  # room for about two entries of six episodes
    got = run_episodes(tiny, GREEDY)
    _assert_same(got, want)
    cache = tiny.prefix_cache
    assert cache.evicted > 0 and cache.nbytes <= cache.budget_bytes
    assert tiny.cached_prefix_tokens > 0


def _continue(engine: HFEngine) -> list[Completion]:
    """Prompts that extend what the first turn of ``run_episodes`` left in the cache."""
    prompts = [_prompt(t, [("x", "y")], "page z") for t in range(3)]
    return engine.generate_sync(prompts, GREEDY)


@pytest.mark.parametrize("how", ["in_place", "update_weights", "version"])
def test_the_cache_is_dropped_when_the_weights_change(model, how) -> None:
    """However the weights change (an optimizer step on a shared model, which tells the
    engine nothing; ``update_weights``; a new ``weight_version``), nothing computed with the
    old weights is reused: the next call samples what an engine without a cache samples."""
    shared = type(model)(model.config).eval()
    shared.load_state_dict(model.state_dict())
    engine = _engine(shared, 64)
    run_episodes(engine, GREEDY, turns=1)
    assert len(engine.prefix_cache) > 0
    new = {k: v.clone() for k, v in shared.state_dict().items()}
    with torch.no_grad():
        for k, v in new.items():
            if "k_proj" in k or "v_proj" in k:  # the keys and values of every position move
                v.add_(torch.randn_like(v) * 0.5)
    if how == "in_place":
        with torch.no_grad():
            for k, p in shared.named_parameters():
                p.copy_(new[k])
    elif how == "update_weights":
        engine.update_weights(new)
    else:
        with torch.no_grad():  # the weights as a trainer leaves them, then the version bumped
            shared.load_state_dict(new)
        engine._weights_seen = engine._weights_key()  # as if the change went unseen
        engine.weight_version = 1
        assert len(engine.prefix_cache) == 0  # freed at once, not at the next call
    cached = engine.cached_prefix_tokens
    got = _continue(engine)
    assert engine.cached_prefix_tokens == cached, "stale keys and values were reused"
    want = _continue(_engine(shared, 0))
    for a, b in zip(got, want, strict=True):
        assert a.token_ids == b.token_ids
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(b.logprobs))


def test_prefix_cache_lookup_insert_and_lru() -> None:
    def entry(ids: list[int]) -> CacheEntry:
        kv = [torch.zeros(1, len(ids), 2)]  # (H, n, D): 8 bytes a position
        return CacheEntry(torch.tensor(ids), kv, [t.clone() for t in kv])

    cache = PrefixCache(budget_bytes=16 * 6)  # six positions
    cache.insert(entry([1, 2, 3]))
    e, n = cache.lookup(torch.tensor([1, 2, 9, 9]))
    assert n == 2 and e is not None
    assert cache.lookup(torch.tensor([1, 2, 3]))[1] == 2  # the last token is always run
    assert cache.lookup(torch.tensor([7, 1]))[1] == 0
    cache.insert(entry([1, 2, 3, 4]))  # extends the first: it replaces it
    assert len(cache) == 1 and cache.nbytes == 16 * 4
    cache.insert(entry([1, 2]))  # held already, as a prefix
    assert len(cache) == 1
    cache.insert(entry([5, 6]))
    cache.lookup(torch.tensor([1, 2, 3, 4, 5]))  # [1, 2, 3, 4] is now the most recent
    cache.insert(entry([7, 8]))  # over budget: the least recently used ([5, 6]) goes
    assert cache.evicted == 1
    assert cache.lookup(torch.tensor([5, 6, 0]))[1] == 0
    assert cache.lookup(torch.tensor([1, 2, 3, 4, 0]))[1] == 4
    cache.insert(entry(list(range(10, 20))))  # larger than the budget: not kept
    assert cache.nbytes <= cache.budget_bytes and len(cache) == 2


def test_prefill_counts_requested_is_every_prompt_token(model) -> None:
    engine = _engine(model, 64)
    first = [_prompt(t, [], _page(t, 0, 0, "")) for t in (0, 0, 1)]  # a group's duplicate
    later = [_prompt(0, [("x", _page(0, 0, 0, ""))], "page z")]  # extends a held prompt
    engine.generate_sync(first, GREEDY)
    engine.generate_sync(later, GREEDY)
    computed, requested = engine.prefill_counts()
    assert requested == sum(len(p) for p in first + later)
    # the duplicate is run once; the later prompt reuses the held system prompt and task
    assert computed <= requested - len(first[1]) - 16


def test_a_batch_of_held_and_new_prompts_is_no_wider_than_its_longest(model, monkeypatch) -> None:
    engine = _engine(model, 64)
    engine.max_pad_ratio = float("inf")  # one prefill forward for the whole batch
    first = _prompt(0, [], _page(0, 0, 0, ""))
    engine.generate_sync([first], GREEDY)
    # the episode's next turn (a long held prefix, a short suffix) beside a new task's first
    # prompt (only the chat preamble in common): their KV cache, read at every decoding
    # step, must be as wide as the longer prompt, not the longer prefix plus the longer suffix
    nxt = _prompt(0, [("x", _page(0, 0, 0, ""))], "page z")
    new = _prompt(4, [], _page(4, 0, 0, ""))
    widths = []
    prefill = engine._prefill_cached

    def spy(prompts: list[list[int]]):
        out = prefill(prompts)
        widths.append(out[1].shape[1])  # the attention mask: (rows, columns)
        return out

    monkeypatch.setattr(engine, "_prefill_cached", spy)
    before = engine.cached_prefix_tokens
    got = engine.generate_sync([nxt, new], GREEDY)
    assert engine.cached_prefix_tokens > before
    assert widths == [max(len(nxt), len(new))]
    want = _engine(model, 0).generate_sync([nxt, new], GREEDY)
    assert [c.token_ids for c in got] == [c.token_ids for c in want]
