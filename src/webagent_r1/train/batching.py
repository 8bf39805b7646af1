"""Turn samples → padded micro-batches → log-probs of the completion tokens only.

Every turn is its own training sample (docs/design.md, "Context compression"): its stored prompt
ids then its stored completion ids, never re-tokenised. The forward pass attends over the whole
sequence (observation tokens included: the policy is trained on exactly the context it sampled
from) but the LM head runs only on the positions that predict a completion token. Full-vocab
logits over every position would dominate memory (4 × 1024 × 49152 fp32 = 805 MB);
over completion positions only they are a few percent of that.

Micro-batches are formed by length (longest first) so that padding stays small, and each holds
at most ``token_budget`` padded tokens; a batch larger than that accumulates gradients over
several micro-batches. Because every loss here is a weighted sum over completion tokens with
weights fixed for the whole batch, accumulating micro-batches gives exactly the full-batch
gradient.

Shared prompts (``train.share_prompts``): the G trajectories of a group start from the same
page, so their first turns have identical prompt ids, and later turns coincide too whenever two
episodes took the same action. Such samples are packed into one row, the prompt once and then
each completion, with a block attention mask (every completion sees the prompt and its own
earlier tokens, never a sibling completion) and position ids that restart after the prompt for
each completion. Every completion token then sees exactly the context it was sampled from, and
the prompt's forward and backward run once instead of once per sample. In M-GRPO rollouts of
the CPU recipe this cut the tokens of an update to 29-38% of the unshared count.

Shared prefix (``train.share_prefix``): every prompt starts with the same system prompt (289
of the ~715 tokens of a CPU-recipe prompt). The prefix that all rows of a micro-batch share is
run once, as a one-row forward whose KV cache is repeated for every row; the rows then hold
only what follows it, with positions continuing after it. Gradients flow through that cache
(the repeat sums them back), so log-probs and gradients are those of full rows (without
dropout, which the prefix draws once for all rows). On the CPU recipe's demonstrations the
forward and backward of an 8-sample BC batch took ~30% less time, a whole BC step ~15% less.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from webagent_r1.policy.hf import autocast_ctx
from webagent_r1.policy.trainable import unwrap_model
from webagent_r1.rollout.trajectories import Sample

__all__ = [
    "CompletionLM",
    "MicroBatch",
    "collate",
    "completion_logits",
    "completion_logprobs",
    "micro_batches",
    "pack_plan",
    "padding_batch",
    "prompt_groups",
    "shared_prefix_len",
    "supports_shared_prefix",
    "supports_shared_prompts",
]


def micro_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Group sample indices into micro-batches of at most ``token_budget`` padded tokens.

    Samples are taken longest first, so each micro-batch holds similar lengths (little
    padding). A sample longer than the budget gets a micro-batch of its own.

    Args:
        lengths: sequence length of each sample.
        token_budget: most ``rows × longest row`` tokens per micro-batch.

    Returns:
        Lists of sample indices; every index appears exactly once.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    out: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        # rows are sorted by length, so the first row of ``cur`` is its longest
        longest = lengths[cur[0]] if cur else lengths[i]
        if cur and (len(cur) + 1) * longest > token_budget:
            out.append(cur)
            cur = []
        cur.append(i)
    if cur:
        out.append(cur)
    return out


@dataclass
class MicroBatch:
    """A right-padded batch of turn samples and where its completion tokens are."""

    input_ids: torch.Tensor
    """(B, T) token ids, right-padded (after ``prefix_ids`` when there is a shared prefix)."""
    attention_mask: torch.Tensor
    """(B, P0 + T) 1 on real tokens (P0 = ``prefix_len``), or the block mask described at
    ``position_ids``."""
    rows: torch.Tensor
    """(N,) row of each completion token."""
    cols: torch.Tensor
    """(N,) column of the position that *predicts* each completion token (its own - 1)."""
    targets: torch.Tensor
    """(N,) the completion token ids."""
    sample: torch.Tensor
    """(N,) index (into the full sample list) of each token's sample."""
    offset: torch.Tensor
    """(N,) index of each token within its sample's completion."""
    position_ids: torch.Tensor | None = None
    """(B, T) positions, set for shared-prompt rows (then ``attention_mask`` is a
    (B, 1, T, P0 + T) boolean block mask, True where a query position may attend a key) and
    whenever there is a shared prefix."""
    prefix_ids: torch.Tensor | None = None
    """(1, P0) the prompt prefix every row shares, run once (``share_prefix``); the rows,
    columns and masks above then describe the tokens after it (masks have P0 more columns,
    all attending the prefix)."""

    @property
    def prefix_len(self) -> int:
        """P0: tokens of the shared prefix (0 without one)."""
        return 0 if self.prefix_ids is None else int(self.prefix_ids.shape[1])


