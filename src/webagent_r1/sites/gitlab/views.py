"""Pages of the code-hosting site ("gitlab", WebArena's GitLab), with GitLab's URL layout.

URL map (all GET unless noted; ``P`` = ``/{namespace}/{project}``):

    /                                   dashboard (signed in) or explore
    /explore/projects                   all projects; ?name= search, sort=, p=
    /dashboard/projects[/starred]       your projects / starred projects
    /dashboard/issues, /dashboard/merge_requests   ?assignee_username=, state=
    /search?search=                     projects and users
    /projects/new (GET form, POST creates)
    /{namespace}                        user profile or group page
    P                                   project overview (README), POST P/-/star toggles
    P/-/tree/main[/{dir}], P/-/blob/main/{file}
    P/-/commits/main (?author=, p=), P/-/commit/{sha}
    P/-/issues (?state=, label_name[]=, assignee_username=, search=, p=)
    P/-/issues/new (GET/POST), P/-/issues/{iid}
    POST P/-/issues/{iid}/notes | close | reopen | assign | labels | labels/{id}/remove
    P/-/merge_requests (?state=), P/-/merge_requests/{iid}, POST .../notes
    P/-/project_members (GET; POST adds a member), P/-/starrers, P/-/labels
    /users/sign_in -> /login, /login (GET/POST), /logout

A form with a name, title, path, username or label over ``base.FIELD_MAX`` characters, or a
description or comment over ``base.TEXT_MAX``, is refused with an error and nothing is stored.
"""

from __future__ import annotations

import functools
import html
import re
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

from markupsafe import Markup
from starlette.responses import Response
from starlette.routing import BaseRoute

from webagent_r1.sites.base import (
    Ctx,
    like_escape,
    login_required,
    page,
    parse_int,
    too_long,
    with_record,
)
from webagent_r1.sites.gitlab.content import ROLES
from webagent_r1.sites.gitlab.queries import (
    PROJECT_COLUMNS,
    PROJECT_FROM,
    access_level,
    get_project,
    issue_labels,
    labels,
    like_pattern,
    members,
    notes,
    project_rows,
    role_name,
    tree_entries,
    user_by_name,
)

PER_PAGE = 20
PROJECT_SORTS = {
    "": ("Last updated", "p.last_activity_at DESC, p.id DESC"),
    "name_asc": ("Name", "lower(p.name) ASC"),
    "stars_desc": ("Most stars", "star_count DESC, lower(p.name) ASC"),
    "created_desc": ("Last created", "p.created_at DESC, p.id DESC"),
}
ISSUE_STATES = {"opened": "Open", "closed": "Closed", "all": "All"}
MR_STATES = {"opened": "Open", "merged": "Merged", "closed": "Closed", "all": "All"}
REPORTER, DEVELOPER, MAINTAINER, OWNER = 20, 30, 40, 50
_PATH_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,99}$")


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def render_markdown(text: str) -> Markup:
    """A small, safe Markdown subset as HTML: headings, lists, code blocks, paragraphs.

    Every piece of text is escaped first, so a README can never inject markup.
    """
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []
    code: list[str] | None = None

    def flush() -> None:
        if para:
            out.append(f"<p>{html.escape(' '.join(para))}</p>")
            para.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for line in text.splitlines():
        if line.startswith("```"):
            if code is None:
                flush()
                code = []
            else:
                out.append(f"<pre><code>{html.escape(chr(10).join(code))}</code></pre>")
                code = None
            continue
        if code is not None:
            code.append(line)
        elif m := re.match(r"^(#{1,4})\s+(.*)", line):
            flush()
            level = min(len(m.group(1)) + 1, 4)  # the page's own title is the h1
            out.append(f"<h{level}>{html.escape(m.group(2))}</h{level}>")
        elif m := re.match(r"^\s*[-*]\s+(.*)", line):
            if para:
                flush()
            items.append(m.group(1))
        elif not line.strip():
            flush()
        else:
            if items:
                flush()
            para.append(line.strip())
    if code is not None:
        out.append(f"<pre><code>{html.escape(chr(10).join(code))}</code></pre>")
    flush()
    return Markup("\n".join(out))


def site_context(ctx: Ctx) -> dict[str, Any]:
    """Template variables of every page."""
    return {"roles": ROLES, "role_name": role_name}


def _project_or_404(ctx: Ctx) -> sqlite3.Row | None:
    pp = ctx.request.path_params
    return get_project(ctx.db, pp.get("ns", ""), pp.get("proj", ""))


def _project_rows(ctx: Ctx, project: sqlite3.Row, template: str, sql: str) -> Response:
    """Render a project page ``template`` listing the ``rows`` that ``sql`` finds (its one
    ``?`` is the project's id)."""
    rows = ctx.db.execute(sql, (project["id"],)).fetchall()
    return _render_project(ctx, template, project, rows=rows)


def _project_at_ref(ctx: Ctx) -> sqlite3.Row | None:
    """The path's project when the path's ``ref`` is its default branch (the only one)."""
    project = _project_or_404(ctx)
    if project is None or ctx.request.path_params["ref"] != project["default_branch"]:
        return None
    return project


_with_project = with_record(_project_or_404, "project")
_with_project_at_ref = with_record(_project_at_ref, "project or branch")


def _purl(project: sqlite3.Row) -> str:
    return f"/{project['full_path']}"


