"""The embedded-site framework: sites, shared database backends, isolated instances, sessions.

A :class:`Backend` is a seeded SQLite database (schema + deterministic seed + version). Its
pristine copy is built once and cached under ``$WEBAGENT_R1_HOME/sites/<name>-<version>.sqlite``.
A :class:`Site` is a Starlette web app over a backend; several sites may share one backend (the
shop and its admin panel edit the same catalogue, as WebArena's Magento does).

Every episode runs against its own *instance*: a file copy of the pristine database, chosen by
the ``wa_instance`` cookie (cookies on 127.0.0.1 are shared across ports, so one cookie selects
the instance on every site). A request without an instance cookie uses the ``default``
instance, which is what a human running ``webagent-r1 sites serve`` sees; a cookie naming an
unknown (e.g. deleted) instance gets an error page, so a stale episode never writes into
``default``.

The sites never read the wall clock. Each instance has its own clock (:func:`now_str`): the
first request that writes is stamped a minute after :data:`SITE_CLOCK_START`, every later one
a minute after the last, so what an episode sees depends only on what it did, never on when
it ran.

Page handlers run in worker threads (the request body is read on the event loop first), so a
slow page keeps only itself waiting, not the pages of every site served on that loop.

Control endpoints under ``/__webagent/`` (create/delete instances, create login sessions) need
the ``X-WebAgent-Control`` header holding the server's random token, so the browsing agent
cannot call them. In-process users (the env, evaluators) call :class:`InstanceStore` directly
through :class:`webagent_r1.sites.server.RunningSites`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import html as _html
import json
import math
import os
import random
import re
import secrets
import shutil
import sqlite3
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, overload

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from webagent_r1.config import home_dir
from webagent_r1.inputs import MAX_DEPTH, json_depth_ok
from webagent_r1.sites.seed_utils import check_password, fmt_dt

INSTANCE_COOKIE = "wa_instance"
"""Cookie that selects the instance (shared by all sites on one host)."""
CONTROL_HEADER = "X-WebAgent-Control"
"""Header carrying the control token on ``/__webagent/`` endpoints."""
DEFAULT_INSTANCE = "default"
"""Instance used by requests without an instance cookie."""
SITES_COOKIE = "wa_sites"
"""Cookie naming a cross-site task's sites (``map,shopping``): every page of those sites
then start with links to the others, since the agent moves between sites only by links."""
SITE_LINKS_KEY = "site_links"
"""Key in ``SiteApp.cache`` of the running sites' ``{name: (title, base URL)}``."""
COMMON_TEMPLATES = Path(__file__).parent / "templates"

_INSTANCE_ID_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")
"""Instance ids (full match): they name files, so no separators and no leading dot."""
SQLITE_INT_MIN, SQLITE_INT_MAX = -(2**63), 2**63 - 1
"""The integers an SQLite INTEGER holds; a bigger Python int makes sqlite3 raise."""
_EMAIL_RE = re.compile(r"[^@\s]++@([^@\s]++)")  # possessive: linear on any input

BASE_SCHEMA = """
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    full_name TEXT NOT NULL,
    is_admin INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL
);
CREATE TABLE sessions (
    token TEXT PRIMARY KEY,
    site TEXT NOT NULL,
    user_id INTEGER REFERENCES users(id),
    created_at TEXT NOT NULL
);
CREATE TABLE site_clock (ticks INTEGER NOT NULL);
INSERT INTO site_clock VALUES (0);
"""
"""Tables every backend has: accounts (``users``), server-side login sessions, and the
instance's clock (``site_clock``: how many times :func:`now_str` has advanced it)."""
SITE_CLOCK_START = datetime(2024, 2, 1, 9, 0)
"""An instance's time before its first stamped write: after every seeded date (the latest is a
forum comment of 2024-01-05), so a new post, comment or order is the newest on its page."""
SITE_CLOCK_STEP = timedelta(minutes=1)
"""How far an instance's clock moves per request that writes (a minute: the pages show times
to the minute, so successive writes read in order)."""


# --------------------------------------------------------------------------------------------
# Backends and sites
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    """A seeded SQLite database that one or more sites serve.

    Attributes:
        name: Database name; the pristine file is ``<name>-<version>.sqlite``.
        version: Bump whenever the schema or the seed code changes, so caches are rebuilt.
        create_schema: Creates the backend's tables (the :data:`BASE_SCHEMA` tables exist).
        seed: Fills the tables; must draw all randomness from the given ``random.Random``.
        seed_value: Seed of that ``random.Random``.
    """

    name: str
    version: str
    create_schema: Callable[[sqlite3.Connection], None]
    seed: Callable[[sqlite3.Connection, random.Random], None]
    seed_value: int = 0

    def pristine_path(self, home: Path | None = None) -> Path:
        """Where the pristine database of this backend is cached."""
        return (home or home_dir()) / "sites" / f"{self.name}-{self.version}.sqlite"

    def build(self, path: Path) -> None:
        """Create a fresh database at ``path`` (overwritten) with schema and seeded data."""
        path.unlink(missing_ok=True)
        conn = sqlite3.connect(path)
        try:
            # Bulk load without a journal; the file only becomes visible after the rename in
            # ensure_pristine, so a crash mid-build leaves no half-built cache behind.
            conn.execute("PRAGMA journal_mode=OFF")
            conn.execute("PRAGMA synchronous=OFF")
            conn.executescript(BASE_SCHEMA)
            self.create_schema(conn)
            self.seed(conn, random.Random(self.seed_value))
            conn.commit()
            conn.execute("ANALYZE")
            conn.commit()
            conn.execute("VACUUM")
            # Rollback journal (not WAL): a single-file database copies with one file copy.
            conn.execute("PRAGMA journal_mode=DELETE")
        finally:
            conn.close()

    def ensure_pristine(self, home: Path | None = None) -> Path:
        """Return the pristine database path, building it (atomically) if missing."""
        path = self.pristine_path(home)
        if path.exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        tmp_path = Path(tmp)
        os.close(fd)
        try:
            self.build(tmp_path)
            tmp_path.replace(path)
        finally:
            tmp_path.unlink(missing_ok=True)
        return path


