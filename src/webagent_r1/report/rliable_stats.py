"""Arms of runs by the statistics RL papers use: rliable's stratified bootstrap, the probability
of improvement, and Holm's correction over every comparison of a plan.

rliable ("Deep RL at the edge of the statistical precipice", Agarwal et al., 2021) takes a score
matrix ``[runs, tasks]`` per arm; here a score is a run's success rate on a task (its episodes'
mean). Its **stratified bootstrap** resamples the runs *within each task* (a task is a
stratum) and, with ``task_bootstrap``, the tasks too. For the difference of two arms the two
matrices are stacked into one ``[runs, tasks, 2]`` array, so that one resample draws the same
tasks for both arms (paired, as ``compare-arms`` pairs them) and each arm's runs independently
per task. That needs the same number of runs in both arms; an arm of one run is repeated to the
other's count (resampling among copies of one run is resampling that run), and with other
unequal counts rliable's independent-samples bootstrap is used: runs resampled, tasks held.

``compare-arms`` (``report/arms.py``) resamples whole runs, then the tasks: a run stays one
run across tasks. rliable's strata let a resample take task 1 from run 0 and task 2 from run 1.
Both keep the point estimate (the mean over tasks of each arm's mean over runs); the intervals
differ by that much (``docs/experiments.md`` gives the numbers on published files).

rliable draws from numpy's global generator; each call here seeds it and puts it back.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "arm_interval",
    "holm",
    "poi_interval",
    "probability_of_improvement",
    "stratified_diff_interval",
]

RLIABLE_REPS = 2000
"""Resamples of an rliable interval (its default, 50,000, takes minutes per comparison)."""


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """numpy's global generator seeded with ``seed`` inside, restored after."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _interval(ci: np.ndarray) -> tuple[float, float]:
    """rliable's ``[2, 1]`` interval as ``(lo, hi)``."""
    flat = np.asarray(ci, dtype=np.float64).reshape(2, -1)
    return float(flat[0, 0]), float(flat[1, 0])


def _rliable() -> Any:
    """rliable's ``library`` module, imported on first use (it imports scipy, arch and pandas;
    only the experiment's results page needs it).

    rliable imports absl, whose logging handler keeps the ``sys.stderr`` of that moment and,
    when ``logging.config`` shuts every handler down (uvicorn does, each time the embedded
    sites start), closes it unless it is the process's own. Under a redirected stderr (a test
    runner's capture, a notebook) that closed someone else's stream; it is pointed at the
    process's own stderr, which it never closes and nothing logs through it otherwise.
    """
    # heavy: rliable imports scipy, arch and pandas
    from rliable import library as rly

    with contextlib.suppress(ImportError, AttributeError):
        # heavy: absl comes with rliable (imported just above), only for its handler
        import absl.logging

        absl.logging.get_absl_handler().python_handler.stream = sys.__stderr__
    return rly


def _estimate(
    scores: np.ndarray | tuple[np.ndarray, ...],
    func: Callable[..., np.ndarray],
    task_bootstrap: bool,
    seed: int,
    reps: int,
) -> tuple[float, tuple[float, float]]:
    rly = _rliable()
    with _seeded(seed):
        point, ci = rly.get_interval_estimates(
            {"x": scores}, func, task_bootstrap=task_bootstrap, reps=reps
        )
    return float(np.asarray(point["x"]).reshape(-1)[0]), _interval(ci["x"])


def _matrix(runs: Sequence[Sequence[float]]) -> np.ndarray:
    m = np.asarray(runs, dtype=np.float64)  # [runs, T]
    if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0:
        raise ValueError("scores need at least one run of at least one task: [runs][tasks]")
    return m


def arm_interval(
    runs: Sequence[Sequence[float]], seed: int = 0, reps: int = RLIABLE_REPS
) -> tuple[float, tuple[float, float]]:
    """An arm's success (mean over runs and tasks) and rliable's 95% stratified bootstrap
    interval over runs and tasks. ``runs[i][t]``: run i's success rate on task t."""
    m = _matrix(runs)
    return _estimate(m, lambda x: np.array([x.mean()]), True, seed, reps)


def stratified_diff_interval(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    seed: int = 0,
    reps: int = RLIABLE_REPS,
) -> tuple[float, tuple[float, float], str]:
    """``mean(b) - mean(a)`` with rliable's 95% stratified bootstrap interval.

    Returns:
        ``(diff, (lo, hi), method)``: method ``"runs and tasks"`` (stacked, tasks paired) or
        ``"runs"`` (unequal run counts of two or more: tasks held fixed).

    Raises:
        ValueError: an arm without runs, or arms of different tasks.
    """
    a_m, b_m = _matrix(a), _matrix(b)
    if a_m.shape[1] != b_m.shape[1]:
        raise ValueError(f"both arms need the same tasks: {a_m.shape[1]} and {b_m.shape[1]}")
    if len(a_m) != len(b_m) and 1 in (len(a_m), len(b_m)):
        n = max(len(a_m), len(b_m))
        a_m, b_m = (np.repeat(m, n, axis=0) if len(m) == 1 else m for m in (a_m, b_m))
    if len(a_m) == len(b_m):
        stacked = np.stack([a_m, b_m], axis=-1)  # [runs, T, 2]
        diff, ci = _estimate(
            stacked, lambda x: np.array([x[..., 1].mean() - x[..., 0].mean()]), True, seed, reps
        )
        return diff, ci, "runs and tasks"
    diff, ci = _estimate(
        (b_m, a_m), lambda y, x: np.array([y.mean() - x.mean()]), False, seed, reps
    )
    return diff, ci, "runs"


def probability_of_improvement(
    b: Sequence[Sequence[float]] | np.ndarray, a: Sequence[Sequence[float]] | np.ndarray
) -> float:
    """P(B > A): per task, the chance that a run of B scores above a run of A (ties count a
    half: the Mann-Whitney U statistic over ``runs_b * runs_a``), averaged over tasks.

    The same number as ``rliable.metrics.probability_of_improvement(b, a)``, vectorised: that
    one calls scipy once per task, too slow inside a bootstrap of thousands of resamples.
    """
    b_m = np.asarray(b, dtype=np.float64)  # [runs_b, T]
    a_m = np.asarray(a, dtype=np.float64)  # [runs_a, T]
    gt = (b_m[:, None, :] > a_m[None, :, :]).mean(axis=(0, 1))  # [T]
    eq = (b_m[:, None, :] == a_m[None, :, :]).mean(axis=(0, 1))  # [T]
    return float((gt + 0.5 * eq).mean())


def poi_interval(
    a: Sequence[Sequence[float]],
    b: Sequence[Sequence[float]],
    seed: int = 0,
    reps: int = RLIABLE_REPS,
) -> tuple[float, tuple[float, float]]:
    """P(B > A) and its 95% interval by rliable's stratified independent bootstrap (each
    arm's runs resampled within each task, tasks held), as the rliable paper reports it."""
    a_m, b_m = _matrix(a), _matrix(b)
    return _estimate(
        (b_m, a_m),
        lambda y, x: np.array([probability_of_improvement(y, x)]),
        False,
        seed,
        reps,
    )


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (statsmodels ``multipletests(method="holm")``), same order.

    Holm: sort the m p-values, multiply the k-th smallest by ``m - k + 1``, make the sequence
    non-decreasing and cap it at 1. It controls the chance of any false claim among the m
    comparisons, whatever their dependence.
    """
    if not pvalues:
        return []
    # heavy: statsmodels imports scipy and pandas; only the experiment's results page needs it
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(list(pvalues), method="holm")[1]]