def _level(ctx: Ctx, project: sqlite3.Row) -> int:
    return access_level(ctx.db, project["id"], ctx.user["id"] if ctx.user else None)


def _render_project(ctx: Ctx, template: str, project: sqlite3.Row, **context: Any) -> Response:
    """Render a project page (the project menu needs the project and the viewer's role)."""
    return ctx.render(
        template,
        project=project,
        purl=_purl(project),
        level=_level(ctx, project),
        starred=ctx.user_has("stars", "project_id", project["id"]),
        **context,
    )


def _touch(ctx: Ctx, project_id: int) -> None:
    ctx.db.execute("UPDATE projects SET last_activity_at = ? WHERE id = ?", (ctx.now(), project_id))


def _project_list(ctx: Ctx, where: str, params: tuple[Any, ...], title: str, tab: str) -> Response:
    name = ctx.arg("name")
    sort = ctx.arg("sort")
    if sort not in PROJECT_SORTS:
        sort = ""
    if name:
        where += (
            " AND (p.name LIKE ? ESCAPE '\\' OR p.path LIKE ? ESCAPE '\\' "
            "OR n.path LIKE ? ESCAPE '\\' OR n.name LIKE ? ESCAPE '\\')"
        )
        params = (*params, *[like_pattern(name)] * 4)
    rows, pager = ctx.page_rows(
        PROJECT_COLUMNS,
        f"FROM {PROJECT_FROM} WHERE {where}",
        params,
        PROJECT_SORTS[sort][1],
        PER_PAGE,
    )
    return ctx.render(
        "projects.html",
        title=title,
        tab=tab,
        rows=rows,
        pager=pager,
        name=name,
        sort=sort,
        sorts=PROJECT_SORTS,
    )


# --------------------------------------------------------------------------------------------
# Dashboards, explore, search, profiles
# --------------------------------------------------------------------------------------------


async def home(ctx: Ctx) -> Response:
    """The dashboard for signed-in users, the project explorer for guests."""
    return ctx.redirect("/dashboard/projects" if ctx.user else "/explore/projects")


async def users_sign_in(ctx: Ctx) -> Response:
    """GitLab's sign-in URL."""
    return ctx.redirect("/login")


async def explore_projects(ctx: Ctx) -> Response:
    """Every project, searchable and sortable."""
    return _project_list(ctx, "1", (), "Explore projects", "explore")


@login_required("Please sign in to see your projects.")
async def dashboard_projects(ctx: Ctx) -> Response:
    """Projects the signed-in user is a member of."""
    where = "p.id IN (SELECT project_id FROM members WHERE user_id = ?)"
    return _project_list(ctx, where, (ctx.user["id"],), "Your projects", "yours")


@login_required("Please sign in to see your starred projects.")
async def dashboard_starred(ctx: Ctx) -> Response:
    """Projects the signed-in user has starred."""
    where = "p.id IN (SELECT project_id FROM stars WHERE user_id = ?)"
    return _project_list(ctx, where, (ctx.user["id"],), "Starred projects", "starred")


def _assignee_filter(ctx: Ctx) -> str:
    name = ctx.arg("assignee_username")
    if not name and ctx.user is not None and "assignee_username" not in ctx.request.query_params:
        name = ctx.user["username"]
    return name


def _state_arg(ctx: Ctx, states: dict[str, str]) -> str:
    """The ``state`` tab asked for, ``opened`` when none or an unknown one."""
    state = ctx.arg("state") or "opened"
    return state if state in states else "opened"


def _assigned(ctx: Ctx, table: str, title: str, states: dict[str, str]) -> Response:
    """Issues or merge requests (``table``) across projects assigned to a user (you, by
    default), with state tabs."""
    assignee = _assignee_filter(ctx)
    state = _state_arg(ctx, states)
    where = "u.username = ?" + ("" if state == "all" else " AND t.state = ?")
    params: tuple[Any, ...] = (assignee,) if state == "all" else (assignee, state)
    base = (
        f"FROM {table} t JOIN users u ON u.id = t.assignee_id "
        "JOIN projects p ON p.id = t.project_id JOIN namespaces n ON n.id = p.namespace_id "
        f"WHERE {where}"
    )
    rows, pager = ctx.page_rows(
        "t.*, n.path || '/' || p.path AS full_path, p.name AS project_name",
        base,
        params,
        "t.created_at DESC, t.id DESC",
        PER_PAGE,
    )
    return ctx.render(
        "dashboard_items.html",
        title=title,
        kind=table,
        rows=rows,
        pager=pager,
        assignee=assignee,
        state=state,
        states=states,
    )


@login_required("Please sign in to see your issues.")
async def dashboard_issues(ctx: Ctx) -> Response:
    """Issues across projects assigned to a user (you, by default)."""
    return _assigned(ctx, "issues", "Issues", ISSUE_STATES)


@login_required("Please sign in to see your merge requests.")
async def dashboard_mrs(ctx: Ctx) -> Response:
    """Merge requests across projects assigned to a user (you, by default)."""
    return _assigned(ctx, "merge_requests", "Merge requests", MR_STATES)


