"""Task templates of the forum ("reddit", WebArena's Postmill).

Every template samples its parameters from the pristine forum database and grades with a
WebArena ``eval`` spec: ``string_match`` for questions (info), ``url_match`` (with a
``program_html`` check of the heading where a path prefix could match a longer one) for
pages to reach (nav), ``state_match`` SQL checks on the episode's own instance for changes,
and ``program_html`` on the thread page for a comment that must show there. The experts
browse like a user: the search box, the Forums list, the Hot / New / Top tabs, the thread
page's comment list, the profile pages; they read answers off the observation text.

Ids 300-349. Held out (test split only): ``reddit.comment_author_joined`` (309),
``reddit.downvote_comment`` (313), ``reddit.copy_newest_post`` (316),
``reddit.author_profile`` (317).
"""

from __future__ import annotations

import random
import re
import sqlite3
from typing import Any

from webagent_r1.sites.base import fmt_date
from webagent_r1.sites.reddit.content import (
    BODY_CLOSERS,
    BODY_MIDDLES,
    COMMENT_OPENERS,
    FORUMS,
)
from webagent_r1.sites.reddit.db import DEFAULT_USER
from webagent_r1.sites.reddit.views import PER_PAGE, search_ids
from webagent_r1.tasks.experts import (
    Element,
    Expert,
    ExpertError,
    answer,
    click,
    elements,
    find,
    maybe,
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
    more_below,
    page_check,
    posted,
    seek,
    state_check,
    state_eval,
    url_eval,
    user_id,
)
from webagent_r1.types import Observation

USER = DEFAULT_USER
"""The account that tasks which change something log in as."""
START = "__REDDIT__/"


NEW_TITLES = (
    "Weekly discussion: {s}",
    "Tell me your best story about {s}",
    "Rate my setup for {s}",
    "Quick poll about {s}",
    "Hidden gems related to {s}",
    "First time trying {s}, wish me luck",
)
NEW_BODIES = tuple(f"{m} {c}" for m in BODY_MIDDLES[:4] for c in BODY_CLOSERS[:4])
SEARCH_WORDS = ("advice", "mistakes", "experience", "recommendations", "question", "thoughts")
REPLIES = (
    "Thanks, this was really helpful!",
    "I had the exact same experience last year.",
    "Could you share a bit more detail?",
    "Totally agree with this.",
    "This deserves more upvotes.",
    "I respectfully disagree, but good points.",
    "Saving this thread for later.",
    "Great write-up, thank you for sharing.",
)


# --------------------------------------------------------------------------------------------
# Sampling helpers (read the pristine database)
# --------------------------------------------------------------------------------------------


ANSWER_NUMBER = "Answer with a number."

TEMPLATES = Registry(sites=["reddit"], start_url=START)
"""The module's templates, in the suite's order."""


def _posts(conn: sqlite3.Connection) -> list[Any]:
    """Every post with its forum, author and comment count, by id."""
    memo = db_memo(conn, __name__)
    if "posts" not in memo:
        memo["posts"] = conn.execute(
            "SELECT s.*, f.name AS forum, u.username AS author, u.created_at AS joined, "
            "(SELECT COUNT(*) FROM comments c WHERE c.submission_id = s.id) AS comment_count, "
            "(SELECT COUNT(*) FROM submissions x WHERE x.user_id = s.user_id) AS author_posts "
            "FROM submissions s JOIN forums f ON f.id = s.forum_id "
            "JOIN users u ON u.id = s.user_id ORDER BY s.id"
        ).fetchall()
    return memo["posts"]


def _findable(conn: sqlite3.Connection, post: Any) -> bool:
    """A search for the post's full title lists it first."""
    memo = db_memo(conn, __name__)
    key = ("findable", post["id"])
    if key not in memo:
        memo[key] = search_ids(conn, post["title"])[:1] == [post["id"]]
    return memo[key]


def _pick_post(conn: sqlite3.Connection, rng: random.Random, ok: Any = None) -> Any | None:
    rows = [p for p in _posts(conn) if ok is None or ok(p)]
    if not rows:
        return None
    p = rng.choice(rows)
    return p if _findable(conn, p) else None


def _forums(conn: sqlite3.Connection) -> list[Any]:
    return conn.execute(
        "SELECT f.*, (SELECT COUNT(*) FROM subscriptions x WHERE x.forum_id = f.id) AS subs, "
        "(SELECT COUNT(*) FROM submissions s WHERE s.forum_id = f.id) AS posts "
        "FROM forums f ORDER BY f.id"
    ).fetchall()


def _comments(conn: sqlite3.Connection, post_id: int) -> list[Any]:
    return conn.execute(
        "SELECT c.*, u.username AS author, u.created_at AS joined FROM comments c "
        "JOIN users u ON u.id = c.user_id WHERE c.submission_id = ? ORDER BY c.id",
        (post_id,),
    ).fetchall()


