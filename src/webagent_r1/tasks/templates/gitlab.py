"""Task templates of the code-hosting site ("gitlab", WebArena's GitLab).

Every template samples its parameters from the pristine database and grades with a WebArena
``eval`` spec: ``string_match`` for questions (info), ``url_match`` for pages to reach (nav),
``state_match`` SQL checks on the episode's own instance for changes (one also checks the page
with ``program_html``). As in WebArena, every task is done as the user ``byteblaze``. The
experts navigate like a user: the "Search GitLab" box, the project menu, the filters of the
issue list, the repository browser; they read answers off the observation text.

Ids 400-449. Held out (test split only): ``gitlab.most_starred_in_group`` (440),
``gitlab.commits_by_author`` (441), ``gitlab.merge_request_page`` (442),
``gitlab.create_issue_assigned_labelled`` (443).
"""

from __future__ import annotations

import random
import re
import sqlite3
from typing import Any

from webagent_r1.sites.gitlab.content import ROLES
from webagent_r1.sites.gitlab.db import MAIN_USER
from webagent_r1.tasks.experts import (
    Element,
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
    grab,
    line_after,
    more_below,
    page_check,
    seek,
    state_check,
    state_eval,
    url_eval,
    user_id,
)
from webagent_r1.types import Observation

START = "__GITLAB__/"
USER = MAIN_USER
"""Every task runs logged in as WebArena's GitLab user."""


ISSUE_TITLES = (
    "Add a changelog for the next release",
    "Login page shows a blank screen on Safari",
    "Support YAML configuration files",
    "Improve the performance of the search endpoint",
    "Add a contributing guide",
    "Typo in the installation instructions",
    "Crash when the input file is empty",
    "Translate the user interface into Spanish",
    "Add an option to disable telemetry",
    "Document the environment variables",
)
ISSUE_DESCRIPTIONS = (
    "Steps to reproduce are in the attached log.",
    "This would help new contributors a lot.",
    "Seen on the latest release, not on the previous one.",
    "Low priority, but it keeps coming up in discussions.",
    "Please add tests together with the fix.",
)
COMMENTS = (
    "Looks good to me, thanks!",
    "Could you add a test for this change?",
    "Please rebase on main before merging.",
    "I tested this locally and it works.",
    "Can we split this into two merge requests?",
    "Nice improvement, approved from my side.",
)
NEW_PROJECTS = (
    "Weekend Hackathon",
    "Recipe Scraper",
    "Home Automation",
    "Photo Gallery",
    "Chess Engine",
    "Budget Planner",
    "Plant Watering Bot",
    "Podcast Notes",
    "Travel Log",
    "Bookshelf",
    "Invoice Generator",
    "Habit Tracker",
    "Snippet Vault",
    "Meeting Minutes",
    "Trivia Night",
    "Garden Planner",
    "Pixel Art Editor",
    "Quiz Maker",
    "Bird Watch Log",
    "Movie Night Picker",
    "Workout Timer",
    "Language Flashcards",
    "Solar Monitor",
    "Board Game Library",
)
STATE_WORDS = {"open": "opened", "closed": "closed"}
COMMIT_FIELDS = {"author": "author's full name", "message": "message"}
COUNTED = {"stars": r"★ (\d+)", "open issues": r"(\d+) open issues"}


TEMPLATES = Registry(sites=["gitlab"], start_url=START, user=USER)
"""The module's templates, in the suite's order."""


# --------------------------------------------------------------------------------------------
# Sampling helpers (read the pristine database)
# --------------------------------------------------------------------------------------------


def _projects(conn: sqlite3.Connection) -> list[Any]:
    return conn.execute(
        "SELECT p.*, n.path AS ns_path, n.name AS ns_name, n.path || '/' || p.path AS full_path "
        "FROM projects p JOIN namespaces n ON n.id = p.namespace_id ORDER BY p.id"
    ).fetchall()


def _level(conn: sqlite3.Connection, project_id: int, username: str = USER) -> int:
    row = conn.execute(
        "SELECT m.access_level FROM members m JOIN users u ON u.id = m.user_id "
        "WHERE m.project_id = ? AND u.username = ?",
        (project_id, username),
    ).fetchone()
    return int(row[0]) if row else 0


def _pick_project(conn: sqlite3.Connection, rng: random.Random, min_level: int = 0) -> Any:
    rows = [p for p in _projects(conn) if _level(conn, p["id"]) >= min_level]
    return rng.choice(rows)


def _unique_title(conn: sqlite3.Connection, table: str, project_id: int, title: str) -> bool:
    n = conn.execute(
        f"SELECT COUNT(*) FROM {table} WHERE project_id = ? AND title = ?", (project_id, title)
    ).fetchone()[0]
    return n == 1


_PAIR_RES = (
    re.compile(r'^\s*"([A-Za-z_][\w-]*)":\s*"?([^"{}\[\]]+?)"?,?$'),  # JSON: "port": 8080,
    re.compile(r"^const ([A-Za-z_]\w*) = (.+)$"),  # Go constants
    re.compile(r"^([A-Za-z_][\w-]*)\s*[:=]\s*\"?([^\"]+?)\"?$"),  # YAML, TOML, .conf, Python
)


def config_pair(line: str) -> tuple[str, str] | None:
    """The (key, value) a config-like line sets, e.g. ``port: 8080`` -> ("port", "8080").

    Used by the sampler on the stored file and by the expert on the observation's code line.
    """
    line = " ".join(line.split())
    if not line or line.startswith(("#", "//")):
        return None
    for rx in _PAIR_RES:
        m = rx.match(line)
        if m and m.group(2).strip() not in ("", "[", "{", "("):
            return m.group(1), m.group(2).strip()
    return None


CONFIG_FILES = re.compile(
    r"^(config/.+|src/\w+/config\.py|internal/server/server\.go|pyproject\.toml|package\.json|"
    r"mkdocs\.yml|bin/deploy\.sh)$"
)