async def search(ctx: Ctx) -> Response:
    """Projects and users whose name matches ``?search=``."""
    q = ctx.arg("search")
    projects: list[sqlite3.Row] = []
    users: list[sqlite3.Row] = []
    if q:
        pat = like_pattern(q)
        projects = project_rows(
            ctx.db,
            "p.name LIKE ? ESCAPE '\\' OR p.path LIKE ? ESCAPE '\\' "
            "OR p.description LIKE ? ESCAPE '\\'",
            (pat, pat, pat),
            "lower(p.name)",
        )[:PER_PAGE]
        users = ctx.db.execute(
            "SELECT * FROM users WHERE username LIKE ? ESCAPE '\\' OR full_name LIKE ? ESCAPE '\\' "
            "ORDER BY full_name LIMIT ?",
            (pat, pat, PER_PAGE),
        ).fetchall()
    return ctx.render("search.html", query=q, projects=projects, users=users)


async def namespace_page(ctx: Ctx) -> Response:
    """``/{name}``: a user's profile or a group's project list."""
    name = ctx.request.path_params["ns"]
    person = user_by_name(ctx.db, name)
    if person is not None:
        personal = project_rows(ctx.db, "n.path = ? AND n.kind = 'user'", (name,))
        member_of = project_rows(
            ctx.db,
            "p.id IN (SELECT project_id FROM members WHERE user_id = ?) AND n.path != ?",
            (person["id"], name),
            "lower(p.name)",
        )
        starred = project_rows(
            ctx.db,
            "p.id IN (SELECT project_id FROM stars WHERE user_id = ?)",
            (person["id"],),
            "lower(p.name)",
        )
        return ctx.render(
            "profile.html", person=person, personal=personal, member_of=member_of, starred=starred
        )
    group = ctx.db.execute(
        "SELECT n.*, u.username AS owner_username, u.full_name AS owner_name FROM namespaces n "
        "JOIN users u ON u.id = n.owner_id WHERE n.path = ? AND n.kind = 'group'",
        (name,),
    ).fetchone()
    if group is None:
        return ctx.not_found("user or group")
    rows = project_rows(ctx.db, "n.id = ?", (group["id"],), "lower(p.name)")
    return ctx.render("group.html", group=group, rows=rows)


@login_required("Please sign in to create a project.")
async def new_project(ctx: Ctx) -> Response:
    """GET: the new-project form. POST: create the project in one of your namespaces."""
    spaces = ctx.db.execute(
        "SELECT * FROM namespaces WHERE owner_id = ? ORDER BY kind = 'group', path",
        (ctx.user["id"],),
    ).fetchall()
    form: dict[str, str] = {"name": "", "path": "", "description": "", "visibility": "private"}
    form["namespace"] = ctx.user["username"]
    error = None
    if ctx.request.method == "POST":
        form.update(await ctx.form())
        name, path = form.get("name", ""), form.get("path", "")
        if not path:
            path = re.sub(r"[^a-z0-9_.]+", "-", name.lower()).strip("-.")
        space = next((s for s in spaces if s["path"] == form.get("namespace")), None)
        long_error = too_long(
            {
                "project_name": name,
                "project_slug": form.get("path", ""),
                "namespace": form.get("namespace", ""),
                "project_description": form.get("description", ""),
            },
            long=["project_description"],
        )
        if not name:
            error = "Project name can't be blank."
        elif long_error:
            error = long_error
        elif not _PATH_RE.match(path):
            error = "Project slug can contain only letters, digits, '_', '-' and '.'."
        elif form.get("visibility") not in ("private", "public"):
            error = "Choose a visibility level."
        if error is None and space is None:
            space = (
                _ensure_user_namespace(ctx)
                if form.get("namespace") in ("", ctx.user["username"])
                else None
            )
            if space is None:
                error = "You can only create projects in your own namespace or groups you own."
        if error is None and space is not None:
            taken = ctx.db.execute(
                "SELECT 1 FROM projects WHERE namespace_id = ? "
                "AND (path = ? OR lower(name) = lower(?))",
                (space["id"], path, name),
            ).fetchone()
            if taken:
                error = "The name or path has already been taken in this namespace."
            else:
                now = ctx.now()
                cur = ctx.db.execute(
                    "INSERT INTO projects (namespace_id, path, name, description, visibility, "
                    "default_branch, creator_id, created_at, last_activity_at) "
                    "VALUES (?, ?, ?, ?, ?, 'main', ?, ?, ?)",
                    (
                        space["id"],
                        path,
                        name,
                        form.get("description", ""),
                        form["visibility"],
                        ctx.user["id"],
                        now,
                        now,
                    ),
                )
                ctx.db.execute(
                    "INSERT INTO members VALUES (?, ?, 50, ?)", (cur.lastrowid, ctx.user["id"], now)
                )
                ctx.db.commit()
                return ctx.redirect(
                    f"/{space['path']}/{path}", f"Project '{name}' was successfully created."
                )
    names = [ctx.user["username"]] + [
        s["path"] for s in spaces if s["path"] != ctx.user["username"]
    ]
    return ctx.render("new_project.html", form=form, namespaces=names, error=error)


def _ensure_user_namespace(ctx: Ctx) -> sqlite3.Row:
    assert ctx.user is not None
    row = ctx.db.execute(
        "SELECT * FROM namespaces WHERE path = ? AND kind = 'user'", (ctx.user["username"],)
    ).fetchone()
    if row is None:
        ctx.db.execute(
            "INSERT INTO namespaces (path, name, kind, owner_id) VALUES (?, ?, 'user', ?)",
            (ctx.user["username"], ctx.user["full_name"], ctx.user["id"]),
        )
        row = ctx.db.execute(
            "SELECT * FROM namespaces WHERE path = ? AND kind = 'user'", (ctx.user["username"],)
        ).fetchone()
    return row


