"""Routing on the map's road graph: Dijkstra's fastest path per travel mode, turn-by-turn steps.

A route runs between two *anchors*: points on a street edge (a place sits on its street at
``edge_t``; typed coordinates snap to the nearest street). Dijkstra minimises travel time with
per-mode speeds by road kind (cars are faster on the expressway; bicycles and walkers may use
park paths and the trail, and walkers the pedestrian mall). The pages and the task samplers
both call :func:`route`, so the numbers a task expects are the numbers the page shows.
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from dataclasses import dataclass, field

from webagent_r1.sites.map.geo import bearing_deg, compass, fmt_distance, turn

MODES = ("car", "bicycle", "foot")
ENGINES = {
    "fossgis_osrm_car": "car",
    "fossgis_osrm_bike": "bicycle",
    "fossgis_osrm_foot": "foot",
}
"""OpenStreetMap's routing engine names (the ``engine`` URL parameter) -> travel mode."""
ENGINE_LABELS = {
    "fossgis_osrm_car": "Car",
    "fossgis_osrm_bike": "Bicycle",
    "fossgis_osrm_foot": "Foot",
}
DEFAULT_ENGINE = "fossgis_osrm_car"
SPEED_KMH = {
    "car": {"motorway": 80.0, "primary": 50.0, "residential": 30.0},
    "bicycle": {"primary": 16.0, "residential": 16.0, "path": 14.0},
    "foot": {"primary": 5.0, "residential": 5.0, "path": 5.0, "pedestrian": 5.0},
}
"""Travel speed per mode and road kind; a kind missing for a mode is closed to it."""
STREET_KINDS = ("primary", "residential")
"""Kinds open to every mode: the only ones places and snapped points sit on."""

SOURCE, TARGET = -1, -2


@dataclass(frozen=True)
class Edge:
    id: int
    a: int
    b: int
    name: str
    kind: str
    length_m: float


