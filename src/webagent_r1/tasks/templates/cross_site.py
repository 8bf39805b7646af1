"""Cross-site task templates: a fact found on one embedded site is used on another.

Like WebArena's multi-site tasks: look up an address on the map and save it in the shop
account, post a price from the shop to the forum, open a GitLab issue with a distance from
the map. The samplers read both sites' pristine databases (``backend_sites``); each task logs
in on the sites that need an account (``logins``), and every page of a cross-site episode
links to the task's other sites, which is how the agent (and the expert) moves between them.
Changes are graded by ``state_match`` on the episode's instance of the site that changed,
questions by ``string_match``.

Ids 600-649. Held out (test split only): ``cross.closest_place_issue`` (640),
``cross.cheaper_product_post`` (641), ``cross.sku_and_place_at_coordinates`` (642).
"""

from __future__ import annotations

import random
import re
import sqlite3
from typing import Any

from webagent_r1.sites.map.geo import DAYS, fmt_distance, fmt_duration, fmt_latlon, fold
from webagent_r1.sites.map.places import (
    RADII,
    category_by_slug,
    hours,
    nearby,
    street_address,
)
from webagent_r1.sites.reddit.views import search_ids as forum_search_ids
from webagent_r1.tasks.experts import (
    Expert,
    ExpertError,
    answer,
    click,
    elements,
    find,
    find_all,
    scroll_down,
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
    posted,
    seek,
    state_check,
    state_eval,
    string_eval,
    user_id,
)
from webagent_r1.tasks.templates.map import memo_route, searchable_places
from webagent_r1.tasks.templates.shopping import pick_product
from webagent_r1.types import Observation

SHOPPER = "emma.lopez"
"""The shop's default customer (WebArena's Emma Lopez)."""
FORUM_USER = "MarvelsGrantMan136"
"""The forum's default user (as in WebArena)."""
GITLAB_USER = "byteblaze"
"""GitLab's default user (as in WebArena)."""
TITLES = {
    "shopping": "One Stop Market",
    "map": "OpenStreetMap",
    "reddit": "Postmill",
    "gitlab": "GitLab",
}
"""Site titles: the text of the links between a cross-site task's sites."""
ROUTE_PROJECTS = ("City Bikes", "Trail Mapper", "Transit Feeds")
"""GitLab projects where a route or a place belongs."""
SHOP_PROJECT = "Storefront"
"""The GitLab project of the shop's code."""
FORUM_OF_CATEGORY = {
    "cafe": "cooking",
    "restaurant": "cooking",
    "bakery": "cooking",
    "bar": "cooking",
    "supermarket": "cooking",
    "hotel": "travel",
    "museum": "travel",
    "library": "books",
    "bank": "personalfinance",
}
"""The forum where a question about a place of a category fits."""

Conns = dict[str, sqlite3.Connection]

# --------------------------------------------------------------------------------------------
# Sampling helpers (read the pristine databases)
# --------------------------------------------------------------------------------------------


MAP_SHOP = ["map", "shopping"]
SHOP_MAP = ["shopping", "map"]

TEMPLATES = Registry()
"""The module's templates, in the suite's order."""


def _pair(conn: sqlite3.Connection, rng: random.Random) -> tuple[Any, Any]:
    """Two places at least 500 m apart."""
    rows = searchable_places(conn)
    while True:
        a, b = rng.sample(rows, 2)
        if memo_route(conn, a, b, "foot").distance_m >= 500:
            return a, b


RIVALS = 5
"""Runners-up a closest-place answer must not also name (a list of candidates is no answer)."""


def _closest(
    conn: sqlite3.Connection, rng: random.Random
) -> tuple[Any, Any, Any, list[Any]] | None:
    """(place, category, the nearest other place of that category, the next ``RIVALS``
    nearest) with a clear winner."""
    place = rng.choice(searchable_places(conn))
    cat = category_by_slug(conn, rng.choice(searchable_places(conn))["category_slug"])
    found = nearby(conn, place, cat["id"], max(RADII))
    if len(found) < 2 or found[1][0] - found[0][0] < 30:
        return None
    return place, cat, found[0][1], [r for _, r in found[1 : 1 + RIVALS]]


def _price(p: Any) -> str:
    return f"${p['price']:,.2f}"


def _forum_post(conn: sqlite3.Connection, rng: random.Random) -> Any | None:
    """A forum post a search for its full title lists first."""
    memo = db_memo(conn, __name__)
    if "posts" not in memo:
        memo["posts"] = conn.execute(
            "SELECT s.id, s.title, f.name AS forum FROM submissions s "
            "JOIN forums f ON f.id = s.forum_id ORDER BY s.id"
        ).fetchall()
    post = rng.choice(memo["posts"])
    key = ("findable", post["id"])
    if key not in memo:
        memo[key] = forum_search_ids(conn, post["title"])[:1] == [post["id"]]
    return post if memo[key] else None


