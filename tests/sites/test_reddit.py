"""The forum ("reddit"): seeding, listings, threads, votes, posting, isolation, escaping.

Fast HTTP tests against the running site, plus a few in real Chromium (marked ``browser``).
"""

from __future__ import annotations

import asyncio
import html
import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from webagent_r1.config import EnvConfig
from webagent_r1.rollout.env import WebEnv
from webagent_r1.sites import INSTANCE_COOKIE, SITES, RunningSites, start_sites
from webagent_r1.sites.base import BASE_SCHEMA, now_str
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.sites.reddit.db import DEFAULT_USER, USER_PASSWORD, hot_rank
from webagent_r1.sites.reddit.views import comment_tree, search_ids
from webagent_r1.sites.seed_utils import check_password, data_checksum
from webagent_r1.tasks.experts import find
from webagent_r1.types import Task

Client = Callable[..., httpx.Client]


@pytest.fixture(scope="module")
def forum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSites]:
    """The forum alone on a free port, with a private cache of its pristine database."""
    running = start_sites(["reddit"], ports="auto", home=tmp_path_factory.mktemp("home"))
    yield running
    running.stop()


@pytest.fixture
def client(forum: RunningSites) -> Client:
    """``client(instance_id, username=None)`` -> an httpx client browsing the forum."""

    def make(instance_id: str, username: str | None = None) -> httpx.Client:
        cookies = {INSTANCE_COOKIE: instance_id}
        if username is not None:
            ck = forum.login_cookie("reddit", instance_id, username)
            cookies[ck["name"]] = ck["value"]
        return httpx.Client(base_url=forum.urls["reddit"], cookies=cookies, follow_redirects=True)

    return make


def _text(page: str) -> str:
    page = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", page)
    page = re.sub(r"<[^>]+>", " ", page)
    return re.sub(r"\s+", " ", page).strip()


# -- pure logic -------------------------------------------------------------------------------


def test_seed_is_deterministic(tmp_path: Path) -> None:
    backend = SITES["reddit"].backend
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    backend.build(a)
    backend.build(b)
    with sqlite3.connect(a) as da, sqlite3.connect(b) as db:
        assert data_checksum(da) == data_checksum(db)


def test_seed_sizes_and_invariants(forum: RunningSites) -> None:
    db = forum.connect("reddit", "default")
    count = {
        t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
        for t in ("forums", "users", "submissions", "comments", "subscriptions")
    }
    assert count["forums"] == 12 and count["users"] == 40 and count["submissions"] == 300
    assert 850 <= count["comments"] <= 1150
    titles = [r[0] for r in db.execute("SELECT title FROM submissions")]
    assert len(set(titles)) == len(titles), "post titles are unique"
    bodies = [r[0] for r in db.execute("SELECT body FROM comments")]
    assert len(set(bodies)) == len(bodies), "comment texts are unique"
    # Cached scores agree with the votes, and replies stay inside their thread.
    assert not db.execute(
        "SELECT 1 FROM submissions s WHERE score != (SELECT COALESCE(SUM(choice), 0) "
        "FROM submission_votes v WHERE v.submission_id = s.id)"
    ).fetchone()
    assert not db.execute(
        "SELECT 1 FROM comments c JOIN comments p ON p.id = c.parent_id "
        "WHERE p.submission_id != c.submission_id OR p.created_at > c.created_at"
    ).fetchone()
    for user in SITES["reddit"].users:
        row = db.execute(
            "SELECT password_hash FROM users WHERE username = ?", (user.username,)
        ).fetchone()
        assert row is not None and check_password(USER_PASSWORD, row[0])
    db.close()


def test_hot_rank_prefers_new_and_high_scores() -> None:
    old, new = "2023-01-01 00:00:00", "2023-01-02 00:00:00"
    assert hot_rank(10, new) > hot_rank(10, old)
    assert hot_rank(100, old) > hot_rank(1, old) > hot_rank(-5, old)
    # 12.5 hours of age are worth a factor of ten in score.
    assert hot_rank(10, "2023-01-01 12:30:00") == pytest.approx(hot_rank(100, old), abs=1e-6)


