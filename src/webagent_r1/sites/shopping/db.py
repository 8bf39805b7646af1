"""Schema and deterministic seed of the shop's database, shared by ``shopping`` and
``shopping_admin`` (as WebArena's OneStopShop and its Magento admin share one store).

Seeded contents (seed 0): ~430 products in 39 leaf categories under 10 top-level ones, 200
customers (each with a login, password ``Password.123``), 400 orders from Jan 2022 to Dec 2023,
~800 reviews (about 8 % pending moderation), a few wish lists, and the admin account.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta

from webagent_r1.sites.base import Backend, SiteUser, source_digest
from webagent_r1.sites.seed_utils import (
    EMAIL_DOMAINS,
    FIRST_NAMES,
    LAST_NAMES,
    fmt_dt,
    hash_password,
    make_salt,
    rand_address,
    rand_datetime,
    rand_phone,
    round_price,
    slugify,
)
from webagent_r1.sites.shopping.catalog import (
    ADJECTIVES,
    CATALOG,
    REVIEW_CLOSERS,
    REVIEW_DETAILS,
    REVIEW_OPENERS,
    REVIEW_TITLES,
    USES,
)

SITE_VERSION = "2"
"""Version of the shop schema + seed; bump it when either changes (rebuilds cached DBs)."""


ORDER_STATUSES = ("pending", "processing", "shipped", "complete", "canceled")
REVIEW_STATUSES = ("pending", "approved")
CUSTOMER_PASSWORD = "Password.123"
ADMIN_USERNAME, ADMIN_PASSWORD = "admin", "admin1234"
SHIPPING_PER_ITEM = 5.0  # "Flat Rate" shipping: $5 per item, as in WebArena's Magento store
STORE_NAME = "One Stop Market"

# Named customers that tasks refer to (first one: the default shopper, as in WebArena).
NAMED_CUSTOMERS = (
    ("Emma", "Lopez", "emma.lopez@gmail.com"),
    ("Alex", "Chen", "alex.chen@outlook.com"),
    ("Olivia", "Brown", "olivia.brown@yahoo.com"),
    ("Liam", "Nguyen", "liam.nguyen@gmail.com"),
)

SHOP_USERS = (
    SiteUser("emma.lopez", CUSTOMER_PASSWORD, False, "Emma Lopez, the default shopper"),
    SiteUser("alex.chen", CUSTOMER_PASSWORD, False, "Alex Chen, customer"),
    SiteUser("olivia.brown", CUSTOMER_PASSWORD, False, "Olivia Brown, customer"),
    SiteUser("liam.nguyen", CUSTOMER_PASSWORD, False, "Liam Nguyen, customer"),
)
ADMIN_USERS = (SiteUser(ADMIN_USERNAME, ADMIN_PASSWORD, True, "Store administrator"),)

SCHEMA = """
CREATE TABLE categories (
    id INTEGER PRIMARY KEY,
    parent_id INTEGER REFERENCES categories(id),
    name TEXT NOT NULL,
    slug TEXT NOT NULL,
    path TEXT NOT NULL UNIQUE,          -- 'electronics' or 'electronics/headphones'
    position INTEGER NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    brand TEXT NOT NULL,
    category_id INTEGER NOT NULL REFERENCES categories(id),  -- always a leaf category
    description TEXT NOT NULL,
    price REAL NOT NULL,
    stock_qty INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled')),
    featured INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE TABLE product_options (
    id INTEGER PRIMARY KEY,
    product_id INTEGER NOT NULL REFERENCES products(id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('color', 'size')),
    value TEXT NOT NULL,
    position INTEGER NOT NULL,
    UNIQUE (product_id, kind, value)
);
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    user_id INTEGER UNIQUE REFERENCES users(id),
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    phone TEXT NOT NULL DEFAULT '',
    street TEXT NOT NULL DEFAULT '',
    city TEXT NOT NULL DEFAULT '',
    region TEXT NOT NULL DEFAULT '',
    postcode TEXT NOT NULL DEFAULT '',
    country TEXT NOT NULL DEFAULT 'United States',
    created_at TEXT NOT NULL
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    increment_id TEXT NOT NULL UNIQUE,   -- the order number customers see: '000000123'
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    status TEXT NOT NULL CHECK (status IN
        ('pending', 'processing', 'shipped', 'complete', 'canceled')),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    total_qty INTEGER NOT NULL,
    subtotal REAL NOT NULL,
    shipping_amount REAL NOT NULL,
    grand_total REAL NOT NULL,
    ship_name TEXT NOT NULL,
    ship_street TEXT NOT NULL,
    ship_city TEXT NOT NULL,
    ship_region TEXT NOT NULL,
    ship_postcode TEXT NOT NULL,
    ship_country TEXT NOT NULL,
    ship_phone TEXT NOT NULL,
    shipping_method TEXT NOT NULL,
    payment_method TEXT NOT NULL
);
CREATE TABLE order_items (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
    product_id INTEGER REFERENCES products(id),
    sku TEXT NOT NULL,
    name TEXT NOT NULL,
    color TEXT NOT NULL DEFAULT '',
    size TEXT NOT NULL DEFAULT '',
    price REAL NOT NULL,
    qty INTEGER NOT NULL,
    row_total REAL NOT NULL
);
CREATE TABLE order_comments (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    comment TEXT NOT NULL,
    author TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE reviews (
    id INTEGER PRIMARY KEY,
    product_id INTEGER NOT NULL REFERENCES products(id) ON DELETE CASCADE,
    customer_id INTEGER REFERENCES customers(id),
    nickname TEXT NOT NULL,
    rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved')),
    created_at TEXT NOT NULL
);
CREATE TABLE cart_items (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER REFERENCES customers(id),
    session_token TEXT,                 -- guest carts belong to a session
    product_id INTEGER NOT NULL REFERENCES products(id) ON DELETE CASCADE,
    color TEXT NOT NULL DEFAULT '',
    size TEXT NOT NULL DEFAULT '',
    qty INTEGER NOT NULL,
    added_at TEXT NOT NULL
);
CREATE TABLE wishlist_items (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(id),
    product_id INTEGER NOT NULL REFERENCES products(id) ON DELETE CASCADE,
    added_at TEXT NOT NULL,
    UNIQUE (customer_id, product_id)
);
CREATE VIEW product_ratings AS
    SELECT product_id, COUNT(*) AS review_count, AVG(rating) AS rating
    FROM reviews WHERE status = 'approved' GROUP BY product_id;
CREATE INDEX idx_products_category ON products(category_id);
CREATE INDEX idx_options_product ON product_options(product_id);
CREATE INDEX idx_reviews_product ON reviews(product_id, status);
CREATE INDEX idx_orders_customer ON orders(customer_id);
CREATE INDEX idx_orders_created ON orders(created_at);
CREATE INDEX idx_order_items_order ON order_items(order_id);
CREATE INDEX idx_order_items_product ON order_items(product_id);
CREATE INDEX idx_cart_owner ON cart_items(customer_id, session_token);
"""


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the shop tables (``users`` and ``sessions`` come from the base schema)."""
    conn.executescript(SCHEMA)


def seed(conn: sqlite3.Connection, rng: random.Random) -> None:
    """Fill the shop database; every random choice comes from ``rng``."""
    popularity = _seed_catalog(conn, rng)
    customers = _seed_people(conn, rng)
    _seed_orders(conn, rng, customers, popularity)
    _seed_reviews(conn, rng, customers, popularity)
    _seed_wishlists(conn, rng, customers)


def _seed_catalog(conn: sqlite3.Connection, rng: random.Random) -> dict[int, float]:
    """Categories, products and their options; returns product id -> popularity weight."""
    used_names: set[str] = set()
    used_skus: set[str] = set()
    popularity: dict[int, float] = {}
    cat_id = 0
    product_id = 0
    start, end = datetime(2021, 1, 1), datetime(2021, 12, 31)
    for top_pos, top in enumerate(CATALOG):
        cat_id += 1
        top_id, top_slug = cat_id, slugify(top.name)
        conn.execute(
            "INSERT INTO categories VALUES (?, NULL, ?, ?, ?, ?)",
            (top_id, top.name, top_slug, top_slug, top_pos),
        )
        for leaf_pos, leaf in enumerate(top.leaves):
            cat_id += 1
            slug = slugify(leaf.name)
            conn.execute(
                "INSERT INTO categories VALUES (?, ?, ?, ?, ?, ?)",
                (cat_id, top_id, leaf.name, slug, f"{top_slug}/{slug}", leaf_pos),
            )
            nouns = list(leaf.nouns)
            rng.shuffle(nouns)
            for k in range(rng.randint(9, 14)):
                noun = nouns[k % len(nouns)]
                for _ in range(100):
                    brand, adj = rng.choice(top.brands), rng.choice(ADJECTIVES)
                    name = f"{brand} {adj} {noun}"
                    if name not in used_names:
                        break
                used_names.add(name)
                product_id += 1
                sku = _sku(rng, used_skus)
                # Skew prices toward the low end of the range, like real catalogues.
                lo, hi = leaf.price
                price = round_price(rng, lo, lo + (hi - lo) * rng.random() ** 1.6)
                stock = (
                    0
                    if rng.random() < 0.07
                    else rng.choice((rng.randint(1, 9), rng.randint(10, 60), rng.randint(60, 300)))
                )
                status = "disabled" if rng.random() < 0.03 else "enabled"
                f1, f2 = rng.sample(top.features, 2)
                desc = f"The {name} is made for {rng.choice(USES)}. It offers {f1} and {f2}."
                colors = rng.sample(leaf.colors, min(len(leaf.colors), rng.randint(1, 4)))
                sizes: list[str] = []
                if leaf.sizes:
                    a = rng.randint(0, max(0, len(leaf.sizes) - 3))
                    sizes = list(leaf.sizes[a : a + rng.randint(3, len(leaf.sizes))])
                if len(colors) > 1:
                    desc += f" Available in {len(colors)} colors."
                created = fmt_dt(rand_datetime(rng, start, end))
                conn.execute(
                    "INSERT INTO products VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
                    (
                        product_id,
                        sku,
                        name,
                        brand,
                        cat_id,
                        desc,
                        price,
                        stock,
                        status,
                        created,
                        created,
                    ),
                )
                for kind, values in (("color", colors), ("size", sizes)):
                    for pos, value in enumerate(values):
                        conn.execute(
                            "INSERT INTO product_options (product_id, kind, value, position) "
                            "VALUES (?, ?, ?, ?)",
                            (product_id, kind, value, pos),
                        )
                popularity[product_id] = rng.paretovariate(2.0)
    enabled = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM products WHERE status = 'enabled' AND stock_qty > 0 ORDER BY id"
        )
    ]
    featured = rng.sample(enabled, 8)
    conn.executemany("UPDATE products SET featured = 1 WHERE id = ?", [(i,) for i in featured])
    return popularity


