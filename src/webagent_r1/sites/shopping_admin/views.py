"""Pages of the shop's admin panel ("shopping_admin", WebArena's Magento admin).

Every page needs an admin login (``/login``). URL map (GET unless noted):

    /                                   dashboard: totals, last orders, best sellers
    /orders                             ?status= q= (order #, customer) from= to= sort= p=
    /orders/{id}, POST /orders/{id}/status   view; change status with a comment
    /products                           ?q= (name, SKU) category= status= sort= p=
    /products/{id} (GET/POST)           edit name, SKU, price, quantity, status, description
    /products/new (GET/POST)            create a product
    /customers                          ?q= (name, email, phone, city) region= p=
    /customers/{id} (GET/POST)          view with orders; POST edits contact and address
    /reviews                            ?status=pending|approved q= rating= p=
    /reviews/{id}, POST /reviews/{id}/approve, POST /reviews/{id}/delete
    /reports/bestsellers                ?from= to= (YYYY-MM-DD or MM/DD/YYYY) p=
    /reports/sales                      ?from= to= period=day|month|year p=
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from starlette.responses import Response
from starlette.routing import BaseRoute

from webagent_r1.sites.base import (
    Ctx,
    is_email,
    page,
    parse_int,
    too_long,
)
from webagent_r1.sites.shopping.db import ORDER_STATUSES
from webagent_r1.sites.shopping.queries import (
    category_tree,
    get_order,
    like_pattern,
    order_item_summary,
    order_items,
)

PER_PAGE = 10
ORDER_SORTS = {
    "": ("Purchase Date: newest first", "o.created_at DESC, o.id DESC"),
    "created_asc": ("Purchase Date: oldest first", "o.created_at ASC, o.id ASC"),
    "total_desc": ("Grand Total: high to low", "o.grand_total DESC, o.id DESC"),
    "total_asc": ("Grand Total: low to high", "o.grand_total ASC, o.id ASC"),
}
PRODUCT_SORTS = {
    "": ("ID", "p.id ASC"),
    "name": ("Name", "p.name ASC"),
    "price_asc": ("Price: low to high", "p.price ASC, p.id"),
    "price_desc": ("Price: high to low", "p.price DESC, p.id"),
    "qty_asc": ("Quantity: low to high", "p.stock_qty ASC, p.id"),
    "qty_desc": ("Quantity: high to low", "p.stock_qty DESC, p.id"),
}
PERIODS = {"day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}


def parse_date(value: str) -> str | None:
    """``2023-05-01`` or ``5/1/2023`` -> ``2023-05-01``; anything else -> None."""
    value = value.strip()
    for fmt in ("%Y-%m-%d", "%m/%d/%Y", "%m/%d/%y"):
        try:
            return datetime.strptime(value, fmt).strftime("%Y-%m-%d")
        except ValueError:
            pass
    return None


def _date_range(ctx: Ctx) -> tuple[str | None, str | None, str | None]:
    """(from, to, error) from the ``from``/``to`` query parameters."""
    raw_from, raw_to = ctx.arg("from"), ctx.arg("to")
    d_from, d_to = parse_date(raw_from), parse_date(raw_to)
    error = None
    if (raw_from and d_from is None) or (raw_to and d_to is None):
        error = "Enter dates as YYYY-MM-DD (or MM/DD/YYYY)."
    elif d_from and d_to and d_from > d_to:
        error = "The From date must be before the To date."
    return d_from, d_to, error


def _date_where(col: str, d_from: str | None, d_to: str | None) -> tuple[str, list[str]]:
    sql, params = "", []
    if d_from:
        sql += f" AND date({col}) >= ?"
        params.append(d_from)
    if d_to:
        sql += f" AND date({col}) <= ?"
        params.append(d_to)
    return sql, params


def _float(value: str) -> float | None:
    """A non-negative finite amount (``$1,234.50`` allowed), else None: never inf or nan."""
    try:
        out = float(value.replace(",", "").replace("$", ""))
    except ValueError:
        return None
    return out if math.isfinite(out) and out >= 0 else None


def _back(form: dict[str, str], default: str) -> str:
    url = form.get("return_to", "")
    return url if url.startswith("/") and not url.startswith("//") else default


# --------------------------------------------------------------------------------------------
# Dashboard
# --------------------------------------------------------------------------------------------


async def dashboard(ctx: Ctx) -> Response:
    """Totals, the last five orders and the all-time best sellers."""
    db = ctx.db
    totals = db.execute(
        "SELECT COUNT(*) AS orders, COALESCE(SUM(grand_total), 0) AS sales, "
        "COALESCE(AVG(grand_total), 0) AS average FROM orders WHERE status != 'canceled'"
    ).fetchone()
    counts = {
        "customers": db.execute("SELECT COUNT(*) FROM customers").fetchone()[0],
        "products": db.execute("SELECT COUNT(*) FROM products").fetchone()[0],
        "pending_orders": db.execute(
            "SELECT COUNT(*) FROM orders WHERE status = 'pending'"
        ).fetchone()[0],
        "pending_reviews": db.execute(
            "SELECT COUNT(*) FROM reviews WHERE status = 'pending'"
        ).fetchone()[0],
    }
    last = db.execute(
        "SELECT o.*, cu.first_name || ' ' || cu.last_name AS customer_name FROM orders o "
        "JOIN customers cu ON cu.id = o.customer_id ORDER BY o.created_at DESC, o.id DESC LIMIT 5"
    ).fetchall()
    best = db.execute(
        "SELECT oi.product_id, oi.name, SUM(oi.qty) AS qty FROM order_items oi "
        "JOIN orders o ON o.id = oi.order_id WHERE o.status != 'canceled' "
        "GROUP BY oi.product_id ORDER BY qty DESC, oi.name LIMIT 5"
    ).fetchall()
    return ctx.render("dashboard.html", totals=totals, counts=counts, last=last, best=best)


# --------------------------------------------------------------------------------------------
# Orders
# --------------------------------------------------------------------------------------------


class _Filters:
    """The ``WHERE`` clause of an admin grid and its parameters, built from the request's
    filter arguments."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.where = "1 = 1"
        self.params: list[Any] = []

    def add(self, sql: str, *params: Any) -> None:
        """AND ``sql`` (with its ``?`` parameters) to the clause."""
        self.where += f" AND {sql}"
        self.params += params

    def choice(self, arg: str, allowed: Iterable[str], column: str) -> str:
        """Keep the rows whose ``column`` is argument ``arg`` when it is one of ``allowed``;
        return the argument."""
        value = self.ctx.arg(arg)
        if value in allowed:
            self.add(f"{column} = ?", value)
        return value

    def search(self, *columns: str) -> str:
        """Keep the rows where one of ``columns`` contains the ``q`` argument; return it."""
        q = self.ctx.arg("q")
        if q:
            pat = like_pattern(q)
            self.add(
                "(" + " OR ".join(f"{c} LIKE ? ESCAPE '\\'" for c in columns) + ")",
                *[pat] * len(columns),
            )
        return q


