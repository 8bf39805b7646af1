"""The map ("map"): an OpenStreetMap-like site of the small city of Riverton, served on port 3000.

Search places by name, category, street or coordinates; read a place's address, coordinates
and opening hours; find places nearby; get directions by car, bicycle or on foot, routed by
Dijkstra on a seeded road graph. Reading needs no login (as on WebArena's map); a mapper
account exists for the login page. Episodes still get their own instance of the database.
"""

from __future__ import annotations

from pathlib import Path

from webagent_r1.sites.base import Site
from webagent_r1.sites.map import views
from webagent_r1.sites.map.db import MAP_BACKEND, MAP_USERS, SITE_VERSION

MAP = Site(
    name="map",
    title="OpenStreetMap",
    default_port=3000,
    backend=MAP_BACKEND,
    routes=views.routes,
    templates_dir=Path(__file__).parent / "templates",
    users=MAP_USERS,
    context=views.site_context,
)
"""The map site."""

__all__ = ["MAP", "MAP_BACKEND", "SITE_VERSION"]