@dataclass(frozen=True)
class SiteUser:
    """A documented account of a site (seeded into its backend's ``users`` table)."""

    username: str
    password: str
    is_admin: bool = False
    description: str = ""


def source_digest(db_module: str, *sources: str) -> str:
    """The first 8 hex digits of the sha256 of a site's seed sources: the files ``sources``
    beside ``db_module`` (a site's ``db.py`` path, ``__file__``), in order, then the shared
    ``seed_utils.py``. A safety net next to a site's ``SITE_VERSION`` in its backend's
    ``version``: any edit of them also changes the name of the cached pristine database."""
    here = Path(db_module).parent
    h = hashlib.sha256()
    for path in (*(here / name for name in sources), Path(__file__).parent / "seed_utils.py"):
        h.update(path.read_bytes())
    return h.hexdigest()[:8]


@dataclass(frozen=True)
class Site:
    """One embedded web application.

    Attributes:
        name: Registry key and cookie prefix, e.g. ``"shopping"``.
        title: Human-readable name shown in page titles.
        default_port: Port used by ``start_sites`` unless told otherwise (WebArena's).
        backend: The database it serves; sites with the same backend share instances.
        routes: Returns the site's Starlette routes (built with :func:`page`).
        templates_dir: Jinja2 templates of the site; :data:`COMMON_TEMPLATES` is the fallback.
        users: Documented accounts with their passwords (for tasks, docs and tests).
        admin_only: Every page except ``/login`` requires an admin account.
        login_check: Extra check at password login; returns an error message to refuse.
        on_login: Called after a password login with (db, old session token, new token,
            user id), e.g. to move a guest cart to the customer.
        context: Extra template variables for every page (menus, cart counts).
        login_redirect: Where a successful login goes when no ``next`` is given.
    """

    name: str
    title: str
    default_port: int
    backend: Backend
    routes: Callable[[], Sequence[BaseRoute]]
    templates_dir: Path
    users: tuple[SiteUser, ...] = ()
    admin_only: bool = False
    login_check: Callable[[sqlite3.Connection, sqlite3.Row], str | None] | None = None
    on_login: Callable[[sqlite3.Connection, str | None, str, int], None] | None = None
    context: Callable[[Ctx], dict[str, Any]] | None = None
    login_redirect: str = "/"

    @classmethod
    def from_views(
        cls,
        views: ModuleType,
        title: str,
        default_port: int,
        backend: Backend,
        users: tuple[SiteUser, ...],
        **options: Any,
    ) -> Site:
        """The site of the package whose ``views`` module is given: named after the package,
        with the module's ``routes`` and, where it defines them, ``site_context`` (as
        ``context``), ``login_check`` and ``on_login``; its templates in the package's
        ``templates`` folder. ``options``: the other fields (``admin_only``,
        ``login_redirect``)."""
        package = views.__name__.rsplit(".", 1)[0]
        hooks = {"context": "site_context", "login_check": "login_check", "on_login": "on_login"}
        found = {f: getattr(views, n) for f, n in hooks.items() if hasattr(views, n)}
        return cls(
            name=package.rsplit(".", 1)[-1],
            title=title,
            default_port=default_port,
            backend=backend,
            routes=views.routes,
            templates_dir=Path(views.__file__).parent / "templates",
            users=users,
            **found,
            **options,
        )

    @property
    def session_cookie(self) -> str:
        """Name of this site's login-session cookie, e.g. ``shopping_session``."""
        return f"{self.name}_session"

    @property
    def flash_cookie(self) -> str:
        """Name of the one-shot message cookie shown on the next page."""
        return f"{self.name}_flash"


# --------------------------------------------------------------------------------------------
# Instances
# --------------------------------------------------------------------------------------------


class UnknownInstanceError(KeyError):
    """No live instance has this id: never created, ended, or reaped after going idle."""


@dataclass
class _Instance:
    path: Path
    last_used: float


