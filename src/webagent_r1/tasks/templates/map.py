"""Task templates of the map site (OpenStreetMap-like map of Riverton, WebArena's map).

The map has no state to change, so tasks are questions (``string_match``) and pages to reach
(``url_match``, with ``program_html`` where the page must show something). Samplers compute
answers with the site's own code (search, straight-line distances, Dijkstra routes, display
formats), so the expected value is exactly what the page shows. The experts use the search
box, place pages, the "What's nearby" form and the directions form, and read answers off the
observation text.

Ids 500-549. Held out (test split only): ``map.cycling_time_saved`` (540),
``map.walk_to_closest`` (541), ``map.open_at_time`` (542), ``map.shortest_walk_of_three``
(543).
"""

from __future__ import annotations

import random
import re
import sqlite3
from collections import Counter
from typing import Any

from webagent_r1.sites.map.geo import (
    DAYS,
    fmt_distance,
    fmt_duration,
    fmt_latlon,
    fmt_radius,
    fold,
    haversine_m,
    is_open_at,
    minutes_of,
)
from webagent_r1.sites.map.places import (
    RADII,
    all_places,
    category_by_slug,
    category_for_query,
    hours,
    nearby,
    street_address,
)
from webagent_r1.sites.map.routing import Anchor, Graph, Route, load_graph, route
from webagent_r1.tasks.experts import (
    Element,
    Expert,
    ExpertError,
    answer,
    click,
    elements,
    find,
    maybe,
    select,
    type_text,
)
from webagent_r1.tasks.experts import search as search_step
from webagent_r1.tasks.templates.common import (
    Params,
    Registry,
    Sub,
    db_memo,
    grab,
    line_after,
    string_eval,
    url_eval,
)
from webagent_r1.types import Observation

START = "__MAP__/"

# mode -> (engine URL value, option label of the Mode dropdown, phrase in intents)
MODES = {
    "car": ("fossgis_osrm_car", "Car", "by car"),
    "bicycle": ("fossgis_osrm_bike", "Bicycle", "by bicycle"),
    "foot": ("fossgis_osrm_foot", "Foot", "on foot"),
}
VERBS = {"car": "drive", "bicycle": "cycle", "foot": "walk"}
TURN_RE = re.compile(r"^Turn (?:slight |sharp )?(?:left|right) onto (.+?) · ", re.MULTILINE)


# --------------------------------------------------------------------------------------------
# Sampling helpers (read the pristine database)
# --------------------------------------------------------------------------------------------


TEMPLATES = Registry(sites=["map"], start_url=START)
"""The module's templates, in the suite's order."""


def searchable_places(conn: sqlite3.Connection) -> list[Any]:
    """Places a search for their full name lists first (unique names that are no category)."""
    memo = db_memo(conn, __name__)
    if "places" not in memo:
        rows = all_places(conn)
        folded = Counter(fold(p["name"]) for p in rows)
        memo["places"] = [
            p
            for p in rows
            if folded[fold(p["name"])] == 1 and category_for_query(conn, p["name"]) is None
        ]
    return memo["places"]


def _graph(conn: sqlite3.Connection) -> Graph:
    memo = db_memo(conn, __name__)
    if "graph" not in memo:
        memo["graph"] = load_graph(conn)
    return memo["graph"]


def _anchor(place: Any) -> Anchor:
    return Anchor(place["lat"], place["lon"], place["edge_id"], place["edge_t"])


def memo_route(conn: sqlite3.Connection, a: Any, b: Any, mode: str) -> Route:
    """The route from ``a`` to ``b`` by ``mode``, computed once per database (memoised)."""
    memo = db_memo(conn, __name__)
    key = ("route", a["id"], b["id"], mode)
    if key not in memo:
        r = route(_graph(conn), _anchor(a), _anchor(b), mode)
        if r is None:
            raise RuntimeError(f"no {mode} route from {a['name']} to {b['name']}")
        memo[key] = r
    return memo[key]


