"""Queries over the map's places: lookup, search, nearby, and resolving what a user typed.

Pure functions of a database connection, shared by the pages and the task samplers.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from webagent_r1.sites.map.geo import fmt_latlon, fold, haversine_m, parse_latlon
from webagent_r1.sites.words import singular

PLACE_COLUMNS = (
    "p.*, c.slug AS category_slug, c.name AS category, c.plural AS category_plural, "
    "n.name AS neighbourhood, n.slug AS neighbourhood_slug, n.postcode AS postcode"
)
PLACE_FROM = (
    "places p JOIN categories c ON c.id = p.category_id "
    "JOIN neighbourhoods n ON n.id = p.neighbourhood_id"
)
RADII = (250, 500, 1000, 2000, 5000)
"""Radius choices of the nearby search, in meters."""
DEFAULT_RADIUS = 1000


def all_places(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Every place with its category and neighbourhood, by id."""
    return conn.execute(f"SELECT {PLACE_COLUMNS} FROM {PLACE_FROM} ORDER BY p.id").fetchall()


def get_place(conn: sqlite3.Connection, place_id: int) -> sqlite3.Row | None:
    """One place with its category and neighbourhood, or None."""
    return conn.execute(
        f"SELECT {PLACE_COLUMNS} FROM {PLACE_FROM} WHERE p.id = ?", (place_id,)
    ).fetchone()


def categories(conn: sqlite3.Connection) -> list[sqlite3.Row]:
    """Categories in menu order, with their number of places."""
    return conn.execute(
        "SELECT c.*, (SELECT COUNT(*) FROM places p WHERE p.category_id = c.id) AS n "
        "FROM categories c ORDER BY c.position"
    ).fetchall()


def category_by_slug(conn: sqlite3.Connection, slug: str) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM categories WHERE slug = ?", (slug,)).fetchone()


def neighbourhood_counts(conn: sqlite3.Connection, category_id: int) -> list[sqlite3.Row]:
    """The neighbourhoods with places of a category: slug, name and ``n`` places, in order."""
    return conn.execute(
        "SELECT n.slug, n.name, COUNT(p.id) AS n FROM neighbourhoods n "
        "JOIN places p ON p.neighbourhood_id = n.id AND p.category_id = ? "
        "GROUP BY n.id ORDER BY n.id",
        (category_id,),
    ).fetchall()


def hours(conn: sqlite3.Connection, place_id: int) -> list[sqlite3.Row]:
    """Opening hours of a place, Monday first."""
    return conn.execute(
        "SELECT day, opens, closes FROM place_hours WHERE place_id = ? ORDER BY day", (place_id,)
    ).fetchall()


def address(place: Any) -> str:
    """``412 Water Street, Riverton, PA 15201``."""
    return f"{place['house_number']} {place['street']}, Riverton, PA {place['postcode']}"


def street_address(place: Any) -> str:
    """``412 Water Street``."""
    return f"{place['house_number']} {place['street']}"


def _words(text: str) -> list[str]:
    return [singular(w) for w in fold(text).split()]


def category_for_query(conn: sqlite3.Connection, query: str) -> sqlite3.Row | None:
    """The category a query names as a whole (``pharmacies``, ``gas``, ``Café``), if any."""
    want = " ".join(_words(query))
    if not want:
        return None
    for c in conn.execute("SELECT * FROM categories ORDER BY position"):
        names = [c["slug"], c["name"], c["plural"], *c["synonyms"].split()]
        if want in {" ".join(_words(n)) for n in names}:
            return c
    return None


def search(conn: sqlite3.Connection, query: str) -> list[sqlite3.Row]:
    """Places matching a free-text query, best first.

    A query naming a category lists that category's places (by name). Otherwise every query
    word must occur in the place's name, category, street or neighbourhood (plurals folded);
    an exact name comes first, then names starting with the query, then names holding every
    word, then the rest, each group by name.
    """
    cat = category_for_query(conn, query)
    if cat is not None:
        return conn.execute(
            f"SELECT {PLACE_COLUMNS} FROM {PLACE_FROM} WHERE p.category_id = ? ORDER BY p.name",
            (cat["id"],),
        ).fetchall()
    words = _words(query)
    if not words:
        return []
    q = fold(query)
    scored = []
    for p in all_places(conn):
        name_words = " ".join(_words(p["name"]))
        hay = " ".join(_words(f"{p['name']} {p['category']} {p['street']} {p['neighbourhood']}"))
        if not all(w in hay for w in words):
            continue
        name = fold(p["name"])
        if name == q:
            rank = 0
        elif name.startswith(q):
            rank = 1
        elif all(w in name_words for w in words):
            rank = 2
        else:
            rank = 3
        scored.append((rank, p["name"], p))
    scored.sort(key=lambda x: (x[0], x[1]))
    return [p for _, _, p in scored]


def near_point(
    conn: sqlite3.Connection, lat: float, lon: float, category_id: int | None = None
) -> list[tuple[float, sqlite3.Row]]:
    """Places by straight-line distance from a point: ``[(meters, place)]``, nearest first."""
    rows = all_places(conn)
    out = [
        (haversine_m(lat, lon, p["lat"], p["lon"]), p)
        for p in rows
        if category_id is None or p["category_id"] == category_id
    ]
    out.sort(key=lambda x: (x[0], x[1]["name"]))
    return out


def nearby(
    conn: sqlite3.Connection, place: Any, category_id: int | None, radius_m: float
) -> list[tuple[float, sqlite3.Row]]:
    """Other places within ``radius_m`` (straight line) of ``place``, nearest first."""
    return [
        (d, p)
        for d, p in near_point(conn, place["lat"], place["lon"], category_id)
        if p["id"] != place["id"] and d <= radius_m
    ]


def place_at(conn: sqlite3.Connection, latlon: str) -> sqlite3.Row | None:
    """The place whose coordinates, as shown (5 decimals), are exactly ``latlon``."""
    point = parse_latlon(latlon)
    if point is None:
        return None
    key = fmt_latlon(*point)
    for p in conn.execute(
        f"SELECT {PLACE_COLUMNS} FROM {PLACE_FROM} WHERE abs(p.lat - ?) < 1e-6 "
        "AND abs(p.lon - ?) < 1e-6",
        point,
    ):
        if fmt_latlon(p["lat"], p["lon"]) == key:
            return p
    return None


@dataclass
class Resolved:
    """What a typed "From"/"To" value means: a place, a bare point, or nothing (+ suggestions)."""

    text: str
    place: sqlite3.Row | None = None
    point: tuple[float, float] | None = None
    suggestions: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.point is not None

    @property
    def label(self) -> str:
        if self.place is not None:
            return self.place["name"]
        return fmt_latlon(*self.point) if self.point else self.text


def resolve(conn: sqlite3.Connection, text: str) -> Resolved:
    """Resolve a typed location: coordinates, an exact place name, or a unique search hit."""
    text = text.strip()
    if not text:
        return Resolved(text)
    point = parse_latlon(text)
    if point is not None:
        place = place_at(conn, text)
        return Resolved(text, place, (place["lat"], place["lon"]) if place else point)
    hits = search(conn, text)
    exact = [p for p in hits if fold(p["name"]) == fold(text)]
    if len(exact) == 1 or len(hits) == 1:
        p = exact[0] if exact else hits[0]
        return Resolved(text, p, (p["lat"], p["lon"]))
    return Resolved(text, suggestions=tuple(p["name"] for p in hits[:5]))
