"""Cross-site templates: well-formed, instantiable from two databases, logged in per site,
linked between their sites and not trivially solvable (their experts in real Chromium:
``test_template_experts.py``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest

from webagent_r1.grading.embedded import check_state_match
from webagent_r1.sites import INSTANCE_COOKIE, SITES, start_sites
from webagent_r1.sites.base import SITES_COOKIE
from webagent_r1.sites.episodes import logins
from webagent_r1.sources.embedded.suite import (
    SuiteSpec,
    build_suite,
    instantiate,
    make_task,
    public_params,
    select,
)
from webagent_r1.tasks.templates.cross_site import TEMPLATES
from webagent_r1.types import Task


@pytest.fixture(scope="module")
def pristine() -> Iterator[dict[str, sqlite3.Connection]]:
    conns = {}
    for name in {s for t in TEMPLATES for s in t.sites}:
        path = SITES[name].backend.ensure_pristine()
        conns[name] = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        conns[name].row_factory = sqlite3.Row
    yield conns
    for c in conns.values():
        c.close()


_TASKS: list[Task] = []


def cross_tasks() -> list[Task]:
    """The cross-site tasks, made as ``build_suite`` makes them (without the other sites'
    templates, which take most of a full build)."""
    if not _TASKS:
        spec = SuiteSpec()
        conns = {}
        for name in {s for t in TEMPLATES for s in t.sites}:
            path = SITES[name].backend.ensure_pristine()
            conns[name] = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            conns[name].row_factory = sqlite3.Row
        for t in TEMPLATES:
            got = instantiate(t, {s: conns[s] for s in t.backend_sites or []}, spec)
            _TASKS.extend(make_task(t, k, split, p) for k, (split, p) in enumerate(got))
        for c in conns.values():
            c.close()
    return list(_TASKS)


def test_templates_are_well_formed() -> None:
    ids = [t.id for t in TEMPLATES]
    assert len(TEMPLATES) >= 8
    assert len(set(ids)) == len(ids) and all(600 <= i <= 649 for i in ids)
    assert sum(t.heldout for t in TEMPLATES) == 3
    assert {t.kind for t in TEMPLATES} == {"info", "change"}
    for t in TEMPLATES:
        assert t.name.startswith("cross.") and len(set(t.sites)) == 2, t.name
        assert t.backend_sites is not None and set(t.backend_sites) == set(t.sites)
        assert t.start_url == f"__{t.sites[0].upper()}__/"
        for site, user in t.logins.items():  # a documented account of that site
            assert site in t.sites and user in {u.username for u in SITES[site].users}
        assert t.kind != "change" or t.logins, t.name  # changes are made by a known user


def test_every_template_yields_its_full_count(pristine: dict[str, sqlite3.Connection]) -> None:
    spec = SuiteSpec()
    for t in TEMPLATES:
        got = instantiate(t, {s: pristine[s] for s in t.backend_sites or []}, spec)
        want = spec.n_heldout if t.heldout else spec.n_train + spec.n_test
        assert len(got) == want, t.name
        for _, params in got:
            assert "{" not in t.intent.format(**public_params(params))
            t.evaluation(params)


def test_suite_holds_cross_site_tasks_of_running_sites() -> None:
    tasks = build_suite(sites=["map", "shopping"])  # map, shop and their cross-site tasks
    cross = {t.extra["template"] for t in tasks if len(t.sites) > 1}
    assert cross == {t.name for t in TEMPLATES if set(t.sites) == {"map", "shopping"}}
    assert len(cross) >= 3


def test_tasks_carry_per_site_logins() -> None:
    tasks = cross_tasks()
    assert {t.extra["template"] for t in tasks} == {t.name for t in TEMPLATES}
    task = next(t for t in tasks if t.extra["template"] == "cross.address_from_map")
    assert task.sites == ["map", "shopping"] and task.user is None and task.require_login
    assert logins(task) == {"shopping": "emma.lopez"}  # the map stays anonymous
    # single-site tasks keep the old meaning: the user on every site of the task
    one = Task(task_id="t", intent="i", start_url="/", sites=["shopping"], user="alex.chen")
    assert logins(one) == {"shopping": "alex.chen"}
    assert Task.from_dict(task.to_dict()).extra["logins"] == {"shopping": "emma.lopez"}
    assert len(select(tasks, split="heldout")) == 3 * SuiteSpec().n_heldout


async def test_pristine_state_fails_every_change_check() -> None:
    """An agent that changes nothing gets 0 on every cross-site change task."""
    backend = SimpleNamespace(
        instance_db_path=lambda site, instance: SITES[site].backend.ensure_pristine(),
        pristine_db_path=lambda site: SITES[site].backend.ensure_pristine(),
    )
    tasks = [t for t in cross_tasks() if t.extra["kind"] == "change"]
    assert tasks
    for task in tasks:
        ctx = SimpleNamespace(task=task, backend=backend, instance_id="pristine")
        score, note = await check_state_match(ctx)  # type: ignore[arg-type]
        assert score == 0.0, (task.task_id, note)


def test_pages_link_to_the_tasks_other_sites(tmp_path_factory: pytest.TempPathFactory) -> None:
    running = start_sites(["map", "shopping"], ports="auto", home=tmp_path_factory.mktemp("h"))
    try:
        jar = {INSTANCE_COOKIE: "default"}
        with httpx.Client(base_url=running.urls["map"], cookies=jar) as c:
            assert "Other sites" not in c.get("/").text  # single-site browsing: no links
            c.cookies.set(SITES_COOKIE, "map,shopping")
            page = c.get("/").text
            assert f'<a href="{running.urls["shopping"]}/">One Stop Market</a>' in page
            assert page.index("Other sites") < page.index("Riverton, Pennsylvania")
            c.cookies.set(SITES_COOKIE, "shopping,reddit")  # a task this site is not part of
            assert "Other sites" not in c.get("/").text
        cookies = running.sites_cookies(["shopping", "map"])
        assert [ck["value"] for ck in cookies] == ["shopping,map"]  # one host, one cookie
    finally:
        running.stop()