def prompt_groups(samples: Sequence[Sample]) -> list[list[int]]:
    """Indices of the samples grouped by identical prompt ids, in order of first appearance.

    Args:
        samples: turn samples.

    Returns:
        Lists of sample indices; every index appears exactly once; samples in one list have
        the same ``input_ids[:prompt_len]``.
    """
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for i, s in enumerate(samples):
        by_prompt.setdefault(tuple(s.input_ids[: s.prompt_len]), []).append(i)
    return list(by_prompt.values())


MIN_SHARED_PREFIX = 16
"""Shorter shared prefixes are not worth a separate forward."""


def shared_prefix_len(prompts: Sequence[Sequence[int]]) -> int:
    """Length of the prefix that all ``prompts`` share, leaving each at least one token of its
    own (its last prompt position predicts its first completion token); 0 when there are
    fewer than two prompts or the prefix is shorter than ``MIN_SHARED_PREFIX``."""
    if len(prompts) < 2:
        return 0
    first = prompts[0]
    n = min(len(p) for p in prompts) - 1
    for p in prompts[1:]:
        n = next((i for i in range(n) if p[i] != first[i]), n)
    return n if n >= MIN_SHARED_PREFIX else 0


def supports_shared_prefix(model: Any) -> bool:
    """Whether a shared prefix can be run once for a micro-batch of ``model``: attention that
    takes the rows' masks over a cache ('sdpa', 'eager'), every layer attending to the whole
    context (a sliding-window layer's cache keeps only its window), no gradient checkpointing
    (it drops the cache) and no sharding (the decoder would run twice inside one FSDP
    forward)."""
    if isinstance(model, CompletionLM) or not supports_shared_prompts(model):
        return False
    lm = unwrap_model(model)
    if not _full_attention_only(lm.config):
        return False
    # transformers 5 renamed the property (the old name warns)
    name = "is_activation_checkpointing"
    return not getattr(lm, name if hasattr(type(lm), name) else "is_gradient_checkpointing", False)


def _full_attention_only(config: Any) -> bool:
    """Whether every layer of ``config`` attends to the whole context (no sliding window)."""
    types = getattr(config, "layer_types", None)
    if types is not None:
        return all(t == "full_attention" for t in types)
    return getattr(config, "sliding_window", None) is None or not getattr(
        config, "use_sliding_window", True
    )


def _row_length(samples: Sequence[Sample], group: Sequence[int]) -> int:
    """Tokens of the packed row of ``group``: the prompt once, then every completion."""
    first = samples[group[0]]
    return first.prompt_len + sum(len(samples[i].input_ids) - samples[i].prompt_len for i in group)


def pack_plan(
    samples: Sequence[Sample], token_budget: int, share_prompts: bool = False
) -> list[list[list[int]]]:
    """Micro-batches of rows, each row a list of sample indices that share one prompt.

    Args:
        samples: turn samples.
        token_budget: most ``rows × longest row`` tokens per micro-batch.
        share_prompts: pack samples with identical prompts into one row; False gives one
            sample per row (the plain right-padded layout).

    Returns:
        ``plan[k]`` is micro-batch k, a list of rows; every sample index appears exactly once.
    """
    rows = prompt_groups(samples) if share_prompts else [[i] for i in range(len(samples))]
    lengths = [_row_length(samples, r) for r in rows]
    return [[rows[j] for j in mb] for mb in micro_batches(lengths, token_budget)]