def _forum_id(conn: sqlite3.Connection, name: str) -> int:
    return int(conn.execute("SELECT id FROM forums WHERE name = ?", (name,)).fetchone()[0])


def _project(conn: sqlite3.Connection, name: str) -> Any:
    return conn.execute("SELECT * FROM projects WHERE name = ?", (name,)).fetchone()


def _one_new(
    site: str,
    sql: str,
    args: list[Any],
    found: str,
    text: tuple[str, str],
    *phrases: str,
    exclude: list[str] | None = None,
) -> list[dict[str, Any]]:
    """state_checks on ``site``: ``sql`` (``{}``: the column) with ``args`` finds one row
    (``found`` says which), and its ``text`` column (column, description) holds ``phrases``
    and none of ``exclude``."""
    column, holds = text
    return [
        state_check(sql.format("id"), args, row_count=1, description=found, site=site),
        state_check(
            sql.format(column),
            args,
            must_include=list(phrases),
            must_exclude=exclude,
            description=holds,
            site=site,
        ),
    ]


def _new_post_check(
    p: Params, *phrases: str, exclude: list[str] | None = None
) -> list[dict[str, Any]]:
    """state_checks: one post by the user in the forum with the title, body holding phrases."""
    return _one_new(
        "reddit",
        "SELECT {} FROM submissions WHERE title = ? AND forum_id = ? AND user_id = ?",
        [p["title"], p["_forum_id"], p["_user"]],
        "one post with this title in the forum",
        ("body", "the post's text gives the facts looked up"),
        *phrases,
        exclude=exclude,
    )


def _new_issue_check(
    p: Params, *phrases: str, exclude: list[str] | None = None
) -> list[dict[str, Any]]:
    """state_checks: one issue by the user in the project with the title and facts."""
    return _one_new(
        "gitlab",
        "SELECT {} FROM issues WHERE project_id = ? AND title = ? AND author_id = ?",
        [p["_pid"], p["title"], p["_uid"]],
        "one issue with this title in the project",
        ("description", "the issue's description gives the facts looked up"),
        *phrases,
        exclude=exclude,
    )


# --------------------------------------------------------------------------------------------
# Expert helpers (read the observation only)
# --------------------------------------------------------------------------------------------


def _go_site(obs: Observation, site: str, why: str) -> Sub:
    """Follow the link to another site of the task (shown first on every page)."""
    obs = yield click(find(obs, "link", TITLES[site], exact=True), why)
    return obs


# -- map --


def _map_search(obs: Observation, query: str, why: str) -> Sub:
    obs = yield search(find(obs, "textbox", "Search", exact=True), query, why)
    return obs


def _map_address(obs: Observation, place: str) -> Sub:
    """Search the map for a place; returns its full address from the result."""
    obs = yield from _map_search(obs, place, f"I look up '{place}' on the map.")
    link = find(obs, "link", place, exact=True)
    m = re.search(r" · (.+, Riverton, PA \d{5})", line_after(obs, link))
    if not m:
        raise ExpertError(f"expert: no address under {place} on {obs.url}")
    return m.group(1), obs


def _map_place(obs: Observation, place: str) -> Sub:
    obs = yield from _map_search(obs, place, f"I look up '{place}' on the map.")
    obs = yield click(find(obs, "link", place, exact=True), f"I open the page of '{place}'.")
    return obs


def _map_route(obs: Observation, frm: str, to: str, mode_label: str) -> Sub:
    """Directions from ``frm`` to ``to``; returns (distance, time, obs)."""
    obs = yield click(
        find(obs, "link", "Directions", exact=True), "Routes are on the map's Directions page."
    )
    obs = yield type_text(find(obs, "textbox", "From", exact=True), frm, f"From: {frm}.")
    obs = yield type_text(find(obs, "textbox", "To", exact=True), to, f"To: {to}.")
    box = find(obs, "combobox", "Mode", exact=True)
    if box.value != mode_label:
        obs = yield select(box, mode_label, f"The trip is by {mode_label.lower()}.")
    obs = yield click(find(obs, "button", "Get Directions", exact=True), "I get the route.")
    m = re.search(r"^Distance: (.+?) · Time: (.+)$", obs.text, re.MULTILINE)
    if not m:
        raise ExpertError(f"expert: no route on {obs.url}")
    return m.group(1).strip(), m.group(2).strip(), obs


