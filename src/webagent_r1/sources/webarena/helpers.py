"""WebArena's program_html helper functions (``func:name(…)`` in a config's url or locator).

- ``shopping_get_latest_order_url()``: URL of the newest order of the shop (REST API with the
  storefront's admin token): ``{shopping}/sales/order/view/order_id/{increment_id}/``.
- ``shopping_get_sku_latest_review_author(sku)`` / ``…_rating(sku)``: nickname / rating
  percent of the last review of a product (REST API); ``""`` when it has none.
- ``reddit_get_post_url(url)``: the post's own URL for a URL inside a post
  (``/f/<forum>/<id>/…`` → ``/f/<forum>/<id>/``); other URLs unchanged.
- ``gitlab_get_project_memeber_role(page, account)``: the role shown for ``@account`` on a
  project's members page; ``""`` when absent.

Calls are parsed (``data.parse_helper_call``), never ``eval``-ed. The REST helpers talk to the
shop from Python, as WebArena's do; their failures are environment errors.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import httpx
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from webagent_r1.grading.base import EnvError
from webagent_r1.sources.webarena.data import parse_helper_call

if TYPE_CHECKING:
    from webagent_r1.sources.webarena.sites import WebArenaSites


class HelperError(EnvError):
    """A helper could not get its answer from the site (not the agent's fault)."""


# -- shopping (Magento REST) ------------------------------------------------------------


async def _shop_get(sites: WebArenaSites, path: str, params: dict[str, str] | None = None) -> Any:
    """GET ``{shopping}{path}`` with an admin bearer token; the decoded JSON."""
    base = sites.url("shopping")
    acc = sites.accounts["shopping_site_admin"]
    async with httpx.AsyncClient(timeout=30.0) as client:
        try:
            r = await client.post(
                f"{base}/rest/default/V1/integration/admin/token",
                json={"username": acc.username, "password": acc.password},
            )
            if r.status_code != 200:
                raise HelperError(
                    f"the shop refused an admin token for {acc.username!r} "
                    f"(HTTP {r.status_code}): {r.text[:200]}"
                )
            token = r.json()
            r = await client.get(
                f"{base}{path}", params=params, headers={"Authorization": f"Bearer {token}"}
            )
        except httpx.HTTPError as e:
            raise HelperError(f"the shop's REST API at {base} failed: {e}") from None
        if r.status_code != 200:
            raise HelperError(f"GET {base}{path} answered HTTP {r.status_code}: {r.text[:200]}")
        try:
            return r.json()
        except ValueError:
            raise HelperError(f"GET {base}{path} did not answer JSON: {r.text[:200]}") from None


async def shopping_get_latest_order_url(sites: WebArenaSites) -> str:
    """URL of the shop's most recently created order (customer-side order page)."""
    data = await _shop_get(
        sites,
        "/rest/V1/orders",
        {
            "searchCriteria[sortOrders][0][field]": "created_at",
            "searchCriteria[sortOrders][0][direction]": "DESC",
            "searchCriteria[pageSize]": "1",
        },
    )
    try:
        order_id = int(data["items"][0]["increment_id"])
    except (KeyError, IndexError, TypeError, ValueError):
        raise HelperError(f"the shop listed no order: {str(data)[:200]}") from None
    return f"{sites.url('shopping')}/sales/order/view/order_id/{order_id}/"


async def _latest_review(sites: WebArenaSites, sku: str) -> dict[str, Any] | None:
    reviews = await _shop_get(sites, f"/rest/V1/products/{sku}/reviews")
    if not isinstance(reviews, list):
        raise HelperError(f"the shop's reviews of {sku!r} are not a list: {str(reviews)[:200]}")
    return reviews[-1] if reviews else None


async def shopping_get_sku_latest_review_author(sites: WebArenaSites, sku: str) -> str:
    """Nickname of the last review of product ``sku``; ``""`` when it has none."""
    review = await _latest_review(sites, sku)
    return "" if review is None else str(review.get("nickname", ""))


async def shopping_get_sku_latest_review_rating(sites: WebArenaSites, sku: str) -> str:
    """Rating percent (``"80"`` …) of the last review of product ``sku``; ``""`` when none."""
    review = await _latest_review(sites, sku)
    if review is None:
        return ""
    try:
        return str(review["ratings"][0]["percent"])
    except (KeyError, IndexError, TypeError):
        raise HelperError(f"the last review of {sku!r} has no rating: {review}") from None


# -- reddit ------------------------------------------------------------------------------


def reddit_get_post_url(url: str) -> str:
    """``scheme://host/f/<forum>/<id>/`` for a URL inside a post; other URLs unchanged.

    >>> reddit_get_post_url("http://r:9999/f/books/123/my-title/comment/9")
    'http://r:9999/f/books/123/'
    >>> reddit_get_post_url("http://r:9999/f/books")
    'http://r:9999/f/books'
    """
    parts = urlparse(url)
    segments = parts.path.split("/")  # "/f/books/123/x" → ["", "f", "books", "123", "x"]
    if len(segments) < 4 or segments[1] != "f":
        return url
    return f"{parts.scheme}://{parts.netloc}/f/{segments[2]}/{segments[3]}/"


# -- gitlab ------------------------------------------------------------------------------

# The members table of a GitLab 15 project page: each row has the account ("@name") in
# td[data-label=Account] … span.gl-avatar-labeled-sublabel and the role in td.col-max-role.
_GITLAB_ROLE_JS = """(account) => {
  const names = document.querySelectorAll(
    "td[data-label='Account'] span.gl-avatar-labeled-sublabel");
  const roles = document.querySelectorAll("td.col-max-role span");
  for (let i = 0; i < names.length; i++) {
    if (names[i].outerText === '@' + account) return roles[i] ? roles[i].outerText : '';
  }
  return '';
}"""


async def gitlab_get_project_memeber_role(page: Page, account_name: str) -> str:
    """The role shown for ``@account_name`` on a project members page; ``""`` if absent."""
    try:
        return str(await page.evaluate(_GITLAB_ROLE_JS, account_name) or "")
    except PlaywrightError:
        return ""


# -- dispatch ----------------------------------------------------------------------------


def _ignoring_sites(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    """Adapt a helper that does not talk to the shop to the ``(sites, *args)`` signature."""

    async def call(sites: WebArenaSites, *args: Any) -> Any:
        out = fn(*args)
        return await out if inspect.isawaitable(out) else out

    return call


IMPLEMENTATIONS: dict[str, Callable[..., Awaitable[Any]]] = {
    "shopping_get_latest_order_url": shopping_get_latest_order_url,
    "shopping_get_sku_latest_review_author": shopping_get_sku_latest_review_author,
    "shopping_get_sku_latest_review_rating": shopping_get_sku_latest_review_rating,
    "reddit_get_post_url": _ignoring_sites(reddit_get_post_url),
    "gitlab_get_project_memeber_role": _ignoring_sites(gitlab_get_project_memeber_role),
}
"""Helper name (``data.HELPERS``) → ``async (sites, *args)``."""


async def call_helper(expr: str, sites: WebArenaSites, page: Page) -> Any:
    """Run a ``func:`` expression of a config.

    ``__last_url__`` inside a string argument becomes the page's current URL and
    ``__page__`` the page, as in WebArena.

    Raises:
        ValueError: not a known helper call (or the wrong number of arguments).
        HelperError: the site could not answer.
    """
    name, raw_args = parse_helper_call(expr)
    args: list[Any] = [
        page if a == "__page__" else a.replace("__last_url__", page.url) for a in raw_args
    ]
    return await IMPLEMENTATIONS[name](sites, *args)
