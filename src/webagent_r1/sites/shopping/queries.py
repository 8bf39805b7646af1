"""Database queries shared by the shop and its admin panel."""

from __future__ import annotations

import sqlite3
from typing import Any

from webagent_r1.sites.base import like_escape

# Rating summaries as correlated subqueries: they use the (product_id, status) index and only
# run for the rows a query returns, where joining the product_ratings view would aggregate
# every review on each page view.
PRODUCT_COLUMNS = (
    "p.*, c.name AS category_name, c.path AS category_path, pc.name AS top_name, "
    "pc.path AS top_path, "
    "COALESCE((SELECT AVG(rating) FROM reviews r WHERE r.product_id = p.id "
    "AND r.status = 'approved'), 0) AS rating, "
    "(SELECT COUNT(*) FROM reviews r WHERE r.product_id = p.id "
    "AND r.status = 'approved') AS review_count"
)
"""Columns of a product row with category names and its rating summary."""
PRODUCT_FROM_LITE = (
    "products p JOIN categories c ON c.id = p.category_id "
    "LEFT JOIN categories pc ON pc.id = c.parent_id"
)
"""Products with their categories."""
PRODUCT_FROM = PRODUCT_FROM_LITE
"""FROM clause that goes with ``PRODUCT_COLUMNS``."""


def get_product(db: sqlite3.Connection, product_id: int) -> sqlite3.Row | None:
    """A product with its category names and rating summary, or None."""
    return db.execute(
        f"SELECT {PRODUCT_COLUMNS} FROM {PRODUCT_FROM} WHERE p.id = ?", (product_id,)
    ).fetchone()


def product_options(db: sqlite3.Connection, product_id: int) -> dict[str, list[str]]:
    """``{"color": [...], "size": [...]}`` in display order (empty lists when not apt)."""
    out: dict[str, list[str]] = {"color": [], "size": []}
    for row in db.execute(
        "SELECT kind, value FROM product_options WHERE product_id = ? ORDER BY position",
        (product_id,),
    ):
        out[row["kind"]].append(row["value"])
    return out


def category_tree(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """Top-level categories, each with ``children`` (leaf categories), in menu order."""
    rows = db.execute("SELECT * FROM categories ORDER BY parent_id IS NOT NULL, position")
    tops: dict[int, dict[str, Any]] = {}
    for row in rows:
        if row["parent_id"] is None:
            tops[row["id"]] = {**dict(row), "children": []}
        else:
            tops[row["parent_id"]]["children"].append(dict(row))
    return list(tops.values())


def get_order(db: sqlite3.Connection, order_id: int) -> sqlite3.Row | None:
    """An order joined with its customer's name and email, or None."""
    return db.execute(
        "SELECT o.*, cu.first_name || ' ' || cu.last_name AS customer_name, "
        "cu.email AS customer_email FROM orders o JOIN customers cu ON cu.id = o.customer_id "
        "WHERE o.id = ?",
        (order_id,),
    ).fetchone()


def order_items(db: sqlite3.Connection, order_id: int) -> list[sqlite3.Row]:
    """The lines of an order."""
    return db.execute(
        "SELECT * FROM order_items WHERE order_id = ? ORDER BY id", (order_id,)
    ).fetchall()


def order_item_summary(db: sqlite3.Connection, order_ids: list[int]) -> dict[int, str]:
    """Order id -> short text of its items (``"2 x Orbit Sleek Charger, ..."``)."""
    if not order_ids:
        return {}
    marks = ",".join("?" * len(order_ids))
    out: dict[int, list[str]] = {}
    for row in db.execute(
        f"SELECT order_id, name, qty FROM order_items WHERE order_id IN ({marks}) ORDER BY id",
        order_ids,
    ):
        out.setdefault(row["order_id"], []).append(
            row["name"] if row["qty"] == 1 else f"{row['qty']} x {row['name']}"
        )
    return {k: ", ".join(v) for k, v in out.items()}


def like_pattern(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere (wildcards in it are escaped)."""
    return f"%{like_escape(text)}%"