def _map_closest(obs: Observation, place: str, category: str) -> Sub:
    """The nearest place of a category (by its "Category" option name) to a place."""
    obs = yield from _map_place(obs, place)
    box = find(obs, "combobox", "Category", exact=True)
    obs = yield select(box, category, f"I look for the nearest {category.lower()}.")
    box = find(obs, "combobox", "Within", exact=True)
    obs = yield select(box, "5 km", "5 km covers the whole city, so nothing is missed.")
    obs = yield click(find(obs, "button", "Find Nearby", exact=True), "I list them, nearest first.")
    els = elements(obs.text)
    for i, el in enumerate(els):
        if el.role == "button" and el.name == "Find Nearby":
            for later in els[i + 1 :]:
                if later.role == "link":
                    return later.name, obs
    raise ExpertError(f"expert: no nearby result on {obs.url}")


# -- shop --


def _shop_price(obs: Observation, product: str) -> Sub:
    """Search the shop for a product; returns its price from the results."""
    box = find(obs, "textbox", "Search", exact=True)
    obs = yield search(box, product, f"I search the shop for '{product}'.")
    link, obs = yield from seek(obs, "link", product, "I scroll to the product.", exact=True)
    m = re.search(r"\$[\d,]+\.\d\d", line_after(obs, link))
    if not m:
        raise ExpertError(f"expert: no price after {link.line!r}")
    return m.group(0), obs


# -- forum --


def _forum_new_post(obs: Observation, forum: str, title: str, body: str) -> Sub:
    obs = yield click(find(obs, "link", "Submit", exact=True), "I open the form for a new post.")
    obs = yield select(find(obs, "combobox", "Forum"), forum, f"The post goes to f/{forum}.")
    obs = yield type_text(find(obs, "textbox", "Title", exact=True), title, "I enter the title.")
    obs = yield type_text(find(obs, "textbox", "Body", exact=True), body, "I write the text.")
    obs = yield click(
        find(obs, "button", "Create submission", exact=True), "Everything is filled in; I post."
    )
    if "post was submitted" not in obs.text:
        raise ExpertError(f"expert: the post was not created ({obs.url})")
    return obs


def _forum_reply(obs: Observation, title: str, text: str) -> Sub:
    box = find(obs, "textbox", "Search", exact=True)
    obs = yield search(box, title, f'I search the forum for the post "{title}".')
    link, obs = yield from seek(obs, "link", title, "I scroll to the post.", exact=True)
    obs = yield click(link, "I open the thread.")
    box = find(obs, "textbox", "Comment", exact=True)
    obs = yield type_text(box, text, "I write my reply.")
    obs = yield click(find(obs, "button", "Post comment", exact=True), "I post the comment.")
    obs, _ = yield from posted(obs, text, "comment")
    return obs


# -- GitLab --


def _gitlab_project(obs: Observation, project: str) -> Sub:
    box = find(obs, "textbox", "Search GitLab")
    obs = yield search(box, project, f"I search GitLab for the project '{project}'.")
    for _ in range(6):
        link = next((el for el in find_all(obs, "link") if el.name.endswith(f" / {project}")), None)
        if link is not None:
            obs = yield click(link, f"I open the project '{link.name}'.")
            return obs
        if "scroll down to see more" not in obs.text:
            break
        obs = yield scroll_down("I scroll to the project.")
    raise ExpertError(f"expert: project {project!r} not found on {obs.url}")


def _gitlab_issues(obs: Observation, project: str) -> Sub:
    obs = yield from _gitlab_project(obs, project)
    # The project menu's "Issues (12)", not the header's "Issues" (my issues everywhere).
    for el in find_all(obs, "link"):
        if el.name.startswith("Issues ("):
            obs = yield click(el, f"I open the issues of '{project}'.")
            return obs
    raise ExpertError(f"expert: no Issues menu on {obs.url}")


def _gitlab_new_issue(obs: Observation, project: str, title: str, description: str) -> Sub:
    obs = yield from _gitlab_issues(obs, project)
    obs = yield click(find(obs, "link", "New issue", exact=True), "I click New issue.")
    obs = yield type_text(find(obs, "textbox", "Title", exact=True), title, "I type the title.")
    box = find(obs, "textbox", "Description", exact=True)
    obs = yield type_text(box, description, "I write the description.")
    obs = yield click(find(obs, "button", "Create issue", exact=True), "I create the issue.")
    if "was created" not in obs.text:
        raise ExpertError(f"expert: the issue was not created on {obs.url}")
    return obs


