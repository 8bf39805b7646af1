"""The M-GRPO update against an independent, naive implementation of the paper's objective.

The reference below writes WebAgent-R1's loss (Sec. 3.2) out as loops over trajectories i,
turns j and completion tokens t, with every token's log-probability from its own forward pass
over ``prompt + completion[:t]`` (no packing, masks, position ids or shared prefixes) and
plain autograd:

    A_i = (r_i − mean r) / (std r + eps)        std: the population std, eps = 1e-4
    ρ = π_θ / π_old,  KL = exp(d) − d − 1 with d = log π_ref − log π_θ   (k3, as documented)
    L = −(1/G) Σ_i (1/|τ_i|) Σ_j (1/|a_ij|) Σ_t [min(ρ A_i, clip(ρ, 1−ε, 1+ε) A_i) − β KL]

and, for ``rl.normalization: turn_mean``, with T = Σ_i |τ_i| the turns of the batch,

    L = −(1/T) Σ_i Σ_j (1/|a_ij|) Σ_t [min(ρ A_i, clip(ρ, 1−ε, 1+ε) A_i) − β KL]

It calls no helper of the project for that math. ``mgrpo_update`` must give the same loss and
the same parameter gradients in each of μ = 2 policy iterations (SGD in between, so the second
iteration's ratios leave 1 and the clip acts), with β > 0 against a perturbed reference model,
with shared prompts and a shared prefix on and off, π_old recomputed or the sampler's, in
one micro-batch or several (both normalisations).
"""

from __future__ import annotations

import copy
import math
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.support.tiny import make_tiny_model, shared_prompt_group, tiny_config
from webagent_r1.policy.trainable import load_policy
from webagent_r1.rollout.collect import Group
from webagent_r1.rollout.trajectories import turn_samples
from webagent_r1.train.batching import pack_plan
from webagent_r1.train.rl import build_rl_batch, mgrpo_update

REWARDS = [1.0, 0.0, 0.0, 1.0, 0.0]
MU, BETA, CLIP, TEMP, LR, ADV_EPS = 2, 0.05, 0.1, 0.7, 0.03, 1e-4
# per-token log-probs: [trajectory][turn][token]
LogProbs = list[list[list[float]]]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=3)


@pytest.fixture(scope="module")
def group() -> Group:
    """Five trajectories of one or two turns; every prompt starts with the same 20 tokens,
    the first turns share their whole prompt, two second turns share theirs."""
    return shared_prompt_group(REWARDS, seed=11, system_len=20)


@pytest.fixture(scope="module")
def reference_model(tiny_dir: Path) -> Any:
    """The KL reference: the initial weights plus noise (so KL and its gradient are not 0)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    return model.eval().requires_grad_(False)


# ----------------------------------------------------------------------------- the reference


def token_logprob(model: Any, context: list[int], token: int) -> torch.Tensor:
    """log π(token | context) at temperature TEMP, from one forward over ``context``."""
    logits = model(input_ids=torch.tensor([context])).logits[0, -1].float()  # (V,)
    return torch.log_softmax(logits / TEMP, dim=-1)[token]


def naive_logprobs(model: Any, group: Group) -> LogProbs:
    """Every completion token's log-prob under ``model``, one forward per token."""
    with torch.no_grad():
        return [
            [
                [
                    float(token_logprob(model, turn.prompt_ids + turn.completion_ids[:t], a))
                    for t, a in enumerate(turn.completion_ids)
                ]
                for turn in traj.turns
            ]
            for traj in group.trajectories
        ]


def naive_loss(
    model: Any,
    group: Group,
    old: LogProbs,
    ref: LogProbs,
    ddof: int = 0,
    normalization: str = "mgrpo",
) -> tuple[torch.Tensor, int, int]:
    """The paper's loss, term by term; also how many tokens took the clipped branch, of how
    many. ``ddof``: 0 the population std (documented), 1 the unbiased one (a wrong one).
    ``normalization``: 'mgrpo' (1/G, 1/|τ_i|, 1/|a_ij|) or 'turn_mean' (1/T, 1/|a_ij|)."""
    trajs = group.trajectories
    G = len(trajs)
    rewards = [t.reward for t in trajs]
    mean = sum(rewards) / G
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (G - ddof))
    total = torch.zeros(())
    clipped, tokens = 0, 0
    for i, traj in enumerate(trajs):
        adv = (traj.reward - mean) / (std + ADV_EPS)
        traj_sum = torch.zeros(())
        for j, turn in enumerate(traj.turns):
            turn_sum = torch.zeros(())
            for t, a in enumerate(turn.completion_ids):
                logp = token_logprob(model, turn.prompt_ids + turn.completion_ids[:t], a)
                rho = torch.exp(logp - old[i][j][t])
                surrogate = torch.minimum(rho * adv, torch.clamp(rho, 1 - CLIP, 1 + CLIP) * adv)
                d = ref[i][j][t] - logp
                kl = torch.exp(d) - d - 1
                turn_sum = turn_sum + surrogate - BETA * kl
                r = float(rho.detach())
                clipped += int(min(max(r, 1 - CLIP), 1 + CLIP) * adv < r * adv)
                tokens += 1
            traj_sum = traj_sum + turn_sum / len(turn.completion_ids)
        if normalization == "turn_mean":
            total = total + traj_sum  # every turn alike: divided by T below
        else:
            total = total + traj_sum / len(traj.turns)
    if normalization == "turn_mean":
        n_turns = sum(len(traj.turns) for traj in trajs)
        return -total / n_turns, clipped, tokens
    return -total / G, clipped, tokens


