"""Task templates of the shopping_admin site (WebArena's Magento admin panel).

Every task starts logged in as the store administrator. The templates cover WebArena's three
kinds: ``info`` (read a value off the grids, order pages and reports and answer with exit),
``nav`` (reach a filtered grid or an edit page, graded by url_match, with a program_html check
where a URL prefix alone could match the wrong record) and ``change`` (edit orders, products,
reviews and customers, graded by SQL checks on the episode's own database).

The experts navigate like a user: they use the admin menu, search boxes, filters, dropdowns
and "Next" pagination, and read answers off the observation text (table rows are lines of
``cell | cell | ...``). They never read the database; what they know comes from the task's
public parameters.
"""

from __future__ import annotations

import calendar
import random
import re
import sqlite3
from collections.abc import Generator
from datetime import date, timedelta
from typing import Any

from webagent_r1.sites.base import fmt_money
from webagent_r1.sites.seed_utils import rand_address, rand_phone
from webagent_r1.sites.shopping.catalog import ADJECTIVES, CATALOG, USES
from webagent_r1.tasks.experts import (
    Element,
    Expert,
    ExpertError,
    Step,
    answer,
    click,
    elements,
    find,
    maybe,
    search,
    select,
    type_text,
)
from webagent_r1.tasks.templates.common import (
    Registry,
    state_check,
    state_eval,
    string_eval,
    url_eval,
)
from webagent_r1.types import Observation

SITE = "shopping_admin"
ADMIN = "__SHOPPING_ADMIN__"
HOME = f"{ADMIN}/"

SubExpert = Generator["Step | None", Observation, Any]
"""A piece of an expert used with ``yield from``; its return value goes to the caller."""

MONTHS = [(y, m) for y in (2022, 2023) for m in range(1, 13)]
"""Months with orders in the seeded store (Jan 2022 to Dec 2023)."""
FIRST_ORDER_DAY, LAST_ORDER_DAY = date(2022, 1, 1), date(2023, 12, 31)
ORDER_STATUS_LABELS = {
    "pending": "Pending",
    "processing": "Processing",
    "shipped": "Shipped",
    "complete": "Complete",
    "canceled": "Canceled",
}
SKU_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ0123456789"


TEMPLATES = Registry(sites=[SITE], start_url=HOME, user="admin")
"""The module's templates, in the suite's order."""


# --------------------------------------------------------------------------------------------
# Helpers shared by samplers and experts
# --------------------------------------------------------------------------------------------


def month_label(year: int, month: int) -> str:
    """``(2023, 3)`` -> ``"March 2023"``."""
    return f"{calendar.month_name[month]} {year}"


def month_bounds(label: str) -> tuple[str, str]:
    """``"March 2023"`` -> ``("2023-03-01", "2023-03-31")``."""
    name, year_s = label.split()
    month = list(calendar.month_name).index(name)
    year = int(year_s)
    last = calendar.monthrange(year, month)[1]
    return f"{year}-{month:02d}-01", f"{year}-{month:02d}-{last:02d}"


def long_date(d: date) -> str:
    """``date(2023, 3, 5)`` -> ``"March 5, 2023"``."""
    return f"{calendar.month_name[d.month]} {d.day}, {d.year}"


def iso_of_long(text: str) -> str:
    """``"March 5, 2023"`` -> ``"2023-03-05"`` (the format the admin's date fields take)."""
    m = re.fullmatch(r"([A-Za-z]+) (\d{1,2}), (\d{4})", text.strip())
    if m is None:
        raise ExpertError(f"expert: cannot read the date {text!r}")
    month = list(calendar.month_name).index(m.group(1))
    return f"{int(m.group(3))}-{month:02d}-{int(m.group(2)):02d}"


def random_range(rng: random.Random, min_days: int, max_days: int) -> tuple[date, date]:
    """A random date range inside the order history, ``min_days``-``max_days`` days long."""
    length = rng.randint(min_days, max_days)
    span = (LAST_ORDER_DAY - FIRST_ORDER_DAY).days - length
    start = FIRST_ORDER_DAY + timedelta(days=rng.randint(0, span))
    return start, start + timedelta(days=length - 1)


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def table_rows(obs: Observation) -> list[list[str]]:
    """The table rows of the page (compact format: one ``a | b | c`` line per row)."""
    return [line.split(" | ") for line in obs.text.splitlines() if " | " in line]


def cell_text(cell: str) -> str:
    """A cell's visible text: an element's name for ``[N] link "Name"``, else the text."""
    els = elements(cell)
    return els[0].name if els and cell.strip().startswith("[") else cell.strip()


def find_row(obs: Observation, col: int, value: str) -> list[str] | None:
    """The first table row whose column ``col`` shows exactly ``value``."""
    for cells in table_rows(obs):
        if len(cells) > col and _norm(cell_text(cells[col])) == _norm(value):
            return cells
    return None


_ROW_EL_RE = re.compile(r'\[(\d+)\] (\S+)(?: "((?:[^"\\]|\\.)*)")?')


def row_elements(cells: list[str]) -> list[Element]:
    """The interactive elements of a table row (a cell may hold several, e.g. two buttons)."""
    line = " | ".join(cells)
    return [
        Element(m.group(1), m.group(2), (m.group(3) or "").replace('\\"', '"'), line)
        for m in _ROW_EL_RE.finditer(line)
    ]


def row_element(cells: list[str], role: str, name: str) -> Element:
    """An element (e.g. the "View" link or a "Delete" button) inside a table row."""
    for el in row_elements(cells):
        if el.role == role and _norm(el.name) == _norm(name):
            return el
    raise ExpertError(f"expert: no {role} {name!r} in the row {' | '.join(cells)!r}")