def _gitlab_comment(obs: Observation, project: str, issue: str, text: str) -> Sub:
    obs = yield from _gitlab_issues(obs, project)
    box = find(obs, "textbox", "Search", exact=True)
    obs = yield type_text(box, issue, f"I search the issues for '{issue}'.")
    obs = yield click(find(obs, "button", "Apply filters"), "I apply the search.")
    link, obs = yield from seek(obs, "link", issue, "I look for the issue.", exact=True)
    obs = yield click(link, f"I open the issue '{issue}'.")
    box = find(obs, "textbox", "Add a comment", exact=True)
    obs = yield type_text(box, text, "I write the comment.")
    obs = yield click(find(obs, "button", "Comment", exact=True), "I add the comment.")
    if "comment was added" not in obs.text:
        raise ExpertError(f"expert: the comment was not added on {obs.url}")
    return obs


# --------------------------------------------------------------------------------------------
# 600 change (map -> shop): make a place's address my default address
# --------------------------------------------------------------------------------------------


def sample_address_from_map(conns: Conns, rng: random.Random) -> Params | None:
    place = rng.choice(searchable_places(conns["map"]))
    cust = (
        conns["shopping"]
        .execute(
            "SELECT c.* FROM customers c JOIN users u ON u.id = c.user_id WHERE u.username = ?",
            (SHOPPER,),
        )
        .fetchone()
    )
    return {
        "place": place["name"],
        "_cust": cust["id"],
        "_street": street_address(place),
        "_postcode": place["postcode"],
        "_phone": cust["phone"],
    }


def eval_address_from_map(p: Params) -> dict[str, Any]:
    expected = {
        "street": p["_street"],
        "city": "Riverton",
        "region": "Pennsylvania",
        "postcode": p["_postcode"],
        "country": "United States",
        "phone": p["_phone"],
    }
    return state_eval(
        *[
            state_check(
                f"SELECT {col} FROM customers WHERE id = ?",
                [p["_cust"]],
                expected=value,
                description=f"my address: {col}",
                site="shopping",
            )
            for col, value in expected.items()
        ]
    )


SHOP_ADDRESS_BOXES = (
    ("Street Address", "street"),
    ("City", "city"),
    ("State/Province", "region"),
    ("Zip/Postal Code", "postcode"),
)


@TEMPLATES.template(
    id=600,
    name="cross.address_from_map",
    writes={"shopping.customers": 1},
    sites=MAP_SHOP,
    kind="change",
    intent="Look up {place} on the map and make its address my default address in the "
    "shop: its street address, city Riverton, state Pennsylvania and its zip code. Keep my "
    "name and phone number.",
    start_url="__MAP__/",
    sample=sample_address_from_map,
    evaluation=eval_address_from_map,
    backend_sites=MAP_SHOP,
    logins={"shopping": SHOPPER},
    difficulty="10+",
)
def expert_address_from_map(p: Params, obs: Observation) -> Expert:
    full, obs = yield from _map_address(obs, p["place"])
    street, _, rest = full.partition(", ")
    postcode = rest.rsplit(" ", 1)[1]
    values = {"street": street, "city": "Riverton", "region": "Pennsylvania", "postcode": postcode}
    obs = yield from _go_site(obs, "shopping", f"The map gives {full}; now to the shop.")
    obs = yield click(find(obs, "link", "My Account", exact=True), "I open My Account.")
    obs = yield click(
        find(obs, "link", "Address Book", exact=True), "The default address is in the Address Book."
    )
    for label, key in SHOP_ADDRESS_BOXES:
        box, obs = yield from seek(obs, "textbox", label, f"I look for {label}.", exact=True)
        if box.value != values[key]:
            obs = yield type_text(box, values[key], f"{label}: {values[key]}.")
    button, obs = yield from seek(
        obs, "button", "Save Address", "I look for Save Address.", exact=True
    )
    obs = yield click(button, "The address of the place is filled in; I save it.")
    if "saved the address" not in obs.text:
        raise ExpertError(f"expert: the address was not saved on {obs.url}")
    yield answer("done", f"My default address is now {full}.")


# --------------------------------------------------------------------------------------------
# 601 info (shop + map): a product's price and a walking time
# --------------------------------------------------------------------------------------------


def sample_price_and_walk(conns: Conns, rng: random.Random) -> Params | None:
    product = pick_product(conns["shopping"], rng)
    if product is None:
        return None
    a, b = _pair(conns["map"], rng)
    walk = fmt_duration(memo_route(conns["map"], a, b, "foot").seconds)
    return {
        "product": product["name"],
        "a": a["name"],
        "b": b["name"],
        "_price": _price(product),
        "_walk": walk,
    }


