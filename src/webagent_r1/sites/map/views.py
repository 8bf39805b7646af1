"""Pages of the map ("map", an OpenStreetMap-like site of the city of Riverton).

URL map (all GET; no page changes the database, and reading needs no login):

    /                                   home: search, categories, neighbourhoods
    /search?query=                      places by name, category, street or neighbourhood;
                                        coordinates ("40.44, -79.99") list the nearest places
    /category/{slug}                    places of a category; ?area=<neighbourhood slug>, ?p=
    /place/{id}                         name, category, address, coordinates, opening hours
    /place/{id}/nearby                  ?category=<slug>&radius=<m>: places around it
    /directions                         ?engine=&from=&to= resolves the two places and
                                        redirects to ?engine=&route=lat,lon;lat,lon (the route)
    /login, /logout                     a mapper account (optional)
"""

from __future__ import annotations

import urllib.parse
from typing import Any

from starlette.responses import Response
from starlette.routing import BaseRoute

from webagent_r1.sites.base import Ctx, page, parse_int
from webagent_r1.sites.map import places as q
from webagent_r1.sites.map.geo import (
    DAYS,
    fmt_distance,
    fmt_duration,
    fmt_hours,
    fmt_latlon,
    fmt_radius,
    parse_latlon,
)
from webagent_r1.sites.map.routing import (
    DEFAULT_ENGINE,
    ENGINE_LABELS,
    ENGINES,
    Anchor,
    Graph,
    load_graph,
    route,
    snap,
)

PER_PAGE = 20
NEAREST = 10
"""Places listed for a coordinates search."""


def graph_of(ctx: Ctx) -> Graph:
    """The road graph (no page edits roads, so it is read once per server)."""
    g = ctx.app.cache.get("graph")
    if g is None:
        g = ctx.app.cache["graph"] = load_graph(ctx.db)
    return g


def anchor_of(graph: Graph, place: Any | None, point: tuple[float, float]) -> Anchor:
    """Where a route starts or ends: a place's spot on its street, else the nearest street."""
    if place is not None:
        return Anchor(point[0], point[1], place["edge_id"], place["edge_t"])
    return snap(graph, point[0], point[1])


def site_context(ctx: Ctx) -> dict[str, Any]:
    return {"query": ""}


# --------------------------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------------------------


async def home(ctx: Ctx) -> Response:
    hoods = ctx.db.execute(
        "SELECT n.*, (SELECT COUNT(*) FROM places p WHERE p.neighbourhood_id = n.id) AS n "
        "FROM neighbourhoods n ORDER BY n.id"
    ).fetchall()
    return ctx.render("home.html", categories=q.categories(ctx.db), hoods=hoods)


async def search_page(ctx: Ctx) -> Response:
    query = ctx.arg("query")
    point = parse_latlon(query)
    results: list[dict[str, Any]] = []
    heading = "Search results"
    if point is not None:
        heading = f"Places near {fmt_latlon(*point)}"
        near = q.near_point(ctx.db, *point)[:NEAREST]  # the nearest places only: one page
        results = [{"place": p, "distance": fmt_distance(d)} for d, p in near]
    elif query:
        results = [{"place": p, "distance": None} for p in q.search(ctx.db, query)]
    shown, pager = ctx.page_items(results, PER_PAGE)
    return ctx.render(
        "search.html",
        heading=heading,
        query=query,
        results=shown,
        total=len(results),
        pager=pager,
        address=q.address,
    )


async def category_page(ctx: Ctx) -> Response:
    cat = q.category_by_slug(ctx.db, ctx.request.path_params["slug"])
    if cat is None:
        return ctx.not_found("category")
    area = ctx.arg("area")
    hood = None
    if area:
        hood = ctx.db.execute("SELECT * FROM neighbourhoods WHERE slug = ?", (area,)).fetchone()
        if hood is None:
            return ctx.not_found("neighbourhood")
    where, params = "p.category_id = ?", [cat["id"]]
    if hood is not None:
        where += " AND p.neighbourhood_id = ?"
        params.append(hood["id"])
    rows, pager = ctx.page_rows(
        q.PLACE_COLUMNS,
        f"FROM {q.PLACE_FROM} WHERE {where}",
        params,
        "p.name",
        PER_PAGE,
        count_source=f"FROM places p WHERE {where}",
    )
    return ctx.render(
        "category.html",
        cat=cat,
        hood=hood,
        places=rows,
        total=pager.total,
        pager=pager,
        facets=q.neighbourhood_counts(ctx.db, cat["id"]),
        address=q.address,
    )


async def place_page(ctx: Ctx) -> Response:
    place = q.get_place(ctx.db, ctx.path_int("place_id") or 0)
    if place is None:
        return ctx.not_found("place")
    hours = [
        (DAYS[h["day"]], fmt_hours(h["opens"], h["closes"])) for h in q.hours(ctx.db, place["id"])
    ]
    return ctx.render(
        "place.html",
        place=place,
        address=q.address(place),
        coords=fmt_latlon(place["lat"], place["lon"]),
        hours=hours,
        categories=q.categories(ctx.db),
        radii=[(r, fmt_radius(r)) for r in q.RADII],
        radius=q.DEFAULT_RADIUS,
        category="",
        from_url="/directions?" + urllib.parse.urlencode({"from": place["name"]}),
        to_url="/directions?" + urllib.parse.urlencode({"to": place["name"]}),
    )


