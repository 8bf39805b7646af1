"""Task templates of the shopping site (One Stop Market, WebArena's OneStopShop storefront).

Every template samples its parameters from the pristine shop database and grades with a
WebArena ``eval`` spec: ``string_match`` for questions (info), ``url_match`` for pages to reach
(nav), ``state_match`` SQL checks on the episode's own instance for changes. The experts
navigate like a user: the search box, the "Shop by Category" links, the sort dropdown, the
"Shop By" facets, the account pages; they read answers off the observation text.

Ids 100-199. Held out (test split only): ``shopping.compare_ratings`` (150),
``shopping.category_filter_color_price`` (151), ``shopping.wishlist_extreme_in_category`` (152).
"""

from __future__ import annotations

import random
import re
import sqlite3
from typing import Any

from webagent_r1.agent.actions import format_action
from webagent_r1.sites.base import fmt_date, fmt_money, fmt_stars
from webagent_r1.sites.seed_utils import FIRST_NAMES, LAST_NAMES, rand_address, rand_phone
from webagent_r1.sites.shopping.queries import PRODUCT_COLUMNS, PRODUCT_FROM
from webagent_r1.sites.shopping.views import search_ids
from webagent_r1.tasks.experts import (
    Element,
    Expert,
    ExpertError,
    Step,
    answer,
    click,
    elements,
    find,
    find_all,
    maybe,
    search,
    select,
    type_text,
)
from webagent_r1.tasks.templates.common import (
    Params,
    Registry,
    Sub,
    db_memo,
    grab,
    line_after,
    seek,
    state_check,
    state_eval,
    url_eval,
)
from webagent_r1.types import Action, Observation

SHOPPER = "emma.lopez"
"""The default shopper (WebArena's Emma Lopez) that account tasks log in as."""
START = "__SHOPPING__/"
PER_PAGE = 10
"""Products per listing page (the shop's page size)."""


# Sort dropdown option for each way of ordering a listing an intent may ask for.
SORTS = {
    "price, from lowest to highest": ("price_asc", "Price: Low to High"),
    "price, from highest to lowest": ("price_desc", "Price: High to Low"),
    "name, from A to Z": ("name_asc", "Name: A to Z"),
    "name, from Z to A": ("name_desc", "Name: Z to A"),
    "customer rating, best rated first": ("rating_desc", "Rating: High to Low"),
}
EXTREMES = {"cheapest": "Price: Low to High", "most expensive": "Price: High to Low"}
PRICE_BUCKETS = ((0, 25), (25, 50), (50, 100), (100, 200), (200, None))
"""The shop's price facets (``price=lo-hi`` in the URL; hi exclusive)."""

REVIEW_TITLES = (
    "Does the job",
    "Exactly as described",
    "Not what I expected",
    "Great value for the money",
    "Would not buy again",
    "Solid everyday pick",
    "Better than I hoped",
    "Just okay",
    "Fell apart quickly",
    "My new favorite",
)
REVIEW_BODIES = (
    "Arrived quickly and works as advertised.",
    "The quality is fine but the color looks different from the photos.",
    "I use it every day and it still looks new after a month.",
    "It stopped working after two weeks, very disappointing.",
    "Good product for the price, I would recommend it to friends.",
    "Smaller than I thought, but it does what I need.",
    "Packaging was damaged, the item itself was fine.",
    "Excellent build quality and easy to use.",
)
RATING_WORDS = {1: "1 star", 2: "2 stars", 3: "3 stars", 4: "4 stars", 5: "5 stars"}


# --------------------------------------------------------------------------------------------
# Sampling helpers (read the pristine database)
# --------------------------------------------------------------------------------------------


TEMPLATES = Registry(sites=["shopping"], start_url=START)
"""The module's templates, in the suite's order."""


def _products(conn: sqlite3.Connection, where: str = "1", params: tuple = ()) -> list[Any]:
    """Enabled products with category names and rating summary, by id."""
    memo = db_memo(conn, __name__)
    key = ("products", where, params)
    if key not in memo:
        memo[key] = conn.execute(
            f"SELECT {PRODUCT_COLUMNS} FROM {PRODUCT_FROM} WHERE p.status = 'enabled' "
            f"AND ({where}) ORDER BY p.id",
            params,
        ).fetchall()
    return memo[key]


def _options(conn: sqlite3.Connection, pid: int, kind: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT value FROM product_options WHERE product_id = ? AND kind = ? ORDER BY position",
            (pid, kind),
        )
    ]


def _findable(conn: sqlite3.Connection, product: Any) -> bool:
    """A search for the product's full name lists it on the first result page."""
    memo = db_memo(conn, __name__)
    key = ("findable", product["id"])
    if key not in memo:
        memo[key] = product["id"] in search_ids(conn, product["name"])[:PER_PAGE]
    return memo[key]


def pick_product(
    conn: sqlite3.Connection, rng: random.Random, where: str = "1", params: tuple = ()
) -> Any | None:
    """A random product matching ``where`` (SQL on the products table); None when none does,
    or when the one drawn cannot be found by the shop's search."""
    rows = _products(conn, where, params)
    if not rows:
        return None
    p = rng.choice(rows)
    return p if _findable(conn, p) else None


def _customer(conn: sqlite3.Connection, username: str = SHOPPER) -> Any:
    return conn.execute(
        "SELECT c.* FROM customers c JOIN users u ON u.id = c.user_id WHERE u.username = ?",
        (username,),
    ).fetchone()


def _leaves(conn: sqlite3.Connection) -> list[Any]:
    """Leaf categories with their parent's name, in menu order."""
    return conn.execute(
        "SELECT c.id, c.name, c.path, pc.name AS top FROM categories c "
        "JOIN categories pc ON pc.id = c.parent_id ORDER BY pc.position, c.position"
    ).fetchall()


