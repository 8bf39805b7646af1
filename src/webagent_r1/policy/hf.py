"""In-process Hugging Face engine: a transformers causal LM sampling on CPU or GPU.

Prompts are left-padded into a batch and decoded together with a KV cache. The loop is ours
rather than ``model.generate`` so that it returns, for every sampled id, the log-probability
under the distribution it was sampled from (temperature applied), and stops each sequence at
its own stop string.

Request-level batching: many episodes call ``generate`` concurrently, each with one prompt.
The calls are queued and one worker thread gathers them (up to ``max_batch_size`` prompts, or
whatever arrived within ``batch_wait_ms`` of the first) into a single batched decode, then
routes each row back to its caller's future. Only requests with equal sampling parameters
(the seed aside: each row has its own generator) share a batch.

Prefix cache (``rollout.prefix_cache``): the KV cache of every finished request (its prompt
and the completion tokens fed back) is kept, keyed by its token ids, in a least-recently-used
store bounded in bytes (``PrefixCache``). A later prompt that shares a prefix with a kept
request (the next turn of an episode, up to where context compression changed the text;
another episode of the same task) prefills only the rest: each row's cached prefix is copied
into a left-padded batch (``[padding | cached prefix | suffix]``, the padding masked), and the
suffixes run in length groups as before, a row whose suffix is shorter than its group's
longest computing the end of its prefix again instead of padding, so that the batch's KV
cache is no wider than its longest prompt. The store is emptied whenever the weights the
engine samples from change.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import inspect
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from webagent_r1.config import ModelConfig
from webagent_r1.policy.base import Completion, Engine, SamplingParams
from webagent_r1.policy.models import resolve_model
from webagent_r1.policy.precision import autocast_enabled, pick_device

try:  # transformers >= 4.54: per-layer cache objects
    from transformers.cache_utils import DynamicLayer
except ImportError:  # pragma: no cover - older transformers: decoding concatenates
    DynamicLayer = None


class _ReservedLayer(DynamicLayer or object):  # type: ignore[misc]
    """A ``DynamicLayer`` whose keys and values are views of buffers with room to grow.

    ``DynamicLayer.update`` concatenates, copying the whole cache for every decoded token: at
    12 rows of 750 tokens that copy was 60% of a CPU decode step. Here a new token is written
    in place, after every position handed out so far, and the layer's ``keys``/``values``
    become longer views of the same buffers. When they were replaced by other tensors
    (``batch_select_indices``, ``reset``…), the new states do not match the buffers (rows,
    dtype) or the room is used up, ``update`` drops the buffers and concatenates from then on.
    """

    def reserve(self, extra: int) -> None:
        B, H, L, D = self.keys.shape  # (B, H, L, D)
        self._kbuf = self.keys.new_empty((B, H, L + extra, D))  # (B, H, L + extra, D)
        self._vbuf = self.values.new_empty((B, H, L + extra, self.values.shape[-1]))
        self._kbuf[:, :, :L].copy_(self.keys)
        self._vbuf[:, :, :L].copy_(self.values)
        self.keys, self.values = self._kbuf[:, :, :L], self._vbuf[:, :, :L]

    def _fits(self, key_states: torch.Tensor) -> bool:
        buf, keys = self._kbuf, self.keys
        return (
            buf is not None
            and isinstance(keys, torch.Tensor)
            and keys.dim() == 4
            and keys.data_ptr() == buf.data_ptr()
            and keys.shape[0] == buf.shape[0] == key_states.shape[0]
            and key_states.dtype == buf.dtype
            and keys.shape[-2] + key_states.shape[-2] <= buf.shape[-2]
        )

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows ``indices`` and their room: only the positions handed out so far are
        copied, into new buffers of the same length (so decoding goes on writing in place)."""
        buf = getattr(self, "_kbuf", None)
        keys = self.keys
        if buf is None or not isinstance(keys, torch.Tensor) or keys.data_ptr() != buf.data_ptr():
            self._kbuf = self._vbuf = None  # not our buffer's view any more
            return super().batch_select_indices(indices)
        indices = indices.to(keys.device)
        L = keys.shape[-2]
        kbuf = buf.new_empty((len(indices), *buf.shape[1:]))  # (B', H, L', D)
        vbuf = self._vbuf.new_empty((len(indices), *self._vbuf.shape[1:]))
        kbuf[:, :, :L].copy_(self.keys.index_select(0, indices))
        vbuf[:, :, :L].copy_(self.values.index_select(0, indices))
        self._kbuf, self._vbuf = kbuf, vbuf
        self.keys, self.values = kbuf[:, :, :L], vbuf[:, :, :L]

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self._fits(key_states):
            self._kbuf = self._vbuf = None  # free the room; concatenate from here on
            return super().update(key_states, value_states, *args, **kwargs)
        L, n = self.keys.shape[-2], key_states.shape[-2]
        self._kbuf[:, :, L : L + n].copy_(key_states)
        self._vbuf[:, :, L : L + n].copy_(value_states)
        self.keys, self.values = self._kbuf[:, :, : L + n], self._vbuf[:, :, : L + n]
        return self.keys, self.values


def reserve_cache(past: Any, extra: int) -> int:
    """Give every full-attention layer of the KV cache ``past`` room for ``extra`` more tokens
    (see ``_ReservedLayer``); returns how many layers got it. Other layer kinds (sliding
    windows, quantised, static), empty layers and caches without per-layer objects are left
    as they are.
    """
    layers = getattr(past, "layers", None)
    if DynamicLayer is None or not isinstance(layers, list) or extra < 1:
        return 0
    n = 0
    for i, layer in enumerate(layers):
        keys = getattr(layer, "keys", None)
        if type(layer) is not DynamicLayer or not isinstance(keys, torch.Tensor) or keys.dim() != 4:
            continue
        reserved = _ReservedLayer.__new__(_ReservedLayer)
        reserved.__dict__.update(layer.__dict__)
        reserved.reserve(extra)
        layers[i] = reserved
        n += 1
    return n