async def orders(ctx: Ctx) -> Response:
    """Orders grid with status, date-range and customer/order-number filters."""
    flt = _Filters(ctx)
    status = flt.choice("status", ORDER_STATUSES, "o.status")
    q = flt.search(
        "o.increment_id", "(cu.first_name || ' ' || cu.last_name)", "cu.email", "o.ship_name"
    )
    d_from, d_to, error = _date_range(ctx)
    dsql, dparams = _date_where("o.created_at", d_from, d_to)
    where = flt.where + dsql
    params = flt.params + dparams
    sort = ctx.arg("sort") if ctx.arg("sort") in ORDER_SORTS else ""
    base = f"FROM orders o JOIN customers cu ON cu.id = o.customer_id WHERE {where}"
    rows, pager = ctx.page_rows(
        "o.*, cu.first_name || ' ' || cu.last_name AS customer_name",
        base,
        params,
        ORDER_SORTS[sort][1],
        PER_PAGE,
    )
    return ctx.render(
        "orders.html",
        rows=rows,
        pager=pager,
        statuses=ORDER_STATUSES,
        sorts=ORDER_SORTS,
        f={"status": status, "q": q, "from": ctx.arg("from"), "to": ctx.arg("to"), "sort": sort},
        error=error,
    )


async def order_view(ctx: Ctx) -> Response:
    """One order: account, address, items, totals, status history, status form."""
    order = get_order(ctx.db, ctx.path_int("order_id") or 0)
    if order is None:
        return ctx.not_found("order")
    comments = ctx.db.execute(
        "SELECT * FROM order_comments WHERE order_id = ? ORDER BY created_at DESC, id DESC",
        (order["id"],),
    ).fetchall()
    return ctx.render(
        "order.html",
        order=order,
        items=order_items(ctx.db, order["id"]),
        comments=comments,
        statuses=ORDER_STATUSES,
    )