async def nearby_page(ctx: Ctx) -> Response:
    place = q.get_place(ctx.db, ctx.path_int("place_id") or 0)
    if place is None:
        return ctx.not_found("place")
    slug = ctx.arg("category")
    cat = q.category_by_slug(ctx.db, slug) if slug else None
    radius = parse_int(ctx.arg("radius"), q.DEFAULT_RADIUS)
    if radius not in q.RADII:
        radius = q.DEFAULT_RADIUS
    found = q.nearby(ctx.db, place, cat["id"] if cat else None, radius)
    shown, pager = ctx.page_items(found, PER_PAGE)
    what = cat["plural"].capitalize() if cat else "Places"
    return ctx.render(
        "nearby.html",
        place=place,
        heading=f"{what} within {fmt_radius(radius)} of {place['name']}",
        results=[{"place": p, "distance": fmt_distance(d)} for d, p in shown],
        total=len(found),
        pager=pager,
        categories=q.categories(ctx.db),
        radii=[(r, fmt_radius(r)) for r in q.RADII],
        radius=radius,
        category=cat["slug"] if cat else "",
        address=q.address,
    )


def _engine(ctx: Ctx) -> str:
    engine = ctx.arg("engine")
    return engine if engine in ENGINES else DEFAULT_ENGINE


def _point_param(p: tuple[float, float]) -> str:
    return f"{p[0]:.5f},{p[1]:.5f}"


def parse_route(arg: str) -> list[tuple[float, float]] | None:
    """``"40.43,-80.01;40.44,-79.99"`` -> the two points, or None when malformed."""
    parts = arg.split(";")
    points = [parse_latlon(x) for x in parts]
    if len(parts) != 2 or any(p is None for p in points):
        return None
    return [p for p in points if p is not None]


def _route_result(ctx: Ctx, points: list[tuple[float, float]], engine: str) -> dict | str:
    """The route between two points for the page, or a message saying why there is none."""
    ends = [q.place_at(ctx.db, fmt_latlon(*p)) for p in points]
    labels = [e["name"] if e else fmt_latlon(*p) for e, p in zip(ends, points, strict=True)]
    graph = graph_of(ctx)
    anchors = [anchor_of(graph, e, p) for e, p in zip(ends, points, strict=True)]
    r = route(graph, anchors[0], anchors[1], ENGINES[engine])
    if r is None:
        return "No route was found between these points."
    return {
        "mode": ENGINE_LABELS[engine],
        "from": labels[0],
        "to": labels[1],
        "distance": fmt_distance(r.distance_m),
        "time": fmt_duration(r.seconds),
        "steps": r.steps,
    }


async def directions_page(ctx: Ctx) -> Response:
    engine = _engine(ctx)
    form = {"from": ctx.arg("from"), "to": ctx.arg("to"), "engine": engine}
    common = {"engines": ENGINE_LABELS, "result": None, "problems": []}

    # 1) a route given by coordinates: compute and show it
    route_arg = ctx.arg("route")
    if route_arg and not (form["from"] or form["to"]):
        points = parse_route(route_arg)
        if points is None:
            problem = "The route parameter must be 'lat,lon;lat,lon'."
            return ctx.render("directions.html", form=form, **{**common, "problems": [problem]})
        result = _route_result(ctx, points, engine)
        if isinstance(result, str):
            return ctx.render("directions.html", form=form, **{**common, "problems": [result]})
        form.update({"from": result["from"], "to": result["to"]})
        return ctx.render("directions.html", form=form, **{**common, "result": result})

    # 2) typed places: resolve both, then redirect to the canonical route URL
    if form["from"] and form["to"]:
        ends_r = [q.resolve(ctx.db, form["from"]), q.resolve(ctx.db, form["to"])]
        points = [e.point for e in ends_r if e.point is not None]
        if len(points) == 2:
            route_param = ";".join(_point_param(p) for p in points)
            return ctx.redirect(
                "/directions?" + urllib.parse.urlencode({"engine": engine, "route": route_param})
            )
        problems = []
        for label, e in zip(("From", "To"), ends_r, strict=True):
            if e.ok:
                continue
            msg = f"{label}: no place found for '{e.text}'."
            if e.suggestions:
                msg += " Did you mean: " + "; ".join(e.suggestions) + "?"
            problems.append(msg)
        return ctx.render("directions.html", form=form, **{**common, "problems": problems})

    # 3) the empty or half-filled form
    return ctx.render("directions.html", form=form, **common)


def routes() -> list[BaseRoute]:
    return [
        page("/", home),
        page("/search", search_page),
        page("/category/{slug}", category_page),
        page("/place/{place_id:id}", place_page),
        page("/place/{place_id:id}/nearby", nearby_page),
        page("/directions", directions_page),
    ]