# --------------------------------------------------------------------------------------------
# Project, repository, commits
# --------------------------------------------------------------------------------------------


def _files(ctx: Ctx, project_id: int) -> list[str]:
    return [
        r[0]
        for r in ctx.db.execute(
            "SELECT path FROM repo_files WHERE project_id = ? ORDER BY path", (project_id,)
        )
    ]


def _last_commit(ctx: Ctx, project_id: int) -> sqlite3.Row | None:
    return ctx.db.execute(
        "SELECT c.*, u.username, u.full_name FROM commits c JOIN users u ON u.id = c.author_id "
        "WHERE c.project_id = ? ORDER BY c.created_at DESC, c.id DESC LIMIT 1",
        (project_id,),
    ).fetchone()


@_with_project
async def project_page(ctx: Ctx, project: sqlite3.Row) -> Response:
    """Project overview: description, counters, star button, root files, README."""
    dirs, files = tree_entries(_files(ctx, project["id"]), "")
    readme = ctx.db.execute(
        "SELECT content FROM repo_files WHERE project_id = ? AND path = 'README.md'",
        (project["id"],),
    ).fetchone()
    n_commits = ctx.db.execute(
        "SELECT COUNT(*) FROM commits WHERE project_id = ?", (project["id"],)
    ).fetchone()[0]
    return _render_project(
        ctx,
        "project.html",
        project,
        dirs=dirs,
        files=files,
        readme=render_markdown(readme[0]) if readme else None,
        n_commits=n_commits,
        last_commit=_last_commit(ctx, project["id"]),
    )


@_with_project
async def star(ctx: Ctx, project: sqlite3.Row) -> Response:
    """POST: star the project, or unstar it when already starred."""
    if ctx.user is None:
        return ctx.redirect(
            f"/login?next={_purl(project)}", "Please sign in to star projects.", "notice"
        )
    if ctx.user_has("stars", "project_id", project["id"]):
        ctx.db.execute(
            "DELETE FROM stars WHERE project_id = ? AND user_id = ?",
            (project["id"], ctx.user["id"]),
        )
        message = f"You unstarred {project['name']}."
    else:
        ctx.db.execute(
            "INSERT INTO stars VALUES (?, ?, ?)", (project["id"], ctx.user["id"], ctx.now())
        )
        message = f"You starred {project['name']}."
    ctx.db.commit()
    return ctx.redirect(_purl(project), message)


@_with_project
async def starrers(ctx: Ctx, project: sqlite3.Row) -> Response:
    """Who starred the project."""
    return _project_rows(
        ctx,
        project,
        "starrers.html",
        "SELECT u.username, u.full_name, s.created_at FROM stars s "
        "JOIN users u ON u.id = s.user_id "
        "WHERE s.project_id = ? ORDER BY s.created_at DESC",
    )


@_with_project_at_ref
async def tree(ctx: Ctx, project: sqlite3.Row) -> Response:
    """A directory of the repository."""
    directory = ctx.request.path_params.get("path", "").strip("/")
    all_files = _files(ctx, project["id"])
    dirs, files = tree_entries(all_files, directory)
    if directory and not dirs and not files:
        return ctx.not_found("directory")
    crumbs = []
    parts = directory.split("/") if directory else []
    for k, part in enumerate(parts):
        crumbs.append((part, "/".join(parts[: k + 1])))
    return _render_project(
        ctx, "tree.html", project, directory=directory, dirs=dirs, files=files, crumbs=crumbs
    )


@_with_project_at_ref
async def blob(ctx: Ctx, project: sqlite3.Row) -> Response:
    """One file of the repository, with line numbers."""
    path = ctx.request.path_params["path"].strip("/")
    row = ctx.db.execute(
        "SELECT * FROM repo_files WHERE project_id = ? AND path = ?", (project["id"], path)
    ).fetchone()
    if row is None:
        return ctx.not_found("file")
    parts = path.split("/")
    crumbs = [(part, "/".join(parts[: k + 1])) for k, part in enumerate(parts[:-1])]
    lines = row["content"].splitlines()
    return _render_project(
        ctx,
        "blob.html",
        project,
        path=path,
        filename=parts[-1],
        crumbs=crumbs,
        lines=lines,
        size=len(row["content"].encode()),
    )


@_with_project_at_ref
async def commits(ctx: Ctx, project: sqlite3.Row) -> Response:
    """Commits of the default branch, newest first; ?author= filters by username."""
    author = ctx.arg("author")
    where, params = "c.project_id = ?", [project["id"]]
    if author:
        where += " AND u.username = ?"
        params.append(author)
    base = f"FROM commits c JOIN users u ON u.id = c.author_id WHERE {where}"
    rows, pager = ctx.page_rows(
        "c.*, u.username, u.full_name", base, params, "c.created_at DESC, c.id DESC", PER_PAGE
    )
    authors = ctx.db.execute(
        "SELECT DISTINCT u.username, u.full_name FROM commits c JOIN users u ON u.id = c.author_id "
        "WHERE c.project_id = ? ORDER BY u.full_name",
        (project["id"],),
    ).fetchall()
    return _render_project(
        ctx, "commits.html", project, rows=rows, pager=pager, author=author, authors=authors
    )