class InstanceStore:
    """Per-episode copies of one backend's pristine database. Thread-safe.

    Args:
        backend: The backend whose instances this store holds.
        pristine: Path of the pristine database (see :meth:`Backend.ensure_pristine`).
        idle_timeout_s: Instances unused for longer are removed by :meth:`reap`.
        root: Directory for instance files; a fresh temp directory when None.
    """

    def __init__(
        self,
        backend: Backend,
        pristine: Path,
        idle_timeout_s: float = 1800.0,
        root: Path | None = None,
    ) -> None:
        self.backend = backend
        self.pristine = pristine
        self.idle_timeout_s = idle_timeout_s
        self._own_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix=f"webagent-{backend.name}-"))
        self._lock = threading.Lock()
        self._instances: dict[str, _Instance] = {}
        self.create(DEFAULT_INSTANCE)

    def create(self, instance_id: str | None = None) -> str:
        """Copy the pristine database into a new instance and return its id.

        An existing id is reused as is (its state is kept), so several sites sharing this
        backend can each be asked to create the same instance.
        """
        if instance_id is None:
            instance_id = secrets.token_hex(8)
        if not isinstance(instance_id, str) or not _INSTANCE_ID_RE.fullmatch(instance_id):
            raise ValueError(
                f"invalid instance id {instance_id!r}: use a string of 1-64 letters, digits, "
                "'_', '.', '-' that does not start with '.'"
            )
        with self._lock:
            inst = self._instances.get(instance_id)
            if inst is not None:
                inst.last_used = time.monotonic()
                return instance_id
            path = self.root / f"{instance_id}.sqlite"
            shutil.copyfile(self.pristine, path)
            self._instances[instance_id] = _Instance(path, time.monotonic())
        return instance_id

    def reset(self, instance_id: str) -> None:
        """Restore an existing instance to the pristine state (one file copy)."""
        with self._lock:
            inst = self._get(instance_id)
            tmp = inst.path.with_suffix(".resetting")
            shutil.copyfile(self.pristine, tmp)
            tmp.replace(inst.path)
            inst.last_used = time.monotonic()

    def delete(self, instance_id: str) -> bool:
        """Remove an instance and its file; returns False if it did not exist."""
        with self._lock:
            inst = self._instances.pop(instance_id, None)
        if inst is None:
            return False
        for p in (inst.path, Path(str(inst.path) + "-journal")):
            p.unlink(missing_ok=True)
        if instance_id == DEFAULT_INSTANCE:  # the fallback instance must always exist
            self.create(DEFAULT_INSTANCE)
        return True

    def path(self, instance_id: str) -> Path:
        """Database file of an instance (raises KeyError naming the live ids if unknown)."""
        with self._lock:
            return self._get(instance_id).path

    def touch(self, instance_id: str) -> bool:
        """Mark an instance as in use now (an episode holding it between requests, so the
        reaper leaves it); returns False if it does not exist."""
        with self._lock:
            inst = self._instances.get(instance_id)
            if inst is not None:
                inst.last_used = time.monotonic()
            return inst is not None

    def exists(self, instance_id: str) -> bool:
        """Whether the instance exists."""
        with self._lock:
            return instance_id in self._instances

    def ids(self) -> list[str]:
        """Ids of the live instances."""
        with self._lock:
            return list(self._instances)

    def resolve(self, instance_id: str | None) -> tuple[str, Path]:
        """The instance a request uses: ``instance_id``, or the default one when None.

        Raises:
            KeyError: ``instance_id`` names no live instance (never replaced by the default:
                a stale episode's writes must not land in the shared instance).
        """
        # Only a request with no cookie browses the default: an empty cookie (a cleared value,
        # a forged one) names no instance.
        instance_id = DEFAULT_INSTANCE if instance_id is None else instance_id
        with self._lock:
            inst = self._get(instance_id)
            inst.last_used = time.monotonic()
            return instance_id, inst.path

    def reap(self, now: float | None = None) -> list[str]:
        """Delete instances idle longer than ``idle_timeout_s`` (never the default one)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            stale = [
                i
                for i, inst in self._instances.items()
                if i != DEFAULT_INSTANCE and now - inst.last_used > self.idle_timeout_s
            ]
        for i in stale:
            self.delete(i)
        return stale

    def close(self) -> None:
        """Delete every instance file (and the temp directory if this store made it)."""
        with self._lock:
            paths = [inst.path for inst in self._instances.values()]
            self._instances.clear()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
        else:
            for p in paths:
                p.unlink(missing_ok=True)

    def _get(self, instance_id: str) -> _Instance:
        inst = self._instances.get(instance_id)
        if inst is None:
            raise UnknownInstanceError(
                f"unknown instance {instance_id!r} of backend {self.backend.name!r}; "
                f"live instances: {sorted(self._instances)}"
            )
        return inst


FIELD_MAX = 255
"""Most characters a one-line form field (a name, an e-mail, an address, a SKU) may hold."""
TEXT_MAX = 5_000
"""Most characters a multi-line form field (a review, a description) may hold."""


def too_long(values: Mapping[str, object], long: Iterable[str] = ()) -> str | None:
    """The form error for the first text field over its cap, or None when all fit.

    Fields named in ``long`` may hold :data:`TEXT_MAX` characters, the others
    :data:`FIELD_MAX`; a form over the cap is refused, never stored (a 1 MB name would be
    shown on every page that lists it).
    """
    long = set(long)
    for key, value in values.items():
        limit = TEXT_MAX if key in long else FIELD_MAX
        if isinstance(value, str) and len(value) > limit:
            label = key.replace("_", " ").capitalize()
            return f"{label} is too long: use at most {limit:,} characters."
    return None


def like_escape(text: str) -> str:
    """``text`` with the LIKE wildcards ``%`` and ``_`` (and ``\\``) escaped, for
    ``LIKE ? ESCAPE '\\'``: a typed ``%`` then matches only a ``%``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def is_email(text: str) -> bool:
    """Whether ``text`` looks like an e-mail address (``name@host.tld``), in linear time."""
    m = _EMAIL_RE.fullmatch(text)
    return m is not None and "." in m.group(1)[1:-1]  # a dot inside the host, not at its ends


@overload
def parse_int(
    text: str | None, default: int, lo: int = SQLITE_INT_MIN, hi: int = SQLITE_INT_MAX
) -> int: ...
@overload
def parse_int(
    text: str | None, default: None = None, lo: int = SQLITE_INT_MIN, hi: int = SQLITE_INT_MAX
) -> int | None: ...
def parse_int(
    text: str | None, default: int | None = None, lo: int = SQLITE_INT_MIN, hi: int = SQLITE_INT_MAX
) -> int | None:
    """The integer in ``text`` when it lies in ``[lo, hi]``, else ``default``.

    Every number a request carries goes through here, so none reaches SQLite out of its 64-bit
    range (an ``OverflowError``) and no huge digit string reaches ``int()`` (a ``ValueError``
    past 4,300 digits, and quadratic time below that).
    """
    text = (text or "").strip()
    if len(text) > 20:  # no 64-bit integer is longer ("-9223372036854775808")
        return default
    try:
        value = int(text)
    except ValueError:
        return default
    return value if lo <= value <= hi else default


