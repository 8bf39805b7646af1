"""The forum ("reddit"): WebArena's Postmill, a Reddit-like forum, served on port 9999."""

from __future__ import annotations

from pathlib import Path

from webagent_r1.sites.base import Site
from webagent_r1.sites.reddit import views
from webagent_r1.sites.reddit.db import DEFAULT_USER, REDDIT_BACKEND, REDDIT_USERS, SITE_VERSION

REDDIT = Site(
    name="reddit",
    title="Postmill",
    default_port=9999,
    backend=REDDIT_BACKEND,
    routes=views.routes,
    templates_dir=Path(__file__).parent / "templates",
    users=REDDIT_USERS,
    context=views.site_context,
    login_redirect="/",
)
"""The forum site."""

__all__ = ["DEFAULT_USER", "REDDIT", "REDDIT_BACKEND", "SITE_VERSION"]
