"""A fixed, stratified subset of tasks (``eval_subset``): what an evaluation, a training
run's periodic evaluation and demonstration sampling run on when they take fewer tasks than
a split has."""

from __future__ import annotations

import random
from collections import defaultdict

from webagent_r1.types import Task

__all__ = ["eval_subset"]


def eval_subset(tasks: list[Task], n: int, seed: int = 0) -> list[Task]:
    """A fixed subset of ``n`` tasks (all tasks when n <= 0), stratified: round-robin over
    templates, the templates taken by site in turn (each site's first template, then each
    site's second, …; a task's site is its ``sites`` joined), so a subset smaller than the
    number of templates still spans every site. Which tasks of a template come first is
    seeded."""
    if n <= 0 or n >= len(tasks):
        return list(tasks)
    by_t: dict[str, list[Task]] = defaultdict(list)
    site_key: dict[str, str] = {}
    for t in tasks:
        name = str(t.extra.get("template", t.intent_template_id))
        by_t[name].append(t)
        site_key.setdefault(name, "+".join(sorted(t.sites)))
    rng = random.Random(seed)
    by_site: dict[str, list[list[Task]]] = defaultdict(list)
    for name in sorted(by_t):
        lst = list(by_t[name])
        rng.shuffle(lst)
        by_site[site_key[name]].append(lst)
    columns = [by_site[s] for s in sorted(by_site)]
    queues = [c[i] for i in range(max(map(len, columns))) for c in columns if i < len(c)]
    out: list[Task] = []
    while len(out) < n:
        for q in queues:
            if q and len(out) < n:
                out.append(q.pop())
    return out
