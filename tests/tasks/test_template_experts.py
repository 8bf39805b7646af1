"""Every template module's scripted experts in Chromium: for one test instance of each chosen
template, the expert gets reward 1 and a policy that exits at once with a wrong answer gets 0.
One test per module of ``webagent_r1.tasks.templates``."""

from __future__ import annotations

import asyncio
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import pytest

import webagent_r1.tasks.templates as templates_pkg
from webagent_r1.browser import Browser
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sources.embedded.suite import SuiteSpec, build_suite, select
from webagent_r1.types import Task


def _first_test_task_per_template(tasks: list[Task], only: tuple[str, ...] = ()) -> list[Task]:
    """The first test-split task of each template (of those in ``only``, when given)."""
    seen: dict[str, Task] = {}
    for t in select(tasks, split="test"):
        if not only or t.extra["template"] in only:
            seen.setdefault(t.extra["template"], t)
    return list(seen.values())


def _first_task_per_template(tasks: list[Task]) -> list[Task]:
    """The first task (any split) of each template."""
    seen: dict[str, Task] = {}
    for t in tasks:
        seen.setdefault(t.extra["template"], t)
    return list(seen.values())


GITLAB_IN_BROWSER = (
    "gitlab.open_issues_with_label",  # string_match
    "gitlab.open_file",  # url_match
    "gitlab.close_issue",  # state_match
    "gitlab.comment_merge_request",  # state_match + program_html
    "gitlab.most_starred_in_group",  # held out
)
MAP_IN_BROWSER = (
    "map.street_address",  # string_match, the search box
    "map.place_page",  # url_match + program_html
    "map.category_in_neighbourhood",  # url_match, category and neighbourhood links
    "map.closest_of_category",  # the "What's nearby" form
    "map.walking_time",  # the directions form with a travel mode
    "map.open_at_time",  # held out
)
"""Map templates run in Chromium here (every eval type and page kind); ``webagent-r1 tasks
check --site map`` runs the experts of all of them."""
CROSS_IN_BROWSER = (
    "cross.address_from_map",  # map -> shop, state_match
    "cross.price_and_walking_time",  # shop -> map, string_match
    "cross.price_reply",  # shop -> forum
)
"""Cross-site templates run in Chromium here (links both ways, both eval types); ``webagent-r1
tasks check`` runs the experts of all of them."""


def _cross_site_tasks() -> list[Task]:
    from tests.tasks.test_templates_cross_site import cross_tasks

    return _first_test_task_per_template(cross_tasks(), CROSS_IN_BROWSER)


@dataclass(frozen=True)
class Case:
    """What one template module's browser test runs."""

    tasks: Callable[[], list[Task]]
    """The tasks to solve (one per template)."""
    count: int | None = None
    """How many tasks ``tasks`` must give (None: at least one)."""
    concurrency: int = 2
    """Expert episodes at once."""
    wrong_answer: str = "I could not find it"
    """The message of the wrong exit."""
    page_shows: str = ""
    """Text the first observation of every task must contain."""


CASES: dict[str, Case] = {
    "shopping": Case(
        lambda: _first_test_task_per_template(build_suite(sites=["shopping"])), concurrency=3
    ),
    "shopping_admin": Case(
        lambda: _first_task_per_template(select(build_suite(SuiteSpec()), site="shopping_admin")),
        concurrency=3,
        wrong_answer="I do not know 0",
    ),
    "reddit": Case(lambda: _first_test_task_per_template(build_suite(sites=["reddit"]))),
    "gitlab": Case(
        lambda: _first_test_task_per_template(build_suite(sites=["gitlab"]), GITLAB_IN_BROWSER),
        count=len(GITLAB_IN_BROWSER),
    ),
    "map": Case(
        lambda: _first_test_task_per_template(build_suite(sites=["map"]), MAP_IN_BROWSER),
        count=len(MAP_IN_BROWSER),
    ),
    "cross_site": Case(_cross_site_tasks, count=len(CROSS_IN_BROWSER), page_shows="Other sites"),
}


