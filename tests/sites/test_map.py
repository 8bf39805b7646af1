"""The map: geometry and routing by hand, the seed, the pages over HTTP, and real Chromium."""

from __future__ import annotations

import asyncio
import html
import re
import sqlite3
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from webagent_r1.sites import INSTANCE_COOKIE, RunningSites, start_sites
from webagent_r1.sites.map import places as q
from webagent_r1.sites.map.db import MAP_BACKEND, MAPPER_PASSWORD, MAPPER_USERNAME
from webagent_r1.sites.map.geo import (
    bearing_deg,
    fmt_distance,
    fmt_duration,
    fmt_latlon,
    haversine_m,
    is_open_at,
    parse_latlon,
    turn,
)
from webagent_r1.sites.map.routing import Anchor, Edge, Graph, load_graph, route, snap
from webagent_r1.sites.seed_utils import data_checksum
from webagent_r1.sites.words import singular

# --------------------------------------------------------------------------------------------
# Pure functions, hand-computed
# --------------------------------------------------------------------------------------------


def test_geometry_and_formats() -> None:
    # one degree of latitude is 2*pi*R/360 = 111,194.9 m on a 6,371 km sphere
    assert haversine_m(40.0, -80.0, 41.0, -80.0) == pytest.approx(111_194.9, abs=0.1)
    assert bearing_deg(40.0, -80.0, 41.0, -80.0) == pytest.approx(0.0)
    assert bearing_deg(40.0, -80.0, 40.0, -79.0) == pytest.approx(89.68, abs=0.01)
    assert turn(0, 90) == "right" and turn(90, 0) == "left" and turn(0, 10) == "straight"
    assert turn(0, 40) == "slight right" and turn(0, -150) == "sharp left"
    assert [fmt_distance(m) for m in (0, 44, 846, 994, 995, 2349)] == [
        "0 m",
        "40 m",
        "850 m",
        "990 m",
        "1.0 km",
        "2.3 km",
    ]
    assert [fmt_duration(s) for s in (0, 89, 91, 3599, 3630, 7500)] == [
        "1 min",
        "1 min",
        "2 min",
        "1 h 00 min",
        "1 h 00 min",
        "2 h 05 min",
    ]
    assert parse_latlon("40.44123, -79.99512") == (40.44123, -79.99512)
    assert parse_latlon("40.44123;-79.99512") == (40.44123, -79.99512)
    assert parse_latlon("Blue Owl Café") is None and parse_latlon("95, 10") is None
    assert fmt_latlon(40.4, -80.00001) == "40.40000, -80.00001"
    assert [singular(w) for w in ("pharmacies", "cafes", "bars", "glass", "bus")] == [
        "pharmacy",
        "cafe",
        "bar",
        "glass",
        "bus",
    ]
    assert is_open_at("08:00", "18:00", "08:00") and not is_open_at("08:00", "18:00", "18:00")
    assert is_open_at("17:00", "24:00", "23:59") and not is_open_at(None, None, "12:00")


def _toy_graph() -> Graph:
    """A square of streets with a foot/bike path across it (lengths in meters)::

    3 --North 1000-- 2
    |              / |
    West 1100   Path 1200   East 1000
    |        /       |
    0 --South 1000-- 1
    """
    d = 1000 / 111_194.9  # degrees of 1 km on the sphere
    nodes = {0: (0.0, 0.0), 1: (0.0, d), 2: (d, d), 3: (d, 0.0)}
    edges = {
        1: Edge(1, 0, 1, "South Street", "residential", 1000.0),
        2: Edge(2, 1, 2, "East Street", "residential", 1000.0),
        3: Edge(3, 0, 3, "West Street", "residential", 1100.0),
        4: Edge(4, 3, 2, "North Street", "residential", 1000.0),
        5: Edge(5, 0, 2, "Diagonal Path", "path", 1200.0),
    }
    return Graph(nodes, edges)


