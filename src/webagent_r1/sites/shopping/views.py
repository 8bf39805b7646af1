"""Pages of the shop ("shopping", WebArena's OneStopShop): catalogue, cart, checkout, account.

URL map (all GET unless noted):

    /                                   home: featured products, categories
    /category/{top}[/{leaf}]            listing; ?p= page, sort=, price=lo-hi, color=
    /search?q=                          search; same sort/filters, plus cat=<top slug>
    /product/{id}                       product page; ?p= review page
    POST /product/{id}/review           write a review (logged in; goes to moderation)
    /cart, POST /cart/add, POST /cart/update, POST /cart/remove/{item_id}
    /checkout (GET form, POST places the order), /checkout/success/{order_id}
    /account, /account/edit (GET/POST), /account/address (GET/POST)
    /account/orders (?p=), /account/orders/{order_id}, /account/reviews (?p=)
    /wishlist, POST /wishlist/add, POST /wishlist/remove/{item_id}, POST /wishlist/cart/{item_id}
    /register (GET/POST), /login (GET/POST), /logout
"""

from __future__ import annotations

import math
import re
import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.routing import BaseRoute

from webagent_r1.sites.base import (
    Ctx,
    is_email,
    page,
    parse_int,
    query_string,
    too_long,
)
from webagent_r1.sites.seed_utils import hash_password
from webagent_r1.sites.shopping.db import SHIPPING_PER_ITEM
from webagent_r1.sites.shopping.queries import (
    PRODUCT_COLUMNS,
    PRODUCT_FROM,
    PRODUCT_FROM_LITE,
    category_tree,
    get_order,
    get_product,
    order_items,
    product_options,
)
from webagent_r1.sites.textcache import SEARCH_CACHE_BYTES, text_cache
from webagent_r1.sites.words import search_words

PER_PAGE = 10
REVIEWS_PER_PAGE = 5
WISH_MISSING = "That item is not in your wish list."
_PRICE_RE = re.compile(r"(\d++(?:\.\d++)?+)?+\s*+-\s*+(\d++(?:\.\d++)?+)?+")
"""``lo-hi`` of a price filter, stripped first; possessive, so linear on a run of spaces."""
PRICE_BUCKETS = ((0, 25), (25, 50), (50, 100), (100, 200), (200, None))
SORTS = {
    "": "Best Match",
    "name_asc": "Name: A to Z",
    "name_desc": "Name: Z to A",
    "price_asc": "Price: Low to High",
    "price_desc": "Price: High to Low",
    "rating_desc": "Rating: High to Low",
}
SORT_SQL = {
    "name_asc": "p.name ASC",
    "name_desc": "p.name DESC",
    "price_asc": "p.price ASC, p.name ASC",
    "price_desc": "p.price DESC, p.name ASC",
    "rating_desc": "rating DESC, review_count DESC, p.name ASC",
}
ADDRESS_FIELDS = (
    ("first_name", "First Name"),
    ("last_name", "Last Name"),
    ("street", "Street Address"),
    ("city", "City"),
    ("region", "State/Province"),
    ("postcode", "Zip/Postal Code"),
    ("country", "Country"),
    ("phone", "Phone Number"),
)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def customer_of(ctx: Ctx) -> sqlite3.Row | None:
    """The customer record of the logged-in user, or None."""
    if ctx.user is None:
        return None
    return ctx.db.execute("SELECT * FROM customers WHERE user_id = ?", (ctx.user["id"],)).fetchone()


def cart_owner(ctx: Ctx, create: bool = False) -> tuple[str, Any] | None:
    """The SQL column and value that own the current cart (customer, else guest session)."""
    cust = customer_of(ctx)
    if cust is not None:
        return "customer_id", cust["id"]
    if create:
        return "session_token", ctx.ensure_session()
    if ctx.session_token:
        return "session_token", ctx.session_token
    return None


def cart_rows(ctx: Ctx) -> list[sqlite3.Row]:
    """Lines of the current cart with product name, price and stock."""
    owner = cart_owner(ctx)
    if owner is None:
        return []
    col, value = owner
    return ctx.db.execute(
        "SELECT ci.*, p.name, p.sku, p.price, p.stock_qty, p.status, "
        "ROUND(p.price * ci.qty, 2) AS row_total FROM cart_items ci "
        f"JOIN products p ON p.id = ci.product_id WHERE ci.{col} = ? ORDER BY ci.id",
        (value,),
    ).fetchall()


def site_context(ctx: Ctx) -> dict[str, Any]:
    """Template variables of every shop page: category menu and cart size."""
    count = sum(r["qty"] for r in cart_rows(ctx))
    # No page edits categories, so the menu is read once per server.
    menu = ctx.app.cache.get("menu")
    if menu is None:
        menu = ctx.app.cache["menu"] = category_tree(ctx.db)
    return {"menu": menu, "cart_count": count}