def _ranked(conn: sqlite3.Connection, forum_id: int, order: str) -> list[Any]:
    """A forum's posts in the order of its New or Top tab."""
    sql = {"new": "created_at DESC, id DESC", "top": "score DESC, created_at DESC, id DESC"}
    return conn.execute(
        f"SELECT * FROM submissions WHERE forum_id = ? ORDER BY {sql[order]}", (forum_id,)
    ).fetchall()


def _new_text(rng: random.Random) -> str:
    """A new comment: a whole-sentence opener ("Great post.") and a reply sentence."""
    openers = [o for o in COMMENT_OPENERS if o.endswith((".", "!"))]
    return f"{rng.choice(openers)} {rng.choice(REPLIES)}"


# --------------------------------------------------------------------------------------------
# Expert helpers (read the observation only)
# --------------------------------------------------------------------------------------------


def _after(obs: Observation, el: Element, role: str, name: str | None = None) -> Element:
    """The first element with ``role`` (and exactly ``name``) that comes after ``el``."""
    els = elements(obs.text)
    idx = next(i for i, e in enumerate(els) if e.id == el.id)
    for e in els[idx + 1 :]:
        if e.role == role and (name is None or e.name == name):
            return e
    raise ExpertError(f"expert: no {role} {name!r} after [{el.id}] on {obs.url}")


def _search_post(obs: Observation, title: str) -> Sub:
    """Search for a post by its full title; returns its link in the results."""
    box = find(obs, "textbox", "Search")
    obs = yield search(box, title, f'I search the forum for the post titled "{title}".')
    link, obs = yield from seek(
        obs, "link", title, "The post should be among the results; I scroll.", exact=True
    )
    return link, obs


def _open_post(obs: Observation, title: str) -> Sub:
    """Search for a post by its full title and open its thread."""
    link, obs = yield from _search_post(obs, title)
    obs = yield click(link, f'The results list "{title}"; I open the thread.')
    return obs


def _open_forum(obs: Observation, forum: str) -> Sub:
    """From any page: the Forums list, then the forum."""
    obs = yield click(
        find(obs, "link", "Forums", exact=True), "The Forums page lists every forum; I open it."
    )
    link = find(obs, "link", f"f/{forum}", exact=True)
    obs = yield click(link, f"I open the forum f/{forum}.")
    return obs


def _sort_tab(obs: Observation, tab: str, why: str) -> Sub:
    link = maybe(obs, "link", tab, exact=True)
    if link is None:  # already the current tab
        return obs
    obs = yield click(link, why)
    return obs


def _post_links(obs: Observation) -> list[Element]:
    """The post links of a listing, in order: each is the link on the line above a
    "N points · Submitted by" line."""
    lines = obs.text.splitlines()
    out = []
    for i, line in enumerate(lines[1:], 1):
        if re.match(r"^-?\d+ points? · Submitted by", line):
            links = [e for e in elements(lines[i - 1]) if e.role == "link"]
            if links:
                out.append(links[0])
    return out


def _first_post(obs: Observation) -> Element:
    """The first post link of a listing."""
    posts = _post_links(obs)
    if not posts:
        raise ExpertError(f"expert: no post listing on {obs.url}")
    return posts[0]


def _link_below(obs: Observation, line_text: str) -> Element:
    """The first link on the lines below the line that reads ``line_text``."""
    lines = obs.text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == line_text:
            for later in lines[i + 1 :]:
                links = [e for e in elements(later) if e.role == "link"]
                if links:
                    return links[0]
    raise ExpertError(f"expert: no link below {line_text!r} on {obs.url}")


def _comment_text_line(obs: Observation, text: str) -> int:
    lines = obs.text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == text:
            return i
    raise ExpertError(f"expert: no comment {text!r} on {obs.url}")


def _find_comment(obs: Observation, text: str, why: str) -> Sub:
    """On a thread page: scroll to a comment; returns (author link, text line index, obs)."""
    for _ in range(8):
        lines = obs.text.splitlines()
        if any(line.strip() == text for line in lines):
            break
        if not more_below(obs):
            break
        obs = yield scroll_down(why)
    i = _comment_text_line(obs, text)
    lines = obs.text.splitlines()
    # The comment's header (author link, points, date) is the two lines above its text.
    author = next(
        (
            e
            for line in reversed(lines[max(0, i - 3) : i])
            for e in elements(line)
            if e.role == "link"
        ),
        None,
    )
    if author is None:
        raise ExpertError(f"expert: no author link above comment {text!r} on {obs.url}")
    return author, obs


def _comment_button(obs: Observation, author: Element, role: str, name: str) -> Element:
    """The vote button or Reply link of the comment whose author link is ``author``."""
    return _after(obs, author, role, name)


