"""The seeded shop database: deterministic, large enough to need search and pagination."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from webagent_r1.sites import SITES, RunningSites
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