@dataclass
class Graph:
    """The road graph: node coordinates, edges, adjacency (node -> [(edge id, other node)])."""

    nodes: dict[int, tuple[float, float]]
    edges: dict[int, Edge]
    adj: dict[int, list[tuple[int, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.adj:
            self.adj = {n: [] for n in self.nodes}
            for e in self.edges.values():
                self.adj[e.a].append((e.id, e.b))
                self.adj[e.b].append((e.id, e.a))


@dataclass(frozen=True)
class Anchor:
    """A point on a street edge where a route starts or ends."""

    lat: float
    lon: float
    edge_id: int
    t: float  # 0 = the edge's node a, 1 = node b


@dataclass
class Leg:
    """A stretch of a route along one edge (or part of one)."""

    name: str
    kind: str
    length_m: float
    seconds: float
    start: tuple[float, float]
    end: tuple[float, float]


@dataclass
class Route:
    """A computed route: totals and turn-by-turn steps as ``(instruction, distance)``."""

    mode: str
    distance_m: float
    seconds: float
    legs: list[Leg]
    steps: list[tuple[str, str]]


def load_graph(conn: sqlite3.Connection) -> Graph:
    """Read the road graph from a map database."""
    nodes = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT id, lat, lon FROM nodes")}
    edges = {
        r[0]: Edge(r[0], r[1], r[2], r[3], r[4], r[5])
        for r in conn.execute("SELECT id, a, b, name, kind, length_m FROM edges ORDER BY id")
    }
    return Graph(nodes, edges)


def speed_mps(mode: str, kind: str) -> float | None:
    """Speed in m/s of ``mode`` on a road of ``kind``; None when the mode may not use it."""
    kmh = SPEED_KMH[mode].get(kind)
    return kmh / 3.6 if kmh else None


def point_on(graph: Graph, edge_id: int, t: float) -> tuple[float, float]:
    """Coordinates of the point at fraction ``t`` along an edge (linear interpolation)."""
    e = graph.edges[edge_id]
    (la, oa), (lb, ob) = graph.nodes[e.a], graph.nodes[e.b]
    return la + t * (lb - la), oa + t * (ob - oa)


def snap(graph: Graph, lat: float, lon: float) -> Anchor:
    """The nearest point to (lat, lon) on a street every mode may use."""
    m_lon = math.cos(math.radians(lat))  # planar approximation, fine at city scale
    best: tuple[float, int, float] | None = None
    for e in graph.edges.values():
        if e.kind not in STREET_KINDS:
            continue
        (la, oa), (lb, ob) = graph.nodes[e.a], graph.nodes[e.b]
        ax, ay, bx, by = oa * m_lon, la, ob * m_lon, lb
        px, py = lon * m_lon, lat
        dx, dy = bx - ax, by - ay
        denom = dx * dx + dy * dy
        t = 0.0 if denom == 0 else max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / denom))
        d = (ax + t * dx - px) ** 2 + (ay + t * dy - py) ** 2
        if best is None or d < best[0] - 1e-18:
            best = (d, e.id, t)
    assert best is not None, "the map has no streets"
    _, eid, t = best
    plat, plon = point_on(graph, eid, t)
    return Anchor(plat, plon, eid, round(t, 6))


def _anchor_links(graph: Graph, anchor: Anchor) -> list[tuple[int, float]]:
    """(node, fraction of the edge's length) from an anchor to both ends of its edge."""
    e = graph.edges[anchor.edge_id]
    return [(e.a, anchor.t), (e.b, 1.0 - anchor.t)]


def route(graph: Graph, src: Anchor, dst: Anchor, mode: str) -> Route | None:
    """The fastest route from ``src`` to ``dst`` for ``mode`` (None when there is none).

    Dijkstra over the nodes plus two virtual nodes (the anchors), with edge cost = length /
    speed for the mode; ties break on node ids, so the result is deterministic.
    """
    if mode not in SPEED_KMH:
        raise ValueError(f"unknown travel mode {mode!r}; use one of {MODES}")

    # 1) virtual edges from the anchors to the ends of their edges (and between them)
    extra: dict[int, list[tuple[int, float, Edge, tuple[float, float], tuple[float, float]]]] = {
        SOURCE: [],
        TARGET: [],
    }
    # each entry: (other node, length, edge it lies on, start coords, end coords)
    sp, tp = (src.lat, src.lon), (dst.lat, dst.lon)
    for node, frac in _anchor_links(graph, src):
        e = graph.edges[src.edge_id]
        extra[SOURCE].append((node, frac * e.length_m, e, sp, graph.nodes[node]))
    into_target: dict[int, tuple[float, Edge]] = {}
    for node, frac in _anchor_links(graph, dst):
        e = graph.edges[dst.edge_id]
        into_target[node] = (frac * e.length_m, e)
    if src.edge_id == dst.edge_id:
        e = graph.edges[src.edge_id]
        extra[SOURCE].append((TARGET, abs(src.t - dst.t) * e.length_m, e, sp, tp))

    # 2) Dijkstra on travel time
    best: dict[int, float] = {SOURCE: 0.0}
    prev: dict[int, tuple[int, Edge, float, tuple[float, float], tuple[float, float]]] = {}
    heap: list[tuple[float, int]] = [(0.0, SOURCE)]
    done: set[int] = set()
    while heap:
        cost, node = heapq.heappop(heap)
        if node in done:
            continue
        done.add(node)
        if node == TARGET:
            break
        here = sp if node == SOURCE else graph.nodes[node]
        moves = []
        if node == SOURCE:
            moves = extra[SOURCE]
        else:
            for eid, other in graph.adj[node]:
                e = graph.edges[eid]
                moves.append((other, e.length_m, e, here, graph.nodes[other]))
            if node in into_target:
                length, e = into_target[node]
                moves.append((TARGET, length, e, here, tp))
        for other, length, e, start, end in moves:
            v = speed_mps(mode, e.kind)
            if v is None or other in done:
                continue
            c = cost + length / v
            if c < best.get(other, math.inf) - 1e-9:
                best[other] = c
                prev[other] = (node, e, length, start, end)
                heapq.heappush(heap, (c, other))
    if TARGET not in done:
        return None

    # 3) the legs, from the target back to the source
    legs: list[Leg] = []
    node = TARGET
    while node != SOURCE:
        p, e, length, start, end = prev[node]
        v = speed_mps(mode, e.kind) or 1.0
        legs.append(Leg(e.name, e.kind, length, length / v, start, end))
        node = p
    legs.reverse()
    legs = [leg for leg in legs if leg.length_m >= 0.5] or legs[:1]
    distance = sum(leg.length_m for leg in legs)
    seconds = sum(leg.seconds for leg in legs)
    return Route(mode, distance, seconds, legs, steps(legs))


def _bearing(a: tuple[float, float], b: tuple[float, float]) -> float:
    return bearing_deg(a[0], a[1], b[0], b[1])


def steps(legs: list[Leg]) -> list[tuple[str, str]]:
    """Turn-by-turn instructions: one step per run of legs on the same street."""
    runs: list[list[Leg]] = []
    for leg in legs:
        if runs and runs[-1][-1].name == leg.name:
            runs[-1].append(leg)
        else:
            runs.append([leg])
    out: list[tuple[str, str]] = []
    prev_bearing: float | None = None
    for run in runs:
        length = sum(leg.length_m for leg in run)
        first = _bearing(run[0].start, run[0].end)
        if prev_bearing is None:
            text = f"Head {compass(first)} on {run[0].name}"
        else:
            how = turn(prev_bearing, first)
            text = (
                f"Continue straight onto {run[0].name}"
                if how == "straight"
                else f"Turn {how} onto {run[0].name}"
            )
        out.append((text, fmt_distance(length)))
        prev_bearing = _bearing(run[-1].start, run[-1].end)
    out.append(("Arrive at the destination", ""))
    return out