def test_dijkstra_by_mode_on_a_toy_graph() -> None:
    g = _toy_graph()
    start = Anchor(*g.nodes[0], edge_id=1, t=0.0)  # at node 0
    end = Anchor(*g.nodes[2], edge_id=2, t=1.0)  # at node 2
    car = route(g, start, end, "car")
    assert car is not None
    # cars may not take the path: 2 km at 30 km/h = 240 s, via South then East Street
    assert car.distance_m == pytest.approx(2000.0)
    assert car.seconds == pytest.approx(240.0)
    assert [s for s, _ in car.steps] == [
        "Head east on South Street",
        "Turn left onto East Street",
        "Arrive at the destination",
    ]
    walk = route(g, start, end, "foot")
    assert walk is not None  # 1.2 km on the path at 5 km/h = 864 s
    assert walk.distance_m == pytest.approx(1200.0) and walk.seconds == pytest.approx(864.0)
    assert walk.steps[0] == ("Head northeast on Diagonal Path", "1.2 km")
    # the middle of South Street to the middle of North Street, on foot: 500 m to 1, East
    # Street, 500 m (2,000 m) beats 500 m back to 0, West Street, 500 m (2,100 m)
    a = Anchor(0.0, g.nodes[1][1] / 2, edge_id=1, t=0.5)
    b = Anchor(g.nodes[3][0], g.nodes[2][1] / 2, edge_id=4, t=0.5)
    r1, r2 = route(g, a, b, "foot"), route(g, a, b, "foot")
    assert r1 is not None and r2 is not None
    assert r1.distance_m == pytest.approx(2000.0) and r1.steps == r2.steps
    # same edge: straight along it
    c = Anchor(0.0, g.nodes[1][1] * 0.9, edge_id=1, t=0.9)
    same = route(g, a, c, "bicycle")
    assert same is not None and same.distance_m == pytest.approx(400.0)
    assert same.seconds == pytest.approx(400 / (16 / 3.6))


# --------------------------------------------------------------------------------------------
# The seeded city
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pristine() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{MAP_BACKEND.ensure_pristine()}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


def test_seed_is_deterministic(tmp_path: Path, pristine: sqlite3.Connection) -> None:
    MAP_BACKEND.build(tmp_path / "again.sqlite")
    again = sqlite3.connect(tmp_path / "again.sqlite")
    assert data_checksum(again) == data_checksum(pristine)
    again.close()


def test_seeded_city(pristine: sqlite3.Connection) -> None:
    count = lambda sql: pristine.execute(sql).fetchone()[0]  # noqa: E731
    assert count("SELECT COUNT(*) FROM nodes") == 148
    assert 190 <= count("SELECT COUNT(*) FROM places") <= 210
    assert count("SELECT COUNT(*) FROM categories") == 12
    assert count("SELECT COUNT(DISTINCT name) FROM places") == count("SELECT COUNT(*) FROM places")
    kinds = {r[0] for r in pristine.execute("SELECT DISTINCT kind FROM edges")}
    assert kinds == {"motorway", "primary", "residential", "path", "pedestrian"}
    assert count("SELECT COUNT(*) FROM place_hours") == 7 * count("SELECT COUNT(*) FROM places")
    # every place reaches every other by every mode (the streets are connected)
    g = load_graph(pristine)
    rows = q.all_places(pristine)
    anchors = [Anchor(p["lat"], p["lon"], p["edge_id"], p["edge_t"]) for p in rows]
    for mode in ("car", "bicycle", "foot"):
        for k in range(0, len(rows), 17):
            r = route(g, anchors[k], anchors[(k * 7 + 3) % len(rows)], mode)
            assert r is not None and r.distance_m >= 0

    # the modes differ: along the river cars take the expressway; across the park walkers and
    # cyclists take its path (nodes 1 and 12: the river's west and east ends; 62 and 80:
    # south-west and north-east of the park)
    def legs(n1: int, n2: int, mode: str) -> set[str]:
        r = route(g, snap(g, *g.nodes[n1]), snap(g, *g.nodes[n2]), mode)
        assert r is not None
        return {leg.name for leg in r.legs}

    assert "River Expressway" in legs(1, 12, "car")
    assert "River Expressway" not in legs(1, 12, "foot") | legs(1, 12, "bicycle")
    assert "Riverton Park Path" in legs(62, 80, "foot") & legs(62, 80, "bicycle")
    assert "Riverton Park Path" not in legs(62, 80, "car")


