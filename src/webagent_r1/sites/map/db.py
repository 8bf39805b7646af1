"""Schema and deterministic seed of the map's database: the small city of Riverton, PA.

Seeded contents (seed 0):

- a road graph of 148 intersections: a 12 x 12 grid of streets (east-west streets named,
  north-south streets numbered) with a few blocks missing, two primary avenues each way, a
  car-only expressway along the river with four ramps, foot-and-bicycle paths through Riverton
  Park and along the Hillside Trail, and a pedestrian-only stretch of Market Street;
- 196 places in 12 categories (cafés, restaurants, pharmacies, …), each on a street with a
  house number, coordinates, a neighbourhood, a phone number and weekly opening hours;
- one mapper account (the map needs no login for reading, as on openstreetmap.org).
"""

from __future__ import annotations

import math
import random
import sqlite3

from webagent_r1.sites.base import Backend, SiteUser, source_digest
from webagent_r1.sites.map.geo import haversine_m
from webagent_r1.sites.seed_utils import LAST_NAMES, hash_password, make_salt, slugify, words

SITE_VERSION = "2"
"""Version of the map schema + seed; bump it when either changes (rebuilds cached DBs)."""

CITY, STATE, STATE_CODE = "Riverton", "Pennsylvania", "PA"
MAPPER_USERNAME, MAPPER_PASSWORD = "mapper", "Password.123"
MAP_USERS = (SiteUser(MAPPER_USERNAME, MAPPER_PASSWORD, False, "A map contributor"),)


SCHEMA = """
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY,
    lat REAL NOT NULL,
    lon REAL NOT NULL
);
CREATE TABLE edges (
    id INTEGER PRIMARY KEY,
    a INTEGER NOT NULL REFERENCES nodes(id),
    b INTEGER NOT NULL REFERENCES nodes(id),
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN
        ('motorway', 'primary', 'residential', 'path', 'pedestrian')),
    length_m REAL NOT NULL,
    car INTEGER NOT NULL,
    bicycle INTEGER NOT NULL,
    foot INTEGER NOT NULL
);
CREATE TABLE categories (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    plural TEXT NOT NULL,
    synonyms TEXT NOT NULL DEFAULT '',   -- space-separated extra search words
    position INTEGER NOT NULL
);
CREATE TABLE neighbourhoods (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    postcode TEXT NOT NULL
);
CREATE TABLE places (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    category_id INTEGER NOT NULL REFERENCES categories(id),
    lat REAL NOT NULL,                   -- 5 decimals, as shown
    lon REAL NOT NULL,
    house_number TEXT NOT NULL,
    street TEXT NOT NULL,
    neighbourhood_id INTEGER NOT NULL REFERENCES neighbourhoods(id),
    phone TEXT NOT NULL,
    website TEXT NOT NULL DEFAULT '',
    edge_id INTEGER NOT NULL REFERENCES edges(id),   -- the street it is on (for routing)
    edge_t REAL NOT NULL                 -- position along that edge, 0 = node a, 1 = node b
);
CREATE TABLE place_hours (
    place_id INTEGER NOT NULL REFERENCES places(id) ON DELETE CASCADE,
    day INTEGER NOT NULL CHECK (day BETWEEN 0 AND 6),   -- 0 = Monday
    opens TEXT,                          -- 'HH:MM', NULL = closed all day
    closes TEXT,                         -- 'HH:MM' ('24:00' = midnight)
    PRIMARY KEY (place_id, day)
);
CREATE INDEX places_category ON places(category_id);
CREATE INDEX edges_a ON edges(a);
CREATE INDEX edges_b ON edges(b);
"""

# -- the city's layout ----------------------------------------------------------------------