def login_check(db: sqlite3.Connection, user: sqlite3.Row) -> str | None:
    """Only customer accounts may sign in to the shop."""
    row = db.execute("SELECT 1 FROM customers WHERE user_id = ?", (user["id"],)).fetchone()
    return None if row else "This account is not a customer account of this store."


def on_login(db: sqlite3.Connection, old_token: str | None, new_token: str, user_id: int) -> None:
    """Move a guest cart to the customer who just signed in."""
    if not old_token:
        return
    cust = db.execute("SELECT id FROM customers WHERE user_id = ?", (user_id,)).fetchone()
    if cust is not None:
        db.execute(
            "UPDATE cart_items SET customer_id = ?, session_token = NULL WHERE session_token = ?",
            (cust["id"], old_token),
        )


def parse_price(value: str) -> tuple[float | None, float | None] | None:
    """``"25-50"`` -> (25, 50); ``"200-"`` -> (200, None); invalid -> None."""
    m = _PRICE_RE.fullmatch(value.strip())
    if not m or (m.group(1) is None and m.group(2) is None):
        return None
    lo = float(m.group(1)) if m.group(1) else None
    hi = float(m.group(2)) if m.group(2) else None
    if not all(math.isfinite(v) for v in (lo, hi) if v is not None):  # 400 nines: inf
        return None
    return lo, hi


def price_label(lo: float | None, hi: float | None) -> str:
    """Label of a price range, e.g. ``$25.00 - $49.99`` or ``$200.00 and above``."""
    if hi is None:
        return f"${lo or 0:,.2f} and above"
    return f"${lo or 0:,.2f} - ${hi - 0.01:,.2f}"


@dataclass
class Listing:
    """A filtered, sorted, paginated product listing with its facets."""

    products: list[sqlite3.Row]
    pager: Any
    sort: str
    sorts: dict[str, str]
    price_facets: list[dict[str, Any]]
    color_facets: list[dict[str, Any]]
    active: list[dict[str, str]]  # active filters with their removal links


def build_listing(
    ctx: Ctx, base_where: str, base_params: list[Any], relevance: tuple[str, list[Any]] | None
) -> Listing:
    """Run a product listing over ``base_where`` with the request's sort, filters and page.

    Args:
        ctx: The request context (query parameters ``p``, ``sort``, ``price``, ``color``).
        base_where: SQL condition on ``p``/``c``/``pc`` selecting the candidate products.
        base_params: Parameters of ``base_where``.
        relevance: ORDER BY clause and params for the default sort (search), or None.
    """
    sort = ctx.arg("sort")
    if sort not in SORTS:
        sort = ""
    where = ["p.status = 'enabled'", base_where]
    params: list[Any] = list(base_params)
    price_sql, price_params = "", []
    active: list[dict[str, str]] = []
    price = parse_price(ctx.arg("price"))
    if price is not None:
        lo, hi = price
        if lo is not None:
            price_sql += " AND p.price >= ?"
            price_params.append(lo)
        if hi is not None:
            price_sql += " AND p.price < ?"
            price_params.append(hi)
        active.append(
            {
                "label": f"Price: {price_label(lo, hi)}",
                "url": query_string(ctx.request, price=None, p=None),
            }
        )
    color = ctx.arg("color")
    color_sql, color_params = "", []
    if color:
        color_sql = (
            " AND p.id IN (SELECT product_id FROM product_options WHERE kind = 'color' "
            "AND lower(value) = lower(?))"
        )
        color_params = [color]
        active.append(
            {
                "label": f"Color: {color.title()}",
                "url": query_string(ctx.request, color=None, p=None),
            }
        )
    base = " AND ".join(where)

    # Facets: each facet's counts apply every other active filter, as Magento's layered nav.
    price_facets = []
    for lo, hi in PRICE_BUCKETS:
        cond, cp = " AND p.price >= ?", [lo]
        if hi is not None:
            cond += " AND p.price < ?"
            cp.append(hi)
        n = ctx.db.execute(
            f"SELECT COUNT(*) FROM {PRODUCT_FROM_LITE} WHERE {base}{color_sql}{cond}",
            [*params, *color_params, *cp],
        ).fetchone()[0]
        if n:
            value = f"{lo}-{hi if hi is not None else ''}"
            price_facets.append(
                {
                    "label": price_label(lo, hi),
                    "count": n,
                    "url": query_string(ctx.request, price=value, p=None),
                }
            )
    color_facets = [
        {
            "label": row["value"],
            "count": row["n"],
            "url": query_string(ctx.request, color=row["value"].lower(), p=None),
        }
        for row in ctx.db.execute(
            f"SELECT o.value, COUNT(DISTINCT p.id) AS n FROM {PRODUCT_FROM_LITE} "
            "JOIN product_options o ON o.product_id = p.id AND o.kind = 'color' "
            f"WHERE {base}{price_sql} GROUP BY o.value ORDER BY o.value",
            [*params, *price_params],
        )
    ]
    full_where = f"{base}{price_sql}{color_sql}"
    full_params = [*params, *price_params, *color_params]
    if sort:
        order, order_params = SORT_SQL[sort], []
    elif relevance is not None:
        order, order_params = relevance
    else:
        order, order_params = "p.id ASC", []
    products, pager = ctx.page_rows(
        PRODUCT_COLUMNS,
        f"FROM {PRODUCT_FROM} WHERE {full_where}",
        full_params,
        order,
        PER_PAGE,
        count_source=f"FROM {PRODUCT_FROM_LITE} WHERE {full_where}",
        order_params=order_params,
    )
    sorts = dict(SORTS)
    if relevance is None:
        sorts[""] = "Position"
    return Listing(products, pager, sort, sorts, price_facets, color_facets, active)


