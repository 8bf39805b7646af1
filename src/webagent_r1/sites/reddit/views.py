"""Pages of the forum ("reddit", WebArena's Postmill): forums, threads, comments, votes.

URL map (all GET unless noted):

    /, /new, /top                       posts of all forums (hot, new, top); ?p= page
    /forums                             all forums with subscriber and post counts
    /f/{forum}[/hot|/new|/top]          a forum's posts; ?p= page
    POST /f/{forum}/subscribe, POST /f/{forum}/unsubscribe
    /f/{forum}/{id}[/{slug}]            a thread: the post and its nested comments
    POST /f/{forum}/{id}/-/comment      comment on the post (parent_id: reply to a comment)
    /f/{forum}/{id}/-/comment/{cid}     one comment with a reply form
    /f/{forum}/{id}/-/edit (GET/POST)   edit your own post
    POST /sv/{id}, POST /cv/{id}        vote on a post / comment (choice 1 or -1; again: retract)
    /submit[/{forum}] (GET/POST)        create a post
    /user/{name}, /user/{name}/comments a user's profile: posts, comments
    /search?q=                          posts whose title or body holds every word
    /login (GET/POST), /logout

A form whose title or forum is over ``base.FIELD_MAX`` characters, or whose text is over
``base.TEXT_MAX``, is refused with an error and nothing is stored.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from starlette.responses import Response
from starlette.routing import BaseRoute

from webagent_r1.sites.base import Ctx, login_required, page, parse_int, too_long
from webagent_r1.sites.reddit.db import hot_rank
from webagent_r1.sites.seed_utils import slugify
from webagent_r1.sites.textcache import SEARCH_CACHE_BYTES, text_cache
from webagent_r1.sites.words import search_words

PER_PAGE = 20
"""Posts (or comments) per listing page."""
SORTS = {"hot": "Hot", "new": "New", "top": "Top"}
SORT_SQL = {
    "hot": "s.hot DESC, s.id DESC",
    "new": "s.created_at DESC, s.id DESC",
    "top": "s.score DESC, s.created_at DESC, s.id DESC",
}
MAX_RETURN_TO = 2_000
"""The longest ``return_to`` path a vote or subscription goes back to; a longer one is
ignored and the default page is used."""

POST_COLUMNS = (
    "s.*, f.name AS forum, u.username AS author, "
    "(SELECT COUNT(*) FROM comments c WHERE c.submission_id = s.id) AS comment_count"
)
POST_FROM = "submissions s JOIN forums f ON f.id = s.forum_id JOIN users u ON u.id = s.user_id"


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def post_url(post: Any) -> str:
    """The canonical URL of a post: ``/f/<forum>/<id>/<title slug>``."""
    return f"/f/{post['forum']}/{post['id']}/{slugify(post['title'])}"


def site_context(ctx: Ctx) -> dict[str, Any]:
    """Template variables of every page: the URL builder of posts."""
    return {"post_url": post_url}


def _forum(ctx: Ctx) -> sqlite3.Row | None:
    return ctx.db.execute(
        "SELECT f.*, (SELECT COUNT(*) FROM subscriptions x WHERE x.forum_id = f.id) AS "
        "subscribers, (SELECT COUNT(*) FROM submissions s WHERE s.forum_id = f.id) AS posts "
        "FROM forums f WHERE f.name = ?",
        (ctx.request.path_params.get("forum", ""),),
    ).fetchone()


def get_post(db: sqlite3.Connection, post_id: int) -> sqlite3.Row | None:
    """A post with its forum name, author and comment count, or None."""
    return db.execute(
        f"SELECT {POST_COLUMNS} FROM {POST_FROM} WHERE s.id = ?", (post_id,)
    ).fetchone()


def _votes(ctx: Ctx, table: str, column: str, ids: list[int]) -> dict[int, int]:
    """The logged-in user's votes (id -> 1 or -1) on the given posts or comments."""
    if ctx.user is None or not ids:
        return {}
    marks = ",".join("?" * len(ids))
    rows = ctx.db.execute(
        f"SELECT {column}, choice FROM {table} WHERE user_id = ? AND {column} IN ({marks})",
        (ctx.user["id"], *ids),
    )
    return {r[0]: r[1] for r in rows}


def _return_to(value: str, default: str) -> str:
    """``value`` when it is a local path of at most :data:`MAX_RETURN_TO` characters, else
    ``default``."""
    local = value.startswith("/") and not value.startswith("//")
    return value if local and len(value) <= MAX_RETURN_TO else default


