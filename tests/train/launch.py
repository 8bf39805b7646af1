"""Run ``webagent-r1`` under ``accelerate launch`` with two CPU processes (gloo)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def launch_two(port: int, *cli_args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``accelerate launch`` (configs/accelerate/two-processes.yaml) of ``webagent_r1.cli``
    with ``cli_args``, one thread per process; asserts that it exited 0."""
    cmd = [
        str(Path(sys.executable).parent / "accelerate"),
        "launch",
        "--config_file",
        str(ROOT / "configs" / "accelerate" / "two-processes.yaml"),
        "--main_process_port",
        str(port),
        "-m",
        "webagent_r1.cli",
        *cli_args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out