COMMENT_MAX = 2_000
"""Most characters of an order's status comment."""


async def order_status(ctx: Ctx) -> Response:
    """POST status, comment: change an order's status and log the comment."""
    order = get_order(ctx.db, ctx.path_int("order_id") or 0)
    if order is None:
        return ctx.not_found("order")
    form = await ctx.form()
    status = form.get("status", "")
    url = f"/orders/{order['id']}"
    if status not in ORDER_STATUSES:
        return ctx.redirect(url, "Please choose a valid order status.", "error")
    comment = form.get("comment", "") or f"Status changed to {status}."
    if len(comment) > COMMENT_MAX:  # refused whole, never cut: nothing of the form is stored
        return ctx.redirect(
            url, f"Comment is too long: use at most {COMMENT_MAX:,} characters.", "error"
        )
    now = ctx.now()
    ctx.db.execute(
        "UPDATE orders SET status = ?, updated_at = ? WHERE id = ?", (status, now, order["id"])
    )
    ctx.db.execute(
        "INSERT INTO order_comments (order_id, status, comment, author, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (order["id"], status, comment, ctx.user["username"] if ctx.user else "", now),
    )
    ctx.db.commit()
    return ctx.redirect(url, f"Order # {order['increment_id']} was updated to {status}.")


# --------------------------------------------------------------------------------------------
# Products
# --------------------------------------------------------------------------------------------


async def products(ctx: Ctx) -> Response:
    """Products grid with keyword, category and status filters."""
    flt = _Filters(ctx)
    q = flt.search("p.name", "p.sku")
    cat = ctx.arg("category")
    cat_id = parse_int(cat, lo=0)
    if cat_id is not None:
        flt.add("(c.id = ? OR c.parent_id = ?)", cat_id, cat_id)
    status = flt.choice("status", ("enabled", "disabled"), "p.status")
    where, params = flt.where, flt.params
    sort = ctx.arg("sort") if ctx.arg("sort") in PRODUCT_SORTS else ""
    base = f"FROM products p JOIN categories c ON c.id = p.category_id WHERE {where}"
    rows, pager = ctx.page_rows(
        "p.*, c.name AS category_name", base, params, PRODUCT_SORTS[sort][1], PER_PAGE
    )
    return ctx.render(
        "products.html",
        rows=rows,
        pager=pager,
        tree=category_tree(ctx.db),
        sorts=PRODUCT_SORTS,
        f={"q": q, "category": cat, "status": status, "sort": sort},
    )


def _product_form_values(form: dict[str, str]) -> tuple[dict[str, Any], str | None]:
    values: dict[str, Any] = {
        k: form.get(k, "")
        for k in ("name", "sku", "price", "stock_qty", "status", "description", "category_id")
    }
    price, qty = _float(values["price"]), parse_int(values["stock_qty"], lo=0)
    if not values["name"] or not values["sku"]:
        return values, "Product name and SKU are required."
    if error := too_long(values, long=("description",)):
        return values, error
    if price is None:
        return values, "Enter a price as a non-negative number, e.g. 19.99."
    if qty is None:
        return values, "Enter the quantity as a non-negative whole number."
    if values["status"] not in ("enabled", "disabled"):
        return values, "Choose Enabled or Disabled as the status."
    values["price"], values["stock_qty"] = round(price, 2), qty
    return values, None


