"""Schema and deterministic seed of the forum's database ("reddit", WebArena's Postmill).

Seeded contents (seed 0): 12 forums, 40 users (every one with a login; the documented
accounts have the password ``Password.123``), 300 posts ("submissions") from Jan 2022 to
Dec 2023, about 1000 nested comments, votes on posts and comments, and forum subscriptions.
Post titles and comment texts are unique, so tasks can name them.
"""

from __future__ import annotations

import math
import random
import sqlite3
from datetime import datetime, timedelta

from webagent_r1.sites.base import Backend, SiteUser, source_digest
from webagent_r1.sites.reddit.content import (
    BODY_CLOSERS,
    BODY_MIDDLES,
    BODY_OPENERS,
    COMMENT_CLOSERS,
    COMMENT_OPENERS,
    COMMENT_REMARKS,
    FORUMS,
    TITLE_PATTERNS,
    USERNAME_NOUNS,
    USERNAME_WORDS,
)
from webagent_r1.sites.seed_utils import fmt_dt, hash_password, make_salt, rand_datetime

SITE_VERSION = "2"
"""Version of the forum schema + seed; bump it when either changes (rebuilds cached DBs)."""


USER_PASSWORD = "Password.123"
DEFAULT_USER = "MarvelsGrantMan136"
"""The account forum tasks log in as (WebArena's Postmill user)."""

NAMED_USERS = (DEFAULT_USER, "bookish_owl", "trail_runner88")
REDDIT_USERS = (
    SiteUser(DEFAULT_USER, USER_PASSWORD, False, "the default forum user"),
    SiteUser("bookish_owl", USER_PASSWORD, False, "forum user"),
    SiteUser("trail_runner88", USER_PASSWORD, False, "forum user"),
)
N_USERS = 40
N_POSTS = 300
POST_COUNTS = (38, 34, 30, 28, 27, 25, 24, 23, 21, 19, 16, 15)
"""Posts per forum (shuffled over the forums); they sum to ``N_POSTS``."""
HOT_EPOCH = datetime(2005, 12, 8, 7, 46, 43)