def supports_shared_prompts(model: Any) -> bool:
    """Whether the model's attention takes the block masks of shared-prompt rows.

    Hugging Face's 'sdpa' and 'eager' attention accept a custom 4D mask; flash-attention
    kernels do not (their callers fall back to one sample per row).
    """
    cfg = getattr(unwrap_model(model), "config", None)
    return getattr(cfg, "_attn_implementation", None) in ("sdpa", "eager")


def collate_rows(
    samples: Sequence[Sample],
    rows: Sequence[Sequence[int]],
    pad_id: int,
    share_prefix: bool = False,
) -> MicroBatch:
    """Build the micro-batch of ``rows`` (each a list of samples with one prompt).

    When every row holds one sample this is ``collate`` (a 2D padding mask). Otherwise row b
    is ``prompt, completion_1, …, completion_k`` then padding; completion j's tokens sit at
    positions ``P … P + len_j - 1`` (P = prompt length) and attend to the prompt and to their
    own completion causally; its first token is predicted from the prompt's last position,
    exactly as in the unshared row. Padding attends only to itself (no empty softmax row).
    With ``share_prefix`` the prefix all rows' prompts share (``shared_prefix_len``) is left
    out of the rows, becomes ``prefix_ids``, and every position attends to it.
    """
    if all(len(r) == 1 for r in rows):
        return collate(samples, [r[0] for r in rows], pad_id, share_prefix)
    firsts = [samples[r[0]] for r in rows]
    n0 = shared_prefix_len([s.input_ids[: s.prompt_len] for s in firsts]) if share_prefix else 0
    T = max(_row_length(samples, r) for r in rows) - n0
    B = len(rows)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    pos = torch.zeros((B, T), dtype=torch.long)
    causal = torch.ones((T, T), dtype=torch.bool).tril()  # (T, T)
    mask = torch.zeros((B, T, n0 + T), dtype=torch.bool)  # (B, T, P0 + T)
    mask[:, :, :n0] = True  # the shared prefix
    mask[:, :, n0:] = torch.eye(T, dtype=torch.bool)  # padding sees itself
    r, c, tgt, smp, off = [], [], [], [], []
    for b, row in enumerate(rows):
        first = samples[row[0]]
        P = first.prompt_len - n0  # the prompt's tokens in this row
        ids[b, :P] = torch.tensor(first.input_ids[n0 : first.prompt_len], dtype=torch.long)
        pos[b, :P] = torch.arange(n0, n0 + P)
        mask[b, :P, n0 : n0 + P] = causal[:P, :P]
        start = P
        for i in row:
            s = samples[i]
            comp = s.input_ids[s.prompt_len :]
            n = len(comp)
            end = start + n
            ids[b, start:end] = torch.tensor(comp, dtype=torch.long)
            pos[b, start:end] = torch.arange(n0 + P, n0 + P + n)
            mask[b, start:end, n0 : n0 + P] = True  # the prompt
            mask[b, start:end, n0 + start : n0 + end] = causal[:n, :n]  # its own earlier tokens
            r.extend([b] * n)
            # the prompt's last position predicts the first token, then each token the next
            c.extend([P - 1, *range(start, end - 1)][:n])
            tgt.extend(comp)
            smp.extend([i] * n)
            off.extend(range(n))
            start = end
    return MicroBatch(
        input_ids=ids,
        attention_mask=mask[:, None],  # (B, 1, T, P0 + T)
        rows=torch.tensor(r, dtype=torch.long),
        cols=torch.tensor(c, dtype=torch.long),
        targets=torch.tensor(tgt, dtype=torch.long),
        sample=torch.tensor(smp, dtype=torch.long),
        offset=torch.tensor(off, dtype=torch.long),
        position_ids=pos,
        prefix_ids=_prefix_tensor(firsts[0].input_ids, n0),
    )