def test_search_and_comment_tree(forum: RunningSites) -> None:
    db = forum.connect("reddit", "default")
    post = db.execute("SELECT id, title FROM submissions WHERE id = 42").fetchone()
    assert search_ids(db, post["title"])[0] == 42  # the whole title ranks its post first
    ids = search_ids(db, "sourdough")
    assert ids and all(
        "sourdough" in (r["title"] + r["body"]).lower()
        for r in db.execute(f"SELECT * FROM submissions WHERE id IN ({','.join(map(str, ids))})")
    )
    assert search_ids(db, "zzqqxx") == [] and search_ids(db, "  ") == []
    busy = db.execute(
        "SELECT submission_id FROM comments WHERE parent_id IS NOT NULL LIMIT 1"
    ).fetchone()[0]
    tree = comment_tree(db, busy)

    def flat(nodes: list) -> list[int]:
        return [n["id"] for n in nodes] + [i for n in nodes for i in flat(n["children"])]

    n = db.execute("SELECT COUNT(*) FROM comments WHERE submission_id = ?", (busy,)).fetchone()[0]
    assert sorted(flat(tree)) == sorted(
        r[0] for r in db.execute("SELECT id FROM comments WHERE submission_id = ?", (busy,))
    )
    assert len(tree) < n  # some comments are replies, nested under their parent
    db.close()


# -- pages ------------------------------------------------------------------------------------


def test_listings_sorting_and_pagination(forum: RunningSites, client: Client) -> None:
    db = forum.connect("reddit", "default")
    fid, name, n = db.execute(
        "SELECT f.id, f.name, COUNT(*) AS n FROM forums f JOIN submissions s ON s.forum_id = f.id "
        "GROUP BY f.id ORDER BY n DESC LIMIT 1"
    ).fetchone()
    assert n > 20
    newest = db.execute(
        "SELECT title FROM submissions WHERE forum_id = ? ORDER BY created_at DESC", (fid,)
    ).fetchall()
    top = db.execute(
        "SELECT title FROM submissions WHERE forum_id = ? ORDER BY score DESC, created_at DESC",
        (fid,),
    ).fetchall()
    with client("default") as c:
        page = c.get(f"/f/{name}/new").text
        titles = re.findall(r'class="title" href="[^"]+">([^<]+)<', page)
        assert len(titles) == 20 and titles[0] == newest[0][0].replace("'", "&#39;")
        assert "Page 1 of 2" in _text(page)
        page2 = c.get(f"/f/{name}/new", params={"p": 2}).text
        assert len(re.findall(r'class="title"', page2)) == n - 20
        assert top[0][0].replace("'", "&#39;") in c.get(f"/f/{name}/top").text
        forums = _text(c.get("/forums").text)
        subs = db.execute("SELECT COUNT(*) FROM subscriptions WHERE forum_id = ?", (fid,))
        assert f"f/{name} " in forums and str(subs.fetchone()[0]) in forums
        r = c.get("/search", params={"q": "sourdough bread"})
        assert "posts found" in r.text
        assert c.get("/f/nope").status_code == 404
        assert c.get(f"/f/{name}/sideways").status_code == 404
        assert c.get("/user/nobody-here").status_code == 404
        other = db.execute("SELECT id FROM submissions WHERE forum_id != ? LIMIT 1", (fid,))
        assert c.get(f"/f/{name}/{other.fetchone()[0]}").status_code == 404
    db.close()


def test_login_and_anonymous_writes(forum: RunningSites, client: Client) -> None:
    iid = forum.create_instance()
    with client(iid) as c:
        r = c.post("/login", data={"username": DEFAULT_USER, "password": "nope"})
        assert "sign-in was incorrect" in r.text
        r = c.post("/sv/5", data={"choice": "1"})
        assert r.url.path == "/login" and "log in to vote" in r.text
        assert c.get("/submit").url.path == "/login"
        r = c.post("/login", data={"username": DEFAULT_USER, "password": USER_PASSWORD})
        assert f'href="/user/{DEFAULT_USER}"' in r.text and "Log out" in r.text
    forum.delete_instance(iid)