async def product_edit(ctx: Ctx) -> Response:
    """GET: the product form. POST: save name, SKU, price, quantity, status, description."""
    pid = ctx.path_int("product_id") or 0
    prod = ctx.db.execute(
        "SELECT p.*, c.name AS category_name FROM products p JOIN categories c "
        "ON c.id = p.category_id WHERE p.id = ?",
        (pid,),
    ).fetchone()
    if prod is None:
        return ctx.not_found("product")
    if ctx.request.method == "GET":
        return ctx.render("product_edit.html", product=prod, values=dict(prod), tree=None)
    form = await ctx.form()
    values, error = _product_form_values(form)
    if (
        error is None
        and ctx.db.execute(
            "SELECT 1 FROM products WHERE sku = ? AND id != ?", (values["sku"], pid)
        ).fetchone()
    ):
        error = f"The SKU {values['sku']} is already used by another product."
    if error:
        return ctx.render("product_edit.html", product=prod, values=values, tree=None, error=error)
    ctx.db.execute(
        "UPDATE products SET name = ?, sku = ?, price = ?, stock_qty = ?, status = ?, "
        "description = ?, updated_at = ? WHERE id = ?",
        (
            values["name"],
            values["sku"],
            values["price"],
            values["stock_qty"],
            values["status"],
            values["description"] or prod["description"],
            ctx.now(),
            pid,
        ),
    )
    ctx.db.commit()
    return ctx.redirect(f"/products/{pid}", "You saved the product.")


async def product_new(ctx: Ctx) -> Response:
    """GET: an empty product form. POST: create the product."""
    tree = category_tree(ctx.db)
    values: dict[str, Any] = {
        "name": "",
        "sku": "",
        "price": "",
        "stock_qty": "0",
        "status": "enabled",
        "description": "",
        "category_id": "",
    }
    if ctx.request.method == "GET":
        return ctx.render("product_edit.html", product=None, values=values, tree=tree)
    form = await ctx.form()
    values, error = _product_form_values(form)
    leaf = ctx.db.execute(
        "SELECT id FROM categories WHERE id = ? AND parent_id IS NOT NULL",
        (parse_int(values["category_id"], -1),),
    ).fetchone()
    if error is None and leaf is None:
        error = "Choose a category for the product."
    if (
        error is None
        and ctx.db.execute("SELECT 1 FROM products WHERE sku = ?", (values["sku"],)).fetchone()
    ):
        error = f"The SKU {values['sku']} is already used by another product."
    if error:
        return ctx.render("product_edit.html", product=None, values=values, tree=tree, error=error)
    brand = values["name"].split(" ", 1)[0]
    now = ctx.now()
    cur = ctx.db.execute(
        "INSERT INTO products (sku, name, brand, category_id, description, price, stock_qty, "
        "status, featured, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)",
        (
            values["sku"],
            values["name"],
            brand,
            leaf["id"],
            values["description"],
            values["price"],
            values["stock_qty"],
            values["status"],
            now,
            now,
        ),
    )
    ctx.db.commit()
    return ctx.redirect(f"/products/{cur.lastrowid}", "You saved the product.")


# --------------------------------------------------------------------------------------------
# Customers
# --------------------------------------------------------------------------------------------

CUSTOMER_FIELDS = (
    ("first_name", "First Name"),
    ("last_name", "Last Name"),
    ("email", "Email"),
    ("phone", "Phone Number"),
    ("street", "Street Address"),
    ("city", "City"),
    ("region", "State/Province"),
    ("postcode", "Zip/Postal Code"),
    ("country", "Country"),
)


async def customers(ctx: Ctx) -> Response:
    """Customers grid with keyword and state filters."""
    flt = _Filters(ctx)
    q = flt.search("(first_name || ' ' || last_name)", "email", "phone", "city")
    region = ctx.arg("region")
    if region:
        flt.add("lower(region) = lower(?)", region)
    where, params = flt.where, flt.params
    rows, pager = ctx.page_rows("*", f"FROM customers WHERE {where}", params, "id", PER_PAGE)
    regions = [r[0] for r in ctx.db.execute("SELECT DISTINCT region FROM customers ORDER BY 1")]
    return ctx.render(
        "customers.html", rows=rows, pager=pager, regions=regions, f={"q": q, "region": region}
    )


