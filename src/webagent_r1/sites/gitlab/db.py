"""Schema and deterministic seed of the code-hosting site ("gitlab", WebArena's GitLab).

Seeded contents (seed 0): 30 users (4 with a documented login), 10 namespaces (3 users, 7
groups), 25 projects with repository files, commits, labels, issues with comments, merge
requests, members and stars.
"""

from __future__ import annotations

import random
import sqlite3
from datetime import datetime, timedelta

from webagent_r1.sites.base import Backend, SiteUser, source_digest
from webagent_r1.sites.gitlab.content import (
    COMMENTS,
    COMMIT_MESSAGES,
    GROUPS,
    ISSUE_BODIES,
    ISSUE_TITLES,
    LABELS,
    MR_BODIES,
    MR_TITLES,
    NAMED_USERS,
    PROJECTS,
)
from webagent_r1.sites.gitlab.files import repo_files
from webagent_r1.sites.seed_utils import (
    FIRST_NAMES,
    LAST_NAMES,
    fmt_dt,
    hash_password,
    make_salt,
    rand_datetime,
)

SITE_VERSION = "2"
"""Version of the schema + seed; bump it when either changes (rebuilds cached DBs)."""


MAIN_USER, MAIN_PASSWORD = "byteblaze", "hello1234"
OTHER_PASSWORD = "Password.123"
DEFAULT_BRANCH = "main"
N_USERS = 30

GITLAB_USERS = (
    SiteUser(MAIN_USER, MAIN_PASSWORD, False, "Byte Blaze, the default user (as in WebArena)"),
    SiteUser("sam.rivera", OTHER_PASSWORD, False, "Sam Rivera"),
    SiteUser("mei.tanaka", OTHER_PASSWORD, False, "Mei Tanaka"),
    SiteUser("omar.haddad", OTHER_PASSWORD, False, "Omar Haddad"),
)

SCHEMA = """
CREATE TABLE profiles (
    user_id INTEGER PRIMARY KEY REFERENCES users(id),
    bio TEXT NOT NULL DEFAULT '',
    location TEXT NOT NULL DEFAULT ''
);
CREATE TABLE namespaces (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'group')),
    owner_id INTEGER NOT NULL REFERENCES users(id),   -- the user (kind=user) or group owner
    description TEXT NOT NULL DEFAULT ''
);
CREATE TABLE projects (
    id INTEGER PRIMARY KEY,
    namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
    path TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    visibility TEXT NOT NULL DEFAULT 'public' CHECK (visibility IN ('public', 'private')),
    default_branch TEXT NOT NULL DEFAULT 'main',
    creator_id INTEGER NOT NULL REFERENCES users(id),
    created_at TEXT NOT NULL,
    last_activity_at TEXT NOT NULL,
    UNIQUE (namespace_id, path)
);
CREATE TABLE repo_files (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    path TEXT NOT NULL,               -- 'src/pkg/config.py'; directories are implied
    content TEXT NOT NULL,
    UNIQUE (project_id, path)
);
CREATE TABLE commits (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    sha TEXT NOT NULL,
    author_id INTEGER NOT NULL REFERENCES users(id),
    title TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE members (
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id INTEGER NOT NULL REFERENCES users(id),
    access_level INTEGER NOT NULL CHECK (access_level IN (10, 20, 30, 40, 50)),
    created_at TEXT NOT NULL,
    PRIMARY KEY (project_id, user_id)
);
CREATE TABLE stars (
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    user_id INTEGER NOT NULL REFERENCES users(id),
    created_at TEXT NOT NULL,
    PRIMARY KEY (project_id, user_id)
);
CREATE TABLE labels (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    color TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    UNIQUE (project_id, name)
);
CREATE TABLE issues (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    iid INTEGER NOT NULL,             -- the number shown as #iid, per project
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL CHECK (state IN ('opened', 'closed')),
    author_id INTEGER NOT NULL REFERENCES users(id),
    assignee_id INTEGER REFERENCES users(id),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    closed_at TEXT,
    UNIQUE (project_id, iid)
);
CREATE TABLE issue_labels (
    issue_id INTEGER NOT NULL REFERENCES issues(id) ON DELETE CASCADE,
    label_id INTEGER NOT NULL REFERENCES labels(id) ON DELETE CASCADE,
    PRIMARY KEY (issue_id, label_id)
);
CREATE TABLE merge_requests (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    iid INTEGER NOT NULL,             -- shown as !iid
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL CHECK (state IN ('opened', 'merged', 'closed')),
    author_id INTEGER NOT NULL REFERENCES users(id),
    assignee_id INTEGER REFERENCES users(id),
    source_branch TEXT NOT NULL,
    target_branch TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (project_id, iid)
);
CREATE TABLE notes (
    id INTEGER PRIMARY KEY,
    project_id INTEGER NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    noteable_type TEXT NOT NULL CHECK (noteable_type IN ('issue', 'merge_request')),
    noteable_id INTEGER NOT NULL,     -- issues.id or merge_requests.id
    author_id INTEGER NOT NULL REFERENCES users(id),
    body TEXT NOT NULL,
    system INTEGER NOT NULL DEFAULT 0,  -- 1: an event ("closed", "assigned to @x")
    created_at TEXT NOT NULL
);
CREATE INDEX idx_projects_ns ON projects(namespace_id);
CREATE INDEX idx_commits_project ON commits(project_id, created_at);
CREATE INDEX idx_issues_project ON issues(project_id, state);
CREATE INDEX idx_mrs_project ON merge_requests(project_id, state);
CREATE INDEX idx_notes_target ON notes(noteable_type, noteable_id);
CREATE INDEX idx_members_user ON members(user_id);
CREATE INDEX idx_stars_user ON stars(user_id);
"""