def menu(obs: Observation, name: str) -> Element:
    """A link of the admin menu (Orders, Products, Customers, Reviews, reports)."""
    return find(obs, "link", name, exact=True)


def records_found(obs: Observation) -> int:
    m = re.search(r"^(\d+) records found", obs.text, re.M)
    if m is None:
        raise ExpertError(f"expert: no 'records found' count on {obs.url}")
    return int(m.group(1))


def page_through(obs: Observation, col: int, value: str, what: str) -> SubExpert:
    """Follow "Next" until a row shows ``value`` in column ``col``; returns (obs, row)."""
    for _ in range(60):
        row = find_row(obs, col, value)
        if row is not None:
            return obs, row
        nxt = maybe(obs, "link", "Next", exact=True)
        if nxt is None:
            raise ExpertError(f"expert: {what} {value!r} not found on any page ({obs.url})")
        obs = yield click(nxt, f"{what} {value!r} is not on this page; I go to the next page.")
    raise ExpertError(f"expert: gave up paging for {value!r}")


def open_order(obs: Observation, order: str, goal: str) -> SubExpert:
    """From any admin page: Orders menu, search the order number, open its page."""
    obs = yield click(menu(obs, "Orders"), f"To {goal} I open the Orders grid from the menu.")
    box = find(obs, "textbox", "Search (order #")
    obs = yield search(box, order, f"I search the orders grid for the order number {order}.")
    row = find_row(obs, 0, order)
    if row is None:
        raise ExpertError(f"expert: order {order} not in the search results")
    obs = yield click(
        row_element(row, "link", "View"), f"Order {order} is listed; I open it with View."
    )
    return obs


def open_product(obs: Observation, key: str, col: int, goal: str) -> SubExpert:
    """From any admin page: Products menu, search a name (col 1) or SKU (col 2), open Edit."""
    label = "name" if col == 1 else "SKU"
    obs = yield click(menu(obs, "Products"), f"To {goal} I open the Products grid.")
    box = find(obs, "textbox", "Keyword (name or SKU)")
    obs = yield search(box, key, f"I search the products by the {label} {key}.")
    obs, row = yield from page_through(obs, col, key, f"the product with {label}")
    obs = yield click(
        row_element(row, "link", "Edit"),
        f"The row with {label} {key} is there; I click its Edit link to open the product.",
    )
    return obs


def open_customer(obs: Observation, name: str, goal: str) -> SubExpert:
    """From any admin page: Customers menu, search the name, open the customer's page."""
    obs = yield click(menu(obs, "Customers"), f"To {goal} I open the Customers grid.")
    box = find(obs, "textbox", "Search by keyword")
    obs = yield search(box, name, f"I search the customers for {name}.")
    obs, row = yield from page_through(obs, 1, name, "the customer")
    obs = yield click(
        row_element(row, "link", "View"), f"{name} is in the results; I open the customer page."
    )
    return obs


def fill_range(
    obs: Observation,
    start: str,
    end: str,
    from_label: str,
    to_label: str,
    shown: tuple[str, str] | None = None,
) -> SubExpert:
    """Type a date range (YYYY-MM-DD) into a pair of From/To text boxes; returns the last
    observation. ``shown``: the dates as the task wrote them, when they had to be converted."""
    for value, label, edge, as_shown in (
        (start, from_label, "starts", shown[0] if shown else None),
        (end, to_label, "ends", shown[1] if shown else None),
    ):
        if as_shown:
            why = f"The date fields take YYYY-MM-DD, so {as_shown} is {value}; I type it into "
        else:
            why = f"The period {edge} on {value}; I type it into "
        box = find(obs, "textbox", label, exact=True)
        obs = yield type_text(box, value, f"{why}{label}.")
    return obs


def one(conn: sqlite3.Connection, sql: str, *args: Any) -> sqlite3.Row | None:
    """The first row of a query on the pristine database."""
    return conn.execute(sql, args).fetchone()


def random_id(conn: sqlite3.Connection, rng: random.Random, table: str) -> int:
    """A random existing id of ``table`` (orders, products, customers, reviews)."""
    ids = [r[0] for r in conn.execute(f"SELECT id FROM {table} ORDER BY id")]
    return rng.choice(ids)


def done(why: str) -> Step:
    return answer("Done", why)


# --------------------------------------------------------------------------------------------
# 200 info: grand total of an order
# --------------------------------------------------------------------------------------------