def _dist(a: Any, b: Any) -> float:
    return haversine_m(a["lat"], a["lon"], b["lat"], b["lon"])


def _pair(conn: sqlite3.Connection, rng: random.Random, min_m: float = 500.0) -> tuple[Any, Any]:
    """Two different places at least ``min_m`` apart in a straight line."""
    rows = searchable_places(conn)
    while True:
        a, b = rng.sample(rows, 2)
        if _dist(a, b) >= min_m:
            return a, b


def _route_param(a: Any, b: Any) -> str:
    """The ``route`` URL parameter the site redirects to for a route between two places."""
    return f"{a['lat']:.5f},{a['lon']:.5f};{b['lat']:.5f},{b['lon']:.5f}"


def _directions_url(a: Any, b: Any, mode: str) -> str:
    return f"__MAP__/directions?engine={MODES[mode][0]}&route={_route_param(a, b)}"


def _category_label(cat: Any) -> str:
    """How intents name one place of a category: ``café``, ``fuel station``."""
    return cat["name"].lower()


def _cat_of(conn: sqlite3.Connection, place: Any) -> Any:
    return category_by_slug(conn, place["category_slug"])


def _nearest(conn: sqlite3.Connection, place: Any, cat: Any) -> tuple[Any | None, float]:
    """The nearest other place of a category and the gap to the second nearest."""
    found = nearby(conn, place, cat["id"], max(RADII))
    if not found:
        return None, 0.0
    gap = found[1][0] - found[0][0] if len(found) > 1 else 1e9
    return found[0][1], gap


def display_minutes(text: str) -> int:
    """Minutes of a travel time as the map shows it: ``25 min`` -> 25, ``1 h 05 min`` -> 65."""
    m = re.fullmatch(r"(?:(\d+) h )?(\d+) min", text.strip())
    if not m:
        raise ValueError(f"not a travel time: {text!r}")
    return int(m.group(1) or 0) * 60 + int(m.group(2))


def display_meters(text: str) -> float:
    """Meters of a distance as the map shows it: ``850 m`` -> 850, ``1.2 km`` -> 1200."""
    m = re.fullmatch(r"([\d.]+) (m|km)", text.strip())
    if not m:
        raise ValueError(f"not a distance: {text!r}")
    return float(m.group(1)) * (1000.0 if m.group(2) == "km" else 1.0)


# --------------------------------------------------------------------------------------------
# Expert helpers (read the observation only)
# --------------------------------------------------------------------------------------------


def _search_map(obs: Observation, query: str, why: str) -> Sub:
    box = find(obs, "textbox", "Search")
    obs = yield search_step(box, query, why)
    return obs


def _open_place(obs: Observation, name: str) -> Sub:
    """Search the map for a place by its full name and open its page."""
    obs = yield from _search_map(obs, name, f"I search the map for '{name}'.")
    link = find(obs, "link", name, exact=True)
    obs = yield click(link, f"'{name}' is the first result; I open its page.")
    return obs


def _first_link_after(obs: Observation, role: str, name: str) -> Element:
    """The first link after a given element (the first search or nearby result)."""
    els = elements(obs.text)
    for i, el in enumerate(els):
        if el.role == role and el.name == name:
            for later in els[i + 1 :]:
                if later.role == "link":
                    return later
    raise ExpertError(f"expert: no result listed after {role} {name!r} on {obs.url}")