def test_search_and_resolve(pristine: sqlite3.Connection) -> None:
    n_pharmacies = pristine.execute(
        "SELECT COUNT(*) FROM places p JOIN categories c ON c.id = p.category_id "
        "WHERE c.slug = 'pharmacy'"
    ).fetchone()[0]
    for query in ("pharmacies", "Pharmacy", "drugstore"):
        hits = q.search(pristine, query)
        assert len(hits) == n_pharmacies and {h["category_slug"] for h in hits} == {"pharmacy"}
    assert len(q.search(pristine, "cafés")) == len(q.search(pristine, "cafe")) > 0
    place = q.all_places(pristine)[10]
    assert q.search(pristine, place["name"].upper())[0]["id"] == place["id"]
    assert q.search(pristine, "zzzz qqq") == []
    r = q.resolve(pristine, place["name"])
    assert r.ok and r.place is not None and r.place["id"] == place["id"]
    r = q.resolve(pristine, fmt_latlon(place["lat"], place["lon"]))
    assert r.place is not None and r.place["id"] == place["id"]
    r = q.resolve(pristine, "40.44, -79.99")
    assert r.ok and r.place is None and r.label == "40.44000, -79.99000"
    r = q.resolve(pristine, "Street")  # many hits: not resolved, suggestions given
    assert not r.ok and len(r.suggestions) == 5
    near = q.nearby(pristine, place, None, 500)
    assert near == sorted(near, key=lambda x: (x[0], x[1]["name"]))
    assert all(d <= 500 and p["id"] != place["id"] for d, p in near)


# --------------------------------------------------------------------------------------------
# Pages over HTTP
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def map_sites(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSites]:
    running = start_sites(["map"], ports="auto", home=tmp_path_factory.mktemp("home"))
    yield running
    running.stop()


def _client(sites: RunningSites, instance_id: str = "default") -> httpx.Client:
    return httpx.Client(
        base_url=sites.urls["map"], cookies={INSTANCE_COOKIE: instance_id}, follow_redirects=True
    )


def _visible(page: str) -> str:
    page = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", page)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page))).strip()


def test_pages(map_sites: RunningSites) -> None:
    db = map_sites.connect("map", "default")
    a, b = q.all_places(db)[3], q.all_places(db)[40]
    with _client(map_sites) as c:
        home = c.get("/")
        assert home.status_code == 200 and "Pharmacies" in home.text and "Log In" in home.text
        r = c.get("/search", params={"query": "pharmacies"})
        assert "Pharmacy ·" in _visible(r.text)
        r = c.get(f"/place/{a['id']}")
        text = _visible(r.text)
        assert a["name"] in text and f"Coordinates {fmt_latlon(a['lat'], a['lon'])}" in text
        assert "Monday" in text and "Sunday" in text and "Directions from here" in text
        r = c.get(f"/place/{a['id']}/nearby", params={"category": "cafe", "radius": 2000})
        assert f"Cafés within 2 km of {a['name']}" in _visible(r.text)
        r = c.get("/category/bank", params={"area": "downtown"})
        assert "Banks in Downtown" in _visible(r.text)
        # typed names redirect to the canonical route URL (as openstreetmap.org's route=)
        r = c.get(
            "/directions",
            params={"from": a["name"], "to": b["name"].lower(), "engine": "fossgis_osrm_foot"},
        )
        route_param = f"{a['lat']:.5f},{a['lon']:.5f};{b['lat']:.5f},{b['lon']:.5f}"
        assert urllib.parse.parse_qs(r.url.query.decode()) == {
            "engine": ["fossgis_osrm_foot"],
            "route": [route_param],
        }
        text = _visible(r.text)
        assert f"Foot route from {a['name']} to {b['name']}" in text
        assert re.search(r"Distance: [\d.]+ k?m · Time: \d+ min", text)
        assert "Head " in text and "Arrive at the destination" in text
        r = c.get("/directions", params={"from": "Street", "to": b["name"]})
        assert "no place found for 'Street'. Did you mean:" in _visible(r.text)
        r = c.get("/directions", params={"route": "1,2"})
        assert "must be 'lat,lon;lat,lon'" in _visible(r.text)
        assert c.get("/place/99999").status_code == 404
        assert c.get("/category/nope").status_code == 404
        assert c.get("/nope").status_code == 404
    db.close()


def test_login_and_logout(map_sites: RunningSites) -> None:
    iid = map_sites.create_instance()
    with _client(map_sites, iid) as c:
        r = c.post("/login", data={"username": MAPPER_USERNAME, "password": "wrong"})
        assert "sign-in was incorrect" in r.text and "map_session" not in c.cookies
        r = c.post("/login", data={"username": MAPPER_USERNAME, "password": MAPPER_PASSWORD})
        assert r.url.path == "/" and "Log Out" in r.text and MAPPER_USERNAME in r.text
        r = c.get("/logout")
        assert "Log In" in r.text and "Log Out" not in r.text
    map_sites.delete_instance(iid)