SCHEMA = """
CREATE TABLE forums (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE COLLATE NOCASE,   -- the URL part: /f/<name>
    title TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE subscriptions (
    user_id INTEGER NOT NULL REFERENCES users(id),
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    created_at TEXT NOT NULL,
    PRIMARY KEY (user_id, forum_id)
);
CREATE TABLE submissions (
    id INTEGER PRIMARY KEY,
    forum_id INTEGER NOT NULL REFERENCES forums(id),
    user_id INTEGER NOT NULL REFERENCES users(id),
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    edited_at TEXT,
    score INTEGER NOT NULL DEFAULT 0,       -- upvotes minus downvotes (kept with the votes)
    hot REAL NOT NULL DEFAULT 0             -- ranking of the "Hot" sort (see hot_rank)
);
CREATE TABLE comments (
    id INTEGER PRIMARY KEY,
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    parent_id INTEGER REFERENCES comments(id),   -- NULL: a reply to the post itself
    user_id INTEGER NOT NULL REFERENCES users(id),
    body TEXT NOT NULL,
    created_at TEXT NOT NULL,
    edited_at TEXT,
    score INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE submission_votes (
    user_id INTEGER NOT NULL REFERENCES users(id),
    submission_id INTEGER NOT NULL REFERENCES submissions(id) ON DELETE CASCADE,
    choice INTEGER NOT NULL CHECK (choice IN (-1, 1)),
    PRIMARY KEY (user_id, submission_id)
);
CREATE TABLE comment_votes (
    user_id INTEGER NOT NULL REFERENCES users(id),
    comment_id INTEGER NOT NULL REFERENCES comments(id) ON DELETE CASCADE,
    choice INTEGER NOT NULL CHECK (choice IN (-1, 1)),
    PRIMARY KEY (user_id, comment_id)
);
CREATE INDEX idx_submissions_forum ON submissions(forum_id, created_at);
CREATE INDEX idx_submissions_user ON submissions(user_id);
CREATE INDEX idx_comments_submission ON comments(submission_id);
CREATE INDEX idx_comments_user ON comments(user_id);
CREATE INDEX idx_subscriptions_forum ON subscriptions(forum_id);
"""


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the forum tables (``users`` and ``sessions`` come from the base schema)."""
    conn.executescript(SCHEMA)


def hot_rank(score: int, created_at: str) -> float:
    """Reddit's "hot" ranking: log-scaled score plus a bonus that grows with the post's age.

    A post 12.5 hours newer than another ranks like one with ten times its score.
    """
    created = datetime.strptime(created_at[:19], "%Y-%m-%d %H:%M:%S")
    order = math.log10(max(abs(score), 1))
    sign = 1 if score > 0 else -1 if score < 0 else 0
    seconds = (created - HOT_EPOCH).total_seconds()
    return round(sign * order + seconds / 45000, 7)


def comment_text(opener: str, remark: str, closer: str) -> str:
    """A comment from its three parts: ``"Honestly, it depends ... budget. Cheers."``."""
    if opener.endswith((",", ":")):
        text = f"{opener} {remark}."
    else:
        text = f"{opener} {remark[0].upper()}{remark[1:]}."
    return f"{text} {closer}".strip()


def seed(conn: sqlite3.Connection, rng: random.Random) -> None:
    """Fill the forum database; every random choice comes from ``rng``."""
    users = _seed_users(conn, rng)
    forums = _seed_forums(conn, rng, users)
    posts = _seed_posts(conn, rng, users, forums)
    _seed_comments(conn, rng, users, posts)


def _seed_users(conn: sqlite3.Connection, rng: random.Random) -> list[int]:
    """40 users who joined in 2020-2021; returns their ids."""
    names: list[str] = list(NAMED_USERS)
    while len(names) < N_USERS:
        a, b = rng.choice(USERNAME_WORDS), rng.choice(USERNAME_NOUNS)
        style = rng.randrange(3)
        name = (
            f"{a}_{b}"
            if style == 0
            else f"{a.title()}{b.title()}{rng.randint(1, 99)}"
            if style == 1
            else f"{a}{b}{rng.randint(100, 999)}"
        )
        if name.lower() not in {n.lower() for n in names}:
            names.append(name)
    start, end = datetime(2020, 1, 1), datetime(2021, 12, 31)
    for i, name in enumerate(names):
        # Undocumented accounts get a random password nobody knows.
        password = USER_PASSWORD if name in NAMED_USERS else f"{rng.getrandbits(64):x}"
        conn.execute(
            "INSERT INTO users (id, username, email, password_hash, full_name, is_admin, "
            "created_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
            (
                i + 1,
                name,
                f"{name.lower()}@postmill.example",
                hash_password(password, make_salt(rng)),
                name,
                fmt_dt(rand_datetime(rng, start, end)),
            ),
        )
    return list(range(1, len(names) + 1))


def _seed_forums(conn: sqlite3.Connection, rng: random.Random, users: list[int]) -> list[int]:
    """The 12 forums and who subscribes to them (popular forums have more subscribers)."""
    ids = []
    for i, f in enumerate(FORUMS):
        created = fmt_dt(rand_datetime(rng, datetime(2019, 1, 1), datetime(2019, 12, 31)))
        conn.execute(
            "INSERT INTO forums VALUES (?, ?, ?, ?, ?)",
            (i + 1, f.name, f.title, f.description, created),
        )
        ids.append(i + 1)
    popularity = [rng.uniform(0.2, 1.0) for _ in ids]
    for uid in users:
        k = rng.randint(1, 7)
        chosen: set[int] = set()
        while len(chosen) < k:
            chosen.add(rng.choices(ids, popularity)[0])
        for fid in sorted(chosen):
            when = fmt_dt(rand_datetime(rng, datetime(2022, 1, 1), datetime(2023, 12, 31)))
            conn.execute("INSERT INTO subscriptions VALUES (?, ?, ?)", (uid, fid, when))
    return ids


def _seed_posts(
    conn: sqlite3.Connection, rng: random.Random, users: list[int], forums: list[int]
) -> list[tuple[int, str]]:
    """300 posts with votes; returns (post id, created_at) in id order."""
    counts = list(POST_COUNTS)
    rng.shuffle(counts)
    activity = [rng.paretovariate(1.3) for _ in users]
    activity[0] = 0.0  # the default user's posts are placed below, a fixed number of them
    slots: list[tuple[int, str]] = []  # (forum id, title)
    for fid, n in zip(forums, counts, strict=True):
        spec = FORUMS[fid - 1]
        combos = [(s, p) for s in spec.subjects for p in TITLE_PATTERNS]
        for s, p in rng.sample(combos, n):
            slots.append((fid, p.format(s=s, S=s[0].upper() + s[1:])))
    rng.shuffle(slots)
    authors = [1] * 8 + rng.choices(users, activity, k=len(slots) - 8)
    rng.shuffle(authors)
    dates = sorted(
        rand_datetime(rng, datetime(2022, 1, 1), datetime(2023, 12, 31, 23, 59)) for _ in slots
    )
    out = []
    for i, ((fid, title), author, created) in enumerate(zip(slots, authors, dates, strict=True)):
        pid = i + 1
        subject = _subject_of(title, FORUMS[fid - 1].subjects)
        body = " ".join(
            (
                rng.choice(BODY_OPENERS).format(s=subject),
                *rng.sample(BODY_MIDDLES, rng.randint(1, 2)),
                rng.choice(BODY_CLOSERS),
            )
        )
        quality = rng.uniform(0.45, 0.97)
        voters = rng.sample([u for u in users if u != author], rng.randint(0, 30))
        score = 0
        for uid in voters:
            choice = 1 if rng.random() < quality else -1
            score += choice
            conn.execute("INSERT INTO submission_votes VALUES (?, ?, ?)", (uid, pid, choice))
        created_s = fmt_dt(created)
        edited = (
            fmt_dt(created + timedelta(minutes=rng.randint(5, 600))) if rng.random() < 0.1 else None
        )
        conn.execute(
            "INSERT INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (pid, fid, author, title, body, created_s, edited, score, hot_rank(score, created_s)),
        )
        out.append((pid, created_s))
    return out


def _subject_of(title: str, subjects: tuple[str, ...]) -> str:
    for s in subjects:
        if s.lower() in title.lower():
            return s
    return subjects[0]


def _seed_comments(
    conn: sqlite3.Connection,
    rng: random.Random,
    users: list[int],
    posts: list[tuple[int, str]],
) -> None:
    """About 1000 comments in threads (40 % reply to an earlier comment), with votes."""
    used: set[str] = set()
    talk = [rng.paretovariate(1.5) for _ in users]
    cid = 0
    for pid, created in posts:
        n = min(15, int(rng.expovariate(1 / 3.9)))
        when = datetime.strptime(created, "%Y-%m-%d %H:%M:%S")
        thread: list[int] = []
        for _ in range(n):
            when += timedelta(minutes=rng.randint(3, 2000))
            while True:
                text = comment_text(
                    rng.choice(COMMENT_OPENERS),
                    rng.choice(COMMENT_REMARKS),
                    rng.choice(COMMENT_CLOSERS),
                )
                if text not in used:
                    used.add(text)
                    break
            cid += 1
            parent = rng.choice(thread) if thread and rng.random() < 0.4 else None
            author = rng.choices(users, talk)[0]
            score = 0
            for uid in rng.sample([u for u in users if u != author], rng.randint(0, 8)):
                choice = 1 if rng.random() < 0.75 else -1
                score += choice
                conn.execute("INSERT INTO comment_votes VALUES (?, ?, ?)", (uid, cid, choice))
            conn.execute(
                "INSERT INTO comments VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
                (cid, pid, parent, author, text, fmt_dt(when), score),
            )
            thread.append(cid)


REDDIT_BACKEND = Backend(
    name="reddit",
    version=f"{SITE_VERSION}-{source_digest(__file__, 'db.py', 'content.py')}",
    create_schema=create_schema,
    seed=seed,
)
"""The forum's database."""