def _sku(rng: random.Random, used: set[str]) -> str:
    # Amazon-ASIN-like SKUs, as in WebArena's store: 'B0' + 8 upper-case letters/digits.
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"
    while True:
        sku = "B0" + "".join(rng.choice(alphabet) for _ in range(8))
        if sku not in used:
            used.add(sku)
            return sku


def _seed_people(conn: sqlite3.Connection, rng: random.Random) -> list[sqlite3.Row]:
    """The admin account and 200 customers, each with a user account."""
    conn.execute(
        "INSERT INTO users (id, username, email, password_hash, full_name, is_admin, created_at) "
        "VALUES (1, ?, 'admin@onestopmarket.com', ?, 'Store Admin', 1, '2021-01-01 09:00:00')",
        (ADMIN_USERNAME, hash_password(ADMIN_PASSWORD, make_salt(rng))),
    )
    people: list[tuple[str, str, str]] = list(NAMED_CUSTOMERS)
    seen = {(f, la) for f, la, _ in people}
    emails = {e for _, _, e in people}
    while len(people) < 200:
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        if (first, last) in seen:
            continue
        seen.add((first, last))
        email = f"{first}.{last}@{rng.choice(EMAIL_DOMAINS)}".lower()
        while email in emails:
            email = f"{first}.{last}{rng.randint(1, 99)}@{rng.choice(EMAIL_DOMAINS)}".lower()
        emails.add(email)
        people.append((first, last, email))
    start, end = datetime(2021, 1, 1), datetime(2021, 12, 31)
    for i, (first, last, email) in enumerate(people):
        user_id, customer_id = i + 2, i + 1
        created = fmt_dt(rand_datetime(rng, start, end))
        conn.execute(
            "INSERT INTO users (id, username, email, password_hash, full_name, is_admin, "
            "created_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
            (
                user_id,
                f"{first}.{last}".lower(),
                email,
                hash_password(CUSTOMER_PASSWORD, make_salt(rng)),
                f"{first} {last}",
                created,
            ),
        )
        addr = rand_address(rng)
        conn.execute(
            "INSERT INTO customers (id, user_id, first_name, last_name, email, phone, street, "
            "city, region, postcode, country, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                customer_id,
                user_id,
                first,
                last,
                email,
                rand_phone(rng),
                addr["street"],
                addr["city"],
                addr["region"],
                addr["postcode"],
                addr["country"],
                created,
            ),
        )
    conn.row_factory = sqlite3.Row
    return conn.execute("SELECT * FROM customers ORDER BY id").fetchall()


