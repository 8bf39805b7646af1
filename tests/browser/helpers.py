"""Small helpers shared by the browser tests."""

from __future__ import annotations

import re


def element_id(text: str, name: str) -> str:
    """The id of the element called ``name`` in a compact observation."""
    m = re.search(r"^\[(\d+)\] [a-z]+ \"" + re.escape(name), text, re.MULTILINE)
    assert m, f"no element named {name!r} in:\n{text}"
    return m.group(1)