def test_instances_are_isolated_and_names_escaped(map_sites: RunningSites) -> None:
    a, b = map_sites.create_instance(), map_sites.create_instance()
    evil = '<script>alert("x")</script> Café'
    with map_sites.connect("map", a, readonly=False) as db:
        db.execute("UPDATE places SET name = ? WHERE id = 7", (evil,))
    with _client(map_sites, a) as c:
        page = c.get("/place/7").text
        assert evil not in page and "&lt;script&gt;alert" in page
        found = c.get("/search", params={"query": "script alert"}).text
        assert "&lt;script&gt;" in found and evil not in found
        echo = c.get("/search", params={"query": "<b>zzz</b>"}).text
        assert "<b>zzz</b>" not in echo and "&lt;b&gt;zzz&lt;/b&gt;" in echo
    with _client(map_sites, b) as c:
        assert "script" not in c.get("/place/7").text
    map_sites.delete_instance(a)
    map_sites.delete_instance(b)


def test_pages_are_compact(map_sites: RunningSites) -> None:
    with _client(map_sites) as c:
        db = map_sites.connect("map", "default")
        a, b = q.all_places(db)[0], q.all_places(db)[99]
        db.close()
        sizes = {
            path: len(_visible(c.get(path).text))
            for path in (
                "/",
                "/search?query=restaurant",
                "/search?query=40.44,-79.99",
                f"/place/{a['id']}",
                f"/place/{a['id']}/nearby?radius=5000",
                "/category/restaurant",
                f"/directions?from={urllib.parse.quote(a['name'])}&to={urllib.parse.quote(b['name'])}",
            )
        }
    assert all(200 < n < 4000 for n in sizes.values()), sizes


# --------------------------------------------------------------------------------------------
# Real Chromium
# --------------------------------------------------------------------------------------------


@pytest.mark.browser
async def test_in_chromium_isolation_login_and_escaping(browser, embedded_sites) -> None:  # noqa: ANN001
    from webagent_r1.config import EnvConfig
    from webagent_r1.rollout.env import WebEnv
    from webagent_r1.tasks.experts import find
    from webagent_r1.types import Task

    def act(kind: str, el: str, arg: str | None = None) -> str:
        a = f', argument="{arg}"' if arg is not None else ""
        return f'<answer>do(action="{kind}"{a}, element="{el}")</answer>'

    envs = [WebEnv(browser, EnvConfig(max_turns=10), backend=embedded_sites) for _ in range(2)]
    task = Task(task_id="t", intent="test", start_url="__MAP__/place/7", sites=["map"])
    try:
        obs_a, obs_b = await asyncio.gather(envs[0].reset(task), envs[1].reset(task))
        assert envs[0].instance_id != envs[1].instance_id
        name = re.search(r'heading "(.+)"', obs_a.text).group(1)  # type: ignore[union-attr]
        evil = "<script>window.__pwned=1</script><b>bold</b>"
        with embedded_sites.running.connect("map", envs[0].instance_id, readonly=False) as db:
            db.execute("UPDATE places SET name = ? WHERE id = 7", (evil,))
        # A's page shows its new name as text, never executed; B still shows the seed's name
        page = envs[0].session.page
        await page.reload()
        assert evil in await page.evaluate("() => document.querySelector('h1').innerText")
        assert await page.evaluate("() => window.__pwned === undefined")
        assert await page.evaluate("() => document.querySelectorAll('h1 b').length") == 0
        r = await envs[1].step(act("Click", find(obs_b, "link", "Directions from here").id))
        assert find(r.observation, "textbox", "From").value == name
        # the login form in the browser
        env = envs[1]
        r = await env.step(act("Click", find(r.observation, "link", "Log In").id))
        obs = r.observation
        await env.step(act("Type", find(obs, "textbox", "Username").id, MAPPER_USERNAME))
        await env.step(act("Type", find(obs, "textbox", "Password").id, MAPPER_PASSWORD))
        r = await env.step(act("Click", find(obs, "button", "Sign In").id))
        assert find(r.observation, "link", "Log Out") and MAPPER_USERNAME in r.observation.text
    finally:
        for e in envs:
            await e.close()