ROWS = COLS = 12
LAT0, LON0 = 40.4300, -80.0100  # south-west corner (by the river)
DLAT, DLON = 0.0022, 0.0029  # ~245 m between intersections both ways
ROW_NAMES = (
    "Water Street",
    "Front Street",
    "Market Street",
    "Liberty Avenue",
    "Chestnut Street",
    "Walnut Street",
    "Spruce Street",
    "Forbes Avenue",
    "Maple Street",
    "Cedar Street",
    "Summit Street",
    "Ridge Road",
)
"""East-west streets, south to north."""
COL_NAMES = tuple(
    f"{n}{'st' if n == 1 else 'nd' if n == 2 else 'rd' if n == 3 else 'th'} Street"
    for n in range(1, COLS + 1)
)
"""North-south streets, west to east: 1st Street … 12th Street."""
PRIMARY_ROWS, PRIMARY_COLS = (3, 7), (3, 8)
PARK_ROWS, PARK_COLS = (5, 6), (5, 6, 7)
PARK_PATH = "Riverton Park Path"
PEDESTRIAN = (2, range(4, 7))  # Market Street between 5th and 8th Street: foot only
TRAIL = ((8, 0), (9, 1), (10, 2), (11, 3))  # Hillside Trail: a diagonal path
TRAIL_NAME = "Hillside Trail"
EXPRESSWAY = "River Expressway"
RAMP_COLS = (0, 4, 8, 11)
DROPPED_EDGES = 7  # residential blocks removed at random (keeping the city connected)

ACCESS = {  # kind -> (car, bicycle, foot)
    "motorway": (1, 0, 0),
    "primary": (1, 1, 1),
    "residential": (1, 1, 1),
    "path": (0, 1, 1),
    "pedestrian": (0, 0, 1),
}

NEIGHBOURHOODS = (  # (name, postcode): south row west to east, then north row
    ("Riverside", "15201"),
    ("Downtown", "15202"),
    ("Old Town", "15203"),
    ("Hillcrest", "15204"),
    ("Parkview", "15205"),
    ("East End", "15206"),
)

# (slug, name, plural, synonyms, count)
CATEGORIES = (
    ("cafe", "Café", "cafés", "coffee coffeeshop", 28),
    ("restaurant", "Restaurant", "restaurants", "food dining eat", 36),
    ("bar", "Bar", "bars", "pub tavern", 16),
    ("bakery", "Bakery", "bakeries", "bread", 12),
    ("pharmacy", "Pharmacy", "pharmacies", "chemist drugstore", 14),
    ("supermarket", "Supermarket", "supermarkets", "grocery groceries", 14),
    ("bank", "Bank", "banks", "atm", 14),
    ("hotel", "Hotel", "hotels", "lodging", 12),
    ("museum", "Museum", "museums", "gallery", 10),
    ("library", "Library", "libraries", "books", 10),
    ("school", "School", "schools", "education", 18),
    ("fuel", "Fuel Station", "fuel stations", "gas petrol", 12),
)

ADJ = words(
    "Blue Copper Golden Little Velvet Sunny Quiet Lucky Silver Maple Harbor Lantern Juniper "
    "Paper Morning Crimson Tin Honey Clover Nutmeg Rusty Green Wild Old"
)
NOUN = words(
    "Owl Fox Bean Kettle Spoon Door Moon Sparrow Anchor Bridge Pine Rabbit Lamp Barrel Heron Acorn"
)
SUFFIX = {
    "cafe": ("Café", "Coffee", "Coffee House", "Espresso Bar"),
    "restaurant": ("Grill", "Kitchen", "Bistro", "Diner", "Trattoria", "Taqueria", "Noodle House"),
    "bar": ("Tavern", "Pub", "Taproom", "Wine Bar"),
    "bakery": ("Bakery", "Bakehouse", "Patisserie"),
    "hotel": ("Hotel", "Inn", "Suites", "Lodge"),
}
MUSEUM_SUBJECTS = (
    "Art",
    "Natural History",
    "Science",
    "Industry",
    "Railroad",
    "Toy",
    "Glass",
    "River History",
    "Photography",
    "Childhood",
    "Music",
    "Maritime",
)
FUEL_BRANDS = ("Sunoco", "Shell", "Exxon", "Gulf", "Citgo", "Speedway", "Sheetz", "GetGo")
BANK_WORDS = ("Savings Bank", "Federal Credit Union", "Trust Bank", "Community Bank")
SCHOOL_KINDS = ("Elementary School", "Middle School", "High School", "Academy")