# --------------------------------------------------------------------------------------------
# 300 info: how many comments a post has (the search results show it)
# --------------------------------------------------------------------------------------------


def sample_comment_count(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_post(conn, rng)
    if p is None:
        return None
    return {"title": p["title"], "_answer": str(p["comment_count"])}


@TEMPLATES.template(
    id=300,
    name="reddit.post_comment_count",
    kind="info",
    intent=f'How many comments does the post "{{title}}" have? {ANSWER_NUMBER}',
    sample=sample_comment_count,
    difficulty="1-2",
)
def expert_comment_count(p: Params, obs: Observation) -> Expert:
    link, obs = yield from _search_post(obs, p["title"])
    count = _after(obs, link, "link")
    while not re.fullmatch(r"\d+ comments?", count.name):
        count = _after(obs, count, "link")
    n = count.name.split()[0]
    yield answer(n, f'The result "{p["title"]}" shows "{count.name}", so it has {n}.')


# --------------------------------------------------------------------------------------------
# 301 info: who submitted a post
# --------------------------------------------------------------------------------------------


def sample_post_author(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_post(conn, rng)
    if p is None:
        return None
    return {"title": p["title"], "_answer": p["author"]}


@TEMPLATES.template(
    id=301,
    name="reddit.post_author",
    kind="info",
    intent='Which user submitted the post "{title}"? Answer with the username.',
    sample=sample_post_author,
    difficulty="1-2",
)
def expert_post_author(p: Params, obs: Observation) -> Expert:
    link, obs = yield from _search_post(obs, p["title"])
    author = _after(obs, link, "link")
    yield answer(author.name, f'The result "{p["title"]}" was submitted by {author.name}.')


# --------------------------------------------------------------------------------------------
# 302 nav: the top (or second, third) post of all time in a forum
# --------------------------------------------------------------------------------------------

RANKS = {"top": 0, "second-best": 1, "third-best": 2}
"""How an intent names a place in a ranking -> its 0-based index."""


def _unique_at(rows: list[Any], k: int, key: str) -> bool:
    """Whether row ``k`` is the only row with its ``key`` value (so its place is unique)."""
    return len(rows) > k and sum(1 for r in rows if r[key] == rows[k][key]) == 1


def sample_top_post(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    f = rng.choice(_forums(conn))
    rank = rng.choice(list(RANKS))
    ranked = _ranked(conn, f["id"], "top")
    k = RANKS[rank]
    if not _unique_at(ranked, k, "score"):
        return None
    return {"rank": rank, "forum": f["name"], "_id": ranked[k]["id"], "_title": ranked[k]["title"]}


def eval_top_post(p: Params) -> dict[str, Any]:
    # url_match accepts any longer path (the slug), so the heading must also be the post's.
    return url_eval(f"__REDDIT__/f/{p['forum']}/{p['_id']}", shows=p["_title"])


def _nth_post(obs: Observation, k: int) -> Element:
    """The (k+1)-th post link of a listing (post links are the links right after each
    "N points · Submitted by" line's previous line)."""
    posts = _post_links(obs)
    if len(posts) <= k:
        raise ExpertError(f"expert: fewer than {k + 1} posts on {obs.url}")
    return posts[k]


@TEMPLATES.template(
    id=302,
    name="reddit.top_post",
    kind="nav",
    intent="Open the {rank} post of all time in the forum f/{forum}.",
    sample=sample_top_post,
    evaluation=eval_top_post,
    difficulty="3-5",
)
def expert_top_post(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_forum(obs, p["forum"])
    obs = yield from _sort_tab(obs, "Top", "The Top tab sorts the posts by score, best first.")
    post = _nth_post(obs, RANKS[p["rank"]])
    obs = yield click(post, f'"{post.name}" is the {p["rank"]} post by score; I open it.')
    yield answer("done", f"This is the {p['rank']} post of all time in f/{p['forum']}.")


# --------------------------------------------------------------------------------------------
# 303 change: upvote a post
# --------------------------------------------------------------------------------------------


def sample_upvote(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    uid = user_id(conn, USER)
    voted = {
        r[0]
        for r in conn.execute(
            "SELECT submission_id FROM submission_votes WHERE user_id = ?", (uid,)
        )
    }
    p = _pick_post(conn, rng, lambda r: r["id"] not in voted and r["user_id"] != uid)
    if p is None:
        return None
    return {"title": p["title"], "_id": p["id"], "_user": uid}


def eval_upvote(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT choice FROM submission_votes WHERE user_id = ? AND submission_id = ?",
            [p["_user"], p["_id"]],
            expected=1,
            description="the user upvoted the post",
            site="reddit",
        )
    )


@TEMPLATES.template(
    id=303,
    name="reddit.upvote_post",
    writes={"reddit.submission_votes": 1, "reddit.submissions": 1},
    kind="change",
    intent='Upvote the post "{title}".',
    sample=sample_upvote,
    evaluation=eval_upvote,
    user=USER,
    difficulty="3-5",
)
def expert_upvote(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_post(obs, p["title"])
    button = find(obs, "button", "Upvote", exact=True)
    obs = yield click(button, "The first Upvote button, under the post's text, votes on the post.")
    if "upvote was recorded" not in obs.text:
        raise ExpertError(f"expert: the upvote was not recorded on {obs.url}")
    yield answer("done", "The site confirms that my upvote was recorded.")


# --------------------------------------------------------------------------------------------
# 304 change: subscribe to and/or unsubscribe from forums
# --------------------------------------------------------------------------------------------


def sample_subscriptions(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    uid = user_id(conn, USER)
    mine = {
        r[0] for r in conn.execute("SELECT forum_id FROM subscriptions WHERE user_id = ?", (uid,))
    }
    forums = _forums(conn)
    add = rng.choice([f for f in forums if f["id"] not in mine])
    drop = rng.choice([f for f in forums if f["id"] in mine])
    kind = rng.choice(("add", "drop", "both", "both"))
    parts, after = [], set(mine)
    if kind in ("add", "both"):
        parts.append(f"subscribe to f/{add['name']}")
        after.add(add["id"])
    if kind in ("drop", "both"):
        parts.append(f"unsubscribe from f/{drop['name']}")
        after.discard(drop["id"])
    return {
        "changes": " and ".join(parts),
        "_user": uid,
        "_after": ",".join(str(i) for i in sorted(after)),
        "_n": len(parts),
    }


def eval_subscriptions(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT group_concat(forum_id, ',') FROM (SELECT forum_id FROM "
            "subscriptions WHERE user_id = ? ORDER BY forum_id)",
            [p["_user"]],
            expected=p["_after"],
            description="the user's subscriptions are exactly the requested ones",
            site="reddit",
        )
    )


@TEMPLATES.template(
    id=304,
    name="reddit.update_subscriptions",
    writes=lambda p: {"reddit.subscriptions": p["_n"]},
    kind="change",
    intent="Update my forum subscriptions: {changes}.",
    sample=sample_subscriptions,
    evaluation=eval_subscriptions,
    user=USER,
    difficulty="3-5",
)
def expert_subscriptions(p: Params, obs: Observation) -> Expert:
    obs = yield click(
        find(obs, "link", "Forums", exact=True),
        "The Forums page has a subscription button on every forum's row.",
    )
    for change in p["changes"].split(" and "):
        verb, forum = change.rsplit(" f/", 1)
        name = "Subscribe" if verb == "subscribe to" else "Unsubscribe"
        link = find(obs, "link", f"f/{forum}", exact=True)
        button = _after(obs, link, "button")
        if button.name != name:
            raise ExpertError(f"expert: the row of f/{forum} has {button.name!r}, not {name!r}")
        obs = yield click(button, f"I click {name} on the row of f/{forum}.")
        if f"f/{forum}." not in obs.text:
            raise ExpertError(f"expert: no confirmation for f/{forum} on {obs.url}")
    yield answer("done", f"The site confirms each change: {p['changes']}.")


# --------------------------------------------------------------------------------------------
# 305 change: create a post in a forum
# --------------------------------------------------------------------------------------------


def sample_create_post(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    spec = rng.choice(FORUMS)
    s = rng.choice(spec.subjects)
    title = rng.choice(NEW_TITLES).format(s=s)
    if conn.execute("SELECT 1 FROM submissions WHERE title = ?", (title,)).fetchone():
        return None
    fid = conn.execute("SELECT id FROM forums WHERE name = ?", (spec.name,)).fetchone()[0]
    return {
        "forum": spec.name,
        "title": title,
        "body": rng.choice(NEW_BODIES),
        "_forum_id": fid,
        "_user": user_id(conn, USER),
    }


def eval_create_post(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT body FROM submissions WHERE title = ? AND forum_id = ? AND user_id = ?",
            [p["title"], p["_forum_id"], p["_user"]],
            expected=p["body"],
            description="the post exists in the forum with this title and text",
            site="reddit",
        )
    )


def _write_post(obs: Observation, forum: str, title: str, body: str) -> Sub:
    """From any page: the Submit form, filled in and sent; returns the new thread page."""
    obs = yield click(find(obs, "link", "Submit", exact=True), "I open the form for a new post.")
    obs = yield select(find(obs, "combobox", "Forum"), forum, f"The post goes to f/{forum}.")
    obs = yield type_text(find(obs, "textbox", "Title", exact=True), title, "I enter the title.")
    obs = yield type_text(find(obs, "textbox", "Body", exact=True), body, "I enter the text.")
    button = find(obs, "button", "Create submission", exact=True)
    obs = yield click(button, "Forum, title and text are filled in; I create the post.")
    if "post was submitted" not in obs.text:
        raise ExpertError(f"expert: the post was not created ({obs.url})")
    return obs


@TEMPLATES.template(
    id=305,
    name="reddit.create_post",
    writes={"reddit.submissions": 1},
    kind="change",
    intent='Post in the forum f/{forum} a thread titled "{title}" saying "{body}"',
    sample=sample_create_post,
    evaluation=eval_create_post,
    user=USER,
    difficulty="6-9",
)
def expert_create_post(p: Params, obs: Observation) -> Expert:
    obs = yield from _write_post(obs, p["forum"], p["title"], p["body"])
    yield answer("done", f'The post "{p["title"]}" is now in f/{p["forum"]}.')


# --------------------------------------------------------------------------------------------
# 306 change: reply to a post
# --------------------------------------------------------------------------------------------


def sample_reply_post(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_post(conn, rng)
    if p is None:
        return None
    return {
        "title": p["title"],
        "text": _new_text(rng),
        "_id": p["id"],
        "_forum": p["forum"],
        "_user": user_id(conn, USER),
    }


def eval_reply_post(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT id FROM comments WHERE submission_id = ? AND parent_id IS NULL "
            "AND user_id = ? AND body = ?",
            [p["_id"], p["_user"], p["text"]],
            row_count=1,
            description="one top-level comment of the user with this text",
            site="reddit",
        ),
        pages=[
            page_check(
                [p["text"]], "", f"__REDDIT__/f/{p['_forum']}/{p['_id']}", kind="must_include"
            )
        ],
    )


@TEMPLATES.template(
    id=306,
    name="reddit.reply_post",
    writes={"reddit.comments": 1},
    kind="change",
    intent='Reply to the post "{title}" with the comment "{text}"',
    sample=sample_reply_post,
    evaluation=eval_reply_post,
    user=USER,
    difficulty="3-5",
)
def expert_reply_post(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_post(obs, p["title"])
    box = find(obs, "textbox", "Comment", exact=True)
    obs = yield type_text(box, p["text"], "I write my reply in the comment box.")
    button = find(obs, "button", "Post comment", exact=True)
    obs = yield click(button, "I post the comment.")
    obs, why = yield from posted(obs, p["text"], "comment")
    yield answer("done", why)


# --------------------------------------------------------------------------------------------
# 307 change: edit your own post
# --------------------------------------------------------------------------------------------


def sample_edit_post(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    uid = user_id(conn, USER)
    p = _pick_post(conn, rng, lambda r: r["user_id"] == uid)
    if p is None:
        return None
    body = rng.choice(NEW_BODIES)
    if body == p["body"]:
        return None
    return {"title": p["title"], "text": body, "_id": p["id"]}


def eval_edit_post(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT body FROM submissions WHERE id = ?",
            [p["_id"]],
            expected=p["text"],
            description="the post's text is the new one",
            site="reddit",
        ),
        state_check(
            "SELECT title FROM submissions WHERE id = ?",
            [p["_id"]],
            expected=p["title"],
            description="the title is unchanged",
            site="reddit",
        ),
    )


@TEMPLATES.template(
    id=307,
    name="reddit.edit_post",
    writes={"reddit.submissions": 1},
    kind="change",
    intent='Edit your post "{title}" so that its text says "{text}"',
    sample=sample_edit_post,
    evaluation=eval_edit_post,
    user=USER,
    difficulty="6-9",
)
def expert_edit_post(p: Params, obs: Observation) -> Expert:
    me = find(obs, "link", USER, exact=True)
    obs = yield click(me, "My profile lists the posts I submitted.")
    link, obs = yield from seek(
        obs, "link", p["title"], "I look for my post on my profile.", exact=True
    )
    obs = yield click(link, f'I open my post "{p["title"]}".')
    obs = yield click(find(obs, "link", "Edit", exact=True), "As its author I can edit it.")
    obs = yield type_text(
        find(obs, "textbox", "Body", exact=True), p["text"], "I replace the text."
    )
    obs = yield click(find(obs, "button", "Save changes", exact=True), "I save the change.")
    if "was edited" not in obs.text:
        raise ExpertError(f"expert: the post was not edited ({obs.url})")
    yield answer("done", "The site confirms that the post was edited.")


# --------------------------------------------------------------------------------------------
# 308 info: the title of the newest (second, third newest) post in a forum
# --------------------------------------------------------------------------------------------

NEWEST = {"newest": 0, "second newest": 1, "third newest": 2}


def sample_newest_title(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    f = rng.choice(_forums(conn))
    which = rng.choice(list(NEWEST))
    ranked = _ranked(conn, f["id"], "new")
    k = NEWEST[which]
    if not _unique_at(ranked, k, "created_at"):
        return None
    return {"which": which, "forum": f["name"], "_answer": ranked[k]["title"]}


@TEMPLATES.template(
    id=308,
    name="reddit.newest_post_title",
    kind="info",
    intent="What is the title of the {which} post in the forum f/{forum}? Answer with the "
    "exact title.",
    sample=sample_newest_title,
    difficulty="3-5",
)
def expert_newest_title(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_forum(obs, p["forum"])
    obs = yield from _sort_tab(obs, "New", "The New tab lists the newest posts first.")
    post = _nth_post(obs, NEWEST[p["which"]])
    yield answer(post.name, f'Sorted by New, the {p["which"]} post is "{post.name}".')


# --------------------------------------------------------------------------------------------
# 309 info (held out): when the author of a comment joined
# --------------------------------------------------------------------------------------------


def sample_comment_joined(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_post(conn, rng, lambda r: r["comment_count"] > 0)
    if p is None:
        return None
    c = rng.choice(_comments(conn, p["id"]))
    return {"title": p["title"], "comment": c["body"], "_answer": fmt_date(c["joined"])}


@TEMPLATES.template(
    id=309,
    name="reddit.comment_author_joined",
    kind="info",
    intent='In the post "{title}", find the user who wrote the comment "{comment}" and tell '
    "me when they joined the site. Answer with the date as the site shows it, like "
    "Jan 5, 2021.",
    sample=sample_comment_joined,
    heldout=True,
    difficulty="3-5",
)
def expert_comment_joined(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_post(obs, p["title"])
    author, obs = yield from _find_comment(obs, p["comment"], "I scroll to find the comment.")
    obs = yield click(author, f"The comment was written by {author.name}; I open their profile.")
    date = grab(obs, r"Registered on (\w{3} \d{1,2}, \d{4})", "join date")
    yield answer(date, f"{author.name}'s profile says 'Registered on {date}'.")


# --------------------------------------------------------------------------------------------
# 310 nav: a page of a forum's posts in some order
# --------------------------------------------------------------------------------------------


def sample_forum_sorted(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    f = rng.choice(_forums(conn))
    order = rng.choice(("Hot", "New", "Top"))
    which = rng.choice(("first", "second")) if f["posts"] > PER_PAGE else "first"
    return {"which": which, "forum": f["name"], "order": order}


def eval_forum_sorted(p: Params) -> dict[str, Any]:
    # /f/<forum> is the Hot listing too; the current tab (bold, not a link) tells the order.
    query = "?p=2" if p["which"] == "second" else ""
    urls = [f"__REDDIT__/f/{p['forum']}/{p['order'].lower()}{query}"]
    if p["order"] == "Hot":
        urls.append(f"__REDDIT__/f/{p['forum']}{query}")
    return url_eval(
        " |OR| ".join(urls),
        shows=p["order"],
        locator="document.querySelector('nav.tabs strong').innerText",
    )


@TEMPLATES.template(
    id=310,
    name="reddit.forum_sorted_page",
    kind="nav",
    intent="Show me the {which} page of the posts in the forum f/{forum} sorted by {order}.",
    sample=sample_forum_sorted,
    evaluation=eval_forum_sorted,
    difficulty="3-5",
)
def expert_forum_sorted(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_forum(obs, p["forum"])
    obs = yield from _sort_tab(obs, p["order"], f"I sort the posts by {p['order']}.")
    if p["which"] == "second":
        nxt, obs = yield from seek(obs, "link", "Next", "The page links are below.", exact=True)
        obs = yield click(nxt, "I go to the second page of the listing.")
    yield answer("done", f"This is the {p['which']} page of f/{p['forum']} by {p['order']}.")


# --------------------------------------------------------------------------------------------
# 311 change: reply to a comment
# --------------------------------------------------------------------------------------------


def sample_reply_comment(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_post(conn, rng, lambda r: r["comment_count"] > 0)
    if p is None:
        return None
    c = rng.choice(_comments(conn, p["id"]))
    return {
        "title": p["title"],
        "author": c["author"],
        "comment": c["body"],
        "text": _new_text(rng),
        "_id": c["id"],
        "_user": user_id(conn, USER),
    }


def eval_reply_comment(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT id FROM comments WHERE parent_id = ? AND user_id = ? AND body = ?",
            [p["_id"], p["_user"], p["text"]],
            row_count=1,
            description="one reply of the user to the comment with this text",
            site="reddit",
        )
    )


@TEMPLATES.template(
    id=311,
    name="reddit.reply_comment",
    writes={"reddit.comments": 1},
    kind="change",
    intent='In the post "{title}", reply to the comment by {author} that says "{comment}" '
    'with "{text}"',
    sample=sample_reply_comment,
    evaluation=eval_reply_comment,
    user=USER,
    difficulty="6-9",
)
def expert_reply_comment(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_post(obs, p["title"])
    author, obs = yield from _find_comment(obs, p["comment"], "I scroll to find the comment.")
    reply = _comment_button(obs, author, "link", "Reply")
    obs = yield click(reply, f"I open the reply form of {p['author']}'s comment.")
    box = find(obs, "textbox", "Reply", exact=True)
    obs = yield type_text(box, p["text"], "I write my reply.")
    obs = yield click(find(obs, "button", "Post reply", exact=True), "I post the reply.")
    obs, why = yield from posted(obs, p["text"], "reply")
    yield answer("done", why)


# --------------------------------------------------------------------------------------------
# 312 info: subscribers (or posts) of a forum
# --------------------------------------------------------------------------------------------

FORUM_COLUMNS = {"subscribers": ("Subscribers", "subs"), "posts": ("Posts", "posts")}


def sample_forum_count(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    f = rng.choice(_forums(conn))
    what = rng.choice(list(FORUM_COLUMNS))
    return {"what": what, "forum": f["name"], "_answer": str(f[FORUM_COLUMNS[what][1]])}


@TEMPLATES.template(
    id=312,
    name="reddit.forum_count",
    kind="info",
    intent=f"How many {{what}} does the forum f/{{forum}} have? {ANSWER_NUMBER}",
    sample=sample_forum_count,
    difficulty="1-2",
)
def expert_forum_count(p: Params, obs: Observation) -> Expert:
    column = FORUM_COLUMNS[p["what"]][0]
    obs = yield click(
        find(obs, "link", "Forums", exact=True), f"The Forums page has a {column} column."
    )
    header = grab(obs, r"^(Forum \| .*)$", "forum table").split(" | ")
    col = header.index(column)
    for line in obs.text.splitlines():
        cells = [c.strip() for c in line.split(" | ")]
        if len(cells) > col and cells[0].endswith(f'link "f/{p["forum"]}"'):
            n = cells[col]
            yield answer(n, f"The row of f/{p['forum']} shows {n} in the {column} column.")
            return
    raise ExpertError(f"expert: no row of f/{p['forum']} on {obs.url}")


# --------------------------------------------------------------------------------------------
# 313 change (held out): downvote a comment
# --------------------------------------------------------------------------------------------


def sample_downvote_comment(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    uid = user_id(conn, USER)
    p = _pick_post(conn, rng, lambda r: r["comment_count"] > 0)
    if p is None:
        return None
    c = rng.choice(_comments(conn, p["id"]))
    if (
        c["user_id"] == uid
        or conn.execute(
            "SELECT 1 FROM comment_votes WHERE user_id = ? AND comment_id = ?", (uid, c["id"])
        ).fetchone()
    ):
        return None
    return {
        "title": p["title"],
        "author": c["author"],
        "comment": c["body"],
        "_id": c["id"],
        "_user": uid,
    }


def eval_downvote_comment(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT choice FROM comment_votes WHERE user_id = ? AND comment_id = ?",
            [p["_user"], p["_id"]],
            expected=-1,
            description="the user downvoted the comment",
            site="reddit",
        )
    )


@TEMPLATES.template(
    id=313,
    name="reddit.downvote_comment",
    writes={"reddit.comment_votes": 1, "reddit.comments": 1},
    kind="change",
    intent='In the post "{title}", downvote the comment by {author} that says "{comment}"',
    sample=sample_downvote_comment,
    evaluation=eval_downvote_comment,
    user=USER,
    heldout=True,
    difficulty="3-5",
)
def expert_downvote_comment(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_post(obs, p["title"])
    author, obs = yield from _find_comment(obs, p["comment"], "I scroll to find the comment.")
    button = _comment_button(obs, author, "button", "Downvote")
    obs = yield click(button, f"I click Downvote under {p['author']}'s comment.")
    if "downvote was recorded" not in obs.text:
        raise ExpertError(f"expert: the downvote was not recorded on {obs.url}")
    yield answer("done", "The site confirms that my downvote was recorded.")


# --------------------------------------------------------------------------------------------
# 314 info: how many posts the author of a post has submitted
# --------------------------------------------------------------------------------------------


def sample_author_posts(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_post(conn, rng)
    if p is None:
        return None
    return {"title": p["title"], "_answer": str(p["author_posts"])}


@TEMPLATES.template(
    id=314,
    name="reddit.author_post_count",
    kind="info",
    intent=f'How many posts has the author of the post "{{title}}" submitted in all? '
    f"{ANSWER_NUMBER}",
    sample=sample_author_posts,
    difficulty="3-5",
)
def expert_author_posts(p: Params, obs: Observation) -> Expert:
    link, obs = yield from _search_post(obs, p["title"])
    author = _after(obs, link, "link")
    obs = yield click(author, f"The post was submitted by {author.name}; I open the profile.")
    n = grab(obs, r"Registered on [^·]*· (\d+) submissions?", "submission count")
    yield answer(n, f"{author.name}'s profile says {n} submissions.")


# --------------------------------------------------------------------------------------------
# 315 info: number of search results
# --------------------------------------------------------------------------------------------


def sample_search_count(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    spec = rng.choice(FORUMS)
    kind = rng.random()
    if kind < 0.6:
        query = rng.choice(spec.subjects)
    else:
        query = f"{rng.choice(SEARCH_WORDS)} {rng.choice(spec.subjects).split()[-1]}"
    n = len(search_ids(conn, query))
    if n == 0:
        return None
    return {"query": query, "_answer": str(n)}


@TEMPLATES.template(
    id=315,
    name="reddit.search_count",
    kind="info",
    intent=f'How many posts does a forum search for "{{query}}" find? {ANSWER_NUMBER}',
    sample=sample_search_count,
    difficulty="1-2",
)
def expert_search_count(p: Params, obs: Observation) -> Expert:
    box = find(obs, "textbox", "Search")
    obs = yield search(box, p["query"], f'I search the forum for "{p["query"]}".')
    n = grab(obs, r"^(\d+) posts? found for", "result count")
    yield answer(n, f"The search page says {n} posts were found.")


# --------------------------------------------------------------------------------------------
# 316 change (held out): copy the newest post of one forum to another
# --------------------------------------------------------------------------------------------


def sample_copy_post(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    src, dst = rng.sample(list(_forums(conn)), 2)
    ranked = _ranked(conn, src["id"], "new")
    if len(ranked) > 1 and ranked[0]["created_at"] == ranked[1]["created_at"]:
        return None
    top = ranked[0]
    return {
        "src": src["name"],
        "dst": dst["name"],
        "_title": top["title"],
        "_body": top["body"],
        "_forum_id": dst["id"],
        "_user": user_id(conn, USER),
    }


def eval_copy_post(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT body FROM submissions WHERE title = ? AND forum_id = ? AND user_id = ?",
            [p["_title"], p["_forum_id"], p["_user"]],
            expected=p["_body"],
            description="the copy exists in the target forum with the same text",
            site="reddit",
        )
    )


@TEMPLATES.template(
    id=316,
    name="reddit.copy_newest_post",
    writes={"reddit.submissions": 1},
    kind="change",
    intent="Copy the newest post of the forum f/{src} to the forum f/{dst}: post there a "
    "thread with the same title and the same text.",
    sample=sample_copy_post,
    evaluation=eval_copy_post,
    user=USER,
    heldout=True,
    difficulty="10+",
)
def expert_copy_post(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_forum(obs, p["src"])
    obs = yield from _sort_tab(obs, "New", "The New tab lists the newest post first.")
    first = _first_post(obs)
    obs = yield click(first, f'The newest post is "{first.name}"; I open it to read its text.')
    title = grab(obs, r'^heading "(.*)"$', "post title")
    lines = obs.text.splitlines()
    # The post's vote buttons come first (its Upvote reads "Retract upvote" if I upvoted it).
    up = next(e for e in elements(obs.text) if e.name in ("Upvote", "Retract upvote"))
    i = next(k for k, line in enumerate(lines) if f"[{up.id}]" in line)
    body = lines[i - 1].strip()
    if not body or body.startswith("on ") or "[" in body:
        raise ExpertError(f"expert: no post text above the vote buttons on {obs.url}")
    obs = yield from _write_post(obs, p["dst"], title, body)
    yield answer("done", f'The post "{title}" is now copied to f/{p["dst"]}.')


# --------------------------------------------------------------------------------------------
# 317 nav (held out): the profile of a post's author
# --------------------------------------------------------------------------------------------


def sample_author_profile(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_post(conn, rng)
    if p is None:
        return None
    return {"title": p["title"], "_author": p["author"]}


def eval_author_profile(p: Params) -> dict[str, Any]:
    return url_eval(f"__REDDIT__/user/{p['_author']}", shows=p["_author"])


@TEMPLATES.template(
    id=317,
    name="reddit.author_profile",
    kind="nav",
    intent='Open the profile page of the user who submitted the post "{title}".',
    sample=sample_author_profile,
    evaluation=eval_author_profile,
    heldout=True,
    difficulty="3-5",
)
def expert_author_profile(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_post(obs, p["title"])
    author = _link_below(obs, f'heading "{p["title"]}"')
    obs = yield click(author, f"The post was submitted by {author.name}; I open the profile.")
    yield answer("done", f"This is the profile page of {author.name}.")
