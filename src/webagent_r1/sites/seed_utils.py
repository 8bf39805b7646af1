"""Helpers shared by the seeders of the embedded sites: word lists, dates, passwords, checksums.

Everything here is deterministic given a ``random.Random``; seeders never read the clock, so
two builds from the same seed hold identical data (see :func:`data_checksum`).
"""

from __future__ import annotations

import hashlib
import hmac
import random
import sqlite3
from datetime import datetime, timedelta


def words(text: str) -> tuple[str, ...]:
    """Split a space-separated word list (keeps long lists compact in the source)."""
    return tuple(text.split())


FIRST_NAMES = words(
    "Emma Olivia Ava Sophia Isabella Mia Amelia Harper Evelyn Abigail Emily Ella Elizabeth "
    "Camila Luna Sofia Avery Mila Aria Scarlett Penelope Layla Chloe Victoria Madison Eleanor "
    "Grace Nora Riley Zoey Hannah Hazel Lily Ellie Violet Lillian Zoe Stella Aurora Natalie "
    "Liam Noah William James Oliver Benjamin Elijah Lucas Mason Logan Alexander Ethan Jacob "
    "Michael Daniel Henry Jackson Sebastian Aiden Matthew Samuel David Joseph Carter Owen Wyatt "
    "John Jack Luke Jayden Dylan Grayson Levi Isaac Gabriel Julian Mateo Anthony Jaxon Lincoln "
    "Joshua Christopher Andrew Theodore Caleb Ryan Asher Nathan Thomas Leo Isaiah Charles Josiah"
)

LAST_NAMES = words(
    "Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez Hernandez Lopez "
    "Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin Lee Perez Thompson White Harris "
    "Sanchez Clark Ramirez Lewis Robinson Walker Young Allen King Wright Scott Torres Nguyen Hill "
    "Flores Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts Gomez Phillips "
    "Evans Turner Diaz Parker Cruz Edwards Collins Reyes Stewart Morris Morales Murphy Cook "
    "Rogers Gutierrez Ortiz Morgan Cooper Peterson Bailey Reed Kelly Howard Ramos Kim Cox Ward "
    "Richardson Watson Brooks Chavez Wood James Bennett Gray Mendoza Ruiz Hughes Price Alvarez "
    "Castillo Sanders Patel Myers Long Ross Foster Jimenez Chen Wang Singh Schmidt Novak"
)

EMAIL_DOMAINS = ("gmail.com", "yahoo.com", "outlook.com", "hotmail.com", "icloud.com")

STREET_NAMES = words(
    "Main Oak Maple Cedar Pine Elm Washington Lake Hill Park Sunset Highland Lincoln Church "
    "Willow Jackson Franklin Madison Ridge River Spring Meadow Forest Chestnut Walnut Adams "
    "Jefferson Valley Harbor Mill Birch Lakeview Center Broadway Prospect Summit Orchard"
)
STREET_SUFFIXES = ("St", "Ave", "Rd", "Blvd", "Ln", "Dr", "Ct", "Way", "Pl")

# (city, state code, state name, zip prefix)
CITIES = (
    ("New York", "NY", "New York", "100"),
    ("Brooklyn", "NY", "New York", "112"),
    ("Buffalo", "NY", "New York", "142"),
    ("Los Angeles", "CA", "California", "900"),
    ("San Francisco", "CA", "California", "941"),
    ("San Diego", "CA", "California", "921"),
    ("Sacramento", "CA", "California", "958"),
    ("Chicago", "IL", "Illinois", "606"),
    ("Houston", "TX", "Texas", "770"),
    ("Austin", "TX", "Texas", "787"),
    ("Dallas", "TX", "Texas", "752"),
    ("Phoenix", "AZ", "Arizona", "850"),
    ("Philadelphia", "PA", "Pennsylvania", "191"),
    ("Pittsburgh", "PA", "Pennsylvania", "152"),
    ("Seattle", "WA", "Washington", "981"),
    ("Spokane", "WA", "Washington", "992"),
    ("Denver", "CO", "Colorado", "802"),
    ("Boston", "MA", "Massachusetts", "021"),
    ("Cambridge", "MA", "Massachusetts", "021"),
    ("Miami", "FL", "Florida", "331"),
    ("Orlando", "FL", "Florida", "328"),
    ("Tampa", "FL", "Florida", "336"),
    ("Atlanta", "GA", "Georgia", "303"),
    ("Portland", "OR", "Oregon", "972"),
    ("Las Vegas", "NV", "Nevada", "891"),
    ("Nashville", "TN", "Tennessee", "372"),
    ("Columbus", "OH", "Ohio", "432"),
    ("Cleveland", "OH", "Ohio", "441"),
    ("Detroit", "MI", "Michigan", "482"),
    ("Minneapolis", "MN", "Minnesota", "554"),
    ("Charlotte", "NC", "North Carolina", "282"),
    ("Raleigh", "NC", "North Carolina", "276"),
    ("Salt Lake City", "UT", "Utah", "841"),
    ("Baltimore", "MD", "Maryland", "212"),
    ("Milwaukee", "WI", "Wisconsin", "532"),
    ("Kansas City", "MO", "Missouri", "641"),
    ("Richmond", "VA", "Virginia", "232"),
    ("Newark", "NJ", "New Jersey", "071"),
    ("Albuquerque", "NM", "New Mexico", "871"),
    ("New Orleans", "LA", "Louisiana", "701"),
)

