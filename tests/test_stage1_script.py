"""scripts/rl-own-effect-stage1.sh refuses, before it makes or starts anything, a machine whose
policy would compute in other numerics than stage 1's finished arms."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "rl-own-effect-stage1.sh"


def _run(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(repo / "scripts" / SCRIPT.name), *args],
        capture_output=True,
        text=True,
        check=False,
    )


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
    r = _run(repo)
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
    r = _run(repo)
    assert r.returncode == 1 and "run bash scripts/setup.sh first" in r.stderr


def test_a_python_that_fails_is_one_line_not_silence(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "cpu, bf16 autocast")
    (repo / ".venv" / "bin" / "python").write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    r = _run(repo, "archive")
    assert r.returncode == 1
    assert "[stage1] error: could not resolve this machine's numerics" in r.stderr


def test_an_unknown_mode_is_refused_before_anything(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "cpu, bf16 autocast")
    r = _run(repo, "stage2")
    assert r.returncode == 1 and "unknown mode stage2" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["repo"]