class IdConvertor(Convertor[int | None]):
    """Path convertor ``{name:id}``: digits, as an int SQLite can hold or None (a record that
    cannot exist, so the page answers 404). Starlette's ``:int`` would raise on huge ids."""

    regex = "[0-9]+"

    def convert(self, value: str) -> int | None:
        return parse_int(value, lo=0)

    def to_string(self, value: int | None) -> str:
        return str(value)


register_url_convertor("id", IdConvertor())


def connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """Open an instance database (rows as ``sqlite3.Row``), read-only if asked."""
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    else:
        conn = sqlite3.connect(path, timeout=10)
        # Instances are throw-away copies: no fsync on commit (a write costs ~0.1 ms, not ~10).
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA journal_mode=MEMORY")
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def now_str(conn: sqlite3.Connection) -> str:
    """Advance the instance's clock one step and return the new time (storage format).

    The time is :data:`SITE_CLOCK_START` plus one :data:`SITE_CLOCK_STEP` per call so far in
    this instance (one per request: :meth:`Ctx.now`), so two episodes that do the same things
    see the same pages, and a demonstration collected twice is the same tokens. The step is
    taken in the caller's transaction: concurrent writes get distinct times, and a write rolled
    back takes its step back with it.
    """
    # The UPDATE opens the caller's write transaction (other connections wait for its commit),
    # so the SELECT reads this write's own step. (Not RETURNING: that needs SQLite 3.35.)
    conn.execute("UPDATE site_clock SET ticks = ticks + 1")
    (ticks,) = conn.execute("SELECT ticks FROM site_clock").fetchone()
    return _clock_str(ticks)


def _clock_str(ticks: int) -> str:
    return fmt_dt(SITE_CLOCK_START + ticks * SITE_CLOCK_STEP)


def create_session(conn: sqlite3.Connection, site: str, user_id: int | None) -> str:
    """Insert a server-side session row for ``user_id`` (None: a guest) and return its token."""
    token = secrets.token_urlsafe(24)
    (ticks,) = conn.execute("SELECT ticks FROM site_clock").fetchone()
    conn.execute(
        "INSERT INTO sessions (token, site, user_id, created_at) VALUES (?, ?, ?, ?)",
        # The clock as it stands: logging in is not a write the pages show, and a browser's
        # parallel requests may open guest sessions in any order.
        (token, site, user_id, _clock_str(ticks)),
    )
    conn.commit()
    return token


def login_session(db_path: Path, site: str, username: str) -> str:
    """Create a logged-in session for ``username`` in an instance database; return the token.

    Raises:
        KeyError: No such user in the instance.
    """
    conn = connect(db_path)
    try:
        row = conn.execute("SELECT id FROM users WHERE username = ?", (username,)).fetchone()
        if row is None:
            raise KeyError(f"no user {username!r} in this instance of site {site!r}")
        return create_session(conn, site, row["id"])
    finally:
        conn.close()


# --------------------------------------------------------------------------------------------
# Request handling
# --------------------------------------------------------------------------------------------


class SiteApp:
    """Runtime state of one site app: its site, instance store, control token, templates.

    ``latency_s`` delays every response of a page route without blocking the server, standing
    in for a slower real deployment (WebArena's Magento and GitLab). The control endpoints and
    unknown paths (404) answer at once; a form post that redirects pays it twice (the post, then
    the page it redirects to), as it would on a real server.
    """

    def __init__(
        self, site: Site, store: InstanceStore, control_token: str, latency_s: float = 0.0
    ) -> None:
        check_latency(latency_s, "latency_s")
        self.site = site
        self.store = store
        self.control_token = control_token
        self.latency_s = latency_s
        self.templates = make_template_env(site)
        self.cache: dict[str, Any] = {}
        """Per-server cache for data no page changes (e.g. a category menu)."""


def check_latency(value: float, name: str) -> None:
    """Raise ``ValueError`` unless ``value`` (a site latency) is finite and >= 0."""
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")


def make_template_env(site: Site) -> jinja2.Environment:
    """Jinja2 environment of a site: autoescaping on, site templates before common ones."""
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [
                jinja2.FileSystemLoader(str(site.templates_dir)),
                jinja2.FileSystemLoader(str(COMMON_TEMPLATES)),
            ]
        ),
        autoescape=True,  # everything user-supplied renders inert (reviews, names, addresses)
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["money"] = fmt_money
    env.filters["date"] = fmt_date
    env.filters["datetime"] = fmt_datetime
    env.filters["stars"] = fmt_stars
    env.globals["qs"] = query_string
    return env


def fmt_money(value: float | None) -> str:
    """``1234.5`` -> ``$1,234.50``."""
    return f"${(value or 0.0):,.2f}"


def fmt_date(value: str | None) -> str:
    """``2023-04-05 14:23:11`` -> ``Apr 5, 2023``."""
    if not value:
        return ""
    dt = datetime.strptime(value[:10], "%Y-%m-%d")
    return f"{dt:%b} {dt.day}, {dt.year}"


def fmt_datetime(value: str | None) -> str:
    """``2023-04-05 14:23:11`` -> ``Apr 5, 2023, 2:23 PM``."""
    if not value:
        return ""
    dt = datetime.strptime(value[:19], "%Y-%m-%d %H:%M:%S")
    hour = dt.hour % 12 or 12
    return f"{dt:%b} {dt.day}, {dt.year}, {hour}:{dt:%M} {'AM' if dt.hour < 12 else 'PM'}"


def fmt_stars(value: float | None) -> str:
    """A rating as text, e.g. ``4.3 out of 5``."""
    return f"{(value or 0.0):.1f} out of 5"


def query_string(request: Request, **changes: Any) -> str:
    """The current query string with ``changes`` applied (None or '' removes a key).

    Used by templates for pagination, sort and filter links, e.g. ``qs(request, p=2)``.
    """
    params = dict(request.query_params)
    for key, value in changes.items():
        if value is None or value == "":
            params.pop(key, None)
        else:
            params[key] = str(value)
    return "?" + urllib.parse.urlencode(params) if params else request.url.path


