"""The embedded task suite: templates instantiated from the sites' seeded data, with splits.

A ``Template`` is a parameterised task (WebArena's ``intent_template``): it samples parameter
sets from the site's pristine database, says how each instance is graded (a WebArena ``eval``
spec), and has a scripted expert. The suite is generated deterministically from a seed:

- templates marked ``heldout`` appear only in the test split (never seen in training);
- the other templates give ``n_test`` instances to the test split (unseen instances of
  training templates) and ``n_train`` to the train split, disjoint by parameters;
- on request (``SuiteSpec.n_extra``, the ``val``, ``wide`` and ``extra`` splits) up to
  ``n_extra`` more unseen instances of each training template, drawn after the train
  instances, so that asking for them never changes the train or test split. They are the
  **validation split** ``val`` (``extra`` is its older name): disjoint from train and test,
  the split on which settings, step counts and checkpoints are chosen, so that ``test`` is
  evaluated once per configuration fixed beforehand. A template with no more distinct
  instances than train and test take has none (``webagent-r1 tasks list --split val``).
  ``wide`` is the test split plus these, for comparisons that are not choices.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import sqlite3
from dataclasses import dataclass
from typing import Any

from webagent_r1.sites import SITES
from webagent_r1.tasks.template import Template
from webagent_r1.tasks.templates import TEMPLATE_MODULES
from webagent_r1.types import Task


@dataclass
class SuiteSpec:
    """How many instances of each template go to each split."""

    seed: int = 0
    n_train: int = 40
    n_test: int = 6
    n_heldout: int = 12
    n_extra: int = 0
    """Instances of each training template after the train ones, in the ``extra`` split."""
    max_draws: int = 400


WIDE_EXTRA = 14
"""``n_extra`` of the ``wide`` and ``extra`` splits: with the 6 test instances, 20 per template
(fewer where a template has fewer distinct instances)."""

SPLITS = ("train", "test", "heldout", "val", "wide", "extra")
"""The splits ``select`` accepts."""


def spec_for(split: str | None) -> SuiteSpec:
    """The suite spec that holds ``split``: the default one, with ``WIDE_EXTRA`` extra
    instances for ``wide`` and ``extra`` (its train and test splits are the default ones)."""
    return SuiteSpec(n_extra=WIDE_EXTRA) if split in ("val", "wide", "extra") else SuiteSpec()


def public_params(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters the agent and the expert may know (no ``_``-prefixed keys)."""
    return {k: v for k, v in params.items() if not k.startswith("_")}


def _key(params: dict[str, Any]) -> str:
    return json.dumps(public_params(params), sort_keys=True, default=str)


def _stable_seed(*parts: Any) -> int:
    return int(hashlib.sha256(repr(parts).encode()).hexdigest()[:12], 16)


def instantiate(t: Template, conn: Any, spec: SuiteSpec) -> list[tuple[str, dict[str, Any]]]:
    """Draw distinct instances of ``t`` and assign them to splits: ``[(split, params)]``."""
    want = spec.n_heldout if t.heldout else spec.n_train + spec.n_test + spec.n_extra
    rng = random.Random(_stable_seed(spec.seed, t.name))
    seen: dict[str, dict[str, Any]] = {}
    for _ in range(spec.max_draws):
        if len(seen) >= want:
            break
        p = t.sample(conn, rng)
        if p is not None:
            seen.setdefault(_key(p), p)
    params = list(seen.values())
    if t.heldout:
        return [("test", p) for p in params]

    # Test instances first, extra ones last (so growing n_train or n_extra never moves an
    # instance between splits).
    def split_of(i: int) -> str:
        return "test" if i < spec.n_test else "train" if i < spec.n_test + spec.n_train else "extra"

    return [(split_of(i), p) for i, p in enumerate(params)]