START, END = datetime(2022, 1, 3), datetime(2023, 12, 20)


def create_schema(conn: sqlite3.Connection) -> None:
    """Create the site's tables (``users`` and ``sessions`` come from the base schema)."""
    conn.executescript(SCHEMA)


def seed(conn: sqlite3.Connection, rng: random.Random) -> None:
    """Fill the database; every random choice comes from ``rng``."""
    users = _seed_users(conn, rng)
    namespaces = _seed_namespaces(conn, rng, users)
    for pid, spec in enumerate(PROJECTS, start=1):
        _seed_project(conn, rng, pid, spec, users, namespaces)


def _seed_users(conn: sqlite3.Connection, rng: random.Random) -> dict[str, int]:
    """30 users; the named ones can log in, the others have unusable random passwords."""
    people: list[tuple[str, str, str, str]] = list(NAMED_USERS)
    taken = {u for u, *_ in people}
    while len(people) < N_USERS:
        first, last = rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)
        handle = rng.choice((f"{first}{last[0]}", f"{first[0]}{last}", f"{first}.{last}"))
        handle = handle.lower()
        if handle in taken or any(f"{first} {last}" == p[1] for p in people):
            continue
        taken.add(handle)
        people.append((handle, f"{first} {last}", "", ""))
    out = {}
    for i, (username, full_name, bio, location) in enumerate(people, start=1):
        if i <= len(NAMED_USERS):
            password = MAIN_PASSWORD if username == MAIN_USER else OTHER_PASSWORD
        else:
            password = f"{rng.getrandbits(128):032x}"  # nobody knows it: no login
        created = fmt_dt(rand_datetime(rng, datetime(2019, 1, 1), datetime(2021, 12, 31)))
        conn.execute(
            "INSERT INTO users (id, username, email, password_hash, full_name, is_admin, "
            "created_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
            (
                i,
                username,
                f"{username}@example.com",
                hash_password(password, make_salt(rng)),
                full_name,
                created,
            ),
        )
        conn.execute("INSERT INTO profiles VALUES (?, ?, ?)", (i, bio, location))
        out[username] = i
    return out


def _seed_namespaces(
    conn: sqlite3.Connection, rng: random.Random, users: dict[str, int]
) -> dict[str, tuple[int, int]]:
    """User namespaces for the named users that own projects, and the groups.

    Returns namespace path -> (namespace id, owner user id).
    """
    generated = [u for u in users if u not in {n for n, *_ in NAMED_USERS}]
    out: dict[str, tuple[int, int]] = {}
    owners = {p.namespace for p in PROJECTS}
    ns_id = 0
    for username, full_name, *_ in NAMED_USERS:
        if username in owners:
            ns_id += 1
            conn.execute(
                "INSERT INTO namespaces VALUES (?, ?, ?, 'user', ?, '')",
                (ns_id, username, full_name, users[username]),
            )
            out[username] = (ns_id, users[username])
    for path, name, desc, owner in GROUPS:
        ns_id += 1
        owner_id = users[owner] if owner else users[rng.choice(generated)]
        conn.execute(
            "INSERT INTO namespaces VALUES (?, ?, ?, 'group', ?, ?)",
            (ns_id, path, name, owner_id, desc),
        )
        out[path] = (ns_id, owner_id)
    return out