def _directions(obs: Observation, frm: str | None, to: str, mode: str) -> Sub:
    """Fill the directions form (opening it if needed) and get the route.

    ``frm=None`` keeps the From field as it is (set by an earlier query or a link).
    """
    if maybe(obs, "textbox", "From", exact=True) is None:
        obs = yield click(
            find(obs, "link", "Directions", exact=True),
            "Routes are computed on the Directions page; I open it.",
        )
    if frm is not None and find(obs, "textbox", "From", exact=True).value != frm:
        box = find(obs, "textbox", "From", exact=True)
        obs = yield type_text(box, frm, f"The route starts at {frm}; I type it in From.")
    box = find(obs, "textbox", "To", exact=True)
    if box.value != to:
        obs = yield type_text(box, to, f"The destination is {to}; I type it in To.")
    label = MODES[mode][1]
    mode_box = find(obs, "combobox", "Mode", exact=True)
    if mode_box.value != label:
        obs = yield select(mode_box, label, f"The trip is {MODES[mode][2]}, so I choose {label}.")
    obs = yield click(
        find(obs, "button", "Get Directions", exact=True),
        "Both places and the mode are set; I ask for the route.",
    )
    if "Distance:" not in obs.text:
        raise ExpertError(f"expert: no route shown on {obs.url}")
    return obs


def _summary(obs: Observation) -> tuple[str, str]:
    """(distance, time) of the route shown."""
    m = re.search(r"^Distance: (.+?) · Time: (.+)$", obs.text, re.MULTILINE)
    if not m:
        raise ExpertError(f"expert: no route summary on {obs.url}")
    return m.group(1).strip(), m.group(2).strip()


def _find_nearby(obs: Observation, cat_label: str | None, radius_label: str) -> Sub:
    """On a place page: choose a category and a radius in "What's nearby" and search."""
    box = find(obs, "combobox", "Category", exact=True)
    want = cat_label or "All categories"
    if box.value != want:
        obs = yield select(box, want, f"I look for {want} places, so I choose '{want}'.")
    box = find(obs, "combobox", "Within", exact=True)
    if box.value != radius_label:
        obs = yield select(box, radius_label, f"The search radius should be {radius_label}.")
    obs = yield click(
        find(obs, "button", "Find Nearby", exact=True),
        "Category and radius are set; I list the places nearby.",
    )
    return obs


# --------------------------------------------------------------------------------------------
# 500 info: coordinates of a place
# --------------------------------------------------------------------------------------------


