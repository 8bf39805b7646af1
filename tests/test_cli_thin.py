"""The command line stays thin: each command parses its options, calls the library, prints.

Every function in ``cli.py`` spans at most 40 lines and every function of the evaluation at
most 80 (its decorators, signature, docstring and body: ``end_lineno`` of the ``def`` minus
the line of its first decorator, plus one); logic that outgrows that belongs in the library.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import webagent_r1

ROOT = Path(webagent_r1.__file__).parent
EVALUATION = ["evaluation/*.py", "experiment/eval_run.py"]
"""The evaluation's modules (patterns relative to the package)."""
LIMITS = {"cli.py": 40} | {
    str(p.relative_to(ROOT)): 80 for pattern in EVALUATION for p in sorted(ROOT.glob(pattern))
}
"""Module (relative to the package) → the longest function it may define."""


def spans(source: str) -> list[tuple[str, int, int]]:
    """``(name, first line, lines)`` of every function (nested ones and methods too), from
    its first decorator to its last line."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            assert node.end_lineno is not None
            out.append((node.name, start, node.end_lineno - start + 1))
    return out


def test_spans_count_decorators_and_nested_functions() -> None:
    source = "@a\n@b(\n  1)\ndef f(x):\n    def g():\n        pass\n    return x\n"
    assert sorted(spans(source)) == [("f", 1, 7), ("g", 5, 2)]


def test_the_evaluation_modules_are_found() -> None:
    assert sum(limit == 80 for limit in LIMITS.values()) >= 2


@pytest.mark.parametrize("module", sorted(LIMITS))
def test_functions_are_short(module: str) -> None:
    path = ROOT / module
    limit = LIMITS[module]
    long = [
        f"{module}:{start} {name} ({n} lines)"
        for name, start, n in spans(path.read_text())
        if n > limit
    ]
    assert not long, f"functions over {limit} lines (move the logic into the library): {long}"