@_with_project
async def commit(ctx: Ctx, project: sqlite3.Row) -> Response:
    """One commit."""
    sha = ctx.request.path_params["sha"]
    row = ctx.db.execute(
        "SELECT c.*, u.username, u.full_name FROM commits c JOIN users u ON u.id = c.author_id "
        "WHERE c.project_id = ? AND (c.sha = ? OR (length(?) >= 8 AND c.sha LIKE ? ESCAPE '\\'))",
        (project["id"], sha, sha, like_escape(sha) + "%"),
    ).fetchone()
    if row is None:
        return ctx.not_found("commit")
    return _render_project(ctx, "commit.html", project, c=row)


# --------------------------------------------------------------------------------------------
# Issues
# --------------------------------------------------------------------------------------------


@_with_project
async def issues(ctx: Ctx, project: sqlite3.Row) -> Response:
    """Issues of a project with state tabs, label / assignee filters and a text search."""
    state = _state_arg(ctx, ISSUE_STATES)
    label = ctx.arg("label_name[]") or ctx.arg("label_name")
    assignee = ctx.arg("assignee_username")
    q = ctx.arg("search")
    where, params = "i.project_id = ?", [project["id"]]
    if label:
        where += (
            " AND i.id IN (SELECT il.issue_id FROM issue_labels il JOIN labels l "
            "ON l.id = il.label_id WHERE l.name = ? AND l.project_id = i.project_id)"
        )
        params.append(label)
    if assignee == "None":
        where += " AND i.assignee_id IS NULL"
    elif assignee:
        where += " AND i.assignee_id = (SELECT id FROM users WHERE username = ?)"
        params.append(assignee)
    if m := re.fullmatch(r"#(\d+)", q):  # "#12": the issue with that number
        where += " AND i.iid = ?"
        params.append(parse_int(m.group(1)))  # None (too big): matches no issue
    elif q:
        where += " AND (i.title LIKE ? ESCAPE '\\' OR i.description LIKE ? ESCAPE '\\')"
        params += [like_pattern(q), like_pattern(q)]
    counts = {
        r[0]: r[1]
        for r in ctx.db.execute(
            f"SELECT i.state, COUNT(*) FROM issues i WHERE {where} GROUP BY i.state", params
        )
    }
    counts["all"] = sum(counts.values())
    shown = where + ("" if state == "all" else " AND i.state = ?")
    shown_params = params + ([] if state == "all" else [state])
    rows, pager = ctx.page_rows(
        "i.*, a.username AS author_username, a.full_name AS author_name, "
        "s.username AS assignee_username, s.full_name AS assignee_name, "
        "(SELECT COUNT(*) FROM notes n WHERE n.noteable_type = 'issue' AND n.noteable_id = i.id "
        "AND n.system = 0) AS n_comments",
        "FROM issues i JOIN users a ON a.id = i.author_id "
        f"LEFT JOIN users s ON s.id = i.assignee_id WHERE {shown}",
        shown_params,
        "i.created_at DESC, i.id DESC",
        PER_PAGE,
        total=counts.get(state, 0),
    )
    return _render_project(
        ctx,
        "issues.html",
        project,
        rows=rows,
        pager=pager,
        labels_of=issue_labels(ctx.db, [r["id"] for r in rows]),
        state=state,
        states=ISSUE_STATES,
        counts=counts,
        label=label,
        assignee=assignee,
        search=q,
        all_labels=labels(ctx.db, project["id"]),
        people=members(ctx.db, project["id"]),
    )


def _numbered(ctx: Ctx, project: sqlite3.Row, table: str) -> sqlite3.Row | None:
    """The project's issue or merge request (``table``) with the path's ``iid``, with the
    author's and assignee's names."""
    return ctx.db.execute(
        "SELECT t.*, a.username AS author_username, a.full_name AS author_name, "
        "s.username AS assignee_username, s.full_name AS assignee_name "
        f"FROM {table} t JOIN users a ON a.id = t.author_id "
        "LEFT JOIN users s ON s.id = t.assignee_id WHERE t.project_id = ? AND t.iid = ?",
        (project["id"], ctx.path_int("iid") or 0),
    ).fetchone()


def _project_and(table: str) -> Callable[[Ctx], tuple[sqlite3.Row, sqlite3.Row] | None]:
    """A finder of the path's project and its issue or merge request (``table``): None when
    either is missing."""

    def find(ctx: Ctx) -> tuple[sqlite3.Row, sqlite3.Row] | None:
        project = _project_or_404(ctx)
        item = _numbered(ctx, project, table) if project is not None else None
        return None if project is None or item is None else (project, item)

    return find


_project_issue = _project_and("issues")
_with_project_issue = with_record(_project_issue, "issue")
_with_project_mr = with_record(_project_and("merge_requests"), "merge request")


