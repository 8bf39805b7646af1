"""Automatic login to WebArena's sites, in the episode's own browser context.

WebArena ships cookie files (``storage_state``) made by a login script; BrowserGym logs in
through the UI at every reset. We do the latter: one tab per site fills the site's real login
form with WebArena's default account, submits it, checks the form is gone, and closes, so the
session cookies land in the episode's context and nothing outlives the episode. The form
locators are the ones BrowserGym uses against the real sites:

- shopping (Magento storefront): ``/customer/account/login/``, "Email", "Password",
  button "Sign In";
- shopping_admin (Magento admin): the admin URL, "Username", "Password", button "Sign in";
- reddit (Postmill): the front page, link "Log in", "Username", "Password", button "Log in";
- gitlab: ``/users/sign_in``, "Username or email", "Password", button "Sign in".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page

from webagent_r1.grading.base import EnvError


@dataclass(frozen=True)
class Account:
    """A user name (or email) and password."""

    username: str
    password: str


DEFAULT_ACCOUNTS: dict[str, Account] = {
    "shopping": Account("emma.lopez@gmail.com", "Password.123"),
    "shopping_admin": Account("admin", "admin1234"),
    "reddit": Account("MarvelsGrantMan136", "test1234"),
    "gitlab": Account("byteblaze", "hello1234"),
    # The shop's REST API (program_html helpers) uses the admin account of the storefront.
    "shopping_site_admin": Account("admin", "admin1234"),
}
"""WebArena's accounts (``browser_env/env_config.py``): its tasks are written for these users."""


class LoginError(EnvError):
    """Automatic login to a site failed (wrong URL, account, or a changed login form)."""


async def _shopping(page: Page, base: str, acc: Account) -> None:
    await page.goto(f"{base}/customer/account/login/")
    await page.get_by_label("Email", exact=True).fill(acc.username)
    await page.get_by_label("Password", exact=True).fill(acc.password)
    await _submit(page, page.get_by_role("button", name="Sign In"))


async def _shopping_admin(page: Page, base: str, acc: Account) -> None:
    await page.goto(base)
    await page.get_by_label("Username").fill(acc.username)
    await page.get_by_label("Password").fill(acc.password)
    await _submit(page, page.get_by_role("button", name="Sign in"))


async def _reddit(page: Page, base: str, acc: Account) -> None:
    await page.goto(base)
    await page.get_by_role("link", name="Log in").click()
    await page.get_by_label("Username").fill(acc.username)
    await page.get_by_label("Password").fill(acc.password)
    await _submit(page, page.get_by_role("button", name="Log in"))


async def _gitlab(page: Page, base: str, acc: Account) -> None:
    await page.goto(f"{base}/users/sign_in")
    await page.get_by_label("Username or email").fill(acc.username)
    await page.get_by_label("Password").fill(acc.password)
    await _submit(page, page.get_by_role("button", name="Sign in"))


async def _submit(page: Page, button: Locator) -> None:
    # The forms post and redirect: wait for the page after the redirect, not the click.
    async with page.expect_navigation(wait_until="load"):
        await button.click()


LoginFlow = Callable[[Page, str, Account], Awaitable[None]]

FLOWS: dict[str, LoginFlow] = {
    "shopping": _shopping,
    "shopping_admin": _shopping_admin,
    "reddit": _reddit,
    "gitlab": _gitlab,
}
"""Site name → its login flow."""


async def ui_login(page: Page, site: str, base_url: str, account: Account) -> None:
    """Log in to ``site`` at ``base_url`` through its login form, in ``page``'s context.

    Success means the submit led to a page without a visible password field (each site
    shows its form again, with an error, after a failed login).

    Raises:
        LoginError: the site has no login flow, the form was not found or not submitted,
            or the site refused the account.
    """
    flow = FLOWS.get(site)
    if flow is None:
        raise LoginError(f"no login flow for site {site!r}; sites with one: {', '.join(FLOWS)}")
    who = f"login to {site} ({base_url}) as {account.username!r} failed"
    try:
        await flow(page, base_url.rstrip("/"), account)
        still_form = await page.locator("input[type=password]:visible").count()
    except PlaywrightError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise LoginError(f"{who}: {first} (page {page.url})") from e
    if still_form:
        raise LoginError(
            f"{who}: the login form is still shown at {page.url} (wrong account or password?)"
        )
