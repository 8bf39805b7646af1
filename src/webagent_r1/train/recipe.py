"""Recipes end to end: demonstrations → base evaluation → BC warm-up → M-GRPO (``train``).

The three variants of the paper are configurations of one driver (see ``configs/``):

- **R1**: BC on the experts' demonstrations (short rationales), then M-GRPO;
- **R1-Zero**: M-GRPO straight from the base model (``bc.steps: 0``);
- **R1-CoT**: BC on long chain-of-thought demonstrations (``bc.cot: true``), then M-GRPO.

Each stage writes into ``<run_dir>/<stage>/`` and ``summary.json`` records the success of the
base model, after BC and after RL on the same fixed subset of ``rl.eval_split`` (validation
unless a config fixes test), with each stage's wall time,
and (embedded suite) ``guess_baseline``: what each template's most common training answer
would score on that subset (``sources.embedded.guess``).
``resume=True`` continues where a killed run stopped: finished stages are skipped, a stage in
progress continues from its newest checkpoint. ``config.yaml`` records the run's settings
(``train/runconfig.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from webagent_r1.config import Config
from webagent_r1.evaluation.run import eval_model
from webagent_r1.policy.cuda_memory import cuda_memory, free_cuda_memory
from webagent_r1.policy.precision import pick_device, resolve_old_logprobs
from webagent_r1.report.load import ReportError, rows_by_step
from webagent_r1.report.paired import compare_paired, load_outcomes
from webagent_r1.rollout.demos import collect_demos, pick_demo_tasks
from webagent_r1.rollout.trajectories import write_trajectories
from webagent_r1.sources.embedded.guess import baseline
from webagent_r1.sources.embedded.suite import tasks_for
from webagent_r1.tasks.subset import eval_subset
from webagent_r1.train.checkpoint import latest_checkpoint
from webagent_r1.train.memory_plan import MemoryPlan, check_plan_fits
from webagent_r1.train.metrics import read_metrics, release_free_memory
from webagent_r1.train.runconfig import save_run_config

__all__ = ["RunExistsError", "check_device_memory", "run_recipe", "run_sft"]


class RunExistsError(RuntimeError):
    """The run folder already has checkpoints and ``--resume`` was not given."""


def _summary_path(cfg: Config) -> Path:
    return Path(cfg.run_dir) / "summary.json"


def _load_summary(cfg: Config) -> dict[str, Any]:
    p = _summary_path(cfg)
    return json.loads(p.read_text()) if p.is_file() else {"stages": {}}


def _save_summary(cfg: Config, summary: dict[str, Any]) -> None:
    p = _summary_path(cfg)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary, indent=1))
    tmp.replace(p)


def check_fresh(cfg: Config, resume: bool) -> None:
    """Refuse to start over a run that has checkpoints unless resuming."""
    if resume:
        return
    for stage in ("bc", "rl"):
        if latest_checkpoint(Path(cfg.run_dir) / stage / "checkpoints") is not None:
            raise RunExistsError(
                f"{cfg.run_dir} already has {stage} checkpoints: pass --resume to continue it, "
                "or set run_dir=<new folder> to start another run"
            )


def run_sft(cfg: Config, resume: bool = False) -> Any:
    """``webagent-r1 sft``: behaviour cloning on ``bc.data`` into ``<run_dir>/bc``
    (``train_bc``); its ``BCResult``.

    Raises:
        RunExistsError: the run folder has BC checkpoints and ``resume`` is not set.
    """
    # heavy: keeps transformers off the import path
    from webagent_r1.train.bc import train_bc

    if not resume and latest_checkpoint(Path(cfg.run_dir) / "bc" / "checkpoints") is not None:
        raise RunExistsError(
            f"{cfg.run_dir} already has bc checkpoints: pass --resume to continue it, "
            "or set run_dir=<new folder>"
        )
    return train_bc(cfg, resume=resume)


def check_device_memory(cfg: Config) -> MemoryPlan | None:
    """Check the recipe's memory plan against this process's GPU before any stage runs.

    Skipped (None) on a CPU, with ``train.memory_check: false``, for a recipe without an
    M-GRPO stage (the plan is M-GRPO's step; BC needs less), and for a model whose shape is
    unknown. ``gpus`` is the launcher's ``WORLD_SIZE``.

    Raises:
        MemoryPlanError: the plan's peak exceeds what the GPU has free for the run.
    """
    if not cfg.train.memory_check or cfg.rl.steps <= 0:
        return None
    if pick_device(cfg.model.device).type != "cuda":
        return None
    mem = cuda_memory(int(os.environ.get("LOCAL_RANK", "0")))  # this rank's GPU, not GPU 0
    if mem is None:
        return None
    gpus = int(os.environ.get("WORLD_SIZE", "1"))
    return check_plan_fits(cfg, gpus, mem.total_gib, mem.others_gib)


def ensure_demos(cfg: Config, progress: bool = True) -> Path:
    """The BC data file, made with the experts when it does not exist yet."""
    # heavy: keeps transformers off the import path
    from webagent_r1.policy.hf import load_tokenizer

    path = Path(cfg.bc.data)
    if path.is_file():
        return path
    tasks = pick_demo_tasks("train", cfg.bc.demo_tasks, cfg.seed, cfg=cfg)
    tokenizer = load_tokenizer(cfg.init_from or cfg.model.name)
    kept, report = asyncio.run(
        collect_demos(
            tasks,
            tokenizer,
            cfg,
            cot=cfg.bc.cot,
            concurrency=cfg.bc.demo_concurrency or cfg.rollout.max_concurrent_episodes,
            progress=progress,
        )
    )
    tmp = path.with_suffix(".partial")
    write_trajectories(kept, tmp)
    tmp.replace(path)
    print(
        f"demonstrations: kept {report.total_kept}, dropped {report.total_dropped}, "
        f"{report.wall_s:.0f} s → {path}",
        flush=True,
    )
    for task_id, why in report.failures:
        print(f"  dropped {task_id}: {why}", flush=True)
    return path


def run_recipe(cfg: Config, resume: bool = False, progress: bool = True) -> dict[str, Any]:
    """Run the recipe of ``cfg``; returns (and writes) the summary."""
    # heavy: keeps transformers off the import path
    from webagent_r1.train.bc import train_bc

    # heavy: keeps transformers off the import path
    from webagent_r1.train.rl import train_rl

    check_fresh(cfg, resume)
    if cfg.rl.steps > 0:  # refused settings fail now, not after the demonstrations and BC
        resolve_old_logprobs(cfg)
    check_device_memory(cfg)  # a recipe too large for this GPU fails before any stage
    if int(os.environ.get("RANK", "0")) == 0:  # one writer under accelerate / torchrun
        for note in save_run_config(cfg, resume):
            print(f"note: {note}", flush=True)
    summary = _load_summary(cfg) if resume else {"stages": {}}
    summary["run_dir"] = cfg.run_dir
    if cfg.tasks.source == "embedded":  # the evaluations' fixed subset (see the base stage)
        subset = eval_subset(tasks_for(cfg, cfg.rl.eval_split), cfg.rl.eval_tasks, cfg.seed)
        summary["guess_baseline"] = baseline(subset).to_dict()
    t_all = time.time()
    init: str | None = cfg.init_from

    # BC clones the demonstrations; M-GRPO's BC term (rl.bc_coef) trains on them too
    needs_demos = cfg.bc.steps > 0 or (cfg.rl.steps > 0 and cfg.rl.bc_coef > 0)
    if needs_demos and "demos" not in summary["stages"]:
        t0 = time.time()
        ensure_demos(cfg, progress)
        summary["stages"]["demos"] = {"wall_s": time.time() - t0, "file": cfg.bc.data}
        _save_summary(cfg, summary)

    if cfg.rl.eval_base and cfg.bc.steps > 0 and "base" not in summary["stages"]:
        t0 = time.time()
        tasks = eval_subset(tasks_for(cfg, cfg.rl.eval_split), cfg.rl.eval_tasks, cfg.seed)
        report = asyncio.run(eval_model(cfg, tasks, init, progress))
        write_trajectories(report.trajectories, Path(cfg.run_dir) / "base" / "eval.jsonl")
        summary["stages"]["base"] = {"wall_s": time.time() - t0, **report.metrics()}
        _save_summary(cfg, summary)
        print(f"base model: success {report.success_rate:.3f} on {len(tasks)} tasks", flush=True)

    if cfg.bc.steps > 0:
        t0 = time.time()
        res = train_bc(cfg, resume=resume, progress=progress)
        init = str(res.checkpoint / "model")
        # BC's freed activations stay on the C heap: what follows in this process (M-GRPO,
        # an experiment's evaluation) starts without them
        release_free_memory()
        if "bc" not in summary["stages"]:
            summary["stages"]["bc"] = {
                "wall_s": time.time() - t0,
                "checkpoint": str(res.checkpoint),
                "heldout_loss": res.heldout_loss,
            }
            _save_summary(cfg, summary)

    if cfg.rl.steps > 0:
        # BC's and the base evaluation's blocks go back to the driver before the engine starts
        free_cuda_memory("before M-GRPO")
        res_rl = asyncio.run(train_rl(cfg, resume=resume, init=init, progress=progress))
        hist = res_rl.eval_history
        summary["stages"]["rl"] = {
            # the trainer's clock, kept in its checkpoints: a run killed before it wrote this
            # summary still counts (up to its last checkpoint), as for rl.time_budget_min
            "wall_s": res_rl.stage_s,
            "checkpoint": str(res_rl.checkpoint),
            "steps": res_rl.steps,
            "start": hist[0] if hist else None,
            "final": hist[-1] if hist else None,
            "history": hist,
            "paired": _paired_rl(cfg, hist),
            **_rl_groups(cfg, res_rl.steps),
        }
    summary["wall_s"] = summary.get("wall_s", 0.0) + time.time() - t_all
    summary["success"] = _successes(summary)
    _save_summary(cfg, summary)
    return summary


def _paired_rl(cfg: Config, hist: list[dict[str, float]]) -> dict[str, Any] | None:
    """The RL stage's last evaluation against its first, task by task (``report/paired.py``);
    None with fewer than two evaluations or unreadable files."""
    if len(hist) < 2:
        return None
    folder = Path(cfg.run_dir) / "rl" / "eval"
    first, last = int(hist[0]["step"]), int(hist[-1]["step"])
    try:
        c = compare_paired(
            load_outcomes(folder / f"step-{first:06d}.jsonl", f"step {first}"),
            load_outcomes(folder / f"step-{last:06d}.jsonl", f"step {last}"),
        )
    except (ReportError, OSError):
        return None
    return {
        "from_step": first,
        "to_step": last,
        "tasks": c.tasks,
        "diff": c.diff,
        "diff_ci": list(c.diff_ci),
        "better": c.better,
        "worse": c.worse,
        "sign_p": c.sign_p,
        "flip_p": c.flip_p,
    }


def _rl_groups(cfg: Config, steps: int) -> dict[str, int]:
    """Groups the M-GRPO steps ``1..steps`` trained on (mixed rewards) and collected, from its
    metrics: one row per step, the last logged (a step redone after a resume replaces the
    killed run's, and a killed run's step past the resumed run's end is not counted)."""
    rows = [
        r
        for r in rows_by_step(
            read_metrics(Path(cfg.run_dir) / "rl" / "metrics.jsonl"), "train/groups_used"
        )
        if int(r["step"]) <= steps
    ]
    used = sum(int(r["train/groups_used"]) for r in rows)
    skipped = sum(
        int(r.get("train/groups_skipped_equal", 0)) + int(r.get("train/groups_skipped_small", 0))
        for r in rows
    )
    return {"groups_trained": used, "groups_collected": used + skipped}


def groups_line(summary: dict[str, Any]) -> str | None:
    """One line on how many M-GRPO groups were trained on (mixed rewards) of those collected."""
    rl = summary.get("stages", {}).get("rl") or {}
    if "groups_trained" not in rl:
        return None
    return (
        f"M-GRPO: {rl.get('steps', 0)} step(s); {rl['groups_trained']} of "
        f"{rl['groups_collected']} groups were trained on (a group whose episodes all succeed "
        "or all fail carries no advantage and is skipped)"
    )


def paired_line(summary: dict[str, Any]) -> str | None:
    """One line on the RL stage's last evaluation against its first, or None without one."""
    p = (summary.get("stages", {}).get("rl") or {}).get("paired")
    if not p:
        return None
    lo, hi = p["diff_ci"]
    return (
        f"M-GRPO vs its start, task by task ({p['tasks']} tasks): {100 * p['diff']:+.1f} points "
        f"(95% CI {100 * lo:+.1f} to {100 * hi:+.1f}), {p['better']} better, {p['worse']} "
        f"worse, sign test p = {p['sign_p']:.2f}"
    )


def guess_line(summary: dict[str, Any]) -> str | None:
    """One line on the constant-answer baseline of the evaluation subset
    (``sources.embedded.guess``), or None when the summary has none (a task source other than
    the embedded suite)."""
    g = summary.get("guess_baseline")
    if not g or not g.get("tasks"):
        return None
    return (
        f"a constant answer per template would score {100 * g['successes'] / g['tasks']:.0f}% "
        f"on these tasks ({g['successes']}/{g['tasks']}: each template's most common training "
        "answer, without reading the page)"
    )


def _successes(summary: dict[str, Any]) -> dict[str, float | None]:
    st = summary["stages"]
    rl = st.get("rl") or {}
    base = st.get("base", {}).get("eval/success")
    after_bc = (rl.get("start") or {}).get("eval/success") if "bc" in st else None
    if "bc" not in st and rl.get("start"):
        base = rl["start"].get("eval/success")
    return {
        "base": base,
        "bc": after_bc,
        "rl": (rl.get("final") or {}).get("eval/success"),
    }