async def customer_view(ctx: Ctx) -> Response:
    """GET: a customer with their orders. POST: save contact information and address."""
    cid = ctx.path_int("customer_id") or 0
    cust = ctx.db.execute("SELECT * FROM customers WHERE id = ?", (cid,)).fetchone()
    if cust is None:
        return ctx.not_found("customer")
    values = {k: cust[k] for k, _ in CUSTOMER_FIELDS}
    error = None
    if ctx.request.method == "POST":
        form = await ctx.form()
        values = {k: form.get(k, "") for k, _ in CUSTOMER_FIELDS}
        if not values["first_name"] or not values["last_name"] or not values["email"]:
            error = "First name, last name and email are required."
        elif too_long(values):
            error = too_long(values)
        elif not is_email(values["email"]):
            error = "Please enter a valid email address."
        elif ctx.db.execute(
            "SELECT 1 FROM customers WHERE lower(email) = lower(?) AND id != ?",
            (values["email"], cid),
        ).fetchone():
            error = "A customer with the same email address already exists."
        if error is None:
            ctx.db.execute(
                "UPDATE customers SET "
                + ", ".join(f"{k} = ?" for k, _ in CUSTOMER_FIELDS)
                + " WHERE id = ?",
                (*values.values(), cid),
            )
            if cust["user_id"] is not None:
                ctx.db.execute(
                    "UPDATE users SET full_name = ?, email = ? WHERE id = ?",
                    (
                        f"{values['first_name']} {values['last_name']}",
                        values["email"],
                        cust["user_id"],
                    ),
                )
            ctx.db.commit()
            return ctx.redirect(f"/customers/{cid}", "You saved the customer.")
    rows, pager = ctx.page_rows(
        "*", "FROM orders WHERE customer_id = ?", [cid], "created_at DESC, id DESC", PER_PAGE
    )
    username = None
    if cust["user_id"] is not None:
        row = ctx.db.execute("SELECT username FROM users WHERE id = ?", (cust["user_id"],))
        username = row.fetchone()["username"]
    return ctx.render(
        "customer.html",
        customer=cust,
        values=values,
        fields=CUSTOMER_FIELDS,
        orders=rows,
        pager=pager,
        username=username,
        error=error,
        items=order_item_summary(ctx.db, [r["id"] for r in rows]),
    )


# --------------------------------------------------------------------------------------------
# Reviews
# --------------------------------------------------------------------------------------------


async def reviews(ctx: Ctx) -> Response:
    """Reviews grid (pending/approved filter) with approve and delete buttons."""
    flt = _Filters(ctx)
    status = flt.choice("status", ("pending", "approved"), "r.status")
    q = flt.search("p.name", "r.nickname", "r.title", "r.body")
    rating = ctx.arg("rating")
    if rating in ("1", "2", "3", "4", "5"):
        flt.add("r.rating = ?", int(rating))
    where, params = flt.where, flt.params
    base = f"FROM reviews r JOIN products p ON p.id = r.product_id WHERE {where}"
    rows, pager = ctx.page_rows(
        "r.*, p.name AS product_name", base, params, "r.created_at DESC, r.id DESC", PER_PAGE
    )
    query = ctx.request.url.query
    return_to = ctx.request.url.path + (f"?{query}" if query else "")
    return ctx.render(
        "reviews.html",
        rows=rows,
        pager=pager,
        f={"status": status, "q": q, "rating": rating},
        return_to=return_to,
    )


async def review_view(ctx: Ctx) -> Response:
    """One review in full, with approve and delete buttons."""
    review = ctx.db.execute(
        "SELECT r.*, p.name AS product_name FROM reviews r JOIN products p "
        "ON p.id = r.product_id WHERE r.id = ?",
        (ctx.path_int("review_id") or 0,),
    ).fetchone()
    if review is None:
        return ctx.not_found("review")
    return ctx.render("review.html", review=review)


async def _change_review(ctx: Ctx, sql: str) -> tuple[int, dict[str, str]] | None:
    """Run ``sql`` on the path's review (its one ``?`` is the id) and commit; the id and the
    posted form, or None when there is no such review."""
    rid = ctx.path_int("review_id") or 0
    form = await ctx.form()
    cur = ctx.db.execute(sql, (rid,))
    ctx.db.commit()
    return (rid, form) if cur.rowcount else None


