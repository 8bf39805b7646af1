"""The shopping task templates: well-formed, fully instantiable, and not trivially solvable
(the pristine state fails every change task's checks); their experts and a wrong exit in real
Chromium: ``test_template_experts.py``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from webagent_r1.grading.embedded import check_state_match
from webagent_r1.sites import SITES
from webagent_r1.sources.embedded.suite import SuiteSpec, build_suite, instantiate, public_params
from webagent_r1.tasks.templates.shopping import TEMPLATES


@pytest.fixture(scope="module")
def pristine() -> Iterator[sqlite3.Connection]:
    path = SITES["shopping"].backend.ensure_pristine()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


def test_templates_are_well_formed() -> None:
    ids = [t.id for t in TEMPLATES]
    assert len(TEMPLATES) >= 13
    assert len(set(ids)) == len(ids) and all(100 <= i <= 199 for i in ids)
    assert all(t.name.startswith("shopping.") for t in TEMPLATES)
    assert sum(t.heldout for t in TEMPLATES) == 3
    assert {t.kind for t in TEMPLATES} == {"info", "nav", "change"}
    assert {t.kind for t in TEMPLATES if t.heldout} == {"info", "nav", "change"}
    assert {t.difficulty for t in TEMPLATES} == {"1-2", "3-5", "6-9", "10+"}


def test_every_template_yields_its_full_count(pristine: sqlite3.Connection) -> None:
    spec = SuiteSpec()
    for t in TEMPLATES:
        got = instantiate(t, pristine, spec)
        want = spec.n_heldout if t.heldout else spec.n_train + spec.n_test
        assert len(got) == want, t.name
        for _, params in got:
            intent = t.intent.format(**public_params(params))
            assert "{" not in intent, intent
            t.evaluation(params)  # builds without error


async def test_pristine_state_fails_every_change_check(pristine: sqlite3.Connection) -> None:
    """An agent that changes nothing gets 0 on every change task."""
    path = SITES["shopping"].backend.ensure_pristine()
    backend = SimpleNamespace(
        instance_db_path=lambda site, instance: path, pristine_db_path=lambda site: path
    )
    tasks = [t for t in build_suite(sites=["shopping"]) if t.extra["kind"] == "change"]
    assert tasks
    for task in tasks:
        ctx = SimpleNamespace(task=task, backend=backend, instance_id="pristine")
        score, note = await check_state_match(ctx)  # type: ignore[arg-type]
        assert score == 0.0, (task.task_id, note)
