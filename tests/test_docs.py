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


# --------------------------------------------------------------------------------------------
# The user's documents: README.md and docs/ cite files that exist, and README.md stays short.
# --------------------------------------------------------------------------------------------

README_MAX_LINES = 150
"""README.md is the user's guide on one screenful or two; detail goes to the docs/ pages."""
GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
"""Pages that describe the code as it is now (docs/results/ records how it was)."""
ALL_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
WORD = re.compile(r"[\w./{},*<>:@-]+")
TOP = ("src/", "configs/", "scripts/", "tests/", "benchmarks/", "docs/")
"""A code-formatted path that starts with one of these is a path from the repository root."""
MODULE_FILE = re.compile(r"[\w-]+(/[\w-]+)+\.py")
"""``grading/embedded.py``: a file of the package (or of the tests) named from its folder."""
UPSTREAM = ("evaluation_harness/", "VAB-WebArena-Lite/")
"""Folders of other projects' repositories (WebArena's, VisualAgentBench's) that pages cite."""
DOTTED = re.compile(r"webagent_r1(\.\w+)+")


def _expand(path: str) -> list[str]:
    """Shell brace expansion: ``r1{,-zero}.yaml`` is ``r1.yaml`` and ``r1-zero.yaml``."""
    m = re.search(r"\{([^{}]*)\}", path)
    if m is None:
        return [path]
    return [
        p for alt in m[1].split(",") for p in _expand(path[: m.start()] + alt + path[m.end() :])
    ]


def _path_exists(word: str) -> bool | None:
    """Whether a code-formatted path exists (None: ``word`` is not a path of this repository).

    ``file.py:12`` is the file; ``tests/x.py::test_y`` is the file, which must define
    ``test_y``; ``runs/`` and ``data/`` are what commands write, not the repository's."""
    word, _, test = word.rstrip(".,:;").partition("::")
    word = re.sub(r":\d+$", "", word)
    if "<" in word or "://" in word or word.startswith(("/", "~", "runs/", "data/")):
        return None
    if "/" not in word:
        return None
    if test:
        path = ROOT / word
        return path.is_file() and f"def {test}(" in path.read_text()
    if word.startswith(TOP):
        roots = [ROOT]
    elif MODULE_FILE.fullmatch(word) and not word.startswith(UPSTREAM):
        roots = [ROOT / "src" / "webagent_r1", ROOT / "src", ROOT / "tests", ROOT]
    else:
        return None
    for p in _expand(word):
        if not any(any(root.glob(p)) if "*" in p else (root / p).exists() for root in roots):
            return False
    return True


def _module_exists(dotted: str) -> bool:
    """Whether ``webagent_r1.a.b[.name]`` names a module of the package (and ``name``, when
    the path goes past the modules, is a word of the deepest one's source)."""
    parts = dotted.split(".")
    src, k = ROOT / "src", 1
    while k < len(parts):
        p = src.joinpath(*parts[: k + 1])
        if not (p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()):
            break
        k += 1
    if k == 1:
        return False
    if k == len(parts):
        return True
    p = src.joinpath(*parts[:k])
    source = (p / "__init__.py" if p.is_dir() else p.with_suffix(".py")).read_text()
    return re.search(rf"\b{re.escape(parts[k])}\b", source) is not None


def test_readme_is_short() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES})"


def test_markdown_links_resolve() -> None:
    missing = []
    for page in ALL_PAGES:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target) or target.startswith("#"):
                    continue
                if not (page.parent / target.split("#")[0]).exists():
                    missing.append(f"{page.relative_to(ROOT)}:{n}: {target}")
    assert not missing, "links to files not in the repository:\n" + "\n".join(missing)


def test_code_formatted_paths_exist() -> None:
    """`src/…`, `configs/…`, `tests/…` paths and `grading/embedded.py`-style module files,
    and `webagent_r1.…` modules, in README.md and docs/*.md name what is in the tree."""
    missing = []
    for page in GUIDES:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for span in CODE_SPAN.findall(line):
                for word in WORD.findall(span):
                    if _path_exists(word) is False:
                        missing.append(f"{page.relative_to(ROOT)}:{n}: {word}")
                for m in DOTTED.finditer(span):
                    if not _module_exists(m[0]):
                        missing.append(f"{page.relative_to(ROOT)}:{n}: {m[0]}")
    assert not missing, "code-formatted paths not in the repository:\n" + "\n".join(missing)


def test_the_path_check_sees_paths() -> None:
    assert _path_exists("src/webagent_r1/cli.py") and _path_exists("report/viewer.py")
    assert _path_exists("configs/gpu/qwen2.5-3b-r1{,-zero,-cot}.yaml")
    assert _path_exists("configs/gpu/*.yaml") and _path_exists("tests/test_docs.py:12")
    assert _path_exists("tests/test_docs.py::test_readme_is_short")
    assert _path_exists("tests/test_docs.py::test_nowhere") is False
    assert _path_exists("src/webagent_r1/nowhere.py") is False
    assert _path_exists("configs/r1{,-nowhere}.yaml") is False
    assert _path_exists("webarena/nowhere.py") is False
    for other in ("configs/<recipe>.yaml", "runs/r1/x.py", "evaluation_harness/evaluators.py"):
        assert _path_exists(other) is None
    assert _module_exists("webagent_r1.cli") and _module_exists("webagent_r1.stats.run_spread_p")
    assert not _module_exists("webagent_r1.nowhere")
    assert not _module_exists("webagent_r1.stats.no_such_function")