def _with_writes(ev: dict[str, Any], writes: Any, params: dict[str, Any]) -> dict[str, Any]:
    """The eval spec with the template's write budget (graded by ``state_match``)."""
    if writes is None:
        return ev
    if callable(writes):
        writes = writes(params)
    if "state_match" not in ev.get("eval_types", []):
        raise ValueError("a template's writes are checked by state_match: add a state check")
    return {**ev, "writes": dict(writes)}


def make_task(t: Template, k: int, split: str, params: dict[str, Any]) -> Task:
    """The Task config of instance ``k`` of template ``t``."""
    pub = public_params(params)
    return Task(
        task_id=f"{t.name}/{k:03d}",
        sites=list(t.sites),
        intent=t.intent.format(**pub),
        intent_template=t.intent,
        intent_template_id=t.id,
        instantiation_dict=pub,
        start_url=t.start_url,
        require_login=t.user is not None or bool(t.logins),
        require_reset=t.kind == "change",
        eval=_with_writes(t.evaluation(params), t.writes, params),
        user=t.user,
        split=split,
        heldout_template=t.heldout,
        extra={
            "kind": t.kind,
            "template": t.name,
            "difficulty": t.difficulty,
            **({"logins": dict(t.logins)} if t.logins else {}),
        },
    )


# --------------------------------------------------------------------------------------
# The registry of templates and the generated suite.
# --------------------------------------------------------------------------------------


def all_templates() -> list[Template]:
    """Every template of the embedded suite, in a fixed order (ids unique)."""
    out: list[Template] = []
    for mod in TEMPLATE_MODULES:
        out.extend(mod.TEMPLATES)
    ids = [t.id for t in out]
    names = [t.name for t in out]
    if len(set(ids)) != len(ids) or len(set(names)) != len(names):
        raise RuntimeError("template ids and names must be unique")
    return out


def template_of(task: Task) -> Template:
    """The template that generated an embedded task.

    Raises:
        KeyError: the task does not come from the embedded suite.
    """
    name = task.extra.get("template")
    for t in all_templates():
        if t.name == name:
            return t
    raise KeyError(f"task {task.task_id} has no embedded template (template={name!r})")


_SUITE_CACHE: dict[tuple, list[Task]] = {}


def build_suite(spec: SuiteSpec | None = None, sites: list[str] | None = None) -> list[Task]:
    """Generate the embedded suite deterministically (cached per spec).

    Args:
        spec: instance counts and seed.
        sites: keep only templates whose sites are all in this list.
    """
    spec = spec or SuiteSpec()
    key = (spec.seed, spec.n_train, spec.n_test, spec.n_heldout, spec.n_extra, tuple(sites or ()))
    if key in _SUITE_CACHE:
        return list(_SUITE_CACHE[key])
    tasks: list[Task] = []
    conns: dict[str, sqlite3.Connection] = {}
    try:
        for t in all_templates():
            if sites is not None and not set(t.sites) <= set(sites):
                continue
            needed = t.backend_sites or [t.backend_site or t.sites[0]]
            for site in needed:
                if site not in conns:
                    path = SITES[site].backend.ensure_pristine()
                    conns[site] = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
                    conns[site].row_factory = sqlite3.Row
            conn = {s: conns[s] for s in needed} if t.backend_sites else conns[needed[0]]
            for k, (split, params) in enumerate(instantiate(t, conn, spec)):
                tasks.append(make_task(t, k, split, params))
    finally:
        for c in conns.values():
            c.close()
    _SUITE_CACHE[key] = tasks
    return list(tasks)


def select(
    tasks: list[Task],
    split: str | None = None,
    site: str | None = None,
    template: str | None = None,
) -> list[Task]:
    """Filter tasks by split (one of ``SPLITS``), site and template name.

    ``heldout`` is the test instances of held-out templates; ``val`` (or its older name
    ``extra``) the instances after the train ones, and ``wide`` is ``test`` plus those (both
    present only in a suite built with ``spec_for("val")``).
    """
    out = tasks
    if split == "heldout":
        out = [t for t in out if t.heldout_template]
    elif split == "wide":
        out = [t for t in out if t.split in ("test", "extra")]
    elif split == "val":  # the validation instances keep the label they were drawn with
        out = [t for t in out if t.split == "extra"]
    elif split is not None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
        out = [t for t in out if t.split == split]
    if site is not None:
        out = [t for t in out if site in t.sites]
    if template is not None:
        out = [t for t in out if t.extra.get("template") == template]
    return out


