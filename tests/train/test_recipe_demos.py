"""The recipe's demonstration stage: what it passes to the expert collection."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from webagent_r1.config import load_config
from webagent_r1.train.recipe import ensure_demos


@pytest.mark.parametrize(("setting", "want"), [("5", 5), ("null", 48)])
def test_recipe_demos_run_at_bc_demo_concurrency(
    tmp_path: Path, monkeypatch, setting: str, want: int
) -> None:
    """bc.demo_concurrency, else the rollout's: experts answer at once, so a context each
    for a whole M-GRPO step (48) can make browser actions time out on a small machine."""
    import webagent_r1.policy.hf as hf
    import webagent_r1.train.recipe as recipe

    seen: dict[str, object] = {}
    tokenizer_stub = object()

    async def fake_collect(tasks, tokenizer, cfg, cot, concurrency, progress):
        seen["concurrency"] = concurrency
        seen["tokenizer"] = tokenizer
        return [], SimpleNamespace(total_kept=0, total_dropped=0, wall_s=0.0, failures=[])

    monkeypatch.setattr(recipe, "collect_demos", fake_collect)
    monkeypatch.setattr(recipe, "pick_demo_tasks", lambda *a, **k: [])
    monkeypatch.setattr(hf, "load_tokenizer", lambda name: tokenizer_stub)
    data = tmp_path / "demos.jsonl"
    cfg = load_config(
        None,
        [f"bc.data={data}", "rollout.max_concurrent_episodes=48", f"bc.demo_concurrency={setting}"],
    )
    assert ensure_demos(cfg, progress=False) == data
    assert seen == {"concurrency": want, "tokenizer": tokenizer_stub}
    assert data.is_file() and not data.with_suffix(".partial").exists()