NaiveResult = tuple[list[float], list[list[torch.Tensor]], list[torch.Tensor], list[int]]


def naive_update(
    tiny_dir: Path,
    group: Group,
    ref_model: Any,
    sampler: LogProbs | None,
    ddof: int = 0,
    normalization: str = "mgrpo",
) -> NaiveResult:
    """μ iterations of plain SGD on the naive loss from the saved initial weights.

    Returns:
        Each iteration's loss, each iteration's gradients (parameter order), the final
        parameters, and each iteration's count of clipped tokens.
    """
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    old = sampler if sampler is not None else naive_logprobs(model, group)
    ref = naive_logprobs(ref_model, group)
    losses, grads, clips = [], [], []
    for _ in range(MU):
        model.zero_grad(set_to_none=True)
        loss, clipped, _ = naive_loss(model, group, old, ref, ddof, normalization)
        loss.backward()
        losses.append(float(loss.detach()))
        grads.append([p.grad.detach().clone() for p in model.parameters()])
        clips.append(clipped)
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(LR * p.grad)
    return losses, grads, [p.detach().clone() for p in model.parameters()], clips


@pytest.fixture(scope="module")
def naive_recompute(tiny_dir: Path, group: Group, reference_model: Any) -> NaiveResult:
    """The reference update with π_old = the initial weights (computed once per module)."""
    return naive_update(tiny_dir, group, reference_model, None)


@pytest.fixture(scope="module")
def naive_turn_mean(tiny_dir: Path, group: Group, reference_model: Any) -> NaiveResult:
    """The reference update with ``turn_mean``'s weights, π_old the initial weights."""
    return naive_update(tiny_dir, group, reference_model, None, normalization="turn_mean")


# ----------------------------------------------------------------------------- the project


class RecordingSGD(torch.optim.SGD):
    """Plain SGD that keeps a copy of the gradients of every step."""

    def __init__(self, params: list[torch.nn.Parameter], lr: float) -> None:
        super().__init__(params, lr=lr)
        self.seen: list[list[torch.Tensor]] = []

    def step(self, closure: Any = None) -> Any:
        self.seen.append([p.grad.detach().clone() for g in self.param_groups for p in g["params"]])
        return super().step(closure)


def project_update(
    tiny_dir: Path, group: Group, ref_model: Any, *extra: str
) -> tuple[dict[str, float], list[list[torch.Tensor]], list[torch.Tensor]]:
    """``mgrpo_update`` with the same μ, β, ε, temperature and SGD step; its metrics, each
    iteration's gradients and the final parameters."""
    cfg = tiny_config(
        tiny_dir,
        f"rl.mu={MU}",
        f"rl.beta={BETA}",
        f"rl.clip_eps={CLIP}",
        f"rollout.temperature={TEMP}",
        "train.max_grad_norm=0",  # gradient clipping is no part of the objective
        *extra,
    )
    model, _ = load_policy(cfg)
    opt = RecordingSGD(list(model.parameters()), LR)
    batch = build_rl_batch([copy.deepcopy(group)], cfg.rl.advantage_scale)
    metrics = mgrpo_update(model, opt, batch, cfg, pad_id=1, ref_model=ref_model)
    return metrics, opt.seen, [p.detach().clone() for p in model.parameters()]


