"""The shop's admin panel ("shopping_admin"): WebArena's Magento admin, served on port 7780.

It shares the ``shopping`` backend, so an edit here (a price, an order status, an approved
review) shows in the shop for the same instance.
"""

from __future__ import annotations

from webagent_r1.sites.base import Site
from webagent_r1.sites.shopping.db import ADMIN_USERS, SHOP_BACKEND
from webagent_r1.sites.shopping_admin import views

SHOPPING_ADMIN = Site.from_views(
    views, "One Stop Market Admin", 7780, SHOP_BACKEND, ADMIN_USERS, admin_only=True
)
"""The admin site."""

__all__ = ["SHOPPING_ADMIN"]