def run_tasks(
    split: str,
    sites: list[str],
    templates: list[str],
    difficulty: list[str],
    heldout_templates: list[str] | None = None,
) -> list[Task]:
    """The tasks of ``split`` that a run's ``tasks`` config keeps (empty lists keep all).

    Args:
        split: one of ``SPLITS``.
        sites: keep tasks whose sites are all in this list.
        templates: keep tasks of these template names.
        difficulty: keep templates of these expert step counts (``1-2`` … ``10+``).
        heldout_templates: on the ``heldout`` split, keep these held-out templates instead
            of ``templates`` (a recipe's ``templates`` names the trained ones), unless
            ``templates`` names held-out ones itself (an override); empty or None:
            ``templates`` applies there too.

    Raises:
        ValueError: an unknown site or template name, a ``heldout_templates`` entry that is
            not a held-out template, or a filter that keeps no task.
    """

    known = {t.name: t for t in all_templates()}
    held = list(heldout_templates or [])
    for key, names in (("templates", templates), ("heldout_templates", held)):
        for name in names:
            if name not in known:
                near = difflib.get_close_matches(name, list(known), n=1)
                hint = f"; did you mean {near[0]!r}?" if near else "; see `webagent-r1 tasks list`"
                raise ValueError(f"tasks.{key}: unknown template {name!r}{hint}")
    trained = [name for name in held if not known[name].heldout]
    if trained:
        raise ValueError(
            f"tasks.heldout_templates: {', '.join(trained)} has training instances, so it is "
            f"not held out; `webagent-r1 tasks list --split heldout` lists the held-out ones"
        )
    key = "templates"
    named_held = any(known[name].heldout for name in templates)
    if split == "heldout" and held and not named_held:
        templates, key = held, "heldout_templates"
    for site in sites:
        if site not in SITES:
            raise ValueError(f"tasks.sites: unknown site {site!r}; sites: {', '.join(SITES)}")
    out = select(build_suite(spec_for(split)), split=split)
    if sites:
        out = [t for t in out if set(t.sites) <= set(sites)]
    if templates:
        out = [t for t in out if t.extra.get("template") in templates]
    if difficulty:
        out = [t for t in out if known[str(t.extra.get("template"))].difficulty in difficulty]
    if not out:
        hint = ""
        if split == "heldout" and templates and not held:
            hint = (
                "; the held-out templates are never trained, so a recipe's `templates` holds "
                "none: name the ones to evaluate in tasks.heldout_templates"
            )
        raise ValueError(
            f"the tasks filter (sites={sites}, {key}={templates}, difficulty={difficulty}) "
            f"keeps no {split} task{hint}"
        )
    return out


def tasks_for(cfg: Any, split: str) -> list[Task]:
    """``run_tasks`` with the filters of a ``Config``'s ``tasks`` section.

    Raises:
        ValueError: ``tasks.source`` is not ``embedded``: the callers of this function
            (demonstrations and BC, which need the scripted experts) run the embedded suite
            only; other sources go through ``sources.task_source`` (M-GRPO,
            ``webagent-r1 eval --tasks …``).
    """
    source = getattr(cfg.tasks, "source", "embedded")
    if source != "embedded":
        raise ValueError(
            f"tasks.source is {source!r}, but this command runs the embedded suite only: "
            f"demonstrations and BC need the scripted experts, which exist for the embedded "
            f"sites alone. For {source}, train M-GRPO only (bc.steps=0) or evaluate with "
            f"`webagent-r1 eval --tasks {source}`"
        )
    t = cfg.tasks
    return run_tasks(
        split, t.sites, t.templates, t.difficulty, getattr(t, "heldout_templates", None)
    )
