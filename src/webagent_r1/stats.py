"""Statistics of evaluations: intervals, pass@k and paired tests, in one place.

Episodes of one task are not independent (same task, same model: with k samples per task they
succeed or fail together far more often than chance), so:

- with one episode per task, a success rate gets the Wilson score interval;
- with k > 1 episodes per task, it gets a percentile bootstrap over **tasks**: a task's
  episodes are resampled together (a cluster bootstrap), so the interval widens with the
  correlation instead of pretending k times as many independent trials;
- pass@k is the unbiased estimator ``1 - C(n-c, k) / C(n, k)`` per task (n scored episodes,
  c successes), averaged over tasks.

Every random draw is seeded: the same outcomes always give the same interval.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence

import numpy as np

__all__ = [
    "BOOTSTRAP_REPS",
    "EXACT_PERMUTATION_MAX",
    "PERMUTATION_REPS",
    "bootstrap_interval",
    "hierarchical_bootstrap_interval",
    "pass_at_k",
    "pass_at_k_task",
    "run_spread_p",
    "sign_flip_p",
    "sign_test_p",
    "success_interval",
    "task_bootstrap_interval",
    "wilson_interval",
]

BOOTSTRAP_REPS = 10_000
"""Resamples of a bootstrap interval."""
PERMUTATION_REPS = 20_000
"""Random sign patterns of the sign-flip test when it cannot enumerate them all."""
EXACT_PERMUTATION_MAX = 16
"""Up to this many non-zero task differences the sign-flip test enumerates every pattern."""


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (95% for z = 1.96); (0, 1) when n = 0.

    Unlike the normal approximation it stays inside [0, 1] and is sensible at 0/n and n/n,
    which small evaluations hit often.
    """
    if n <= 0:
        return (0.0, 1.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n], got {successes} of {n}")
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return (lo, hi)


def _percentiles(stats: np.ndarray) -> tuple[float, float]:
    """The 2.5% and 97.5% points of bootstrap statistics (order statistics, no interpolation)."""
    stats = np.sort(stats)
    reps = len(stats)
    return float(stats[int(0.025 * (reps - 1))]), float(stats[math.ceil(0.975 * (reps - 1))])