PASSWORD_ITERATIONS = 1000  # low on purpose: toy sites, hundreds of accounts seeded per build


def hash_password(password: str, salt: str) -> str:
    """Return the PBKDF2-SHA256 hex digest of ``password`` with ``salt``.

    Args:
        password: The plain-text password.
        salt: A per-user salt string.

    Returns:
        ``"<salt>$<hex digest>"``, the value stored in ``users.password_hash``.
    """
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt.encode(), PASSWORD_ITERATIONS)
    return f"{salt}${digest.hex()}"


def check_password(password: str, stored: str) -> bool:
    """Check ``password`` against a value produced by :func:`hash_password`."""
    salt, _, _ = stored.partition("$")
    return hmac.compare_digest(hash_password(password, salt), stored)


def make_salt(rng: random.Random) -> str:
    """A deterministic 16-hex-digit salt drawn from ``rng``."""
    return f"{rng.getrandbits(64):016x}"


def rand_datetime(rng: random.Random, start: datetime, end: datetime) -> datetime:
    """A datetime drawn uniformly between ``start`` and ``end`` (whole seconds)."""
    span = int((end - start).total_seconds())
    return start + timedelta(seconds=rng.randrange(span))


def fmt_dt(dt: datetime) -> str:
    """Format a datetime the way the sites store it: ``YYYY-MM-DD HH:MM:SS``."""
    return dt.strftime("%Y-%m-%d %H:%M:%S")


def rand_phone(rng: random.Random) -> str:
    """A plausible US phone number, e.g. ``(415) 555-0142``."""
    return f"({rng.randint(201, 989)}) {rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"


def rand_address(rng: random.Random) -> dict[str, str]:
    """A plausible US street address as a dict (street, city, region, region_code, postcode)."""
    city, code, state, zip_prefix = rng.choice(CITIES)
    street = f"{rng.randint(1, 9899)} {rng.choice(STREET_NAMES)} {rng.choice(STREET_SUFFIXES)}"
    return {
        "street": street,
        "city": city,
        "region": state,
        "region_code": code,
        "postcode": f"{zip_prefix}{rng.randint(1, 99):02d}",
        "country": "United States",
    }


def round_price(rng: random.Random, lo: float, hi: float) -> float:
    """A retail-looking price in ``[lo, hi]`` ending in .99, .49, .95 or .00."""
    whole = rng.randint(int(lo), max(int(lo), int(hi)))
    cents = rng.choice((0.99, 0.99, 0.99, 0.49, 0.95, 0.0))
    return round(max(whole + cents, 0.99), 2)


def slugify(text: str) -> str:
    """Lower-case ``text`` and join its alphanumeric runs with '-' (``"Men's Clothing"`` ->
    ``"mens-clothing"``)."""
    out, prev_dash = [], True
    for ch in text.lower().replace("'", "").replace("&", "and"):
        if ch.isalnum():
            out.append(ch)
            prev_dash = False
        elif not prev_dash:
            out.append("-")
            prev_dash = True
    return "".join(out).strip("-")


def data_checksum(conn: sqlite3.Connection) -> str:
    """SHA-256 over the SQL dump of a database: equal for databases with equal contents."""
    h = hashlib.sha256()
    for line in conn.iterdump():
        h.update(line.encode())
        h.update(b"\n")
    return h.hexdigest()