@text_cache(SEARCH_CACHE_BYTES)
def _post_tokens(title: str, body: str) -> tuple[frozenset[str], str, frozenset[str]]:
    """A post's title words, its title as one string of words, and all its words."""
    t = search_words(title)
    return frozenset(t), " ".join(t), frozenset(t) | frozenset(search_words(body))


def search_ids(db: sqlite3.Connection, query: str) -> list[int]:
    """Ids of posts whose title or body holds every word of ``query``, best match first.

    Words match whole words, singular and plural alike. Posts whose title holds the whole
    query, then more of its words, come first; ties go to the newest post.
    """
    words = search_words(query)[:10]
    if not words:
        return []
    phrase = " ".join(words)
    scored: list[tuple[int, str, int]] = []
    for row in db.execute("SELECT id, title, body, created_at FROM submissions"):
        title, joined, tokens = _post_tokens(row["title"], row["body"])
        if all(w in tokens for w in words):
            in_title = sum(1 for w in words if w in title)
            score = in_title + (len(words) if phrase in joined else 0)
            scored.append((-score, row["created_at"], row["id"]))
    # Best score first; within a score, newest first (two stable sorts).
    scored.sort(key=lambda x: (x[1], x[2]), reverse=True)
    scored.sort(key=lambda x: x[0])
    return [pid for _, _, pid in scored]


def _listing(ctx: Ctx, where: str, params: list[Any], sort: str) -> tuple[list[Any], Any]:
    return ctx.page_rows(
        POST_COLUMNS, f"FROM {POST_FROM} WHERE {where}", params, SORT_SQL[sort], PER_PAGE
    )


def _forum_list(ctx: Ctx) -> list[sqlite3.Row]:
    return ctx.db.execute(
        "SELECT f.*, (SELECT COUNT(*) FROM subscriptions x WHERE x.forum_id = f.id) AS "
        "subscribers, (SELECT COUNT(*) FROM submissions s WHERE s.forum_id = f.id) AS posts "
        "FROM forums f ORDER BY f.name COLLATE NOCASE"
    ).fetchall()


# --------------------------------------------------------------------------------------------
# Listings
# --------------------------------------------------------------------------------------------


async def front(ctx: Ctx) -> Response:
    """The front page: posts of every forum, hot / new / top."""
    sort = ctx.request.url.path.strip("/") or "hot"
    posts, pager = _listing(ctx, "1", [], sort)
    subscribed = []
    if ctx.user is not None:
        subscribed = ctx.db.execute(
            "SELECT f.name FROM subscriptions x JOIN forums f ON f.id = x.forum_id "
            "WHERE x.user_id = ? ORDER BY f.name COLLATE NOCASE",
            (ctx.user["id"],),
        ).fetchall()
    return ctx.render(
        "listing.html",
        heading="All forums",
        forum=None,
        posts=posts,
        pager=pager,
        sort=sort,
        base="",
        forums=_forum_list(ctx),
        subscribed=subscribed,
        is_subscribed=False,
    )


async def forum_page(ctx: Ctx) -> Response:
    """A forum's posts with its sidebar (description, subscribers, subscribe button)."""
    forum = _forum(ctx)
    if forum is None:
        return ctx.not_found("forum")
    sort = ctx.request.path_params.get("sort", "hot")
    if sort not in SORTS:
        return ctx.not_found()
    posts, pager = _listing(ctx, "s.forum_id = ?", [forum["id"]], sort)
    return ctx.render(
        "listing.html",
        heading=f"f/{forum['name']}",
        forum=forum,
        posts=posts,
        pager=pager,
        sort=sort,
        base=f"/f/{forum['name']}",
        forums=[],
        subscribed=[],
        is_subscribed=ctx.user_has("subscriptions", "forum_id", forum["id"]),
    )


async def forums(ctx: Ctx) -> Response:
    """The list of forums."""
    rows = _forum_list(ctx)
    mine: set[int] = set()
    if ctx.user is not None:
        mine = {
            r[0]
            for r in ctx.db.execute(
                "SELECT forum_id FROM subscriptions WHERE user_id = ?", (ctx.user["id"],)
            )
        }
    return ctx.render("forums.html", forums=rows, mine=mine)


