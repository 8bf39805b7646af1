"""Fixtures of the trainer tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.tiny import make_tiny_model


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama and its tokenizer, saved once per test module."""
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
