"""The admin panel: access control, grids, edits that the shop sees (shared backend)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from webagent_r1.sites import RunningSites

Client = Callable[..., httpx.Client]


def test_admin_requires_an_admin(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    with client("shopping_admin", iid) as anon:
        r = anon.get("/orders")
        assert r.url.path == "/login" and "Please sign in" in r.text
        r = anon.post("/login", data={"username": "emma.lopez", "password": "Password.123"})
        assert "not allowed to access the Admin Panel" in r.text
        r = anon.post("/login", data={"username": "admin", "password": "wrong"})
        assert "sign-in was incorrect" in r.text
        r = anon.post(
            "/login", data={"username": "admin", "password": "admin1234", "next": "/orders"}
        )
        assert r.url.path == "/orders" and "records found" in r.text
    with client("shopping_admin", iid, "emma.lopez") as customer:
        for path in ("/", "/orders", "/products/1", "/reports/sales"):
            r = customer.get(path)
            assert r.status_code == 403 and "not an administrator" in r.text
        assert customer.post("/products/1", data={"price": "1"}).status_code == 403
    sites.delete_instance(iid)


def test_price_edit_shows_in_shop(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    other = sites.create_instance()
    with sites.connect("shopping", iid) as db:
        pid = db.execute("SELECT MIN(id) FROM products WHERE status = 'enabled'").fetchone()[0]
    with client("shopping_admin", iid, "admin") as admin:
        form = admin.get(f"/products/{pid}")
        assert form.status_code == 200
        db = sites.connect("shopping_admin", iid)
        p = db.execute("SELECT * FROM products WHERE id = ?", (pid,)).fetchone()
        r = admin.post(
            f"/products/{pid}",
            data={
                "name": p["name"],
                "sku": p["sku"],
                "price": "1234.56",
                "stock_qty": "42",
                "status": "enabled",
                "description": p["description"],
            },
        )
        assert "You saved the product." in r.text
        db.close()
    with client("shopping", iid) as shop:
        assert "$1,234.56" in shop.get(f"/product/{pid}").text
    with client("shopping", other) as shop:
        assert "$1,234.56" not in shop.get(f"/product/{pid}").text
    with client("shopping_admin", iid, "admin") as admin:
        admin.post(
            f"/products/{pid}",
            data={
                "name": p["name"],
                "sku": p["sku"],
                "price": "10",
                "stock_qty": "1",
                "status": "disabled",
                "description": "",
            },
        )
    with client("shopping", iid) as shop:
        assert shop.get(f"/product/{pid}").status_code == 404  # disabled products are hidden
    sites.delete_instance(iid)
    sites.delete_instance(other)


def test_order_status_and_review_moderation(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    db = sites.connect("shopping_admin", iid)
    oid = db.execute("SELECT id FROM orders WHERE status = 'pending' LIMIT 1").fetchone()[0]
    rid, pid = db.execute(
        "SELECT r.id, r.product_id FROM reviews r JOIN products p ON p.id = r.product_id "
        "WHERE r.status = 'pending' AND p.status = 'enabled' LIMIT 1"
    ).fetchone()
    with client("shopping_admin", iid, "admin") as admin:
        r = admin.get("/orders", params={"status": "pending"})
        assert "Pending" in r.text and "Complete</td>" not in r.text
        r = admin.post(f"/orders/{oid}/status", data={"status": "shipped", "comment": "UPS"})
        assert "was updated to shipped" in r.text and "UPS" in r.text
        r = admin.get("/reviews", params={"status": "pending"})
        assert f"/reviews/{rid}/approve" in r.text
        r = admin.post(f"/reviews/{rid}/approve", data={"return_to": "/reviews?status=pending"})
        assert f"Review #{rid} was approved." in r.text
    assert db.execute("SELECT status FROM orders WHERE id = ?", (oid,)).fetchone()[0] == "shipped"
    assert db.execute("SELECT status FROM reviews WHERE id = ?", (rid,)).fetchone()[0] == "approved"
    db.close()
    sites.delete_instance(iid)


def test_grids_and_reports(sites: RunningSites, client: Client) -> None:
    with client("shopping_admin", "default", "admin") as admin:
        r = admin.get("/products", params={"q": "mug"})
        assert "Mug" in r.text
        r = admin.get("/customers", params={"q": "emma.lopez"})
        assert "Emma" in r.text and "1 records found" in r.text
        r = admin.get("/customers/1")
        assert "Orders (12)" in r.text
        r = admin.get("/reports/bestsellers", params={"from": "2023-01-01", "to": "2023-12-31"})
        assert r.status_code == 200 and "Order Quantity" in r.text
        r = admin.get(
            "/reports/sales", params={"from": "01/01/2023", "to": "12/31/2023", "period": "month"}
        )
        assert "2023-01" in r.text and "2023-12" in r.text and "2022-12" not in r.text
        r = admin.get("/reports/sales", params={"from": "not a date"})
        assert "Enter dates as YYYY-MM-DD" in r.text
        r = admin.get("/orders", params={"from": "2023-12-01", "to": "2023-12-31"})
        assert "Dec" in r.text and "Nov 30, 2023" not in r.text


def test_new_product_customer_edit_and_review_delete(sites: RunningSites, client: Client) -> None:
    iid = sites.create_instance()
    db = sites.connect("shopping_admin", iid)
    leaf = db.execute("SELECT id FROM categories WHERE path = 'home-and-kitchen/cookware'")
    leaf_id = leaf.fetchone()[0]
    rid = db.execute("SELECT MIN(id) FROM reviews").fetchone()[0]
    with client("shopping_admin", iid, "admin") as admin:
        form = {
            "name": "Hearthly Test Skillet",
            "sku": "TEST-1",
            "price": "abc",
            "stock_qty": "5",
            "status": "enabled",
            "description": "A pan.",
            "category_id": str(leaf_id),
        }
        assert "Enter a price" in admin.post("/products/new", data=form).text
        r = admin.post("/products/new", data={**form, "price": "29.50"})
        assert "You saved the product." in r.text
        pid = int(r.url.path.rsplit("/", 1)[1])
        r = admin.post(
            "/customers/2",
            data={
                "first_name": "Alexander",
                "last_name": "Chen",
                "email": "alex.chen@outlook.com",
                "phone": "(212) 555-0199",
                "street": "5 Elm St",
                "city": "Austin",
                "region": "Texas",
                "postcode": "78701",
                "country": "United States",
            },
        )
        assert "You saved the customer." in r.text and "5 Elm St" in r.text
        r = admin.post(f"/reviews/{rid}/delete")
        assert f"Review #{rid} was deleted." in r.text
    with client("shopping", iid) as shop:
        r = shop.get("/search", params={"q": "test skillet"})
        assert f"/product/{pid}" in r.text and "$29.50" in r.text
    assert db.execute("SELECT city FROM customers WHERE id = 2").fetchone()[0] == "Austin"
    assert db.execute("SELECT COUNT(*) FROM reviews WHERE id = ?", (rid,)).fetchone()[0] == 0
    db.close()
    sites.delete_instance(iid)
