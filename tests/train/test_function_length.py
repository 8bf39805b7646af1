"""No function in ``train/`` is longer than ``MAX_LINES``: the trainers stay split into stage
methods and helpers (``train/stage.py``) rather than growing one long loop again."""

from __future__ import annotations

import ast
from pathlib import Path

import webagent_r1.train.stage

MAX_LINES = 120
TRAIN = Path(webagent_r1.train.stage.__file__).parent


def function_lengths(source: str) -> dict[str, int]:
    """Lines (decorators, signature and docstring included) of every function and method of
    ``source``, nested ones too, by qualified name."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    out[name] = (child.end_lineno or child.lineno) - first + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def test_function_lengths_counts_methods_nested_functions_and_decorators() -> None:
    src = (
        "class A:\n"
        "    @staticmethod\n"
        "    def f():\n"
        "        def g():\n"
        "            return 1\n"
        "        return g\n"
        "async def h():\n"
        "    pass\n"
    )
    assert function_lengths(src) == {"A.f": 5, "A.f.g": 2, "h": 2}


def test_no_function_in_train_is_longer_than_the_limit() -> None:
    files = sorted(TRAIN.glob("*.py"))
    assert len(files) > 5  # the package was found
    long = [
        f"{p.name}: {name} has {n} lines"
        for p in files
        for name, n in function_lengths(p.read_text()).items()
        if n > MAX_LINES
    ]
    assert not long, f"functions over {MAX_LINES} lines (split them): {long}"