@_with_project_issue
async def issue_page(ctx: Ctx, found: tuple[sqlite3.Row, sqlite3.Row]) -> Response:
    """One issue: description, labels, assignee, comments and the forms that change them."""
    project, issue = found
    own = issue_labels(ctx.db, [issue["id"]])[issue["id"]]
    own_ids = {lab["id"] for lab in own}
    return _render_project(
        ctx,
        "issue.html",
        project,
        issue=issue,
        issue_labels=own,
        other_labels=[lab for lab in labels(ctx.db, project["id"]) if lab["id"] not in own_ids],
        people=members(ctx.db, project["id"]),
        notes=notes(ctx.db, "issue", issue["id"]),
        can_edit=ctx.user is not None
        and (_level(ctx, project) >= REPORTER or ctx.user["id"] == issue["author_id"]),
    )


def _system_note(ctx: Ctx, project_id: int, kind: str, target: int, body: str) -> None:
    assert ctx.user is not None
    ctx.db.execute(
        "INSERT INTO notes (project_id, noteable_type, noteable_id, author_id, body, system, "
        "created_at) VALUES (?, ?, ?, ?, ?, 1, ?)",
        (project_id, kind, target, ctx.user["id"], body, ctx.now()),
    )


async def _editable_issue(ctx: Ctx) -> tuple[sqlite3.Row, sqlite3.Row, str] | Response:
    """The project, the issue and its URL if the user may change it; else the response."""
    found = _project_issue(ctx)
    if found is None:
        return ctx.not_found("issue")
    project, issue = found
    url = f"{_purl(project)}/-/issues/{issue['iid']}"
    if ctx.user is None:
        return ctx.redirect(f"/login?next={url}", "Please sign in first.", "notice")
    if _level(ctx, project) < REPORTER and ctx.user["id"] != issue["author_id"]:
        return ctx.redirect(
            url, "You need at least the Reporter role in this project to do that.", "error"
        )
    return project, issue, url


def _issue_change(
    handler: Callable[[Ctx, sqlite3.Row, sqlite3.Row, str], Awaitable[Response]],
) -> Callable[[Ctx], Awaitable[Response]]:
    """Decorate a POST handler ``handler(ctx, project, issue, url)`` that changes an issue: it
    runs when the user may change the issue (``_editable_issue``), else the response says why."""

    @functools.wraps(handler)
    async def change(ctx: Ctx) -> Response:
        got = await _editable_issue(ctx)
        if isinstance(got, Response):
            return got
        return await handler(ctx, *got)

    return change


@_with_project
async def issue_new(ctx: Ctx, project: sqlite3.Row) -> Response:
    """GET: the new-issue form. POST: create the issue (title required)."""
    if ctx.user is None:
        return ctx.login_redirect("Please sign in to create an issue.")
    form = {"title": "", "description": "", "assignee_username": "", "label": ""}
    error = None
    if ctx.request.method == "POST":
        form.update(await ctx.form())
        long_error = too_long(
            {
                "title": form["title"],
                "description": form["description"],
                "assignee": form["assignee_username"],
                "label": form["label"],
            },
            long=["description"],
        )
        if not form["title"]:
            error = "Title can't be blank."
        elif long_error:
            error = long_error
        else:
            iid = ctx.db.execute(
                "SELECT COALESCE(MAX(iid), 0) + 1 FROM issues WHERE project_id = ?",
                (project["id"],),
            ).fetchone()[0]
            assignee = (
                user_by_name(ctx.db, form["assignee_username"])
                if form["assignee_username"]
                else None
            )
            now = ctx.now()
            cur = ctx.db.execute(
                "INSERT INTO issues (project_id, iid, title, description, state, author_id, "
                "assignee_id, created_at, updated_at) VALUES (?, ?, ?, ?, 'opened', ?, ?, ?, ?)",
                (
                    project["id"],
                    iid,
                    form["title"],
                    form["description"],
                    ctx.user["id"],
                    assignee["id"] if assignee else None,
                    now,
                    now,
                ),
            )
            label = ctx.db.execute(
                "SELECT id FROM labels WHERE project_id = ? AND name = ?",
                (project["id"], form["label"]),
            ).fetchone()
            if label:
                ctx.db.execute("INSERT INTO issue_labels VALUES (?, ?)", (cur.lastrowid, label[0]))
            _touch(ctx, project["id"])
            ctx.db.commit()
            return ctx.redirect(f"{_purl(project)}/-/issues/{iid}", f"Issue #{iid} was created.")
    return _render_project(
        ctx,
        "issue_new.html",
        project,
        form=form,
        error=error,
        all_labels=labels(ctx.db, project["id"]),
        people=members(ctx.db, project["id"]),
    )


@_with_project_issue
async def issue_note(ctx: Ctx, found: tuple[sqlite3.Row, sqlite3.Row]) -> Response:
    """POST body: comment on an issue (any signed-in user)."""
    project, issue = found
    url = f"{_purl(project)}/-/issues/{issue['iid']}"
    return await _add_note(ctx, project, "issue", issue["id"], url)


async def _add_note(ctx: Ctx, project: sqlite3.Row, kind: str, target: int, url: str) -> Response:
    if ctx.user is None:
        return ctx.redirect(f"/login?next={url}", "Please sign in to comment.", "notice")
    body = (await ctx.form()).get("body", "")
    if error := too_long({"comment": body}, long=["comment"]):
        return ctx.redirect(url + "#notes", error, "error")
    if not body:
        return ctx.redirect(url + "#notes", "The comment can't be blank.", "error")
    ctx.db.execute(
        "INSERT INTO notes (project_id, noteable_type, noteable_id, author_id, body, system, "
        "created_at) VALUES (?, ?, ?, ?, ?, 0, ?)",
        (project["id"], kind, target, ctx.user["id"], body, ctx.now()),
    )
    table = "issues" if kind == "issue" else "merge_requests"
    ctx.db.execute(f"UPDATE {table} SET updated_at = ? WHERE id = ?", (ctx.now(), target))
    _touch(ctx, project["id"])
    ctx.db.commit()
    return ctx.redirect(url + "#notes", "Your comment was added.")


