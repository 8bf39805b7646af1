"""scripts/rl-own-effect-stage1.sh refuses, before it makes or starts anything, a machine whose
policy would compute in other numerics than stage 1's finished arms."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "rl-own-effect-stage1.sh"


def _repo(tmp_path: Path, numerics: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / "scripts")
    py = repo / ".venv" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text(f"#!/bin/sh\necho '{numerics}|Fake CPU (avx2)'\n")
    py.chmod(0o755)
    return repo


def test_a_machine_in_other_numerics_is_refused_before_anything(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "cpu, float32")
    r = subprocess.run(
        ["bash", str(repo / "scripts" / SCRIPT.name)], capture_output=True, text=True, check=False
    )
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "[stage1] error: this machine (Fake CPU (avx2)) computes in cpu, float32; stage 1's "
        "arms ran in cpu, bf16 autocast: run it on a CPU with fast bf16 (AVX512-BF16 or AMX)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]  # no worktree
    assert not (repo / "runs").exists()


def test_no_venv_is_one_line(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "cpu, bf16 autocast")
    shutil.rmtree(repo / ".venv")
    r = subprocess.run(
        ["bash", str(repo / "scripts" / SCRIPT.name)], capture_output=True, text=True, check=False
    )
    assert r.returncode == 1 and "run bash scripts/setup.sh first" in r.stderr