@TEMPLATES.template(
    id=601,
    name="cross.price_and_walking_time",
    sites=SHOP_MAP,
    kind="info",
    intent="What is the price of the {product} in the shop, and how long does the map say "
    "it takes to walk from {a} to {b}? Answer with both, like: $12.34, 59 min",
    start_url="__SHOPPING__/",
    sample=sample_price_and_walk,
    evaluation=lambda p: string_eval([p["_price"], p["_walk"]], "must_include"),
    backend_sites=SHOP_MAP,
    difficulty="6-9",
)
def expert_price_and_walk(p: Params, obs: Observation) -> Expert:
    price, obs = yield from _shop_price(obs, p["product"])
    obs = yield from _go_site(obs, "map", f"The price is {price}; the walk is on the map.")
    _, time, obs = yield from _map_route(obs, p["a"], p["b"], "Foot")
    yield answer(f"{price}, {time}", f"The product costs {price} and the walk takes {time}.")


# --------------------------------------------------------------------------------------------
# 602 change (map -> GitLab): an issue with a cycling distance
# --------------------------------------------------------------------------------------------


def sample_route_issue(conns: Conns, rng: random.Random) -> Params | None:
    a, b = _pair(conns["map"], rng)
    project = _project(conns["gitlab"], rng.choice(ROUTE_PROJECTS))
    title = f"Add bike route: {a['name']} to {b['name']}"
    return {
        "a": a["name"],
        "b": b["name"],
        "project": project["name"],
        "title": title,
        "_distance": fmt_distance(memo_route(conns["map"], a, b, "bicycle").distance_m),
        "_pid": project["id"],
        "_uid": user_id(conns["gitlab"], GITLAB_USER),
    }


@TEMPLATES.template(
    id=602,
    name="cross.bike_distance_issue",
    writes={"gitlab.issues": 1, "gitlab.projects": 1},
    sites=["map", "gitlab"],
    kind="change",
    intent='Open an issue titled "{title}" in the GitLab project {project}, with the '
    "cycling distance from {a} to {b} as the map shows it (like 12.3 km) in its description.",
    start_url="__MAP__/",
    sample=sample_route_issue,
    evaluation=lambda p: state_eval(*_new_issue_check(p, p["_distance"])),
    backend_sites=["map", "gitlab"],
    logins={"gitlab": GITLAB_USER},
    difficulty="10+",
)
def expert_route_issue(p: Params, obs: Observation) -> Expert:
    dist, _, obs = yield from _map_route(obs, p["a"], p["b"], "Bicycle")
    obs = yield from _go_site(obs, "gitlab", f"The bicycle route is {dist}; now to GitLab.")
    desc = f"Cycling distance: {dist}"
    obs = yield from _gitlab_new_issue(obs, p["project"], p["title"], desc)
    yield answer("done", f"The issue '{p['title']}' records {dist}.")


# --------------------------------------------------------------------------------------------
# 603 change (map -> forum): a post with a place's opening time
# --------------------------------------------------------------------------------------------


def sample_hours_post(conns: Conns, rng: random.Random) -> Params | None:
    place = rng.choice(searchable_places(conns["map"]))
    forum = FORUM_OF_CATEGORY.get(place["category_slug"])
    day = rng.randrange(7)
    h = hours(conns["map"], place["id"])[day]
    if forum is None or h["opens"] is None or h["opens"] == "00:00":
        return None
    title = f"{place['name']} on {DAYS[day]}s"
    if conns["reddit"].execute("SELECT 1 FROM submissions WHERE title = ?", (title,)).fetchone():
        return None
    return {
        "forum": forum,
        "title": title,
        "place": place["name"],
        "day": DAYS[day],
        "_opens": h["opens"],
        "_forum_id": _forum_id(conns["reddit"], forum),
        "_user": user_id(conns["reddit"], FORUM_USER),
    }


@TEMPLATES.template(
    id=603,
    name="cross.opening_time_post",
    writes={"reddit.submissions": 1},
    sites=["map", "reddit"],
    kind="change",
    intent='Post in the f/{forum} forum a new post titled "{title}" whose text says what '
    "time {place} opens on {day}s according to the map (like 06:45).",
    start_url="__MAP__/",
    sample=sample_hours_post,
    evaluation=lambda p: state_eval(*_new_post_check(p, p["_opens"])),
    backend_sites=["map", "reddit"],
    logins={"reddit": FORUM_USER},
    difficulty="6-9",
)
def expert_hours_post(p: Params, obs: Observation) -> Expert:
    obs = yield from _map_place(obs, p["place"])
    h = grab(obs, rf"^{p['day']} \| (.+)$", f"hours on {p['day']}").strip()
    opens = h.split(" - ")[0]
    obs = yield from _go_site(obs, "reddit", f"It opens at {opens} on {p['day']}s; to the forum.")
    body = f"According to the map, {p['place']} opens at {opens} on {p['day']}s."
    obs = yield from _forum_new_post(obs, p["forum"], p["title"], body)
    yield answer("done", f'The post "{p["title"]}" gives the opening time {opens}.')


