"""Database queries of the code-hosting site, shared by its pages and its task templates."""

from __future__ import annotations

import sqlite3
from typing import Any

from webagent_r1.sites.base import like_escape
from webagent_r1.sites.gitlab.content import ROLES

PROJECT_COLUMNS = (
    "p.*, n.path AS ns_path, n.name AS ns_name, n.kind AS ns_kind, "
    "n.path || '/' || p.path AS full_path, "
    "(SELECT COUNT(*) FROM stars s WHERE s.project_id = p.id) AS star_count, "
    "(SELECT COUNT(*) FROM issues i WHERE i.project_id = p.id AND i.state = 'opened') "
    "AS open_issues, "
    "(SELECT COUNT(*) FROM merge_requests m WHERE m.project_id = p.id AND m.state = 'opened') "
    "AS open_mrs"
)
"""Columns of a project row: namespace, full path, star and open issue / MR counts."""
PROJECT_FROM = "projects p JOIN namespaces n ON n.id = p.namespace_id"


def get_project(db: sqlite3.Connection, ns: str, path: str) -> sqlite3.Row | None:
    """The project ``ns/path`` with its counters, or None."""
    return db.execute(
        f"SELECT {PROJECT_COLUMNS} FROM {PROJECT_FROM} WHERE n.path = ? AND p.path = ?",
        (ns, path),
    ).fetchone()


def access_level(db: sqlite3.Connection, project_id: int, user_id: int | None) -> int:
    """The user's access level in the project (0: not a member)."""
    if user_id is None:
        return 0
    row = db.execute(
        "SELECT access_level FROM members WHERE project_id = ? AND user_id = ?",
        (project_id, user_id),
    ).fetchone()
    return int(row[0]) if row else 0


def role_name(level: int) -> str:
    """``30`` -> ``Developer``."""
    return ROLES.get(level, "None")


def members(db: sqlite3.Connection, project_id: int) -> list[sqlite3.Row]:
    """Members of a project, highest role first, then by name."""
    return db.execute(
        "SELECT u.id, u.username, u.full_name, m.access_level, m.created_at FROM members m "
        "JOIN users u ON u.id = m.user_id WHERE m.project_id = ? "
        "ORDER BY m.access_level DESC, u.full_name",
        (project_id,),
    ).fetchall()


def labels(db: sqlite3.Connection, project_id: int) -> list[sqlite3.Row]:
    """Labels of a project by name."""
    return db.execute(
        "SELECT * FROM labels WHERE project_id = ? ORDER BY name", (project_id,)
    ).fetchall()


def issue_labels(db: sqlite3.Connection, issue_ids: list[int]) -> dict[int, list[sqlite3.Row]]:
    """Issue id -> its labels (by name)."""
    if not issue_ids:
        return {}
    marks = ",".join("?" * len(issue_ids))
    out: dict[int, list[sqlite3.Row]] = {i: [] for i in issue_ids}
    for row in db.execute(
        f"SELECT il.issue_id, l.* FROM issue_labels il JOIN labels l ON l.id = il.label_id "
        f"WHERE il.issue_id IN ({marks}) ORDER BY l.name",
        issue_ids,
    ):
        out[row["issue_id"]].append(row)
    return out


def notes(db: sqlite3.Connection, kind: str, target_id: int) -> list[sqlite3.Row]:
    """Comments and events of an issue or merge request, oldest first."""
    return db.execute(
        "SELECT n.*, u.username, u.full_name FROM notes n JOIN users u ON u.id = n.author_id "
        "WHERE n.noteable_type = ? AND n.noteable_id = ? ORDER BY n.created_at, n.id",
        (kind, target_id),
    ).fetchall()


def tree_entries(files: list[str], directory: str) -> tuple[list[str], list[str]]:
    """Sub-directories and files directly inside ``directory`` ('' = the root), sorted.

    Args:
        files: Every file path of the repository.
        directory: A directory path without leading or trailing slash.
    """
    prefix = directory + "/" if directory else ""
    dirs: set[str] = set()
    here: list[str] = []
    for f in files:
        if not f.startswith(prefix):
            continue
        rest = f[len(prefix) :]
        if "/" in rest:
            dirs.add(rest.split("/", 1)[0])
        else:
            here.append(rest)
    return sorted(dirs), sorted(here)


def like_pattern(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere (wildcards escaped; use ESCAPE '\\')."""
    return f"%{like_escape(text)}%"


def user_by_name(db: sqlite3.Connection, username: str) -> sqlite3.Row | None:
    """A user with profile by username, or None."""
    return db.execute(
        "SELECT u.*, pr.bio, pr.location FROM users u LEFT JOIN profiles pr ON pr.user_id = u.id "
        "WHERE u.username = ?",
        (username,),
    ).fetchone()


def project_rows(
    db: sqlite3.Connection, where: str = "1", params: tuple[Any, ...] = (), order: str = ""
) -> list[sqlite3.Row]:
    """Projects (with counters) matching ``where``."""
    order = order or "p.last_activity_at DESC, p.id DESC"
    return db.execute(
        f"SELECT {PROJECT_COLUMNS} FROM {PROJECT_FROM} WHERE {where} ORDER BY {order}", params
    ).fetchall()