@_issue_change
async def issue_state(ctx: Ctx, project: sqlite3.Row, issue: sqlite3.Row, url: str) -> Response:
    """POST: close or reopen an issue (the last path segment says which)."""
    close = ctx.request.url.path.endswith("/close")
    want = "closed" if close else "opened"
    if issue["state"] == want:
        return ctx.redirect(url, f"The issue is already {'closed' if close else 'open'}.", "notice")
    now = ctx.now()
    ctx.db.execute(
        "UPDATE issues SET state = ?, closed_at = ?, updated_at = ? WHERE id = ?",
        (want, now if close else None, now, issue["id"]),
    )
    _system_note(ctx, project["id"], "issue", issue["id"], "closed" if close else "reopened")
    _touch(ctx, project["id"])
    ctx.db.commit()
    return ctx.redirect(url, f"Issue #{issue['iid']} was {'closed' if close else 'reopened'}.")


@_issue_change
async def issue_assign(ctx: Ctx, project: sqlite3.Row, issue: sqlite3.Row, url: str) -> Response:
    """POST assignee_username: set or clear the assignee ('' = unassigned)."""
    username = (await ctx.form()).get("assignee_username", "")
    if error := too_long({"assignee": username}):
        return ctx.redirect(url, error, "error")
    person = user_by_name(ctx.db, username) if username else None
    if username and person is None:
        return ctx.redirect(url, f"There is no user {username}.", "error")
    ctx.db.execute(
        "UPDATE issues SET assignee_id = ?, updated_at = ? WHERE id = ?",
        (person["id"] if person else None, ctx.now(), issue["id"]),
    )
    body = f"assigned to @{person['username']}" if person else "removed the assignee"
    _system_note(ctx, project["id"], "issue", issue["id"], body)
    ctx.db.commit()
    msg = f"Assigned to {person['full_name']}." if person else "The issue is now unassigned."
    return ctx.redirect(url, msg)


@_issue_change
async def issue_label_add(ctx: Ctx, project: sqlite3.Row, issue: sqlite3.Row, url: str) -> Response:
    """POST label: add a project label to the issue."""
    name = (await ctx.form()).get("label", "")
    if error := too_long({"label": name}):
        return ctx.redirect(url, error, "error")
    label = ctx.db.execute(
        "SELECT * FROM labels WHERE project_id = ? AND name = ?", (project["id"], name)
    ).fetchone()
    if label is None:
        return ctx.redirect(url, "Choose a label to add.", "error")
    ctx.db.execute("INSERT OR IGNORE INTO issue_labels VALUES (?, ?)", (issue["id"], label["id"]))
    ctx.db.execute("UPDATE issues SET updated_at = ? WHERE id = ?", (ctx.now(), issue["id"]))
    _system_note(ctx, project["id"], "issue", issue["id"], f"added the {name} label")
    ctx.db.commit()
    return ctx.redirect(url, f"Added the label {name}.")


@_issue_change
async def issue_label_remove(
    ctx: Ctx, project: sqlite3.Row, issue: sqlite3.Row, url: str
) -> Response:
    """POST: remove a label from the issue."""
    label = ctx.db.execute(
        "SELECT * FROM labels WHERE project_id = ? AND id = ?",
        (project["id"], ctx.path_int("label_id") or 0),
    ).fetchone()
    if label is None:
        return ctx.redirect(url, "No such label.", "error")
    ctx.db.execute(
        "DELETE FROM issue_labels WHERE issue_id = ? AND label_id = ?", (issue["id"], label["id"])
    )
    _system_note(ctx, project["id"], "issue", issue["id"], f"removed the {label['name']} label")
    ctx.db.commit()
    return ctx.redirect(url, f"Removed the label {label['name']}.")


@_with_project
async def labels_page(ctx: Ctx, project: sqlite3.Row) -> Response:
    """Labels of a project with their open issue counts."""
    return _project_rows(
        ctx,
        project,
        "labels.html",
        "SELECT l.*, (SELECT COUNT(*) FROM issue_labels il JOIN issues i ON i.id = il.issue_id "
        "WHERE il.label_id = l.id AND i.state = 'opened') AS open_issues FROM labels l "
        "WHERE l.project_id = ? ORDER BY l.name",
    )


# --------------------------------------------------------------------------------------------
# Merge requests
# --------------------------------------------------------------------------------------------