async def subscribe(ctx: Ctx) -> Response:
    """POST: subscribe to (or, on .../unsubscribe, unsubscribe from) a forum."""
    forum = _forum(ctx)
    if forum is None:
        return ctx.not_found("forum")
    form = await ctx.form()
    back = _return_to(form.get("return_to", ""), f"/f/{forum['name']}")
    if ctx.user is None:
        return ctx.redirect(f"/login?next={back}", "You must log in to subscribe.", "notice")
    if ctx.request.url.path.endswith("/unsubscribe"):
        ctx.db.execute(
            "DELETE FROM subscriptions WHERE user_id = ? AND forum_id = ?",
            (ctx.user["id"], forum["id"]),
        )
        msg = f"You are no longer subscribed to f/{forum['name']}."
    else:
        ctx.db.execute(
            "INSERT OR IGNORE INTO subscriptions VALUES (?, ?, ?)",
            (ctx.user["id"], forum["id"], ctx.now()),
        )
        msg = f"You are now subscribed to f/{forum['name']}."
    ctx.db.commit()
    return ctx.redirect(back, msg)


async def search(ctx: Ctx) -> Response:
    """Search posts by the words of their title and body."""
    q = ctx.arg("q")
    if not search_words(q):
        return ctx.render("search.html", query=q, posts=[], pager=None, error=None)
    ids = search_ids(ctx.db, q)
    page_ids, pager = ctx.page_items(ids, PER_PAGE)
    rows = {
        r["id"]: r
        for r in ctx.db.execute(
            f"SELECT {POST_COLUMNS} FROM {POST_FROM} WHERE s.id IN "
            f"({','.join('?' * len(page_ids)) or 'NULL'})",
            page_ids,
        )
    }
    return ctx.render(
        "search.html", query=q, posts=[rows[i] for i in page_ids], pager=pager, error=None
    )


# --------------------------------------------------------------------------------------------
# Threads and comments
# --------------------------------------------------------------------------------------------


def _post_of(ctx: Ctx) -> sqlite3.Row | None:
    """The post of the URL, if it exists in the forum the URL names."""
    post = get_post(ctx.db, ctx.path_int("post_id") or 0)
    if post is None or post["forum"].lower() != ctx.request.path_params["forum"].lower():
        return None
    return post


def comment_tree(db: sqlite3.Connection, post_id: int) -> list[dict[str, Any]]:
    """The comments of a post as a tree: best score first, then oldest first."""
    rows = db.execute(
        "SELECT c.*, u.username AS author FROM comments c JOIN users u ON u.id = c.user_id "
        "WHERE c.submission_id = ? ORDER BY c.score DESC, c.created_at, c.id",
        (post_id,),
    ).fetchall()
    nodes = {r["id"]: {**dict(r), "children": []} for r in rows}
    roots = []
    for r in rows:
        node = nodes[r["id"]]
        parent = nodes.get(r["parent_id"]) if r["parent_id"] is not None else None
        (parent["children"] if parent else roots).append(node)
    return roots


async def thread(ctx: Ctx) -> Response:
    """A post with its nested comments and a comment form."""
    post = _post_of(ctx)
    if post is None:
        return ctx.not_found("submission")
    tree = comment_tree(ctx.db, post["id"])
    ids = [
        r[0]
        for r in ctx.db.execute("SELECT id FROM comments WHERE submission_id = ?", (post["id"],))
    ]
    return ctx.render(
        "thread.html",
        post=post,
        comments=tree,
        post_vote=_votes(ctx, "submission_votes", "submission_id", [post["id"]]).get(post["id"]),
        comment_votes=_votes(ctx, "comment_votes", "comment_id", ids),
    )


async def comment_page(ctx: Ctx) -> Response:
    """One comment, its replies, and a form to reply to it."""
    post = _post_of(ctx)
    if post is None:
        return ctx.not_found("submission")
    cid = ctx.path_int("comment_id") or 0
    comment = ctx.db.execute(
        "SELECT c.*, u.username AS author FROM comments c JOIN users u ON u.id = c.user_id "
        "WHERE c.id = ? AND c.submission_id = ?",
        (cid, post["id"]),
    ).fetchone()
    if comment is None:
        return ctx.not_found("comment")
    replies = ctx.db.execute(
        "SELECT c.*, u.username AS author FROM comments c JOIN users u ON u.id = c.user_id "
        "WHERE c.parent_id = ? ORDER BY c.score DESC, c.created_at, c.id",
        (cid,),
    ).fetchall()
    return ctx.render(
        "comment.html",
        post=post,
        comment=comment,
        replies=replies,
        votes=_votes(ctx, "comment_votes", "comment_id", [cid, *[r["id"] for r in replies]]),
    )


