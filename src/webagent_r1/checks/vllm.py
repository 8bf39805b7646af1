"""GPU check of the vLLM engine and the weight sync (``scripts/gpu_check.sh`` runs it where vLLM
is installed; ``scripts/device_check.py`` is the offline device check).

Two parts, each printing one JSON object and exiting non-zero when a check fails:

- ``python -m webagent_r1.checks.vllm engine``: greedy completions from vLLM, their ids
  and log-probs checked against a Hugging Face forward of the same model (teacher-forced on
  vLLM's ids: max / mean absolute log-prob difference, share of ids that are HF's argmax);
  then the HF model's weights are perturbed, pushed with ``WeightSync`` and the check is
  repeated (vLLM must now agree with the new weights, and its outputs must have changed);
  then sampling throughput (tokens/s) and the seconds of the weight push.
- ``python -m webagent_r1.checks.vllm train``: M-GRPO steps (default 2) on a few
  embedded tasks in real Chromium with ``train.generation_engine=vllm``; reports tokens/s and
  sync seconds per step, and checks that step k's rollouts are stamped with weight version k.

The comparison math (``teacher_forced_logprobs``, ``compare_to_hf``) and the rollout check
(``check_versions``) run on CPU and are unit-tested there; the rest needs vLLM and a GPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from webagent_r1.config import ModelConfig, VLLMConfig, load_config
from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.rollout.collect import chat_ids
from webagent_r1.rollout.trajectories import read_trajectories
from webagent_r1.train.metrics import read_metrics

__all__ = [
    "LogprobCheck",
    "check_engine",
    "check_training",
    "check_versions",
    "compare_to_hf",
    "main",
    "perturb_",
    "require_gpu",
    "teacher_forced_logprobs",
]

QUESTIONS = [
    "What is the capital of France? Answer in one sentence.",
    "List three colours of the rainbow.",
    "Write a haiku about a red mug.",
    "Explain what a web browser does, briefly.",
    "How many legs does a spider have?",
    "Name a fruit that is yellow.",
    "What does HTML stand for?",
    "Give one tip for writing clear emails.",
]

MEAN_TOL = 0.1
"""Largest mean |Δ log-prob| between vLLM (bf16 kernels) and the HF forward that passes."""
MAX_TOL = 1.5
"""Largest single-token |Δ log-prob| that passes (bf16 outliers on near-ties)."""


@dataclass
class LogprobCheck:
    """How well an engine's completions agree with a Hugging Face forward of the model."""

    tokens: int
    max_abs_diff: float
    mean_abs_diff: float
    argmax_agreement: float
    """Share of sampled ids that are the HF model's argmax (1.0 expected for greedy)."""

    @property
    def ok(self) -> bool:
        return self.mean_abs_diff <= MEAN_TOL and self.max_abs_diff <= MAX_TOL


