"""The package's import graph: no cycle, and a function-level import only with a reason.

The declared layers (``[tool.importlinter]`` in ``pyproject.toml``; ``docs/design.md``,
"Layers") are checked by import-linter's ``layers`` contract, and the top-level subpackages
and modules import each other without a cycle either.

The graph has an edge for every ``import webagent_r1...`` / ``from webagent_r1... import``,
at module level or inside a function (a function-level import still runs, so a cycle through
one is still a cycle); imports under ``if TYPE_CHECKING:`` never run and are left out. The
parent packages that importing ``a.b.c`` runs implicitly are not edges, but ``from a.b import
name`` of a name defined in ``a/b/__init__.py`` is.

``KNOWN_CYCLE_EDGES`` lists the one edge still to be removed: ``sites/server.py`` reads
``SITES`` from ``sites/__init__.py``, which imports ``sites.server`` first.

A function-level import is allowed only to keep a heavy optional dependency (torch, vLLM,
Ray, Playwright, transformers, ...) off the import path, with a ``# heavy: ...`` comment on
its line or the line above it.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import grimp
from importlinter.api import read_configuration
from importlinter.contracts.layers import LayersContract

import webagent_r1

PKG = "webagent_r1"
KNOWN_CYCLE_EDGES = {("webagent_r1.sites.server", "webagent_r1.sites")}
"""Edges left out of the cycle check (each a function-level import marked ``# cycle:``)."""
ROOT = Path(webagent_r1.__file__).parent
PYPROJECT = ROOT.parent.parent / "pyproject.toml"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement that can run, with whether it is inside a function."""
    out: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    walk(sub, in_function)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                out.append((child, in_function))
            inner = in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            walk(child, inner)

    walk(tree, False)
    return out


def _targets(node: ast.Import | ast.ImportFrom, here: str, modules: dict[str, Path]) -> set[str]:
    """The package modules an import statement loads (the most specific one per name)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = here if modules[here].name == "__init__.py" else here.rpartition(".")[0]
            for _ in range(node.level - 1):
                pkg = pkg.rpartition(".")[0]
            base = f"{pkg}.{base}" if base else pkg
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    out = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name.startswith(PKG) and name in modules:
            out.add(name)
    return out


def import_graph() -> tuple[dict[str, set[str]], list[str]]:
    """``module -> modules it imports`` and the function-level imports without a reason."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    unexplained: list[str] = []
    for mod, path in modules.items():
        text = path.read_text()
        lines = text.splitlines()
        for node, in_function in _imports(ast.parse(text)):
            if in_function:
                near = lines[node.lineno - 1] + (lines[node.lineno - 2] if node.lineno > 1 else "")
                if "# heavy" not in near and "# cycle" not in near:
                    unexplained.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
            for target in _targets(node, mod, modules):
                if target != mod and (mod, target) not in KNOWN_CYCLE_EDGES:
                    graph[mod].add(target)
    return graph, unexplained


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path ``[a, b, ..., a]``, or None when it has none."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_find_cycle_finds_one_and_only_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_graph_sees_function_level_imports() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "if TYPE_CHECKING:\n"
        "    import json\n"
        "def f():\n"
        "    import sys\n"
    )
    found = [(getattr(n, "module", None) or n.names[0].name, inner) for n, inner in _imports(tree)]
    assert found == [("typing", False), ("os", False), ("sys", True)]


def test_package_has_no_import_cycle() -> None:
    graph, _ = import_graph()
    assert len(graph) > 50 and graph[f"{PKG}.rollout.collect"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_function_level_imports_say_why() -> None:
    _, unexplained = import_graph()
    assert not unexplained, (
        "function-level imports without a '# heavy: ...' reason (move them to the top): "
        + ", ".join(unexplained)
    )


def _subpackage(module: str) -> str:
    """The top-level subpackage or module of ``module`` (``webagent_r1.rollout.env`` ->
    ``webagent_r1.rollout``)."""
    return ".".join(module.split(".")[:2])


def subpackage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` with each module replaced by its top-level subpackage (imports within one
    subpackage left out)."""
    out: dict[str, set[str]] = {}
    for mod, targets in graph.items():
        here = _subpackage(mod)
        out.setdefault(here, set()).update(
            _subpackage(t) for t in targets if _subpackage(t) not in (here, PKG)
        )
    return out


def test_subpackage_graph_merges_modules() -> None:
    graph = {f"{PKG}.a.x": {f"{PKG}.b.y", f"{PKG}.a.z"}, f"{PKG}.b.y": {f"{PKG}.c"}}
    assert subpackage_graph(graph) == {f"{PKG}.a": {f"{PKG}.b"}, f"{PKG}.b": {f"{PKG}.c"}}


def test_subpackages_have_no_import_cycle() -> None:
    graph = subpackage_graph(import_graph()[0])
    assert len(graph) > 15 and graph[f"{PKG}.rollout"]
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between subpackages: " + " -> ".join(cycle or [])


def _layers_contract() -> tuple[LayersContract, dict]:
    config = read_configuration(str(PYPROJECT))
    [options] = [c for c in config["contracts_options"] if c["type"] == "layers"]
    return LayersContract(options["name"], config["session_options"], options), config


def test_layers_contract_lists_every_top_level_module() -> None:
    contract, _ = _layers_contract()
    layered = {
        m.strip()
        for layer in contract.contract_options["layers"]
        for m in layer.replace(":", "|").split("|")
    }
    top = {_subpackage(m) for m in _modules()} - {PKG}
    assert top == layered, f"not in a layer: {sorted(top - layered)}"


def test_layers_contract_breaks_on_an_upward_or_sideways_import() -> None:
    contract, config = _layers_contract()
    assert config["session_options"]["root_packages"] == [PKG]

    def graph() -> grimp.ImportGraph:
        return grimp.build_graph(PKG, exclude_type_checking_imports=True, cache_dir=None)

    assert contract.check(graph(), verbose=False).kept
    for importer, imported in [
        ("errors", "cli"),  # a lower layer imports a higher one
        ("sites.base", "browser"),  # siblings of one layer
    ]:
        broken = graph()
        broken.add_import(
            importer=f"{PKG}.{importer}",
            imported=f"{PKG}.{imported}",
            line_number=1,
            line_contents=f"import {PKG}.{imported}",
        )
        assert not contract.check(broken, verbose=False).kept, (importer, imported)


def test_import_contracts_are_kept() -> None:
    """``lint-imports`` (the venv's), on this source tree: every contract kept."""
    lint = Path(sys.executable).parent / "lint-imports"
    env = {**os.environ, "PYTHONPATH": str(ROOT.parent)}
    done = subprocess.run(
        [str(lint), "--no-cache", "--no-logo", str(PYPROJECT)],
        cwd=PYPROJECT.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
