"""pass@k of the in-training evaluation: the unbiased estimator, unscored tasks counted."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from webagent_r1.train.dist import Dist
from webagent_r1.train.rl import _merge_pass_at_k


def report(rows: list[tuple[str, str, float]]) -> SimpleNamespace:
    """(task_id, status, reward) per episode."""
    tasks = [SimpleNamespace(task_id=t) for t, _, _ in rows]
    trajs = [SimpleNamespace(status=s, reward=r) for _, s, r in rows]
    return SimpleNamespace(tasks=tasks, trajectories=trajs)


def test_pass_at_2_by_hand() -> None:
    rows = [
        ("a", "done", 1.0), ("a", "done", 0.0),  # pass@2 = 1
        ("b", "done", 0.0), ("b", "done", 0.0),  # 0
        ("c", "done", 1.0), ("c", "env_error", 0.0),  # one scored episode: pass@1 = 1
        ("d", "env_error", 0.0), ("d", "env_error", 0.0),  # unscored: counted, not averaged
    ]  # fmt: skip
    m = _merge_pass_at_k(report(rows), Dist(), 2)
    assert m["eval/pass_at_2"] == pytest.approx(2 / 3)
    assert m["eval/unscored_tasks"] == 1


def test_pass_at_2_of_three_samples_is_unbiased() -> None:
    # 1 success in 3 episodes: 1 - C(2, 2) / C(3, 2) = 2/3 (not 1, as "any success" would say)
    rows = [("a", "done", 1.0), ("a", "done", 0.0), ("a", "done", 0.0)]
    assert _merge_pass_at_k(report(rows), Dist(), 2)["eval/pass_at_2"] == pytest.approx(2 / 3)
