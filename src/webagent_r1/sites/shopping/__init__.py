"""The shop ("shopping"): WebArena's OneStopShop storefront, served on port 7770."""

from __future__ import annotations

from webagent_r1.sites.base import Site
from webagent_r1.sites.shopping import views
from webagent_r1.sites.shopping.db import SHOP_BACKEND, SHOP_USERS, SITE_VERSION

SHOPPING = Site.from_views(
    views, "One Stop Market", 7770, SHOP_BACKEND, SHOP_USERS, login_redirect="/account"
)
"""The storefront site."""

__all__ = ["SHOPPING", "SHOP_BACKEND", "SITE_VERSION"]