def rows_can_be_dropped(past: Any) -> bool:
    """Whether every layer of the KV cache ``past`` holds only keys and values, so that
    selecting rows selects all of its state (recurrent, convolutional or quantised layers
    keep more, which ``batch_select_indices`` would leave behind or not support)."""
    layers = getattr(past, "layers", None)
    if DynamicLayer is None or not isinstance(layers, list):
        return False
    return all(type(layer) in (DynamicLayer, _ReservedLayer) for layer in layers)


def prefill_chunks(lengths: list[int], max_pad_ratio: float) -> list[list[int]]:
    """Split prompts into groups that are each run as one left-padded forward.

    A padded forward computes rows x longest tokens; prompts of 300 and 800 tokens in one batch
    compute 1,600 for 1,100 real ones. Sorted by length, a group takes the next prompt while its
    padded size stays within ``max_pad_ratio`` times its real tokens (``inf``: one group).

    Args:
        lengths: tokens of each prompt (each >= 1).
        max_pad_ratio: the most padded/real tokens a group may compute (>= 1).

    Returns:
        groups of prompt indices, each sorted by length, together covering every prompt once.
    """
    if max_pad_ratio < 1:
        raise ValueError(f"max_pad_ratio must be >= 1, got {max_pad_ratio}")
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    groups: list[list[int]] = []
    real = 0
    for i in order:
        # ascending order: the new prompt is the longest of the group it would join
        if groups and (len(groups[-1]) + 1) * lengths[i] <= max_pad_ratio * (real + lengths[i]):
            groups[-1].append(i)
            real += lengths[i]
        else:
            groups.append([i])
            real = lengths[i]
    return groups


def common_prefix(a: torch.Tensor, b: torch.Tensor) -> int:
    """Length of the longest common prefix of the 1-D id tensors ``a`` and ``b``."""
    n = min(len(a), len(b))
    diff = (a[:n] != b[:n]).nonzero()  # (k, 1) positions that differ
    return int(diff[0, 0]) if len(diff) else n


@dataclass(eq=False)
class CacheEntry:
    """The KV cache of one token sequence, as one row: every layer's keys and values."""

    ids: torch.Tensor
    """(n,) the token ids whose keys and values are held (int64, CPU)."""
    keys: list[torch.Tensor]
    """Per layer (H, n, D)."""
    values: list[torch.Tensor]
    """Per layer (H, n, D)."""
    nbytes: int = field(init=False)

    def __post_init__(self) -> None:
        self.nbytes = sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))


