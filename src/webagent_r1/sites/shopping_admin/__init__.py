"""The shop's admin panel ("shopping_admin"): WebArena's Magento admin, served on port 7780.

It shares the ``shopping`` backend, so an edit here (a price, an order status, an approved
review) shows in the shop for the same instance.
"""

from __future__ import annotations

from pathlib import Path

from webagent_r1.sites.base import Site
from webagent_r1.sites.shopping.db import ADMIN_USERS, SHOP_BACKEND
from webagent_r1.sites.shopping_admin import views

SHOPPING_ADMIN = Site(
    name="shopping_admin",
    title="One Stop Market Admin",
    default_port=7780,
    backend=SHOP_BACKEND,
    routes=views.routes,
    templates_dir=Path(__file__).parent / "templates",
    users=ADMIN_USERS,
    admin_only=True,
)
"""The admin site."""

__all__ = ["SHOPPING_ADMIN"]