# --------------------------------------------------------------------------------------------
# 604 change (shop -> forum): reply to a post with a product's price
# --------------------------------------------------------------------------------------------


def sample_price_reply(conns: Conns, rng: random.Random) -> Params | None:
    product = pick_product(conns["shopping"], rng)
    post = _forum_post(conns["reddit"], rng)
    if product is None or post is None:
        return None
    return {
        "post": post["title"],
        "product": product["name"],
        "_price": _price(product),
        "_post_id": post["id"],
        "_user": user_id(conns["reddit"], FORUM_USER),
    }


def _reply_check(
    p: Params, phrases: list[str], description: str, exclude: list[str] | None = None
) -> dict[str, Any]:
    """state_match: the user's newest top-level comment on the post holds the phrases."""
    return state_eval(
        state_check(
            "SELECT body FROM comments WHERE submission_id = ? AND user_id = ? "
            "AND parent_id IS NULL ORDER BY id DESC",
            [p["_post_id"], p["_user"]],
            must_include=phrases,
            must_exclude=exclude,
            description=description,
            site="reddit",
        )
    )


def eval_price_reply(p: Params) -> dict[str, Any]:
    return _reply_check(p, [p["_price"]], "my newest comment on the post gives the price")


@TEMPLATES.template(
    id=604,
    name="cross.price_reply",
    writes={"reddit.comments": 1},
    sites=["shopping", "reddit"],
    kind="change",
    intent='Reply to the forum post "{post}" with a comment giving the price of the '
    "{product} in the One Stop Market shop (like $12.34).",
    start_url="__SHOPPING__/",
    sample=sample_price_reply,
    evaluation=eval_price_reply,
    backend_sites=["shopping", "reddit"],
    logins={"reddit": FORUM_USER},
    difficulty="6-9",
)
def expert_price_reply(p: Params, obs: Observation) -> Expert:
    price, obs = yield from _shop_price(obs, p["product"])
    obs = yield from _go_site(obs, "reddit", f"It costs {price}; now to the forum.")
    text = f"The {p['product']} costs {price} at One Stop Market."
    obs = yield from _forum_reply(obs, p["post"], text)
    yield answer("done", f"My comment gives the price {price}.")


# --------------------------------------------------------------------------------------------
# 605 change (shop -> GitLab): comment on a Storefront issue with a product's price
# --------------------------------------------------------------------------------------------


def sample_price_issue_comment(conns: Conns, rng: random.Random) -> Params | None:
    product = pick_product(conns["shopping"], rng)
    if product is None:
        return None
    gl = conns["gitlab"]
    project = _project(gl, SHOP_PROJECT)
    issues = gl.execute(
        "SELECT id, title FROM issues WHERE project_id = ? AND state = 'opened' ORDER BY id",
        (project["id"],),
    ).fetchall()
    issue = rng.choice(issues)
    same = sum(1 for i in issues if fold(issue["title"]) in fold(i["title"]))
    if same != 1:  # the search for its title must find it alone
        return None
    return {
        "issue": issue["title"],
        "product": product["name"],
        "_price": _price(product),
        "_issue_id": issue["id"],
        "_uid": user_id(gl, GITLAB_USER),
    }


def eval_price_issue_comment(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT body FROM notes WHERE noteable_type = 'issue' AND noteable_id = ? "
            "AND author_id = ? AND system = 0 ORDER BY id DESC",
            [p["_issue_id"], p["_uid"]],
            must_include=[p["_price"]],
            description="my newest comment on the issue gives the price",
            site="gitlab",
        )
    )


@TEMPLATES.template(
    id=605,
    name="cross.price_issue_comment",
    writes={"gitlab.issues": 1, "gitlab.notes": 1, "gitlab.projects": 1},
    sites=["shopping", "gitlab"],
    kind="change",
    intent='Comment on the issue "{issue}" of the GitLab project Storefront with the '
    "current price of the {product} in the shop (like $12.34).",
    start_url="__SHOPPING__/",
    sample=sample_price_issue_comment,
    evaluation=eval_price_issue_comment,
    backend_sites=["shopping", "gitlab"],
    logins={"gitlab": GITLAB_USER},
    difficulty="10+",
)
def expert_price_issue_comment(p: Params, obs: Observation) -> Expert:
    price, obs = yield from _shop_price(obs, p["product"])
    obs = yield from _go_site(obs, "gitlab", f"It costs {price}; now to GitLab.")
    text = f"Current shop price of the {p['product']}: {price}"
    obs = yield from _gitlab_comment(obs, SHOP_PROJECT, p["issue"], text)
    yield answer("done", f"The issue now has a comment with the price {price}.")