def _file_values(content: str) -> dict[str, str]:
    """Keys set exactly once in a file, with their values."""
    seen: dict[str, list[str]] = {}
    for line in content.splitlines():
        pair = config_pair(line)
        if pair is not None:
            seen.setdefault(pair[0], []).append(pair[1])
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


# --------------------------------------------------------------------------------------------
# Expert helpers (read the observation only)
# --------------------------------------------------------------------------------------------


def _project_link(obs: Observation, project: str) -> Element | None:
    """The link ``<namespace> / <project>`` of a project list."""
    for el in find_all(obs, "link"):
        if el.name.endswith(f" / {project}"):
            return el
    return None


def _search_project(obs: Observation, project: str) -> Sub:
    """Search GitLab for a project by name; returns (its list link, the results page)."""
    box = find(obs, "textbox", "Search GitLab")
    obs = yield search(box, project, f"I search GitLab for the project '{project}'.")
    for _ in range(6):
        link = _project_link(obs, project)
        if link is not None:
            return link, obs
        if not more_below(obs):
            break
        obs = yield scroll_down(f"'{project}' should be among the results; I scroll.")
    raise ExpertError(f"expert: project {project!r} not in the results on {obs.url}")


def _open_project(obs: Observation, project: str) -> Sub:
    """Search for a project and open its overview page."""
    link, obs = yield from _search_project(obs, project)
    obs = yield click(link, f"The results list '{link.name}'; I open the project.")
    return obs


def _open_menu(obs: Observation, item: str, why: str) -> Sub:
    """Click an entry of the project menu ("Issues (12)" is found by "Issues")."""
    links = find_all(obs, "link")
    # The project menu's entries carry counts ("Issues (12)"); the header's "Issues" link
    # lists the issues assigned to me instead.
    counted = [el for el in links if el.name.startswith(item + " (")]
    for el in counted or [el for el in links if el.name == item]:
        obs = yield click(el, why)
        return obs
    raise ExpertError(f"expert: no project menu entry {item!r} on {obs.url}")


def _filter_issues(obs: Observation, label: str | None = None, query: str | None = None) -> Sub:
    """On an issue list: set the label filter and/or the search text, then apply."""
    if query is not None:
        box = find(obs, "textbox", "Search", exact=True)
        obs = yield type_text(box, query, f"I type '{query}' into the issue search box.")
    if label is not None:
        box = find(obs, "combobox", "Label", exact=True)
        obs = yield select(box, label, f"I filter the issues by the label '{label}'.")
    button = find(obs, "button", "Apply filters")
    obs = yield click(button, "I apply the filters.")
    return obs


def _first_listed_issue(obs: Observation) -> Element | None:
    """The first issue link of a list (the first link after the "Apply filters" button)."""
    els = elements(obs.text)
    for i, el in enumerate(els):
        if el.role == "button" and el.name == "Apply filters":
            for later in els[i + 1 :]:
                if later.role == "link":
                    return later
                if later.role != "link":
                    break
    return None


def _open_issue_by_number(obs: Observation, project: str, iid: int) -> Sub:
    """From any page: the project, its issues, a search for #iid, the issue."""
    obs = yield from _open_project(obs, project)
    obs = yield from _open_menu(obs, "Issues", f"I open the issues of '{project}'.")
    obs = yield from _filter_issues(obs, query=f"#{iid}")
    link = _first_listed_issue(obs)
    if link is None:
        raise ExpertError(f"expert: issue #{iid} not listed on {obs.url}")
    obs = yield click(link, f"The search finds issue #{iid}, '{link.name}'; I open it.")
    return obs


def _open_issue_by_title(obs: Observation, project: str, title: str) -> Sub:
    obs = yield from _open_project(obs, project)
    obs = yield from _open_menu(obs, "Issues", f"I open the issues of '{project}'.")
    obs = yield from _filter_issues(obs, query=title)
    link, obs = yield from seek(obs, "link", title, "I look for the issue.", exact=True)
    obs = yield click(link, f"I open the issue '{title}'.")
    return obs


# --------------------------------------------------------------------------------------------
# 400 info: open issues with a label
# --------------------------------------------------------------------------------------------


