"""The gitlab task templates: well-formed, fully instantiable, not trivially solvable (the
pristine state fails every change check); their experts in real Chromium:
``test_template_experts.py``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from webagent_r1.grading.embedded import check_state_match
from webagent_r1.sites import SITES
from webagent_r1.sources.embedded.suite import (
    SuiteSpec,
    build_suite,
    instantiate,
    make_task,
    public_params,
)
from webagent_r1.tasks.templates.gitlab import TEMPLATES, config_pair


@pytest.fixture(scope="module")
def pristine() -> Iterator[sqlite3.Connection]:
    path = SITES["gitlab"].backend.ensure_pristine()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


def test_templates_are_well_formed() -> None:
    ids = [t.id for t in TEMPLATES]
    assert len(TEMPLATES) >= 12
    assert len(set(ids)) == len(ids) and all(400 <= i <= 449 for i in ids)
    assert all(t.name.startswith("gitlab.") and t.sites == ["gitlab"] for t in TEMPLATES)
    assert sum(t.heldout for t in TEMPLATES) == 4
    assert {t.kind for t in TEMPLATES} == {"info", "nav", "change"}
    assert {t.kind for t in TEMPLATES if t.heldout} == {"info", "nav", "change"}
    assert {t.difficulty for t in TEMPLATES} == {"1-2", "3-5", "6-9", "10+"}
    assert all(t.start_url == "__GITLAB__/" for t in TEMPLATES)


def test_config_pair() -> None:
    assert config_pair("port: 8080") == ("port", "8080")
    assert config_pair('  "apiTimeoutMs": 5000,') == ("apiTimeoutMs", "5000")
    assert config_pair('version = "1.2.3"') == ("version", "1.2.3")
    assert config_pair("const DefaultPort = 8080") == ("DefaultPort", "8080")
    assert config_pair("RETRIES=3") == ("RETRIES", "3")
    assert config_pair("# port: 1") is None
    assert config_pair("dependencies = [") is None
    assert config_pair('  "dependencies": {') is None


def test_every_template_yields_instances(pristine: sqlite3.Connection) -> None:
    spec = SuiteSpec()
    kinds = set()
    for t in TEMPLATES:
        got = instantiate(t, pristine, spec)
        want = spec.n_heldout if t.heldout else spec.n_train + spec.n_test
        assert len(got) >= min(want, 20), t.name
        for _, params in got:
            intent = t.intent.format(**public_params(params))
            assert "{" not in intent, intent
            kinds.update(t.evaluation(params)["eval_types"])
    assert kinds == {"string_match", "url_match", "state_match", "program_html"}


async def test_pristine_state_fails_every_change_check() -> None:
    """An agent that changes nothing gets 0 on every change task."""
    path = SITES["gitlab"].backend.ensure_pristine()
    backend = SimpleNamespace(
        instance_db_path=lambda site, instance: path, pristine_db_path=lambda site: path
    )
    tasks = [t for t in build_suite(sites=["gitlab"]) if t.extra["kind"] == "change"]
    assert tasks
    for task in tasks:
        ctx = SimpleNamespace(task=task, backend=backend, instance_id="pristine")
        score, note = await check_state_match(ctx)  # type: ignore[arg-type]
        assert score == 0.0, (task.task_id, note)


# One template per eval type and per kind, held-out ones included; the full set runs in
# `webagent-r1 tasks check --site gitlab`.
def test_latest_commit_intent_reads_right_for_both_fields(pristine: sqlite3.Connection) -> None:
    """It said "Who is the message of the latest commit" for the message field."""
    (t,) = [t for t in TEMPLATES if t.name == "gitlab.latest_commit_author"]
    drawn = instantiate(t, pristine, SuiteSpec())
    tasks = [make_task(t, k, split, params) for k, (split, params) in enumerate(drawn)]
    fields = {task.instantiation_dict["field"] for task in tasks}
    assert fields == {"author", "message"}
    for task in tasks:
        field = task.instantiation_dict["field"]
        assert task.intent.startswith(f"What is the {field} of the latest commit of the project ")
