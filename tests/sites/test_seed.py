"""The seeded shop database: deterministic, large enough to need search and pagination."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from webagent_r1.sites import SITES, RunningSites
from webagent_r1.sites.base import SITE_CLOCK_START
from webagent_r1.sites.seed_utils import check_password, data_checksum


def test_seed_is_deterministic(tmp_path: Path) -> None:
    backend = SITES["shopping"].backend
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    backend.build(a)
    backend.build(b)
    with sqlite3.connect(a) as da, sqlite3.connect(b) as db:
        assert data_checksum(da) == data_checksum(db)


def test_seed_sizes_and_accounts(sites: RunningSites) -> None:
    db = sites.connect("shopping", "default")
    count = {
        t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
        for t in ("products", "categories", "customers", "orders", "reviews")
    }
    assert 300 <= count["products"] <= 500
    assert 30 <= count["categories"] <= 60
    assert count["customers"] == 200 and count["orders"] == 400
    assert 700 <= count["reviews"] <= 900
    names = [r[0] for r in db.execute("SELECT name FROM products")]
    assert len(names) == len(set(names)), "product names must be unique"
    statuses = {r[0] for r in db.execute("SELECT DISTINCT status FROM orders")}
    assert statuses == {"pending", "processing", "shipped", "complete", "canceled"}
    for site in ("shopping", "shopping_admin"):
        for user in SITES[site].users:
            row = db.execute(
                "SELECT password_hash, is_admin FROM users WHERE username = ?", (user.username,)
            ).fetchone()
            assert row is not None and check_password(user.password, row[0])
            assert bool(row[1]) == user.is_admin
    db.close()


def test_every_seeded_date_is_before_the_instance_clock_starts() -> None:
    """A write stamped by an instance's clock is newer than every seeded row of every site."""
    latest = []
    for backend in {s.backend.name: s.backend for s in SITES.values()}.values():
        with sqlite3.connect(backend.ensure_pristine()) as db:
            for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
                for col in [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]:
                    (value,) = db.execute(
                        f'SELECT MAX("{col}") FROM "{table}" WHERE typeof("{col}") = \'text\' '
                        f"AND \"{col}\" GLOB '[12][0-9][0-9][0-9]-[01][0-9]-[0-3][0-9]*'"
                    ).fetchone()
                    if value:
                        latest.append((value, f"{backend.name}.{table}.{col}"))
    assert len(latest) > 20  # the dated columns were found (orders, comments, commits, ...)
    assert max(latest) < (SITE_CLOCK_START.strftime("%Y-%m-%d %H:%M:%S"), "")
