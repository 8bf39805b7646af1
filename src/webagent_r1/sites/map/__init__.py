"""The map ("map"): an OpenStreetMap-like site of the small city of Riverton, served on port 3000.

Search places by name, category, street or coordinates; read a place's address, coordinates
and opening hours; find places nearby; get directions by car, bicycle or on foot, routed by
Dijkstra on a seeded road graph. Reading needs no login (as on WebArena's map); a mapper
account exists for the login page. Episodes still get their own instance of the database.
"""

from __future__ import annotations

from webagent_r1.sites.base import Site
from webagent_r1.sites.map import views
from webagent_r1.sites.map.db import MAP_BACKEND, MAP_USERS, SITE_VERSION

MAP = Site.from_views(views, "OpenStreetMap", 3000, MAP_BACKEND, MAP_USERS)
"""The map site."""

__all__ = ["MAP", "MAP_BACKEND", "SITE_VERSION"]