async def add_comment(ctx: Ctx) -> Response:
    """POST body (and parent_id for a reply to a comment): add a comment to the thread."""
    post = _post_of(ctx)
    if post is None:
        return ctx.not_found("submission")
    url = post_url(post)
    if ctx.user is None:
        return ctx.redirect(f"/login?next={url}", "You must log in to comment.", "notice")
    form = await ctx.form()
    body = form.get("body", "")
    parent_id = parse_int(form.get("parent_id"), 0) or None
    if (
        parent_id is not None
        and not ctx.db.execute(
            "SELECT 1 FROM comments WHERE id = ? AND submission_id = ?", (parent_id, post["id"])
        ).fetchone()
    ):
        return ctx.redirect(url, "The comment you replied to does not exist.", "error")
    back = f"/f/{post['forum']}/{post['id']}/-/comment/{parent_id}" if parent_id else url
    if error := too_long({"comment": body}, long=["comment"]):
        return ctx.redirect(back, error, "error")
    if not body:
        return ctx.redirect(back, "The comment must not be empty.", "error")
    cur = ctx.db.execute(
        "INSERT INTO comments (submission_id, parent_id, user_id, body, created_at, score) "
        "VALUES (?, ?, ?, ?, ?, 0)",
        (post["id"], parent_id, ctx.user["id"], body, ctx.now()),
    )
    ctx.db.commit()
    return ctx.redirect(f"{url}#comment-{cur.lastrowid}", "Your comment was posted.")


async def edit_post(ctx: Ctx) -> Response:
    """GET: the edit form of your own post. POST: save the new title and body."""
    post = _post_of(ctx)
    if post is None:
        return ctx.not_found("submission")
    if ctx.user is None:
        return ctx.login_redirect("You must log in to edit a post.")
    if post["user_id"] != ctx.user["id"]:
        return ctx.render(
            "error.html", status=403, code=403, message="You can only edit your own posts."
        )
    values = {"title": post["title"], "body": post["body"]}
    if ctx.request.method == "POST":
        form = await ctx.form()
        values = {k: form.get(k, "") for k in values}
        error = too_long(values, long=["body"])
        if error is None and not values["title"]:
            error = "The title is required."
        if error:
            return ctx.render("edit.html", post=post, values=values, error=error)
        ctx.db.execute(
            "UPDATE submissions SET title = ?, body = ?, edited_at = ? WHERE id = ?",
            (values["title"], values["body"], ctx.now(), post["id"]),
        )
        ctx.db.commit()
        new = get_post(ctx.db, post["id"])
        return ctx.redirect(post_url(new), "The submission was edited.")
    return ctx.render("edit.html", post=post, values=values)


async def vote(ctx: Ctx) -> Response:
    """POST choice=1|-1 on /sv/{id} (a post) or /cv/{id} (a comment); the same vote again
    retracts it."""
    is_post = ctx.request.url.path.startswith("/sv/")
    table, col, target = (
        ("submission_votes", "submission_id", "submissions")
        if is_post
        else ("comment_votes", "comment_id", "comments")
    )
    tid = ctx.path_int("target_id") or 0
    row = ctx.db.execute(f"SELECT * FROM {target} WHERE id = ?", (tid,)).fetchone()
    if row is None:
        return ctx.not_found("post" if is_post else "comment")
    post = get_post(ctx.db, tid if is_post else row["submission_id"])
    assert post is not None
    form = await ctx.form()
    back = _return_to(form.get("return_to", ""), post_url(post))
    if ctx.user is None:
        return ctx.redirect(f"/login?next={back}", "You must log in to vote.", "notice")
    choice = parse_int(form.get("choice"), 0)
    if choice not in (1, -1):
        return ctx.redirect(back, "Invalid vote.", "error")
    uid = ctx.user["id"]
    old = ctx.db.execute(
        f"SELECT choice FROM {table} WHERE user_id = ? AND {col} = ?", (uid, tid)
    ).fetchone()
    if old is not None and old[0] == choice:
        ctx.db.execute(f"DELETE FROM {table} WHERE user_id = ? AND {col} = ?", (uid, tid))
        msg = "Your vote was retracted."
    else:
        ctx.db.execute(
            f"INSERT OR REPLACE INTO {table} (user_id, {col}, choice) VALUES (?, ?, ?)",
            (uid, tid, choice),
        )
        msg = "Your upvote was recorded." if choice == 1 else "Your downvote was recorded."
    score = ctx.db.execute(
        f"SELECT COALESCE(SUM(choice), 0) FROM {table} WHERE {col} = ?", (tid,)
    ).fetchone()[0]
    if is_post:
        ctx.db.execute(
            "UPDATE submissions SET score = ?, hot = ? WHERE id = ?",
            (score, hot_rank(score, row["created_at"]), tid),
        )
    else:
        ctx.db.execute("UPDATE comments SET score = ? WHERE id = ?", (score, tid))
    ctx.db.commit()
    return ctx.redirect(back, msg)