def _resampled_ratios(
    num: Sequence[float], den: Sequence[float], seed: int, reps: int
) -> np.ndarray:
    """``sum(num[i]) / sum(den[i])`` over ``reps`` seeded resamples of the indices with
    replacement (chunked: a resample is len(num) indices)."""
    num_a = np.asarray(num, dtype=np.float64)  # [m]
    den_a = np.asarray(den, dtype=np.float64)  # [m]
    m = len(num_a)
    rng = np.random.default_rng(seed)
    out = np.empty(reps, dtype=np.float64)  # [reps]
    chunk = max(1, 2_000_000 // m)
    for start in range(0, reps, chunk):
        stop = min(reps, start + chunk)
        idx = rng.integers(0, m, size=(stop - start, m))  # [chunk, m]
        out[start:stop] = num_a[idx].sum(axis=1) / den_a[idx].sum(axis=1)
    return out


def bootstrap_interval(
    diffs: Sequence[float], seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> tuple[float, float]:
    """95% percentile interval of ``mean(diffs)`` over tasks resampled with replacement
    (``diffs`` holds one value per task, e.g. B's success minus A's); (0, 0) when empty."""
    if len(diffs) == 0:
        return (0.0, 0.0)
    return _percentiles(_resampled_ratios(diffs, [1.0] * len(diffs), seed, reps))


def hierarchical_bootstrap_interval(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    seed: int = 0,
    reps: int = BOOTSTRAP_REPS,
    resample_runs: bool = True,
) -> tuple[float, float]:
    """95% interval of the difference of two arms of training runs on the same tasks.

    ``a[i][t]`` is run ``i``'s success rate on task ``t`` (its episodes' mean); ``b`` the same
    for the other arm, same tasks in the same order. The statistic is
    ``mean_t(mean_j b[j][t] - mean_i a[i][t])``. Each resample draws the runs of each arm with
    replacement (when ``resample_runs``) and the tasks with replacement, the same tasks for both
    arms (paired). With one run per arm and ``resample_runs`` off it is the paired task
    bootstrap. With few runs the run draw has few distinct outcomes (3 runs: 10), so the
    interval is rough; more runs tighten it. Simulated on 60 tasks of 4 episodes with a run
    effect of SD 0.04, it held the true difference 92% of the time with 2 runs and 97% with
    3-8 (docs/evaluation.md).

    Raises:
        ValueError: an arm with no run, or runs with another number of tasks.
    """
    if not len(a) or not len(b):
        raise ValueError("each arm needs at least one run of per-task success rates")
    widths = {len(r) for r in [*a, *b]}
    if len(widths) != 1 or 0 in widths:
        raise ValueError(f"every run needs the same tasks: runs of {sorted(widths)} tasks")
    a_m = np.asarray(a, dtype=np.float64)  # [runs_a, T]
    b_m = np.asarray(b, dtype=np.float64)  # [runs_b, T]
    n_t = a_m.shape[1]
    rng = np.random.default_rng(seed)
    out = np.empty(reps, dtype=np.float64)  # [reps]
    chunk = max(1, 2_000_000 // n_t)
    for start in range(0, reps, chunk):
        c = min(reps, start + chunk) - start
        arms = []
        for m in (a_m, b_m):
            if resample_runs:
                w = rng.multinomial(len(m), [1.0 / len(m)] * len(m), size=c) / len(m)  # [c, runs]
            else:
                w = np.full((c, len(m)), 1.0 / len(m))  # [c, runs]
            arms.append(w @ m)  # [c, T]: the arm's per-task rate in each resample
        counts = rng.multinomial(n_t, [1.0 / n_t] * n_t, size=c)  # [c, T]
        out[start : start + c] = ((arms[1] - arms[0]) * counts).sum(axis=1) / n_t
    return _percentiles(out)


def run_spread_p(
    runs: Sequence[Sequence[Sequence[int]]], seed: int = 0, reps: int = PERMUTATION_REPS
) -> float:
    """Permutation p-value of "these runs are one policy": is the spread of their success rates
    more than the sampling of their evaluation episodes gives?

    ``runs[j][t]`` holds run ``j``'s outcomes (1/0) on task ``t``, the same tasks for every run,
    at least one episode each. A run's success is ``R_j = mean_t(successes_jt / n_jt)`` (tasks
    weighted equally, as the arms' successes are) and the statistic is
    ``sum_j (R_j - mean R)^2``. Under the null each task's episodes are exchangeable between
    the runs: a resample shuffles a task's pooled episodes and deals them back in the same
    numbers. Seeded; the observed split counts as one resample, so p > 0.

    Raises:
        ValueError: fewer than two runs, runs with another number of tasks, or a run with no
            episode of a task.
    """
    if len(runs) < 2:
        raise ValueError("the spread of runs needs at least two runs")
    n_t = len(runs[0])
    if n_t == 0 or any(len(r) != n_t for r in runs):
        raise ValueError("every run needs outcomes on the same tasks")
    if any(len(r[t]) == 0 for r in runs for t in range(n_t)):
        raise ValueError("every run needs at least one episode of each task")

    def stat(rate: np.ndarray) -> np.ndarray:  # rate: [..., runs] → [...]
        return ((rate - rate.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)

    observed = stat(np.array([sum(sum(r[t]) / len(r[t]) for t in range(n_t)) / n_t for r in runs]))
    rng = np.random.default_rng(seed)
    rate = np.zeros((reps, len(runs)), dtype=np.float64)  # [reps, runs]
    for t in range(n_t):
        pooled = np.concatenate([np.asarray(r[t], dtype=np.float64) for r in runs])  # [E]
        counts = np.array([len(r[t]) for r in runs], dtype=np.float64)  # [runs]
        order = np.argsort(rng.random((reps, len(pooled))), axis=1)  # [reps, E]
        cum = np.concatenate(
            [np.zeros((reps, 1)), np.cumsum(pooled[order], axis=1)], axis=1
        )  # [reps, E + 1]
        edges = np.concatenate([[0], np.cumsum(counts).astype(int)])  # [runs + 1]
        rate += (cum[:, edges[1:]] - cum[:, edges[:-1]]) / counts / n_t
    tol = 1e-9 * max(1e-6, float(observed))
    hits = int((stat(rate) >= observed - tol).sum()) + 1
    return hits / (reps + 1)


def task_bootstrap_interval(
    per_task: Sequence[tuple[int, int]], seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> tuple[float, float]:
    """95% interval of a pooled success rate (all successes / all episodes) by a bootstrap
    over tasks: each resample draws tasks with replacement, each with all its episodes.

    Args:
        per_task: ``(successes, scored episodes)`` of each task; tasks with no scored episode
            carry no information and are left out.
        seed: seed of the resampling.
        reps: number of resamples.

    Returns:
        ``(lo, hi)``. When every scored episode has the same outcome the bootstrap has no
        spread; the interval is then the Wilson interval with one trial per task (the
        fewest independent trials the episodes can be worth), never a zero-width one.
        (0, 1) when there is no scored episode.
    """
    clusters = [(s, n) for s, n in per_task if n > 0]
    if any(not 0 <= s <= n for s, n in clusters):
        raise ValueError(f"each task needs 0 <= successes <= episodes, got {clusters}")
    total_s = sum(s for s, _ in clusters)
    total_n = sum(n for _, n in clusters)
    if total_n == 0:
        return (0.0, 1.0)
    if total_s in (0, total_n):
        return wilson_interval(len(clusters) if total_s else 0, len(clusters))
    num = [float(c) for c, _ in clusters]
    den = [float(n) for _, n in clusters]
    return _percentiles(_resampled_ratios(num, den, seed, reps))


def success_interval(
    per_task: Sequence[tuple[int, int]], seed: int = 0, reps: int = BOOTSTRAP_REPS
) -> tuple[tuple[float, float], str]:
    """The 95% interval of a pooled success rate and how it was made.

    Wilson over episodes when no task has more than one scored episode (independent
    trials), else the bootstrap over tasks (``task_bootstrap_interval``).

    Returns:
        ``((lo, hi), method)`` with method ``"wilson"`` or ``"task-bootstrap"``.
    """
    if all(n <= 1 for _, n in per_task):
        ok = sum(s for s, _ in per_task)
        return wilson_interval(ok, sum(n for _, n in per_task)), "wilson"
    return task_bootstrap_interval(per_task, seed, reps), "task-bootstrap"


def pass_at_k_task(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task: the chance that k of its n episodes, drawn without
    replacement, hold at least one of its c successes, ``1 - C(n-c, k) / C(n, k)``.

    Raises:
        ValueError: k < 1, n < k, or c outside [0, n].
    """
    if k < 1 or n < k:
        raise ValueError(f"pass@k needs 1 <= k <= n episodes, got k={k}, n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"successes must be in [0, n], got {c} of {n}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k(per_task: Mapping[str, Sequence[int]], k: int) -> tuple[float, int, list[str]]:
    """pass@k averaged over the tasks with a scored episode.

    Args:
        per_task: ``task_id -> [1 or 0 per scored episode]``; a task with an empty list had no
            scored episode (all env errors).
        k: the k of pass@k (the episodes sampled per task).

    Returns:
        ``(pass_at_k, short, unscored)``: the mean over scored tasks (0 when none); how many of
        them had fewer than k scored episodes (those count pass@n with their n, a lower
        bound of their pass@k, since env errors took the rest); the ids of the tasks with no
        scored episode, left out of the mean and reported.
    """
    scores, short, unscored = [], 0, []
    for task, outs in per_task.items():
        n = len(outs)
        if n == 0:
            unscored.append(task)
            continue
        short += n < k
        scores.append(pass_at_k_task(n, sum(outs), min(k, n)))
    return (sum(scores) / len(scores) if scores else 0.0), short, sorted(unscored)


def sign_test_p(better: int, worse: int) -> float:
    """Exact two-sided sign test: P(a split at least this uneven | each side p = 1/2)."""
    n = better + worse
    if n == 0:
        return 1.0
    k = min(better, worse)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def sign_flip_p(diffs: Sequence[float], seed: int = 0) -> float:
    """Two-sided sign-flip permutation test of ``mean(diffs)`` against 0.

    Exact over all sign patterns of the non-zero differences when there are at most
    ``EXACT_PERMUTATION_MAX`` of them, else ``PERMUTATION_REPS`` seeded random patterns (with
    the observed pattern counted, so p > 0).
    """
    nz = [abs(d) for d in diffs if d != 0]
    if not nz:
        return 1.0
    observed = abs(sum(d for d in diffs if d != 0))
    tol = 1e-9 * max(1.0, observed)
    if len(nz) <= EXACT_PERMUTATION_MAX:
        hits = total = 0
        for signs in itertools.product((1, -1), repeat=len(nz)):
            total += 1
            hits += abs(sum(s * d for s, d in zip(signs, nz, strict=True))) >= observed - tol
        return hits / total
    rng = random.Random(seed)
    hits = 1  # the observed pattern
    for _ in range(PERMUTATION_REPS):
        s = sum(d if rng.random() < 0.5 else -d for d in nz)
        hits += abs(s) >= observed - tol
    return hits / (PERMUTATION_REPS + 1)