def sample_coordinates(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    return {"place": p["name"], "_lat": f"{p['lat']:.5f}", "_lon": f"{p['lon']:.5f}"}


@TEMPLATES.template(
    id=500,
    name="map.place_coordinates",
    kind="info",
    intent="What are the coordinates of {place}? Answer with latitude and longitude as the "
    "map shows them, like 40.50012, -80.10512.",
    sample=sample_coordinates,
    evaluation=lambda p: string_eval([p["_lat"], p["_lon"]], "must_include"),
    difficulty="3-5",
)
def expert_coordinates(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_place(obs, p["place"])
    coords = grab(obs, r"^Coordinates \| (.+)$", "coordinates").strip()
    yield answer(coords, f"The place page lists Coordinates: {coords}.")


# --------------------------------------------------------------------------------------------
# 501 info: opening time on a weekday
# --------------------------------------------------------------------------------------------


def sample_opening_time(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    day = rng.randrange(7)
    h = hours(conn, p["id"])[day]
    if h["opens"] == "00:00" and rng.random() < 0.8:
        return None  # round-the-clock places: a few are enough
    return {"place": p["name"], "day": DAYS[day], "_answer": h["opens"] or "closed"}


@TEMPLATES.template(
    id=501,
    name="map.opening_time",
    kind="info",
    intent="What time does {place} open on {day}s? Answer with the time like 06:45, or "
    "closed if it does not open that day.",
    sample=sample_opening_time,
    difficulty="3-5",
)
def expert_opening_time(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_place(obs, p["place"])
    h = grab(obs, rf"^{p['day']} \| (.+)$", f"hours for {p['day']}").strip()
    if h == "Closed":
        yield answer("closed", f"The opening hours say {p['day']}: Closed.")
        return
    opens = h.split(" - ")[0]
    yield answer(opens, f"On {p['day']} it is open {h}, so it opens at {opens}.")


# --------------------------------------------------------------------------------------------
# 502 info: street address (read in the search results)
# --------------------------------------------------------------------------------------------


def sample_address(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    return {"place": p["name"], "_answer": street_address(p)}


@TEMPLATES.template(
    id=502,
    name="map.street_address",
    kind="info",
    intent="What is the street address of {place}? Answer with the house number and the "
    "street, like 412 Water Street.",
    sample=sample_address,
    difficulty="1-2",
)
def expert_address(p: Params, obs: Observation) -> Expert:
    obs = yield from _search_map(obs, p["place"], f"I search the map for '{p['place']}'.")
    link = find(obs, "link", p["place"], exact=True)
    m = re.search(r" · (.+?), Riverton", line_after(obs, link))
    if not m:
        raise ExpertError(f"expert: no address under {p['place']}")
    yield answer(m.group(1), f"The result for {p['place']} shows the address {m.group(1)}.")


# --------------------------------------------------------------------------------------------
# 503 info: walking time between two places
# --------------------------------------------------------------------------------------------


def sample_walk_time(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    a, b = _pair(conn, rng)
    r = memo_route(conn, a, b, "foot")
    return {"a": a["name"], "b": b["name"], "_answer": fmt_duration(r.seconds)}


@TEMPLATES.template(
    id=503,
    name="map.walking_time",
    kind="info",
    intent="How long does it take to walk from {a} to {b}? Answer with the time as the map "
    "shows it, like 59 min.",
    sample=sample_walk_time,
    difficulty="6-9",
)
def expert_walk_time(p: Params, obs: Observation) -> Expert:
    obs = yield from _directions(obs, p["a"], p["b"], "foot")
    _, time = _summary(obs)
    yield answer(time, f"The walking route takes {time}.")


# --------------------------------------------------------------------------------------------
# 504 info: driving distance between two places
# --------------------------------------------------------------------------------------------


def sample_drive_distance(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    a, b = _pair(conn, rng)
    r = memo_route(conn, a, b, "car")
    return {"a": a["name"], "b": b["name"], "_answer": fmt_distance(r.distance_m)}


@TEMPLATES.template(
    id=504,
    name="map.driving_distance",
    kind="info",
    intent="What is the driving distance from {a} to {b}? Answer with the distance as the "
    "map shows it, like 12.3 km or 450 m.",
    sample=sample_drive_distance,
    difficulty="3-5",
)
def expert_drive_distance(p: Params, obs: Observation) -> Expert:
    obs = yield from _directions(obs, p["a"], p["b"], "car")
    dist, _ = _summary(obs)
    yield answer(dist, f"The car route is {dist} long.")


# --------------------------------------------------------------------------------------------
# 505 info: the closest place of a category (straight line)
# --------------------------------------------------------------------------------------------


def sample_closest(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    cat = _cat_of(conn, rng.choice(searchable_places(conn)))
    best, gap = _nearest(conn, p, cat)
    if best is None or gap < 30:
        return None
    return {
        "category": _category_label(cat),
        "place": p["name"],
        "_category_option": cat["name"],
        "_answer": best["name"],
        "_id": best["id"],
    }


def _closest_sub(obs: Observation, place: str, category: str) -> Sub:
    """Open a place and list the nearest places of a category; returns (first link, obs)."""
    obs = yield from _open_place(obs, place)
    box = find(obs, "combobox", "Category", exact=True)
    option = next((o for o in re.findall(r'"([^"]+)"', box.line) if o.lower() == category), None)
    if option is None:
        raise ExpertError(f"expert: no category option {category!r}")
    obs = yield from _find_nearby(obs, option, "5 km")
    first = _first_link_after(obs, "button", "Find Nearby")
    return first, obs


@TEMPLATES.template(
    id=505,
    name="map.closest_of_category",
    kind="info",
    intent="Which {category} is closest to {place} in a straight line? Answer with its name.",
    sample=sample_closest,
    difficulty="6-9",
)
def expert_closest(p: Params, obs: Observation) -> Expert:
    first, obs = yield from _closest_sub(obs, p["place"], p["category"])
    yield answer(first.name, f"The nearest {p['category']} listed first is {first.name}.")


# --------------------------------------------------------------------------------------------
# 506 info: how many places of a category within a radius
# --------------------------------------------------------------------------------------------


def sample_count_nearby(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    cat = _cat_of(conn, rng.choice(searchable_places(conn)))
    radius = rng.choice((500, 1000, 1000, 2000))
    n = len(nearby(conn, p, cat["id"], radius))
    if not 1 <= n <= 20:
        return None
    return {
        "plural": cat["plural"],
        "radius": fmt_radius(radius),
        "place": p["name"],
        "_category_option": cat["name"],
        "_answer": str(n),
    }


def _option_for(obs: Observation, plural: str) -> str:
    """The "Category" dropdown option whose plural is ``plural`` (``cafés`` -> ``Café``)."""
    box = find(obs, "combobox", "Category", exact=True)
    for option in re.findall(r'"([^"]+)"', box.line):
        if _plural(option) == plural:
            return option
    raise ExpertError(f"expert: no category option for {plural!r} on {obs.url}")


@TEMPLATES.template(
    id=506,
    name="map.count_nearby",
    kind="info",
    intent="How many {plural} are within {radius} of {place} in a straight line? Answer "
    "with a number.",
    sample=sample_count_nearby,
    difficulty="6-9",
)
def expert_count_nearby(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_place(obs, p["place"])
    obs = yield from _find_nearby(obs, _option_for(obs, p["plural"]), p["radius"])
    n = grab(obs, r"^(\d+) results?, nearest first", "result count")
    yield answer(n, f"The list says {n} {p['plural']} are within {p['radius']}.")


def _plural(option: str) -> str:
    """The plural the site uses for a category option (``Bakery`` -> ``bakeries``)."""
    low = option.lower()
    return low[:-1] + "ies" if low.endswith("y") else low + "s"


# --------------------------------------------------------------------------------------------
# 507 nav: directions between two places by a mode
# --------------------------------------------------------------------------------------------


def sample_directions(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    a, b = _pair(conn, rng)
    mode = rng.choice(list(MODES))
    return {
        "a": a["name"],
        "b": b["name"],
        "how": MODES[mode][2],
        "_url": _directions_url(a, b, mode),
    }


def _mode_of(how: str) -> str:
    return next(m for m, v in MODES.items() if v[2] == how)


@TEMPLATES.template(
    id=507,
    name="map.directions",
    kind="nav",
    intent="Show me directions from {a} to {b} {how}.",
    sample=sample_directions,
    evaluation=lambda p: url_eval(p["_url"]),
    difficulty="6-9",
)
def expert_directions(p: Params, obs: Observation) -> Expert:
    obs = yield from _directions(obs, p["a"], p["b"], _mode_of(p["how"]))
    yield answer("done", f"The map shows the route from {p['a']} to {p['b']} {p['how']}.")


# --------------------------------------------------------------------------------------------
# 508 nav: the page of a place
# --------------------------------------------------------------------------------------------


def sample_place_page(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    return {"place": p["name"], "_id": p["id"]}


def eval_place_page(p: Params) -> dict[str, Any]:
    return url_eval(f"__MAP__/place/{p['_id']}", shows=p["place"])


@TEMPLATES.template(
    id=508,
    name="map.place_page",
    kind="nav",
    intent="Open the map page of {place}.",
    sample=sample_place_page,
    evaluation=eval_place_page,
    difficulty="3-5",
)
def expert_place_page(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_place(obs, p["place"])
    yield answer("done", f"This is the map page of {p['place']}.")


# --------------------------------------------------------------------------------------------
# 509 nav: a category's places in one neighbourhood
# --------------------------------------------------------------------------------------------


def _hood_counts(conn: sqlite3.Connection) -> list[Any]:
    memo = db_memo(conn, __name__)
    if "hoods" not in memo:
        memo["hoods"] = conn.execute(
            "SELECT c.slug, c.plural, n.slug AS hood_slug, n.name AS hood, COUNT(p.id) AS n "
            "FROM categories c CROSS JOIN neighbourhoods n LEFT JOIN places p "
            "ON p.category_id = c.id AND p.neighbourhood_id = n.id "
            "GROUP BY c.id, n.id ORDER BY c.position, n.id"
        ).fetchall()
    return memo["hoods"]


def sample_category_area(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    row = rng.choice(_hood_counts(conn))
    if row["n"] == 0:
        return None
    return {
        "plural": row["plural"],
        "hood": row["hood"],
        "_url": f"__MAP__/category/{row['slug']}?area={row['hood_slug']}",
        "_answer": str(row["n"]),
    }


def _category_area_sub(obs: Observation, plural: str, hood: str) -> Sub:
    """From any page: home, the category, then its neighbourhood filter."""
    link = maybe(obs, "link", plural, exact=True)
    if link is None:
        obs = yield click(
            find(obs, "link", "OpenStreetMap", exact=True),
            "The home page lists the categories; I go there.",
        )
        link = find(obs, "link", plural, exact=True)
    obs = yield click(link, f"I open the list of {plural}.")
    obs = yield click(
        find(obs, "link", hood, exact=True),
        f"The list can be narrowed by neighbourhood; I choose {hood}.",
    )
    return obs


@TEMPLATES.template(
    id=509,
    name="map.category_in_neighbourhood",
    kind="nav",
    intent="Show me the list of {plural} in the {hood} neighbourhood.",
    sample=sample_category_area,
    evaluation=lambda p: url_eval(p["_url"]),
    difficulty="3-5",
)
def expert_category_area(p: Params, obs: Observation) -> Expert:
    obs = yield from _category_area_sub(obs, p["plural"], p["hood"])
    yield answer("done", f"The page lists the {p['plural']} in {p['hood']}.")


# --------------------------------------------------------------------------------------------
# 510 nav: places of a category within a radius of a place
# --------------------------------------------------------------------------------------------


def sample_nearby_page(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    cat = _cat_of(conn, rng.choice(searchable_places(conn)))
    radius = rng.choice(RADII)
    return {
        "plural": cat["plural"],
        "radius": fmt_radius(radius),
        "place": p["name"],
        "_url": f"__MAP__/place/{p['id']}/nearby?category={cat['slug']}&radius={radius}",
    }


@TEMPLATES.template(
    id=510,
    name="map.nearby_page",
    kind="nav",
    intent="Show me the {plural} within {radius} of {place}.",
    sample=sample_nearby_page,
    evaluation=lambda p: url_eval(p["_url"]),
    difficulty="6-9",
)
def expert_nearby_page(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_place(obs, p["place"])
    obs = yield from _find_nearby(obs, _option_for(obs, p["plural"]), p["radius"])
    yield answer("done", f"The page lists the {p['plural']} within {p['radius']}.")


# --------------------------------------------------------------------------------------------
# 511 info: the first street a route turns onto
# --------------------------------------------------------------------------------------------


def sample_first_turn(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    a, b = _pair(conn, rng)
    mode = rng.choice(list(MODES))
    r = memo_route(conn, a, b, mode)
    turns = [t for t, _ in r.steps if t.startswith("Turn ")]
    if not turns:
        return None
    street = turns[0].split(" onto ", 1)[1]
    return {"verb": VERBS[mode], "a": a["name"], "b": b["name"], "_answer": street}


@TEMPLATES.template(
    id=511,
    name="map.first_turn",
    kind="info",
    intent="If you {verb} from {a} to {b} along the route the map suggests, onto which "
    "street do you turn first? Answer with the street name.",
    sample=sample_first_turn,
    difficulty="6-9",
)
def expert_first_turn(p: Params, obs: Observation) -> Expert:
    mode = next(m for m, v in VERBS.items() if v == p["verb"])
    obs = yield from _directions(obs, p["a"], p["b"], mode)
    street = grab(obs, TURN_RE.pattern, "turn")
    yield answer(street, f"The first 'Turn' step of the route goes onto {street}.")


# --------------------------------------------------------------------------------------------
# 512 info: how many places of a category in a neighbourhood
# --------------------------------------------------------------------------------------------


@TEMPLATES.template(
    id=512,
    name="map.count_in_neighbourhood",
    kind="info",
    intent="How many {plural} does the map list in the {hood} neighbourhood? Answer with a number.",
    sample=sample_category_area,
    difficulty="3-5",
)
def expert_category_count(p: Params, obs: Observation) -> Expert:
    obs = yield from _category_area_sub(obs, p["plural"], p["hood"])
    n = grab(obs, rf"^(\d+) .* in {re.escape(p['hood'])}", "count")
    yield answer(n, f"The filtered list says {n} {p['plural']} in {p['hood']}.")


# --------------------------------------------------------------------------------------------
# 513 info: which place is at given coordinates
# --------------------------------------------------------------------------------------------


def sample_at_coordinates(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    return {"coords": fmt_latlon(p["lat"], p["lon"]), "_answer": p["name"]}


@TEMPLATES.template(
    id=513,
    name="map.place_at_coordinates",
    kind="info",
    intent="Which place is at the coordinates {coords}? Answer with its name.",
    sample=sample_at_coordinates,
    difficulty="1-2",
)
def expert_at_coordinates(p: Params, obs: Observation) -> Expert:
    obs = yield from _search_map(
        obs, p["coords"], "The search box accepts coordinates and lists the nearest places."
    )
    first = next((el for el in elements(obs.text) if " away" in line_after(obs, el)), None)
    if first is None:
        raise ExpertError(f"expert: no results on {obs.url}")
    detail = line_after(obs, first)
    if "· 0 m away" not in detail:
        raise ExpertError(f"expert: nothing exactly at {p['coords']}: {detail!r}")
    yield answer(first.name, f"{first.name} is listed 0 m from these coordinates.")


# --------------------------------------------------------------------------------------------
# 540 held out, info: minutes saved by cycling instead of walking
# --------------------------------------------------------------------------------------------


def sample_time_saved(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    a, b = _pair(conn, rng, min_m=800)
    walk = display_minutes(fmt_duration(memo_route(conn, a, b, "foot").seconds))
    bike = display_minutes(fmt_duration(memo_route(conn, a, b, "bicycle").seconds))
    return {"a": a["name"], "b": b["name"], "_answer": str(walk - bike)}


@TEMPLATES.template(
    id=540,
    name="map.cycling_time_saved",
    kind="info",
    intent="How many minutes do you save by cycling instead of walking from {a} to {b}, "
    "going by the travel times the map shows? Answer with a number.",
    sample=sample_time_saved,
    heldout=True,
    difficulty="6-9",
)
def expert_time_saved(p: Params, obs: Observation) -> Expert:
    obs = yield from _directions(obs, p["a"], p["b"], "foot")
    walk = _summary(obs)[1]
    obs = yield from _directions(obs, None, p["b"], "bicycle")
    bike = _summary(obs)[1]
    saved = display_minutes(walk) - display_minutes(bike)
    yield answer(str(saved), f"Walking takes {walk} and cycling {bike}: {saved} minutes saved.")


# --------------------------------------------------------------------------------------------
# 541 held out, nav: walking directions to the closest place of a category
# --------------------------------------------------------------------------------------------


def sample_walk_to_closest(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    cat = _cat_of(conn, rng.choice(searchable_places(conn)))
    best, gap = _nearest(conn, p, cat)
    if best is None or gap < 30:
        return None
    return {
        "place": p["name"],
        "category": _category_label(cat),
        "_url": _directions_url(p, best, "foot"),
    }


@TEMPLATES.template(
    id=541,
    name="map.walk_to_closest",
    kind="nav",
    intent="Show me walking directions from {place} to the {category} closest to it in a "
    "straight line.",
    sample=sample_walk_to_closest,
    evaluation=lambda p: url_eval(p["_url"]),
    heldout=True,
    difficulty="10+",
)
def expert_walk_to_closest(p: Params, obs: Observation) -> Expert:
    first, obs = yield from _closest_sub(obs, p["place"], p["category"])
    back = find(obs, "link", p["place"], exact=True)
    obs = yield click(back, f"The closest {p['category']} is {first.name}; I go back to the start.")
    obs = yield click(
        find(obs, "link", "Directions from here", exact=True),
        f"I ask for directions starting at {p['place']}.",
    )
    obs = yield from _directions(obs, None, first.name, "foot")
    yield answer("done", f"The map shows the walking route to {first.name}.")


# --------------------------------------------------------------------------------------------
# 542 held out, info: is a place open on a day at a time
# --------------------------------------------------------------------------------------------


def sample_open_at(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(searchable_places(conn))
    day = rng.randrange(7)
    h = hours(conn, p["id"])[day]
    if h["opens"] == "00:00":
        return None
    if h["opens"] is None:
        t = rng.choice((10, 12, 15, 19)) * 60
    else:
        edge = minutes_of(rng.choice((h["opens"], h["closes"])))
        t = edge + rng.choice((-30, 30, -15, 15))
    if not 0 <= t < 24 * 60:
        return None
    at = f"{t // 60:02d}:{t % 60:02d}"
    yes = is_open_at(h["opens"], h["closes"], at)
    return {"place": p["name"], "day": DAYS[day], "time": at, "_answer": "yes" if yes else "no"}


@TEMPLATES.template(
    id=542,
    name="map.open_at_time",
    kind="info",
    intent="Is {place} open on {day} at {time}? Answer yes or no.",
    sample=sample_open_at,
    heldout=True,
    difficulty="3-5",
)
def expert_open_at(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_place(obs, p["place"])
    h = grab(obs, rf"^{p['day']} \| (.+)$", f"hours for {p['day']}").strip()
    if h == "Closed":
        yield answer("no", f"It is closed all day on {p['day']}.")
        return
    opens, closes = h.split(" - ")
    yes = is_open_at(opens, closes, p["time"])
    verdict = "yes" if yes else "no"
    yield answer(
        verdict, f"On {p['day']} it is open {h}; {p['time']} is {'' if yes else 'not '}within."
    )


# --------------------------------------------------------------------------------------------
# 543 held out, info: the shortest walk of three destinations
# --------------------------------------------------------------------------------------------


def sample_shortest_of_three(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    rows = searchable_places(conn)
    origin = rng.choice(rows)
    dests = [d for d in rng.sample(rows, 3) if d["id"] != origin["id"]]
    if len(dests) < 3:
        return None
    dists = sorted((memo_route(conn, origin, d, "foot").distance_m, d["name"]) for d in dests)
    if dists[1][0] - dists[0][0] < 120 or dists[2][0] > 4000:
        return None
    return {
        "origin": origin["name"],
        "a": dests[0]["name"],
        "b": dests[1]["name"],
        "c": dests[2]["name"],
        "_answer": dists[0][1],
    }


@TEMPLATES.template(
    id=543,
    name="map.shortest_walk_of_three",
    kind="info",
    intent="Which of these is the shortest walk from {origin}: {a}, {b} or {c}? Answer with "
    "the place's name.",
    sample=sample_shortest_of_three,
    heldout=True,
    difficulty="10+",
)
def expert_shortest_of_three(p: Params, obs: Observation) -> Expert:
    found: list[tuple[float, str, str]] = []
    for k, dest in enumerate((p["a"], p["b"], p["c"])):
        obs = yield from _directions(obs, p["origin"] if k == 0 else None, dest, "foot")
        dist = _summary(obs)[0]
        found.append((display_meters(dist), dist, dest))
    best = min(found)
    listing = ", ".join(f"{d} to {n}" for _, d, n in found)
    yield answer(best[2], f"Walking distances: {listing}; {best[2]} is the shortest.")