def sample_order_total(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(conn, "SELECT * FROM orders WHERE id = ?", random_id(conn, rng, "orders"))
    if row is None:
        return None
    return {"order": row["increment_id"], "_answer": fmt_money(row["grand_total"])}


@TEMPLATES.template(
    id=200,
    name="shopping_admin.order_grand_total",
    kind="info",
    intent="What is the grand total of order #{order}? Answer with the amount only, like $12.34.",
    sample=sample_order_total,
    difficulty="3-5",
)
def expert_order_total(p: dict, obs: Observation) -> Expert:
    order = p["order"]
    obs = yield click(
        menu(obs, "Orders"), f"The grand total of order {order} is in the Orders grid."
    )
    box = find(obs, "textbox", "Search (order #")
    obs = yield search(box, order, f"I search the orders for the number {order}.")
    row = find_row(obs, 0, order)
    if row is None:
        raise ExpertError(f"expert: order {order} not found")
    total = row[3].strip()
    yield answer(total, f"The row of order {order} shows the grand total {total}.")


# --------------------------------------------------------------------------------------------
# 201 info: customer name and email of an order
# --------------------------------------------------------------------------------------------


def sample_order_customer(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(
        conn,
        "SELECT o.increment_id, c.first_name || ' ' || c.last_name AS name, c.email FROM orders o "
        "JOIN customers c ON c.id = o.customer_id WHERE o.id = ?",
        random_id(conn, rng, "orders"),
    )
    if row is None:
        return None
    return {"order": row["increment_id"], "_name": row["name"], "_email": row["email"]}


@TEMPLATES.template(
    id=201,
    name="shopping_admin.order_customer_email",
    kind="info",
    intent="Who placed order #{order}, and what is their email address? Answer like "
    "'Jane Doe, jane.doe@example.com'.",
    sample=sample_order_customer,
    evaluation=lambda p: string_eval([p["_name"], p["_email"]], "must_include"),
    difficulty="3-5",
)
def expert_order_customer(p: dict, obs: Observation) -> Expert:
    order = p["order"]
    obs = yield from open_order(obs, order, f"find who placed order {order}")
    m = re.search(r'Customer Name:\s*\[\d+\] link "([^"]+)"\s*Email: (\S+)', obs.text)
    if m is None:
        raise ExpertError("expert: no customer name and email on the order page")
    name, email = m.group(1).strip(), m.group(2)
    yield answer(
        f"{name}, {email}",
        f"The order page lists the customer {name} with the email {email}.",
    )


# --------------------------------------------------------------------------------------------
# 202 info: number of orders with a status in a month
# --------------------------------------------------------------------------------------------


def sample_status_count(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    combos = conn.execute(
        "SELECT status, strftime('%Y-%m', created_at) AS ym, COUNT(*) AS n FROM orders "
        "GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    row = rng.choice(combos)
    year, month = (int(x) for x in row["ym"].split("-"))
    return {
        "status": ORDER_STATUS_LABELS[row["status"]],
        "month": month_label(year, month),
        "_answer": str(row["n"]),
    }


@TEMPLATES.template(
    id=202,
    name="shopping_admin.count_orders_status_month",
    kind="info",
    intent="How many orders placed in {month} currently have the status {status}? Answer "
    "with a number only.",
    sample=sample_status_count,
    difficulty="6-9",
)
def expert_status_count(p: dict, obs: Observation) -> Expert:
    status, month = p["status"], p["month"]
    start, end = month_bounds(month)
    obs = yield click(
        menu(obs, "Orders"),
        f"The Orders grid can filter by status and purchase date, which is what I need to count "
        f"{status} orders in {month}.",
    )
    obs = yield select(
        find(obs, "combobox", "Status"), status, f"I set the Status filter to {status}."
    )
    obs = yield from fill_range(obs, start, end, "Purchased from", "Purchased to")
    obs = yield click(
        find(obs, "button", "Apply Filters"),
        f"Status {status} and the dates of {month} are set; I apply the filters.",
    )
    n = records_found(obs)
    yield answer(str(n), f"The filtered grid says {n} records found: {n} {status} orders.")


# --------------------------------------------------------------------------------------------
# 203 info: stock quantity of a product by SKU (starts on the products grid)
# --------------------------------------------------------------------------------------------


def sample_sku_stock(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(
        conn, "SELECT sku, stock_qty FROM products WHERE id = ?", random_id(conn, rng, "products")
    )
    if row is None:
        return None
    return {"sku": row["sku"], "_answer": str(row["stock_qty"])}


@TEMPLATES.template(
    id=203,
    name="shopping_admin.stock_by_sku",
    kind="info",
    intent="How many units of the product with SKU {sku} are in stock? Answer with a number only.",
    start_url=f"{ADMIN}/products",
    sample=sample_sku_stock,
    difficulty="1-2",
)
def expert_sku_stock(p: dict, obs: Observation) -> Expert:
    sku = p["sku"]
    box = find(obs, "textbox", "Keyword (name or SKU)")
    obs = yield search(box, sku, f"I am on the products grid; I search it for the SKU {sku}.")
    row = find_row(obs, 2, sku)
    if row is None:
        raise ExpertError(f"expert: SKU {sku} not found")
    qty = row[5].strip()
    yield answer(qty, f"The product with SKU {sku} shows a quantity of {qty} in the grid.")


# --------------------------------------------------------------------------------------------
# 204 info: best-selling product in a date range (Bestsellers Report)
# --------------------------------------------------------------------------------------------


def top_sellers(conn: sqlite3.Connection, start: str, end: str) -> list[sqlite3.Row]:
    """The report's first two rows for ``start``-``end`` (same query as the admin's report)."""
    return conn.execute(
        "SELECT oi.product_id, oi.name, oi.sku, SUM(oi.qty) AS qty, "
        "ROUND(SUM(oi.row_total), 2) AS revenue FROM order_items oi "
        "JOIN orders o ON o.id = oi.order_id WHERE o.status != 'canceled' "
        "AND date(o.created_at) >= ? AND date(o.created_at) <= ? GROUP BY oi.product_id "
        "ORDER BY qty DESC, revenue DESC, oi.name LIMIT 2",
        (start, end),
    ).fetchall()


def sample_bestseller(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    d0, d1 = random_range(rng, 20, 90)
    rows = top_sellers(conn, d0.isoformat(), d1.isoformat())
    if len(rows) < 2 or rows[0]["qty"] <= rows[1]["qty"]:
        return None  # no unambiguous best seller
    return {
        "start": long_date(d0),
        "end": long_date(d1),
        "_answer": rows[0]["name"],
        "_id": rows[0]["product_id"],
        "_sku": rows[0]["sku"],
    }


def bestseller_report(obs: Observation, p: dict) -> SubExpert:
    """Open the Bestsellers Report for the task's period; returns the top row's link."""
    start, end = iso_of_long(p["start"]), iso_of_long(p["end"])
    obs = yield click(
        menu(obs, "Bestsellers Report"),
        f"The Bestsellers Report ranks products by units sold; I open it to look at "
        f"{p['start']} to {p['end']}.",
    )
    obs = yield from fill_range(obs, start, end, "From", "To", (p["start"], p["end"]))
    obs = yield click(
        find(obs, "button", "Show Report"), "Both dates are entered; I show the report."
    )
    row = find_row(obs, 0, "1")
    if row is None:
        raise ExpertError("expert: the report has no rank 1 row")
    return obs, row


@TEMPLATES.template(
    id=204,
    name="shopping_admin.bestseller_in_period",
    kind="info",
    intent="According to the Bestsellers Report, which product sold the most units from "
    "{start} to {end}? Answer with the exact product name.",
    sample=sample_bestseller,
    difficulty="3-5",
)
def expert_bestseller(p: dict, obs: Observation) -> Expert:
    obs, row = yield from bestseller_report(obs, p)
    name, qty = cell_text(row[1]), row[3].strip()
    yield answer(name, f"Rank 1 in the report is {name} with {qty} units ordered.")


# --------------------------------------------------------------------------------------------
# 205 info: a monthly figure of the Sales Report
# --------------------------------------------------------------------------------------------

SALES_METRICS = {
    # metric -> (report column, answer format)
    "total sales amount": (5, "the amount only, like $1,234.56"),
    "number of orders": (1, "a number only"),
    "number of items sold": (2, "a number only"),
}


def sample_sales_month(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    year, month = rng.choice(MONTHS)
    metric = rng.choice(list(SALES_METRICS))
    row = one(
        conn,
        "SELECT COUNT(*) AS orders, SUM(total_qty) AS items, ROUND(SUM(grand_total), 2) AS total "
        "FROM orders WHERE status != 'canceled' AND strftime('%Y-%m', created_at) = ?",
        f"{year}-{month:02d}",
    )
    if row is None or not row["orders"]:
        return None
    value = {
        "total sales amount": fmt_money(row["total"]),
        "number of orders": str(row["orders"]),
        "number of items sold": str(row["items"]),
    }[metric]
    return {
        "metric": metric,
        "month": month_label(year, month),
        "answer_format": SALES_METRICS[metric][1],
        "_answer": value,
    }


@TEMPLATES.template(
    id=205,
    name="shopping_admin.sales_report_month",
    kind="info",
    intent="According to the Sales Report, what was the {metric} in {month} (canceled orders "
    "excluded)? Answer with {answer_format}.",
    sample=sample_sales_month,
    difficulty="3-5",
)
def expert_sales_month(p: dict, obs: Observation) -> Expert:
    metric, month = p["metric"], p["month"]
    start, end = month_bounds(month)
    col = SALES_METRICS[metric][0]
    obs = yield click(
        menu(obs, "Sales Report"),
        f"The Sales Report sums orders per month; I open it to find the {metric} of {month}.",
    )
    obs = yield from fill_range(obs, start, end, "From", "To")
    obs = yield click(
        find(obs, "button", "Show Report"),
        f"The dates cover {month} and the period is Month; I show the report.",
    )
    row = find_row(obs, 0, start[:7])
    if row is None:
        raise ExpertError(f"expert: no row {start[:7]} in the sales report")
    value = row[col].strip()
    yield answer(value, f"The row {start[:7]} shows {value} as the {metric}.")


# --------------------------------------------------------------------------------------------
# 206 info: phone or email of a customer (starts on the customers grid)
# --------------------------------------------------------------------------------------------

CONTACT_FIELDS = {"phone number": ("phone", 3), "email address": ("email", 2)}


def sample_contact(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(conn, "SELECT * FROM customers WHERE id = ?", random_id(conn, rng, "customers"))
    if row is None:
        return None
    field_ = rng.choice(list(CONTACT_FIELDS))
    return {
        "field": field_,
        "name": f"{row['first_name']} {row['last_name']}",
        "_answer": row[CONTACT_FIELDS[field_][0]],
    }


@TEMPLATES.template(
    id=206,
    name="shopping_admin.customer_contact",
    kind="info",
    intent="What is the {field} of the customer {name}? Answer with the {field} only.",
    start_url=f"{ADMIN}/customers",
    sample=sample_contact,
    difficulty="1-2",
)
def expert_contact(p: dict, obs: Observation) -> Expert:
    name, field_ = p["name"], p["field"]
    box = find(obs, "textbox", "Search by keyword")
    obs = yield search(box, name, f"I am on the customers grid; I search it for {name}.")
    obs, row = yield from page_through(obs, 1, name, "the customer")
    value = row[CONTACT_FIELDS[field_][1]].strip()
    yield answer(value, f"The row of {name} lists the {field_} {value}.")


# --------------------------------------------------------------------------------------------
# 207 nav: orders grid filtered by status and purchase dates
# --------------------------------------------------------------------------------------------


def sample_orders_filter(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    status = rng.choice(list(ORDER_STATUS_LABELS))
    d0, d1 = random_range(rng, 7, 120)
    n = one(
        conn,
        "SELECT COUNT(*) FROM orders WHERE status = ? AND date(created_at) >= ? "
        "AND date(created_at) <= ?",
        status,
        d0.isoformat(),
        d1.isoformat(),
    )[0]
    if n == 0:
        return None
    return {
        "status": ORDER_STATUS_LABELS[status],
        "start": d0.isoformat(),
        "end": d1.isoformat(),
        "_status": status,
    }


def eval_orders_filter(p: dict) -> dict[str, Any]:
    return url_eval(f"{ADMIN}/orders?status={p['_status']}&from={p['start']}&to={p['end']}")


@TEMPLATES.template(
    id=207,
    name="shopping_admin.orders_grid_filtered",
    kind="nav",
    intent="Show the orders grid filtered to {status} orders purchased from {start} to "
    "{end} (dates as YYYY-MM-DD).",
    sample=sample_orders_filter,
    evaluation=eval_orders_filter,
    difficulty="6-9",
)
def expert_orders_filter(p: dict, obs: Observation) -> Expert:
    status, start, end = p["status"], p["start"], p["end"]
    obs = yield click(
        menu(obs, "Orders"), f"I open the Orders grid to filter it to {status} orders."
    )
    obs = yield select(
        find(obs, "combobox", "Status"), status, f"I choose {status} in the Status filter."
    )
    obs = yield from fill_range(obs, start, end, "Purchased from", "Purchased to")
    obs = yield click(
        find(obs, "button", "Apply Filters"),
        f"Status {status} and dates {start} to {end} are set; I apply the filters.",
    )
    n = records_found(obs)
    yield done(f"The grid now shows the {n} {status} orders purchased from {start} to {end}.")


# --------------------------------------------------------------------------------------------
# 208 nav: the edit page of a product
# --------------------------------------------------------------------------------------------


def sample_product(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(conn, "SELECT * FROM products WHERE id = ?", random_id(conn, rng, "products"))
    if row is None:
        return None
    return {"name": row["name"], "_id": row["id"], "_sku": row["sku"]}


def eval_product_page(p: dict) -> dict[str, Any]:
    # url_match alone would accept /products/123 for /products/12: the SKU pins the product.
    return url_eval(
        f"{ADMIN}/products/{p['_id']}",
        shows=p["_sku"],
        locator="document.querySelector('#sku').value",
    )


@TEMPLATES.template(
    id=208,
    name="shopping_admin.open_product_edit",
    kind="nav",
    intent="Open the admin edit page of the product '{name}'.",
    sample=sample_product,
    evaluation=eval_product_page,
    difficulty="3-5",
)
def expert_product_page(p: dict, obs: Observation) -> Expert:
    name = p["name"]
    obs = yield from open_product(obs, name, 1, f"reach the edit page of {name}")
    yield done(f"This is the edit page of {name}, with its name, SKU, price and quantity.")


# --------------------------------------------------------------------------------------------
# 209 nav: the customer page of the customer who placed an order
# --------------------------------------------------------------------------------------------


def sample_order_owner(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(
        conn,
        "SELECT o.increment_id, c.id, c.first_name || ' ' || c.last_name AS name FROM orders o "
        "JOIN customers c ON c.id = o.customer_id WHERE o.id = ?",
        random_id(conn, rng, "orders"),
    )
    if row is None:
        return None
    return {"order": row["increment_id"], "_id": row["id"], "_name": row["name"]}


def eval_customer_page(p: dict) -> dict[str, Any]:
    return url_eval(f"{ADMIN}/customers/{p['_id']}", shows=p["_name"])


@TEMPLATES.template(
    id=209,
    name="shopping_admin.open_order_customer",
    kind="nav",
    intent="Open the customer page of the customer who placed order #{order}.",
    sample=sample_order_owner,
    evaluation=eval_customer_page,
    difficulty="3-5",
)
def expert_order_owner(p: dict, obs: Observation) -> Expert:
    order = p["order"]
    obs = yield from open_order(obs, order, f"find who placed order {order}")
    m = re.search(r"Customer Name:\s*\n?\s*\[(\d+)\] link \"([^\"]+)\"", obs.text)
    if m is None:
        raise ExpertError("expert: no customer link on the order page")
    link = find(obs, "link", m.group(2), exact=True)
    obs = yield click(
        link, f"Order {order} was placed by {m.group(2)}; I follow the link to the customer."
    )
    yield done(f"I am on the customer page of {m.group(2)}, who placed order {order}.")


# --------------------------------------------------------------------------------------------
# 210 change: order status with a comment
# --------------------------------------------------------------------------------------------

NEXT_STATUS = {
    "pending": ("processing", "canceled"),
    "processing": ("shipped", "canceled"),
    "shipped": ("complete",),
}
STATUS_COMMENTS = {
    "processing": ("Payment received.", "Payment confirmed, preparing the package."),
    "shipped": (
        "Handed over to UPS.",
        "Shipped with FedEx, tracking number will follow.",
    ),
    "complete": ("Delivered to the customer.", "Delivery confirmed by the carrier."),
    "canceled": ("Canceled at the customer's request.", "Item out of stock, order canceled."),
}


def sample_order_status(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    rows = conn.execute(
        "SELECT id, increment_id, status FROM orders WHERE status IN "
        "('pending', 'processing', 'shipped') ORDER BY id"
    ).fetchall()
    row = rng.choice(rows)
    new = rng.choice(NEXT_STATUS[row["status"]])
    return {
        "order": row["increment_id"],
        "status": ORDER_STATUS_LABELS[new],
        "comment": rng.choice(STATUS_COMMENTS[new]),
        "_id": row["id"],
        "_status": new,
    }


def eval_order_status(p: dict) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT status FROM orders WHERE id = ?",
            [p["_id"]],
            expected=p["_status"],
            description=f"order {p['order']} has status {p['_status']}",
            site=SITE,
        ),
        state_check(
            "SELECT comment FROM order_comments WHERE order_id = ? AND status = ? "
            "ORDER BY id DESC LIMIT 1",
            [p["_id"], p["_status"]],
            expected=p["comment"],
            description="the status change carries the requested comment",
            site=SITE,
        ),
    )


@TEMPLATES.template(
    id=210,
    name="shopping_admin.update_order_status",
    writes={"shopping_admin.order_comments": 1, "shopping_admin.orders": 1},
    kind="change",
    intent="Change the status of order #{order} to {status} and add this comment: {comment}",
    sample=sample_order_status,
    evaluation=eval_order_status,
    difficulty="6-9",
)
def expert_order_status(p: dict, obs: Observation) -> Expert:
    order, status, comment = p["order"], p["status"], p["comment"]
    obs = yield from open_order(obs, order, f"change the status of order {order}")
    obs = yield select(
        find(obs, "combobox", "Status"),
        status,
        f"The Update Status form is on the order page; I choose {status}.",
    )
    obs = yield type_text(
        find(obs, "textbox", "Comment"), comment, f"I add the comment '{comment}'."
    )
    obs = yield click(
        find(obs, "button", "Submit Comment"), "Status and comment are set; I submit the form."
    )
    if not re.search(rf"Order Status: {re.escape(status)}", obs.text):
        raise ExpertError(f"expert: order {order} did not change to {status}")
    yield done(f"The order page now shows the status {status} and my comment.")


# --------------------------------------------------------------------------------------------
# 211 change: product price
# --------------------------------------------------------------------------------------------


def sample_price(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(conn, "SELECT * FROM products WHERE id = ?", random_id(conn, rng, "products"))
    if row is None:
        return None
    whole = max(1, int(row["price"] * rng.uniform(0.7, 1.3)))
    new = round(whole + rng.choice((0.99, 0.49, 0.0, 0.95)), 2)
    if abs(new - row["price"]) < 0.01:
        return None
    return {
        "name": row["name"],
        "price": f"{new:.2f}",
        "_id": row["id"],
        "_new": new,
        "_qty": row["stock_qty"],
    }


def eval_price(p: dict) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT price FROM products WHERE id = ?",
            [p["_id"]],
            expected=p["_new"],
            description=f"the price of {p['name']} is {p['price']}",
            site=SITE,
        ),
        state_check(
            "SELECT stock_qty FROM products WHERE id = ?",
            [p["_id"]],
            expected=p["_qty"],
            description="the quantity is unchanged",
            site=SITE,
        ),
    )


@TEMPLATES.template(
    id=211,
    name="shopping_admin.set_product_price",
    writes={"shopping_admin.products": 1},
    kind="change",
    intent="Change the price of the product '{name}' to ${price}.",
    sample=sample_price,
    evaluation=eval_price,
    difficulty="6-9",
)
def expert_price(p: dict, obs: Observation) -> Expert:
    name, price = p["name"], p["price"]
    obs = yield from open_product(obs, name, 1, f"change the price of {name}")
    box = find(obs, "textbox", "Price ($)")
    obs = yield type_text(
        box, price, f"The price field shows {box.value}; I replace it by {price}."
    )
    obs = yield click(find(obs, "button", "Save", exact=True), "I save the product.")
    if "You saved the product" not in obs.text:
        raise ExpertError("expert: the product was not saved")
    yield done(f"The product was saved with the price ${price}.")


# --------------------------------------------------------------------------------------------
# 212 change: a sold-out product (by SKU): quantity 0 and disabled
# --------------------------------------------------------------------------------------------


def sample_sold_out(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(conn, "SELECT * FROM products WHERE id = ?", random_id(conn, rng, "products"))
    if row is None or row["status"] != "enabled" or row["stock_qty"] == 0:
        return None
    return {"sku": row["sku"], "_id": row["id"], "_price": row["price"]}


def eval_sold_out(p: dict) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT stock_qty FROM products WHERE id = ?",
            [p["_id"]],
            expected=0,
            description=f"SKU {p['sku']} has quantity 0",
            site=SITE,
        ),
        state_check(
            "SELECT status FROM products WHERE id = ?",
            [p["_id"]],
            expected="disabled",
            description=f"SKU {p['sku']} is disabled",
            site=SITE,
        ),
        state_check(
            "SELECT price FROM products WHERE id = ?",
            [p["_id"]],
            expected=p["_price"],
            description="the price is unchanged",
            site=SITE,
        ),
    )


@TEMPLATES.template(
    id=212,
    name="shopping_admin.mark_sold_out",
    writes={"shopping_admin.products": 1},
    kind="change",
    intent="The product with SKU {sku} has sold out: set its quantity to 0 and disable it.",
    sample=sample_sold_out,
    evaluation=eval_sold_out,
    difficulty="6-9",
)
def expert_sold_out(p: dict, obs: Observation) -> Expert:
    sku = p["sku"]
    obs = yield from open_product(obs, sku, 2, f"mark the product {sku} as sold out")
    obs = yield select(
        find(obs, "combobox", "Enable Product"),
        "Disabled",
        "The product must be disabled, so I set Enable Product to Disabled.",
    )
    box = find(obs, "textbox", "Quantity", exact=True)
    obs = yield type_text(box, "0", f"The quantity shows {box.value}; it is sold out, so I set 0.")
    obs = yield click(find(obs, "button", "Save", exact=True), "I save the product.")
    if "You saved the product" not in obs.text:
        raise ExpertError("expert: the product was not saved")
    yield done(f"Product {sku} is saved as disabled with quantity 0.")


# --------------------------------------------------------------------------------------------
# 213 change: delete a review
# --------------------------------------------------------------------------------------------


def sample_review(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(
        conn,
        "SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.id = r.product_id "
        "WHERE r.id = ?",
        random_id(conn, rng, "reviews"),
    )
    if row is None:
        return None
    twins = one(
        conn,
        "SELECT COUNT(*) FROM reviews WHERE product_id = ? AND nickname = ? AND title = ?",
        row["product_id"],
        row["nickname"],
        row["title"],
    )[0]
    if twins != 1:
        return None
    return {
        "title": row["title"],
        "nickname": row["nickname"],
        "product": row["product"],
        "_id": row["id"],
        "_left": one(conn, "SELECT COUNT(*) FROM reviews")[0] - 1,
    }


def eval_delete_review(p: dict) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT id FROM reviews WHERE id = ?",
            [p["_id"]],
            row_count=0,
            description="the review is deleted",
            site=SITE,
        ),
        state_check(
            "SELECT COUNT(*) FROM reviews",
            expected=p["_left"],
            description="no other review is deleted",
            site=SITE,
        ),
    )


@TEMPLATES.template(
    id=213,
    name="shopping_admin.delete_review",
    writes={"shopping_admin.reviews": 1},
    kind="change",
    intent="Delete the review titled '{title}' that {nickname} wrote about '{product}'.",
    sample=sample_review,
    evaluation=eval_delete_review,
    difficulty="3-5",
)
def expert_delete_review(p: dict, obs: Observation) -> Expert:
    title, nick, product = p["title"], p["nickname"], p["product"]
    obs = yield click(
        menu(obs, "Reviews"),
        f"Reviews are moderated in the Reviews grid; I open it to find "
        f"{nick}'s review of {product}.",
    )
    box = find(obs, "textbox", "Keyword")
    obs = yield search(box, product, f"I search the reviews for the product {product}.")
    for _ in range(30):
        row = next(
            (
                r
                for r in table_rows(obs)
                if len(r) >= 8
                and _norm(cell_text(r[3])) == _norm(title)
                and _norm(r[4]) == _norm(nick)
                and _norm(r[5]) == _norm(product)
            ),
            None,
        )
        if row is not None:
            break
        nxt = maybe(obs, "link", "Next", exact=True)
        if nxt is None:
            raise ExpertError(f"expert: review {title!r} by {nick} not found")
        obs = yield click(nxt, f"{nick}'s review '{title}' is not on this page; I go on.")
    else:
        raise ExpertError("expert: gave up paging")
    obs = yield click(
        row_element(row, "button", "Delete"),
        f"The row '{title}' by {nick} for {product} is the one; I click its Delete button.",
    )
    if "was deleted" not in obs.text:
        raise ExpertError("expert: the review was not deleted")
    yield done(f"The review '{title}' by {nick} is deleted.")


# --------------------------------------------------------------------------------------------
# 214 change: a customer's new address and phone (multi-field form)
# --------------------------------------------------------------------------------------------


def sample_address(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    row = one(conn, "SELECT * FROM customers WHERE id = ?", random_id(conn, rng, "customers"))
    if row is None:
        return None
    addr = rand_address(rng)
    phone = rand_phone(rng)
    if addr["street"] == row["street"] or addr["city"] == row["city"] or phone == row["phone"]:
        return None
    return {
        "name": f"{row['first_name']} {row['last_name']}",
        "street": addr["street"],
        "city": addr["city"],
        "region": addr["region"],
        "postcode": addr["postcode"],
        "phone": phone,
        "_id": row["id"],
        "_email": row["email"],
    }


def eval_address(p: dict) -> dict[str, Any]:
    wanted = [(col, p[col]) for col in ("street", "city", "region", "postcode", "phone")]
    wanted += [("email", p["_email"]), ("country", "United States")]  # must stay as they were
    return state_eval(
        *(
            state_check(
                f"SELECT {col} FROM customers WHERE id = ?",
                [p["_id"]],
                expected=value,
                description=f"the {col} of {p['name']} is {value}",
                site=SITE,
            )
            for col, value in wanted
        )
    )


@TEMPLATES.template(
    id=214,
    name="shopping_admin.update_customer_address",
    writes={"shopping_admin.customers": 1},
    kind="change",
    intent="Customer {name} has moved. Update their address to {street}, {city}, {region} "
    "{postcode} and their phone number to {phone}.",
    sample=sample_address,
    evaluation=eval_address,
    difficulty="10+",
)
def expert_address(p: dict, obs: Observation) -> Expert:
    name = p["name"]
    obs = yield from open_customer(obs, name, f"update the address of {name}")
    edit = find(obs, "button", "Edit Customer")
    if "collapsed" in edit.line:
        obs = yield click(edit, "The contact form is folded away; I open Edit Customer.")
    for label, key in (
        ("Street Address", "street"),
        ("City", "city"),
        ("State/Province", "region"),
        ("Zip/Postal Code", "postcode"),
        ("Phone Number", "phone"),
    ):
        box = find(obs, "textbox", label, exact=True)
        obs = yield type_text(
            box, p[key], f"{label} shows {box.value}; I replace it by the new {p[key]}."
        )
    obs = yield click(
        find(obs, "button", "Save Customer"), "All new address fields are filled; I save."
    )
    if "You saved the customer" not in obs.text:
        raise ExpertError("expert: the customer was not saved")
    yield done(f"{name}'s address and phone number are updated.")


# --------------------------------------------------------------------------------------------
# 215 change (held out): create a product
# --------------------------------------------------------------------------------------------

LEAVES = [(top, leaf) for top in CATALOG for leaf in top.leaves]


def sample_new_product(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    top, leaf = rng.choice(LEAVES)
    name = f"{rng.choice(top.brands)} {rng.choice(ADJECTIVES)} {rng.choice(leaf.nouns)}"
    sku = "B0" + "".join(rng.choice(SKU_ALPHABET) for _ in range(8))
    if one(conn, "SELECT 1 FROM products WHERE lower(name) = lower(?) OR sku = ?", name, sku):
        return None
    cat = one(conn, "SELECT id FROM categories WHERE name = ? AND parent_id IS NOT NULL", leaf.name)
    if cat is None:
        return None
    lo, hi = leaf.price
    price = round(rng.randint(int(lo), max(int(lo), int(hi))) + rng.choice((0.99, 0.49)), 2)
    return {
        "name": name,
        "sku": sku,
        "category": leaf.name,
        "price": f"{price:.2f}",
        "qty": str(rng.randint(5, 250)),
        "description": f"New arrival, made for {rng.choice(USES)}.",
        "_category_id": cat["id"],
    }


def eval_new_product(p: dict) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT id FROM products WHERE sku = ? AND name = ? AND abs(price - ?) < 0.005 "
            "AND stock_qty = ? AND category_id = ? AND status = 'enabled'",
            [p["sku"], p["name"], float(p["price"]), int(p["qty"]), p["_category_id"]],
            row_count=1,
            description="the product exists with the requested name, SKU, price, quantity "
            "and category, enabled",
            site=SITE,
        ),
        state_check(
            "SELECT description FROM products WHERE sku = ?",
            [p["sku"]],
            must_include=[p["description"]],
            description="the product has the requested description",
            site=SITE,
        ),
    )


@TEMPLATES.template(
    id=215,
    name="shopping_admin.create_product",
    writes={"shopping_admin.products": 1},
    kind="change",
    intent="Add a new enabled product named '{name}' (SKU {sku}) in the category "
    "'{category}', priced at ${price} with {qty} units in stock. Its description: "
    "{description}",
    sample=sample_new_product,
    evaluation=eval_new_product,
    heldout=True,
    difficulty="10+",
)
def expert_new_product(p: dict, obs: Observation) -> Expert:
    obs = yield click(menu(obs, "Products"), "New products are added from the Products grid.")
    obs = yield click(
        find(obs, "link", "Add Product"), f"I click Add Product to create {p['name']}."
    )
    for label, key in (
        ("Product Name", "name"),
        ("SKU", "sku"),
        ("Price ($)", "price"),
        ("Quantity", "qty"),
    ):
        box = find(obs, "textbox", label, exact=True)
        obs = yield type_text(box, p[key], f"I enter {p[key]} as the {label}.")
    obs = yield select(
        find(obs, "combobox", "Category"),
        p["category"],
        f"The product belongs in the {p['category']} category; I choose it.",
    )
    obs = yield type_text(
        find(obs, "textbox", "Description", exact=True),
        p["description"],
        "I enter the requested description.",
    )
    obs = yield click(
        find(obs, "button", "Save", exact=True), "Every field is filled; I save the new product."
    )
    if "You saved the product" not in obs.text:
        raise ExpertError(f"expert: the product was not created: {obs.text[-300:]}")
    yield done(f"The product {p['name']} (SKU {p['sku']}) is created.")


# --------------------------------------------------------------------------------------------
# 216 info (held out): the largest order of a month and who placed it (sorting the grid)
# --------------------------------------------------------------------------------------------


def sample_top_order(conn: sqlite3.Connection, rng: random.Random) -> dict[str, Any] | None:
    year, month = rng.choice(MONTHS)
    rows = conn.execute(
        "SELECT o.grand_total, o.status, c.first_name || ' ' || c.last_name AS name FROM orders o "
        "JOIN customers c ON c.id = o.customer_id WHERE strftime('%Y-%m', o.created_at) = ? "
        "ORDER BY o.grand_total DESC LIMIT 2",
        (f"{year}-{month:02d}",),
    ).fetchall()
    if len(rows) < 2 or rows[0]["grand_total"] <= rows[1]["grand_total"]:
        return None  # a tie
    if rows[0]["status"] == "canceled":
        return None  # would be ambiguous: does a canceled order count?
    return {
        "month": month_label(year, month),
        "_name": rows[0]["name"],
        "_total": fmt_money(rows[0]["grand_total"]),
    }


@TEMPLATES.template(
    id=216,
    name="shopping_admin.largest_order_in_month",
    kind="info",
    intent="Which customer placed the order with the highest grand total in {month}, and "
    "what was that total? Answer like 'Jane Doe, $123.45'.",
    sample=sample_top_order,
    evaluation=lambda p: string_eval([p["_name"], p["_total"]], "must_include"),
    heldout=True,
    difficulty="6-9",
)
def expert_top_order(p: dict, obs: Observation) -> Expert:
    month = p["month"]
    start, end = month_bounds(month)
    obs = yield click(
        menu(obs, "Orders"),
        f"I need the largest order placed in {month}; the Orders grid can filter by date and "
        "sort by grand total.",
    )
    obs = yield from fill_range(obs, start, end, "Purchased from", "Purchased to")
    obs = yield select(
        find(obs, "combobox", "Sort by"),
        "Grand Total: high to low",
        "Sorting by grand total from high to low puts the largest order first.",
    )
    obs = yield click(find(obs, "button", "Apply Filters"), "I apply the dates and the sort.")
    rows = [r for r in table_rows(obs) if re.fullmatch(r"\d{9}", r[0].strip())]
    if not rows:
        raise ExpertError(f"expert: no orders in {month}")
    name, total = rows[0][2].strip(), rows[0][3].strip()
    yield answer(
        f"{name}, {total}",
        f"The first row is order {rows[0][0]} by {name} with the grand total {total}.",
    )


# --------------------------------------------------------------------------------------------
# 217 nav (held out): the edit page of a period's best seller (report, then product)
# --------------------------------------------------------------------------------------------


@TEMPLATES.template(
    id=217,
    name="shopping_admin.open_top_seller",
    kind="nav",
    intent="Open the admin edit page of the product that sold the most units from {start} "
    "to {end}, according to the Bestsellers Report.",
    sample=sample_bestseller,
    evaluation=eval_product_page,
    heldout=True,
    difficulty="6-9",
)
def expert_top_seller_page(p: dict, obs: Observation) -> Expert:
    obs, row = yield from bestseller_report(obs, p)
    link = row_elements([row[1]])[0]
    obs = yield click(
        link, f"Rank 1 is {link.name}; its name links to the product's edit page, so I click it."
    )
    yield done(f"This is the edit page of {link.name}, the best seller of the period.")