def _extreme(conn: sqlite3.Connection, leaf_id: int, which: str) -> Any | None:
    """The unique cheapest / most expensive listed product of a leaf category (None: a tie)."""
    rows = _products(conn, "p.category_id = ?", (leaf_id,))
    if len(rows) < 2:
        return None
    rows = sorted(rows, key=lambda r: r["price"], reverse=which == "most expensive")
    if rows[0]["price"] == rows[1]["price"]:
        return None
    return rows[0]


def _max_order_id(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM orders").fetchone()[0])


# --------------------------------------------------------------------------------------------
# Expert helpers (read the observation only)
# --------------------------------------------------------------------------------------------


def _open_product(obs: Observation, product: str) -> Sub:
    """Search the store for a product by its full name and open its page."""
    box = find(obs, "textbox", "Search")
    obs = yield search(box, product, f"I search the store for '{product}' to find its page.")
    link, obs = yield from seek(
        obs, "link", product, f"'{product}' should be among the results; I scroll.", exact=True
    )
    obs = yield click(link, f"The results list '{product}'; I open its product page.")
    return obs


def _open_leaf(obs: Observation, top: str, leaf: str) -> Sub:
    """From any shop page: home, the top-level category, then its leaf category."""
    link = maybe(obs, "link", top, exact=True)
    if link is None:
        home = find(obs, "link", "One Stop Market", exact=True)
        obs = yield click(home, "I go to the home page, which lists the categories.")
        link = find(obs, "link", top, exact=True)
    obs = yield click(link, f"'{leaf}' is a subcategory of '{top}'; I open '{top}' first.")
    leaf_link, obs = yield from seek(
        obs, "link", leaf, f"I look for the '{leaf}' subcategory link.", exact=True
    )
    obs = yield click(leaf_link, f"The '{top}' page lists its subcategories; I open '{leaf}'.")
    return obs


def _sort_listing(obs: Observation, option: str, why: str) -> Sub:
    box = find(obs, "combobox", "Sort By")
    if box.value == option:
        return obs
    obs = yield select(box, option, why)
    # Choosing an option reloads the page, and the view may come back before the new page is
    # there (an empty page). A key press that changes nothing gives a fresh view of it.
    for _ in range(3):
        box = maybe(obs, "combobox", "Sort By")
        if box is not None and box.value == option and _listed(obs):
            break
        obs = yield Step(
            format_action(Action("Press Enter")),
            "The sorted listing has not appeared yet; I wait for the page to show it.",
        )
    return obs


def _listed(obs: Observation) -> bool:
    try:
        _first_listed(obs)
    except ExpertError:
        return False
    return True


def _first_listed(obs: Observation) -> Element:
    """The first product link of a listing (the first link after the Sort button)."""
    els = elements(obs.text)
    for i, el in enumerate(els):
        if el.role == "combobox" and el.name == "Sort By":
            for later in els[i + 1 :]:
                if later.role == "link":
                    return later
    raise ExpertError(f"expert: no product listing on {obs.url}")


def _go_account(obs: Observation, why: str) -> Sub:
    link = find(obs, "link", "My Account", exact=True)
    obs = yield click(link, why)
    return obs


# --------------------------------------------------------------------------------------------
# 100 info: price of a product (search, read the price in the results)
# --------------------------------------------------------------------------------------------


def sample_price(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = pick_product(conn, rng)
    if p is None:
        return None
    return {"product": p["name"], "_answer": fmt_money(p["price"])}


@TEMPLATES.template(
    id=100,
    name="shopping.product_price",
    kind="info",
    intent="What is the price of the {product}? Answer with the price only, like $12.34.",
    sample=sample_price,
    difficulty="1-2",
)
def expert_price(p: Params, obs: Observation) -> Expert:
    box = find(obs, "textbox", "Search")
    obs = yield search(box, p["product"], f"I search for '{p['product']}' to see its price.")
    link, obs = yield from seek(
        obs, "link", p["product"], "I scroll to find the product in the results.", exact=True
    )
    line = line_after(obs, link)
    m = re.search(r"\$[\d,]+\.\d\d", line)
    if not m:
        raise ExpertError(f"expert: no price after {link.line!r}")
    yield answer(m.group(0), f"The result '{p['product']}' is listed at {m.group(0)}.")


# --------------------------------------------------------------------------------------------
# 101 info: average rating of a product (its product page)
# --------------------------------------------------------------------------------------------


def sample_rating(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = pick_product(
        conn,
        rng,
        "(SELECT COUNT(*) FROM reviews r WHERE r.product_id = p.id AND r.status = 'approved') > 0",
    )
    if p is None:
        return None
    return {"product": p["name"], "_answer": fmt_stars(p["rating"]).split()[0]}


@TEMPLATES.template(
    id=101,
    name="shopping.product_rating",
    kind="info",
    intent="What is the average customer rating of the {product}? Answer with the number "
    "of stars out of 5 as the site shows it, like 4.1.",
    sample=sample_rating,
    difficulty="3-5",
)
def expert_rating(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_product(obs, p["product"])
    rating = grab(obs, r"^Rating: ([\d.]+) out of 5", "rating")
    yield answer(rating, f"The product page shows 'Rating: {rating} out of 5'.")


# --------------------------------------------------------------------------------------------
# 102 info: SKU of a product
# --------------------------------------------------------------------------------------------


def sample_sku(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = pick_product(conn, rng)
    if p is None:
        return None
    return {"product": p["name"], "_answer": p["sku"]}


@TEMPLATES.template(
    id=102,
    name="shopping.product_sku",
    kind="info",
    intent="What is the SKU of the {product}? Answer with the SKU only.",
    sample=sample_sku,
    difficulty="3-5",
)
def expert_sku(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_product(obs, p["product"])
    sku = grab(obs, r"SKU: (\w+)", "SKU")
    yield answer(sku, f"The product details line shows SKU: {sku}.")


# --------------------------------------------------------------------------------------------
# 103 info: cheapest / most expensive product of a leaf category
# --------------------------------------------------------------------------------------------


def sample_extreme(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    leaf = rng.choice(_leaves(conn))
    which = rng.choice(sorted(EXTREMES))
    best = _extreme(conn, leaf["id"], which)
    if best is None:
        return None
    return {"which": which, "leaf": leaf["name"], "top": leaf["top"], "_answer": best["name"]}


@TEMPLATES.template(
    id=103,
    name="shopping.category_price_extreme",
    kind="info",
    intent="What is the {which} product in the {leaf} category (under {top})? Answer with "
    "the exact product name.",
    sample=sample_extreme,
    difficulty="3-5",
)
def expert_extreme(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_leaf(obs, p["top"], p["leaf"])
    option = EXTREMES[p["which"]]
    obs = yield from _sort_listing(
        obs, option, f"Sorting by '{option}' puts the {p['which']} product first."
    )
    first = _first_listed(obs)
    yield answer(first.name, f"Sorted by price, the first product is '{first.name}'.")


# --------------------------------------------------------------------------------------------
# 104 info: number of search results
# --------------------------------------------------------------------------------------------


def _noun(p: Any) -> str:
    rest = p["name"][len(p["brand"]) + 1 :]
    return rest.split(" ", 1)[1] if " " in rest else rest


def sample_search_count(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = rng.choice(_products(conn))
    noun = _noun(p).lower()
    kind = rng.choice(("noun", "noun", "brand", "color"))
    if kind == "noun":
        query = noun
    elif kind == "brand":
        query = f"{p['brand']} {noun.split()[-1]}".lower()
    else:
        colors = _options(conn, p["id"], "color")
        if not colors:
            return None
        query = f"{rng.choice(colors)} {noun}".lower()
    n = len(search_ids(conn, query))
    if n == 0:
        return None
    return {"query": query, "_answer": str(n)}


@TEMPLATES.template(
    id=104,
    name="shopping.search_result_count",
    kind="info",
    intent='How many products does a store search for "{query}" return? Answer with a number.',
    sample=sample_search_count,
    difficulty="1-2",
)
def expert_search_count(p: Params, obs: Observation) -> Expert:
    box = find(obs, "textbox", "Search")
    obs = yield search(box, p["query"], f"I search the store for '{p['query']}'.")
    n = grab(obs, r"Items \d+-\d+ of (\d+)", "result count")
    yield answer(n, f"The results header says 'Items ... of {n}', so the search finds {n}.")


# --------------------------------------------------------------------------------------------
# 105 info: a detail of one of my orders (emma.lopez)
# --------------------------------------------------------------------------------------------

ORDER_FIELDS = {
    # field -> (answer format sentence, where it is shown: column of the orders table or None)
    "status": ("Answer with the status only, e.g. On Hold.", "Status"),
    "grand total": ("Answer with the amount, like $12.34.", "Order Total"),
    "order date": ("Answer with the date as the site shows it, like Jan 5, 2023.", "Date"),
    "subtotal": ("Answer with the amount, like $12.34.", None),
    "shipping & handling fee": ("Answer with the amount, like $12.34.", None),
}


def sample_order_detail(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    cust = _customer(conn)
    orders = conn.execute(
        "SELECT * FROM orders WHERE customer_id = ? ORDER BY id", (cust["id"],)
    ).fetchall()
    o = rng.choice(orders)
    field = rng.choice(list(ORDER_FIELDS))
    value = {
        "status": o["status"].title(),
        "grand total": fmt_money(o["grand_total"]),
        "order date": fmt_date(o["created_at"]),
        "subtotal": fmt_money(o["subtotal"]),
        "shipping & handling fee": fmt_money(o["shipping_amount"]),
    }[field]
    return {
        "field": field,
        "order": o["increment_id"],
        "answer_format": ORDER_FIELDS[field][0],
        "_answer": value,
    }


def _order_rows(obs: Observation) -> list[dict[str, str]]:
    """Rows of the orders table as {column: cell}, plus '_line' (the row's text line)."""
    header: list[str] | None = None
    rows = []
    for line in obs.text.splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if cells[0] == "Order #":
            header = cells
        elif header and len(cells) == len(header):
            rows.append({**dict(zip(header, cells, strict=True)), "_line": line})
    return rows


def _find_order(obs: Observation, number: str) -> Sub:
    """From My Account: the row of an order, paging through My Orders if needed."""
    for _ in range(20):
        for row in _order_rows(obs):
            if row["Order #"] == number:
                return row, obs
        more = maybe(obs, "link", "View All", exact=True)
        if more is not None:
            obs = yield click(more, f"Order {number} is not among the recent orders; I open all.")
            continue
        nxt = maybe(obs, "link", "Next", exact=True)
        if nxt is None:
            break
        obs = yield click(nxt, f"Order {number} is not on this page; I go to the next page.")
    raise ExpertError(f"expert: order {number} not found on {obs.url}")


@TEMPLATES.template(
    id=105,
    name="shopping.my_order_detail",
    kind="info",
    intent="What is the {field} of my order number {order}? {answer_format}",
    sample=sample_order_detail,
    user=SHOPPER,
    difficulty="3-5",
)
def expert_order_detail(p: Params, obs: Observation) -> Expert:
    number, field = p["order"], p["field"]
    obs = yield from _go_account(obs, "My orders are listed in My Account; I open it.")
    row, obs = yield from _find_order(obs, number)
    column = ORDER_FIELDS[field][1]
    if column is not None:
        yield answer(row[column], f"The row of order {number} shows {column}: {row[column]}.")
        return
    view = find_all(row["_line"], "link", "View Order")
    if not view:
        raise ExpertError(f"expert: no View Order link in the row of {number}")
    obs = yield click(view[0], f"The {field} is on the order's own page; I open order {number}.")
    label = {"subtotal": "Subtotal", "shipping & handling fee": "Shipping & Handling"}[field]
    value = grab(obs, rf"^{re.escape(label)} \| (\$[\d,]+\.\d\d)", field)
    yield answer(value, f"The order totals show {label}: {value}.")


# --------------------------------------------------------------------------------------------
# 106 nav: the product page of a product
# --------------------------------------------------------------------------------------------


def sample_product_page(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = pick_product(conn, rng)
    if p is None:
        return None
    return {"product": p["name"], "_id": p["id"]}


def eval_product_page(p: Params) -> dict[str, Any]:
    # url_match alone accepts /product/123 for /product/12 (path containment), so the page's
    # heading must also be the product's name.
    return url_eval(f"__SHOPPING__/product/{p['_id']}", shows=p["product"])


@TEMPLATES.template(
    id=106,
    name="shopping.product_page",
    kind="nav",
    intent="Open the product page of the {product}.",
    sample=sample_product_page,
    evaluation=eval_product_page,
    difficulty="3-5",
)
def expert_product_page(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_product(obs, p["product"])
    yield answer("done", f"This is the product page of '{p['product']}'.")


# --------------------------------------------------------------------------------------------
# 107 nav: a leaf category sorted in a given order
# --------------------------------------------------------------------------------------------


def sample_sorted_category(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    leaf = rng.choice(_leaves(conn))
    order = rng.choice(list(SORTS))
    return {"leaf": leaf["name"], "top": leaf["top"], "order": order, "_path": leaf["path"]}


def eval_sorted_category(p: Params) -> dict[str, Any]:
    key = SORTS[p["order"]][0]
    return url_eval(f"__SHOPPING__/category/{p['_path']}?sort={key}")


@TEMPLATES.template(
    id=107,
    name="shopping.sorted_category",
    kind="nav",
    intent="Show me the products of the {leaf} category (under {top}) sorted by {order}.",
    sample=sample_sorted_category,
    evaluation=eval_sorted_category,
    difficulty="3-5",
)
def expert_sorted_category(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_leaf(obs, p["top"], p["leaf"])
    option = SORTS[p["order"]][1]
    obs = yield from _sort_listing(obs, option, f"I sort the listing by '{option}'.")
    yield answer("done", f"The '{p['leaf']}' products are now sorted by '{option}'.")


# --------------------------------------------------------------------------------------------
# 108 change: add a product with options and a quantity to the cart
# --------------------------------------------------------------------------------------------


def sample_add_to_cart(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = pick_product(
        conn,
        rng,
        "p.stock_qty >= 4 AND EXISTS (SELECT 1 FROM product_options o "
        "WHERE o.product_id = p.id AND o.kind = 'color')",
    )
    if p is None:
        return None
    color = rng.choice(_options(conn, p["id"], "color"))
    sizes = _options(conn, p["id"], "size")
    size = rng.choice(sizes) if sizes else ""
    qty = rng.choice((2, 2, 3, 4))
    options = f"color {color}" + (f", size {size}" if size else "")
    return {
        "product": p["name"],
        "options": options,
        "qty": qty,
        "_id": p["id"],
        "_color": color,
        "_size": size,
        "_cust": _customer(conn)["id"],
    }


def eval_add_to_cart(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT qty FROM cart_items WHERE customer_id = ? AND product_id = ? "
            "AND color = ? AND size = ?",
            [p["_cust"], p["_id"], p["_color"], p["_size"]],
            expected=p["qty"],
            description="the cart holds the product with these options and quantity",
            site="shopping",
        ),
        state_check(
            "SELECT COUNT(*) FROM cart_items WHERE customer_id = ?",
            [p["_cust"]],
            expected=1,
            description="nothing else is in the cart",
            site="shopping",
        ),
    )


def _parse_options(options: str) -> list[tuple[str, str]]:
    """``"color Black, size M"`` -> ``[("Color", "Black"), ("Size", "M")]``."""
    out = []
    for part in options.split(", "):
        kind, value = part.split(" ", 1)
        out.append((kind.title(), value))
    return out


def _add_current_product(obs: Observation, p: Params) -> Sub:
    """On a product page: choose the options and quantity, then Add to Cart."""
    for kind, value in _parse_options(p["options"]):
        box = find(obs, "combobox", kind, exact=True)
        obs = yield select(box, value, f"The task asks for {kind.lower()} {value}; I choose it.")
    qty = str(p["qty"])
    box = find(obs, "textbox", "Qty", exact=True)
    if box.value != qty:
        obs = yield type_text(box, qty, f"I want {qty} of them, so I set the quantity to {qty}.")
    button, obs = yield from seek(obs, "button", "Add to Cart", "I look for Add to Cart.")
    obs = yield click(button, "Options and quantity are set; I add the product to the cart.")
    if "to your shopping cart" not in obs.text:
        raise ExpertError(f"expert: the product was not added to the cart on {obs.url}")
    return obs


@TEMPLATES.template(
    id=108,
    name="shopping.add_to_cart",
    writes={"shopping.cart_items": 1},
    kind="change",
    intent="Add the {product} to my shopping cart with {options} and quantity {qty}.",
    sample=sample_add_to_cart,
    evaluation=eval_add_to_cart,
    user=SHOPPER,
    difficulty="6-9",
)
def expert_add_to_cart(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_product(obs, p["product"])
    obs = yield from _add_current_product(obs, p)
    yield answer("done", f"The store confirms that {p['product']} is in my cart.")


# --------------------------------------------------------------------------------------------
# 109 change: add a product to the wish list
# --------------------------------------------------------------------------------------------


def sample_wishlist(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    cust = _customer(conn)
    p = pick_product(
        conn,
        rng,
        "p.id NOT IN (SELECT product_id FROM wishlist_items WHERE customer_id = ?)",
        (cust["id"],),
    )
    if p is None:
        return None
    n = conn.execute(
        "SELECT COUNT(*) FROM wishlist_items WHERE customer_id = ?", (cust["id"],)
    ).fetchone()[0]
    return {"product": p["name"], "_id": p["id"], "_cust": cust["id"], "_count": n + 1}


def eval_wishlist(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT id FROM wishlist_items WHERE customer_id = ? AND product_id = ?",
            [p["_cust"], p["_id"]],
            row_count=1,
            description="the product is in the wish list",
            site="shopping",
        ),
        state_check(
            "SELECT COUNT(*) FROM wishlist_items WHERE customer_id = ?",
            [p["_cust"]],
            expected=p["_count"],
            description="no other product was added or removed",
            site="shopping",
        ),
    )


def _wish_current(obs: Observation, product: str) -> Sub:
    button, obs = yield from seek(obs, "button", "Add to Wish List", "I look for the button.")
    obs = yield click(button, f"On the page of '{product}' I click Add to Wish List.")
    if "added to your Wish List" not in obs.text:
        raise ExpertError(f"expert: {product} was not added to the wish list")
    return obs


@TEMPLATES.template(
    id=109,
    name="shopping.add_to_wishlist",
    writes={"shopping.wishlist_items": 1},
    kind="change",
    intent="Add the {product} to my wish list.",
    sample=sample_wishlist,
    evaluation=eval_wishlist,
    user=SHOPPER,
    difficulty="3-5",
)
def expert_wishlist(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_product(obs, p["product"])
    obs = yield from _wish_current(obs, p["product"])
    yield answer("done", f"My wish list now shows '{p['product']}'.")


# --------------------------------------------------------------------------------------------
# 110 change: write a review
# --------------------------------------------------------------------------------------------


def sample_review(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    cust = _customer(conn)
    p = pick_product(
        conn,
        rng,
        "p.id NOT IN (SELECT product_id FROM reviews WHERE customer_id = ?)",
        (cust["id"],),
    )
    if p is None:
        return None
    return {
        "product": p["name"],
        "stars": rng.randint(1, 5),
        "title": rng.choice(REVIEW_TITLES),
        "text": rng.choice(REVIEW_BODIES),
        "_id": p["id"],
        "_cust": cust["id"],
    }


def eval_review(p: Params) -> dict[str, Any]:
    base = "SELECT {} FROM reviews WHERE product_id = ? AND customer_id = ? ORDER BY id DESC"
    args = [p["_id"], p["_cust"]]
    return state_eval(
        state_check(
            base.format("rating"),
            args,
            expected=p["stars"],
            description="my latest review of the product has the rating",
            site="shopping",
        ),
        state_check(
            base.format("title"),
            args,
            expected=p["title"],
            description="its summary",
            site="shopping",
        ),
        state_check(
            base.format("body"), args, expected=p["text"], description="its text", site="shopping"
        ),
    )


@TEMPLATES.template(
    id=110,
    name="shopping.write_review",
    writes={"shopping.reviews": 1},
    kind="change",
    intent='Write a {stars}-star review of the {product} with the summary "{title}" and the '
    'review text "{text}"',
    sample=sample_review,
    evaluation=eval_review,
    user=SHOPPER,
    difficulty="6-9",
)
def expert_review(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_product(obs, p["product"])
    stars = int(p["stars"])
    box, obs = yield from seek(obs, "combobox", "Rating", "The review form is further down.")
    obs = yield select(box, RATING_WORDS[stars], f"The review gives {stars} stars.")
    box, obs = yield from seek(obs, "textbox", "Summary", "I look for the Summary field.", True)
    obs = yield type_text(box, p["title"], "The summary (title) of the review goes here.")
    box, obs = yield from seek(obs, "textbox", "Review", "I look for the Review field.", True)
    obs = yield type_text(box, p["text"], "I type the review text.")
    button, obs = yield from seek(obs, "button", "Submit Review", "I look for Submit Review.")
    obs = yield click(button, "Rating, summary and text are filled in; I submit the review.")
    if "submitted your review" not in obs.text:
        raise ExpertError(f"expert: the review was not accepted on {obs.url}")
    yield answer("done", "The store says my review was submitted for moderation.")


# --------------------------------------------------------------------------------------------
# 111 change: update my default address and phone
# --------------------------------------------------------------------------------------------


def sample_address(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    cust = _customer(conn)
    addr = rand_address(rng)
    phone = rand_phone(rng)
    if addr["street"] == cust["street"] or addr["city"] == cust["city"]:
        return None
    return {
        "street": addr["street"],
        "city": addr["city"],
        "region": addr["region"],
        "postcode": addr["postcode"],
        "phone": phone,
        "_cust": cust["id"],
    }


def eval_address(p: Params) -> dict[str, Any]:
    checks = []
    for col in ("street", "city", "region", "postcode", "phone", "country"):
        checks.append(
            state_check(
                f"SELECT {col} FROM customers WHERE id = ?",
                [p["_cust"]],
                expected=p.get(col, "United States"),
                description=f"my address {col}",
                site="shopping",
            )
        )
    return state_eval(*checks)


ADDRESS_BOXES = (
    ("street", "Street Address"),
    ("city", "City"),
    ("region", "State/Province"),
    ("postcode", "Zip/Postal Code"),
    ("phone", "Phone Number"),
)


def _fill(obs: Observation, label: str, value: str, why: str) -> Sub:
    box, obs = yield from seek(obs, "textbox", label, f"I look for the {label} field.", True)
    if box.value == value:
        return obs
    obs = yield type_text(box, value, why)
    return obs


@TEMPLATES.template(
    id=111,
    name="shopping.update_address",
    writes={"shopping.customers": 1},
    kind="change",
    intent="Change my default address to {street}, {city}, {region} {postcode} (same "
    "country) and my phone number to {phone}.",
    sample=sample_address,
    evaluation=eval_address,
    user=SHOPPER,
    difficulty="6-9",
)
def expert_address(p: Params, obs: Observation) -> Expert:
    obs = yield from _go_account(obs, "The default address is managed in My Account.")
    link = find(obs, "link", "Address Book", exact=True)
    obs = yield click(link, "The Address Book holds my default address; I open it.")
    for key, label in ADDRESS_BOXES:
        obs = yield from _fill(obs, label, p[key], f"I set {label} to '{p[key]}'.")
    button, obs = yield from seek(obs, "button", "Save Address", "I look for Save Address.")
    obs = yield click(button, "All new address fields are filled in; I save the address.")
    if "saved the address" not in obs.text:
        raise ExpertError(f"expert: the address was not saved on {obs.url}")
    yield answer("done", "The account page confirms the new address was saved.")


# --------------------------------------------------------------------------------------------
# 112 change: buy a product and ship it to a given address (full checkout)
# --------------------------------------------------------------------------------------------


def sample_checkout(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = pick_product(
        conn,
        rng,
        "p.stock_qty >= 3 AND EXISTS (SELECT 1 FROM product_options o WHERE o.product_id = p.id "
        "AND o.kind = 'color') AND NOT EXISTS (SELECT 1 FROM product_options o "
        "WHERE o.product_id = p.id AND o.kind = 'size')",
    )
    if p is None:
        return None
    color = rng.choice(_options(conn, p["id"], "color"))
    cust = _customer(conn)
    addr = rand_address(rng)
    if addr["street"] == cust["street"]:
        return None
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    return {
        "product": p["name"],
        "options": f"color {color}",
        "qty": rng.choice((1, 1, 2)),
        "first_name": first,
        "last_name": last,
        "street": addr["street"],
        "city": addr["city"],
        "region": addr["region"],
        "postcode": addr["postcode"],
        "phone": rand_phone(rng),
        "_id": p["id"],
        "_color": color,
        "_cust": cust["id"],
        "_after": _max_order_id(conn),
    }


def eval_checkout(p: Params) -> dict[str, Any]:
    new = "FROM orders WHERE customer_id = ? AND id > ?"
    args = [p["_cust"], p["_after"]]
    checks: list[dict[str, Any]] = [
        state_check(
            f"SELECT id {new}",
            args,
            row_count=1,
            description="exactly one new order",
            site="shopping",
        ),
        state_check(
            f"SELECT ship_name {new}",
            args,
            expected=f"{p['first_name']} {p['last_name']}",
            description="ship-to name",
            site="shopping",
        ),
    ]
    for col in ("street", "city", "region", "postcode", "phone"):
        checks.append(
            state_check(
                f"SELECT ship_{col} {new}",
                args,
                expected=p[col],
                description=f"ship-to {col}",
                site="shopping",
            )
        )
    checks += [
        state_check(
            "SELECT group_concat(oi.product_id || ':' || oi.color || ':' || oi.qty) "
            "FROM order_items oi JOIN orders o ON o.id = oi.order_id "
            "WHERE o.customer_id = ? AND o.id > ?",
            args,
            expected=f"{p['_id']}:{p['_color']}:{p['qty']}",
            description="the order holds only the product, in its color and quantity",
            site="shopping",
        ),
    ]
    return state_eval(*checks)


CHECKOUT_BOXES = (
    ("first_name", "First Name"),
    ("last_name", "Last Name"),
    *ADDRESS_BOXES,
)


@TEMPLATES.template(
    id=112,
    name="shopping.checkout_ship_to",
    writes={"shopping.order_items": 1, "shopping.orders": 1, "shopping.products": 1},
    kind="change",
    intent="Buy {qty} of the {product} ({options}) and have the order shipped to "
    "{first_name} {last_name}, {street}, {city}, {region} {postcode}, United States, "
    "phone {phone}.",
    sample=sample_checkout,
    evaluation=eval_checkout,
    user=SHOPPER,
    difficulty="10+",
)
def expert_checkout(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_product(obs, p["product"])
    obs = yield from _add_current_product(obs, p)
    cart = find(obs, "link", "My Cart")
    obs = yield click(cart, "The product is in the cart; I open the cart to check out.")
    link, obs = yield from seek(obs, "link", "Proceed to Checkout", "I look for checkout.")
    obs = yield click(link, "The cart holds only this product; I proceed to checkout.")
    for key, label in CHECKOUT_BOXES:
        obs = yield from _fill(obs, label, p[key], f"The shipping {label} is '{p[key]}'.")
    country = find(obs, "textbox", "Country", exact=True)
    if country.value != "United States":
        obs = yield type_text(country, "United States", "The address is in the United States.")
    button, obs = yield from seek(obs, "button", "Place Order", "I look for Place Order.")
    obs = yield click(button, "The shipping address is complete; I place the order.")
    number = grab(obs, r"Your order number is:\s*(?:\[\d+\] link \")?(\d{9})", "order number")
    yield answer(number, f"The order was placed; its number is {number}.")


# --------------------------------------------------------------------------------------------
# 113 change: change my account email
# --------------------------------------------------------------------------------------------


def sample_email(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    cust = _customer(conn)
    local = rng.choice(
        (
            f"{cust['first_name']}.{cust['last_name']}{rng.randint(1, 99)}",
            f"{cust['first_name'][0]}{cust['last_name']}{rng.randint(1, 99)}",
            f"{cust['first_name']}{rng.randint(100, 999)}",
        )
    ).lower()
    domain = rng.choice(("gmail.com", "outlook.com", "proton.me", "fastmail.com", "yahoo.com"))
    email = f"{local}@{domain}"
    if conn.execute("SELECT 1 FROM users WHERE lower(email) = ?", (email,)).fetchone():
        return None
    return {"email": email, "_cust": cust["id"], "_user": cust["user_id"]}


def eval_email(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT email FROM customers WHERE id = ?",
            [p["_cust"]],
            expected=p["email"],
            description="the customer's email",
            site="shopping",
        ),
        state_check(
            "SELECT email FROM users WHERE id = ?",
            [p["_user"]],
            expected=p["email"],
            description="the account's login email",
            site="shopping",
        ),
    )


@TEMPLATES.template(
    id=113,
    name="shopping.change_email",
    writes={"shopping.customers": 1, "shopping.users": 1},
    kind="change",
    intent="Change the email address of my account to {email}.",
    sample=sample_email,
    evaluation=eval_email,
    user=SHOPPER,
    difficulty="3-5",
)
def expert_email(p: Params, obs: Observation) -> Expert:
    obs = yield from _go_account(obs, "Account details are edited from My Account.")
    link = find(obs, "link", "Account Information", exact=True)
    obs = yield click(link, "The email is part of the Account Information; I open it.")
    box = find(obs, "textbox", "Email", exact=True)
    obs = yield type_text(box, p["email"], f"I replace the email with {p['email']}.")
    button = find(obs, "button", "Save", exact=True)
    obs = yield click(button, "I save the account information.")
    if "saved the account information" not in obs.text:
        raise ExpertError(f"expert: the email was not saved on {obs.url}")
    yield answer("done", f"The account now shows the email {p['email']}.")


# --------------------------------------------------------------------------------------------
# 114 change: create a customer account (starts signed out)
# --------------------------------------------------------------------------------------------

PASSWORD_WORDS = ("Sunflower", "Harbor", "Maple", "Granite", "Lantern", "Meadow", "Comet")


def sample_register(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
    n = rng.randint(1, 99)
    username = rng.choice((f"{first}.{last}{n}", f"{first[0]}{last}{n}", f"{first}_{n}")).lower()
    domain = rng.choice(("gmail.com", "outlook.com", "proton.me", "fastmail.com", "yahoo.com"))
    email = f"{first}.{last}{n}@{domain}".lower()
    taken = conn.execute(
        "SELECT 1 FROM users WHERE username = ? OR lower(email) = ?", (username, email)
    ).fetchone()
    if taken:
        return None
    password = f"{rng.choice(PASSWORD_WORDS)}.{rng.randint(1000, 9999)}"
    return {
        "first_name": first,
        "last_name": last,
        "email": email,
        "username": username,
        "password": password,
    }


def eval_register(p: Params) -> dict[str, Any]:
    account = "FROM users u JOIN customers c ON c.user_id = u.id WHERE u.username = ?"
    checks = [
        state_check(
            f"SELECT u.id {account}",
            [p["username"]],
            row_count=1,
            description="a customer account with the username",
            site="shopping",
        )
    ]
    for col in ("email", "first_name", "last_name"):
        checks.append(
            state_check(
                f"SELECT c.{col} {account}",
                [p["username"]],
                expected=p[col],
                description=f"the account's {col.replace('_', ' ')}",
                site="shopping",
            )
        )
    return state_eval(*checks)


REGISTER_BOXES = (
    ("first_name", "First Name"),
    ("last_name", "Last Name"),
    ("email", "Email"),
    ("username", "Username"),
    ("password", "Password"),
    ("password", "Confirm Password"),
)


@TEMPLATES.template(
    id=114,
    name="shopping.register_account",
    writes={"shopping.customers": 1, "shopping.users": 1},
    kind="change",
    intent="Create a new customer account for {first_name} {last_name} with the email "
    "{email}, the username {username} and the password {password}.",
    sample=sample_register,
    evaluation=eval_register,
    difficulty="6-9",
)
def expert_register(p: Params, obs: Observation) -> Expert:
    link = find(obs, "link", "Create an Account", exact=True)
    obs = yield click(link, "I am not signed in; the Create an Account link opens the form.")
    for key, label in REGISTER_BOXES:
        box = find(obs, "textbox", label, exact=True)
        obs = yield type_text(box, p[key], f"I fill {label} with the value from the task.")
    button = find(obs, "button", "Create an Account", exact=True)
    obs = yield click(button, "Every field is filled in; I create the account.")
    if "Thank you for registering" not in obs.text:
        raise ExpertError(f"expert: the account was not created on {obs.url}")
    yield answer("done", f"The store welcomes the new customer {p['username']}.")


# --------------------------------------------------------------------------------------------
# 150 held out, info: which of two products is rated higher
# --------------------------------------------------------------------------------------------


def sample_compare(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    leaf = rng.choice(_leaves(conn))
    rated = [
        r
        for r in _products(conn, "p.category_id = ?", (leaf["id"],))
        if r["review_count"] > 0 and _findable(conn, r)
    ]
    if len(rated) < 2:
        return None
    a, b = rng.sample(rated, 2)
    ra, rb = round(a["rating"], 1), round(b["rating"], 1)
    if abs(ra - rb) < 0.25:  # a clear difference in the ratings the site displays
        return None
    return {"a": a["name"], "b": b["name"], "_answer": a["name"] if ra > rb else b["name"]}


def _listed_rating(obs: Observation, product: str) -> Sub:
    box = find(obs, "textbox", "Search")
    obs = yield search(box, product, f"I search for '{product}' to see its rating.")
    link, obs = yield from seek(obs, "link", product, "I look for it in the results.", True)
    m = re.search(r"Rating ([\d.]+) out of 5", line_after(obs, link))
    if not m:
        raise ExpertError(f"expert: no rating for {product} on {obs.url}")
    return float(m.group(1)), obs


@TEMPLATES.template(
    id=150,
    name="shopping.compare_ratings",
    kind="info",
    intent="Which has the higher average customer rating: the {a} or the {b}? Answer with "
    "the exact product name.",
    sample=sample_compare,
    heldout=True,
    difficulty="3-5",
)
def expert_compare(p: Params, obs: Observation) -> Expert:
    ra, obs = yield from _listed_rating(obs, p["a"])
    rb, obs = yield from _listed_rating(obs, p["b"])
    best = p["a"] if ra > rb else p["b"]
    yield answer(best, f"'{p['a']}' is rated {ra} and '{p['b']}' {rb}; '{best}' is higher.")


# --------------------------------------------------------------------------------------------
# 151 held out, nav: a leaf category filtered by color and price range
# --------------------------------------------------------------------------------------------


def _bucket_phrase(lo: int, hi: int | None) -> str:
    if lo == 0:
        return f"under ${hi:,.2f}"
    if hi is None:
        return f"at ${lo:,.2f} or more"
    return f"between ${lo:,.2f} and ${hi - 0.01:,.2f}"


def _bucket_label(phrase: str) -> str:
    """The price facet's label for an intent's price phrase."""
    amounts = [float(x.replace(",", "")) for x in re.findall(r"\$([\d,]+\.\d\d)", phrase)]
    if phrase.startswith("under"):
        return f"$0.00 - ${amounts[0] - 0.01:,.2f}"
    if phrase.endswith("or more"):
        return f"${amounts[0]:,.2f} and above"
    return f"${amounts[0]:,.2f} - ${amounts[1]:,.2f}"


def sample_filtered(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    leaf = rng.choice(_leaves(conn))
    rows = conn.execute(
        "SELECT DISTINCT o.value FROM product_options o JOIN products p ON p.id = o.product_id "
        "WHERE p.category_id = ? AND p.status = 'enabled' AND o.kind = 'color' ORDER BY o.value",
        (leaf["id"],),
    ).fetchall()
    if not rows:
        return None
    color = rng.choice([r[0] for r in rows])
    lo, hi = rng.choice(PRICE_BUCKETS)
    n = conn.execute(
        "SELECT COUNT(DISTINCT p.id) FROM products p JOIN product_options o "
        "ON o.product_id = p.id AND o.kind = 'color' AND o.value = ? WHERE p.category_id = ? "
        "AND p.status = 'enabled' AND p.price >= ? AND p.price < ?",
        (color, leaf["id"], lo, hi if hi is not None else 1e12),
    ).fetchone()[0]
    if n == 0:
        return None
    return {
        "color": color.lower(),
        "leaf": leaf["name"],
        "top": leaf["top"],
        "price": _bucket_phrase(lo, hi),
        "_path": leaf["path"],
        "_price": f"{lo}-{hi if hi is not None else ''}",
    }


def eval_filtered(p: Params) -> dict[str, Any]:
    return url_eval(f"__SHOPPING__/category/{p['_path']}?color={p['color']}&price={p['_price']}")


@TEMPLATES.template(
    id=151,
    name="shopping.category_filter_color_price",
    kind="nav",
    intent="Show me the {color} products of the {leaf} category (under {top}) priced {price}.",
    sample=sample_filtered,
    evaluation=eval_filtered,
    heldout=True,
    difficulty="3-5",
)
def expert_filtered(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_leaf(obs, p["top"], p["leaf"])
    color = find(obs, "link", p["color"], exact=True)
    obs = yield click(color, f"The Color filter lists '{color.name}'; I filter by it.")
    label = _bucket_label(p["price"])
    price = find(obs, "link", label, exact=True)
    obs = yield click(price, f"Prices {p['price']} are the '{label}' range; I filter by it.")
    yield answer("done", f"The page lists the {p['color']} {p['leaf']} products {p['price']}.")


# --------------------------------------------------------------------------------------------
# 152 held out, change: wish-list the cheapest / most expensive product of a category
# --------------------------------------------------------------------------------------------


def sample_wish_extreme(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    leaf = rng.choice(_leaves(conn))
    which = rng.choice(sorted(EXTREMES))
    best = _extreme(conn, leaf["id"], which)
    cust = _customer(conn)
    if best is None:
        return None
    wished = conn.execute(
        "SELECT product_id FROM wishlist_items WHERE customer_id = ?", (cust["id"],)
    ).fetchall()
    if best["id"] in {r[0] for r in wished}:
        return None
    return {
        "which": which,
        "leaf": leaf["name"],
        "top": leaf["top"],
        "_id": best["id"],
        "_cust": cust["id"],
        "_count": len(wished) + 1,
    }


@TEMPLATES.template(
    id=152,
    name="shopping.wishlist_extreme_in_category",
    writes={"shopping.wishlist_items": 1},
    kind="change",
    intent="Add the {which} product of the {leaf} category (under {top}) to my wish list.",
    sample=sample_wish_extreme,
    evaluation=eval_wishlist,
    user=SHOPPER,
    heldout=True,
    difficulty="6-9",
)
def expert_wish_extreme(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_leaf(obs, p["top"], p["leaf"])
    option = EXTREMES[p["which"]]
    obs = yield from _sort_listing(
        obs, option, f"Sorting by '{option}' puts the {p['which']} product first."
    )
    first = _first_listed(obs)
    obs = yield click(first, f"The {p['which']} product is '{first.name}'; I open its page.")
    obs = yield from _wish_current(obs, first.name)
    yield answer("done", f"'{first.name}' is now in my wish list.")
