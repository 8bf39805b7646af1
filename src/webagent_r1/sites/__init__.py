"""Embedded web sites (WebArena-style) with per-episode isolated state.

``SITES`` maps a site name to its :class:`Site`. :func:`start_sites` serves them and returns a
:class:`RunningSites` handle for creating instances, logging users in and locating instance
databases; :func:`serve_forever` backs ``webagent-r1 sites serve``.
"""

from __future__ import annotations

from webagent_r1.sites.base import (
    CONTROL_HEADER,
    DEFAULT_INSTANCE,
    INSTANCE_COOKIE,
    Backend,
    InstanceStore,
    Site,
    SiteUser,
)
from webagent_r1.sites.gitlab import GITLAB
from webagent_r1.sites.map import MAP
from webagent_r1.sites.reddit import REDDIT
from webagent_r1.sites.server import RunningSites, SitesClient, serve_forever, start_sites
from webagent_r1.sites.shopping import SHOPPING
from webagent_r1.sites.shopping_admin import SHOPPING_ADMIN

SITES: dict[str, Site] = {s.name: s for s in (SHOPPING, SHOPPING_ADMIN, REDDIT, MAP, GITLAB)}
"""Registry of the embedded sites by name."""


def ensure_pristine(site_names: list[str] | None = None) -> dict[str, str]:
    """Build (if missing) the pristine databases of the given sites; returns name -> path."""
    return {n: str(SITES[n].backend.ensure_pristine()) for n in (site_names or list(SITES))}


__all__ = [
    "CONTROL_HEADER",
    "DEFAULT_INSTANCE",
    "INSTANCE_COOKIE",
    "SITES",
    "Backend",
    "InstanceStore",
    "RunningSites",
    "Site",
    "SiteUser",
    "SitesClient",
    "ensure_pristine",
    "serve_forever",
    "start_sites",
]