def _rel_err(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """‖a − b‖ / ‖b‖ over all tensors together."""
    diff = sum(float((x - y).square().sum()) for x, y in zip(a, b, strict=True))
    norm = sum(float(y.square().sum()) for y in b)
    return math.sqrt(diff / norm)


def _assert_same_update(
    metrics: dict[str, float],
    got_grads: list[Any],
    got_params: Any,
    want_losses: list[float],
    want_grads: list[Any],
    want_params: Any,
) -> None:
    """The project's update equals the naive one: loss, each iteration's gradients, weights."""
    assert metrics["train/loss"] == pytest.approx(sum(want_losses) / MU, rel=1e-5, abs=1e-7)
    assert len(got_grads) == MU
    for k in range(MU):
        assert _rel_err(got_grads[k], want_grads[k]) < 1e-5, k
    assert _rel_err(got_params, want_params) < 1e-6


def _with_sampler_logprobs(group: Group, values: LogProbs) -> Group:
    g = copy.deepcopy(group)
    for traj, lp_traj in zip(g.trajectories, values, strict=True):
        for turn, lp in zip(traj.turns, lp_traj, strict=True):
            turn.completion_logprobs = list(lp)
    return g


@pytest.mark.parametrize(
    ("share_prompts", "share_prefix", "budget", "old_source"),
    [
        (False, False, 4096, "recompute"),
        (True, False, 4096, "recompute"),
        (True, True, 4096, "recompute"),
        (False, True, 4096, "recompute"),
        (True, True, 64, "recompute"),  # several micro-batches, gradients accumulated
        (True, True, 4096, "sampler"),
    ],
)
def test_mgrpo_update_matches_the_naive_objective(
    tiny_dir: Path,
    group: Group,
    reference_model: Any,
    naive_recompute: NaiveResult,
    share_prompts: bool,
    share_prefix: bool,
    budget: int,
    old_source: str,
) -> None:
    sampler = None
    if old_source == "sampler":
        # a behaviour policy that is not the trainer's: its stored log-probs, a little off
        from transformers import AutoModelForCausalLM

        init = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
        rng = random.Random(2)
        sampler = [
            [[x + rng.uniform(-0.05, 0.05) for x in turn] for turn in traj]
            for traj in naive_logprobs(init, group)
        ]
        group = _with_sampler_logprobs(group, sampler)
    want_losses, want_grads, want_params, clips = (
        naive_update(tiny_dir, group, reference_model, sampler)
        if sampler is not None
        else naive_recompute
    )
    metrics, got_grads, got_params = project_update(
        tiny_dir,
        group,
        reference_model,
        f"train.share_prompts={share_prompts}",
        f"train.share_prefix={share_prefix}",
        f"train.token_budget={budget}",
        f"rl.old_logprobs={old_source}",
    )
    # The test is only worth something if every term acts: mixed advantages, a KL that is
    # not 0, and in the second iteration a clip that takes some tokens but not all.
    assert len(set(REWARDS)) == 2
    assert metrics["train/kl"] > 1e-3
    tokens = sum(len(u.completion_ids) for t in group.trajectories for u in t.turns)
    assert 0 < clips[1] < tokens, clips
    samples = [s for t in group.trajectories for s in turn_samples(t)]
    assert (len(pack_plan(samples, budget, share_prompts)) > 1) == (budget < 4096)
    _assert_same_update(metrics, got_grads, got_params, want_losses, want_grads, want_params)


def test_the_comparison_tells_a_biased_from_an_unbiased_std(
    tiny_dir: Path, group: Group, reference_model: Any, naive_recompute: NaiveResult
) -> None:
    """The comparison can fail: the reference with the unbiased std (a plausible mistake on
    either side) gives gradients that miss the project's by far more than the tolerance."""
    _, want_grads, _, _ = naive_recompute
    _, wrong_grads, _, _ = naive_update(tiny_dir, group, reference_model, None, ddof=1)
    _, got_grads, _ = project_update(tiny_dir, group, reference_model)
    assert _rel_err(got_grads[0], want_grads[0]) < 1e-5
    assert _rel_err(got_grads[0], wrong_grads[0]) > 1e-2


@pytest.mark.parametrize("budget", [4096, 64])  # one micro-batch, several
def test_turn_mean_update_matches_the_naive_objective(
    tiny_dir: Path,
    group: Group,
    reference_model: Any,
    naive_recompute: NaiveResult,
    naive_turn_mean: NaiveResult,
    budget: int,
) -> None:
    """``rl.normalization: turn_mean`` against its loops; trajectories of one and of two turns
    make it differ from the paper's weights by far more than the tolerance."""
    assert len({len(t.turns) for t in group.trajectories}) == 2
    want_losses, want_grads, want_params, _ = naive_turn_mean
    metrics, got_grads, got_params = project_update(
        tiny_dir,
        group,
        reference_model,
        "rl.normalization=turn_mean",
        f"train.token_budget={budget}",
    )
    samples = [s for t in group.trajectories for s in turn_samples(t)]
    assert (len(pack_plan(samples, budget, True)) > 1) == (budget < 4096)
    _assert_same_update(metrics, got_grads, got_params, want_losses, want_grads, want_params)
    _, mgrpo_grads, _, _ = naive_recompute
    assert _rel_err(got_grads[0], mgrpo_grads[0]) > 1e-2