async def review_approve(ctx: Ctx) -> Response:
    """POST: approve a review (it then shows on the product page)."""
    got = await _change_review(ctx, "UPDATE reviews SET status = 'approved' WHERE id = ?")
    if got is None:
        return ctx.not_found("review")
    rid, form = got
    return ctx.redirect(_back(form, "/reviews"), f"Review #{rid} was approved.")


async def review_delete(ctx: Ctx) -> Response:
    """POST: delete a review."""
    got = await _change_review(ctx, "DELETE FROM reviews WHERE id = ?")
    if got is None:
        return ctx.not_found("review")
    rid, form = got
    back = _back(form, "/reviews")
    if back.startswith(f"/reviews/{rid}"):
        back = "/reviews"
    return ctx.redirect(back, f"Review #{rid} was deleted.")


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


async def report_bestsellers(ctx: Ctx) -> Response:
    """Best sellers: quantity ordered per product in a date range (canceled orders excluded)."""
    d_from, d_to, error = _date_range(ctx)
    dsql, dparams = _date_where("o.created_at", d_from, d_to)
    base = (
        "FROM order_items oi JOIN orders o ON o.id = oi.order_id "
        f"WHERE o.status != 'canceled'{dsql}"
    )
    rows, pager = ctx.page_rows(
        "oi.product_id, oi.name, oi.sku, SUM(oi.qty) AS qty, "
        "ROUND(SUM(oi.row_total), 2) AS revenue",
        base,
        dparams,
        "qty DESC, revenue DESC, oi.name",
        PER_PAGE,
        count="COUNT(DISTINCT oi.product_id)",
        group_by="oi.product_id",
    )
    return ctx.render(
        "report_bestsellers.html",
        rows=rows,
        pager=pager,
        error=error,
        f={"from": ctx.arg("from"), "to": ctx.arg("to")},
        d_from=d_from,
        d_to=d_to,
    )


async def report_sales(ctx: Ctx) -> Response:
    """Sales per day, month or year in a date range (canceled orders excluded)."""
    d_from, d_to, error = _date_range(ctx)
    period = ctx.arg("period") if ctx.arg("period") in PERIODS else "month"
    dsql, dparams = _date_where("created_at", d_from, d_to)
    key = f"strftime('{PERIODS[period]}', created_at)"
    base = f"FROM orders WHERE status != 'canceled'{dsql}"
    rows, pager = ctx.page_rows(
        f"{key} AS period, COUNT(*) AS orders, SUM(total_qty) AS items, "
        "ROUND(SUM(subtotal), 2) AS subtotal, ROUND(SUM(shipping_amount), 2) AS shipping, "
        "ROUND(SUM(grand_total), 2) AS total",
        base,
        dparams,
        "period",
        12,
        count=f"COUNT(DISTINCT {key})",
        group_by="period",
    )
    summary = ctx.db.execute(
        "SELECT COUNT(*) AS orders, COALESCE(SUM(total_qty), 0) AS items, "
        f"COALESCE(ROUND(SUM(grand_total), 2), 0) AS total {base}",
        dparams,
    ).fetchone()
    return ctx.render(
        "report_sales.html",
        rows=rows,
        pager=pager,
        error=error,
        summary=summary,
        periods=list(PERIODS),
        f={"from": ctx.arg("from"), "to": ctx.arg("to"), "period": period},
    )


def routes() -> list[BaseRoute]:
    """The admin panel's routes (login/logout are added by the framework)."""
    post = ("POST",)
    both = ("GET", "POST")
    return [
        page("/", dashboard),
        page("/orders", orders),
        page("/orders/{order_id:id}", order_view),
        page("/orders/{order_id:id}/status", order_status, post),
        page("/products", products),
        page("/products/new", product_new, both),
        page("/products/{product_id:id}", product_edit, both),
        page("/customers", customers),
        page("/customers/{customer_id:id}", customer_view, both),
        page("/reviews", reviews),
        page("/reviews/{review_id:id}", review_view),
        page("/reviews/{review_id:id}/approve", review_approve, post),
        page("/reviews/{review_id:id}/delete", review_delete, post),
        page("/reports/bestsellers", report_bestsellers),
        page("/reports/sales", report_sales),
    ]
