"""Statistics of evaluations (``webagent_r1.stats``), against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from webagent_r1.stats import (
    bootstrap_interval,
    hierarchical_bootstrap_interval,
    pass_at_k,
    pass_at_k_task,
    run_spread_p,
    sign_flip_p,
    sign_test_p,
    success_interval,
    task_bootstrap_interval,
    wilson_interval,
)


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_interval(5, 10)  # the textbook case: 0.5 of 10 -> [0.2366, 0.7634]
    assert lo == pytest.approx(0.23659, abs=1e-4) and hi == pytest.approx(0.76341, abs=1e-4)
    lo, hi = wilson_interval(0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-4)
    lo, hi = wilson_interval(10, 10)
    assert lo == pytest.approx(0.72247, abs=1e-4) and hi == 1.0
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_sign_test_hand_values() -> None:
    assert sign_test_p(0, 0) == 1.0
    assert sign_test_p(5, 0) == pytest.approx(2 / 32)
    assert sign_test_p(1, 1) == 1.0
    # 13 better, 6 worse: 2 * sum_{i<=6} C(19, i) / 2^19 = 2 * 43796 / 524288
    assert sign_test_p(13, 6) == pytest.approx(2 * 43796 / 2**19)
    assert sign_test_p(6, 13) == sign_test_p(13, 6)


def test_sign_flip_exact_and_sampled() -> None:
    # 3 x +1: only all-plus and all-minus reach |sum| = 3 → 2 / 8
    assert sign_flip_p([1, 1, 1, 0]) == pytest.approx(0.25)
    # |±0.5 ±0.25 ±1| >= 1.25 for 4 of the 8 patterns (1.75, 1.25 and their negatives)
    assert sign_flip_p([0.5, -0.25, 0, 1]) == pytest.approx(0.5)
    assert sign_flip_p([0, 0]) == 1.0
    # thirds are not exact in binary: ties must still count. Of the 64 patterns of
    # ±1/3 x4 ±2/3 x2 (observed sum 1/3), |sum| < 1/3 only at sum 0: 14 patterns → 50/64
    assert sign_flip_p([1 / 3, 1 / 3, 1 / 3, -2 / 3, 2 / 3, -1 / 3]) == pytest.approx(50 / 64)
    # 20 non-zero differences: sampled patterns; exact p would be 2 / 2^20
    p = sign_flip_p([1.0] * 20, seed=3)
    assert 0 < p < 1e-3
    assert p == sign_flip_p([1.0] * 20, seed=3)


def test_bootstrap_interval() -> None:
    assert bootstrap_interval([0.25] * 7) == (0.25, 0.25)
    diffs = [1.0, 0.0, 0.0, -0.5, 0.5, 0.0, 1.0, 0.0]
    lo, hi = bootstrap_interval(diffs, seed=1)
    assert (lo, hi) == bootstrap_interval(diffs, seed=1)
    # against the normal approximation: mean 0.25, sd 0.5, se = 0.5 / sqrt(8) = 0.177
    se = 0.5 / math.sqrt(8)
    assert lo == pytest.approx(0.25 - 1.96 * se, abs=0.07)
    assert hi == pytest.approx(0.25 + 1.96 * se, abs=0.07)
    # not the extremes of the resampled means (-0.5 and 1.0 are reachable)
    assert lo > -0.2 and hi < 0.7


def test_pass_at_k_task_hand_values() -> None:
    assert pass_at_k_task(4, 1, 2) == pytest.approx(1 - 3 / 6)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k_task(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert pass_at_k_task(5, 0, 3) == 0.0
    assert pass_at_k_task(3, 1, 3) == 1.0  # n = k: any success
    assert pass_at_k_task(4, 2, 1) == pytest.approx(0.5)  # pass@1 = c / n
    for bad in ((2, 1, 3), (3, 4, 2), (3, 1, 0)):
        with pytest.raises(ValueError):
            pass_at_k_task(*bad)


def test_pass_at_k_reports_short_and_unscored_tasks() -> None:
    outs = {"a": [1, 0, 0, 0], "b": [0, 1], "c": [], "d": [0, 0]}
    # a: 0.5, b: 1, d: 0; c has no scored episode: listed, not averaged
    assert pass_at_k(outs, 2) == (pytest.approx(0.5), 0, ["c"])
    # k = 4: a is 1 (n = k); b and d have 2 of 4 (env errors): pass@2, a lower bound
    assert pass_at_k(outs, 4) == (pytest.approx(2 / 3), 2, ["c"])
    assert pass_at_k({"c": []}, 2) == (0.0, 0, ["c"])


def test_task_bootstrap_two_tasks_by_hand() -> None:
    # Tasks (1 of 2) and (0 of 2): a resample is {a,a} → 2/4 (p 1/4), {a,b} → 1/4 (p 1/2),
    # {b,b} → 0 (p 1/4); the 2.5% point is 0 and the 97.5% point 0.5.
    assert task_bootstrap_interval([(1, 2), (0, 2)]) == (0.0, 0.5)


def test_task_bootstrap_is_wider_than_wilson_when_samples_agree() -> None:
    # 10 tasks, 2 samples each, the samples of a task always agree: 5 tasks 2/2, 5 tasks 0/2.
    # Resampled rate = X / 10 with X ~ Binomial(10, 1/2): P(X <= 1) = 0.011 and
    # P(X <= 2) = 0.055, so the 2.5% point is 0.2; symmetrically the 97.5% point is 0.8.
    clusters = [(2, 2)] * 5 + [(0, 2)] * 5
    assert task_bootstrap_interval(clusters, seed=4) == (0.2, 0.8)
    # Wilson over the 20 episodes as if independent: [0.299, 0.701], too narrow.
    lo, hi = wilson_interval(10, 20)
    assert lo == pytest.approx(0.2993, abs=1e-4) and hi == pytest.approx(0.7007, abs=1e-4)
    assert task_bootstrap_interval(clusters) == task_bootstrap_interval(clusters)  # seeded


def test_task_bootstrap_never_collapses_at_all_or_nothing() -> None:
    # Every episode a success: no bootstrap spread; Wilson with one trial per task (3 of 3).
    lo, hi = task_bootstrap_interval([(2, 2), (3, 3), (2, 2)])
    assert lo == pytest.approx(0.4385, abs=1e-4) and hi == 1.0
    assert task_bootstrap_interval([(0, 2), (0, 2)]) == wilson_interval(0, 2)
    assert task_bootstrap_interval([(0, 0)]) == (0.0, 1.0)  # nothing scored
    with pytest.raises(ValueError):
        task_bootstrap_interval([(3, 2)])


def test_success_interval_picks_the_method() -> None:
    assert success_interval([(1, 1), (0, 1), (1, 1)]) == (wilson_interval(2, 3), "wilson")
    # a task whose only other episode was an env error still counts once
    assert success_interval([(1, 1), (0, 0)])[1] == "wilson"
    assert success_interval([(1, 2), (0, 2)]) == ((0.0, 0.5), "task-bootstrap")


def test_hierarchical_bootstrap_hand_values() -> None:
    # B's two runs: every task solved, or none. Tasks alike, so only the run draw varies: the
    # arm's rate is 1 (both draws run 1, p 1/4), 0 (1/4) or 1/2 (1/2); minus A's 1/2.
    assert hierarchical_bootstrap_interval([[0.5] * 4], [[1.0] * 4, [0.0] * 4]) == (-0.5, 0.5)
    # ... and with the runs held fixed the difference is 0 in every task draw
    fixed = hierarchical_bootstrap_interval(
        [[0.5] * 4], [[1.0] * 4, [0.0] * 4], resample_runs=False
    )
    assert fixed == (0.0, 0.0)
    # one run each, task differences 1 and 0: the mean of two task draws is 0, 1/2 or 1
    assert hierarchical_bootstrap_interval([[0.0, 0.0]], [[1.0, 0.0]]) == (0.0, 1.0)
    # every task moved by 0.3 in every run: no spread at all
    lo, hi = hierarchical_bootstrap_interval([[0.1, 0.2]], [[0.4, 0.5], [0.4, 0.5]])
    assert lo == pytest.approx(0.3) and hi == pytest.approx(0.3)
    with pytest.raises(ValueError, match="same tasks"):
        hierarchical_bootstrap_interval([[0.1, 0.2]], [[0.4]])
    with pytest.raises(ValueError, match="same tasks"):
        hierarchical_bootstrap_interval([[0.1, 0.2]], [[0.4, 0.5], [0.4]])
    with pytest.raises(ValueError, match="at least one run"):
        hierarchical_bootstrap_interval([], [[0.4]])


def test_run_spread_p_hand_values() -> None:
    # one task, run 1 [1, 1], run 2 [0, 0]: of the 6 equally likely deals of the two
    # successes, 2 are as uneven (both to one run) → p = 1/3
    assert run_spread_p([[[1, 1]], [[0, 0]]], reps=20_000) == pytest.approx(1 / 3, abs=0.01)
    # equal runs: every deal is at least as uneven as the observed one (0) → p = 1
    assert run_spread_p([[[1, 0]], [[0, 1]]]) == 1.0
    # all alike: nothing to deal
    assert run_spread_p([[[1, 1], [0]], [[1, 1], [0]], [[1], [0, 0]]]) == 1.0
    # 20 tasks of 4 episodes, one run solving all, the other none: far beyond sampling
    assert run_spread_p([[[1] * 4] * 20, [[0] * 4] * 20], reps=2_000) == pytest.approx(1 / 2001)
    # tasks weigh the same whatever their episodes: run 1 solves the 10-episode task, run 2
    # the 1-episode one, each at 1/2 over tasks → no spread to explain → p = 1
    assert run_spread_p([[[1] * 10, [0]], [[0] * 10, [1]]]) == 1.0
    with pytest.raises(ValueError, match="two runs"):
        run_spread_p([[[1]]])
    with pytest.raises(ValueError, match="at least one episode"):
        run_spread_p([[[1], []], [[1], [0]]])
    with pytest.raises(ValueError, match="same tasks"):
        run_spread_p([[[1], [0]], [[1]]])


def test_run_spread_p_holds_its_level_and_finds_a_real_spread() -> None:
    # two runs of one policy (the same per-task rates): p < 0.05 about 5% of the time or less
    rng = np.random.default_rng(7)
    rates = rng.uniform(0.0, 0.6, size=30)

    def runs(shift: float) -> list[list[list[int]]]:
        return [
            [list((rng.random(4) < min(1.0, p + shift * j)).astype(int)) for p in rates]
            for j in range(2)
        ]

    null = [run_spread_p(runs(0.0), seed=i, reps=1000) for i in range(150)]
    assert sum(p < 0.05 for p in null) / len(null) <= 0.09
    # the second run 0.3 better on every task: found nearly every time
    real = [run_spread_p(runs(0.3), seed=i, reps=1000) for i in range(30)]
    assert sum(p < 0.05 for p in real) / len(real) >= 0.8