def _return_to(value: str, default: str) -> str:
    return value if value.startswith("/") and not value.startswith("//") else default


_tokens = text_cache(SEARCH_CACHE_BYTES)(search_words)
"""``search_words`` of the catalogue's texts, cached (a query's are not: its size is the
user's): every instance starts from the same catalogue, so texts repeat across requests;
bounded in bytes (an admin may write 255-character names)."""


def search_ids(db: sqlite3.Connection, query: str) -> list[int]:
    """Ids of enabled products matching every word of ``query``, best match first.

    A word matches a whole word of the product's name, brand, categories, SKU or colors
    (singular/plural alike); words of 4+ letters also match as a prefix ("headph").
    Products whose name holds more of the words, or the whole phrase, rank first.
    """
    words = search_words(query)[:10]
    if not words:
        return []
    phrase = " ".join(words)
    scored: list[tuple[int, str, int]] = []
    for row in db.execute(
        "SELECT p.id, p.name, p.brand || ' ' || c.name || ' ' || COALESCE(pc.name, '') || ' ' "
        "|| p.sku || ' ' || COALESCE((SELECT group_concat(value, ' ') FROM product_options o "
        "WHERE o.product_id = p.id AND o.kind = 'color'), '') AS other "
        "FROM products p JOIN categories c ON c.id = p.category_id "
        "LEFT JOIN categories pc ON pc.id = c.parent_id WHERE p.status = 'enabled'"
    ):
        name_tokens = _tokens(row["name"])
        tokens = set(name_tokens) | set(_tokens(row["other"]))

        def hit(w: str, tokens: set[str] = tokens) -> bool:
            return w in tokens or (len(w) >= 4 and any(t.startswith(w) for t in tokens))

        if all(hit(w) for w in words):
            in_name = sum(1 for w in words if hit(w, set(name_tokens)))
            score = in_name + (len(words) if phrase in " ".join(name_tokens) else 0)
            scored.append((-score, row["name"], row["id"]))
    scored.sort()
    return [pid for _, _, pid in scored]


# --------------------------------------------------------------------------------------------
# Catalogue
# --------------------------------------------------------------------------------------------


async def home(ctx: Ctx) -> Response:
    """Home page: featured products and the top-level categories."""
    featured = ctx.db.execute(
        f"SELECT {PRODUCT_COLUMNS} FROM {PRODUCT_FROM} WHERE p.featured = 1 "
        "AND p.status = 'enabled' ORDER BY p.id LIMIT 8"
    ).fetchall()
    return ctx.render("home.html", featured=featured)


async def category(ctx: Ctx) -> Response:
    """A category listing (a top-level category lists the products of all its leaves)."""
    path = ctx.request.path_params["path"].strip("/")
    cat = ctx.db.execute("SELECT * FROM categories WHERE path = ?", (path,)).fetchone()
    if cat is None:
        return ctx.not_found("category")
    if cat["parent_id"] is None:
        parent = None
        children = ctx.db.execute(
            "SELECT * FROM categories WHERE parent_id = ? ORDER BY position", (cat["id"],)
        ).fetchall()
        listing = build_listing(ctx, "c.parent_id = ?", [cat["id"]], None)
    else:
        parent = ctx.db.execute(
            "SELECT * FROM categories WHERE id = ?", (cat["parent_id"],)
        ).fetchone()
        children = []
        listing = build_listing(ctx, "p.category_id = ?", [cat["id"]], None)
    return ctx.render(
        "listing.html",
        heading=cat["name"],
        cat=cat,
        parent=parent,
        children=children,
        listing=listing,
        query="",
        cat_facets=[],
    )


