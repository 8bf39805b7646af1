"""WebArena-Lite results as the paper reports them, and the episodes shared site state spoils.

- ``headline(tasks, trajectories)``: success over *every* episode, an environment error
  counted as a failure (VisualAgentBench's score divides by all 165 tasks), with the env
  errors and the rate without them beside it, and the same per site in the paper's columns
  (Reddit, GitLab, CMS = ``shopping_admin``, Map, OSS = ``shopping``, cross-site).
- ``state_graded(task)``: the task is graded by the sites' state alone: every check is a
  page check that opens a fixed page or a helper's page (the newest order), not the page
  the episode ended on. WebArena's sites keep their state, so once one episode has done
  such a task, every later episode on the same sites passes it, whatever it does; episodes
  at once see each other's changes (an order placed by one is the "newest" for another).
- ``shared_state_warning(tasks, samples, concurrency)``: the warning for runs where that
  happens (several samples per task, or episodes at once), naming the task ids.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from webagent_r1.sources.webarena.grading import ANSWER_FALLBACK
from webagent_r1.stats import success_interval
from webagent_r1.types import Task, Trajectory, failure_reason, site_of

DENOMINATOR = "all episodes (env errors count as failures)"
"""What ``headline``'s success divides by, as ``eval.json`` records it."""


class SharedStateWarning(UserWarning):
    """Episodes of state-graded WebArena-Lite tasks can pass on an earlier episode's work."""


def state_graded(task: Task) -> bool:
    """Whether ``task`` is graded by site state alone (page checks of fixed pages or helper
    URLs only; no answer, final URL or final page is checked)."""
    ev = task.eval
    specs = ev.get("program_html") or []
    return list(ev.get("eval_types") or []) == ["program_html"] and all(
        str(spec.get("url", "")) != "last" for spec in specs
    )


def state_graded_ids(tasks: Iterable[Task]) -> list[Any]:
    """Task ids of the state-graded tasks among ``tasks``, each once, in order."""
    return list(dict.fromkeys(t.task_id for t in tasks if state_graded(t)))


def shared_state_warning(
    tasks: Sequence[Task], samples: int, concurrency: int, reset_between_episodes: bool = False
) -> str | None:
    """The warning for a run whose episodes of state-graded tasks share the sites; None when
    each such task runs once at a time, or the sites are restored between episodes.

    Args:
        tasks: the run's tasks.
        samples: episodes per task (``--samples``).
        concurrency: episodes at once (``rollout.max_concurrent_episodes``).
        reset_between_episodes: the sites are restored before every episode.
    """
    if reset_between_episodes or (samples <= 1 and concurrency <= 1):
        return None
    ids = state_graded_ids(tasks)
    if not ids:
        return None
    why = " and ".join(
        w
        for w, on in (
            (f"--samples {samples}", samples > 1),
            (f"rollout.max_concurrent_episodes {concurrency}", concurrency > 1),
        )
        if on
    )
    shown = ", ".join(str(i) for i in ids)
    return (
        f"WebArena-Lite: with {why}, episodes share the sites' state, and {len(ids)} task(s) "
        f"are graded by that state alone (task ids {shown}): once an earlier or concurrent "
        "episode has done one, another passes it whatever it does, and a newest-order check "
        "reads whichever order came last. For scores comparable with published ones run "
        "--samples 1 with rollout.max_concurrent_episodes=1, or reset the sites between "
        "episodes (docs/webarena-lite.md)"
    )


def warn_shared_state(tasks: Sequence[Task], samples: int, concurrency: int) -> str | None:
    """Emit ``shared_state_warning`` as a ``SharedStateWarning`` (once); return it."""
    msg = shared_state_warning(tasks, samples, concurrency)
    if msg is not None:
        warnings.warn(msg, SharedStateWarning, stacklevel=3)
    return msg


def _interval(per_task: Iterable[list[int]]) -> tuple[list[float], str]:
    """95% interval of a success rate whose episodes cluster by task, and its method:
    Wilson with one episode a task, else a bootstrap over tasks (``stats.success_interval``)."""
    ci, method = success_interval([(s, n) for s, n in per_task])
    return list(ci), method


def _site_row(count: list[int], per_task: dict[str, list[int]]) -> dict[str, Any]:
    """A site's ``by_site`` row from its ``[successes, episodes, env errors]`` and tasks."""
    s, k, e = count
    ci, method = _interval(per_task.values())
    return {"success": s / k if k else 0.0, "ci": ci, "ci_method": method, "n": k, "env_errors": e}


def headline(tasks: Sequence[Task], trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """Success over every episode (an env error is a failure), as the paper divides.

    Returns:
        ``eval.json`` fields: ``success`` and ``ci`` over all episodes (95%; ``ci_method``:
        Wilson with one episode a task, else a bootstrap over tasks, ``stats.success_interval``),
        ``episodes`` (all), ``env_errors``, ``success_without_env_errors`` (the rate over
        the episodes that were graded), ``denominator``, ``by_site`` (site → success,
        ci, ci_method, n, env_errors; multi-site tasks under ``cross-site``) and ``failures``
        (reason → episodes, env errors included), ``answer_literal_fallbacks`` (``vab``
        answers that were not a Python string literal, read as written).

    Raises:
        ValueError: ``tasks`` and ``trajectories`` differ in length.
    """
    if len(tasks) != len(trajectories):
        raise ValueError(f"{len(tasks)} tasks but {len(trajectories)} trajectories")
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # successes, episodes, errors
    per_task: dict[str, dict[str, list[int]]] = defaultdict(dict)  # site → task → [s, n]
    for task, tr in zip(tasks, trajectories, strict=True):
        won = int(tr.reward == 1.0 and tr.status != "env_error")
        c = counts[site_of(task)]
        c[0] += won
        c[1] += 1
        c[2] += int(tr.status == "env_error")
        t = per_task[site_of(task)].setdefault(str(task.task_id), [0, 0])
        t[0] += won
        t[1] += 1
    reasons = Counter(r for tr in trajectories if (r := failure_reason(tr)) is not None)
    ok = sum(c[0] for c in counts.values())
    n = len(trajectories)
    errors = sum(c[2] for c in counts.values())
    # a task's episodes are one cluster: Wilson with one episode a task, else a bootstrap
    ci, method = _interval(v for d in per_task.values() for v in d.values())
    return {
        "success": ok / n if n else 0.0,
        "ci": ci,
        "ci_method": method,
        "episodes": n,
        "env_errors": errors,
        "success_without_env_errors": ok / (n - errors) if n > errors else 0.0,
        "denominator": DENOMINATOR,
        "by_site": {site: _site_row(counts[site], per_task[site]) for site in sorted(counts)},
        "failures": dict(reasons.most_common(20)),
        "answer_literal_fallbacks": sum(
            ANSWER_FALLBACK in str(tr.info.get("explanation") or "") for tr in trajectories
        ),
    }