class Ctx:
    """Everything a page handler needs: request, instance DB, logged-in user, rendering.

    Handlers are ``async def handler(ctx: Ctx) -> Response``; :func:`page` wraps them.
    """

    def __init__(
        self,
        request: Request,
        app: SiteApp,
        instance_id: str,
        db: sqlite3.Connection,
        form: dict[str, str] | None = None,
    ):
        self.request = request
        self._form = form or {}
        self.app = app
        self.site = app.site
        self.instance_id = instance_id
        self.db = db
        self.session_token: str | None = request.cookies.get(app.site.session_cookie)
        self.user: sqlite3.Row | None = None
        self._cookies: list[tuple[str, str | None]] = []  # (name, value or None = delete)
        self._now: str | None = None
        if self.session_token:
            self.user = db.execute(
                "SELECT u.* FROM sessions s JOIN users u ON u.id = s.user_id "
                "WHERE s.token = ? AND s.site = ?",
                (self.session_token, self.site.name),
            ).fetchone()

    def now(self) -> str:
        """The time this request's writes are stamped with: the instance's clock, advanced
        once per request however many rows it stamps (see :func:`now_str`)."""
        if self._now is None:
            self._now = now_str(self.db)
        return self._now

    # -- parameters ---------------------------------------------------------------------------

    def arg(self, name: str, default: str = "") -> str:
        """A query parameter, stripped."""
        return self.request.query_params.get(name, default).strip()

    def int_arg(self, name: str, default: int = 1, lo: int = 1) -> int:
        """An integer query parameter (``default`` when missing or invalid), at least ``lo``."""
        value = parse_int(self.request.query_params.get(name), default)
        return max(lo, value)

    def path_int(self, name: str) -> int | None:
        """An integer path parameter (``{name:id}``), or None when missing or out of range."""
        value = self.request.path_params.get(name)
        return value if isinstance(value, int) else parse_int(value)

    async def form(self) -> dict[str, str]:
        """The submitted form fields as stripped strings (read before the handler runs)."""
        return self._form

    # -- sessions -----------------------------------------------------------------------------

    def ensure_session(self) -> str:
        """The current session token, creating a guest session (and its cookie) if needed."""
        if (
            self.session_token
            and self.db.execute(
                "SELECT 1 FROM sessions WHERE token = ? AND site = ?",
                (self.session_token, self.site.name),
            ).fetchone()
        ):
            return self.session_token
        self.session_token = create_session(self.db, self.site.name, None)
        self._cookies.append((self.site.session_cookie, self.session_token))
        return self.session_token

    def log_in(self, user_id: int) -> None:
        """Start a new logged-in session for ``user_id`` (the old one is dropped)."""
        old = self.session_token
        token = create_session(self.db, self.site.name, user_id)
        if self.site.on_login is not None:
            self.site.on_login(self.db, old, token, user_id)
        if old:
            self.db.execute("DELETE FROM sessions WHERE token = ?", (old,))
        self.db.commit()
        self.session_token = token
        self._cookies.append((self.site.session_cookie, token))
        self.user = self.db.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()

    def log_out(self) -> None:
        """End the current session."""
        if self.session_token:
            self.db.execute("DELETE FROM sessions WHERE token = ?", (self.session_token,))
            self.db.commit()
        self.session_token = None
        self.user = None
        self._cookies.append((self.site.session_cookie, None))

    # -- responses ----------------------------------------------------------------------------

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """Render a template with the common context (user, flash message, site extras)."""
        flash = None
        raw = self.request.cookies.get(self.site.flash_cookie)
        if raw:
            kind, _, text = urllib.parse.unquote(raw).partition("|")
            flash = {"kind": kind, "text": text}
            self._cookies.append((self.site.flash_cookie, None))
        ctx: dict[str, Any] = {
            "request": self.request,
            "site": self.site,
            "user": self.user,
            "flash": flash,
            "error": None,
        }
        if self.site.context is not None:
            ctx.update(self.site.context(self))
        ctx.update(context)
        html = self.app.templates.get_template(template).render(ctx)
        links = self.site_links()
        if links:  # first on the page, so a long (truncated) page still shows them
            html = html.replace("<body>", "<body>\n" + links, 1)
        return HTMLResponse(html, status_code=status)

    def site_links(self) -> str:
        """Links to the other sites of a cross-site task (named by :data:`SITES_COOKIE`), as
        HTML; empty for single-site tasks and for browsing without the cookie."""
        wanted = self.request.cookies.get(SITES_COOKIE, "").split(",")
        running: dict[str, tuple[str, str]] = self.app.cache.get(SITE_LINKS_KEY) or {}
        others = [n for n in dict.fromkeys(wanted) if n in running and n != self.site.name]
        if not others or self.site.name not in wanted:
            return ""
        items = " · ".join(
            f'<a href="{_html.escape(running[n][1])}/">{_html.escape(running[n][0])}</a>'
            for n in others
        )
        return f'<nav aria-label="Other sites" class="wa-sites"><p>Other sites: {items}</p></nav>'

    def redirect(self, url: str, message: str | None = None, kind: str = "success") -> Response:
        """A 303 redirect, optionally carrying a message shown on the next page."""
        if message:
            self._cookies.append((self.site.flash_cookie, urllib.parse.quote(f"{kind}|{message}")))
        return RedirectResponse(url, status_code=303)

    def not_found(self, what: str = "page") -> HTMLResponse:
        """The 404 page."""
        return self.render("error.html", status=404, code=404, message=f"The {what} was not found.")

    def login_redirect(self, message: str) -> Response:
        """Redirect to the login page, coming back to the current URL afterwards."""
        target = self.request.url.path
        if self.request.url.query and self.request.method == "GET":
            target += "?" + self.request.url.query
        nxt = urllib.parse.quote(target, safe="/")
        return self.redirect(f"/login?next={nxt}", message, "notice")

    def page_rows(
        self,
        columns: str,
        source: str,
        params: Sequence[Any],
        order_by: str,
        per_page: int,
        *,
        count: str = "COUNT(*)",
        count_source: str | None = None,
        total: int | None = None,
        group_by: str | None = None,
        order_params: Sequence[Any] = (),
    ) -> tuple[list[sqlite3.Row], Pager]:
        """One page of a SQL listing and its pager (the page number is the ``p`` argument).

        Counts ``SELECT {count} {count_source or source}``, clamps the page, then runs
        ``SELECT {columns} {source} [GROUP BY {group_by}] ORDER BY {order_by} LIMIT ? OFFSET ?``.

        Args:
            columns: the selected columns.
            source: ``FROM … WHERE …`` (``?`` placeholders filled from ``params``).
            params: the parameters of ``source``.
            order_by: the ordering (with ``order_params`` for its placeholders).
            per_page: rows per page.
            count: what to count (``COUNT(DISTINCT …)`` for grouped listings).
            count_source: a cheaper ``FROM … WHERE …`` with the same rows, for the count.
            total: the row count when the caller knows it already (no count query).
            group_by: ``GROUP BY`` expression of grouped listings.
            order_params: parameters of ``order_by``.
        """
        if total is None:
            sql = f"SELECT {count} {count_source or source}"
            total = self.db.execute(sql, list(params)).fetchone()[0]
        pager = paginate(self.request, total, self.int_arg("p"), per_page)
        group = f" GROUP BY {group_by}" if group_by else ""
        rows = self.db.execute(
            f"SELECT {columns} {source}{group} ORDER BY {order_by} LIMIT ? OFFSET ?",
            [*params, *order_params, per_page, pager.offset],
        ).fetchall()
        return rows, pager

    def user_has(self, table: str, column: str, value: Any) -> bool:
        """Whether the signed-in user has a row in ``table`` whose ``column`` is ``value`` (a
        star, a subscription); False when nobody is signed in."""
        if self.user is None:
            return False
        return bool(
            self.db.execute(
                f"SELECT 1 FROM {table} WHERE {column} = ? AND user_id = ?",
                (value, self.user["id"]),
            ).fetchone()
        )

    def page_items(self, items: Sequence[Any], per_page: int) -> tuple[Sequence[Any], Pager]:
        """One page of an in-memory listing and its pager (the page number is ``p``)."""
        pager = paginate(self.request, len(items), self.int_arg("p"), per_page)
        return items[pager.offset : pager.offset + per_page], pager

    def apply_cookies(self, response: Response) -> Response:
        """Set or delete the cookies queued during the request."""
        for name, value in self._cookies:
            if value is None:
                response.delete_cookie(name, path="/")
            else:
                response.set_cookie(name, value, path="/", httponly=True, samesite="lax")
        return response