def _prefix_tensor(ids: Sequence[int], n: int) -> torch.Tensor | None:
    """(1, n) the first ``n`` of ``ids``; None when n is 0."""
    return torch.tensor([list(ids[:n])], dtype=torch.long) if n else None


def collate(
    samples: Sequence[Sample], indices: Sequence[int], pad_id: int, share_prefix: bool = False
) -> MicroBatch:
    """Build the micro-batch of ``samples[i] for i in indices`` (one sample a row, right
    padding); with ``share_prefix`` the prefix their prompts share becomes ``prefix_ids``."""
    rows_ = [samples[i] for i in indices]
    n0 = shared_prefix_len([s.input_ids[: s.prompt_len] for s in rows_]) if share_prefix else 0
    T = max(len(s.input_ids) for s in rows_) - n0
    ids = torch.full((len(rows_), T), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows_), n0 + T), dtype=torch.long)  # (B, P0 + T)
    mask[:, :n0] = 1
    r, c, tgt, smp, off = [], [], [], [], []
    for b, (i, s) in enumerate(zip(indices, rows_, strict=True)):
        n = len(s.input_ids) - n0
        ids[b, :n] = torch.tensor(s.input_ids[n0:], dtype=torch.long)
        mask[b, n0 : n0 + n] = 1
        n_comp = len(s.input_ids) - s.prompt_len
        r.extend([b] * n_comp)
        c.extend(range(s.prompt_len - 1 - n0, n - 1))  # position p predicts token p + 1
        tgt.extend(s.input_ids[s.prompt_len :])
        smp.extend([i] * n_comp)
        off.extend(range(n_comp))
    return MicroBatch(
        input_ids=ids,
        attention_mask=mask,
        rows=torch.tensor(r, dtype=torch.long),
        cols=torch.tensor(c, dtype=torch.long),
        targets=torch.tensor(tgt, dtype=torch.long),
        sample=torch.tensor(smp, dtype=torch.long),
        offset=torch.tensor(off, dtype=torch.long),
        position_ids=(n0 + torch.arange(T)).expand(len(rows_), T).clone() if n0 else None,
        prefix_ids=_prefix_tensor(rows_[0].input_ids, n0),
    )


