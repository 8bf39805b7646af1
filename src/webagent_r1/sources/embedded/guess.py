"""The constant-answer baseline: what a policy that never reads the page would score.

Some information templates of the embedded suite have answers that repeat across instances (a
search that mostly finds 2 results, a member whose role is mostly Developer). A policy that
ignores the page and answers its template's most common training answer scores on those tasks,
so a success rate on them alone does not show that an agent read the page; this baseline is
the floor to print beside it.

- A task is *answer-graded* when its ``eval_types`` is ``string_match`` alone with
  ``reference_answers``; its reference text is the answer those references describe
  (``reference_text``).
- A template's *guess* is the most common reference text (compared after the grader's
  ``normalize``) of its answer-graded training tasks; ties go to the one seen first in the
  suite's order. Templates graded on the page or the site's state (nav, change) and
  held-out templates (no training instances) have no guess: the baseline scores 0 on them.
- The guess succeeds on a task when the grader's own string rules pass it
  (``grading.embedded.reference_failure`` for every reference entry; fuzzy_match by its
  deterministic rules, never an LLM judge).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from webagent_r1.grading.embedded import alternatives, normalize, reference_failure
from webagent_r1.sources.embedded.suite import all_templates, build_suite, select, spec_for
from webagent_r1.types import Task

__all__ = [
    "Baseline",
    "Guess",
    "answer_graded",
    "baseline",
    "baseline_line",
    "baseline_of_ids",
    "guess_passes",
    "majority_guesses",
    "reference_text",
    "split_shares",
    "suite_guesses",
    "template_name",
    "template_rows",
]


@dataclass(frozen=True)
class Guess:
    """A template's most common training answer.

    Attributes:
        template: the template name.
        answer: the answer text (as first seen in the training split).
        count: training tasks whose reference text is this answer (after ``normalize``).
        train: answer-graded training tasks of the template.
    """

    template: str
    answer: str
    count: int
    train: int


def template_name(task: Task) -> str:
    """The template of a task: its ``task_id`` before the ``/``."""
    return str(task.task_id).split("/", 1)[0]


def answer_graded(task: Task) -> bool:
    """Whether the task is graded on its answer alone: ``eval_types`` is ``string_match``
    only and it has ``reference_answers``."""
    return list(task.eval.get("eval_types") or []) == ["string_match"] and bool(
        task.eval.get("reference_answers")
    )


def _entries(ref: Any) -> list[Any]:
    """A reference as a list of entries (a single string is one entry)."""
    return list(ref) if isinstance(ref, (list, tuple)) else [ref]


def reference_text(task: Task) -> str | None:
    """The answer a task's string references describe, or None for a task not graded on its
    answer alone: the ``exact_match`` reference; else the ``must_include`` phrases (the first
    alternative of each) joined by ``", "``; else the ``fuzzy_match`` references joined so."""
    if not answer_graded(task):
        return None
    refs: dict[str, Any] = task.eval["reference_answers"]
    if "exact_match" in refs:
        return str(refs["exact_match"])
    if "must_include" in refs:
        return ", ".join(alternatives(p)[0] for p in _entries(refs["must_include"]))
    if "fuzzy_match" in refs:
        return ", ".join(str(r) for r in _entries(refs["fuzzy_match"]))
    return None


def majority_guesses(train_tasks: Iterable[Task]) -> dict[str, Guess]:
    """Per template, the most common reference text of its answer-graded tasks.

    Args:
        train_tasks: the training tasks (in the suite's order, which breaks ties).

    Returns:
        template name -> ``Guess``; templates without an answer-graded task are left out.
    """
    counts: dict[str, Counter[str]] = {}
    first: dict[tuple[str, str], str] = {}
    for task in train_tasks:
        text = reference_text(task)
        if text is None:
            continue
        name, key = template_name(task), normalize(text)
        counts.setdefault(name, Counter())[key] += 1
        first.setdefault((name, key), text)
    out = {}
    for name, c in counts.items():
        key, n = c.most_common(1)[0]  # ties: the first counted (Counter keeps insertion order)
        out[name] = Guess(name, first[(name, key)], n, sum(c.values()))
    return out


@functools.cache
def suite_guesses() -> dict[str, Guess]:
    """The guesses of the embedded suite, from its training split (computed once a process)."""
    return majority_guesses(select(build_suite(spec_for("train")), split="train"))


def guess_passes(task: Task, answer: str) -> bool:
    """Whether the grader would pass ``answer`` on ``task``: it is answer-graded and every
    ``reference_answers`` entry passes ``grading.embedded.reference_failure``."""
    if not answer_graded(task):
        return False
    refs: dict[str, Any] = task.eval["reference_answers"]
    return all(
        reference_failure(answer, k, r, task.task_id, task.intent) is None for k, r in refs.items()
    )


@dataclass
class Baseline:
    """The constant-answer baseline on a set of tasks (each task counted once)."""

    outcomes: dict[str, bool] = field(default_factory=dict)
    """task_id -> whether its template's guess passes it."""
    by_template: dict[str, tuple[int, int]] = field(default_factory=dict)
    """template -> (successes, tasks)."""
    guesses: dict[str, str | None] = field(default_factory=dict)
    """template -> its guess (None: no guess)."""

    @property
    def successes(self) -> int:
        return sum(self.outcomes.values())

    @property
    def tasks(self) -> int:
        return len(self.outcomes)

    @property
    def rate(self) -> float:
        return self.successes / self.tasks if self.tasks else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{successes, tasks, by_template: {name: {guess, successes, tasks}}}``."""
        return {
            "successes": self.successes,
            "tasks": self.tasks,
            "by_template": {
                name: {"guess": self.guesses.get(name), "successes": s, "tasks": n}
                for name, (s, n) in sorted(self.by_template.items())
            },
        }

    def line(self) -> str:
        """One sentence for a results table (``baseline_line``)."""
        return baseline_line(self.successes, self.tasks)


def baseline_line(successes: int, tasks: int) -> str:
    """The sentence printed under a results table: ``successes`` of ``tasks`` for the
    constant-answer policy."""
    rate = 100 * successes / tasks if tasks else 0.0
    return (
        "constant-answer baseline: a policy answering each template's most common training "
        f"answer would score {successes}/{tasks} ({rate:.1f}%) on these tasks"
    )


def baseline(tasks: Iterable[Task], guesses: dict[str, Guess] | None = None) -> Baseline:
    """The constant-answer baseline on ``tasks`` (a task listed twice counts once).

    Args:
        tasks: the evaluated tasks.
        guesses: template -> guess; default the embedded suite's (``suite_guesses``).
    """
    guesses = suite_guesses() if guesses is None else guesses
    out = Baseline()
    for task in tasks:
        tid = str(task.task_id)
        if tid in out.outcomes:
            continue
        name = template_name(task)
        g = guesses.get(name)
        ok = g is not None and guess_passes(task, g.answer)
        out.outcomes[tid] = ok
        s, n = out.by_template.get(name, (0, 0))
        out.by_template[name] = (s + ok, n + 1)
        out.guesses[name] = g.answer if g is not None else None
    return out


def split_shares(split: str = "test") -> dict[str, tuple[Guess, int, int]]:
    """Per template with a guess: (guess, tasks of ``split`` it passes, tasks of ``split``)
    on the embedded suite.

    Args:
        split: one of ``suite.SPLITS``.
    """
    guesses = suite_guesses()
    b = baseline(select(build_suite(spec_for(split)), split=split), guesses)
    return {name: (g, *b.by_template.get(name, (0, 0))) for name, g in guesses.items()}


def baseline_of_ids(task_ids: Iterable[str]) -> Baseline | None:
    """The constant-answer baseline on embedded tasks named by ``task_id`` (any split), or
    None when one of them is not a task of the embedded suite (MiniWoB++, WebArena)."""
    ids = [str(t) for t in task_ids]
    known = {t.name for t in all_templates()}
    if not ids or any(i.split("/", 1)[0] not in known for i in ids):
        return None
    by_id = {str(t.task_id): t for t in build_suite(spec_for("wide"))}
    if any(i not in by_id for i in ids):
        return None
    return baseline(by_id[i] for i in ids)


def template_rows(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    """``webagent-r1 tasks list``: per template with tasks among ``tasks``, its facts, its
    tasks per split (``val``: the ``extra`` instances, drawn after train) and, where it has
    a guess, the test tasks of the suite that guess passes (``top_answer``)."""
    counts = Counter((t.extra["template"], t.split) for t in tasks)
    shares = split_shares("test")
    rows = []
    for tp in all_templates():
        n_train, n_test = counts.get((tp.name, "train"), 0), counts.get((tp.name, "test"), 0)
        n_extra = counts.get((tp.name, "extra"), 0)
        if n_train + n_test + n_extra == 0:
            continue
        rows.append(
            {
                "template": tp.name,
                "id": tp.id,
                "sites": tp.sites,
                "kind": tp.kind,
                "steps": tp.difficulty,
                "heldout": tp.heldout,
                "train": n_train,
                "test": n_test,
                "extra": n_extra,
                "val": n_extra,  # the validation split: the instances drawn after train
                "top_answer": (
                    {"answer": sh[0].answer, "test_successes": sh[1], "test_tasks": sh[2]}
                    if (sh := shares.get(tp.name)) is not None
                    else None
                ),
            }
        )
    return rows