def _weighted_sample(rng: random.Random, weights: dict[int, float], k: int) -> list[int]:
    keys = list(weights)
    w = [weights[x] for x in keys]
    out: list[int] = []
    while len(out) < k:
        pick = rng.choices(keys, w)[0]
        if pick not in out:
            out.append(pick)
    return out


def _seed_orders(
    conn: sqlite3.Connection,
    rng: random.Random,
    customers: list[sqlite3.Row],
    popularity: dict[int, float],
) -> None:
    """400 orders between Jan 2022 and Dec 2023; recent ones are still open."""
    products = {r["id"]: r for r in conn.execute("SELECT * FROM products")}
    options: dict[tuple[int, str], list[str]] = {}
    for r in conn.execute("SELECT product_id, kind, value FROM product_options ORDER BY id"):
        options.setdefault((r[0], r[1]), []).append(r[2])
    start, end = datetime(2022, 1, 1), datetime(2023, 12, 31, 23, 59)
    cust_weights = [0.0] + [rng.paretovariate(1.5) for _ in customers[1:]]
    owners = [customers[0]] * 12 + rng.choices(customers, cust_weights, k=388)
    dates = sorted(rand_datetime(rng, start, end) for _ in owners)
    rng.shuffle(owners)
    n = len(dates)
    for idx, (created, cust) in enumerate(zip(dates, owners, strict=True)):
        order_id = idx + 1
        from_end = n - idx  # 1 = newest
        if from_end <= 20:
            status = rng.choice(("pending", "pending", "processing"))
        elif from_end <= 45:
            status = rng.choice(("processing", "processing", "shipped", "pending"))
        elif from_end <= 90:
            status = rng.choice(("shipped", "shipped", "complete"))
        else:
            status = "canceled" if rng.random() < 0.12 else "complete"
        n_items = rng.choices((1, 2, 3, 4), (45, 30, 15, 10))[0]
        subtotal, qty_total = 0.0, 0
        for pid in _weighted_sample(rng, popularity, n_items):
            p = products[pid]
            qty = rng.choices((1, 2, 3), (75, 18, 7))[0]
            color = rng.choice(options.get((pid, "color"), [""]))
            size = rng.choice(options.get((pid, "size"), [""]))
            row_total = round(p["price"] * qty, 2)
            conn.execute(
                "INSERT INTO order_items (order_id, product_id, sku, name, color, size, price, "
                "qty, row_total) VALUES (?,?,?,?,?,?,?,?,?)",
                (order_id, pid, p["sku"], p["name"], color, size, p["price"], qty, row_total),
            )
            subtotal += row_total
            qty_total += qty
        shipping = SHIPPING_PER_ITEM * qty_total
        updated = created + timedelta(days=rng.randint(0, 6)) if status != "pending" else created
        conn.execute(
            "INSERT INTO orders VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                order_id,
                f"{order_id:09d}",
                cust["id"],
                status,
                fmt_dt(created),
                fmt_dt(updated),
                qty_total,
                round(subtotal, 2),
                shipping,
                round(subtotal + shipping, 2),
                f"{cust['first_name']} {cust['last_name']}",
                cust["street"],
                cust["city"],
                cust["region"],
                cust["postcode"],
                cust["country"],
                cust["phone"],
                "Flat Rate - Fixed",
                "Check / Money order",
            ),
        )
        if status == "canceled":
            comment = "Canceled at the customer's request."
        elif status in ("shipped", "complete"):
            comment = f"Shipped with UPS, tracking number 1Z{rng.randrange(10**12):012d}."
        else:
            continue
        conn.execute(
            "INSERT INTO order_comments (order_id, status, comment, author, created_at) "
            "VALUES (?, ?, ?, 'admin', ?)",
            (order_id, status, comment, fmt_dt(updated)),
        )


