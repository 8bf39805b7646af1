"""The fake runs of these tests compute in one made-up precision unless a test says otherwise:
resolving the real one would time the model's layers."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fake_numerics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        "webagent_r1.experiment.run.recipe_numerics",
        lambda cfg: {"numerics": "cpu, float32", "machine": "test CPU"},
    )
