"""The shopping task templates: well-formed, fully instantiable, solvable, and not trivially
solvable (a wrong exit scores 0; the pristine state fails every change task's checks)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from webagent_r1.sites import SITES
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.tasks.evaluators import check_state_match
from webagent_r1.tasks.suite import SuiteSpec, build_suite, instantiate, public_params, select
from webagent_r1.tasks.templates.shopping import TEMPLATES
from webagent_r1.types import Task


@pytest.fixture(scope="module")
def pristine() -> Iterator[sqlite3.Connection]:
    path = SITES["shopping"].backend.ensure_pristine()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


def _first_test_task_per_template() -> list[Task]:
    seen: dict[str, Task] = {}
    for t in select(build_suite(sites=["shopping"]), split="test"):
        seen.setdefault(t.extra["template"], t)
    return list(seen.values())


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
    backend = SimpleNamespace(instance_db_path=lambda site, instance: path)
    tasks = [t for t in build_suite(sites=["shopping"]) if t.extra["kind"] == "change"]
    assert tasks
    for task in tasks:
        ctx = SimpleNamespace(task=task, backend=backend, instance_id="pristine")
        score, note = await check_state_match(ctx)  # type: ignore[arg-type]
        assert score == 0.0, (task.task_id, note)


@pytest.mark.browser
async def test_expert_succeeds_and_a_wrong_exit_fails(embedded_sites: EmbeddedSites) -> None:
    """One test instance per template: the expert gets reward 1, exiting at once gets 0."""
    from webagent_r1.browser import Browser
    from webagent_r1.config import BrowserConfig, EnvConfig, ObservationConfig
    from webagent_r1.env import WebEnv
    from webagent_r1.tasks.check import check_tasks
    from webagent_r1.tasks.evaluators import evaluate

    tasks = _first_test_task_per_template()
    assert len(tasks) == len(TEMPLATES)
    browser = await Browser.launch(BrowserConfig())

    async def wrong(chunk: list[Task]) -> list[tuple[str, float, str]]:
        env = WebEnv(browser, EnvConfig(max_turns=5), ObservationConfig(), embedded_sites, evaluate)
        out = []
        try:
            for task in chunk:
                await env.reset(task)
                r = await env.step('<answer>exit(message="I could not find it")</answer>')
                out.append((str(task.task_id), r.reward, r.info.get("explanation", "")))
        finally:
            await env.close()
        return out

    try:
        # The expert and the wrong policy run side by side (each task on its own instance).
        runs, *chunks = await asyncio.gather(
            check_tasks(tasks, concurrency=3, sites=embedded_sites),
            *(wrong(tasks[i::2]) for i in range(2)),
        )
    finally:
        await browser.close()
    # A loaded machine can time out a click (5 s); such a run gets one more try.
    flaky = [t for t, r in zip(tasks, runs, strict=True) if "timed out" in (r.error or "")]
    if flaky:
        again = {r.task_id: r for r in await check_tasks(flaky, sites=embedded_sites)}
        runs = [again.get(r.task_id, r) for r in runs]
    failed = [(r.task_id, r.error, r.explanation) for r in runs if r.reward != 1.0]
    assert not failed
    scores = [x for chunk in chunks for x in chunk]
    assert len(scores) == len(tasks)
    assert all(reward == 0.0 for _, reward, _ in scores), scores
