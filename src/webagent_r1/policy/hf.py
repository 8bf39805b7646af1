"""In-process Hugging Face engine: a transformers causal LM sampling on CPU or GPU.

Prompts of one call are left-padded into a batch and decoded together with a KV cache. The
loop is ours rather than ``model.generate`` so that it returns, for every sampled id, the
log-probability under the distribution it was sampled from (temperature applied), and stops
each sequence at its own stop string.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from typing import Any

import torch

from webagent_r1.config import ModelConfig
from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.policy.models import resolve_model


def pick_device(device: str) -> torch.device:
    """'auto' → cuda when available, else cpu."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def load_tokenizer(name: str) -> Any:
    """Tokenizer of a registry name / local folder / hub id (offline for bundled models)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model(name))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(cfg: ModelConfig) -> Any:
    """The causal LM of ``cfg`` in its master dtype on its device, in eval mode."""
    from transformers import AutoModelForCausalLM

    dtype = getattr(torch, cfg.dtype)
    model = AutoModelForCausalLM.from_pretrained(resolve_model(cfg.name), dtype=dtype)
    model.to(pick_device(cfg.device))
    model.eval()
    return model


def autocast_ctx(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    """bf16 autocast on CPU (about 2x faster on AVX512-BF16, FACTS.md) or GPU, else no-op."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


class HFEngine:
    """Engine over an in-process transformers model.

    Args:
        model: a causal LM (shared with the trainer: updates are visible at once).
        tokenizer: its tokenizer (pad and eos ids, decoding).
        autocast_bf16: sample under bf16 autocast.
        max_batch_size: prompts per forward; larger calls are split.
    """

    def __init__(
        self, model: Any, tokenizer: Any, autocast_bf16: bool = True, max_batch_size: int = 16
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.autocast_bf16 = autocast_bf16
        self.max_batch_size = max_batch_size
        self.device = next(model.parameters()).device
        self.pad_id = tokenizer.pad_token_id
        self.eos_ids = {tokenizer.eos_token_id}
        # The model is not thread-safe: one generation at a time.
        self._lock = threading.Lock()
        # transformers 5 renamed the KV-cache argument from past_key_values to cache.
        params = inspect.signature(model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    @classmethod
    def from_config(cls, cfg: ModelConfig, **kw: Any) -> HFEngine:
        return cls(load_model(cfg), load_tokenizer(cfg.name), cfg.autocast_bf16, **kw)

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt (runs in a worker thread)."""
        return await asyncio.to_thread(self.generate_sync, prompts, params)

    def generate_sync(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Blocking ``generate``."""
        out: list[Completion] = []
        with self._lock:
            for i in range(0, len(prompts), self.max_batch_size):
                out.extend(self._generate_batch(prompts[i : i + self.max_batch_size], params))
        return out

    @torch.no_grad()
    def _generate_batch(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if not prompts or any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        B = len(prompts)
        L = max(len(p) for p in prompts)
        # 1) left-pad so every sequence's next token sits in the last column
        ids = torch.full((B, L), self.pad_id, dtype=torch.long)
        mask = torch.zeros((B, L), dtype=torch.long)
        for b, p in enumerate(prompts):
            ids[b, L - len(p) :] = torch.tensor(p)
            mask[b, L - len(p) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, L)
        gen = None
        if params.seed is not None:
            gen = torch.Generator(device=self.device).manual_seed(params.seed)

        tokens: list[list[int]] = [[] for _ in range(B)]
        logps: list[list[float]] = [[] for _ in range(B)]
        finish = ["length"] * B
        alive = torch.ones(B, dtype=torch.bool, device=self.device)
        past = None
        step_ids, step_pos = ids, pos
        with autocast_ctx(self.device, self.autocast_bf16 and self.device.type == "cpu"):
            for _ in range(params.max_new_tokens):
                # 2) one forward: prefill on the first step, one token per sequence after
                out = self.model(
                    input_ids=step_ids,
                    attention_mask=mask,
                    position_ids=step_pos,
                    use_cache=True,
                    logits_to_keep=1,  # LM head on the last position only: (B, 1, V)
                    **{self._cache_kw: past},
                )
                past = getattr(out, self._cache_kw)
                logits = out.logits[:, -1, :].float()  # (B, V)
                nxt, lp = self._sample(logits, params, gen)  # (B,), (B,)
                # 3) record, then stop sequences on eos or a stop string
                for b in range(B):
                    if not alive[b]:
                        continue
                    t = int(nxt[b])
                    tokens[b].append(t)
                    logps[b].append(float(lp[b]))
                    if t in self.eos_ids or self._hit_stop(tokens[b], params.stop):
                        alive[b] = False
                        finish[b] = "stop"
                if not alive.any():
                    break
                nxt = torch.where(alive, nxt, torch.full_like(nxt, self.pad_id))
                step_ids = nxt[:, None]
                step_pos = step_pos[:, -1:] + 1
                mask = torch.cat([mask, alive.long()[:, None]], dim=1)
        return [
            Completion(
                token_ids=tokens[b],
                logprobs=logps[b],
                text=self.tokenizer.decode(tokens[b], skip_special_tokens=True),
                finish_reason=finish[b],
            )
            for b in range(B)
        ]

    @staticmethod
    def _sample(
        logits: torch.Tensor, params: SamplingParams, gen: torch.Generator | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample ids from ``logits`` (B, V); return ids and their log-probs under the
        distribution actually sampled from (temperature applied; top-p not renormalised,
        so the log-prob is that of the policy, which is what importance ratios need)."""
        if params.temperature == 0:
            logp = torch.log_softmax(logits, dim=-1)
            nxt = logits.argmax(-1)
            return nxt, logp.gather(-1, nxt[:, None])[:, 0]
        logp = torch.log_softmax(logits / params.temperature, dim=-1)  # (B, V)
        probs = logp.exp()
        if params.top_p < 1.0:
            sp, si = probs.sort(dim=-1, descending=True)
            keep = sp.cumsum(-1) - sp < params.top_p
            sp = sp * keep
            probs = torch.zeros_like(probs).scatter(-1, si, sp)
        nxt = torch.multinomial(probs, 1, generator=gen)[:, 0]
        return nxt, logp.gather(-1, nxt[:, None])[:, 0]

    def _hit_stop(self, toks: list[int], stops: list[str]) -> bool:
        if not stops:
            return False
        tail = self.tokenizer.decode(toks[-8:], skip_special_tokens=True)
        return any(s in tail for s in stops)