def test_votes_comments_posts_and_edits(forum: RunningSites, client: Client) -> None:
    iid = forum.create_instance()
    db = forum.connect("reddit", iid)
    uid = db.execute("SELECT id FROM users WHERE username = ?", (DEFAULT_USER,)).fetchone()[0]
    pid, forum_name, score = db.execute(
        "SELECT s.id, f.name, s.score FROM submissions s JOIN forums f ON f.id = s.forum_id "
        "WHERE s.id NOT IN (SELECT submission_id FROM submission_votes WHERE user_id = ?) "
        "AND s.user_id != ? LIMIT 1",
        (uid, uid),
    ).fetchone()
    with client(iid, DEFAULT_USER) as c:
        r = c.post(f"/sv/{pid}", data={"choice": "1"})
        assert "upvote was recorded" in r.text and "Retract upvote" in r.text
        assert db.execute("SELECT score FROM submissions WHERE id = ?", (pid,)).fetchone()[0] == (
            score + 1
        )
        c.post(f"/sv/{pid}", data={"choice": "-1"})  # switch to a downvote
        assert db.execute("SELECT score FROM submissions WHERE id = ?", (pid,)).fetchone()[0] == (
            score - 1
        )
        c.post(f"/sv/{pid}", data={"choice": "-1"})  # the same vote again retracts it
        assert db.execute("SELECT score FROM submissions WHERE id = ?", (pid,)).fetchone()[0] == (
            score
        )
        r = c.post(f"/f/{forum_name}/{pid}/-/comment", data={"body": "First!"})
        assert "comment was posted" in r.text and "First!" in r.text
        cid = db.execute("SELECT id FROM comments WHERE body = 'First!'").fetchone()[0]
        r = c.post(f"/f/{forum_name}/{pid}/-/comment", data={"body": "Me", "parent_id": cid})
        assert db.execute("SELECT parent_id FROM comments WHERE body = 'Me'").fetchone()[0] == cid
        r = c.post(f"/cv/{cid}", data={"choice": "1"})
        assert db.execute("SELECT score FROM comments WHERE id = ?", (cid,)).fetchone()[0] == 1
        r = c.post("/submit", data={"forum": "books", "title": "A new thread", "body": "Hi"})
        assert "/f/books/" in str(r.url) and "post was submitted" in r.text
        new_id = int(str(r.url).split("/f/books/")[1].split("/")[0])
        r = c.post(f"/f/books/{new_id}/-/edit", data={"title": "A new thread", "body": "Bye"})
        assert "was edited" in r.text and "Bye" in r.text
        assert "A new thread" in c.get("/f/books/new").text
        r = c.post("/f/books/subscribe", data={"return_to": "/forums"})
        assert r.url.path == "/forums" and "now subscribed to f/books" in r.text
        # someone else's post cannot be edited
        assert c.get(f"/f/{forum_name}/{pid}/-/edit").status_code == 403
    db.close()
    forum.delete_instance(iid)


def test_instances_are_isolated(forum: RunningSites, client: Client) -> None:
    a, b = forum.create_instance(), forum.create_instance()
    with client(a, DEFAULT_USER) as ca:
        ca.post("/submit", data={"forum": "music", "title": "Only in A", "body": "x"})
        assert "Only in A" in ca.get("/f/music/new").text
    with client(b, DEFAULT_USER) as cb:
        assert "Only in A" not in cb.get("/f/music/new").text
    for iid, want in ((a, 1), (b, 0)):
        with forum.connect("reddit", iid) as db:
            n = db.execute("SELECT COUNT(*) FROM submissions WHERE title = 'Only in A'")
            assert n.fetchone()[0] == want
    forum.delete_instance(a)
    forum.delete_instance(b)


