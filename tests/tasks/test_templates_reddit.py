"""The forum task templates: well-formed, fully instantiable, and not trivially solvable (the
pristine state fails every change task's checks); their experts and a wrong exit in real
Chromium: ``test_template_experts.py``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from webagent_r1.grading.embedded import check_state_match
from webagent_r1.sites import SITES
from webagent_r1.sources.embedded.suite import SuiteSpec, build_suite, instantiate, public_params
from webagent_r1.tasks.templates.reddit import (
    TEMPLATES,
    _comment_text_line,
    _find_comment,
    _post_links,
)
from webagent_r1.types import Observation

SMALL_DOMAIN = {
    # These draw from the 12 forums (and a few ranks or columns): fewer distinct instances.
    "reddit.top_post": 24,
    "reddit.newest_post_title": 30,
    "reddit.forum_count": 24,
    "reddit.update_subscriptions": 40,
}
"""Template -> the least number of distinct instances it must still give."""


@pytest.fixture(scope="module")
def pristine() -> Iterator[sqlite3.Connection]:
    path = SITES["reddit"].backend.ensure_pristine()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


def test_templates_are_well_formed() -> None:
    ids = [t.id for t in TEMPLATES]
    assert len(TEMPLATES) >= 12
    assert len(set(ids)) == len(ids) and all(300 <= i <= 349 for i in ids)
    assert all(t.name.startswith("reddit.") and t.sites == ["reddit"] for t in TEMPLATES)
    assert sum(t.heldout for t in TEMPLATES) == 4
    assert {t.kind for t in TEMPLATES} == {"info", "nav", "change"}
    assert {t.kind for t in TEMPLATES if t.heldout} == {"info", "nav", "change"}
    assert {t.difficulty for t in TEMPLATES} == {"1-2", "3-5", "6-9", "10+"}
    assert all(t.start_url == "__REDDIT__/" for t in TEMPLATES)
    assert all(t.user is not None for t in TEMPLATES if t.kind == "change")


def test_every_template_yields_its_instances(pristine: sqlite3.Connection) -> None:
    spec = SuiteSpec()
    for t in TEMPLATES:
        got = instantiate(t, pristine, spec)
        want = spec.n_heldout if t.heldout else spec.n_train + spec.n_test
        assert len(got) >= min(want, SMALL_DOMAIN.get(t.name, want)), (t.name, len(got))
        for _, params in got:
            intent = t.intent.format(**public_params(params))
            assert "{" not in intent, intent
            t.evaluation(params)  # builds without error


def test_suite_is_deterministic() -> None:
    a = build_suite(SuiteSpec(seed=3, n_train=5, n_test=2), sites=["reddit"])
    b = build_suite(SuiteSpec(seed=3, n_train=5, n_test=2), sites=["reddit"])
    assert [t.intent for t in a] == [t.intent for t in b]
    tasks = build_suite(sites=["reddit"])
    assert {t.split for t in tasks if t.heldout_template} == {"test"}


async def test_pristine_state_fails_every_change_check() -> None:
    """An agent that changes nothing gets 0 on every change task."""
    path = SITES["reddit"].backend.ensure_pristine()
    backend = SimpleNamespace(
        instance_db_path=lambda site, instance: path, pristine_db_path=lambda site: path
    )
    tasks = [t for t in build_suite(sites=["reddit"]) if t.extra["kind"] == "change"]
    assert tasks
    for task in tasks:
        ctx = SimpleNamespace(task=task, backend=backend, instance_id="pristine")
        score, note = await check_state_match(ctx)  # type: ignore[arg-type]
        assert score == 0.0, (task.task_id, note)


def test_expert_helpers_read_the_observation() -> None:
    text = "\n".join(
        [
            '[1] link "Postmill"',
            "Sort by: Hot",
            '[2] link "New"',
            '[3] link "Top"',
            '[4] link "First post"',
            "5 points · Submitted by",
            '[5] link "alice"',
            '[6] link "Second post"',
            "-1 point · Submitted by",
            '[7] link "bob"',
            '[8] link "carol"',
            "· 2 points · May 1, 2023, 1:00 PM",
            "Nice one. Cheers.",
            '[9] button "Upvote"',
        ]
    )
    obs = Observation(url="http://x/f/books", title="t", text=text)
    assert [e.name for e in _post_links(obs)] == ["First post", "Second post"]
    assert _comment_text_line(obs, "Nice one. Cheers.") == 12
    gen = _find_comment(obs, "Nice one. Cheers.", "scroll")
    with pytest.raises(StopIteration) as done:  # no scrolling needed: it returns at once
        next(gen)
    author, _ = done.value.value
    assert author.name == "carol"
