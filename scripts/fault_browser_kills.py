"""Fault injection: kill Chromium processes under a real training run.

Runs ``webagent-r1 train`` (the look-up recipe, ``configs/r1.yaml``, cut to ``--rl-steps``
M-GRPO steps and a short BC) while this script SIGKILLs, every ``--every-s`` seconds (with
+-30 % jitter), either a random Chromium renderer or the Chromium browser process itself,
taken among the trainer's own descendants. Afterwards it checks that:

- the trainer exited 0 and ran every M-GRPO step (``rl/metrics.jsonl``);
- the lost episodes were counted as env errors (``rollout/env_errors``) and retried;
- every trajectory file the run wrote parses (``read_trajectories``) with finite rewards;
- every complete checkpoint loads (``meta.json``, ``trainer_state.pt``, model weights).

Bounded and self-stopping (``--max-minutes``: the trainer is stopped, the run fails). Writes
``<run-dir>/fault/kills.jsonl`` and ``<run-dir>/fault/summary.json``, prints the summary and
exits 0 only when every check passed::

    OMP_WAIT_POLICY=PASSIVE python scripts/fault_browser_kills.py --run-dir runs/fault-browser
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _chromium(trainer: psutil.Process) -> tuple[list[psutil.Process], list[psutil.Process]]:
    """(browser processes, renderer processes) among the trainer's descendants."""
    browsers, renderers = [], []
    try:
        tree = trainer.children(recursive=True)
    except psutil.Error:
        return [], []
    for p in tree:
        try:
            if "chrom" not in p.name().lower():
                continue
            cmd = p.cmdline()
        except psutil.Error:
            continue
        if not any(a.startswith("--type=") for a in cmd):
            browsers.append(p)
        elif "--type=renderer" in cmd:
            renderers.append(p)
    return browsers, renderers


def _kill_one(trainer: psutil.Process, rng: random.Random) -> dict[str, Any] | None:
    """SIGKILL a random renderer or (half the time, or when no renderer runs) the browser."""
    browsers, renderers = _chromium(trainer)
    if not browsers and not renderers:
        return None
    kind = "browser" if (browsers and (not renderers or rng.random() < 0.5)) else "renderer"
    victim = rng.choice(browsers if kind == "browser" else renderers)
    try:
        victim.send_signal(signal.SIGKILL)
    except psutil.Error:
        return None
    return {"kind": kind, "pid": victim.pid}


def _stage(run_dir: Path) -> str:
    """The recipe stage the run is in, from the folders it has written so far."""
    if (run_dir / "rl").is_dir():
        return "rl"
    return "bc" if (run_dir / "bc").is_dir() else "demos/base"


def _check_trajectories(run_dir: Path) -> dict[str, Any]:
    from webagent_r1.rollout.trajectories import read_trajectories

    files, n, bad = 0, 0, []
    for path in sorted(run_dir.rglob("*.jsonl")):
        if path.name == "metrics.jsonl" or "fault" in path.parts:
            continue
        files += 1
        try:
            trajs = read_trajectories(path)
        except Exception as e:  # any failure to read is the corruption looked for
            bad.append(f"{path}: {type(e).__name__}: {e}")
            continue
        n += len(trajs)
        bad += [f"{path}: reward {t.reward}" for t in trajs if not math.isfinite(t.reward)]
    return {"files": files, "trajectories": n, "bad": bad}