def _template_count(module: str) -> int:
    from importlib import import_module

    return len(import_module(f"{templates_pkg.__name__}.{module}").TEMPLATES)


def test_every_template_module_has_a_case() -> None:
    modules = {m.name for m in pkgutil.iter_modules(templates_pkg.__path__)} - {"common"}
    assert set(CASES) == modules


@pytest.mark.browser
@pytest.mark.timeout(300)
@pytest.mark.parametrize("module", list(CASES))
async def test_expert_succeeds_and_a_wrong_exit_fails(
    module: str, browser: Browser, embedded_sites: EmbeddedSites
) -> None:
    from webagent_r1.checks.tasks import check_tasks
    from webagent_r1.config import EnvConfig, ObservationConfig
    from webagent_r1.grading.embedded import evaluate
    from webagent_r1.rollout.env import WebEnv

    case = CASES[module]
    tasks = case.tasks()
    assert len(tasks) == (case.count if case.count is not None else _template_count(module))
    queue = list(tasks)
    scores: dict[str, tuple[float, str]] = {}

    async def wrong() -> None:
        env = WebEnv(browser, EnvConfig(max_turns=5), ObservationConfig(), embedded_sites, evaluate)
        try:
            while queue:
                task = queue.pop()
                obs = await env.reset(task)
                assert case.page_shows in obs.text  # e.g. the way to the task's other site
                r = await env.step(f'<answer>exit(message="{case.wrong_answer}")</answer>')
                assert r.done
                scores[str(task.task_id)] = (r.reward, r.info.get("explanation", ""))
                await env.close_episode()
        finally:
            await env.close()

    # The expert and the wrong policy run side by side (each task on its own instance).
    runs, *_ = await asyncio.gather(
        check_tasks(tasks, concurrency=case.concurrency, sites=embedded_sites),
        *(wrong() for _ in range(2)),
    )
    # A loaded machine can time out a click; such a run gets one more try.
    flaky = [t for t, r in zip(tasks, runs, strict=True) if "timed out" in (r.error or "")]
    if flaky:
        again = {r.task_id: r for r in await check_tasks(flaky, sites=embedded_sites)}
        runs = [again.get(r.task_id, r) for r in runs]
    failed = [(r.task_id, r.error, r.explanation) for r in runs if r.reward != 1.0]
    assert not failed
    assert len(scores) == len(tasks)
    wrong_scored = {k: v for k, v in scores.items() if v[0] != 0.0}
    assert not wrong_scored, wrong_scored


@pytest.mark.browser
@pytest.mark.timeout(300)
async def test_reply_expert_scrolls_to_its_comment_on_a_long_thread(
    embedded_sites: EmbeddedSites,
) -> None:
    """After posting, the browser opens at the new comment's anchor, a screen above the end of
    a long thread. With pages cut at 400 tokens the confirmation (at the top) and the comment
    (below the cut) are both out of view, so the expert scrolls down to its comment."""
    from webagent_r1.checks.tasks import check_tasks
    from webagent_r1.config import ObservationConfig

    tasks = [t for t in build_suite(sites=["reddit"]) if t.task_id == "reddit.reply_post/043"]
    assert len(tasks) == 1
    (run,) = await check_tasks(
        tasks, concurrency=1, obs_cfg=ObservationConfig(max_tokens=400), sites=embedded_sites
    )
    assert run.reward == 1.0, run.error
    why = [s.rationale for s in run.steps]
    after_post = run.steps[why.index("I post the comment.") + 1 :]
    assert [s.action for s in after_post[:-1]] == ['do(action="Scroll Down")'] * (
        len(after_post) - 1
    )
    assert len(after_post) >= 2
    assert after_post[-1].rationale == "My comment is shown in the thread."
