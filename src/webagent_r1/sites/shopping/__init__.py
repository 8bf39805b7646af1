"""The shop ("shopping"): WebArena's OneStopShop storefront, served on port 7770."""

from __future__ import annotations

from pathlib import Path

from webagent_r1.sites.base import Site
from webagent_r1.sites.shopping import views
from webagent_r1.sites.shopping.db import SHOP_BACKEND, SHOP_USERS, SITE_VERSION

SHOPPING = Site(
    name="shopping",
    title="One Stop Market",
    default_port=7770,
    backend=SHOP_BACKEND,
    routes=views.routes,
    templates_dir=Path(__file__).parent / "templates",
    users=SHOP_USERS,
    login_check=views.login_check,
    on_login=views.on_login,
    context=views.site_context,
    login_redirect="/account",
)
"""The storefront site."""

__all__ = ["SHOPPING", "SHOP_BACKEND", "SITE_VERSION"]
