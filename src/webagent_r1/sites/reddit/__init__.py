"""The forum ("reddit"): WebArena's Postmill, a Reddit-like forum, served on port 9999."""

from __future__ import annotations

from webagent_r1.sites.base import Site
from webagent_r1.sites.reddit import views
from webagent_r1.sites.reddit.db import DEFAULT_USER, REDDIT_BACKEND, REDDIT_USERS, SITE_VERSION

REDDIT = Site.from_views(views, "Postmill", 9999, REDDIT_BACKEND, REDDIT_USERS, login_redirect="/")
"""The forum site."""

__all__ = ["DEFAULT_USER", "REDDIT", "REDDIT_BACKEND", "SITE_VERSION"]