def _seed_reviews(
    conn: sqlite3.Connection,
    rng: random.Random,
    customers: list[sqlite3.Row],
    popularity: dict[int, float],
) -> None:
    """~800 reviews; each product has a latent quality its ratings scatter around."""
    rows = conn.execute("SELECT id, name FROM products ORDER BY id").fetchall()
    quality = {r["id"]: rng.uniform(2.4, 4.9) for r in rows}
    weights = {pid: 0.4 + w for pid, w in popularity.items()}
    keys = list(weights)
    start, end = datetime(2021, 6, 1), datetime(2023, 12, 31)
    names = {r["id"]: r["name"] for r in rows}
    for _ in range(800):
        pid = rng.choices(keys, [weights[k] for k in keys])[0]
        rating = min(5, max(1, round(rng.gauss(quality[pid], 0.9))))
        noun = _noun_of(names[pid]).lower()
        title = rng.choice(REVIEW_TITLES[rating]).format(noun=noun)
        tone = "positive" if rating >= 4 else "neutral" if rating == 3 else "negative"
        body = " ".join(
            s
            for s in (
                rng.choice(REVIEW_OPENERS[rating]).format(noun=noun),
                *rng.sample(REVIEW_DETAILS[tone], rng.randint(1, 2)),
                rng.choice(REVIEW_CLOSERS[rating]),
            )
            if s
        )
        created = rand_datetime(rng, start, end)
        status = "pending" if created > datetime(2023, 9, 1) and rng.random() < 0.4 else "approved"
        if rng.random() < 0.7:
            cust = rng.choice(customers)
            cust_id, nickname = cust["id"], cust["first_name"]
        else:
            cust_id, nickname = None, rng.choice(FIRST_NAMES)
        conn.execute(
            "INSERT INTO reviews (product_id, customer_id, nickname, rating, title, body, status, "
            "created_at) VALUES (?,?,?,?,?,?,?,?)",
            (pid, cust_id, nickname, rating, title, body, status, fmt_dt(created)),
        )


