"""Code, configs and scripts cite only documents that are in the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src", "tests", "configs", "benchmarks", "scripts")
SUFFIXES = {".py", ".yaml", ".yml", ".sh", ".toml", ".js"}
# The sites' seeded content and their tests hold made-up file names (a project's README.md,
# docs/…), not citations; this file names examples.
SKIP = ("src/webagent_r1/sites/", "tests/sites/", "tests/test_docs.py")
# A path under docs/ (docs/design.md), or a top-level document named in capitals (README.md).
CITED = re.compile(r"docs/[A-Za-z0-9_./-]+\.md|\b[A-Z][A-Z0-9_]*\.md\b")


def _sources() -> list[Path]:
    files = [ROOT / "pyproject.toml"]
    for folder in FOLDERS:
        files += [p for p in (ROOT / folder).rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return [p for p in files if not str(p.relative_to(ROOT)).startswith(SKIP)]


def test_cited_documents_exist() -> None:
    missing = []
    for path in _sources():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for doc in CITED.findall(line):
                if not (ROOT / doc).is_file():
                    missing.append(f"{path.relative_to(ROOT)}:{n}: {doc}")
    assert not missing, "cited documents not in the repository:\n" + "\n".join(missing)


def test_the_scan_sees_citations() -> None:
    # The check above passes vacuously if the pattern or the file walk breaks.
    assert CITED.findall('see docs/design.md, "Contracts"; the README.md') == [
        "docs/design.md",
        "README.md",
    ]
    assert CITED.findall("the NOTES.md file") == ["NOTES.md"]
    assert any(p.name == "types.py" for p in _sources())