async def search(ctx: Ctx) -> Response:
    """Full-catalogue search over names, brands, categories, SKUs and colors."""
    q = ctx.arg("q")
    if not search_words(q):
        return ctx.render(
            "listing.html",
            heading="Search",
            cat=None,
            parent=None,
            children=[],
            listing=None,
            query="",
            cat_facets=[],
            error="Enter a search term.",
        )
    ids = search_ids(ctx.db, q)
    base = f"p.id IN ({','.join(str(i) for i in ids) or '0'})"
    params: list[Any] = []
    cat_facets = []
    for row in ctx.db.execute(
        f"SELECT pc.name, pc.slug, COUNT(*) AS n FROM {PRODUCT_FROM_LITE} "
        f"WHERE p.status = 'enabled' AND {base} GROUP BY pc.id ORDER BY pc.position",
        params,
    ):
        cat_facets.append(
            {
                "label": row["name"],
                "count": row["n"],
                "url": query_string(ctx.request, cat=row["slug"], p=None),
            }
        )
    cat_slug = ctx.arg("cat")
    if cat_slug:
        base += " AND pc.slug = ?"
        params.append(cat_slug)
    # Best match first: the order of ``ids``, kept by position in a comma-separated list.
    relevance = ("instr(?, ',' || p.id || ',')", [",".join(["", *map(str, ids), ""])])
    listing = build_listing(ctx, base, params, relevance)
    if cat_slug:
        listing.active.append(
            {
                "label": f"Category: {cat_slug.replace('-', ' ').title()}",
                "url": query_string(ctx.request, cat=None, p=None),
            }
        )
    return ctx.render(
        "listing.html",
        heading=f"Search results for: '{q}'",
        cat=None,
        parent=None,
        children=[],
        listing=listing,
        query=q,
        cat_facets=cat_facets if not cat_slug else [],
    )


async def product(ctx: Ctx) -> Response:
    """Product page: price, stock, options, add-to-cart, reviews (5 per page), review form."""
    pid = ctx.path_int("product_id")
    prod = get_product(ctx.db, pid) if pid is not None else None
    if prod is None or prod["status"] != "enabled":
        return ctx.not_found("product")
    reviews, pager = ctx.page_rows(
        "*",
        "FROM reviews WHERE product_id = ? AND status = 'approved'",
        [pid],
        "created_at DESC, id DESC",
        REVIEWS_PER_PAGE,
    )
    cust = customer_of(ctx)
    return ctx.render(
        "product.html",
        product=prod,
        options=product_options(ctx.db, pid),
        reviews=reviews,
        pager=pager,
        customer=cust,
    )


async def write_review(ctx: Ctx) -> Response:
    """POST: store a review as pending; it appears once an admin approves it."""
    pid = ctx.path_int("product_id")
    prod = get_product(ctx.db, pid) if pid is not None else None
    if prod is None or prod["status"] != "enabled":
        return ctx.not_found("product")
    cust = customer_of(ctx)
    url = f"/product/{pid}"
    if cust is None:
        return ctx.redirect(f"/login?next={url}", "Please sign in to write a review.", "notice")
    form = await ctx.form()
    rating = parse_int(form.get("rating"), 0)
    nickname, title, body = form.get("nickname", ""), form.get("title", ""), form.get("body", "")
    if not (1 <= rating <= 5) or not nickname or not title or not body:
        return ctx.redirect(
            url + "#review-form",
            "Please choose a rating and fill in nickname, summary and review.",
            "error",
        )
    if error := too_long({"nickname": nickname, "summary": title, "review": body}, ["review"]):
        return ctx.redirect(url + "#review-form", error, "error")
    ctx.db.execute(
        "INSERT INTO reviews (product_id, customer_id, nickname, rating, title, body, status, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?)",
        (pid, cust["id"], nickname[:100], rating, title[:200], body[:5000], ctx.now()),
    )
    ctx.db.commit()
    return ctx.redirect(url, "You submitted your review for moderation.")


# --------------------------------------------------------------------------------------------
# Cart and checkout
# --------------------------------------------------------------------------------------------


def _cart_totals(rows: list[sqlite3.Row]) -> tuple[float, int, float, float]:
    """The cart's subtotal, item count, flat-rate shipping and grand total."""
    subtotal = round(sum(r["row_total"] for r in rows), 2)
    qty = sum(r["qty"] for r in rows)
    shipping = SHIPPING_PER_ITEM * qty
    return subtotal, qty, shipping, round(subtotal + shipping, 2)


async def cart(ctx: Ctx) -> Response:
    """The shopping cart with quantities, totals and a checkout link."""
    rows = cart_rows(ctx)
    subtotal, _, shipping, total = _cart_totals(rows)
    return ctx.render("cart.html", rows=rows, subtotal=subtotal, shipping=shipping, total=total)