def _noun_of(name: str) -> str:
    """The product noun of ``<Brand> <Adjective> <Noun>`` (brands may be several words)."""
    for adj in ADJECTIVES:
        marker = f" {adj} "
        if marker in name:
            return name.split(marker, 1)[1]
    return name


def _seed_wishlists(conn: sqlite3.Connection, rng: random.Random, customers: list) -> None:
    """A few wish-list items for the named customers and some others."""
    pids = [r[0] for r in conn.execute("SELECT id FROM products WHERE status = 'enabled'")]
    owners = [c["id"] for c in customers[:4]] + rng.sample([c["id"] for c in customers[4:]], 30)
    for cid in owners:
        for pid in rng.sample(pids, rng.randint(1, 4)):
            added = fmt_dt(rand_datetime(rng, datetime(2023, 1, 1), datetime(2023, 12, 31)))
            conn.execute(
                "INSERT INTO wishlist_items (customer_id, product_id, added_at) VALUES (?,?,?)",
                (cid, pid, added),
            )


SHOP_BACKEND = Backend(
    name="shopping",
    version=f"{SITE_VERSION}-{source_digest(__file__, 'db.py', 'catalog.py')}",
    create_schema=create_schema,
    seed=seed,
)
"""The database shared by the ``shopping`` and ``shopping_admin`` sites."""
