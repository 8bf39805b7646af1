"""The viewer page in real headless Chromium, opened from disk (file://)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

from tests.view.conftest import INJECTION, TASKS
from webagent_r1.browser import find_chromium
from webagent_r1.browser.launch import CHROMIUM_ARGS
from webagent_r1.report.viewer import build_viewer

pytestmark = pytest.mark.browser


@pytest.fixture
async def viewer(run_dir: Path) -> AsyncIterator[tuple[Page, list[str], list[str]]]:
    """The page of ``run_dir`` open in Chromium, with the dialogs and requests it made.

    The project's ``Browser`` refuses file:// by design (its allow-list), so this launches
    Playwright's Chromium directly with the same executable discovery and flags.
    """
    path = build_viewer(run_dir, tasks=TASKS)
    dialogs: list[str] = []
    requests: list[str] = []
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=find_chromium(), headless=True, args=list(CHROMIUM_ARGS)
        )
        page = await browser.new_page()

        async def on_dialog(d) -> None:
            dialogs.append(d.message)
            await d.dismiss()

        page.on("dialog", on_dialog)
        page.on("request", lambda r: requests.append(r.url))
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(path.resolve().as_uri())
        yield page, dialogs, requests
        assert errors == [], errors
        await browser.close()


async def test_list_filters_and_expand(viewer) -> None:
    page, dialogs, requests = viewer
    rows = page.locator("tr.ep:visible")
    assert await rows.count() == 4
    # No success rate over the two stages together: one per stage, in the stage table.
    summary = await page.locator("#summary").inner_text()
    assert "4 episodes in 2 stages" in summary and "%" not in summary
    assert "1 malformed line(s) skipped" in await page.locator("#warnings").inner_text()
    stages = page.locator("#stages tr.stage")
    assert [await stages.nth(k).inner_text() for k in range(2)] == [
        "rollouts: RL step 2\t2\t1 / 2\t50.0%",
        "evaluation: RL step 10\t2\t1 / 2\t50.0%",
    ]
    shown = page.locator("#shown")
    assert await shown.inner_text() == (
        "showing 4 of 4 from 2 stages · pick a stage for its success rate"
    )

    # Picking a stage (its row in the table, or the filter) lists its episodes and its rate.
    await stages.nth(0).click()
    assert await page.locator("#f-stage").input_value() == "rollouts: RL step 2"
    assert await rows.count() == 2
    assert "rollouts: RL step 2 · success 1 / 2 (50.0%)" in await shown.inner_text()
    await stages.nth(0).click()  # again: every stage
    assert await rows.count() == 4
    await page.select_option("#f-stage", "evaluation: RL step 10")
    assert {await rows.nth(k).get_attribute("data-stage") for k in range(2)} == {
        "evaluation: RL step 10"
    }
    await page.select_option("#f-success", "failure")
    assert await rows.count() == 1
    assert "success 0 / 1 (0.0%)" in await shown.inner_text()
    await page.select_option("#f-stage", "")

    assert await rows.count() == 2
    for k in range(2):
        assert await rows.nth(k).get_attribute("data-success") == "0"
    assert "showing 2 of 4" in await shown.inner_text()

    await page.select_option("#f-success", "")
    await page.select_option("#f-site", "forum")
    assert await rows.count() == 2
    assert {await rows.nth(k).get_attribute("data-site") for k in range(2)} == {"forum"}
    await page.select_option("#f-success", "success")
    assert await rows.count() == 1
    assert "forum.reply/002" in await rows.first.inner_text()

    await page.select_option("#f-site", "")
    await page.select_option("#f-success", "")
    await page.fill("#f-search", "OWLS")
    assert await rows.count() == 1
    await page.fill("#f-search", "")
    assert await rows.count() == 4

    # Expanding the failing episode shows its intent, thinking (escaped), actions and error.
    await page.locator("tr.ep", has_text="forum.upvote/001").click()
    detail = page.locator("tr.detail:visible")
    assert await detail.count() == 1
    text = await detail.inner_text()
    assert "Upvote the newest post about owls" in text
    assert f"I will try {INJECTION} here." in text
    assert "(no valid action)" in text and "unknown action 'Fly'" in text
    assert 'do(action="Click", element="<img src=x onerror=alert(2)>")' in text
    assert "the post was not upvoted" in text
    assert await detail.locator("script, img:not(.shot)").count() == 0
    # The observation summary is collapsed until opened.
    obs = detail.locator("details.obs").first
    assert not await obs.locator("pre").is_visible()
    await obs.locator("summary").click()
    assert await obs.locator("pre").is_visible()

    # The successful episode has its screenshot inline; clicking again collapses it.
    await page.locator("tr.ep", has_text="shopping.price/000").click()
    assert await page.locator("tr.detail:visible img.shot").count() == 1
    assert (
        "The mug page is linked from the home page."
        in await page.locator("tr.detail:visible", has_text="red mug").inner_text()
    )
    await page.locator("tr.ep", has_text="shopping.price/000").click()
    assert await page.locator("tr.detail:visible").count() == 1

    # A filter hides the open detail with its row.
    await page.select_option("#f-site", "shopping")
    assert await page.locator("tr.detail:visible").count() == 0

    assert dialogs == []
    assert all(u.startswith(("file:", "data:")) for u in requests), requests