def _place_name(rng: random.Random, slug: str, neighbourhood: str) -> str:
    if slug in SUFFIX:
        return f"{rng.choice(ADJ)} {rng.choice(NOUN)} {rng.choice(SUFFIX[slug])}"
    surname = rng.choice(LAST_NAMES)
    fancy = f"{rng.choice(ADJ)} {rng.choice(NOUN)}"
    if slug == "pharmacy":
        return rng.choice((f"{surname} Pharmacy", f"{surname} Drugs", f"{fancy} Pharmacy"))
    if slug == "supermarket":
        return rng.choice((f"{surname} Market", f"{fancy} Grocer", f"{surname} Foods"))
    if slug == "bank":
        return f"{surname} {rng.choice(BANK_WORDS)}"
    if slug == "museum":
        subject = rng.choice(MUSEUM_SUBJECTS)
        return rng.choice((f"Riverton {subject} Museum", f"Museum of {subject}"))
    if slug == "library":
        return rng.choice((f"{surname} Branch Library", f"{neighbourhood} Public Library"))
    if slug == "school":
        return f"{surname} {rng.choice(SCHOOL_KINDS)}"
    if slug == "fuel":
        return f"{rng.choice(FUEL_BRANDS)} Station #{rng.randint(100, 999)}"
    raise ValueError(f"no names for category {slug!r}")


def _hours(rng: random.Random, slug: str) -> list[tuple[str, str] | None]:
    """Opening hours Monday..Sunday: (opens, closes) or None (closed)."""
    c = rng.choice

    def week(wk: tuple[str, str] | None, sa: tuple[str, str] | None, su: tuple[str, str] | None):
        return [wk] * 5 + [sa, su]

    if slug == "cafe":
        wk = (c(("06:30", "07:00", "07:30", "08:00")), c(("16:00", "17:00", "18:00", "19:00")))
        sa = (c(("08:00", "09:00")), c(("15:00", "17:00")))
        su = None if rng.random() < 0.3 else (c(("09:00", "10:00")), c(("14:00", "16:00")))
        return week(wk, sa, su)
    if slug == "restaurant":
        wk = (c(("11:00", "11:30", "12:00", "17:00")), c(("21:00", "22:00", "23:00")))
        su = None if rng.random() < 0.3 else (c(("12:00", "16:00")), "21:00")
        out = week(wk, wk, su)
        if rng.random() < 0.3:
            out[0] = None  # closed on Mondays
        return out
    if slug == "bar":
        wk = (c(("16:00", "17:00")), c(("23:00", "24:00")))
        return week(wk, (c(("12:00", "14:00")), "24:00"), (c(("12:00", "14:00")), "22:00"))
    if slug == "bakery":
        wk = (c(("06:00", "07:00")), c(("14:00", "15:00", "18:00")))
        su = None if rng.random() < 0.5 else ("07:00", "12:00")
        return week(wk, (wk[0], "13:00"), su)
    if slug == "pharmacy":
        if rng.random() < 0.2:
            return [("00:00", "24:00")] * 7
        wk = (c(("08:00", "09:00")), c(("20:00", "21:00", "22:00")))
        su = None if rng.random() < 0.4 else ("10:00", "18:00")
        return week(wk, ("09:00", "18:00"), su)
    if slug == "supermarket":
        wk = (c(("07:00", "08:00")), c(("21:00", "22:00", "23:00")))
        return week(wk, wk, (c(("08:00", "09:00")), c(("18:00", "20:00"))))
    if slug == "bank":
        wk = ("09:00", c(("16:00", "17:00", "18:00")))
        return week(wk, None if rng.random() < 0.5 else ("09:00", "12:00"), None)
    if slug == "hotel":
        return [("00:00", "24:00")] * 7
    if slug == "museum":
        day = ("10:00", c(("17:00", "18:00")))
        out = [None] + [day] * 6
        if rng.random() < 0.5:
            out[3] = (day[0], "20:00")  # late Thursdays
        return out
    if slug == "library":
        su = None if rng.random() < 0.5 else ("13:00", "17:00")
        return [("09:00", "20:00")] * 4 + [("09:00", "17:00"), ("10:00", "17:00"), su]
    if slug == "school":
        wk = (c(("07:30", "08:00")), c(("15:00", "16:00")))
        return week(wk, None, None)
    if slug == "fuel":
        if rng.random() < 0.5:
            return [("00:00", "24:00")] * 7
        return [(c(("05:00", "06:00")), c(("22:00", "23:00")))] * 7
    raise ValueError(f"no hours for category {slug!r}")


def _grid_node(r: int, c: int) -> int:
    return r * COLS + c + 1


