"""The shop: login, browsing, cart, checkout, reviews, isolation between instances."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from webagent_r1.sites import RunningSites

Client = Callable[..., httpx.Client]


def _add_to_cart(c, db, product_id: int, qty: int = 1):  # noqa: ANN001, ANN202
    data = {"product_id": str(product_id), "qty": str(qty)}
    for kind, value in db.execute(
        "SELECT kind, value FROM product_options WHERE product_id = ? ORDER BY position DESC",
        (product_id,),
    ):
        data[kind] = value
    return c.post("/cart/add", data=data)


def test_login_and_wrong_password(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    with client("shopping", iid) as c:
        r = c.post("/login", data={"username": "emma.lopez", "password": "nope"})
        assert "sign-in was incorrect" in r.text
        assert "shopping_session" not in c.cookies
        r = c.post("/login", data={"username": "emma.lopez", "password": "Password.123"})
        assert r.url.path == "/account" and "Welcome, Emma Lopez!" in r.text
        r = c.get("/logout")
        assert "Sign In" in r.text and "Welcome, Emma" not in r.text
        r = c.get("/account/orders")
        assert r.url.path == "/login"  # account pages need a login
        # the admin is not a customer of the shop
        r = c.post("/login", data={"username": "admin", "password": "admin1234"})
        assert "not a customer account" in r.text
    sites.delete_instance(iid)


def test_catalogue_pages(sites: RunningSites, client: Client) -> None:
    with client("shopping", "default") as c:
        home = c.get("/")
        assert home.status_code == 200 and "Featured Products" in home.text
        r = c.get("/category/electronics/headphones", params={"sort": "price_asc"})
        assert r.status_code == 200 and "Headphones" in r.text
        prices = [
            float(p.replace(",", ""))
            for p in __import__("re").findall(r'class="price">\$([\d,.]+)<', r.text)
        ]
        assert prices == sorted(prices) and prices
        r = c.get("/category/electronics")
        assert "Page 1 of" in r.text  # a top category spans several pages
        r2 = c.get("/category/electronics", params={"p": 2})
        assert r2.status_code == 200 and r2.text != r.text
        r = c.get("/search", params={"q": "coffee mug", "color": "red"})
        assert "Coffee Mug" in r.text and "Color: Red" in r.text
        r = c.get("/search", params={"q": "zzzzqqq"})
        assert "returned no results" in r.text
        assert c.get("/category/nope").status_code == 404
        assert c.get("/product/999999").status_code == 404


def test_instances_are_isolated(sites: RunningSites, client: Client) -> None:
    a, b = sites.create_instance(), sites.create_instance()
    db_a = sites.connect("shopping", a)
    pid = db_a.execute(
        "SELECT id FROM products WHERE status = 'enabled' AND stock_qty > 5 LIMIT 1"
    ).fetchone()[0]
    with client("shopping", a, "emma.lopez") as ca:
        r = _add_to_cart(ca, db_a, pid, 2)
        assert "You added" in r.text
        r = ca.post(
            f"/product/{pid}/review",
            data={"rating": "4", "nickname": "Em", "title": "Only in A", "body": "Nice."},
        )
        assert "submitted your review" in r.text
        assert "My Cart (2)" in ca.get("/").text
    with client("shopping", b, "emma.lopez") as cb:
        assert "My Cart (0)" in cb.get("/").text
    db_b = sites.connect("shopping", b)
    assert db_a.execute("SELECT COUNT(*) FROM reviews WHERE title = 'Only in A'").fetchone()[0]
    assert not db_b.execute("SELECT COUNT(*) FROM reviews WHERE title = 'Only in A'").fetchone()[0]
    assert not db_b.execute("SELECT COUNT(*) FROM cart_items").fetchone()[0]
    db_a.close()
    db_b.close()
    sites.delete_instance(a)
    sites.delete_instance(b)


def test_checkout_places_an_order(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    db = sites.connect("shopping", iid)
    pid, stock = db.execute(
        "SELECT id, stock_qty FROM products WHERE status = 'enabled' AND stock_qty > 5 LIMIT 1"
    ).fetchone()
    n_orders = db.execute("SELECT COUNT(*) FROM orders").fetchone()[0]
    with client("shopping", iid) as c:
        _add_to_cart(c, db, pid, 2)  # as a guest; the cart follows the login
        r = c.get("/checkout")
        assert r.url.path == "/login"
        r = c.post(
            "/login",
            data={"username": "alex.chen", "password": "Password.123", "next": "/checkout"},
        )
        assert r.url.path == "/checkout" and "Place Order" in r.text
        address = {
            "first_name": "Alex",
            "last_name": "Chen",
            "street": "1 Main St",
            "city": "Boston",
            "region": "Massachusetts",
            "postcode": "02110",
            "country": "United States",
            "phone": "(617) 555-0100",
        }
        r = c.post("/checkout", data={**address, "city": ""})
        assert "required fields: City" in r.text
        r = c.post("/checkout", data=address)
        assert "Thank you for your purchase!" in r.text
        order = db.execute("SELECT * FROM orders ORDER BY id DESC LIMIT 1").fetchone()
        assert db.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == n_orders + 1
        assert order["status"] == "pending" and order["ship_city"] == "Boston"
        assert order["total_qty"] == 2 and order["shipping_amount"] == 10.0
        assert (
            db.execute("SELECT stock_qty FROM products WHERE id = ?", (pid,)).fetchone()[0]
            == stock - 2
        )
        assert "My Cart (0)" in r.text
        r = c.get(f"/account/orders/{order['id']}")
        assert order["increment_id"] in r.text and "Pending" in r.text
    db.close()
    sites.delete_instance(iid)


def test_review_text_is_escaped(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    attack = '<script>alert("x")</script>'
    with sites.connect("shopping", iid) as db:
        pid = db.execute("SELECT MIN(id) FROM products WHERE status = 'enabled'").fetchone()[0]
    with client("shopping", iid, "emma.lopez") as c:
        c.post(
            f"/product/{pid}/review",
            data={"rating": "5", "nickname": attack, "title": attack, "body": attack},
        )
    db = sites.connect("shopping", iid)
    rid = db.execute("SELECT id FROM reviews WHERE title = ?", (attack,)).fetchone()[0]
    db.close()
    with client("shopping_admin", iid, "admin") as admin:
        for path in (f"/reviews/{rid}", "/reviews?status=pending"):
            page = admin.get(path).text
            assert attack not in page and "&lt;script&gt;" in page
        admin.post(f"/reviews/{rid}/approve")
    with client("shopping", iid) as c:
        page = c.get(f"/product/{pid}").text
        assert attack not in page and "&lt;script&gt;alert" in page
    sites.delete_instance(iid)


def test_wishlist_and_account_edit(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    with sites.connect("shopping", iid) as db:
        pid = db.execute(
            "SELECT id FROM products WHERE status = 'enabled' AND id NOT IN "
            "(SELECT product_id FROM wishlist_items) LIMIT 1"
        ).fetchone()[0]
    with client("shopping", iid, "olivia.brown") as c:
        r = c.post("/wishlist/add", data={"product_id": str(pid)})
        assert "added to your Wish List" in r.text
        r = c.post(
            "/account/edit",
            data={"first_name": "Liv", "last_name": "Brown", "email": "liv@example.com"},
        )
        assert "You saved the account information." in r.text and "Liv Brown" in r.text
        assert c.get("/wishlist").text.count("Remove item") >= 1
    db = sites.connect("shopping", iid)
    assert (
        db.execute("SELECT email FROM customers WHERE first_name = 'Liv'").fetchone()[0]
        == "liv@example.com"
    )
    db.close()
    sites.delete_instance(iid)


def test_pages_are_compact(
    sites: RunningSites, client: Client, visible_text: Callable[[str], str]
) -> None:
    sizes = {}
    with client("shopping", "default", "emma.lopez") as c:
        for name, path in [
            ("home", "/"),
            ("category", "/category/home-and-kitchen/bedding"),
            ("product", "/product/20"),
            ("search", "/search?q=tea"),
            ("orders", "/account/orders"),
        ]:
            sizes[name] = len(visible_text(c.get(path).text))
    with client("shopping_admin", "default", "admin") as c:
        for name, path in [
            ("admin_orders", "/orders"),
            ("admin_products", "/products"),
            ("admin_customers", "/customers"),
            ("admin_reviews", "/reviews"),
        ]:
            sizes[name] = len(visible_text(c.get(path).text))
    print("\nvisible text chars:", sizes)
    assert all(300 < n < 4500 for n in sizes.values()), sizes


def test_register_cart_update_and_remove(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    db = sites.connect("shopping", iid)
    pid = db.execute(
        "SELECT id FROM products WHERE status = 'enabled' AND stock_qty > 20 AND id NOT IN "
        "(SELECT product_id FROM product_options) LIMIT 1"
    ).fetchone()[0]
    with client("shopping", iid) as c:
        form = {
            "first_name": "Zoe",
            "last_name": "Park",
            "email": "zoe@example.com",
            "username": "zoe.park",
            "password": "secret123",
            "password_confirm": "nope",
        }
        assert "passwords match" in c.post("/register", data=form).text
        r = c.post("/register", data={**form, "password_confirm": "secret123"})
        assert "Thank you for registering" in r.text and "Welcome, Zoe Park!" in r.text
        c.post("/cart/add", data={"product_id": str(pid), "qty": "3"})
        item = db.execute("SELECT id, qty FROM cart_items").fetchone()
        assert item["qty"] == 3
        r = c.post("/cart/update", data={f"qty_{item['id']}": "5"})
        assert "was updated" in r.text
        assert db.execute("SELECT qty FROM cart_items").fetchone()[0] == 5
        r = c.post(f"/cart/remove/{item['id']}")
        assert "You removed" in r.text and "no items in your shopping cart" in r.text
        r = c.post("/cart/add", data={"product_id": str(pid), "qty": "100000"})
        assert "not available" in r.text
    db.close()
    sites.delete_instance(iid)