# --------------------------------------------------------------------------------------------
# 606 change (map -> forum): reply with the closest place of a category
# --------------------------------------------------------------------------------------------


def sample_closest_reply(conns: Conns, rng: random.Random) -> Params | None:
    found = _closest(conns["map"], rng)
    post = _forum_post(conns["reddit"], rng)
    if found is None or post is None:
        return None
    place, cat, best, rivals = found
    return {
        "category": cat["name"].lower(),
        "place": place["name"],
        "post": post["title"],
        "_category_option": cat["name"],
        "_name": best["name"],
        "_street": street_address(best),
        "_rivals": [r["name"] for r in rivals] + [street_address(r) for r in rivals],
        "_post_id": post["id"],
        "_user": user_id(conns["reddit"], FORUM_USER),
    }


def eval_closest_reply(p: Params) -> dict[str, Any]:
    return _reply_check(
        p,
        [p["_name"], p["_street"]],
        "my newest comment names the place and its address, and no runner-up",
        exclude=p["_rivals"],
    )


def _option(category: str) -> str:
    """The map's "Category" option for a category as intents name it (``café`` -> ``Café``)."""
    return {"fuel station": "Fuel Station"}.get(category, category.capitalize())


@TEMPLATES.template(
    id=606,
    name="cross.closest_place_reply",
    writes={"reddit.comments": 1},
    sites=["map", "reddit"],
    kind="change",
    intent="Find the {category} closest to {place} on the map (straight-line distance) and "
    'reply to the forum post "{post}" with its name and street address.',
    start_url="__MAP__/",
    sample=sample_closest_reply,
    evaluation=eval_closest_reply,
    backend_sites=["map", "reddit"],
    logins={"reddit": FORUM_USER},
    difficulty="10+",
)
def expert_closest_reply(p: Params, obs: Observation) -> Expert:
    name, obs = yield from _map_closest(obs, p["place"], _option(p["category"]))
    full, obs = yield from _map_address(obs, name)
    obs = yield from _go_site(obs, "reddit", f"The closest is {name}, {full}; to the forum.")
    text = f"The closest {p['category']} to {p['place']} is {name}, {full}."
    obs = yield from _forum_reply(obs, p["post"], text)
    yield answer("done", f"My comment names {name} and its address.")


# --------------------------------------------------------------------------------------------
# 640 held out, change (map -> GitLab): an issue naming the closest place of a category
# --------------------------------------------------------------------------------------------


def sample_closest_issue(conns: Conns, rng: random.Random) -> Params | None:
    found = _closest(conns["map"], rng)
    if found is None:
        return None
    place, cat, best, rivals = found
    project = _project(conns["gitlab"], rng.choice(ROUTE_PROJECTS))
    return {
        "project": project["name"],
        "title": f"Add nearest {cat['name'].lower()} to {place['name']}",
        "category": cat["name"].lower(),
        "place": place["name"],
        "_name": best["name"],
        "_rivals": [r["name"] for r in rivals],
        "_pid": project["id"],
        "_uid": user_id(conns["gitlab"], GITLAB_USER),
    }


@TEMPLATES.template(
    id=640,
    name="cross.closest_place_issue",
    writes={"gitlab.issues": 1, "gitlab.projects": 1},
    sites=["map", "gitlab"],
    kind="change",
    intent='Open an issue titled "{title}" in the GitLab project {project} whose '
    "description names the {category} closest to {place} on the map (straight-line "
    "distance).",
    start_url="__MAP__/",
    sample=sample_closest_issue,
    evaluation=lambda p: state_eval(*_new_issue_check(p, p["_name"], exclude=p["_rivals"])),
    backend_sites=["map", "gitlab"],
    logins={"gitlab": GITLAB_USER},
    heldout=True,
    difficulty="10+",
)
def expert_closest_issue(p: Params, obs: Observation) -> Expert:
    name, obs = yield from _map_closest(obs, p["place"], _option(p["category"]))
    obs = yield from _go_site(obs, "gitlab", f"The nearest {p['category']} is {name}; to GitLab.")
    desc = f"The {p['category']} closest to {p['place']} is {name}."
    obs = yield from _gitlab_new_issue(obs, p["project"], p["title"], desc)
    yield answer("done", f"The issue names {name}.")


