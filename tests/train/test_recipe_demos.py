"""The recipe's demonstration stage: what it passes to the expert collection."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from webagent_r1.config import load_config
from webagent_r1.train.recipe import ensure_demos


def test_recipe_demos_run_at_bc_demo_concurrency(tmp_path: Path, monkeypatch) -> None:
    """Not at the rollout's concurrency: experts answer at once, so a context each for a
    whole M-GRPO step (48) would only make browser actions time out."""
    import webagent_r1.demos as demos
    import webagent_r1.policy.hf as hf

    seen: dict[str, int] = {}

    async def fake_collect(tasks, tokenizer, cfg, cot, concurrency, progress):
        seen["concurrency"] = concurrency
        return [], SimpleNamespace(total_kept=0, total_dropped=0, wall_s=0.0, failures=[])

    monkeypatch.setattr(demos, "collect_demos", fake_collect)
    monkeypatch.setattr(demos, "pick_demo_tasks", lambda *a, **k: [])
    monkeypatch.setattr(hf, "load_tokenizer", lambda name: None)
    data = tmp_path / "demos.jsonl"
    cfg = load_config(
        None, [f"bc.data={data}", "rollout.max_concurrent_episodes=48", "bc.demo_concurrency=5"]
    )
    assert ensure_demos(cfg, progress=False) == data
    assert seen == {"concurrency": 5}
    assert data.is_file() and not data.with_suffix(".partial").exists()
