"""docs/configuration.md, generated from the config dataclasses and their field docstrings.

Every setting in ``config.py`` is documented by the string literal right after it (an
attribute docstring). Python keeps no such strings at run time, so they are read from the
class's source with ``ast``. Regenerate the page after changing a config field::

    python -m webagent_r1.configdoc > docs/configuration.md

``python -m webagent_r1.configdoc --check docs/configuration.md`` exits 1 when the file is out
of date (the test suite checks the same).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

from webagent_r1.config import Config

REGENERATE = "python -m webagent_r1.configdoc > docs/configuration.md"
"""The one command that rewrites docs/configuration.md."""

_INTRO = f"""\
# Configuration reference

<!-- Generated from src/webagent_r1/config.py; do not edit by hand. Regenerate with:
     {REGENERATE} -->

Every run reads one `Config`: the defaults below, then a YAML recipe (`--config
configs/<recipe>.yaml`, sections as below), then overrides on the command line as
`section.key=value` (e.g. `env.max_turns=5 observation.format=html`; lists as `a,b` or
`[a, b]`, `null` for none). An unknown key is an error that names the closest valid key; an
invalid value is an error that says how to fix it. The recipes are described in
[training.md](training.md).

Environment variables: `WEBAGENT_R1_HOME` (cache of models and site databases, default
`~/.cache/webagent-r1`), `WEBAGENT_R1_CHROMIUM` (a Chromium binary), `WEBAGENT_R1_DEBUG=1`
(tracebacks instead of one-line errors); the WebArena-Lite source reads `WA_*`
([webarena-lite.md](webarena-lite.md)).
"""


def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a dataclass, one paragraph each.

    Args:
        cls: a class whose fields are annotated assignments, each optionally followed by a
            string literal (its docstring).

    Returns:
        Field name -> docstring with its lines joined by single spaces; fields without a
        docstring are left out.
    """
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = next(n for n in tree.body if isinstance(n, ast.ClassDef)).body
    docs: dict[str, str] = {}
    for node, after in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def format_default(value: Any) -> str:
    """A default value as it would be written in a YAML recipe (``null``, ``true``, lists)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(format_default(v) for v in value) + "]"
    return repr(value)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _is_section(f: dataclasses.Field) -> bool:
    return f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(
        f.default_factory
    )


def _cell(text: str) -> str:
    """Text for a Markdown table cell: ``|`` escaped (it would end the cell), reST's double
    backticks as Markdown's single ones."""
    return text.replace("``", "`").replace("|", "\\|")


def _type_name(tp: Any) -> str:
    """An annotation as written (a string under ``from __future__ import annotations``)."""
    return tp if isinstance(tp, str) else getattr(tp, "__name__", str(tp))


def _class_doc(cls: type) -> str:
    """The class docstring, each paragraph on one line (Markdown joins them anyway)."""
    paragraphs = (inspect.getdoc(cls) or "").split("\n\n")
    return "\n\n".join(" ".join(p.split()) for p in paragraphs).replace("``", "`")


def _sections(cls: type, prefix: str) -> list[str]:
    """Markdown for one dataclass (a table of its settings), then its nested sections."""
    fields = dataclasses.fields(cls)
    docs = field_docs(cls)
    title = f"`{prefix}`" if prefix else "Top level"
    out = [f"## {title}", "", _class_doc(cls), ""]
    leaves = [f for f in fields if not _is_section(f)]
    if leaves:
        out += ["| key | type | default | what it does |", "| --- | --- | --- | --- |"]
        for f in leaves:
            key = f"{prefix}.{f.name}" if prefix else f.name
            cells = [f"`{key}`", f"`{_type_name(f.type)}`", f"`{format_default(_default(f))}`"]
            cells.append(docs.get(f.name, ""))
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        out.append("")
    for f in fields:
        if _is_section(f):
            out += _sections(f.default_factory, f"{prefix}.{f.name}" if prefix else f.name)
    return out


def render(cls: type = Config) -> str:
    """The whole configuration reference as Markdown (the content of docs/configuration.md)."""
    return _INTRO + "\n" + "\n".join(_sections(cls, "")).rstrip() + "\n"


def undocumented(cls: type = Config, prefix: str = "") -> list[str]:
    """Settings (dotted keys) that have no attribute docstring; sections are not counted."""
    docs = field_docs(cls)
    missing = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        if _is_section(f):
            missing += undocumented(f.default_factory, key)
        elif f.name not in docs:
            missing.append(key)
    return missing


def main(argv: list[str] | None = None) -> int:
    """Print the reference, or with ``--check FILE`` say whether FILE is current (exit 1 if not)."""
    parser = argparse.ArgumentParser(prog="python -m webagent_r1.configdoc", description=__doc__)
    parser.add_argument("--check", metavar="FILE", help="compare FILE with the generated page")
    args = parser.parse_args(argv)
    text = render()
    if args.check is None:
        sys.stdout.write(text)
        return 0
    path = Path(args.check)
    if not path.is_file() or path.read_text() != text:
        print(f"{path} is out of date; regenerate it with: {REGENERATE}", file=sys.stderr)
        return 1
    print(f"{path} is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