def test_writes_are_stamped_by_the_instance_clock_not_the_wall_clock(
    forum: RunningSites, client: Client
) -> None:
    """Two instances given the same actions, minutes apart or not, show the same pages."""
    pages, stamps = [], []
    for _ in range(2):
        iid = forum.create_instance()
        with client(iid, DEFAULT_USER) as c:
            r = c.post("/submit", data={"forum": "books", "title": "Clock", "body": "x"})
            thread = r.url.path.rsplit("/", 1)[0]
            c.post(f"{thread}/-/comment", data={"body": "first"})
            pages.append((_text(c.get(thread).text), _text(c.get("/f/books/new").text)))
        with forum.connect("reddit", iid) as db:
            post = db.execute("SELECT created_at FROM submissions WHERE title = 'Clock'")
            comment = db.execute("SELECT created_at FROM comments WHERE body = 'first'")
            stamps.append((post.fetchone()[0], comment.fetchone()[0]))
        forum.delete_instance(iid)
        time.sleep(1.1)  # a wall-clock stamp would now differ by a second
    # by hand: logging in does not move the clock; the post is its first write, the comment the
    # second, a minute apart from 2024-02-01 09:00, after every seeded date
    assert stamps == [("2024-02-01 09:01:00", "2024-02-01 09:02:00")] * 2
    assert pages[0] == pages[1]
    assert "Feb 1, 2024, 9:02 AM" in pages[0][0]
    with forum.connect("reddit", "default") as db:
        newest_seeded = db.execute(
            "SELECT s.title FROM submissions s JOIN forums f ON f.id = s.forum_id "
            "WHERE f.name = 'books' ORDER BY s.created_at DESC LIMIT 1"
        ).fetchone()[0]
    listing = html.unescape(pages[0][1])  # newest first: the new post above every seeded one
    assert listing.index("Clock") < listing.index(newest_seeded)


def test_concurrent_writes_get_distinct_times(forum: RunningSites, client: Client) -> None:
    iid = forum.create_instance()
    with client(iid, DEFAULT_USER) as c:
        thread = c.post("/submit", data={"forum": "books", "title": "T", "body": "x"}).url.path
        thread = thread.rsplit("/", 1)[0]
    cookies = dict(c.cookies)

    def post(i: int) -> int:
        with httpx.Client(base_url=forum.urls["reddit"], cookies=cookies) as ci:
            return ci.post(f"{thread}/-/comment", data={"body": f"c{i}"}).status_code

    with ThreadPoolExecutor(8) as pool:
        assert set(pool.map(post, range(8))) <= {200, 303}
    with forum.connect("reddit", iid) as db:
        got = [r[0] for r in db.execute("SELECT created_at FROM comments WHERE body LIKE 'c_'")]
        ticks = db.execute("SELECT ticks FROM site_clock").fetchone()[0]
    assert len(got) == 8 and ticks == 9  # the post, then eight comments
    assert sorted(got) == [f"2024-02-01 09:{m:02d}:00" for m in range(2, 10)]
    forum.delete_instance(iid)


def test_a_write_rolled_back_takes_its_clock_step_back(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "x.sqlite")
    db.executescript(BASE_SCHEMA)
    assert now_str(db) == "2024-02-01 09:01:00"
    db.commit()
    assert now_str(db) == "2024-02-01 09:02:00"
    db.rollback()
    assert db.execute("SELECT ticks FROM site_clock").fetchone()[0] == 1
    assert now_str(db) == "2024-02-01 09:02:00"
    db.close()


def test_user_text_is_escaped(forum: RunningSites, client: Client) -> None:
    iid = forum.create_instance()
    attack = '<script>alert("x")</script>'
    with client(iid, DEFAULT_USER) as c:
        r = c.post("/submit", data={"forum": "books", "title": attack, "body": attack})
        base = r.url.path.rsplit("/", 1)[0]  # /f/books/<id>/<slug> -> /f/books/<id>
        r = c.post(f"{base}/-/comment", data={"body": attack})
        for page in (r.text, c.get("/f/books/new").text, c.get(f"/user/{DEFAULT_USER}").text):
            assert attack not in page and "&lt;script&gt;" in page
    forum.delete_instance(iid)


def test_pages_are_compact(forum: RunningSites, client: Client) -> None:
    sizes = {}
    with client("default", DEFAULT_USER) as c:
        for name, path in [
            ("front", "/"),
            ("forums", "/forums"),
            ("forum", "/f/travel"),
            ("thread", "/f/books/55"),
            ("search", "/search?q=advice"),
            ("profile", f"/user/{DEFAULT_USER}"),
            ("comments", f"/user/{DEFAULT_USER}/comments"),
        ]:
            r = c.get(path)
            assert r.status_code == 200, path
            sizes[name] = len(_text(r.text))
    print("\nvisible text chars:", sizes)
    assert all(300 < n < 4500 for n in sizes.values()), sizes