@login_required("You must log in to submit a post.")
async def submit(ctx: Ctx) -> Response:
    """GET: the new-post form. POST: create the post and open it."""
    all_forums = _forum_list(ctx)
    values = {"forum": ctx.request.path_params.get("forum", ""), "title": "", "body": ""}
    if ctx.request.method == "POST":
        form = await ctx.form()
        values = {k: form.get(k, "") for k in values}
        forum = next((f for f in all_forums if f["name"].lower() == values["forum"].lower()), None)
        error = too_long(values, long=["body"])
        if error is None and forum is None:
            error = "Please choose a forum."
        elif error is None and not values["title"]:
            error = "The title is required."
        if error:
            return ctx.render("submit.html", forums=all_forums, values=values, error=error)
        assert forum is not None
        now = ctx.now()
        cur = ctx.db.execute(
            "INSERT INTO submissions (forum_id, user_id, title, body, created_at, score, hot) "
            "VALUES (?, ?, ?, ?, ?, 0, ?)",
            (
                forum["id"],
                ctx.user["id"],
                values["title"],
                values["body"],
                now,
                hot_rank(0, now),
            ),
        )
        ctx.db.commit()
        post = get_post(ctx.db, int(cur.lastrowid or 0))
        return ctx.redirect(post_url(post), "Your post was submitted.")
    return ctx.render("submit.html", forums=all_forums, values=values)


# --------------------------------------------------------------------------------------------
# Users
# --------------------------------------------------------------------------------------------


async def profile(ctx: Ctx) -> Response:
    """A user's profile: join date, counts, and their posts or comments (newest first)."""
    name = ctx.request.path_params["username"]
    person = ctx.db.execute("SELECT * FROM users WHERE username = ?", (name,)).fetchone()
    if person is None:
        return ctx.not_found("user")
    tab = "comments" if ctx.request.url.path.rstrip("/").endswith("/comments") else "posts"
    n_posts = ctx.db.execute(
        "SELECT COUNT(*) FROM submissions WHERE user_id = ?", (person["id"],)
    ).fetchone()[0]
    n_comments = ctx.db.execute(
        "SELECT COUNT(*) FROM comments WHERE user_id = ?", (person["id"],)
    ).fetchone()[0]
    posts: list[Any] = []
    comments: list[Any] = []
    if tab == "posts":
        posts, pager = _listing(ctx, "s.user_id = ?", [person["id"]], "new")
    else:
        comments, pager = ctx.page_rows(
            "c.*, s.title AS post_title, s.id AS post_id, f.name AS forum",
            "FROM comments c JOIN submissions s ON s.id = c.submission_id "
            "JOIN forums f ON f.id = s.forum_id WHERE c.user_id = ?",
            [person["id"]],
            "c.created_at DESC, c.id DESC",
            PER_PAGE,
            total=n_comments,
        )
    karma = ctx.db.execute(
        "SELECT (SELECT COALESCE(SUM(score), 0) FROM submissions WHERE user_id = ?) + "
        "(SELECT COALESCE(SUM(score), 0) FROM comments WHERE user_id = ?)",
        (person["id"], person["id"]),
    ).fetchone()[0]
    return ctx.render(
        "profile.html",
        person=person,
        tab=tab,
        n_posts=n_posts,
        n_comments=n_comments,
        karma=karma,
        posts=posts,
        comments=comments,
        pager=pager,
    )


def routes() -> list[BaseRoute]:
    """The forum's routes (login/logout are added by the framework)."""
    post = ("POST",)
    both = ("GET", "POST")
    return [
        page("/", front),
        page("/hot", front),
        page("/new", front),
        page("/top", front),
        page("/forums", forums),
        page("/search", search),
        page("/submit", submit, both),
        page("/submit/{forum}", submit, both),
        page("/sv/{target_id:id}", vote, post),
        page("/cv/{target_id:id}", vote, post),
        page("/user/{username}", profile),
        page("/user/{username}/comments", profile),
        page("/f/{forum}", forum_page),
        page("/f/{forum}/subscribe", subscribe, post),
        page("/f/{forum}/unsubscribe", subscribe, post),
        page("/f/{forum}/{post_id:id}", thread),
        page("/f/{forum}/{post_id:id}/-/comment", add_comment, post),
        page("/f/{forum}/{post_id:id}/-/comment/{comment_id:id}", comment_page),
        page("/f/{forum}/{post_id:id}/-/edit", edit_post, both),
        page("/f/{forum}/{post_id:id}/{slug}", thread),
        page("/f/{forum}/{sort}", forum_page),
    ]