async def cart_add(ctx: Ctx) -> Response:
    """POST product_id, qty, color, size: add to the cart (merging identical lines)."""
    form = await ctx.form()
    pid = parse_int(form.get("product_id"), 0)
    prod = get_product(ctx.db, pid)
    if prod is None or prod["status"] != "enabled":
        return ctx.redirect("/cart", "The product does not exist.", "error")
    product_url = f"/product/{pid}"
    back = _return_to(form.get("return_to", ""), product_url)
    opts = product_options(ctx.db, pid)
    chosen = {k: form.get(k, "") for k in ("color", "size")}
    for kind in ("color", "size"):
        if opts[kind] and chosen[kind] not in opts[kind]:
            return ctx.redirect(
                product_url,
                f"You need to choose options for your item: select a {kind}.",
                "error",
            )
        if not opts[kind]:
            chosen[kind] = ""
    qty = parse_int(form.get("qty") or "1", 0)
    if qty < 1:
        return ctx.redirect(back, "Please enter a quantity greater than 0.", "error")
    owner_col, owner = cart_owner(ctx, create=True)  # type: ignore[misc]
    existing = ctx.db.execute(
        f"SELECT * FROM cart_items WHERE {owner_col} = ? AND product_id = ? AND color = ? "
        "AND size = ?",
        (owner, pid, chosen["color"], chosen["size"]),
    ).fetchone()
    new_qty = qty + (existing["qty"] if existing else 0)
    if new_qty > prod["stock_qty"]:
        msg = (
            "This product is out of stock."
            if prod["stock_qty"] == 0
            else f"The requested qty is not available: only {prod['stock_qty']} left."
        )
        return ctx.redirect(back, msg, "error")
    if existing:
        ctx.db.execute("UPDATE cart_items SET qty = ? WHERE id = ?", (new_qty, existing["id"]))
    else:
        ctx.db.execute(
            f"INSERT INTO cart_items ({owner_col}, product_id, color, size, qty, added_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (owner, pid, chosen["color"], chosen["size"], qty, ctx.now()),
        )
    ctx.db.commit()
    return ctx.redirect(back, f"You added {prod['name']} to your shopping cart.")


def _owned_cart_item(ctx: Ctx, item_id: int) -> sqlite3.Row | None:
    owner = cart_owner(ctx)
    if owner is None:
        return None
    col, value = owner
    return ctx.db.execute(
        f"SELECT ci.*, p.stock_qty, p.name FROM cart_items ci JOIN products p "
        f"ON p.id = ci.product_id WHERE ci.id = ? AND ci.{col} = ?",
        (item_id, value),
    ).fetchone()


async def cart_update(ctx: Ctx) -> Response:
    """POST qty_<item id> fields: set quantities (0 removes the line)."""
    form = await ctx.form()
    errors = []
    for key, value in form.items():
        if not key.startswith("qty_"):
            continue
        item = _owned_cart_item(ctx, parse_int(key[4:], 0))
        if item is None:
            continue
        qty = parse_int(value, -1)
        if qty < 0:
            errors.append(f"Invalid quantity for {item['name']}.")
        elif qty == 0:
            ctx.db.execute("DELETE FROM cart_items WHERE id = ?", (item["id"],))
        elif qty > item["stock_qty"]:
            errors.append(f"The requested qty of {item['name']} is not available.")
        else:
            ctx.db.execute("UPDATE cart_items SET qty = ? WHERE id = ?", (qty, item["id"]))
    ctx.db.commit()
    if errors:
        return ctx.redirect("/cart", " ".join(errors), "error")
    return ctx.redirect("/cart", "Your shopping cart was updated.")


def _delete_owned(
    ctx: Ctx, item: sqlite3.Row | None, table: str, back: str, missing: str, removed: str
) -> Response:
    """Delete ``item``, a row of ``table`` the customer owns (None: not theirs), and go back
    to ``back`` saying ``removed`` (``{name}``: the product's name), or ``missing`` if none."""
    if item is None:
        return ctx.redirect(back, missing, "error")
    ctx.db.execute(f"DELETE FROM {table} WHERE id = ?", (item["id"],))
    ctx.db.commit()
    return ctx.redirect(back, removed.format(name=item["name"]))


async def cart_remove(ctx: Ctx) -> Response:
    """POST: remove one line from the cart."""
    return _delete_owned(
        ctx,
        _owned_cart_item(ctx, ctx.path_int("item_id") or 0),
        "cart_items",
        "/cart",
        "That item is not in your cart.",
        "You removed {name} from your shopping cart.",
    )


