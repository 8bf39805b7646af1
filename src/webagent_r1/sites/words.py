"""Search words of the sites' search boxes: a crude English singular, so that a query
matches singular and plural alike (``batteries`` finds ``battery``)."""

from __future__ import annotations

import re


def singular(word: str) -> str:
    """A rough English singular: ``stories`` -> ``story``, ``boxes`` -> ``box``, ``mugs`` ->
    ``mug`` (short words and ``-ss`` endings stay as they are)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def search_words(text: str) -> tuple[str, ...]:
    """The singular words of ``text``: its runs of lower-case letters and digits."""
    return tuple(singular(t) for t in re.findall(r"[a-z0-9]+", text.lower()))
