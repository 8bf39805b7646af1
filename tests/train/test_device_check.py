"""scripts/device_check.py on the CPU (tiny shape), as the GPU image would run it: no
Playwright installed, PYTHONPATH=src, one line per check and a JSON summary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device_check.py"


def test_device_check_runs_on_cpu_without_playwright(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker" / "playwright"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no playwright on this image')\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(blocker.parent), str(ROOT / "src")]),
        "OMP_NUM_THREADS": "1",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = [
        ln for ln in out.stdout.splitlines() if ln.split(" ", 1)[0] in ("PASS", "FAIL", "SKIP")
    ]
    status = {ln.split()[1]: ln.split()[0] for ln in lines}
    passed = ("models", "hf_logprobs", "mgrpo_shared", "dist", "grad_allreduce", "fsdp")
    for check in (*passed, "throughput"):
        assert status[check] == "PASS", out.stdout
    assert status["peak_memory"] == status["handover"] == status["plan_small"] == "SKIP"
    assert status["all:"] == "PASS"
    summary = json.loads((tmp_path / "out" / "device-check.json").read_text())
    assert summary["playwright_stand_in"] is True and summary["failed"] == []
    fsdp = next(r for r in summary["results"] if r["check"] == "fsdp")
    assert fsdp["layer_dtype"] == "torch.bfloat16" and fsdp["shard_dtypes"] == ["torch.float32"]
    hf = next(r for r in summary["results"] if r["check"] == "hf_logprobs")
    assert hf["tiny_fp32"]["max_ratio_dev"] <= 1e-4 and hf["tiny_fp32"]["tokens"] > 0
    assert hf["tiny_bf16"]["mean_ratio_dev"] <= 0.1 and hf["tiny_bf16"]["tokens"] > 0


def test_a_failing_check_is_reported_and_the_others_still_run(tmp_path: Path) -> None:
    module = _module()
    c = module.Check("cpu", tmp_path)

    def broken(_c):
        raise AssertionError("ratio off by 1e-2")

    c.run("broken", broken)
    c.run("fine", lambda _c: {"x": 1})
    assert [r["status"] for r in c.results] == ["FAIL", "PASS"]
    assert "ratio off" in c.results[0]["error"] and c.results[1]["x"] == 1


def _module():
    return load_script("scripts/device_check.py", "device_check")


def test_plan_vs_measured_flags_a_gap_over_15_percent() -> None:
    m = _module()
    assert m.PLAN_TOL == 0.15
    ok = m.compare_to_plan(10.0, 11.4)  # 14% over the plan
    assert ok["within"] and ok["gap"] == 0.14
    assert m.compare_to_plan(10.0, 8.6)["within"]  # 14% under
    over = m.compare_to_plan(10.0, 11.6)
    assert not over["within"] and over["gap"] == 0.16
    under = m.compare_to_plan(10.0, 8.4)  # the plan 19% too high: flagged as well
    assert not under["within"] and under["gap"] == -0.16
    assert not m.compare_to_plan(0.0, 1.0)["within"]
    assert m.compare_to_plan(64.0, 80.0, tol=0.3)["within"]