class PrefixCache:
    """KV caches of finished requests, keyed by their token ids, least recently used evicted
    first so that the held bytes stay within ``budget_bytes``.

    Only a model's plain per-layer key/value caches are stored (``rows_can_be_dropped``). The
    keys and values at position t depend on the ids up to t alone (causal attention, positions
    from 0), so any prefix of an entry serves any prompt that starts with the same ids.

    Args:
        budget_bytes: most bytes of keys and values held; an entry larger than that is not
            kept.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.entries: OrderedDict[int, CacheEntry] = OrderedDict()  # oldest use first
        self.nbytes = 0
        self.evicted = 0
        """Entries dropped to stay within the budget."""
        self._next = 0

    def __len__(self) -> int:
        return len(self.entries)

    def lookup(self, prompt: torch.Tensor) -> tuple[CacheEntry | None, int]:
        """The entry sharing the longest prefix with ``prompt`` (n,) and that length, at most
        ``n - 1`` (a prompt's last token is always run: its logits start decoding); (None, 0)
        without one. The entry found counts as used (moves to the back of the eviction line).
        """
        best, best_n, best_key = None, 0, None
        for key, e in self.entries.items():
            n = common_prefix(e.ids, prompt)
            if n > best_n:
                best, best_n, best_key = e, n, key
        if best_key is not None:
            self.entries.move_to_end(best_key)
        return best, min(best_n, len(prompt) - 1)

    def insert(self, entry: CacheEntry) -> None:
        """Keep ``entry``, dropping the entries it extends (every prompt they serve, it
        serves as far) and then the least recently used until the budget holds. An entry
        larger than the budget, or one that an entry held already extends, is not kept."""
        if entry.nbytes > self.budget_bytes:
            return
        n = len(entry.ids)
        for key, e in list(self.entries.items()):
            shared = common_prefix(e.ids, entry.ids)
            if shared == n and len(e.ids) >= n:  # held already: use it
                self.entries.move_to_end(key)
                return
            if shared == len(e.ids):  # a prefix of the new one
                self._drop(key)
        while self.entries and self.nbytes + entry.nbytes > self.budget_bytes:
            self._drop(next(iter(self.entries)))
            self.evicted += 1
        self.entries[self._next] = entry
        self._next += 1
        self.nbytes += entry.nbytes

    def clear(self) -> None:
        """Drop every entry (the weights changed: the keys and values are stale)."""
        self.entries.clear()
        self.nbytes = 0

    def _drop(self, key: int) -> None:
        self.nbytes -= self.entries.pop(key).nbytes


def load_tokenizer(name: str) -> Any:
    """Tokenizer of a registry name / local folder / hub id (offline for bundled models)."""
    # heavy: transformers loads only when this runs
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model(name))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(cfg: ModelConfig) -> Any:
    """The causal LM of ``cfg`` in its master dtype on its device, in eval mode."""
    # heavy: transformers loads only when this runs
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, cfg.dtype)
    model = AutoModelForCausalLM.from_pretrained(resolve_model(cfg.name), dtype=dtype)
    model.to(pick_device(cfg.device))
    model.eval()
    return model


def autocast_ctx(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    """bf16 autocast on ``device`` when ``enabled`` (resolve ``model.autocast_bf16`` first
    with ``policy.precision.autocast_enabled``), else a no-op."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


@dataclass(eq=False)
class _Request:
    """One queued ``generate`` call: its prompts, parameters and the caller's future."""

    prompts: list[list[int]]
    params: SamplingParams
    future: concurrent.futures.Future


def _batch_key(params: SamplingParams) -> tuple:
    """Requests with equal keys may share a batch (the seed is per row, so not in the key)."""
    return (params.temperature, params.top_p, params.max_new_tokens, tuple(params.stop))


def row_seeds(params: SamplingParams, n: int) -> list[int | None]:
    """Seeds of the ``n`` rows of one call: row b uses ``seed + b`` (None when unseeded).

    A row's sample then depends on its own seed only, never on which other requests happened
    to share its batch, so async and lockstep rollouts with the same seeds sample alike.
    """
    if params.seed is None:
        return [None] * n
    return [params.seed + b for b in range(n)]


class HFEngine(Engine):
    """Engine over an in-process transformers model, batching concurrent requests.

    Weights: the engine samples from ``self.model`` as it is at each decode step. A trainer in
    the same process may share the model object, so that an optimizer step is seen by the next
    generation without a copy; it must then hold ``engine.lock`` while it changes the weights,
    or call ``update_weights`` (which loads a state dict under the lock), so that no batch is
    decoded from half-updated weights. ``weight_version`` (0 at start) is stamped on every
    completion; ``WeightSync`` sets it after each update of a shared model, and
    ``update_weights`` sets it when it loads new weights.

    Args:
        model: a causal LM (may be shared with the trainer, see above).
        tokenizer: its tokenizer (pad and eos ids, decoding).
        autocast_bf16: sample under bf16 autocast.
        max_batch_size: prompts per forward; larger calls are split.
        batch_wait_ms: after the first queued request, wait this long for more before
            decoding a partial batch (a few ms: episodes' requests arrive close together).
        batch_wait_fraction: or up to this fraction of the previous batch's decode time, when
            longer: on CPU a decode takes tens of seconds and an env step well under one, so
            a short wait for the episodes still stepping fills the batch at a bounded cost.
        prefix_cache_mb: keep finished requests' KV caches up to this many MiB for later
            prompts that extend them (``PrefixCache``; 0: off). Emptied whenever the weights
            change: a new ``weight_version``, or any in-place change of a parameter (its
            version counter) or a parameter replaced, seen before the next batch decodes.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        autocast_bf16: bool = False,
        max_batch_size: int = 16,
        batch_wait_ms: float = 5.0,
        batch_wait_fraction: float = 0.0,
        prefix_cache_mb: float = 2048.0,
    ) -> None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        if prefix_cache_mb < 0:
            raise ValueError("prefix_cache_mb must be >= 0 (0 turns the prefix cache off)")
        self.prefix_cache: PrefixCache | None = None
        """Finished requests' KV caches (None: off)."""
        if prefix_cache_mb > 0:
            self.prefix_cache = PrefixCache(int(prefix_cache_mb * 2**20))
        self._weights_seen: tuple | None = None  # the weights the prefix cache was made with
        self.model = model
        self.tokenizer = tokenizer
        self.autocast_bf16 = autocast_bf16
        self.max_batch_size = max_batch_size
        self.batch_wait_s = batch_wait_ms / 1000.0
        self.batch_wait_fraction = batch_wait_fraction
        self._last_batch_s = 0.0
        self.device = next(model.parameters()).device
        self.pad_id = tokenizer.pad_token_id
        self.eos_ids = {tokenizer.eos_token_id}
        self.lock = threading.Lock()
        """Held while the model decodes or its weights change: it is not thread-safe."""
        self._weight_version = 0
        # transformers 5 renamed the KV-cache argument from past_key_values to cache.
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._worker_guard = threading.Lock()
        self.batch_sizes: list[int] = []
        """Rows of every batched decode the worker ran (for tests and metrics)."""
        self.generated_tokens = 0
        """Completion tokens sampled so far."""
        self.prefill_tokens = 0
        """Prompt tokens run through the model (shared prefixes and duplicates once)."""
        self.saved_prefill_tokens = 0
        """Prompt tokens not computed thanks to shared prefixes, duplicate prompts and the prefix
        cache."""
        self.min_shared_prefix = 16
        """Shorter shared prefixes are not worth a separate forward."""
        self.max_pad_ratio = 1.1 if self.device.type == "cpu" else float("inf")
        """Prefill prompts of unequal length in groups computing at most this many padded
        tokens per real one (``prefill_chunks``), their KV caches then merged into one batch.
        On CPU a forward costs in proportion to the tokens it computes, padding included, and
        the pages of a rollout batch differ by hundreds of tokens; on accelerators one padded
        forward is cheaper than several (``inf``: one group)."""
        self._merge_ok = True  # set False once a model's caches prove unmergeable
        self.padded_prefill_tokens = 0
        """Padding positions run through the model at prefill (computed, then masked)."""
        self.drop_finished_fraction = 0.125
        """Drop finished rows from a decoding batch once this share of its rows has stopped
        (0: at every stop; above 1: never)."""
        self.dropped_rows = 0
        """Finished rows dropped from decoding batches so far."""
        self.answer_early = True
        """Answer a request as soon as its rows stop (False: when its whole batch ends)."""
        self.cached_prefix_tokens = 0
        """Prompt tokens taken from the prefix cache instead of computed (in
        ``saved_prefill_tokens`` too)."""

    @property
    def weight_version(self) -> int:
        """Version of the weights in force (``VersionedEngine``); change it under ``lock``.
        A new version empties the prefix cache at once (its memory is free for the update)."""
        return self._weight_version

    @weight_version.setter
    def weight_version(self, version: int) -> None:
        if version != self._weight_version and self.prefix_cache is not None:
            self.prefix_cache.clear()
        self._weight_version = version

    def _weights_key(self) -> tuple | None:
        """What identifies the weights sampled from: the version, the precision, and every
        parameter's storage and in-place version counter (an optimizer step or a
        ``load_state_dict`` bumps it), so a trainer sharing the model that steps without
        telling the engine still invalidates the cache. None when unknowable (inference
        tensors keep no counter): the cache is then never reused."""
        try:
            params = tuple((p.data_ptr(), p._version) for p in self.model.parameters())
        except RuntimeError:
            return None
        return (self._weight_version, self.autocast_bf16, params)

    def _check_weights(self) -> None:
        """Empty the prefix cache when the weights changed since it was filled (under
        ``lock``)."""
        if self.prefix_cache is None:
            return
        key = self._weights_key()
        if key is None or key != self._weights_seen:
            self.prefix_cache.clear()
        self._weights_seen = key

    def prefill_counts(self) -> tuple[int, int]:
        """(prompt tokens computed, prompt tokens requested) since the engine started."""
        return self.prefill_tokens, self.prefill_tokens + self.saved_prefill_tokens

    def clear_prefix_cache(self) -> None:
        """Free the prefix cache's memory now (e.g. before an update that needs it)."""
        with self.lock:
            if self.prefix_cache is not None:
                self.prefix_cache.clear()

    @classmethod
    def from_config(cls, cfg: ModelConfig, **kw: Any) -> HFEngine:
        """Load the model and tokenizer of ``cfg``; ``kw`` goes to the constructor.
        ``model.autocast_bf16`` is resolved on the model's device (``autocast_enabled``)."""
        model = load_model(cfg)
        bf16 = autocast_enabled(cfg, next(model.parameters()).device)
        return cls(model, load_tokenizer(cfg.name), bf16, **kw)

    # ---------------------------------------------------------------- public API

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt.

        The call is queued; the worker thread decodes it together with other callers'
        requests of equal parameters. Cancelling the caller drops a request not yet started.
        """
        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        self._ensure_worker()
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put(_Request([list(p) for p in prompts], params, fut))
        return await asyncio.wrap_future(fut)

    def generate_sync(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Blocking ``generate`` of one call's prompts (no merging with other callers)."""
        seeds = row_seeds(params, len(prompts))
        out: list[Completion] = []
        with self.lock:
            for i in range(0, len(prompts), self.max_batch_size):
                j = i + self.max_batch_size
                out.extend(self._generate_batch(prompts[i:j], params, seeds[i:j]))
        return out

    def update_weights(
        self,
        state_dict: dict[str, torch.Tensor],
        version: int | None = None,
        *,
        strict: bool = True,
    ) -> None:
        """Load new weights into the model between two decodes (under ``lock``).

        Args:
            state_dict: parameter name → tensor (any device; copied into the model's).
            version: the new ``weight_version`` (default: one more than now).
            strict: every key must match (as ``nn.Module.load_state_dict``).
        """
        with self.lock, torch.no_grad():
            self.model.load_state_dict(state_dict, strict=strict)
            self.weight_version = self.weight_version + 1 if version is None else version

    def close(self) -> None:
        """Stop the worker thread (queued requests are still answered first)."""
        with self._worker_guard:
            worker, self._worker = self._worker, None
        if worker is not None:
            self._queue.put(None)
            worker.join(timeout=60)

    # ---------------------------------------------------------------- request batching

    def _ensure_worker(self) -> None:
        with self._worker_guard:
            if self._worker is None or not self._worker.is_alive():
                self._worker = threading.Thread(
                    target=self._serve, name="hf-engine-batcher", daemon=True
                )
                self._worker.start()

    def _serve(self) -> None:
        """Worker loop: gather queued requests into batches, decode, answer the futures."""
        pending: list[_Request] = []
        while True:
            if not pending:
                item = self._queue.get()
                if item is None:
                    return
                pending.append(item)
            closing = self._gather(pending)
            self._run_batch(self._take_batch(pending))
            if closing:
                while pending:
                    self._run_batch(self._take_batch(pending))
                return

    def _gather(self, pending: list[_Request]) -> bool:
        """Add queued requests to ``pending`` until a batch is full or the wait expires.

        Returns:
            True when ``close`` asked the worker to stop.
        """
        wait = max(self.batch_wait_s, self.batch_wait_fraction * self._last_batch_s)
        deadline = time.monotonic() + wait
        while sum(len(r.prompts) for r in pending) < self.max_batch_size:
            timeout = deadline - time.monotonic()
            try:
                item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
            except queue.Empty:
                return False
            if item is None:
                return True
            pending.append(item)
        return False

    def _take_batch(self, pending: list[_Request]) -> list[_Request]:
        """Remove and return one batch from ``pending``: the oldest live request, then the
        others with equal parameters while they fit in ``max_batch_size`` rows."""
        pending[:] = [r for r in pending if not r.future.cancelled()]
        if not pending:
            return []
        key = _batch_key(pending[0].params)
        chosen: list[_Request] = []
        rows = 0
        for r in pending:
            fits = not chosen or rows + len(r.prompts) <= self.max_batch_size
            if fits and _batch_key(r.params) == key:
                chosen.append(r)
                rows += len(r.prompts)
        pending[:] = [r for r in pending if r not in chosen]
        # A caller cancelled since the filter above is dropped here, atomically.
        return [r for r in chosen if r.future.set_running_or_notify_cancel()]

    def _run_batch(self, batch: list[_Request]) -> None:
        """Decode ``batch`` and answer each request as soon as all its rows are final
        (``answer_early``), so an episode whose completion stopped early steps its browser
        while the others decode; otherwise when the batch ends.

        Futures are resolved on this thread while it holds ``lock``: their done-callbacks
        must not call back into the engine (``asyncio.wrap_future`` only schedules the
        caller on its event loop)."""
        if not batch:
            return
        prompts = [p for r in batch for p in r.prompts]
        seeds = [s for r in batch for s in row_seeds(r.params, len(r.prompts))]
        owner: list[int] = []  # row -> its request
        first: list[int] = []  # request -> its first row
        for k, r in enumerate(batch):
            first.append(len(owner))
            owner += [k] * len(r.prompts)
        results: list[Completion | None] = [None] * len(prompts)
        left = [len(r.prompts) for r in batch]

        def deliver(row: int, completion: Completion) -> None:
            results[row] = completion
            k = owner[row]
            left[k] -= 1
            if left[k] == 0 and self.answer_early:
                n = len(batch[k].prompts)
                batch[k].future.set_result(results[first[k] : first[k] + n])

        try:
            with self.lock:
                t0 = time.monotonic()
                for i in range(0, len(prompts), self.max_batch_size):
                    j = i + self.max_batch_size
                    self._generate_batch(
                        prompts[i:j],
                        batch[0].params,
                        seeds[i:j],
                        on_done=lambda row, c, off=i: deliver(off + row, c),
                    )
                self._last_batch_s = time.monotonic() - t0
            for r, k in zip(batch, first, strict=True):
                if not r.future.done():  # answer_early off
                    r.future.set_result(results[k : k + len(r.prompts)])
        except BaseException as e:  # answer every caller still waiting, keep serving
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(e)

    # ---------------------------------------------------------------- decoding

    @torch.no_grad()
    def _generate_batch(
        self,
        prompts: list[list[int]],
        params: SamplingParams,
        seeds: list[int | None] | None = None,
        on_done: Callable[[int, Completion], None] | None = None,
    ) -> list[Completion]:
        """Decode one left-padded batch (caller holds ``lock``).

        Finished rows leave the batch: once ``drop_finished_fraction`` of the rows still decoded
        have stopped, the KV cache and the other per-row state are cut down to the live rows
        (on CPU a decode step costs roughly in proportion to its rows, and a batch otherwise
        runs every row for as many steps as its longest one). Only caches whose layers hold
        keys and values alone are cut (``rows_can_be_dropped``). A batch of fewer rows can
        round a matrix product differently in the last bit, so log-probs may differ by
        ~1e-6 from a run that keeps every row. With the prefix cache on, each row's keys and
        values (its prompt and the completion tokens fed back) are kept when it finishes.

        Args:
            prompts: B prompts of token ids.
            params: sampling parameters shared by the batch (their ``seed`` is ignored here).
            seeds: one seed per row (None: the global torch generator); see ``row_seeds``.
            on_done: called with (row, completion) as soon as a row's completion is final,
                before the other rows finish (the worker answers its caller then).
        """
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        B = len(prompts)
        seeds = seeds or [None] * B
        gens: list[torch.Generator | None] = [
            None if s is None else torch.Generator(device=self.device).manual_seed(s) for s in seeds
        ]

        tokens: list[list[int]] = [[] for _ in range(B)]
        logps: list[list[float]] = [[] for _ in range(B)]
        finish = ["length"] * B
        done: list[Completion | None] = [None] * B

        self.batch_sizes.append(B)  # counted first: callers may be answered before the end
        self._check_weights()  # stale keys and values must never be reused

        def complete(b: int, i: int) -> None:
            """Row ``b`` (row ``i`` of the decoding batch now) is final."""
            if keep_kv:
                self._remember(prompts[b] + tokens[b][:-1], past, mask, i)
            self.generated_tokens += len(tokens[b])
            done[b] = Completion(
                token_ids=tokens[b],
                logprobs=logps[b],
                text=self.tokenizer.decode(tokens[b], skip_special_tokens=True),
                finish_reason=finish[b],
                weight_version=self.weight_version,  # the caller holds the lock
            )
            if on_done is not None:
                on_done(b, done[b])

        rows = list(range(B))  # prompt index of each row still in the batch
        alive = torch.ones(B, dtype=torch.bool, device=self.device)  # (R,)
        with autocast_ctx(self.device, self.autocast_bf16):  # bf16 sampling on CPU and CUDA
            # 1) prefill (shared prefix once, duplicate prompts once), last-position logits
            logits, mask, step_pos, past = self._prefill(prompts)
            # the loop below runs at most max_new_tokens - 1 forwards: room for that many
            reserve_cache(past, params.max_new_tokens - 1)  # decoding writes in place
            droppable = rows_can_be_dropped(past)
            keep_kv = droppable and self.prefix_cache is not None
            for t in range(params.max_new_tokens):
                nxt, lp = self._sample(logits, params, [gens[b] for b in rows])  # (R,), (R,)
                # 2) record, then stop sequences on eos or a stop string
                for i, b in enumerate(rows):
                    if not alive[i]:
                        continue
                    tok = int(nxt[i])
                    tokens[b].append(tok)
                    logps[b].append(float(lp[i]))
                    if tok in self.eos_ids or self._hit_stop(tokens[b], params.stop):
                        alive[i] = False
                        finish[b] = "stop"
                        complete(b, i)
                if not alive.any() or t == params.max_new_tokens - 1:
                    break
                n_dead = len(rows) - int(alive.sum())
                if droppable and n_dead and n_dead >= self.drop_finished_fraction * len(rows):
                    # 3) drop the finished rows from the cache and the per-row state
                    keep = alive.nonzero()[:, 0]  # (R',)
                    past.batch_select_indices(keep)
                    mask, step_pos, nxt = mask[keep], step_pos[keep], nxt[keep]
                    rows = [rows[i] for i in keep.tolist()]
                    alive = alive[keep]
                    self.dropped_rows += n_dead
                # 4) one forward of one token per row (finished ones get padding)
                nxt = torch.where(alive, nxt, torch.full_like(nxt, self.pad_id))  # (R,)
                step_pos = step_pos[:, -1:] + 1  # (R, 1)
                mask = torch.cat([mask, alive.long()[:, None]], dim=1)  # (R, T + 1)
                out = self.model(
                    input_ids=nxt[:, None],
                    attention_mask=mask,
                    position_ids=step_pos,
                    use_cache=True,
                    logits_to_keep=1,  # LM head on the last position only: (R, 1, V)
                    **{self._cache_kw: past},
                )
                past = getattr(out, self._cache_kw)
                logits = out.logits[:, -1, :].float()  # (R, V)
        for i, b in enumerate(rows):
            if done[b] is None:  # stopped by max_new_tokens (finished rows were answered)
                complete(b, i)
        return [c for c in done if c is not None]

    def _remember(self, ids: list[int], past: Any, mask: torch.Tensor, i: int) -> None:
        """Keep row ``i``'s keys and values of the decoding cache ``past`` as the entry of
        ``ids`` (its prompt and the completion tokens fed so far: every sampled one but the
        last); its real columns are those ``mask`` (R, T) marks."""
        assert self.prefix_cache is not None
        cols = mask[i].nonzero()[:, 0]  # (n,) real positions, in order
        if len(cols) != len(ids):  # never expected: keep nothing rather than a wrong entry
            return
        keys = [layer.keys[i].index_select(1, cols) for layer in past.layers]  # (H, n, D) each
        values = [layer.values[i].index_select(1, cols) for layer in past.layers]
        self.prefix_cache.insert(CacheEntry(torch.tensor(ids), keys, values))

    def _prefill(
        self, prompts: list[list[int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any]:
        """Run the prompts through the model and return what decoding continues from.

        Prompt tokens dominate the cost on CPU, so two kinds of repetition are computed once:
        the prefix every prompt of the batch shares (the system prompt at least; the task too
        when a batch holds one group) is run as a single row, its KV cache then repeated; and
        identical prompts (a group's members at their first turn) are run once, their rows
        then copied. What follows the prefix is run in groups of like length
        (``prefill_chunks``, ``max_pad_ratio``), whose caches are then merged, so that a short
        prompt is not padded to the longest one's length. Layout of the cache:
        ``[shared prefix | left padding | own suffix]``; the padding is masked and positions
        skip it, so every row sees exactly its prompt.

        Returns:
            logits: (B, V) next-token logits of every prompt (fp32).
            mask: (B, T) attention mask over the cache.
            pos: (B, T) position ids (the last column is each row's last position).
            past: the KV cache, B rows.
        """
        if self.prefix_cache is not None:
            out = self._prefill_cached(prompts)
            if out is not None:
                return out
        rows: dict[tuple[int, ...], int] = {}
        index = [rows.setdefault(tuple(p), len(rows)) for p in prompts]  # prompt → unique row
        uniq = [list(k) for k in rows]
        n_uniq = len(uniq)
        # shared prefix, leaving every prompt at least one token of its own
        n_pre = min(len(p) for p in uniq) - 1
        for p in uniq[1:]:
            n_pre = next((i for i in range(n_pre) if p[i] != uniq[0][i]), n_pre)
        if n_uniq == 1 or n_pre < self.min_shared_prefix:
            n_pre = 0
        prefix = None  # the shared prefix's KV cache, one row
        if n_pre:
            out = self.model(
                input_ids=torch.tensor([uniq[0][:n_pre]], device=self.device),
                use_cache=True,
                logits_to_keep=1,
            )
            prefix = getattr(out, self._cache_kw)
        computed = n_pre + sum(len(p) - n_pre for p in uniq)
        self.prefill_tokens += computed
        self.saved_prefill_tokens += sum(len(p) for p in prompts) - computed
        suffixes = [p[n_pre:] for p in uniq]
        lengths = [len(x) for x in suffixes]
        groups = prefill_chunks(lengths, self.max_pad_ratio if self._merge_ok else float("inf"))
        if len(groups) == 1 or prefix is not None and not rows_can_be_dropped(prefix):
            groups = [list(range(n_uniq))]  # one forward, rows in prompt order
        ran = [self._prefill_rows([suffixes[u] for u in groups[0]], prefix, len(groups) == 1)]
        if len(groups) > 1 and not rows_can_be_dropped(ran[0][1]):
            self._merge_ok = False  # this model's caches cannot be merged: one forward
            groups, ran = [list(range(n_uniq))], [self._prefill_rows(suffixes, prefix, True)]
        ran += [self._prefill_rows([suffixes[u] for u in g], prefix) for g in groups[1:]]
        # left padding: every row's next token sits in the last column
        L = max(lengths)
        smask = torch.zeros((n_uniq, L), dtype=torch.long, device=self.device)  # (U, L)
        for u, n in enumerate(lengths):
            smask[u, L - n :] = 1
        pos = n_pre + (smask.cumsum(-1) - 1).clamp(min=0)  # (U, L)
        ones = torch.ones((n_uniq, n_pre), dtype=torch.long, device=self.device)
        mask = torch.cat([ones, smask], dim=1)  # (U, P + L)
        if len(groups) == 1:
            logits, past = ran[0]
        else:
            logits, past = self._merge_prefills(groups, ran, lengths, n_pre)
        if n_uniq < len(prompts):
            sel = torch.tensor(index, device=self.device)  # (B,)
            past.batch_select_indices(sel)
            logits, mask, pos = logits[sel], mask[sel], pos[sel]
        return logits, mask, pos, past

    def _prefill_cached(
        self, prompts: list[list[int]]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Any] | None:
        """``_prefill`` with the prefix cache: every distinct prompt starts from the longest
        prefix held (``PrefixCache.lookup``) or, when longer, the prefix the whole batch
        shares (run once here); only the rest is computed, in length groups whose caches are
        then merged. Layout of a row: ``[padding | its prefix | its suffix]``, the suffix as
        long as the group's longest (a shorter one starts earlier in the prefix), a prompt
        shorter than that left-padded; every padding column masked. None when this model's
        caches are not plain keys and values (``rows_can_be_dropped``): the cache is then
        turned off and ``_prefill`` runs as without it.
        """
        assert self.prefix_cache is not None
        rows: dict[tuple[int, ...], int] = {}
        index = [rows.setdefault(tuple(p), len(rows)) for p in prompts]  # prompt → unique row
        uniq = [list(k) for k in rows]
        hits = [self.prefix_cache.lookup(torch.tensor(p)) for p in uniq]
        held = [e for e, _ in hits]  # the store's entries (the batch's shared prefix is not)
        computed = self._shared_prefix_hits(uniq, hits)
        if computed is None:
            return None
        suffixes = [p[n:] for p, (_, n) in zip(uniq, hits, strict=True)]
        groups = prefill_chunks([len(x) for x in suffixes], self.max_pad_ratio)
        if len(groups) == 1:
            groups = [list(range(len(uniq)))]  # one forward, rows in prompt order
        # Each row of a group computes the last L tokens of its prompt, L the group's longest
        # suffix: where its own suffix is shorter, the end of its cached prefix again, in the
        # columns padding would take. The forward costs the same, and every row's prompt is
        # contiguous, so the batch's KV cache (read at every decoding step) is as wide as its
        # longest prompt, not its longest prefix plus its longest suffix.
        for g in groups:
            L = max(len(suffixes[u]) for u in g)
            for u in g:
                n = max(0, len(uniq[u]) - L)  # <= the hit: the row's suffix is at most L
                hits[u] = (hits[u][0] if n else None, n)
                suffixes[u] = uniq[u][n:]
        self.cached_prefix_tokens += sum(
            n for (e, n), h in zip(hits, held, strict=True) if e is not None and e is h
        )
        computed += sum(len(x) for x in suffixes)
        self.prefill_tokens += computed
        self.saved_prefill_tokens += sum(len(p) for p in prompts) - computed
        ran = []
        for g in groups:
            out = self._prefill_group([suffixes[u] for u in g], [hits[u] for u in g])
            if not rows_can_be_dropped(out[1]):
                self._disable_prefix_cache()
                return None
            ran.append(out)
        logits, past, mask = ran[0] if len(groups) == 1 else self._merge_right(groups, ran)
        pos = torch.tensor([[len(p) - 1] for p in uniq], device=self.device)  # (U, 1)
        if len(uniq) < len(prompts):
            sel = torch.tensor(index, device=self.device)  # (B,)
            past.batch_select_indices(sel)
            logits, mask, pos = logits[sel], mask[sel], pos[sel]
        return logits, mask, pos, past

    def _shared_prefix_hits(
        self, uniq: list[list[int]], hits: list[tuple[CacheEntry | None, int]]
    ) -> int | None:
        """Where the prompts ``uniq`` share a prefix of at least ``min_shared_prefix`` tokens
        (leaving each one of its own) that is longer than a row's cache hit, run it once and
        make it that row's hit (``hits`` is changed in place). Returns the tokens computed,
        or None when the model's cache is not plain keys and values (the cache is then off).
        """
        n_pre = min(len(p) for p in uniq) - 1
        for p in uniq[1:]:
            n_pre = next((i for i in range(n_pre) if p[i] != uniq[0][i]), n_pre)
        if len(uniq) == 1 or n_pre < self.min_shared_prefix or all(n >= n_pre for _, n in hits):
            return 0
        out = self.model(
            input_ids=torch.tensor([uniq[0][:n_pre]], device=self.device),
            use_cache=True,
            logits_to_keep=1,
        )
        past = getattr(out, self._cache_kw)
        if not rows_can_be_dropped(past):
            self._disable_prefix_cache()
            return None
        shared = CacheEntry(
            torch.tensor(uniq[0][:n_pre]),
            [layer.keys[0] for layer in past.layers],  # (H, P, D) each
            [layer.values[0] for layer in past.layers],
        )
        hits[:] = [(shared, n_pre) if n < n_pre else (e, n) for e, n in hits]
        return n_pre

    def _disable_prefix_cache(self) -> None:
        """This model's caches hold more than keys and values: no prefix cache for it."""
        assert self.prefix_cache is not None
        self.prefix_cache.clear()
        self.prefix_cache = None

    def _prefill_group(
        self, suffixes: list[list[int]], hits: list[tuple[CacheEntry | None, int]]
    ) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """One left-padded forward of ``suffixes``, row r after the first ``hits[r][1]``
        cached positions of entry ``hits[r][0]``. Returns the (n, V) next-token logits
        (fp32), the KV cache (``[padding | prefix | padding | suffix]`` per row) and its
        (n, W) attention mask."""
        n, L = len(suffixes), max(len(x) for x in suffixes)
        lens = [h for _, h in hits]
        P = max(lens)  # the longest prefix; shorter ones are left-padded to it
        ids = torch.full((n, L), self.pad_id, dtype=torch.long)  # (n, L)
        mask = torch.zeros((n, P + L), dtype=torch.long)  # (n, P + L)
        for r, x in enumerate(suffixes):
            ids[r, L - len(x) :] = torch.tensor(x)
            mask[r, P - lens[r] : P] = 1
            mask[r, P + L - len(x) :] = 1
        self.padded_prefill_tokens += n * L - sum(len(x) for x in suffixes)
        ids, mask = ids.to(self.device), mask.to(self.device)
        own = mask[:, P:]  # (n, L)
        pos = torch.tensor(lens, device=self.device)[:, None] + (own.cumsum(-1) - 1).clamp(min=0)
        kw = {self._cache_kw: self._gather_prefixes(hits, P)} if P else {}
        out = self.model(
            input_ids=ids,
            attention_mask=mask,  # (n, P + L)
            position_ids=pos,  # (n, L): each row's positions count its real tokens only
            use_cache=True,
            logits_to_keep=1,
            **kw,
        )
        return out.logits[:, -1, :].float(), getattr(out, self._cache_kw), mask

    def _gather_prefixes(self, hits: list[tuple[CacheEntry | None, int]], P: int) -> Any:
        """A KV cache of ``len(hits)`` rows and ``P`` positions: row r holds the first
        ``hits[r][1]`` positions of its entry, right-aligned (zeros before, masked)."""
        # heavy: transformers loads only when this runs
        from transformers import DynamicCache

        ref = next(e for e, n in hits if n)
        layers = []
        for i, (k0, v0) in enumerate(zip(ref.keys, ref.values, strict=True)):
            k = k0.new_zeros((len(hits), k0.shape[0], P, k0.shape[-1]))  # (n, H, P, D)
            v = v0.new_zeros((len(hits), v0.shape[0], P, v0.shape[-1]))
            for r, (e, h) in enumerate(hits):
                if e is not None and h:
                    k[r, :, P - h :] = e.keys[i][:, :h]
                    v[r, :, P - h :] = e.values[i][:, :h]
            layers.append((k, v))
        return DynamicCache(layers)

    def _merge_right(
        self, groups: list[list[int]], ran: list[tuple[torch.Tensor, Any, torch.Tensor]]
    ) -> tuple[torch.Tensor, Any, torch.Tensor]:
        """Lay the KV caches of separately prefilled groups out as one batch, rows in prompt
        order, each group's columns right-aligned (its next token in the last column) and
        zeros before them (masked), in the first group's cache object; each group's layer is
        freed once merged. Returns logits (U, V), the cache and its (U, W) mask."""
        U = sum(len(g) for g in groups)
        W = max(m.shape[1] for _, _, m in ran)
        logits = ran[0][0].new_empty((U, ran[0][0].shape[-1]))  # (U, V)
        mask = ran[0][2].new_zeros((U, W))  # (U, W)
        index = [torch.tensor(g, device=self.device) for g in groups]
        for rows, (lg, _, m) in zip(index, ran, strict=True):
            logits[rows] = lg
            mask[rows, W - m.shape[1] :] = m
        past = ran[0][1]
        for i, layer in enumerate(past.layers):
            k0, v0 = layer.keys, layer.values
            k = k0.new_zeros((U, k0.shape[1], W, k0.shape[-1]))  # (U, H, W, D)
            v = v0.new_zeros((U, v0.shape[1], W, v0.shape[-1]))
            for rows, (_, cache, m) in zip(index, ran, strict=True):
                k[rows, :, W - m.shape[1] :] = cache.layers[i].keys
                v[rows, :, W - m.shape[1] :] = cache.layers[i].values
                if cache is not past:
                    cache.layers[i].keys = cache.layers[i].values = None
            layer.keys, layer.values = k, v
        return logits, past, mask

    def _prefill_rows(
        self, suffixes: list[list[int]], prefix: Any, last: bool = False
    ) -> tuple[torch.Tensor, Any]:
        """One left-padded forward of ``suffixes`` after the shared ``prefix`` (a one-row KV
        cache, or None; left as it is unless ``last``). Returns the (n, V) next-token logits
        (fp32) and the KV cache, ``[prefix | left padding | own suffix]`` per row."""
        n, L = len(suffixes), max(len(x) for x in suffixes)
        P = prefix.get_seq_length() if prefix is not None else 0
        ids = torch.full((n, L), self.pad_id, dtype=torch.long)  # (n, L)
        smask = torch.zeros((n, L), dtype=torch.long)  # (n, L)
        for r, x in enumerate(suffixes):
            ids[r, L - len(x) :] = torch.tensor(x)
            smask[r, L - len(x) :] = 1
        self.padded_prefill_tokens += n * L - int(smask.sum())
        ids, smask = ids.to(self.device), smask.to(self.device)
        pos = P + (smask.cumsum(-1) - 1).clamp(min=0)  # (n, L)
        mask = torch.cat([torch.ones((n, P), dtype=torch.long, device=self.device), smask], 1)
        past = None
        if prefix is not None:
            past = prefix if last else copy.deepcopy(prefix)
            past.batch_repeat_interleave(n)
        out = self.model(
            input_ids=ids,
            attention_mask=mask,  # (n, P + L)
            position_ids=pos,
            use_cache=True,
            logits_to_keep=1,
            **({self._cache_kw: past} if past is not None else {}),
        )
        return out.logits[:, -1, :].float(), getattr(out, self._cache_kw)

    def _merge_prefills(
        self,
        groups: list[list[int]],
        ran: list[tuple[torch.Tensor, Any]],
        lengths: list[int],
        n_pre: int,
    ) -> tuple[torch.Tensor, Any]:
        """Lay the KV caches of separately prefilled groups out as one left-padded batch
        (``[prefix | left padding | own suffix]``, rows in prompt order) in the first group's
        cache object, layer by layer, each group's layer freed once merged (the peak holds
        one layer twice, not the cache). The columns between a group's padded length and the
        longest hold zeros, a group's own padding the pad token's states; both are masked."""
        U, L = len(lengths), max(lengths)
        logits = ran[0][0].new_empty((U, ran[0][0].shape[-1]))  # (U, V)
        past = ran[0][1]
        for i, layer in enumerate(past.layers):
            keys, values = [], []
            for _, cache in ran:
                keys.append(cache.layers[i].keys)  # (n_g, H, P + L_g, D)
                values.append(cache.layers[i].values)
            k0, v0 = keys[0], values[0]
            k = k0.new_zeros((U, k0.shape[1], n_pre + L, k0.shape[-1]))  # (U, H, P + L, D)
            v = v0.new_zeros((U, v0.shape[1], n_pre + L, v0.shape[-1]))
            for g, kg, vg in zip(groups, keys, values, strict=True):
                rows = torch.tensor(g, device=k.device)
                own = kg.shape[-2] - n_pre  # L_g: the group's padded suffix length
                k[rows, :, :n_pre] = kg[:, :, :n_pre]
                v[rows, :, :n_pre] = vg[:, :, :n_pre]
                k[rows, :, n_pre + L - own :] = kg[:, :, n_pre:]
                v[rows, :, n_pre + L - own :] = vg[:, :, n_pre:]
            layer.keys, layer.values = k, v
            for _, cache in ran[1:]:  # free each group's copy as soon as it is merged
                cache.layers[i].keys = cache.layers[i].values = None
        for g, (lg, _) in zip(groups, ran, strict=True):
            logits[torch.tensor(g, device=logits.device)] = lg
        return logits, past

    @staticmethod
    def _sample(
        logits: torch.Tensor,
        params: SamplingParams,
        gens: list[torch.Generator | None] | torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample ids from ``logits`` (B, V); return ids (B,) and their log-probs (B,) under
        the distribution actually sampled from (temperature applied; top-p not renormalised,
        so the log-prob is that of the policy, which is what importance ratios need).

        ``gens``: one generator per row (rows with None use the global generator), or one
        generator for the whole batch.
        """
        if params.temperature == 0:
            logp = torch.log_softmax(logits, dim=-1)  # (B, V)
            nxt = logits.argmax(-1)  # (B,)
            return nxt, logp.gather(-1, nxt[:, None])[:, 0]
        logp = torch.log_softmax(logits / params.temperature, dim=-1)  # (B, V)
        probs = logp.exp()  # (B, V)
        if params.top_p < 1.0:
            sp, si = probs.sort(dim=-1, descending=True)  # (B, V) each
            keep = sp.cumsum(-1) - sp < params.top_p  # (B, V)
            sp = sp * keep
            probs = torch.zeros_like(probs).scatter(-1, si, sp)
        if isinstance(gens, list) and any(g is not None for g in gens):
            # Per-row generators: a row's draw never depends on its batch neighbours.
            nxt = torch.cat(
                [torch.multinomial(probs[b], 1, generator=g) for b, g in enumerate(gens)]
            )  # (B,)
        else:
            gen = gens if isinstance(gens, torch.Generator) else None
            nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]  # (B,)
        return nxt, logp.gather(-1, nxt[:, None])[:, 0]

    def _hit_stop(self, toks: list[int], stops: list[str]) -> bool:
        if not stops:
            return False
        tail = self.tokenizer.decode(toks[-8:], skip_special_tokens=True)
        return any(s in tail for s in stops)