async def checkout(ctx: Ctx) -> Response:
    """GET: shipping address form and order summary. POST: place the order."""
    cust = customer_of(ctx)
    if cust is None:
        return ctx.login_redirect("Please sign in to check out.")
    rows = cart_rows(ctx)
    if not rows:
        return ctx.redirect("/cart", "You have no items in your shopping cart.", "notice")
    subtotal, qty, shipping, total = _cart_totals(rows)
    values = {k: cust[k] for k, _ in ADDRESS_FIELDS}
    error = None
    if ctx.request.method == "POST":
        form = await ctx.form()
        values = {k: form.get(k, "") for k, _ in ADDRESS_FIELDS}
        missing = [label for k, label in ADDRESS_FIELDS if not values[k]]
        problems = [
            r["name"] for r in rows if r["status"] != "enabled" or r["qty"] > r["stock_qty"]
        ]
        if missing:
            error = "Please fill in the required fields: " + ", ".join(missing) + "."
        elif too_long(values):
            error = too_long(values)
        elif problems:
            error = "Some items are not available in the requested quantity: " + ", ".join(problems)
        else:
            order_id = place_order(
                ctx.db, cust["id"], rows, values, subtotal, qty, shipping, ctx.now()
            )
            return ctx.redirect(f"/checkout/success/{order_id}")
    return ctx.render(
        "checkout.html",
        rows=rows,
        subtotal=subtotal,
        shipping=shipping,
        total=total,
        values=values,
        fields=ADDRESS_FIELDS,
        error=error,
    )


def place_order(
    db: sqlite3.Connection,
    customer_id: int,
    rows: list[sqlite3.Row],
    addr: dict[str, str],
    subtotal: float,
    qty: int,
    shipping: float,
    now: str,
) -> int:
    """Write an order (status pending, stamped ``now``) for the cart ``rows``, take stock, empty
    the cart."""
    order_id = db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM orders").fetchone()[0]
    db.execute(
        "INSERT INTO orders VALUES (?,?,?,'pending',?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            order_id,
            f"{order_id:09d}",
            customer_id,
            now,
            now,
            qty,
            subtotal,
            shipping,
            round(subtotal + shipping, 2),
            f"{addr['first_name']} {addr['last_name']}",
            addr["street"],
            addr["city"],
            addr["region"],
            addr["postcode"],
            addr["country"],
            addr["phone"],
            "Flat Rate - Fixed",
            "Check / Money order",
        ),
    )
    for r in rows:
        db.execute(
            "INSERT INTO order_items (order_id, product_id, sku, name, color, size, price, qty, "
            "row_total) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                order_id,
                r["product_id"],
                r["sku"],
                r["name"],
                r["color"],
                r["size"],
                r["price"],
                r["qty"],
                r["row_total"],
            ),
        )
        db.execute(
            "UPDATE products SET stock_qty = stock_qty - ? WHERE id = ?",
            (r["qty"], r["product_id"]),
        )
        db.execute("DELETE FROM cart_items WHERE id = ?", (r["id"],))
    db.commit()
    return order_id


async def checkout_success(ctx: Ctx) -> Response:
    """Order confirmation page."""
    cust = customer_of(ctx)
    order = get_order(ctx.db, ctx.path_int("order_id") or 0)
    if cust is None or order is None or order["customer_id"] != cust["id"]:
        return ctx.not_found("order")
    return ctx.render("success.html", order=order)


# --------------------------------------------------------------------------------------------
# Account
# --------------------------------------------------------------------------------------------


async def _require_customer(ctx: Ctx) -> sqlite3.Row | Response:
    cust = customer_of(ctx)
    if cust is None:
        return ctx.login_redirect("Please sign in to see your account.")
    return cust


async def account(ctx: Ctx) -> Response:
    """My Account: contact information, default address, recent orders."""
    cust = await _require_customer(ctx)
    if isinstance(cust, Response):
        return cust
    orders = ctx.db.execute(
        "SELECT * FROM orders WHERE customer_id = ? ORDER BY created_at DESC, id DESC LIMIT 5",
        (cust["id"],),
    ).fetchall()
    return ctx.render("account.html", customer=cust, orders=orders)


def _contact_error(values: dict[str, str], missing: str) -> str | None:
    """The first problem of a form with names and an email: ``missing`` when a field is
    empty, then a field too long, then an email that is not one; None when there is none."""
    if not all(values.values()):
        return missing
    if too_long(values):
        return too_long(values)
    if not is_email(values["email"]):
        return "Please enter a valid email address."
    return None


async def account_edit(ctx: Ctx) -> Response:
    """Account information: first name, last name, email."""
    cust = await _require_customer(ctx)
    if isinstance(cust, Response):
        return cust
    values = {
        "first_name": cust["first_name"],
        "last_name": cust["last_name"],
        "email": cust["email"],
    }
    if ctx.request.method == "POST":
        form = await ctx.form()
        values = {k: form.get(k, "") for k in values}
        error = _contact_error(values, "First name, last name and email are required.")
        if (
            error is None
            and ctx.db.execute(
                "SELECT 1 FROM users WHERE lower(email) = lower(?) AND id != ?",
                (values["email"], cust["user_id"]),
            ).fetchone()
        ):
            error = "A customer with the same email address already exists."
        if error:
            return ctx.render("account_edit.html", values=values, error=error)
        ctx.db.execute(
            "UPDATE customers SET first_name = ?, last_name = ?, email = ? WHERE id = ?",
            (values["first_name"], values["last_name"], values["email"], cust["id"]),
        )
        ctx.db.execute(
            "UPDATE users SET full_name = ?, email = ? WHERE id = ?",
            (f"{values['first_name']} {values['last_name']}", values["email"], cust["user_id"]),
        )
        ctx.db.commit()
        return ctx.redirect("/account", "You saved the account information.")
    return ctx.render("account_edit.html", values=values)


