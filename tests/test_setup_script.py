"""scripts/setup.sh with a stand-in venv (pip records, torch is a stub): the vllm extra is
refused over a CPU torch with the CUDA wheel's command; without extras nothing changes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _sandbox(tmp: Path, cuda: str | None) -> tuple[Path, Path]:
    """A repository copy with setup.sh, pyproject.toml and a stand-in ``.venv``."""
    (tmp / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp / "scripts" / "setup.sh")
    shutil.copy(ROOT / "pyproject.toml", tmp / "pyproject.toml")
    stub = tmp / "stub" / "torch"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text(
        f"__version__ = {'2.13.0+cpu' if cuda is None else '2.13.0'!r}\n"
        f"class version:\n    cuda = {cuda!r}\n"
    )
    log = tmp / "pip.log"
    bin_ = tmp / ".venv" / "bin"
    bin_.mkdir(parents=True)
    python = bin_ / "python"
    python.write_text(
        "#!/usr/bin/env bash\n"
        f'if [ "$1" = "-m" ]; then echo "$*" >> {log}; exit 0; fi\n'
        f'PYTHONPATH={stub.parent} exec {sys.executable} -S "$@"\n'
    )
    cli = bin_ / "webagent-r1"
    cli.write_text(f'#!/usr/bin/env bash\necho "webagent-r1 $*" >> {log}\n')
    for f in (python, cli):
        f.chmod(0o755)
    return tmp / "scripts" / "setup.sh", log


def _run(script: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "WEBAGENT_R1_EXTRAS"}
    full.update(WEBAGENT_R1_CHROMIUM="/bin/true", **env)
    return subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, timeout=60, env=full
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_vllm_extra_is_refused_over_a_cpu_torch(tmp_path: Path) -> None:
    script, log = _sandbox(tmp_path, cuda=None)
    out = _run(script, WEBAGENT_R1_EXTRAS="vllm")
    assert out.returncode == 1
    [line] = [x for x in out.stderr.splitlines() if "error" in x]
    assert "2.13.0+cpu is a CPU build" in line
    assert "--force-reinstall 'torch==2.13.0' --index-url https://pypi.org/simple" in line
    assert "-e .[dev,ray,vllm]" not in log.read_text()  # stopped before the package


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_cuda_torch_gets_the_extra_and_no_extra_changes_nothing(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    script, log = _sandbox(tmp_path / "a", cuda="13.0")
    out = _run(script, WEBAGENT_R1_EXTRAS="vllm")
    assert out.returncode == 0, out.stderr
    assert "pip install -q -e .[dev,ray,vllm]" in log.read_text()
    stamp = (tmp_path / "a" / ".venv" / ".webagent-r1-installed").read_text().strip()
    assert stamp.endswith(":vllm")
    (tmp_path / "b").mkdir()
    script, log = _sandbox(tmp_path / "b", cuda=None)  # the README's CPU set-up
    out = _run(script)
    assert out.returncode == 0, out.stderr
    assert "pip install -q -e .[dev,ray]" in log.read_text()
    assert "model prepare" in log.read_text()
    stamp = (tmp_path / "b" / ".venv" / ".webagent-r1-installed").read_text().strip()
    assert ":" not in stamp  # an existing venv's stamp (the pyproject's hash) still matches
