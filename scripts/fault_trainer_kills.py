"""Fault injection: SIGKILL the trainer at random moments, resume each time, compare.

A behaviour-cloning run of a tiny model (the one the resume test uses) is trained once
without interruption, then again while this script kills it with SIGKILL at a random moment
``--kills`` times, resuming with ``--resume`` after each kill. The run passes when the final
parameters equal the uninterrupted run's bit for bit and the loss curve is continuous: every
step from 1 to ``--steps`` has a logged loss, equal to the uninterrupted run's at that step.

Bounded and self-stopping (``--max-minutes``); prints one JSON summary line, writes it to
``<out>/summary.json`` and exits 0 only when every check passed::

    OMP_WAIT_POLICY=PASSIVE python scripts/fault_trainer_kills.py --out runs/fault-trainer
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

# The driver paces each step (a sleep after it) so that a random kill lands inside the run
# whatever the machine's speed; pacing changes no number.
_DRIVER = (
    "import sys, time\n"
    "from webagent_r1.config import load_config\n"
    "from webagent_r1.train.bc import train_bc\n"
    "resume = sys.argv[1] == 'resume'\n"
    "cfg = load_config(None, sys.argv[2:])\n"
    "train_bc(cfg, resume=resume, progress=False, on_step=lambda s, m: time.sleep(PACE))\n"
)


def _overrides(model: Path, data: Path, run: Path, steps: int) -> list[str]:
    return [
        f"model.name={model}",
        "model.device=cpu",
        f"bc.data={data}",
        f"run_dir={run}",
        f"bc.steps={steps}",
        "bc.batch_size=4",
        "bc.lr=3e-3",
        "bc.eval_every=0",
        "train.checkpoint_every=2",
        "train.keep_checkpoints=2",
        "train.tensorboard=false",
    ]


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
        "PYTHONPATH": str(ROOT / "src"),
    }


def _start(run: Path, args: list[str], resume: bool, pace: float) -> subprocess.Popen:
    driver = _DRIVER.replace("PACE", repr(pace))
    log = (run.parent / f"{run.name}.log").open("a")
    return subprocess.Popen(
        [sys.executable, "-c", driver, "resume" if resume else "fresh", *args],
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _losses(run: Path) -> dict[int, list[float]]:
    from webagent_r1.train.metrics import read_metrics

    out: dict[int, list[float]] = {}
    for row in read_metrics(run / "bc" / "metrics.jsonl"):
        loss = row.get("train/loss", row.get("loss"))
        if isinstance(loss, int | float):
            out.setdefault(int(row["step"]), []).append(float(loss))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("runs/fault-trainer"))
    ap.add_argument("--kills", type=int, default=5, help="SIGKILLs to land inside the run")
    ap.add_argument("--steps", type=int, default=40, help="BC steps of the run")
    ap.add_argument("--pace-s", type=float, default=0.3, help="sleep after each step")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    ap.add_argument("--max-minutes", type=float, default=30.0, help="hard stop")
    a = ap.parse_args()

    import torch
    from safetensors.torch import load_file
    from tests.support.tiny import make_tiny_model, make_trajectories

    from webagent_r1.rollout.trajectories import write_trajectories

    deadline = time.time() + 60 * a.max_minutes
    a.out.mkdir(parents=True, exist_ok=True)
    model = make_tiny_model(a.out / "model")
    data = a.out / "demos.jsonl"
    write_trajectories(make_trajectories(24, seed=2), data)
    straight, killed = a.out / "straight", a.out / "killed"
    for run in (straight, killed):
        if run.exists():
            raise SystemExit(f"{run} exists: pass a new --out")

    t0 = time.time()
    proc = _start(straight, _overrides(model, data, straight, a.steps), False, a.pace_s)
    startup_s = None  # until the first step's loss is logged: imports, loading
    while proc.poll() is None and time.time() < deadline:
        if startup_s is None and _losses(straight):
            startup_s = time.time() - t0
        time.sleep(0.05)
    proc.wait(timeout=max(1.0, deadline - time.time()))
    if proc.returncode != 0:
        raise SystemExit(f"the uninterrupted run failed (rc {proc.returncode}); see {straight}.log")
    run_s = time.time() - t0
    startup_s = startup_s if startup_s is not None else 0.5 * run_s

    rng = random.Random(a.seed)
    kills: list[dict[str, float]] = []
    resume = False
    while time.time() < deadline:
        proc = _start(killed, _overrides(model, data, killed, a.steps), resume, a.pace_s)
        resume = True
        if len(kills) >= a.kills:  # the last resume runs to the end
            proc.wait(timeout=max(1.0, deadline - time.time()))
            break
        # a random moment after start-up, within 1/(kills + 1) of the training time: a step
        # or a checkpoint save; the kills together never cover the whole run, so each lands
        at = startup_s + rng.uniform(0.0, (run_s - startup_s) / (a.kills + 1))
        try:
            proc.wait(timeout=at)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            kills.append({"after_s": round(at, 2)})
            continue
        break  # it finished before the kill: nothing left to interrupt
    else:
        proc.kill()
        raise SystemExit(f"stopped after --max-minutes {a.max_minutes}")

    final = Path("bc") / "checkpoints" / f"step-{a.steps:06d}" / "model" / "model.safetensors"
    same = False
    if (killed / final).is_file():
        x, y = load_file(straight / final), load_file(killed / final)
        same = x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
    want, got = _losses(straight), _losses(killed)
    missing = [s for s in range(1, a.steps + 1) if s not in got]
    # a step redone after a resume must log the loss it logged the first time
    diff = max((abs(v - want[s][0]) for s, vs in got.items() for v in vs if s in want), default=0.0)
    summary = {
        "kills": len(kills),
        "kill_times_s": [k["after_s"] for k in kills],
        "final_rc": proc.returncode,
        "params_equal": same,
        "loss_steps_missing": missing,
        "loss_max_abs_diff": diff,
        "steps_redone": sum(len(vs) - 1 for vs in got.values()),
        "uninterrupted_run_s": round(run_s, 1),
        "startup_s": round(startup_s, 1),
        "wall_s": round(time.time() - t0, 1),
    }
    ok = len(kills) == a.kills and proc.returncode == 0 and same and not missing and diff == 0.0
    summary["passed"] = ok
    (a.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