# --------------------------------------------------------------------------------------------
# 641 held out, change (shop -> forum): post which of two products is cheaper
# --------------------------------------------------------------------------------------------


def sample_cheaper_post(conns: Conns, rng: random.Random) -> Params | None:
    a, b = pick_product(conns["shopping"], rng), pick_product(conns["shopping"], rng)
    if a is None or b is None or a["id"] == b["id"] or a["price"] == b["price"]:
        return None
    cheap = min(a, b, key=lambda x: x["price"])
    title = f"{a['name']} or {b['name']}?"
    if conns["reddit"].execute("SELECT 1 FROM submissions WHERE title = ?", (title,)).fetchone():
        return None
    return {
        "a": a["name"],
        "b": b["name"],
        "forum": "personalfinance",
        "title": title,
        "_name": cheap["name"],
        "_price": _price(cheap),
        "_forum_id": _forum_id(conns["reddit"], "personalfinance"),
        "_user": user_id(conns["reddit"], FORUM_USER),
    }


@TEMPLATES.template(
    id=641,
    name="cross.cheaper_product_post",
    writes={"reddit.submissions": 1},
    sites=["shopping", "reddit"],
    kind="change",
    intent="Which is cheaper in the shop, the {a} or the {b}? Post in the f/{forum} forum a "
    'new post titled "{title}" whose text names the cheaper one and its price.',
    start_url="__SHOPPING__/",
    sample=sample_cheaper_post,
    evaluation=lambda p: state_eval(*_new_post_check(p, p["_name"], p["_price"])),
    backend_sites=["shopping", "reddit"],
    logins={"reddit": FORUM_USER},
    heldout=True,
    difficulty="10+",
)
def expert_cheaper_post(p: Params, obs: Observation) -> Expert:
    price_a, obs = yield from _shop_price(obs, p["a"])
    price_b, obs = yield from _shop_price(obs, p["b"])

    def value(price: str) -> float:
        return float(price[1:].replace(",", ""))

    name, price = (p["a"], price_a) if value(price_a) < value(price_b) else (p["b"], price_b)
    obs = yield from _go_site(obs, "reddit", f"{name} is cheaper at {price}; to the forum.")
    body = f"The {name} is cheaper: {price} at One Stop Market."
    obs = yield from _forum_new_post(obs, p["forum"], p["title"], body)
    yield answer("done", f"The post says {name} is cheaper at {price}.")


# --------------------------------------------------------------------------------------------
# 642 held out, info (shop + map): a SKU and the place at coordinates
# --------------------------------------------------------------------------------------------


def sample_sku_and_place(conns: Conns, rng: random.Random) -> Params | None:
    product = pick_product(conns["shopping"], rng)
    if product is None:
        return None
    place = rng.choice(searchable_places(conns["map"]))
    return {
        "product": product["name"],
        "coords": fmt_latlon(place["lat"], place["lon"]),
        "_sku": product["sku"],
        "_name": place["name"],
    }


@TEMPLATES.template(
    id=642,
    name="cross.sku_and_place_at_coordinates",
    sites=SHOP_MAP,
    kind="info",
    intent="What is the SKU of the {product} in the shop, and which place is at the "
    "coordinates {coords} on the map? Answer with both, like: ABC123, Blue Owl Café",
    start_url="__SHOPPING__/",
    sample=sample_sku_and_place,
    evaluation=lambda p: string_eval([p["_sku"], p["_name"]], "must_include"),
    backend_sites=SHOP_MAP,
    heldout=True,
    difficulty="6-9",
)
def expert_sku_and_place(p: Params, obs: Observation) -> Expert:
    box = find(obs, "textbox", "Search", exact=True)
    obs = yield search(box, p["product"], f"I search the shop for '{p['product']}'.")
    link, obs = yield from seek(obs, "link", p["product"], "I scroll to the product.", exact=True)
    obs = yield click(link, "The SKU is on the product page; I open it.")
    sku = grab(obs, r"SKU: (\w+)", "SKU")
    obs = yield from _go_site(obs, "map", f"The SKU is {sku}; now the coordinates on the map.")
    obs = yield from _map_search(obs, p["coords"], "The map's search takes coordinates.")
    first = next((el for el in elements(obs.text) if " 0 m away" in line_after(obs, el)), None)
    if first is None:
        raise ExpertError(f"expert: no place exactly at {p['coords']} on {obs.url}")
    yield answer(f"{sku}, {first.name}", f"SKU {sku}; {first.name} is at {p['coords']}.")