Handler = Callable[[Ctx], Awaitable[Response]]


def login_required(message: str) -> Callable[[Handler], Handler]:
    """Decorate a page handler that needs a signed-in user: anonymous requests are sent to
    the login page with ``message``, and come back to the page after signing in."""

    def decorate(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def guarded(ctx: Ctx) -> Response:
            if ctx.user is None:
                return ctx.login_redirect(message)
            return await handler(ctx)

        return guarded

    return decorate


def with_record(
    find: Callable[[Ctx], Any], what: str
) -> Callable[[Callable[[Ctx, Any], Awaitable[Response]]], Handler]:
    """Decorate a page handler ``handler(ctx, record)`` of one record: ``find(ctx)`` looks the
    record up (from the path), and when it finds none the request gets the "not found" page
    for ``what`` instead."""

    def decorate(handler: Callable[[Ctx, Any], Awaitable[Response]]) -> Handler:
        @functools.wraps(handler)
        async def found(ctx: Ctx) -> Response:
            record = find(ctx)
            if record is None:
                return ctx.not_found(what)
            return await handler(ctx, record)

        return found

    return decorate


def page(
    path: str, handler: Handler, methods: Iterable[str] = ("GET",), public: bool = False
) -> Route:
    """A route whose handler gets a :class:`Ctx` bound to the request's instance.

    Args:
        path: URL pattern, e.g. ``/product/{product_id:id}`` (``:id``, never ``:int``).
        handler: ``async def handler(ctx) -> Response``.
        methods: Allowed HTTP methods.
        public: On an ``admin_only`` site, whether the page is reachable without an admin login.
    """

    if ":int}" in path:
        raise ValueError(f"{path}: use {{name:id}}, not {{name:int}} (a huge id would give 500)")

    async def endpoint(request: Request) -> Response:
        app: SiteApp = request.app.state.site_app
        if app.latency_s:
            await asyncio.sleep(app.latency_s)
        try:
            form = await _read_form(request)  # the body arrives through the event loop
        except BodyTooLarge:
            return error_page(app, request, 413, FORM_TOO_LARGE)
        return await run_in_threadpool(serve, request, app, form)

    def serve(request: Request, app: SiteApp, form: dict[str, str]) -> Response:
        # In a worker thread: SQLite and templates block only this request. The connection is
        # opened, used and closed here (sqlite3 connections refuse other threads).
        try:
            instance_id, db_path = app.store.resolve(request.cookies.get(INSTANCE_COOKIE))
        except KeyError:
            return error_page(app, request, 404, UNKNOWN_INSTANCE)
        db = connect(db_path)
        try:
            ctx = Ctx(request, app, instance_id, db, form)
            if app.site.admin_only and not public:
                if ctx.user is None:
                    return ctx.apply_cookies(
                        ctx.login_redirect("Please sign in to access the Admin Panel.")
                    )
                if not ctx.user["is_admin"]:
                    resp = ctx.render(
                        "error.html",
                        status=403,
                        code=403,
                        message=f"Access denied: the account {ctx.user['username']} is not an "
                        "administrator. Sign out and sign in with an admin account.",
                    )
                    return ctx.apply_cookies(resp)
            return ctx.apply_cookies(_finish(handler(ctx)))
        finally:
            db.close()

    endpoint.__name__ = handler.__name__
    return Route(path, endpoint, methods=list(methods))


UNKNOWN_INSTANCE = (
    "This browsing session's site instance does not exist (it was deleted or expired). "
    f"Start a new episode, or delete the {INSTANCE_COOKIE} cookie to browse the shared site."
)
"""Message of the page a request with a stale or forged instance cookie gets."""


MAX_BODY = 2**20
"""Most bytes of a request body any page or control endpoint reads (1 MiB). A form of every
text field at its cap (:data:`TEXT_MAX` characters, up to 12 bytes each percent-encoded) is
far below; a larger body is refused with a 413 before it is parsed, so one request can never
hold more than this (300 fields of 1 MB each once held 370 MB)."""

FORM_TOO_LARGE = (
    f"The form is larger than the site accepts ({MAX_BODY // 2**20} MiB in all); shorten "
    "the text you entered and submit it again."
)
"""Message of the 413 page."""


class BodyTooLarge(Exception):
    """A request body over :data:`MAX_BODY` (answered with a 413)."""


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request body, read up to ``limit`` bytes.

    Raises:
        BodyTooLarge: the declared ``Content-Length`` or the bytes that arrived exceed it
            (what arrived so far is dropped; the rest is never read).
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
    return b"".join(chunks)


async def _read_form(request: Request) -> dict[str, str]:
    """The form fields of a POST as stripped strings (uploaded files are ignored).

    Raises:
        BodyTooLarge: the body is over :data:`MAX_BODY`.
    """
    if request.method in ("GET", "HEAD"):
        return {}
    body = await read_body(request)

    async def replay() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async with Request(request.scope, replay).form(max_part_size=MAX_BODY) as form:
        return {k: v.strip() for k, v in form.items() if isinstance(v, str)}


def _finish(coro: Coroutine[Any, Any, Response]) -> Response:
    """Run a page handler's coroutine to its end in the calling thread.

    Handlers await nothing but :meth:`Ctx.form`, whose fields are read before, so the
    coroutine never suspends; one that does is a bug, refused loudly.
    """
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    coro.close()
    raise RuntimeError("a page handler awaited something other than ctx.form()")


def error_page(app: SiteApp, request: Request, code: int, message: str) -> HTMLResponse:
    """A bare error page (no user, no site menus): for requests no handler serves."""
    html = app.templates.get_template("error.html").render(
        request=request,
        site=app.site,
        user=None,
        flash=None,
        error=None,
        code=code,
        message=message,
        bare=True,
    )
    return HTMLResponse(html, status_code=code)


# --------------------------------------------------------------------------------------------
# Pages every site has: login, logout
# --------------------------------------------------------------------------------------------

LOGIN_FAILED = (
    "The account sign-in was incorrect or your account is disabled temporarily. "
    "Please wait and try again later."
)


def _safe_next(url: str, default: str) -> str:
    # Only local paths: never redirect to another host.
    return url if url.startswith("/") and not url.startswith("//") else default


async def login_page(ctx: Ctx) -> Response:
    """GET: the sign-in form. POST: check the credentials and start a session."""
    if ctx.request.method == "GET":
        nxt = _safe_next(ctx.arg("next"), ctx.site.login_redirect)
        return ctx.render("login.html", next=nxt, username="")
    form = await ctx.form()
    nxt = _safe_next(form.get("next", ""), ctx.site.login_redirect)
    username = form.get("username", "")
    row = ctx.db.execute(
        "SELECT * FROM users WHERE username = ? OR lower(email) = lower(?)", (username, username)
    ).fetchone()
    error = None
    if row is None or not check_password(form.get("password", ""), row["password_hash"]):
        error = LOGIN_FAILED
    elif ctx.site.admin_only and not row["is_admin"]:
        error = "This account is not allowed to access the Admin Panel."
    elif ctx.site.login_check is not None:
        error = ctx.site.login_check(ctx.db, row)
    if error:
        return ctx.render("login.html", status=200, next=nxt, username=username, error=error)
    ctx.log_in(row["id"])
    return ctx.redirect(nxt)


async def logout_page(ctx: Ctx) -> Response:
    """End the session and go to the home page (the login page on admin sites)."""
    ctx.log_out()
    return ctx.redirect("/login" if ctx.site.admin_only else "/", "You are signed out.")


# --------------------------------------------------------------------------------------------
# Control endpoints
# --------------------------------------------------------------------------------------------


def _authorized(request: Request) -> bool:
    app: SiteApp = request.app.state.site_app
    given = request.headers.get(CONTROL_HEADER, "")
    return hmac.compare_digest(given.encode(), app.control_token.encode())


def _forbidden() -> JSONResponse:
    return JSONResponse({"error": f"missing or wrong {CONTROL_HEADER} header"}, status_code=403)


def _control(
    handler: Callable[[Request, SiteApp], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """Decorate a control endpoint ``handler(request, app)``: a request without the right
    control header gets 403 instead."""

    @functools.wraps(handler)
    async def endpoint(request: Request) -> Response:
        if not _authorized(request):
            return _forbidden()
        return await handler(request, request.app.state.site_app)

    return endpoint


async def _json_body(request: Request) -> dict[str, Any]:
    """The JSON object of a control request's body.

    Raises:
        ValueError: over :data:`MAX_BODY`, not JSON, nested deeper than ``MAX_DEPTH``
            levels (which would exhaust the parser's stack: a 500 before), or not an object.
    """
    try:
        body = await read_body(request)
    except BodyTooLarge:
        raise ValueError(f"the JSON body is over {MAX_BODY} bytes") from None
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
        deep = not json_depth_ok(data)
    except RecursionError:
        deep = True
    if deep:
        raise ValueError(f"the JSON body is nested deeper than {MAX_DEPTH} levels")
    if not isinstance(data, dict):
        raise ValueError("the JSON body must be an object")
    return data


@_control
async def control_create_instance(request: Request, app: SiteApp) -> Response:
    """``POST /__webagent/instances`` {"instance_id"?} -> {"instance_id", "db_path"}."""
    try:
        data = await _json_body(request)
        instance_id = app.store.create(data.get("instance_id"))
    except ValueError as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    return JSONResponse(
        {"instance_id": instance_id, "db_path": str(app.store.path(instance_id))},
        status_code=201,
    )


@_control
async def control_delete_instance(request: Request, app: SiteApp) -> Response:
    """``DELETE /__webagent/instances/{id}`` -> {"deleted": bool}."""
    deleted = app.store.delete(request.path_params["instance_id"])
    return JSONResponse({"deleted": deleted}, status_code=200 if deleted else 404)


@_control
async def control_reset_instance(request: Request, app: SiteApp) -> Response:
    """``POST /__webagent/instances/{id}/reset`` -> {"instance_id"}."""
    instance_id = request.path_params["instance_id"]
    try:
        app.store.reset(instance_id)
    except KeyError as e:
        return JSONResponse({"error": str(e)}, status_code=404)
    return JSONResponse({"instance_id": instance_id})


@_control
async def control_create_session(request: Request, app: SiteApp) -> Response:
    """``POST /__webagent/instances/{id}/sessions`` {"username"} -> cookie name and value."""
    try:
        data = await _json_body(request)
        path = app.store.path(request.path_params["instance_id"])
        token = login_session(path, app.site.name, str(data["username"]))
    except KeyError as e:
        return JSONResponse({"error": str(e)}, status_code=404)
    except ValueError as e:
        return JSONResponse({"error": str(e)}, status_code=400)
    return JSONResponse({"cookie_name": app.site.session_cookie, "cookie_value": token})


@_control
async def control_health(request: Request, app: SiteApp) -> Response:
    """``GET /__webagent/health`` -> site name and live instances."""
    return JSONResponse({"site": app.site.name, "instances": app.store.ids()})


CONTROL_ROUTES: list[BaseRoute] = [
    Route("/__webagent/health", control_health, methods=["GET"]),
    Route("/__webagent/instances", control_create_instance, methods=["POST"]),
    Route("/__webagent/instances/{instance_id}", control_delete_instance, methods=["DELETE"]),
    Route("/__webagent/instances/{instance_id}/reset", control_reset_instance, methods=["POST"]),
    Route("/__webagent/instances/{instance_id}/sessions", control_create_session, methods=["POST"]),
]


# --------------------------------------------------------------------------------------------
# App factory
# --------------------------------------------------------------------------------------------


def build_app(
    site: Site, store: InstanceStore, control_token: str, latency_s: float = 0.0
) -> Starlette:
    """The Starlette app of ``site`` serving the instances of ``store``.

    Args:
        site: The site to serve.
        store: Instance store of the site's backend (shared with sibling sites).
        control_token: Value expected in the ``X-WebAgent-Control`` header.
        latency_s: Delay of every page response (see :class:`SiteApp`).
    """
    if store.backend.name != site.backend.name:
        raise ValueError(
            f"site {site.name!r} needs backend {site.backend.name!r}, got {store.backend.name!r}"
        )
    site_app = SiteApp(site, store, control_token, latency_s)

    async def http_error(request: Request, exc: Exception) -> Response:
        code = exc.status_code if isinstance(exc, HTTPException) else 500
        message = {404: "The page was not found.", 405: "Method not allowed."}.get(
            code, "Something went wrong."
        )
        return error_page(site_app, request, code, message)

    routes: list[BaseRoute] = [
        *CONTROL_ROUTES,
        page("/login", login_page, methods=("GET", "POST"), public=True),
        page("/logout", logout_page, methods=("GET", "POST"), public=True),
        *site.routes(),
    ]
    app = Starlette(routes=routes, exception_handlers={404: http_error, 405: http_error})
    app.state.site_app = site_app
    return app


def new_control_token() -> str:
    """A fresh random control token."""
    return secrets.token_urlsafe(24)


# --------------------------------------------------------------------------------------------
# Pagination
# --------------------------------------------------------------------------------------------


@dataclass
class Pager:
    """One page of a listing: offsets for SQL, links for the template."""

    page: int
    pages: int
    per_page: int
    total: int
    links: list[tuple[int, str, bool]]  # (page number, url, is current)
    prev_url: str | None
    next_url: str | None

    @property
    def offset(self) -> int:
        """Row offset of the page (for SQL ``LIMIT ? OFFSET ?``)."""
        return (self.page - 1) * self.per_page

    @property
    def first_item(self) -> int:
        """1-based index of the page's first row (0 when empty)."""
        return min(self.total, self.offset + 1)

    @property
    def last_item(self) -> int:
        """1-based index of the page's last row."""
        return min(self.total, self.offset + self.per_page)


def paginate(request: Request, total: int, page: int, per_page: int, param: str = "p") -> Pager:
    """Clamp ``page`` to the available pages and build the pager links (at most 5 numbers)."""
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    lo = max(1, min(page - 2, pages - 4))
    hi = min(pages, lo + 4)

    def url(n: int) -> str:
        return query_string(request, **{param: n if n > 1 else None})

    return Pager(
        page=page,
        pages=pages,
        per_page=per_page,
        total=total,
        links=[(n, url(n), n == page) for n in range(lo, hi + 1)],
        prev_url=url(page - 1) if page > 1 else None,
        next_url=url(page + 1) if page < pages else None,
    )