@torch.no_grad()
def teacher_forced_logprobs(
    model: Any, prompt: list[int], completion: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probs (C,) of ``completion`` after ``prompt`` under ``model``, and whether each id
    is the model's argmax (C,), from one forward over prompt + completion."""
    device = next(model.parameters()).device
    ids = torch.tensor([prompt + completion], device=device)  # (1, P + C)
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()  # (C, V)
    target = torch.tensor(completion, device=device)  # (C,)
    logp = torch.log_softmax(logits, dim=-1).gather(-1, target[:, None])[:, 0]  # (C,)
    return logp.cpu(), (logits.argmax(-1) == target).cpu()


def compare_to_hf(model: Any, prompts: list[list[int]], comps: list[Completion]) -> LogprobCheck:
    """Compare each completion's stored log-probs (temperature 1 / greedy) with ``model``."""
    diffs, agree = [], []
    for p, c in zip(prompts, comps, strict=True):
        if not c.token_ids:
            continue
        ref, is_max = teacher_forced_logprobs(model, p, c.token_ids)
        diffs.append((torch.tensor(c.logprobs) - ref).abs())
        agree.append(is_max)
    if not diffs:
        raise ValueError("no completion tokens to compare")
    d = torch.cat(diffs)
    return LogprobCheck(
        tokens=int(d.numel()),
        max_abs_diff=float(d.max()),
        mean_abs_diff=float(d.mean()),
        argmax_agreement=float(torch.cat(agree).float().mean()),
    )


@torch.no_grad()
def perturb_(model: Any, scale: float = 0.05, seed: int = 0) -> None:
    """Add seeded Gaussian noise of ``scale`` × each floating tensor's std, in place."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for p in model.parameters():
        if p.is_floating_point() and p.numel() > 1:
            noise = torch.randn(p.shape, generator=gen).to(p.device, p.dtype)
            p.add_(noise * (scale * p.float().std()).to(p.dtype))


def check_versions(rollout_dir: str | Path, start: int = 0) -> dict[str, Any]:
    """Whether every turn of step k's rollouts (``step-00000k-rank*.jsonl``) was sampled from
    weight version k (the trainer pushes version k after its k-th update)."""
    bad: list[str] = []
    files = sorted(Path(rollout_dir).glob("step-*-rank*.jsonl"))
    turns = 0
    for f in files:
        step = int(f.name.split("-")[1])
        for tr in read_trajectories(f):
            for t in tr.turns:
                turns += 1
                if t.weight_version != step:
                    bad.append(f"{f.name} task {tr.task_id}: version {t.weight_version}")
            if tr.turns and tr.info.get("weight_versions") != [step]:
                bad.append(f"{f.name} task {tr.task_id}: info {tr.info.get('weight_versions')}")
    return {"files": len(files), "turns": turns, "ok": bool(files) and not bad, "bad": bad[:5]}


# --------------------------------------------------------------------------------------
# GPU parts
# --------------------------------------------------------------------------------------


def require_gpu() -> None:
    """Fail at once, in one line, where vLLM or a CUDA device is missing.

    Raises:
        VLLMUnavailableError: vLLM is not installed.
        RuntimeError: torch sees no CUDA device.
    """
    # heavy: webagent_r1.policy.vllm loads only when this runs
    from webagent_r1.policy.vllm import require_vllm

    require_vllm()
    if not torch.cuda.is_available():
        raise RuntimeError("the vLLM check needs a CUDA GPU; torch sees none")


async def check_engine(
    model_name: str = "smollm2-135m-instruct",
    max_new_tokens: int = 48,
    bench_prompts: int = 64,
    bench_tokens: int = 128,
    enforce_eager: bool = False,
) -> dict[str, Any]:
    """vLLM against a HF forward, before and after a weight push; throughput (GPU only)."""
    # heavy: keeps transformers off the import path
    from webagent_r1.policy.hf import load_model, load_tokenizer

    # heavy: webagent_r1.policy.vllm loads only when this runs
    from webagent_r1.policy.vllm import VLLMEngine

    # heavy: keeps transformers off the import path
    from webagent_r1.train.weight_sync import WeightSync

    require_gpu()
    tok = load_tokenizer(model_name)
    hf = load_model(ModelConfig(name=model_name, dtype="bfloat16", device="cuda"))
    t0 = time.perf_counter()
    engine = VLLMEngine(model_name, VLLMConfig(enforce_eager=enforce_eager))
    out: dict[str, Any] = {"model": model_name, "engine_start_s": time.perf_counter() - t0}
    try:
        prompts = [chat_ids(tok, [{"role": "user", "content": q}]) for q in QUESTIONS]
        greedy = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens, stop=[])
        # 1) the engine's ids and log-probs against the HF forward
        first = await engine.generate(prompts, greedy)
        out["before_sync"] = asdict(compare_to_hf(hf, prompts, first))
        # 2) new weights: perturb the HF model, push them, compare again
        perturb_(hf)
        sync = WeightSync(engine, hf)
        out["sync"] = await sync.push(1)
        second = await engine.generate(prompts, greedy)
        out["after_sync"] = asdict(compare_to_hf(hf, prompts, second))
        out["outputs_changed"] = any(
            a.token_ids != b.token_ids or a.logprobs != b.logprobs
            for a, b in zip(first, second, strict=True)
        )
        out["versions"] = sorted({c.weight_version for c in first + second})  # type: ignore[type-var]
        # 3) sampling throughput, many requests at once
        params = SamplingParams(temperature=1.0, max_new_tokens=bench_tokens, stop=[], seed=0)
        reqs = [prompts[i % len(prompts)] for i in range(bench_prompts)]
        t0 = time.perf_counter()
        comps = await engine.generate(reqs, params)
        dt = time.perf_counter() - t0
        n = sum(len(c.token_ids) for c in comps)
        out["throughput"] = {"requests": len(reqs), "tokens": n, "tokens_per_s": n / dt}
    finally:
        engine.close()
    out["ok"] = (
        LogprobCheck(**out["before_sync"]).ok
        and LogprobCheck(**out["after_sync"]).ok
        and out["outputs_changed"]
        and out["versions"] == [0, 1]
    )
    return out


async def check_training(
    run_dir: str | Path,
    model_name: str = "smollm2-135m-instruct",
    steps: int = 2,
    overrides: list[str] | None = None,
) -> dict[str, Any]:
    """``steps`` M-GRPO steps with vLLM generation on a few short embedded tasks (GPU,
    Chromium); per-step rollout tokens/s and sync seconds, and the version stamps."""
    # heavy: keeps transformers off the import path
    from webagent_r1.train.rl import train_rl

    require_gpu()
    cfg = load_config(
        None,
        [
            f"model.name={model_name}",
            f"run_dir={run_dir}",
            "train.generation_engine=vllm",
            "train.tensorboard=false",
            "tasks.difficulty=[1-2]",
            "env.max_turns=3",
            "observation.max_tokens=400",
            "rollout.group_size=4",
            "rollout.max_concurrent_episodes=8",
            "rollout.max_new_tokens=64",
            f"rl.steps={steps}",
            "rl.tasks_per_step=2",
            "rl.eval_tasks=4",
            "rl.drop_equal_groups=false",  # the base model fails alike: still update
            *(overrides or []),
        ],
    )
    t0 = time.perf_counter()
    res = await train_rl(cfg, progress=False)
    stage = Path(run_dir) / "rl"
    rows = read_metrics(stage / "metrics.jsonl")
    step_rows = [r for r in rows if "train/step_s" in r]
    return {
        "steps": res.steps,
        "wall_s": time.perf_counter() - t0,
        "rollout_tokens_per_s": [r.get("rollout/tokens_per_s") for r in step_rows],
        "sync_seconds": [r.get("sync/seconds") for r in rows if "sync/seconds" in r],
        "sync_bytes": [r.get("sync/bytes") for r in rows if "sync/bytes" in r],
        "versions": check_versions(stage / "rollouts"),
        "ok": res.steps == steps and len(step_rows) == steps,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: ``engine`` or ``train`` (see the module docstring)."""
    ap = argparse.ArgumentParser(prog="python -m webagent_r1.checks.vllm")
    ap.add_argument("part", choices=["engine", "train"])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--run-dir", default="runs/gpu-check")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--enforce-eager", action="store_true")
    ap.add_argument("--out", default=None, help="also write the JSON result here")
    args = ap.parse_args(argv)
    try:
        require_gpu()
    except (ImportError, RuntimeError) as e:
        print(f"vllm_check {args.part}: {e}", file=sys.stderr)
        return 2
    if args.part == "engine":
        res = asyncio.run(check_engine(args.model, enforce_eager=args.enforce_eager))
    else:
        extra = ["vllm.enforce_eager=true"] if args.enforce_eager else []
        res = asyncio.run(check_training(args.run_dir, args.model, args.steps, extra))
        res["ok"] = res["ok"] and res["versions"]["ok"]
    text = json.dumps(res, indent=1, default=str)
    print(text, flush=True)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    if not res["ok"]:
        print(f"vllm_check {args.part}: FAILED", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
