"""program_html (and url_match) of real WebArena-Lite configs, in real Chromium, against fixture
pages shaped like the real sites; plus one whole episode through ``WebEnv``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from tests.webarena.conftest import FakeJudge
from tests.webarena.fakesites import LATEST_ORDER, FakeSite
from webagent_r1.browser import Browser, BrowserSession
from webagent_r1.config import EnvConfig
from webagent_r1.grading.base import EvalContext
from webagent_r1.rollout.env import WebEnv
from webagent_r1.sources.webarena import WebArenaSites, evaluate
from webagent_r1.sources.webarena.helpers import (
    call_helper,
    reddit_get_post_url,
    shopping_get_latest_order_url,
    shopping_get_sku_latest_review_author,
    shopping_get_sku_latest_review_rating,
)
from webagent_r1.types import Task

pytestmark = pytest.mark.browser


def _by_id(tasks: list[Task]) -> dict[int | str, Task]:
    return {t.task_id: t for t in tasks}


@asynccontextmanager
async def _episode(
    browser: Browser, sites: WebArenaSites, task: Task
) -> AsyncIterator[BrowserSession]:
    """A session as the env prepares it: allowed origins, logins, start page."""
    session = await browser.new_session(allowed_origins=sites.origins(task))
    try:
        await sites.begin(task, session)
        await session.goto(sites.resolve_url(task.start_url))  # may 404 on the fake sites
        yield session
    finally:
        await session.close()


async def _reward(
    task: Task, session: BrowserSession, sites: WebArenaSites, answer: str | None = None
) -> tuple[float, str]:
    ctx = EvalContext(
        task=task,
        answer=answer,
        session=session,
        url=session.page.url,
        instance_id=None,
        backend=sites,
    )
    r = await evaluate(ctx)
    return r.reward, r.explanation


def test_reddit_get_post_url() -> None:
    assert (
        reddit_get_post_url("http://r:9/f/books/12/my-post/comment/5") == "http://r:9/f/books/12/"
    )
    assert reddit_get_post_url("http://r:9/f/books/12") == "http://r:9/f/books/12/"
    assert reddit_get_post_url("http://r:9/f/books") == "http://r:9/f/books"
    assert reddit_get_post_url("http://r:9/user/x/1/2") == "http://r:9/user/x/1/2"


async def test_shopping_rest_helpers(
    wa_sites: WebArenaSites, fake_sites: dict[str, FakeSite]
) -> None:
    shop = fake_sites["shopping"].origin
    assert await shopping_get_latest_order_url(wa_sites) == (
        f"{shop}/sales/order/view/order_id/{int(LATEST_ORDER)}/"
    )
    assert await shopping_get_sku_latest_review_author(wa_sites, "B07PQ5P2VF") == "Jay"
    assert await shopping_get_sku_latest_review_rating(wa_sites, "B07PQ5P2VF") == "80"
    assert await shopping_get_sku_latest_review_author(wa_sites, "NOPE") == ""
    assert await shopping_get_sku_latest_review_rating(wa_sites, "NOPE") == ""


async def test_rest_helper_failure_is_an_env_error(fake_sites: dict[str, FakeSite]) -> None:
    from webagent_r1.sources.webarena import Account, HelperError

    sites = WebArenaSites(
        {"shopping": fake_sites["shopping"].base_url},
        accounts={"shopping_site_admin": Account("admin", "nope")},
    )
    with pytest.raises(HelperError, match="refused an admin token"):
        await shopping_get_latest_order_url(sites)


async def test_reddit_post_task_144(
    browser: Browser, wa_sites: WebArenaSites, lite_tasks: list[Task], fake_sites: dict
) -> None:
    # url_match __REDDIT__/f/gaming, then func:reddit_get_post_url('__last_url__') and the
    # post's title (exact_match) and body (must_include, curly apostrophe included).
    task = _by_id(lite_tasks)[144]
    reddit = fake_sites["reddit"].origin
    async with _episode(browser, wa_sites, task) as session:
        assert fake_sites["reddit"].logins[-1] == "MarvelsGrantMan136"
        assert await session.goto(f"{reddit}/f/gaming/12/real-user-feedback/comment/3") is None
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 1.0, why
        assert session.page.url == f"{reddit}/f/gaming/12/"  # the helper's URL was opened
        # Ending on the forum page instead: url_match passes, the post is not found.
        assert await session.goto(f"{reddit}/f/gaming") is None
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 0.0 and "program_html[0]" in why


async def test_map_task_158_reads_form_values(
    browser: Browser, wa_sites: WebArenaSites, lite_tasks: list[Task], fake_sites: dict
) -> None:
    # selectedIndex (a number: str() gives "1") and the values of inputs found by
    # WebArena's unclosed selectors ('[name="route_from"').
    task = _by_id(lite_tasks)[158]
    async with _episode(browser, wa_sites, task) as session:
        assert await session.goto(fake_sites["map"].origin + "/directions") is None
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 1.0, why
        await session.page.select_option("select.routing_engines", "fossgis_osrm_foot")
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 0.0 and "selectedIndex" in why


async def test_latest_order_task_117(
    browser: Browser, wa_sites: WebArenaSites, lite_tasks: list[Task], fake_sites: dict
) -> None:
    # url func:shopping_get_latest_order_url() (REST) → the order page, needing the login.
    task = _by_id(lite_tasks)[117]
    async with _episode(browser, wa_sites, task) as session:
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 1.0, why
        assert session.page.url.endswith(f"/sales/order/view/order_id/{int(LATEST_ORDER)}/")
    other = _by_id(lite_tasks)[118]  # the same check for another product: not in the order
    async with _episode(browser, wa_sites, other) as session:
        reward, why = await _reward(other, session, wa_sites)
        assert reward == 0.0 and "B01J4MM3KO" in why


async def test_gitlab_member_role_task_112(
    browser: Browser, wa_sites: WebArenaSites, lite_tasks: list[Task]
) -> None:
    task = _by_id(lite_tasks)[112]  # vinta must be a Guest of byteblaze/dotfiles
    async with _episode(browser, wa_sites, task) as session:
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 1.0, why
        role = await call_helper(
            "func:gitlab_get_project_memeber_role(__page__, 'byteblaze')", wa_sites, session.page
        )
        assert role == "Owner"
        missing = "func:gitlab_get_project_memeber_role(__page__, 'nobody')"
        assert await call_helper(missing, wa_sites, session.page) == ""
    task130 = _by_id(lite_tasks)[130]  # two members who are not in the fixture's table
    async with _episode(browser, wa_sites, task130) as session:
        reward, _ = await _reward(task130, session, wa_sites)
        assert reward == 0.0


async def test_admin_product_task_160(
    browser: Browser, wa_sites: WebArenaSites, lite_tasks: list[Task]
) -> None:
    task = _by_id(lite_tasks)[160]  # qty "5" and is_in_stock "1" on the product's edit page
    async with _episode(browser, wa_sites, task) as session:
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 1.0, why
        assert session.page.url.endswith("/admin/catalog/product/edit/id/872/")


async def test_whole_page_task_29(
    browser: Browser, wa_sites: WebArenaSites, lite_tasks: list[Task], fake_sites: dict
) -> None:
    task = _by_id(lite_tasks)[29]  # empty locator: the page's HTML must include both phrases
    async with _episode(browser, wa_sites, task) as session:
        reward, _ = await _reward(task, session, wa_sites)
        assert reward == 0.0  # the start page (404 here) does not mention them
        shop = fake_sites["shopping"].origin
        assert await session.goto(f"{shop}/catalogsearch/result/?q=jaw+bruxism") is None
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 1.0, why


async def test_fuzzy_form_text_task_142(
    browser: Browser,
    wa_sites: WebArenaSites,
    lite_tasks: list[Task],
    fake_sites: dict,
    judge_server: FakeJudge,
) -> None:
    # url_match __SHOPPING__/contact, then the textarea's value judged against
    # "refund, broke after three days of use, 148, B003FVW3VA".
    task = _by_id(lite_tasks)[142]
    async with _episode(browser, wa_sites, task) as session:
        assert await session.goto(fake_sites["shopping"].origin + "/contact") is None
        box = '[title="What’s on your mind?"]'
        await session.page.fill(box, "Hello")
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 0.0 and len(judge_server.requests) == 1
        text = "I want a refund for order 148 (B003FVW3VA): it broke after three days of use."
        await session.page.fill(box, text)
        reward, why = await _reward(task, session, wa_sites)
        assert reward == 1.0, why
        prompt = judge_server.requests[-1]["body"]["messages"][-1]["content"]
        assert "reference answer: refund, broke after three days of use, 148, B003FVW3VA" in prompt


async def test_whole_episode_through_webenv(
    browser: Browser, wa_sites: WebArenaSites, fake_sites: dict
) -> None:
    """reset (login, several start pages) → exit → WebArena's reward, through WebEnv."""
    reddit = "__REDDIT__"
    task = Task(
        task_id="episode",
        intent="Open the post about the racing wheel and tell me who wrote it",
        start_url=f"{reddit}/ |AND| {reddit}/f/gaming/12/real-user-feedback",
        sites=["reddit"],
        storage_state="./.auth/reddit_state.json",
        eval={
            "eval_types": ["string_match", "url_match", "program_html"],
            "reference_answers": {"must_include": ["MarvelsGrantMan136"]},
            "reference_url": f"{reddit}/f/gaming/12",
            "url_note": "GOLD in PRED",
            "program_html": [
                {
                    "url": "last",
                    "locator": "document.querySelector('.submission__title').outerText",
                    "required_contents": {"must_include": ["Racing Wheel |OR| steering wheel"]},
                }
            ],
        },
        evaluator=evaluate,
    )
    env = WebEnv(browser, EnvConfig(max_turns=3), backend=wa_sites)
    try:
        obs = await env.reset(task)
        assert obs.url == fake_sites["reddit"].origin + "/f/gaming/12/real-user-feedback"
        assert obs.error is None
        result = await env.step('<answer>exit(message="It was MarvelsGrantMan136")</answer>')
        assert result.done and result.reward == 1.0, result.info
        obs = await env.reset(task)
        back = await env.step("<answer>go_backward()</answer>")  # the first start page
        assert back.observation.url == fake_sites["reddit"].origin + "/"
        result = await env.step('<answer>exit(message="MarvelsGrantMan136")</answer>')
        assert result.done and result.reward == 0.0  # right answer, wrong final page
        assert "url_match: final URL" in result.info["explanation"]
    finally:
        await env.close()
