"""Tiny stand-ins for WebArena's sites: their login forms, a few pages, the shop's REST API.

Each ``FakeSite`` is one HTTP server on a free port of 127.0.0.1 serving
``fixtures/<site>/*.html``. Logins work as on the real sites: the form posts the account's
fields, a good account gets a session cookie and a redirect, a bad one the form again with an
error; protected pages redirect to the login form without the cookie.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ADMIN_TOKEN = "tok-4f1c"
LATEST_ORDER = "000000191"


@dataclass(frozen=True)
class LoginForm:
    form_path: str  # GET: the form
    post_path: str  # POST: the credentials
    user_field: str
    pass_field: str
    account: tuple[str, str]
    after: str  # redirect after a good login
    error: str  # the message a bad login shows


LOGINS: dict[str, LoginForm] = {
    "shopping": LoginForm(
        "/customer/account/login/",
        "/customer/account/loginPost/",
        "login[username]",
        "login[password]",
        ("emma.lopez@gmail.com", "Password.123"),
        "/customer/account/",
        "The account sign-in was incorrect or your account is disabled temporarily.",
    ),
    "shopping_admin": LoginForm(
        "/admin",
        "/admin",
        "login[username]",
        "login[password]",
        ("admin", "admin1234"),
        "/admin/admin/dashboard/",
        "The account sign-in was incorrect or your account is disabled temporarily.",
    ),
    "reddit": LoginForm(
        "/login",
        "/login_check",
        "_username",
        "_password",
        ("MarvelsGrantMan136", "test1234"),
        "/",
        "Invalid credentials.",
    ),
    "gitlab": LoginForm(
        "/users/sign_in",
        "/users/sign_in",
        "user[login]",
        "user[password]",
        ("byteblaze", "hello1234"),
        "/",
        "Invalid login or password.",
    ),
}

# site → [(path regex, fixture file, needs login)]
PAGES: dict[str, list[tuple[str, str, bool]]] = {
    "shopping": [
        (r"/customer/account/login/?", "login.html", False),
        (r"/customer/account/?", "account.html", True),
        (r"/sales/order/view/order_id/\d+/?", "order.html", True),
        (r"/contact(/index)?/?", "contact.html", False),
        (r"/catalogsearch/result/(index/)?", "search.html", False),
    ],
    "shopping_admin": [
        (r"/admin/admin/dashboard/?", "dashboard.html", True),
        (r"/admin/catalog/product/edit/id/\d+/?", "product.html", True),
    ],
    "reddit": [
        (r"/", "front.html", False),
        (r"/login", "login.html", False),
        (r"/f/\w+/\d+(/.*)?", "post.html", False),
    ],
    "gitlab": [
        (r"/users/sign_in", "sign_in.html", False),
        (r"/", "dashboard.html", True),
        (r"/[\w-]+/[\w.-]+/-/project_members", "members.html", True),
    ],
    "map": [(r"/(directions)?", "directions.html", False)],
}


@dataclass
class FakeSite:
    """One fake WebArena site on a free local port."""

    site: str
    sessions: set[str] = field(default_factory=set)
    logins: list[str] = field(default_factory=list)
    """User names that logged in, in order."""
    requests: list[str] = field(default_factory=list)
    """``METHOD path`` of every request."""

    def __post_init__(self) -> None:
        handler = type("Handler", (_Handler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def cookie(self) -> str:
        """Session cookie name (cookies ignore ports: each site needs its own name)."""
        return f"wa_{self.site}"

    @property
    def base_url(self) -> str:
        """What the user would put in WA_<SITE> (the admin lives under /admin)."""
        return self.origin + ("/admin" if self.site == "shopping_admin" else "")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeSite

    def log_message(self, format: str, *args: object) -> None:
        pass

    # -- helpers ------------------------------------------------------------------------

    def _logged_in(self) -> bool:
        cookie = self.headers.get("Cookie") or ""
        m = re.search(rf"(?:^|;\s*){self.fake.cookie}=([\w-]+)", cookie)
        return bool(m and m.group(1) in self.fake.sessions)

    def _send(self, status: int, body: str, ctype: str = "text/html; charset=utf-8") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _redirect(self, location: str, cookie: str | None = None) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        if cookie:
            self.send_header("Set-Cookie", f"{self.fake.cookie}={cookie}; Path=/; HttpOnly")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _page(self, name: str, error: str = "") -> None:
        html = (FIXTURES / self.fake.site / name).read_text(encoding="utf-8")
        if error:
            html = html.replace(
                "<!--ERROR-->", f'<div class="message message-error error">{error}</div>'
            )
        auth = (
            '<a href="/user/MarvelsGrantMan136" class="site-nav__link">MarvelsGrantMan136</a>'
            if self._logged_in()
            else '<a href="/login" class="site-nav__link">Log in</a>'
        )
        self._send(200, html.replace("<!--AUTH-->", auth))

    # -- GET ----------------------------------------------------------------------------

    def do_GET(self) -> None:
        site, url = self.fake.site, urlsplit(self.path)
        self.fake.requests.append(f"GET {self.path}")
        if site == "shopping" and url.path.startswith("/rest/"):
            return self._rest_get(url.path, parse_qs(url.query))
        form = LOGINS.get(site)
        if site == "shopping_admin" and url.path.rstrip("/") == "/admin":
            if self._logged_in():
                return self._redirect(form.after)  # type: ignore[union-attr]
            return self._page("login.html")
        for pattern, name, protected in PAGES.get(site, []):
            if re.fullmatch(pattern, url.path):
                if protected and not self._logged_in():
                    return self._redirect(form.form_path)  # type: ignore[union-attr]
                return self._page(name)
        self._send(404, "<!doctype html><title>404</title><h1>Not Found</h1>")

    # -- POST ---------------------------------------------------------------------------

    def do_POST(self) -> None:
        site, url = self.fake.site, urlsplit(self.path)
        self.fake.requests.append(f"POST {self.path}")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
        if site == "shopping" and url.path.startswith("/rest/"):
            return self._rest_token(body)
        form = LOGINS.get(site)
        if form is None or url.path.rstrip("/") != form.post_path.rstrip("/"):
            return self._send(404, "not found")
        fields = {k: v[0] for k, v in parse_qs(body).items()}
        user, password = fields.get(form.user_field), fields.get(form.pass_field)
        if (user, password) != form.account:
            page = "login.html" if site != "gitlab" else "sign_in.html"
            return self._page(page, error=form.error)
        token = secrets.token_hex(8)
        self.fake.sessions.add(token)
        self.fake.logins.append(user or "")
        self._redirect(form.after, cookie=token)

    # -- the shop's REST API (Magento 2) ----------------------------------------------------

    def _rest_token(self, body: str) -> None:
        if self.path != "/rest/default/V1/integration/admin/token":
            return self._send(404, '{"message": "Request does not match any route."}')
        creds = json.loads(body or "{}")
        if (creds.get("username"), creds.get("password")) != ("admin", "admin1234"):
            return self._send(401, '{"message": "The account sign-in was incorrect."}')
        self._send(200, json.dumps(ADMIN_TOKEN), "application/json")

    def _rest_get(self, path: str, query: dict[str, list[str]]) -> None:
        if self.headers.get("Authorization") != f"Bearer {ADMIN_TOKEN}":
            return self._send(401, '{"message": "not authorized"}', "application/json")
        if path == "/rest/V1/orders":
            want = {
                "searchCriteria[sortOrders][0][field]": ["created_at"],
                "searchCriteria[sortOrders][0][direction]": ["DESC"],
                "searchCriteria[pageSize]": ["1"],
            }
            if any(query.get(k) != v for k, v in want.items()):
                return self._send(400, '{"message": "unexpected search criteria"}')
            items = [{"increment_id": LATEST_ORDER, "entity_id": 191}]
            return self._send(200, json.dumps({"items": items}), "application/json")
        m = re.fullmatch(r"/rest/V1/products/([\w-]+)/reviews", path)
        if m:
            reviews = (
                [
                    {"nickname": "Earl", "ratings": [{"rating_name": "Rating", "percent": 40}]},
                    {"nickname": "Jay", "ratings": [{"rating_name": "Rating", "percent": 80}]},
                ]
                if m.group(1) == "B07PQ5P2VF"
                else []
            )
            return self._send(200, json.dumps(reviews), "application/json")
        self._send(404, '{"message": "Request does not match any route."}', "application/json")