# -- in real Chromium -------------------------------------------------------------------------


def _act(kind: str, el: str | None = None, arg: str | None = None) -> str:
    parts = [f'action="{kind}"']
    if arg is not None:
        parts.append(f'argument="{arg}"')
    if el is not None:
        parts.append(f'element="{el}"')
    return f"<answer>do({', '.join(parts)})</answer>"


def _task(url: str, user: str | None = DEFAULT_USER) -> Task:
    return Task(task_id="t", intent="test", start_url=url, sites=["reddit"], user=user)


@pytest.fixture
async def envs(browser, forum: RunningSites):  # noqa: ANN001, ANN201
    backend = EmbeddedSites(forum)  # the forum alone: quicker to start than every site
    made = [WebEnv(browser, EnvConfig(max_turns=30), backend=backend) for _ in range(2)]
    yield made
    for e in made:
        await e.close()


def _post_points(text: str) -> int:
    m = re.search(r'button "(?:Retract )?[Uu]pvote"\n(-?\d+) points?', text)
    assert m, text[:800]
    return int(m.group(1))


@pytest.mark.browser
async def test_parallel_episodes_do_not_see_each_others_votes(envs) -> None:  # noqa: ANN001
    a, b = envs
    url = "__REDDIT__/f/books/55"
    obs_a, obs_b = await asyncio.gather(a.reset(_task(url)), b.reset(_task(url)))
    assert a.instance_id != b.instance_id
    start = _post_points(obs_a.text)
    assert _post_points(obs_b.text) == start
    up = find(obs_a, "button", "Upvote", exact=True)
    r_a, r_b = await asyncio.gather(
        a.step(_act("Click", up.id)), b.step(_act("Click", find(obs_b, "link", "f/books").id))
    )
    assert r_a.observation.error is None and r_b.observation.error is None
    assert "upvote was recorded" in r_a.observation.text
    assert _post_points(r_a.observation.text) == start + 1
    r_b = await b.step("<answer>go_backward()</answer>")
    assert _post_points(r_b.observation.text) == start


@pytest.mark.browser
async def test_login_form_accepts_right_and_refuses_wrong_password(envs) -> None:  # noqa: ANN001
    env = envs[0]
    obs = await env.reset(_task("__REDDIT__/login", user=None))
    await env.step(_act("Type", find(obs, "textbox", "Username").id, DEFAULT_USER))
    await env.step(_act("Type", find(obs, "textbox", "Password").id, "wrong-password"))
    r = await env.step(_act("Click", find(obs, "button", "Log in").id))
    assert "sign-in was incorrect" in r.observation.text
    obs = r.observation
    await env.step(_act("Type", find(obs, "textbox", "Username").id, DEFAULT_USER))
    await env.step(_act("Type", find(obs, "textbox", "Password").id, USER_PASSWORD))
    r = await env.step(_act("Click", find(obs, "button", "Log in").id))
    assert f'link "{DEFAULT_USER}"' in r.observation.text and "Log out" in r.observation.text


@pytest.mark.browser
async def test_posted_text_is_shown_not_run(envs) -> None:  # noqa: ANN001
    env = envs[0]
    obs = await env.reset(_task("__REDDIT__/submit/music"))
    evil = "<script>window.__pwned=1</script><b>bold</b>"
    await env.step(_act("Type", find(obs, "textbox", "Title", exact=True).id, evil))
    await env.step(_act("Type", find(obs, "textbox", "Body", exact=True).id, evil))
    r = await env.step(_act("Click", find(obs, "button", "Create submission").id))
    assert r.observation.error is None, r.observation.error
    page = env.session.page
    assert "post was submitted" in await page.evaluate("() => document.body.innerText")
    assert await page.evaluate("() => document.querySelector('h1').innerText") == evil
    assert await page.evaluate("() => window.__pwned === undefined")
    assert await page.evaluate("() => document.querySelectorAll('main b').length") == 0
