"""Markdown pieces shared by the report pages (``build``, ``compare``, ``paired``)."""

from __future__ import annotations

__all__ = ["MISSING", "ci_str", "duration", "md_table", "pct"]

MISSING = "–"
"""What a table cell shows for a value that is not known."""


def pct(x: float | None) -> str:
    """A rate as a percentage with one decimal (``MISSING`` when unknown)."""
    return MISSING if x is None else f"{100 * x:.1f}"


def ci_str(ci: tuple[float, float] | None) -> str:
    """An interval of rates as ``[lo, hi]`` in percent (``MISSING`` when unknown)."""
    return MISSING if ci is None else f"[{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]"


def duration(s: float | None) -> str:
    """Seconds as ``12.3 s``, ``4m 05s`` or ``1h 02m`` (``MISSING`` when unknown)."""
    if s is None:
        return MISSING
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m}m {sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m"


def md_table(header: list[str], body: list[list[str]]) -> list[str]:
    """The lines of a markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return lines