def _sha(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _fill(template: str, topic: str) -> str:
    return template.replace("{Topic}", _cap(topic)).replace("{topic}", topic)


def _seed_project(
    conn: sqlite3.Connection,
    rng: random.Random,
    pid: int,
    spec,  # noqa: ANN001 (a content.ProjectSpec)
    users: dict[str, int],
    namespaces: dict[str, tuple[int, int]],
) -> None:
    ns_id, owner_id = namespaces[spec.namespace]
    created = rand_datetime(rng, START, START + timedelta(days=300))
    owner_name = conn.execute("SELECT full_name FROM users WHERE id = ?", (owner_id,)).fetchone()[0]

    conn.execute(
        "INSERT INTO projects (id, namespace_id, path, name, description, visibility, "
        "default_branch, creator_id, created_at, last_activity_at) "
        "VALUES (?, ?, ?, ?, ?, 'public', ?, ?, ?, ?)",
        (
            pid,
            ns_id,
            spec.path,
            spec.name,
            spec.description,
            DEFAULT_BRANCH,
            owner_id,
            fmt_dt(created),
            fmt_dt(created),
        ),
    )

    # Members: the owner, byteblaze often (the default user), and a few others.
    members: dict[int, int] = {owner_id: 50}
    main_id = users[MAIN_USER]
    if main_id not in members and rng.random() < 0.55:
        members[main_id] = rng.choice((40, 40, 30, 20))
    others = [u for u in users.values() if u not in members]
    for uid in rng.sample(others, rng.randint(2, 7)):
        members[uid] = rng.choices((10, 20, 30, 40), (1, 2, 5, 2))[0]
    for uid, level in members.items():
        joined = fmt_dt(created + timedelta(days=rng.randint(0, 60)))
        conn.execute("INSERT INTO members VALUES (?, ?, ?, ?)", (pid, uid, level, joined))
    active = [u for u, lvl in members.items() if lvl >= 30]

    # Repository files.
    for path, content in sorted(repo_files(spec, rng, owner_name).items()):
        conn.execute(
            "INSERT INTO repo_files (project_id, path, content) VALUES (?, ?, ?)",
            (pid, path, content),
        )

    # Commits: distinct times, so "the latest commit" is always well defined.
    n_commits = rng.randint(6, 45)
    times = sorted({fmt_dt(rand_datetime(rng, created, END)) for _ in range(n_commits)})
    for k, when in enumerate(times):
        title = "Initial commit" if k == 0 else _fill(rng.choice(COMMIT_MESSAGES), spec.topic)
        author = rng.choice(active)
        conn.execute(
            "INSERT INTO commits (project_id, sha, author_id, title, message, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (pid, _sha(rng), author, title, title, when),
        )
    last_activity = times[-1]

    # Labels: a project-specific subset of the standard set (bug and feature always).
    chosen = ["bug", "feature"] + rng.sample([n for n, *_ in LABELS[2:]], rng.randint(2, 6))
    label_ids: dict[str, int] = {}
    for name, color, desc in LABELS:
        if name in chosen:
            cur = conn.execute(
                "INSERT INTO labels (project_id, name, color, description) VALUES (?, ?, ?, ?)",
                (pid, name, color, desc),
            )
            label_ids[name] = int(cur.lastrowid or 0)

    # Issues.
    people = list(members) + rng.sample(list(users.values()), 4)
    titles: set[str] = set()
    # iids follow creation order, as in GitLab.
    issue_times = sorted(rand_datetime(rng, created, END) for _ in range(rng.randint(6, 34)))
    for iid, opened in enumerate(issue_times, start=1):
        kind = rng.choice(("bug", "bug", "feature", "documentation", "other"))
        for _ in range(50):
            title = _fill(rng.choice(ISSUE_TITLES[kind]), spec.topic)
            if title not in titles:
                break
        else:
            kind, title = "other", f"{_fill(rng.choice(ISSUE_TITLES['other']), spec.topic)} ({iid})"
        titles.add(title)
        state = "closed" if rng.random() < 0.4 else "opened"
        closed_at = opened + timedelta(days=rng.randint(1, 90)) if state == "closed" else None
        if closed_at and closed_at > END:
            closed_at = END
        assignee = rng.choice(active) if rng.random() < 0.6 else None
        author = rng.choice(people)
        cur = conn.execute(
            "INSERT INTO issues (project_id, iid, title, description, state, author_id, "
            "assignee_id, created_at, updated_at, closed_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                pid,
                iid,
                title,
                _fill(rng.choice(ISSUE_BODIES), spec.topic),
                state,
                author,
                assignee,
                fmt_dt(opened),
                fmt_dt(closed_at or opened),
                fmt_dt(closed_at) if closed_at else None,
            ),
        )
        issue_id = int(cur.lastrowid or 0)
        names = set()
        if kind in label_ids and rng.random() < 0.85:
            names.add(kind)
        extra = [n for n in sorted(label_ids) if n not in ("bug", "feature")]
        names.update(rng.sample(extra, rng.choice((0, 0, 1, 1, 2))))
        for name in sorted(names):
            conn.execute("INSERT INTO issue_labels VALUES (?, ?)", (issue_id, label_ids[name]))
        _seed_notes(conn, rng, pid, "issue", issue_id, people, opened, rng.randint(0, 4))

    # Merge requests.
    mr_titles: set[str] = set()
    mr_times = sorted(rand_datetime(rng, created, END) for _ in range(rng.randint(2, 12)))
    for iid, opened in enumerate(mr_times, start=1):
        for _ in range(50):
            title = _fill(rng.choice(MR_TITLES), spec.topic)
            if title not in mr_titles:
                break
        mr_titles.add(title)
        state = rng.choices(("opened", "merged", "closed"), (4, 5, 1))[0]
        branch = "-".join(title.lower().replace(":", "").split()[:4])
        cur = conn.execute(
            "INSERT INTO merge_requests (project_id, iid, title, description, state, author_id, "
            "assignee_id, source_branch, target_branch, created_at, updated_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                pid,
                iid,
                title,
                _fill(rng.choice(MR_BODIES), spec.topic),
                state,
                rng.choice(active),
                rng.choice(active) if rng.random() < 0.7 else None,
                f"{iid}-{branch}",
                DEFAULT_BRANCH,
                fmt_dt(opened),
                fmt_dt(opened + timedelta(days=rng.randint(0, 20))),
            ),
        )
        _seed_notes(
            conn,
            rng,
            pid,
            "merge_request",
            int(cur.lastrowid or 0),
            active,
            opened,
            rng.randint(0, 4),
        )

    # Stars from any users; popularity varies a lot between projects.
    n_stars = min(len(users) - 1, rng.randint(0, 4) + int(rng.paretovariate(1.2) * 2) - 1)
    for uid in rng.sample(sorted(users.values()), max(0, n_stars)):
        when = fmt_dt(rand_datetime(rng, created, END))
        conn.execute("INSERT INTO stars VALUES (?, ?, ?)", (pid, uid, when))

    conn.execute("UPDATE projects SET last_activity_at = ? WHERE id = ?", (last_activity, pid))


def _seed_notes(
    conn: sqlite3.Connection,
    rng: random.Random,
    pid: int,
    kind: str,
    target: int,
    people: list[int],
    after: datetime,
    n: int,
) -> None:
    when = after
    for _ in range(n):
        when = when + timedelta(hours=rng.randint(1, 200))
        conn.execute(
            "INSERT INTO notes (project_id, noteable_type, noteable_id, author_id, body, system, "
            "created_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
            (pid, kind, target, rng.choice(people), rng.choice(COMMENTS), fmt_dt(when)),
        )


GITLAB_BACKEND = Backend(
    name="gitlab",
    version=f"{SITE_VERSION}-{source_digest(__file__, 'db.py', 'content.py', 'files.py')}",
    create_schema=create_schema,
    seed=seed,
)
"""The database of the ``gitlab`` site."""