def _check_checkpoints(run_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    from webagent_r1.train.checkpoint import load_trainer_state

    n, bad = 0, []
    for meta in sorted(run_dir.glob("*/checkpoints/step-*/meta.json")):
        ckpt = meta.parent
        n += 1
        try:
            json.loads(meta.read_text())
            load_trainer_state(ckpt)
            for weights in (ckpt / "model").glob("*.safetensors"):
                load_file(weights)
        except Exception as e:  # any failure to load is the corruption looked for
            bad.append(f"{ckpt}: {type(e).__name__}: {e}")
    return {"checkpoints": n, "bad": bad}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", type=Path, default=Path("runs/fault-browser"))
    ap.add_argument("--config", default=str(ROOT / "configs" / "r1.yaml"))
    ap.add_argument("--rl-steps", type=int, default=5, help="M-GRPO steps of the run")
    ap.add_argument("--every-s", type=float, default=30.0, help="mean seconds between kills")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill times and victims")
    ap.add_argument("--max-minutes", type=float, default=150.0, help="hard stop")
    ap.add_argument(
        "--override",
        action="append",
        default=[],
        help="extra config override (key=value), after the script's own",
    )
    a = ap.parse_args()
    if a.run_dir.exists():
        raise SystemExit(f"{a.run_dir} exists: pass a new --run-dir")
    fault = a.run_dir / "fault"
    fault.mkdir(parents=True)
    overrides = [
        f"run_dir={a.run_dir}",
        f"rl.steps={a.rl_steps}",
        "rl.eval_tasks=12",  # short evaluations: the run is about surviving, not scoring
        "bc.steps=20",
        "bc.demo_tasks=48",
        f"bc.data={a.run_dir / 'demos.jsonl'}",
        "train.checkpoint_every=1",  # a checkpoint at every step, to be checked afterwards
        *a.override,
    ]
    cmd = [sys.executable, "-m", "webagent_r1.cli", "train", "--config", a.config, *overrides]
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(ROOT / "src")}
    log = (fault / "train.log").open("w")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    trainer = psutil.Process(proc.pid)
    rng = random.Random(a.seed)
    kills: list[dict[str, Any]] = []
    timed_out = False
    next_kill = t0 + a.every_s * rng.uniform(0.7, 1.3)
    while proc.poll() is None:
        now = time.monotonic()
        if now - t0 > 60 * a.max_minutes:
            timed_out = True
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
            break
        if now >= next_kill:
            next_kill = now + a.every_s * rng.uniform(0.7, 1.3)
            kill = _kill_one(trainer, rng)
            if kill is not None:
                kill.update(t_s=round(now - t0, 1), stage=_stage(a.run_dir))
                kills.append(kill)
                with (fault / "kills.jsonl").open("a") as f:
                    f.write(json.dumps(kill) + "\n")
                print(json.dumps(kill), flush=True)
        time.sleep(0.5)
    proc.wait()
    log.close()

    from webagent_r1.train.metrics import read_metrics

    metrics_path = a.run_dir / "rl" / "metrics.jsonl"
    rows = read_metrics(metrics_path) if metrics_path.is_file() else []
    steps = sorted({int(r["step"]) for r in rows if "rollout/env_errors" in r})
    env_errors = sum(int(r.get("rollout/env_errors", 0)) for r in rows)
    tracebacks = (fault / "train.log").read_text(errors="replace").count("Traceback")
    trajectories = _check_trajectories(a.run_dir)
    checkpoints = _check_checkpoints(a.run_dir)
    summary = {
        "trainer_rc": proc.returncode,
        "timed_out": timed_out,
        "wall_min": round((time.monotonic() - t0) / 60, 1),
        "kills": len(kills),
        "kills_by_kind": {k: sum(x["kind"] == k for x in kills) for k in ("browser", "renderer")},
        "kills_in_rl": sum(x["stage"] == "rl" for x in kills),
        "rl_steps_done": len(steps),
        "rl_env_errors": env_errors,
        "tracebacks_in_log": tracebacks,
        "trajectory_files": trajectories["files"],
        "trajectories": trajectories["trajectories"],
        "corrupt_trajectories": trajectories["bad"],
        "checkpoints": checkpoints["checkpoints"],
        "corrupt_checkpoints": checkpoints["bad"],
    }
    summary["passed"] = (
        proc.returncode == 0
        and not timed_out
        and len(steps) >= a.rl_steps
        and summary["kills_in_rl"] > 0
        and env_errors > 0  # the kills during M-GRPO did cost episodes, and they were counted
        and not trajectories["bad"]
        and not checkpoints["bad"]
    )
    (fault / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