@_with_project
async def merge_requests(ctx: Ctx, project: sqlite3.Row) -> Response:
    """Merge requests of a project with state tabs."""
    state = _state_arg(ctx, MR_STATES)
    counts = {
        r[0]: r[1]
        for r in ctx.db.execute(
            "SELECT state, COUNT(*) FROM merge_requests WHERE project_id = ? GROUP BY state",
            (project["id"],),
        )
    }
    counts["all"] = sum(counts.values())
    where = "m.project_id = ?" + ("" if state == "all" else " AND m.state = ?")
    params = [project["id"]] + ([] if state == "all" else [state])
    rows, pager = ctx.page_rows(
        "m.*, a.username AS author_username, a.full_name AS author_name",
        f"FROM merge_requests m JOIN users a ON a.id = m.author_id WHERE {where}",
        params,
        "m.created_at DESC, m.id DESC",
        PER_PAGE,
        total=counts.get(state, 0),
    )
    return _render_project(
        ctx,
        "merge_requests.html",
        project,
        rows=rows,
        pager=pager,
        state=state,
        states=MR_STATES,
        counts=counts,
    )


@_with_project_mr
async def merge_request_page(ctx: Ctx, found: tuple[sqlite3.Row, sqlite3.Row]) -> Response:
    """One merge request: branches, description, comments, comment form."""
    project, mr = found
    return _render_project(
        ctx, "merge_request.html", project, mr=mr, notes=notes(ctx.db, "merge_request", mr["id"])
    )


@_with_project_mr
async def merge_request_note(ctx: Ctx, found: tuple[sqlite3.Row, sqlite3.Row]) -> Response:
    """POST body: comment on a merge request."""
    project, mr = found
    url = f"{_purl(project)}/-/merge_requests/{mr['iid']}"
    return await _add_note(ctx, project, "merge_request", mr["id"], url)


# --------------------------------------------------------------------------------------------
# Members
# --------------------------------------------------------------------------------------------


@_with_project
async def project_members(ctx: Ctx, project: sqlite3.Row) -> Response:
    """GET: the members and (for maintainers) the invite form. POST: add a member."""
    url = f"{_purl(project)}/-/project_members"
    level = _level(ctx, project)
    if ctx.request.method == "POST":
        if ctx.user is None:
            return ctx.redirect(f"/login?next={url}", "Please sign in first.", "notice")
        if level < MAINTAINER:
            return ctx.redirect(url, "Only maintainers and owners can invite members.", "error")
        form = await ctx.form()
        if error := too_long({"username": form.get("username", "")}):
            return ctx.redirect(url, error, "error")
        person = user_by_name(ctx.db, form.get("username", ""))
        role = parse_int(form.get("access_level"), 0)
        if person is None:
            return ctx.redirect(url, "Select a user to invite.", "error")
        if role not in ROLES or (role == OWNER and level < OWNER):
            return ctx.redirect(url, "Select a role.", "error")
        if access_level(ctx.db, project["id"], person["id"]):
            return ctx.redirect(url, f"{person['full_name']} is already a member.", "error")
        ctx.db.execute(
            "INSERT INTO members VALUES (?, ?, ?, ?)",
            (project["id"], person["id"], role, ctx.now()),
        )
        ctx.db.commit()
        return ctx.redirect(
            url, f"{person['full_name']} was added to the project as {role_name(role)}."
        )
    rows = members(ctx.db, project["id"])
    member_ids = {r["id"] for r in rows}
    candidates = [
        u
        for u in ctx.db.execute("SELECT * FROM users ORDER BY username").fetchall()
        if u["id"] not in member_ids
    ]
    return _render_project(
        ctx,
        "members.html",
        project,
        rows=rows,
        candidates=candidates if level >= MAINTAINER else [],
    )


def routes() -> list[BaseRoute]:
    """The site's routes (login/logout are added by the framework); specific ones first."""
    post = ("POST",)
    both = ("GET", "POST")
    p = "/{ns}/{proj}"
    return [
        page("/", home),
        page("/users/sign_in", users_sign_in),
        page("/explore", explore_projects),
        page("/explore/projects", explore_projects),
        page("/dashboard/projects", dashboard_projects),
        page("/dashboard/projects/starred", dashboard_starred),
        page("/dashboard/issues", dashboard_issues),
        page("/dashboard/merge_requests", dashboard_mrs),
        page("/search", search),
        page("/projects/new", new_project, both),
        page("/{ns}", namespace_page),
        page(p, project_page),
        page(p + "/-/star", star, post),
        page(p + "/-/starrers", starrers),
        page(p + "/-/tree/{ref}", tree),
        page(p + "/-/tree/{ref}/{path:path}", tree),
        page(p + "/-/blob/{ref}/{path:path}", blob),
        page(p + "/-/commits/{ref}", commits),
        page(p + "/-/commit/{sha}", commit),
        page(p + "/-/issues", issues),
        page(p + "/-/issues/new", issue_new, both),
        page(p + "/-/issues/{iid:id}", issue_page),
        page(p + "/-/issues/{iid:id}/notes", issue_note, post),
        page(p + "/-/issues/{iid:id}/close", issue_state, post),
        page(p + "/-/issues/{iid:id}/reopen", issue_state, post),
        page(p + "/-/issues/{iid:id}/assign", issue_assign, post),
        page(p + "/-/issues/{iid:id}/labels", issue_label_add, post),
        page(p + "/-/issues/{iid:id}/labels/{label_id:id}/remove", issue_label_remove, post),
        page(p + "/-/labels", labels_page),
        page(p + "/-/merge_requests", merge_requests),
        page(p + "/-/merge_requests/{iid:id}", merge_request_page),
        page(p + "/-/merge_requests/{iid:id}/notes", merge_request_note, post),
        page(p + "/-/project_members", project_members, both),
    ]