def sample_label_count(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    labels = conn.execute(
        "SELECT l.name, (SELECT COUNT(*) FROM issue_labels il JOIN issues i ON i.id = il.issue_id "
        "WHERE il.label_id = l.id AND i.state = 'opened') AS n FROM labels l "
        "WHERE l.project_id = ? ORDER BY l.name",
        (p["id"],),
    ).fetchall()
    label = rng.choice(labels)
    return {"project": p["name"], "label": label["name"], "_answer": str(label["n"])}


@TEMPLATES.template(
    id=400,
    name="gitlab.open_issues_with_label",
    kind="info",
    intent='How many open issues labelled "{label}" does the project {project} have? Answer with a '
    "number.",
    sample=sample_label_count,
    difficulty="3-5",
)
def expert_label_count(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    obs = yield from _open_menu(obs, "Issues", "The open issues are under Issues.")
    obs = yield from _filter_issues(obs, label=p["label"])
    n = grab(obs, r"^Open (\d+)", "open issue count")
    yield answer(n, f"With the label filter '{p['label']}' the Open tab shows {n} issues.")


# --------------------------------------------------------------------------------------------
# 401 info: author of the latest commit
# --------------------------------------------------------------------------------------------


def sample_latest_commit(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    row = conn.execute(
        "SELECT u.full_name, c.title FROM commits c JOIN users u ON u.id = c.author_id "
        "WHERE c.project_id = ? ORDER BY c.created_at DESC, c.id DESC LIMIT 1",
        (p["id"],),
    ).fetchone()
    field = rng.choice(sorted(COMMIT_FIELDS))
    value = row["full_name"] if field == "author" else row["title"]
    return {"field": field, "project": p["name"], "_answer": value}


@TEMPLATES.template(
    id=401,
    name="gitlab.latest_commit_author",
    kind="info",
    intent="What is the {field} of the latest commit of the project {project}? Answer with the "
    "author's full name or the commit message as shown.",
    sample=sample_latest_commit,
    difficulty="1-2",
)
def expert_latest_commit(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    if p["field"] == "author":
        name = grab(obs, r"^· (.+?) authored ", "last commit author")
        yield answer(name, f"The overview's 'Last commit' line says {name} authored it.")
        return
    title = grab(obs, r'^Last commit:\n\[\d+\] link "(.+)"$', "last commit message")
    yield answer(title, f"The overview's 'Last commit' line shows the message '{title}'.")


# --------------------------------------------------------------------------------------------
# 402 info: a value in a config file
# --------------------------------------------------------------------------------------------


def sample_file_value(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    files = conn.execute(
        "SELECT path, content FROM repo_files WHERE project_id = ? ORDER BY path", (p["id"],)
    ).fetchall()
    options = [
        (f["path"], k, v)
        for f in files
        if CONFIG_FILES.match(f["path"])
        for k, v in sorted(_file_values(f["content"]).items())
    ]
    if not options:
        return None
    path, key, value = rng.choice(options)
    return {"project": p["name"], "file": path, "key": key, "_answer": value}


def _open_file(obs: Observation, project: str, path: str) -> Sub:
    """From the project overview: folder by folder down to the file."""
    parts = path.split("/")
    for k, folder in enumerate(parts[:-1]):
        where = "/".join(parts[:k]) or "the repository root"
        link, obs = yield from seek(obs, "link", folder + "/", "I look for the folder.", True)
        obs = yield click(link, f"'{path}' is inside '{folder}/' in {where}; I open the folder.")
    link, obs = yield from seek(obs, "link", parts[-1], "I look for the file.", exact=True)
    obs = yield click(link, f"I open the file '{parts[-1]}'.")
    return obs


@TEMPLATES.template(
    id=402,
    name="gitlab.file_value",
    kind="info",
    intent="In the project {project}, what value does the file {file} set for {key}? Answer with "
    "the value only.",
    sample=sample_file_value,
    difficulty="3-5",
)
def expert_file_value(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    obs = yield from _open_file(obs, p["project"], p["file"])
    for _ in range(6):
        for line in obs.text.splitlines():
            m = re.match(r"^\d+ \| (.*)$", line)
            pair = config_pair(m.group(1)) if m else None
            if pair is not None and pair[0] == p["key"]:
                yield answer(pair[1], f"The line '{m.group(1)}' sets {p['key']} to {pair[1]}.")  # type: ignore[union-attr]
                return
        if not more_below(obs):
            break
        obs = yield scroll_down(f"I look further down for '{p['key']}'.")
    raise ExpertError(f"expert: no line setting {p['key']} on {obs.url}")


# --------------------------------------------------------------------------------------------
# 403 info: star count
# --------------------------------------------------------------------------------------------


def sample_star_count(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    what = rng.choice(sorted(COUNTED))
    sql = (
        "SELECT COUNT(*) FROM stars WHERE project_id = ?"
        if what == "stars"
        else "SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'opened'"
    )
    n = conn.execute(sql, (p["id"],)).fetchone()[0]
    return {"what": what, "project": p["name"], "_answer": str(n)}


@TEMPLATES.template(
    id=403,
    name="gitlab.star_count",
    kind="info",
    intent="How many {what} does the project {project} have? Answer with a number.",
    sample=sample_star_count,
    difficulty="1-2",
)
def expert_star_count(p: Params, obs: Observation) -> Expert:
    link, obs = yield from _search_project(obs, p["project"])
    line = line_after(obs, link)
    m = re.search(COUNTED[p["what"]], line)
    if not m:
        raise ExpertError(f"expert: no count of {p['what']} in {line!r}")
    yield answer(m.group(1), f"The search result for '{p['project']}' shows {m.group(0)}.")


# --------------------------------------------------------------------------------------------
# 404 info: assignee of an issue
# --------------------------------------------------------------------------------------------


def _open_issue_rows(conn: sqlite3.Connection, project_id: int, extra: str = "1") -> list[Any]:
    return conn.execute(
        "SELECT i.*, u.full_name AS assignee_name, u.username AS assignee_username FROM issues i "
        f"LEFT JOIN users u ON u.id = i.assignee_id WHERE i.project_id = ? AND i.state = 'opened' "
        f"AND {extra} ORDER BY i.iid",
        (project_id,),
    ).fetchall()


def sample_issue_assignee(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    rows = _open_issue_rows(conn, p["id"], "i.assignee_id IS NOT NULL")
    rows = [r for r in rows if _unique_title(conn, "issues", p["id"], r["title"])]
    if not rows:
        return None
    issue = rng.choice(rows)
    return {"project": p["name"], "title": issue["title"], "_answer": issue["assignee_name"]}


@TEMPLATES.template(
    id=404,
    name="gitlab.issue_assignee",
    kind="info",
    intent='Who is assigned to the open issue "{title}" of the project {project}? Answer with the '
    "full name.",
    sample=sample_issue_assignee,
    difficulty="6-9",
)
def expert_issue_assignee(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_issue_by_title(obs, p["project"], p["title"])
    name = grab(obs, r'^Assignee \| \[\d+\] link "([^"]+)"', "assignee")
    yield answer(name, f"The issue page lists {name} as the assignee.")


# --------------------------------------------------------------------------------------------
# 405 info: role of a member
# --------------------------------------------------------------------------------------------


def sample_member_role(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    rows = conn.execute(
        "SELECT u.full_name, m.access_level FROM members m JOIN users u ON u.id = m.user_id "
        "WHERE m.project_id = ? ORDER BY u.id",
        (p["id"],),
    ).fetchall()
    m = rng.choice(rows)
    return {"project": p["name"], "name": m["full_name"], "_answer": ROLES[m["access_level"]]}


@TEMPLATES.template(
    id=405,
    name="gitlab.member_role",
    kind="info",
    intent="What role does {name} have in the project {project}? Answer with the role name.",
    sample=sample_member_role,
    difficulty="3-5",
)
def expert_member_role(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    obs = yield from _open_menu(obs, "Members", "Roles are listed on the Members page.")
    link, obs = yield from seek(obs, "link", p["name"], "I look for the member.", exact=True)
    # The signed-in user's name also appears in the header: take the members table's row.
    rows = [el for el in find_all(obs, "link", p["name"], exact=True) if el.line.count(" | ") >= 2]
    link = rows[0] if rows else link
    role = link.line.split(" | ")[2].strip() if link.line.count(" | ") >= 2 else ""
    if role not in ROLES.values():
        raise ExpertError(f"expert: no role in {link.line!r}")
    yield answer(role, f"The members table lists {p['name']} as {role}.")


# --------------------------------------------------------------------------------------------
# 406 nav: open a file
# --------------------------------------------------------------------------------------------


def sample_open_file(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    files = [
        r[0]
        for r in conn.execute(
            "SELECT path FROM repo_files WHERE project_id = ? AND path LIKE '%/%' ORDER BY path",
            (p["id"],),
        )
    ]
    return {"project": p["name"], "file": rng.choice(files), "_full": p["full_path"]}


def eval_open_file(p: Params) -> dict[str, Any]:
    return url_eval(f"__GITLAB__/{p['_full']}/-/blob/main/{p['file']}")


@TEMPLATES.template(
    id=406,
    name="gitlab.open_file",
    kind="nav",
    intent="Open the file {file} of the project {project}.",
    sample=sample_open_file,
    evaluation=eval_open_file,
    difficulty="3-5",
)
def expert_open_file(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    obs = yield from _open_file(obs, p["project"], p["file"])
    yield answer("done", f"This page shows the file {p['file']}.")


# --------------------------------------------------------------------------------------------
# 407 nav: issues filtered by state and label
# --------------------------------------------------------------------------------------------


def sample_filtered_issues(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    label = rng.choice(
        conn.execute("SELECT name FROM labels WHERE project_id = ?", (p["id"],)).fetchall()
    )
    state = rng.choice(sorted(STATE_WORDS))
    return {"state": state, "project": p["name"], "label": label[0], "_full": p["full_path"]}


def eval_filtered_issues(p: Params) -> dict[str, Any]:
    return url_eval(
        f"__GITLAB__/{p['_full']}/-/issues?state={STATE_WORDS[p['state']]}"
        f"&label_name[]={p['label']}"
    )


@TEMPLATES.template(
    id=407,
    name="gitlab.filtered_issues",
    kind="nav",
    intent='Show me the {state} issues of the project {project} that have the label "{label}".',
    sample=sample_filtered_issues,
    evaluation=eval_filtered_issues,
    difficulty="3-5",
)
def expert_filtered_issues(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    obs = yield from _open_menu(obs, "Issues", f"I open the issues of '{p['project']}'.")
    if p["state"] == "closed":
        tab = find_all(obs, "link")
        closed = next((el for el in tab if re.fullmatch(r"Closed \d+", el.name)), None)
        if closed is None:
            raise ExpertError(f"expert: no Closed tab on {obs.url}")
        obs = yield click(closed, "The task wants closed issues; I switch to the Closed tab.")
    obs = yield from _filter_issues(obs, label=p["label"])
    yield answer("done", f"The list shows the {p['state']} issues labelled '{p['label']}'.")


# --------------------------------------------------------------------------------------------
# 408 change: create an issue
# --------------------------------------------------------------------------------------------


def sample_create_issue(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    title = rng.choice(ISSUE_TITLES)
    if conn.execute(
        "SELECT 1 FROM issues WHERE project_id = ? AND title = ?", (p["id"], title)
    ).fetchone():
        return None
    return {
        "project": p["name"],
        "title": title,
        "description": rng.choice(ISSUE_DESCRIPTIONS),
        "_pid": p["id"],
        "_uid": user_id(conn, USER),
    }


def eval_create_issue(p: Params) -> dict[str, Any]:
    sql = "SELECT {} FROM issues WHERE project_id = ? AND title = ? AND author_id = ?"
    args = [p["_pid"], p["title"], p["_uid"]]
    return state_eval(
        state_check(
            sql.format("description"),
            args,
            expected=p["description"],
            description="the issue exists with the description",
        ),
        state_check(sql.format("id"), args, row_count=1, description="exactly one such issue"),
    )


def _new_issue_form(obs: Observation, p: Params) -> Sub:
    obs = yield from _open_project(obs, p["project"])
    obs = yield from _open_menu(obs, "Issues", f"I open the issues of '{p['project']}'.")
    link = find(obs, "link", "New issue", exact=True)
    obs = yield click(link, "I click New issue.")
    box = find(obs, "textbox", "Title", exact=True)
    obs = yield type_text(box, p["title"], f"I type the title '{p['title']}'.")
    return obs


@TEMPLATES.template(
    id=408,
    name="gitlab.create_issue",
    writes={"gitlab.issues": 1, "gitlab.projects": 1},
    kind="change",
    intent='Create an issue in the project {project} titled "{title}" with the description '
    '"{description}".',
    sample=sample_create_issue,
    evaluation=eval_create_issue,
    difficulty="6-9",
)
def expert_create_issue(p: Params, obs: Observation) -> Expert:
    obs = yield from _new_issue_form(obs, p)
    box = find(obs, "textbox", "Description", exact=True)
    obs = yield type_text(box, p["description"], "I type the description.")
    obs = yield click(find(obs, "button", "Create issue"), "I create the issue.")
    if "was created" not in obs.text:
        raise ExpertError(f"expert: the issue was not created on {obs.url}")
    yield answer("done", "GitLab confirms the issue was created.")


# --------------------------------------------------------------------------------------------
# 409 change: close an issue by number
# --------------------------------------------------------------------------------------------


def sample_close_issue(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng, min_level=20)
    rows = _open_issue_rows(conn, p["id"])
    if not rows:
        return None
    issue = rng.choice(rows)
    closed = conn.execute(
        "SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'closed'", (p["id"],)
    ).fetchone()[0]
    return {"iid": issue["iid"], "project": p["name"], "_pid": p["id"], "_closed": closed + 1}


def eval_close_issue(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT state FROM issues WHERE project_id = ? AND iid = ?",
            [p["_pid"], p["iid"]],
            expected="closed",
            description="the issue is closed",
        ),
        state_check(
            "SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'closed'",
            [p["_pid"]],
            expected=p["_closed"],
            description="no other issue was closed",
        ),
    )


def _close_current(obs: Observation, what: str) -> Sub:
    obs = yield click(find(obs, "button", "Close issue", exact=True), f"I close {what}.")
    if "was closed" not in obs.text:
        raise ExpertError(f"expert: {what} was not closed on {obs.url}")
    return obs


@TEMPLATES.template(
    id=409,
    name="gitlab.close_issue",
    writes={"gitlab.issues": 1, "gitlab.projects": 1},
    kind="change",
    intent="Close issue #{iid} of the project {project}.",
    sample=sample_close_issue,
    evaluation=eval_close_issue,
    difficulty="6-9",
)
def expert_close_issue(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_issue_by_number(obs, p["project"], p["iid"])
    obs = yield from _close_current(obs, f"issue #{p['iid']}")
    yield answer("done", f"Issue #{p['iid']} is now closed.")


# --------------------------------------------------------------------------------------------
# 410 change: add a member with a role
# --------------------------------------------------------------------------------------------


def sample_add_member(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng, min_level=40)
    others = conn.execute(
        "SELECT id, username FROM users WHERE id NOT IN "
        "(SELECT user_id FROM members WHERE project_id = ?) ORDER BY id",
        (p["id"],),
    ).fetchall()
    u = rng.choice(others)
    level = rng.choice((10, 20, 30, 40))
    return {
        "username": u["username"],
        "project": p["name"],
        "role": ROLES[level],
        "_pid": p["id"],
        "_uid": u["id"],
        "_level": level,
    }


def eval_add_member(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT access_level FROM members WHERE project_id = ? AND user_id = ?",
            [p["_pid"], p["_uid"]],
            expected=p["_level"],
            description=f"the user is a member with the role {p['role']}",
        )
    )


@TEMPLATES.template(
    id=410,
    name="gitlab.add_member",
    writes={"gitlab.members": 1},
    kind="change",
    intent="Add the user {username} to the project {project} as a {role}.",
    sample=sample_add_member,
    evaluation=eval_add_member,
    difficulty="6-9",
)
def expert_add_member(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    obs = yield from _open_menu(obs, "Members", "Members are invited on the Members page.")
    box = find(obs, "combobox", "Username", exact=True)
    obs = yield select(box, p["username"], f"I choose the user {p['username']}.")
    box = find(obs, "combobox", "Role", exact=True)
    obs = yield select(box, p["role"], f"I give them the role {p['role']}.")
    obs = yield click(find(obs, "button", "Invite", exact=True), "I send the invitation.")
    if "was added to the project" not in obs.text:
        raise ExpertError(f"expert: {p['username']} was not added on {obs.url}")
    yield answer("done", f"GitLab confirms {p['username']} was added as {p['role']}.")


# --------------------------------------------------------------------------------------------
# 411 change: star a project
# --------------------------------------------------------------------------------------------


def sample_star(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    uid = user_id(conn, USER)
    p = _pick_project(conn, rng)
    if conn.execute(
        "SELECT 1 FROM stars WHERE project_id = ? AND user_id = ?", (p["id"], uid)
    ).fetchone():
        return None
    n = conn.execute("SELECT COUNT(*) FROM stars WHERE user_id = ?", (uid,)).fetchone()[0]
    return {"project": p["name"], "_pid": p["id"], "_uid": uid, "_count": n + 1}


def eval_star(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT 1 FROM stars WHERE project_id = ? AND user_id = ?",
            [p["_pid"], p["_uid"]],
            row_count=1,
            description="the project is starred",
        ),
        state_check(
            "SELECT COUNT(*) FROM stars WHERE user_id = ?",
            [p["_uid"]],
            expected=p["_count"],
            description="no other project was starred or unstarred",
        ),
    )


@TEMPLATES.template(
    id=411,
    name="gitlab.star_project",
    writes={"gitlab.stars": 1},
    kind="change",
    intent="Star the project {project}.",
    sample=sample_star,
    evaluation=eval_star,
    difficulty="3-5",
)
def expert_star(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    obs = yield click(find(obs, "button", "Star", exact=True), "I click the Star button.")
    if "You starred" not in obs.text:
        raise ExpertError(f"expert: the project was not starred on {obs.url}")
    yield answer("done", f"GitLab confirms I starred {p['project']}.")


# --------------------------------------------------------------------------------------------
# 412 change: assign an issue
# --------------------------------------------------------------------------------------------


def sample_assign(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng, min_level=20)
    rows = [
        r
        for r in _open_issue_rows(conn, p["id"])
        if _unique_title(conn, "issues", p["id"], r["title"])
    ]
    if not rows:
        return None
    issue = rng.choice(rows)
    people = conn.execute(
        "SELECT u.id, u.full_name FROM members m JOIN users u ON u.id = m.user_id "
        "WHERE m.project_id = ? AND u.id IS NOT ? ORDER BY u.id",
        (p["id"], issue["assignee_id"]),
    ).fetchall()
    who = rng.choice(people)
    return {
        "title": issue["title"],
        "project": p["name"],
        "name": who["full_name"],
        "_issue": issue["id"],
        "_uid": who["id"],
    }


def eval_assign(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT assignee_id FROM issues WHERE id = ?",
            [p["_issue"]],
            expected=p["_uid"],
            description="the issue is assigned to the user",
        )
    )


def _assign_current(obs: Observation, name: str) -> Sub:
    box = find(obs, "combobox", "Assignee", exact=True)
    obs = yield select(box, name, f"I choose {name} as the assignee.")
    obs = yield click(find(obs, "button", "Assign", exact=True), "I save the assignee.")
    if f"Assigned to {name}" not in obs.text:
        raise ExpertError(f"expert: not assigned to {name} on {obs.url}")
    return obs


@TEMPLATES.template(
    id=412,
    name="gitlab.assign_issue",
    writes={"gitlab.issues": 1},
    kind="change",
    intent='Assign the issue "{title}" of the project {project} to {name}.',
    sample=sample_assign,
    evaluation=eval_assign,
    difficulty="6-9",
)
def expert_assign(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_issue_by_title(obs, p["project"], p["title"])
    obs = yield from _assign_current(obs, p["name"])
    yield answer("done", f"The issue is now assigned to {p['name']}.")


# --------------------------------------------------------------------------------------------
# 413 change: comment on a merge request (state and page checks)
# --------------------------------------------------------------------------------------------


def _mr_rows(conn: sqlite3.Connection, project_id: int, state: str | None) -> list[Any]:
    rows = conn.execute(
        "SELECT * FROM merge_requests WHERE project_id = ? AND (? IS NULL OR state = ?) "
        "ORDER BY iid",
        (project_id, state, state),
    ).fetchall()
    return [r for r in rows if _unique_title(conn, "merge_requests", project_id, r["title"])]


def sample_comment_mr(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    rows = _mr_rows(conn, p["id"], "opened")
    if not rows:
        return None
    mr = rng.choice(rows)
    return {
        "comment": rng.choice(COMMENTS),
        "title": mr["title"],
        "project": p["name"],
        "_mr": mr["id"],
        "_iid": mr["iid"],
        "_full": p["full_path"],
        "_uid": user_id(conn, USER),
    }


def eval_comment_mr(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT body FROM notes WHERE noteable_type = 'merge_request' "
            "AND noteable_id = ? AND author_id = ? AND system = 0 ORDER BY id DESC",
            [p["_mr"], p["_uid"]],
            expected=p["comment"],
            description="my latest comment on the merge request",
        ),
        pages=[
            page_check(
                [p["comment"]],
                "document.querySelector('#notes').parentElement.innerText",
                f"__GITLAB__/{p['_full']}/-/merge_requests/{p['_iid']}",
                kind="must_include",
            )
        ],
    )


def _open_mr(obs: Observation, project: str, title: str, all_states: bool) -> Sub:
    obs = yield from _open_project(obs, project)
    obs = yield from _open_menu(obs, "Merge requests", f"I open the merge requests of '{project}'.")
    if all_states:
        tab = next((el for el in find_all(obs, "link") if re.fullmatch(r"All \d+", el.name)), None)
        if tab is not None:
            obs = yield click(tab, "The merge request may be merged or closed; I list All.")
    link, obs = yield from seek(obs, "link", title, "I look for the merge request.", exact=True)
    obs = yield click(link, f"I open the merge request '{title}'.")
    return obs


@TEMPLATES.template(
    id=413,
    name="gitlab.comment_merge_request",
    writes={"gitlab.merge_requests": 1, "gitlab.notes": 1, "gitlab.projects": 1},
    kind="change",
    intent='Comment "{comment}" on the merge request "{title}" of the project {project}.',
    sample=sample_comment_mr,
    evaluation=eval_comment_mr,
    difficulty="6-9",
)
def expert_comment_mr(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_mr(obs, p["project"], p["title"], all_states=False)
    box, obs = yield from seek(obs, "textbox", "Add a comment", "I look for the comment box.")
    obs = yield type_text(box, p["comment"], "I type the comment.")
    button, obs = yield from seek(obs, "button", "Comment", "I look for the button.", exact=True)
    obs = yield click(button, "I post the comment.")
    if "Your comment was added" not in obs.text:
        raise ExpertError(f"expert: the comment was not added on {obs.url}")
    yield answer("done", "GitLab shows my comment on the merge request.")


# --------------------------------------------------------------------------------------------
# 414 change: create a project
# --------------------------------------------------------------------------------------------


def sample_create_project(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    name = rng.choice(NEW_PROJECTS)
    if conn.execute("SELECT 1 FROM projects WHERE lower(name) = lower(?)", (name,)).fetchone():
        return None
    return {
        "visibility": rng.choice(("private", "public")),
        "name": name,
        "_uid": user_id(conn, USER),
    }


def eval_create_project(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT p.visibility FROM projects p JOIN namespaces n "
            "ON n.id = p.namespace_id WHERE n.path = ? AND p.name = ?",
            [USER, p["name"]],
            expected=p["visibility"],
            description="the project exists in my namespace with the visibility",
        ),
        state_check(
            "SELECT m.access_level FROM members m "
            "JOIN projects p ON p.id = m.project_id "
            "WHERE p.name = ? AND m.user_id = ?",
            [p["name"], p["_uid"]],
            expected=50,
            description="I own it",
        ),
    )


@TEMPLATES.template(
    id=414,
    name="gitlab.create_project",
    writes={"gitlab.members": 1, "gitlab.projects": 1},
    kind="change",
    intent='Create a new {visibility} project named "{name}".',
    sample=sample_create_project,
    evaluation=eval_create_project,
    difficulty="3-5",
)
def expert_create_project(p: Params, obs: Observation) -> Expert:
    link = find(obs, "link", "New project", exact=True)
    obs = yield click(link, "I open the New project form.")
    box = find(obs, "textbox", "Project name", exact=True)
    obs = yield type_text(box, p["name"], f"I name the project '{p['name']}'.")
    box = find(obs, "combobox", "Visibility level", exact=True)
    if (box.value or "").lower() != p["visibility"]:
        obs = yield select(box, p["visibility"].title(), f"It must be {p['visibility']}.")
    obs = yield click(find(obs, "button", "Create project"), "I create the project.")
    if "was successfully created" not in obs.text:
        raise ExpertError(f"expert: the project was not created on {obs.url}")
    yield answer("done", f"GitLab confirms the project '{p['name']}' was created.")


# --------------------------------------------------------------------------------------------
# 415 change: add a label to an issue
# --------------------------------------------------------------------------------------------


def sample_label_issue(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng, min_level=20)
    rows = _open_issue_rows(conn, p["id"])
    if not rows:
        return None
    issue = rng.choice(rows)
    missing = conn.execute(
        "SELECT id, name FROM labels WHERE project_id = ? AND id NOT IN "
        "(SELECT label_id FROM issue_labels WHERE issue_id = ?) ORDER BY name",
        (p["id"], issue["id"]),
    ).fetchall()
    if not missing:
        return None
    label = rng.choice(missing)
    return {
        "label": label["name"],
        "iid": issue["iid"],
        "project": p["name"],
        "_issue": issue["id"],
        "_label": label["id"],
    }


def eval_label_issue(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT 1 FROM issue_labels WHERE issue_id = ? AND label_id = ?",
            [p["_issue"], p["_label"]],
            row_count=1,
            description="the issue has the label",
        )
    )


@TEMPLATES.template(
    id=415,
    name="gitlab.label_issue",
    writes={"gitlab.issue_labels": 1, "gitlab.issues": 1},
    kind="change",
    intent='Add the label "{label}" to issue #{iid} of the project {project}.',
    sample=sample_label_issue,
    evaluation=eval_label_issue,
    difficulty="6-9",
)
def expert_label_issue(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_issue_by_number(obs, p["project"], p["iid"])
    box = find(obs, "combobox", "Label", exact=True)
    obs = yield select(box, p["label"], f"I choose the label '{p['label']}'.")
    obs = yield click(find(obs, "button", "Add label", exact=True), "I add the label.")
    if f"Added the label {p['label']}" not in obs.text:
        raise ExpertError(f"expert: label not added on {obs.url}")
    yield answer("done", f"Issue #{p['iid']} now has the label '{p['label']}'.")


# --------------------------------------------------------------------------------------------
# 416 change: close every open issue with a label (long)
# --------------------------------------------------------------------------------------------


def sample_close_labelled(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng, min_level=20)
    rows = conn.execute(
        "SELECT l.id, l.name, COUNT(*) AS n FROM labels l JOIN issue_labels il "
        "ON il.label_id = l.id JOIN issues i ON i.id = il.issue_id "
        "WHERE l.project_id = ? AND i.state = 'opened' GROUP BY l.id HAVING n BETWEEN 2 AND 3 "
        "ORDER BY l.name",
        (p["id"],),
    ).fetchall()
    if not rows:
        return None
    label = rng.choice(rows)
    open_now = conn.execute(
        "SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'opened'", (p["id"],)
    ).fetchone()[0]
    return {
        "label": label["name"],
        "project": p["name"],
        "_pid": p["id"],
        "_label": label["id"],
        "_open": open_now - label["n"],
        "_n": label["n"],
    }


def eval_close_labelled(p: Params) -> dict[str, Any]:
    return state_eval(
        state_check(
            "SELECT COUNT(*) FROM issues i JOIN issue_labels il ON il.issue_id = i.id "
            "WHERE il.label_id = ? AND i.state = 'opened'",
            [p["_label"]],
            expected=0,
            description="no open issue has the label",
        ),
        state_check(
            "SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'opened'",
            [p["_pid"]],
            expected=p["_open"],
            description="no other issue was closed",
        ),
    )


@TEMPLATES.template(
    id=416,
    name="gitlab.close_labelled_issues",
    writes=lambda p: {"gitlab.issues": p["_n"], "gitlab.projects": 1},
    kind="change",
    intent='Close every open issue of the project {project} that has the label "{label}".',
    sample=sample_close_labelled,
    evaluation=eval_close_labelled,
    difficulty="10+",
)
def expert_close_labelled(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    for n in range(10):
        obs = yield from _open_menu(obs, "Issues", "I go to the issue list.")
        obs = yield from _filter_issues(obs, label=p["label"])
        link = _first_listed_issue(obs)
        if link is None:
            yield answer("done", f"No open issue labelled '{p['label']}' is left.")
            return
        why = "the first" if n == 0 else "the next"
        obs = yield click(link, f"'{link.name}' is {why} open issue with the label; I open it.")
        obs = yield from _close_current(obs, f"'{link.name}'")
    raise ExpertError("expert: too many issues to close")


# --------------------------------------------------------------------------------------------
# 440 info (held out): most starred project of a group
# --------------------------------------------------------------------------------------------


def sample_most_starred(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    group = rng.choice(
        conn.execute("SELECT id, name FROM namespaces WHERE kind = 'group' ORDER BY id").fetchall()
    )
    what = rng.choice(sorted(COUNTED))
    count = (
        "(SELECT COUNT(*) FROM stars s WHERE s.project_id = p.id)"
        if what == "stars"
        else "(SELECT COUNT(*) FROM issues i WHERE i.project_id = p.id AND i.state = 'opened')"
    )
    rows = conn.execute(
        f"SELECT p.name, {count} AS n FROM projects p WHERE p.namespace_id = ? ORDER BY n DESC",
        (group["id"],),
    ).fetchall()
    if len(rows) < 2 or rows[0]["n"] == rows[1]["n"]:
        return None
    return {"group": group["name"], "what": what, "_answer": rows[0]["name"]}


@TEMPLATES.template(
    id=440,
    name="gitlab.most_starred_in_group",
    kind="info",
    intent="Which project of the group {group} has the most {what}? Answer with the project name.",
    sample=sample_most_starred,
    difficulty="3-5",
    heldout=True,
)
def expert_most_starred(p: Params, obs: Observation) -> Expert:
    obs = yield click(find(obs, "link", "Explore", exact=True), "I open the project explorer.")
    box = find(obs, "textbox", "Filter by name", exact=True)
    obs = yield type_text(box, p["group"], f"I filter the projects by '{p['group']}'.")
    if p["what"] == "stars":
        box = find(obs, "combobox", "Sort by", exact=True)
        obs = yield select(box, "Most stars", "Sorting by most stars puts the winner first.")
    obs = yield click(find(obs, "button", "Filter", exact=True), "I apply the filter.")
    prefix = f"{p['group']} / "
    counts: dict[str, int] = {}
    for el in find_all(obs, "link"):
        if el.name.startswith(prefix):
            m = re.search(COUNTED[p["what"]], line_after(obs, el))
            if m:
                counts[el.name[len(prefix) :]] = int(m.group(1))
    if not counts:
        raise ExpertError(f"expert: no project of {p['group']} on {obs.url}")
    best = max(counts, key=lambda k: counts[k])  # the first of equal counts: the sorted order
    listing = ", ".join(f"{k}: {v}" for k, v in counts.items())
    yield answer(best, f"The projects of {p['group']} have {p['what']} {listing}; {best} leads.")


# --------------------------------------------------------------------------------------------
# 441 info (held out): number of commits by an author
# --------------------------------------------------------------------------------------------


def sample_commits_by(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    rows = conn.execute(
        "SELECT u.full_name, COUNT(*) AS n FROM commits c JOIN users u ON u.id = c.author_id "
        "WHERE c.project_id = ? GROUP BY u.id ORDER BY u.id",
        (p["id"],),
    ).fetchall()
    row = rng.choice(rows)
    return {"name": row["full_name"], "project": p["name"], "_answer": str(row["n"])}


@TEMPLATES.template(
    id=441,
    name="gitlab.commits_by_author",
    kind="info",
    intent="How many commits has {name} made to the project {project}? Answer with a number.",
    sample=sample_commits_by,
    difficulty="6-9",
    heldout=True,
)
def expert_commits_by(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_project(obs, p["project"])
    obs = yield from _open_menu(obs, "Commits", "The commit list can be filtered by author.")
    box = find(obs, "combobox", "Author", exact=True)
    obs = yield select(box, p["name"], f"I filter the commits by {p['name']}.")
    obs = yield click(find(obs, "button", "Filter", exact=True), "I apply the author filter.")
    n = grab(obs, r"^(\d+) commits? by ", "commit count")
    yield answer(n, f"The filtered list says {n} commits.")


# --------------------------------------------------------------------------------------------
# 442 nav (held out): a merge request's page
# --------------------------------------------------------------------------------------------


def sample_mr_page(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    p = _pick_project(conn, rng)
    rows = _mr_rows(conn, p["id"], None)
    if not rows:
        return None
    mr = rng.choice(rows)
    return {"title": mr["title"], "project": p["name"], "_full": p["full_path"], "_iid": mr["iid"]}


def eval_mr_page(p: Params) -> dict[str, Any]:
    return url_eval(f"__GITLAB__/{p['_full']}/-/merge_requests/{p['_iid']}")


@TEMPLATES.template(
    id=442,
    name="gitlab.merge_request_page",
    kind="nav",
    intent='Open the merge request "{title}" of the project {project}.',
    sample=sample_mr_page,
    evaluation=eval_mr_page,
    difficulty="6-9",
    heldout=True,
)
def expert_mr_page(p: Params, obs: Observation) -> Expert:
    obs = yield from _open_mr(obs, p["project"], p["title"], all_states=True)
    yield answer("done", f"This is the merge request '{p['title']}'.")


# --------------------------------------------------------------------------------------------
# 443 change (held out): create an issue with assignee and label
# --------------------------------------------------------------------------------------------


def sample_create_full(conn: sqlite3.Connection, rng: random.Random) -> Params | None:
    base = sample_create_issue(conn, rng)
    if base is None:
        return None
    people = conn.execute(
        "SELECT u.id, u.full_name FROM members m JOIN users u ON u.id = m.user_id "
        "WHERE m.project_id = ? ORDER BY u.id",
        (base["_pid"],),
    ).fetchall()
    who = rng.choice(people)
    label = rng.choice(
        conn.execute(
            "SELECT id, name FROM labels WHERE project_id = ? ORDER BY name", (base["_pid"],)
        ).fetchall()
    )
    return {
        "project": base["project"],
        "title": base["title"],
        "name": who["full_name"],
        "label": label["name"],
        "_pid": base["_pid"],
        "_uid": base["_uid"],
        "_assignee": who["id"],
        "_label": label["id"],
    }


def eval_create_full(p: Params) -> dict[str, Any]:
    where = "FROM issues i WHERE i.project_id = ? AND i.title = ? AND i.author_id = ?"
    args = [p["_pid"], p["title"], p["_uid"]]
    return state_eval(
        state_check(
            f"SELECT i.assignee_id {where}",
            args,
            expected=p["_assignee"],
            description="the new issue is assigned to the user",
        ),
        state_check(
            f"SELECT (SELECT COUNT(*) FROM issue_labels il WHERE il.issue_id = i.id "
            f"AND il.label_id = ?) {where}",
            [p["_label"], *args],
            expected=1,
            description="the new issue has the label",
        ),
    )


@TEMPLATES.template(
    id=443,
    name="gitlab.create_issue_assigned_labelled",
    writes={"gitlab.issue_labels": 1, "gitlab.issues": 1, "gitlab.projects": 1},
    kind="change",
    intent='Create an issue in the project {project} titled "{title}", assigned to {name} and '
    'labelled "{label}".',
    sample=sample_create_full,
    evaluation=eval_create_full,
    difficulty="6-9",
    heldout=True,
)
def expert_create_full(p: Params, obs: Observation) -> Expert:
    obs = yield from _new_issue_form(obs, p)
    box = find(obs, "combobox", "Assignee", exact=True)
    obs = yield select(box, p["name"], f"I assign it to {p['name']}.")
    box = find(obs, "combobox", "Label", exact=True)
    obs = yield select(box, p["label"], f"I label it '{p['label']}'.")
    obs = yield click(find(obs, "button", "Create issue"), "I create the issue.")
    if "was created" not in obs.text:
        raise ExpertError(f"expert: the issue was not created on {obs.url}")
    yield answer("done", "GitLab confirms the issue was created.")
