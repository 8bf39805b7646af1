"""docs/configuration.md is generated from the config dataclasses and must be current."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from webagent_r1 import configdoc
from webagent_r1.config import Config

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


@dataclass
class _Inner:
    """An inner section.

    More text that is
    not part of the summary.
    """

    names: list[str] = field(default_factory=lambda: ["a", "b"])
    """Names, with a | pipe."""


@dataclass
class _Outer:
    """The outer config."""

    rate: float = 2e-5
    """A rate that takes
    two lines to say."""
    path: str | None = None
    undocumented_flag: bool = True
    inner: _Inner = field(default_factory=_Inner)


def test_configuration_md_is_current() -> None:
    assert DOC.is_file(), f"docs/configuration.md is missing: run `{configdoc.REGENERATE}`"
    assert DOC.read_text() == configdoc.render(), (
        f"docs/configuration.md is out of date: run `{configdoc.REGENERATE}`"
    )


def test_every_setting_has_a_docstring() -> None:
    assert configdoc.undocumented(Config) == []


def test_field_docs_reads_attribute_docstrings_from_source() -> None:
    docs = configdoc.field_docs(_Outer)
    assert docs == {"rate": "A rate that takes two lines to say."}
    assert configdoc.undocumented(_Outer) == ["path", "undocumented_flag"]


def test_render_tables_defaults_and_nested_sections() -> None:
    text = configdoc.render(_Outer)
    assert "| `rate` | `float` | `2e-05` | A rate that takes two lines to say. |" in text
    assert "| `path` | `str \\| None` | `null` |  |" in text
    assert "| `undocumented_flag` | `bool` | `true` |" in text
    # a nested dataclass is its own section, with its docstring, one line a paragraph
    assert "## `inner`\n\nAn inner section.\n\nMore text that is not part of the summary.\n" in text
    assert '| `inner.names` | `list[str]` | `["a", "b"]` | Names, with a \\| pipe. |' in text
    assert text.index("## Top level") < text.index("## `inner`")


def test_check_reports_a_stale_file(tmp_path, capsys) -> None:
    stale = tmp_path / "configuration.md"
    stale.write_text("# old\n")
    assert configdoc.main(["--check", str(stale)]) == 1
    assert configdoc.REGENERATE in capsys.readouterr().err
    stale.write_text(configdoc.render())
    assert configdoc.main(["--check", str(stale)]) == 0