async def account_address(ctx: Ctx) -> Response:
    """Default address: street, city, state, zip, country, phone."""
    cust = await _require_customer(ctx)
    if isinstance(cust, Response):
        return cust
    fields = ADDRESS_FIELDS[2:]
    values = {k: cust[k] for k, _ in fields}
    if ctx.request.method == "POST":
        form = await ctx.form()
        values = {k: form.get(k, "") for k, _ in fields}
        missing = [label for k, label in fields if not values[k]]
        error = too_long(values)
        if missing:
            error = "Please fill in the required fields: " + ", ".join(missing) + "."
        if error:
            return ctx.render("address.html", values=values, fields=fields, error=error)
        ctx.db.execute(
            "UPDATE customers SET street = ?, city = ?, region = ?, postcode = ?, country = ?, "
            "phone = ? WHERE id = ?",
            (*[values[k] for k, _ in fields], cust["id"]),
        )
        ctx.db.commit()
        return ctx.redirect("/account", "You saved the address.")
    return ctx.render("address.html", values=values, fields=fields)


async def account_orders(ctx: Ctx) -> Response:
    """My Orders: all orders of the customer, newest first, 10 per page."""
    cust = await _require_customer(ctx)
    if isinstance(cust, Response):
        return cust
    orders, pager = ctx.page_rows(
        "*", "FROM orders WHERE customer_id = ?", [cust["id"]], "created_at DESC, id DESC", PER_PAGE
    )
    return ctx.render("orders.html", orders=orders, pager=pager)


async def account_order(ctx: Ctx) -> Response:
    """One order of the customer: items, totals, address, status."""
    cust = await _require_customer(ctx)
    if isinstance(cust, Response):
        return cust
    order = get_order(ctx.db, ctx.path_int("order_id") or 0)
    if order is None or order["customer_id"] != cust["id"]:
        return ctx.not_found("order")
    return ctx.render("order.html", order=order, items=order_items(ctx.db, order["id"]))


async def account_reviews(ctx: Ctx) -> Response:
    """My Product Reviews (including those awaiting moderation)."""
    cust = await _require_customer(ctx)
    if isinstance(cust, Response):
        return cust
    reviews, pager = ctx.page_rows(
        "r.*, p.name AS product_name",
        "FROM reviews r JOIN products p ON p.id = r.product_id WHERE r.customer_id = ?",
        [cust["id"]],
        "r.created_at DESC, r.id DESC",
        PER_PAGE,
    )
    return ctx.render("my_reviews.html", reviews=reviews, pager=pager)