def _connected(n_nodes: list[int], edges: dict[int, tuple[int, int]]) -> bool:
    adj: dict[int, list[int]] = {n: [] for n in n_nodes}
    for a, b in edges.values():
        adj[a].append(b)
        adj[b].append(a)
    seen, todo = {n_nodes[0]}, [n_nodes[0]]
    while todo:
        for m in adj[todo.pop()]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    return len(seen) == len(n_nodes)


def _neighbourhood(r: float, c: float) -> int:
    """Neighbourhood id (1-based) of a grid position: 3 columns of 4 streets, 2 rows of 6."""
    return (0 if r < ROWS / 2 else 3) + min(2, int(c // (COLS / 3))) + 1


def create_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)


def seed(conn: sqlite3.Connection, rng: random.Random) -> None:
    """Fill the map database (deterministic given ``rng``)."""
    # 1) intersections: a jittered grid, plus the expressway's nodes south of Water Street
    nodes: dict[int, tuple[float, float]] = {}
    for r in range(ROWS):
        for c in range(COLS):
            lat = LAT0 + r * DLAT + rng.uniform(-0.00015, 0.00015)
            lon = LON0 + c * DLON + rng.uniform(-0.0002, 0.0002)
            nodes[_grid_node(r, c)] = (round(lat, 6), round(lon, 6))
    exp_nodes = {}
    for k, c in enumerate(RAMP_COLS):
        nid = ROWS * COLS + k + 1
        exp_nodes[c] = nid
        nodes[nid] = (round(LAT0 - 0.0011, 6), round(LON0 + c * DLON, 6))

    # 2) streets: (a, b, name, kind) for every block, then paths, the expressway and ramps
    raw: list[tuple[int, int, str, str]] = []
    for r in range(ROWS):
        for c in range(COLS - 1):  # east-west blocks of row r
            a, b = _grid_node(r, c), _grid_node(r, c + 1)
            if r in PARK_ROWS and c in PARK_COLS and c + 1 in PARK_COLS:
                raw.append((a, b, PARK_PATH, "path"))
            elif r == PEDESTRIAN[0] and c in PEDESTRIAN[1]:
                raw.append((a, b, ROW_NAMES[r], "pedestrian"))
            else:
                raw.append((a, b, ROW_NAMES[r], "primary" if r in PRIMARY_ROWS else "residential"))
    for c in range(COLS):
        for r in range(ROWS - 1):  # north-south blocks of column c
            a, b = _grid_node(r, c), _grid_node(r + 1, c)
            if c in PARK_COLS and r in PARK_ROWS and r + 1 in PARK_ROWS:
                raw.append((a, b, PARK_PATH, "path"))
            else:
                raw.append((a, b, COL_NAMES[c], "primary" if c in PRIMARY_COLS else "residential"))
    for (r1, c1), (r2, c2) in zip(TRAIL, TRAIL[1:], strict=False):
        raw.append((_grid_node(r1, c1), _grid_node(r2, c2), TRAIL_NAME, "path"))
    ramps = list(RAMP_COLS)
    for c1, c2 in zip(ramps, ramps[1:], strict=False):
        raw.append((exp_nodes[c1], exp_nodes[c2], EXPRESSWAY, "motorway"))
    for c in ramps:
        raw.append((exp_nodes[c], _grid_node(0, c), f"{EXPRESSWAY} Ramp", "motorway"))

    # 3) drop a few residential blocks, keeping the streets every mode uses connected
    street_ids = [i for i, e in enumerate(raw) if e[3] == "residential"]
    dropped: set[int] = set()
    grid_nodes = [_grid_node(r, c) for r in range(ROWS) for c in range(COLS)]
    while len(dropped) < DROPPED_EDGES:
        i = rng.choice(street_ids)
        if i in dropped:
            continue
        trial = {
            j: (e[0], e[1])
            for j, e in enumerate(raw)
            if j not in dropped | {i} and e[3] in ("primary", "residential")
        }
        if _connected(grid_nodes, trial):
            dropped.add(i)

    conn.executemany(
        "INSERT INTO nodes (id, lat, lon) VALUES (?, ?, ?)",
        [(n, lat, lon) for n, (lat, lon) in sorted(nodes.items())],
    )
    edge_rows = []
    for i, (a, b, name, kind) in enumerate(raw):
        if i in dropped:
            continue
        length = haversine_m(*nodes[a], *nodes[b]) * (1.15 if kind == "path" else 1.0)
        edge_rows.append((a, b, name, kind, round(length, 1), *ACCESS[kind]))
    conn.executemany(
        "INSERT INTO edges (a, b, name, kind, length_m, car, bicycle, foot) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        edge_rows,
    )

    # 4) categories, neighbourhoods
    for pos, (slug, name, plural, syn, _) in enumerate(CATEGORIES):
        conn.execute(
            "INSERT INTO categories (slug, name, plural, synonyms, position) VALUES (?,?,?,?,?)",
            (slug, name, plural, syn, pos),
        )
    for name, postcode in NEIGHBOURHOODS:
        conn.execute(
            "INSERT INTO neighbourhoods (slug, name, postcode) VALUES (?, ?, ?)",
            (slugify(name), name, postcode),
        )

    # 5) places on the streets every mode may use, each with a house number on its side
    streets = conn.execute(
        "SELECT id, a, b, name FROM edges WHERE kind IN ('primary', 'residential') ORDER BY id"
    ).fetchall()
    names: set[str] = set()
    addresses: set[tuple[str, str]] = set()
    rows, hours = [], []
    m_lat = 111_320.0
    m_lon = 111_320.0 * math.cos(math.radians(LAT0 + ROWS * DLAT / 2))
    for cat_id, (slug, _, _, _, count) in enumerate(CATEGORIES, start=1):
        made = 0
        while made < count:
            eid, a, b, street = rng.choice(streets)
            t = round(rng.uniform(0.15, 0.85), 3)
            (la, oa), (lb, ob) = nodes[a], nodes[b]
            # the street's direction in meters; the place sits 15-30 m to one side of it
            dx, dy = (ob - oa) * m_lon, (lb - la) * m_lat
            norm = math.hypot(dx, dy)
            side = rng.choice((1, -1))  # 1: left of a->b (north or west side)
            off = rng.uniform(15, 30)
            px, py = -dy / norm * off * side, dx / norm * off * side
            lat = round(la + t * (lb - la) + py / m_lat, 5)
            lon = round(oa + t * (ob - oa) + px / m_lon, 5)
            # block numbering: 100 per block from the south / west, even numbers on the left
            ra, ca = divmod(a - 1, COLS)
            block = (ca if ra == (b - 1) // COLS else ra) + 1
            number = block * 100 + 2 * int(t * 48) + (0 if side == 1 else 1)
            hood = _neighbourhood(ra + t * ((b - 1) // COLS - ra), ca + t * ((b - 1) % COLS - ca))
            name = _place_name(rng, slug, NEIGHBOURHOODS[hood - 1][0])
            if name in names or (str(number), street) in addresses:
                continue
            names.add(name)
            addresses.add((str(number), street))
            phone = f"(412) {rng.randint(200, 989)}-{rng.randint(0, 9999):04d}"
            website = f"https://www.{slugify(name)}.example" if rng.random() < 0.5 else ""
            rows.append((name, cat_id, lat, lon, str(number), street, hood, phone, website, eid, t))
            hours.append(_hours(rng, slug))
            made += 1
    # Stored in a shuffled order, so ids say nothing about categories.
    order = list(range(len(rows)))
    rng.shuffle(order)
    for pid, k in enumerate(order, start=1):
        conn.execute(
            "INSERT INTO places (id, name, category_id, lat, lon, house_number, street, "
            "neighbourhood_id, phone, website, edge_id, edge_t) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (pid, *rows[k]),
        )
        for day, h in enumerate(hours[k]):
            conn.execute(
                "INSERT INTO place_hours (place_id, day, opens, closes) VALUES (?, ?, ?, ?)",
                (pid, day, *(h or (None, None))),
            )

    # 6) the mapper account
    salt = make_salt(rng)
    conn.execute(
        "INSERT INTO users (username, email, password_hash, full_name, is_admin, created_at) "
        "VALUES (?, ?, ?, ?, 0, ?)",
        (
            MAPPER_USERNAME,
            "mapper@riverton.example",
            hash_password(MAPPER_PASSWORD, salt),
            "Riverton Mapper",
            "2022-03-01 10:00:00",
        ),
    )


MAP_BACKEND = Backend(
    name="map",
    version=f"{SITE_VERSION}-{source_digest(__file__, 'db.py', 'geo.py')}",
    create_schema=create_schema,
    seed=seed,
    seed_value=0,
)
"""The map's database (served by the ``map`` site only)."""
