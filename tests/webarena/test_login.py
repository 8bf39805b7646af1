"""Automatic login per site, in real Chromium, against fixture pages shaped like the real forms."""

from __future__ import annotations

import pytest

from tests.webarena.fakesites import FakeSite
from webagent_r1.browser import Browser
from webagent_r1.sources.webarena import DEFAULT_ACCOUNTS, Account, LoginError, WebArenaSites
from webagent_r1.types import Task

pytestmark = pytest.mark.browser

# site → a page only a logged-in user sees, and a text on it.
PROTECTED = {
    "shopping": ("/customer/account/", "Welcome, Emma Lopez!"),
    "shopping_admin": ("/admin/admin/dashboard/", "Dashboard"),
    "reddit": ("/", "MarvelsGrantMan136"),
    "gitlab": ("/", "Projects"),
}


def _task(site: str, storage_state: str | None = "") -> Task:
    return Task(
        task_id=f"login-{site}",
        intent="x",
        start_url=f"__{site.upper()}__",
        sites=[site],
        storage_state=f"./.auth/{site}_state.json" if storage_state == "" else storage_state,
        eval={"eval_types": ["string_match"], "reference_answers": {"exact_match": "x"}},
    )


@pytest.mark.parametrize("site", list(PROTECTED))
async def test_login_flow(
    browser: Browser, wa_sites: WebArenaSites, fake_sites: dict[str, FakeSite], site: str
) -> None:
    fake, task = fake_sites[site], _task(site)
    session = await browser.new_session(allowed_origins=wa_sites.origins(task))
    try:
        before = len(fake.logins)
        assert await wa_sites.begin(task, session) is None
        assert fake.logins[before:] == [DEFAULT_ACCOUNTS[site].username]
        assert len(session.pages) == 1  # the login tab was closed
        # The session cookie is in the episode's context: a protected page opens.
        path, text = PROTECTED[site]
        assert await session.goto(fake.origin + path) is None
        assert session.page.url == fake.origin + path  # not sent back to the login form
        assert text in await session.page.inner_text("body")
    finally:
        await session.close()
    # A new episode's context starts logged out.
    other = await browser.new_session(allowed_origins=wa_sites.origins(task))
    try:
        assert await other.context.cookies() == []
    finally:
        await other.close()


async def test_two_site_login(
    browser: Browser, wa_sites: WebArenaSites, fake_sites: dict[str, FakeSite]
) -> None:
    task = _task("gitlab", storage_state="./.auth/gitlab.reddit_state.json")
    task.sites = ["gitlab", "reddit"]
    session = await browser.new_session(allowed_origins=wa_sites.origins(task))
    try:
        await wa_sites.begin(task, session)
        names = {c["name"] for c in await session.context.cookies()}
        assert names == {"wa_gitlab", "wa_reddit"}
        assert fake_sites["gitlab"].logins[-1] == "byteblaze"
        assert fake_sites["reddit"].logins[-1] == "MarvelsGrantMan136"
    finally:
        await session.close()


async def test_no_storage_state_means_no_login(
    browser: Browser, wa_sites: WebArenaSites, fake_sites: dict[str, FakeSite]
) -> None:
    task = _task("shopping_admin", storage_state=None)
    session = await browser.new_session(allowed_origins=wa_sites.origins(task))
    try:
        before = list(fake_sites["shopping_admin"].requests)
        await wa_sites.begin(task, session)
        assert fake_sites["shopping_admin"].requests == before  # not even visited
    finally:
        await session.close()


async def test_wrong_password_is_a_clear_error(
    browser: Browser, fake_sites: dict[str, FakeSite]
) -> None:
    sites = WebArenaSites(
        {"gitlab": fake_sites["gitlab"].base_url},
        accounts={"gitlab": Account("byteblaze", "wrong")},
    )
    task = _task("gitlab")
    session = await browser.new_session(allowed_origins=sites.origins(task))
    try:
        with pytest.raises(
            LoginError, match=r"login to gitlab .* as 'byteblaze' failed: the login"
        ):
            await sites.begin(task, session)
    finally:
        await session.close()


async def test_site_down_is_a_clear_error(browser: Browser) -> None:
    sites = WebArenaSites({"reddit": "http://127.0.0.1:9"})
    task = _task("reddit")
    session = await browser.new_session(allowed_origins=sites.origins(task))
    try:
        with pytest.raises(LoginError, match=r"login to reddit \(http://127.0.0.1:9\).*failed"):
            await sites.begin(task, session)
    finally:
        await session.close()