def completion_logits(
    lm: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    autocast_bf16: bool = False,
    position_ids: torch.Tensor | None = None,
    prefix_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Logits at the positions that predict completion tokens (the LM head runs there only).

    Args:
        lm: a Hugging Face causal LM (PEFT's LoRA layers may be injected in it).
        input_ids: (B, T) right-padded ids.
        attention_mask: (B, P0 + T) 1 on real tokens, or a (B, 1, T, P0 + T) boolean block
            mask (shared-prompt rows, with ``position_ids``).
        rows: (N,) row of each completion token.
        cols: (N,) column of the position that predicts it.
        autocast_bf16: run under bf16 autocast (``model.autocast_bf16`` resolved).
        position_ids: (B, T) positions (None: 0, 1, 2, … along each row).
        prefix_ids: (1, P0) ids every row continues (run once, its KV cache repeated for
            every row); None: the rows are whole.

    Returns:
        (N, V) logits, in the dtype the head produced.
    """
    backbone = lm.get_decoder()
    head = lm.get_output_embeddings()
    device = input_ids.device
    if attention_mask.dim() == 4 and lm.config._attn_implementation == "eager":
        # eager attention adds its mask to the scores
        dtype = lm.get_input_embeddings().weight.dtype
        attention_mask = torch.zeros(attention_mask.shape, dtype=dtype, device=device).masked_fill(
            ~attention_mask, torch.finfo(dtype).min
        )
    with autocast_ctx(device, autocast_bf16):
        cache: dict[str, Any] = {}
        if prefix_ids is not None:
            cache = _prefix_cache(backbone, lm.config, prefix_ids, int(input_ids.shape[0]))
        out = backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=bool(cache),
            **cache,
        )
        hidden = out.last_hidden_state  # (B, T, H)
        picked = hidden[rows, cols]  # (N, H): completion positions
        return head(picked)  # (N, V): the LM head only where a loss is taken


def _prefix_cache(backbone: Any, config: Any, prefix_ids: torch.Tensor, rows: int) -> dict:
    """Run ``prefix_ids`` (1, P0) through ``backbone`` once and return the keyword argument
    that hands its KV cache, repeated for ``rows`` rows, to the next call. The cache keeps
    the autograd graph: the rows' gradients reach the prefix's activations, summed."""
    # heavy: transformers loads only when this runs
    from transformers import DynamicCache

    try:
        cache = DynamicCache(config=config)
    except TypeError:  # transformers 4.x
        cache = DynamicCache()
    # transformers 5 renamed the KV-cache argument from past_key_values to cache.
    kw = "cache" if "cache" in inspect.signature(backbone.forward).parameters else "past_key_values"
    backbone(input_ids=prefix_ids, use_cache=True, **{kw: cache})
    cache.batch_repeat_interleave(rows)
    return {kw: cache}


class CompletionLM(torch.nn.Module):
    """A causal LM whose ``forward`` is ``completion_logits``.

    It exists for sharded training (``train/sharding.py``): FSDP gathers a unit's parameters
    in the hooks around its ``forward``, and ``completion_logits`` calls the decoder and the
    head separately, so the root unit (embeddings, final norm, head) must be a module whose
    own ``forward`` does both. The LM is ``module`` (``unwrap_model`` finds it).
    """

    def __init__(self, lm: Any) -> None:
        super().__init__()
        self.module = lm

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """(N, V) logits: ``completion_logits(self.module, ...)`` with the same arguments."""
        return completion_logits(self.module, *args, **kwargs)


def padding_batch(pad_id: int) -> MicroBatch:
    """A one-row, one-completion-token micro-batch whose loss is multiplied by zero.

    Under sharding every forward and backward is a collective, so a process with fewer
    micro-batches than the others runs this one until the counts match.
    """
    z = torch.zeros(1, dtype=torch.long)
    return MicroBatch(
        input_ids=torch.full((1, 2), pad_id, dtype=torch.long),
        attention_mask=torch.ones((1, 2), dtype=torch.long),
        rows=z,
        cols=z.clone(),
        targets=torch.full((1,), pad_id, dtype=torch.long),
        sample=z.clone(),
        offset=z.clone(),
    )


def completion_logprobs(
    model: Any,
    mb: MicroBatch,
    temperature: float = 1.0,
    autocast_bf16: bool = False,
) -> torch.Tensor:
    """log π(completion token | everything before it) for every completion token of ``mb``.

    Args:
        model: a Hugging Face causal LM (possibly PEFT-wrapped), or a ``CompletionLM``
            (sharded by ``train/sharding.py``).
        mb: the micro-batch.
        temperature: divide the logits by it, as the sampler did (so ratios compare like
            with like); 0 or 1 leaves them as they are.
        autocast_bf16: run the forward under bf16 autocast (master weights stay fp32; the
            resolved ``model.autocast_bf16``, ``policy.precision.autocast_enabled``).

    Returns:
        (N,) fp32 log-probs, differentiable when grad is enabled.
    """
    lm = unwrap_model(model)
    device = lm.get_output_embeddings().weight.device
    args = (
        mb.input_ids.to(device),
        mb.attention_mask.to(device),
        mb.rows.to(device),
        mb.cols.to(device),
        autocast_bf16,
        mb.position_ids.to(device) if mb.position_ids is not None else None,
        mb.prefix_ids.to(device) if mb.prefix_ids is not None else None,
    )
    # through the wrapper's own forward when there is one (FSDP's hooks run around it)
    logits = model(*args) if isinstance(model, CompletionLM) else completion_logits(lm, *args)
    logits = logits.float()  # (N, V)
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logp = torch.log_softmax(logits, dim=-1)  # (N, V)
    return logp.gather(1, mb.targets.to(device)[:, None]).squeeze(1)  # (N,)