def _new_login_error(ctx: Ctx, values: dict[str, str]) -> str | None:
    """The first problem of a new account's username and password (the format, the length,
    the confirmation, an account that already has the username or email); None if none."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]{3,40}", values["username"]):
        return "The username must be 3-40 letters, digits, '.', '_' or '-'."
    if len(values["password"]) < 8:
        return "The password must be at least 8 characters long."
    if values["password"] != values["password_confirm"]:
        return "Please make sure your passwords match."
    if ctx.db.execute(
        "SELECT 1 FROM users WHERE username = ? OR lower(email) = lower(?)",
        (values["username"], values["email"]),
    ).fetchone():
        return "There is already an account with this username or email address."
    return None


async def register(ctx: Ctx) -> Response:
    """Create an Account: a user and a customer record, then signed in."""
    keys = ("first_name", "last_name", "email", "username", "password", "password_confirm")
    values = dict.fromkeys(keys, "")
    if ctx.request.method == "POST":
        form = await ctx.form()
        values = {k: form.get(k, "") for k in keys}
        error = _contact_error(values, "All fields are required.") or _new_login_error(ctx, values)
        if error:
            values["password"] = values["password_confirm"] = ""
            return ctx.render("register.html", values=values, error=error)
        now = ctx.now()
        salt = secrets.token_hex(8)
        cur = ctx.db.execute(
            "INSERT INTO users (username, email, password_hash, full_name, is_admin, created_at) "
            "VALUES (?, ?, ?, ?, 0, ?)",
            (
                values["username"],
                values["email"],
                hash_password(values["password"], salt),
                f"{values['first_name']} {values['last_name']}",
                now,
            ),
        )
        ctx.db.execute(
            "INSERT INTO customers (user_id, first_name, last_name, email, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (cur.lastrowid, values["first_name"], values["last_name"], values["email"], now),
        )
        ctx.db.commit()
        ctx.log_in(int(cur.lastrowid or 0))
        return ctx.redirect("/account", "Thank you for registering with One Stop Market.")
    return ctx.render("register.html", values=values)


# --------------------------------------------------------------------------------------------
# Wish list
# --------------------------------------------------------------------------------------------


async def wishlist(ctx: Ctx) -> Response:
    """My Wish List."""
    cust = customer_of(ctx)
    if cust is None:
        return ctx.login_redirect("Please sign in to see your wish list.")
    items = ctx.db.execute(
        "SELECT w.id, w.added_at, p.id AS product_id, p.name, p.price, p.stock_qty "
        "FROM wishlist_items w JOIN products p ON p.id = w.product_id "
        "WHERE w.customer_id = ? AND p.status = 'enabled' ORDER BY w.added_at DESC, w.id DESC",
        (cust["id"],),
    ).fetchall()
    return ctx.render("wishlist.html", items=items)


async def wishlist_add(ctx: Ctx) -> Response:
    """POST product_id: add a product to the wish list."""
    form = await ctx.form()
    pid = parse_int(form.get("product_id"), 0)
    cust = customer_of(ctx)
    if cust is None:
        return ctx.redirect(
            f"/login?next=/product/{pid}",
            "Please sign in to add items to your wish list.",
            "notice",
        )
    prod = get_product(ctx.db, pid)
    if prod is None or prod["status"] != "enabled":
        return ctx.redirect("/wishlist", "The product does not exist.", "error")
    ctx.db.execute(
        "INSERT OR IGNORE INTO wishlist_items (customer_id, product_id, added_at) VALUES (?, ?, ?)",
        (cust["id"], pid, ctx.now()),
    )
    ctx.db.commit()
    return ctx.redirect("/wishlist", f"{prod['name']} has been added to your Wish List.")


def _owned_wish(ctx: Ctx) -> sqlite3.Row | None:
    cust = customer_of(ctx)
    if cust is None:
        return None
    return ctx.db.execute(
        "SELECT w.*, p.name FROM wishlist_items w JOIN products p ON p.id = w.product_id "
        "WHERE w.id = ? AND w.customer_id = ?",
        (ctx.path_int("item_id") or 0, cust["id"]),
    ).fetchone()


async def wishlist_remove(ctx: Ctx) -> Response:
    """POST: remove an item from the wish list."""
    return _delete_owned(
        ctx,
        _owned_wish(ctx),
        "wishlist_items",
        "/wishlist",
        WISH_MISSING,
        "{name} has been removed from your Wish List.",
    )


async def wishlist_to_cart(ctx: Ctx) -> Response:
    """POST: move a wish-list item to the cart (products with options go to their page)."""
    item = _owned_wish(ctx)
    if item is None:
        return ctx.redirect("/wishlist", WISH_MISSING, "error")
    opts = product_options(ctx.db, item["product_id"])
    if opts["color"] or opts["size"]:
        return ctx.redirect(
            f"/product/{item['product_id']}",
            "You need to choose options for your item.",
            "notice",
        )
    prod = get_product(ctx.db, item["product_id"])
    assert prod is not None
    owner_col, owner = cart_owner(ctx, create=True)  # type: ignore[misc]
    if prod["stock_qty"] < 1:
        return ctx.redirect("/wishlist", "This product is out of stock.", "error")
    ctx.db.execute(
        f"INSERT INTO cart_items ({owner_col}, product_id, qty, added_at) VALUES (?, ?, 1, ?)",
        (owner, prod["id"], ctx.now()),
    )
    ctx.db.execute("DELETE FROM wishlist_items WHERE id = ?", (item["id"],))
    ctx.db.commit()
    return ctx.redirect("/cart", f"You added {prod['name']} to your shopping cart.")


def routes() -> list[BaseRoute]:
    """The shop's routes (login/logout are added by the framework)."""
    post = ("POST",)
    both = ("GET", "POST")
    return [
        page("/", home),
        page("/category/{path:path}", category),
        page("/search", search),
        page("/product/{product_id:id}", product),
        page("/product/{product_id:id}/review", write_review, post),
        page("/cart", cart),
        page("/cart/add", cart_add, post),
        page("/cart/update", cart_update, post),
        page("/cart/remove/{item_id:id}", cart_remove, post),
        page("/checkout", checkout, both),
        page("/checkout/success/{order_id:id}", checkout_success),
        page("/account", account),
        page("/account/edit", account_edit, both),
        page("/account/address", account_address, both),
        page("/account/orders", account_orders),
        page("/account/orders/{order_id:id}", account_order),
        page("/account/reviews", account_reviews),
        page("/wishlist", wishlist),
        page("/wishlist/add", wishlist_add, post),
        page("/wishlist/remove/{item_id:id}", wishlist_remove, post),
        page("/wishlist/cart/{item_id:id}", wishlist_to_cart, post),
        page("/register", register, both),
    ]
