"""The code-hosting site ("gitlab"): seed, pure helpers, pages, writes, permissions, isolation,
escaping; and in real Chromium: login, isolation between parallel episodes, inert user text."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from webagent_r1.sites import INSTANCE_COOKIE, SITES, RunningSites, start_sites
from webagent_r1.sites.gitlab.db import MAIN_PASSWORD, MAIN_USER
from webagent_r1.sites.gitlab.queries import tree_entries
from webagent_r1.sites.gitlab.views import render_markdown
from webagent_r1.sites.seed_utils import check_password, data_checksum

PROJECT = "/acme-labs/ledger"


@pytest.fixture(scope="module")
def gl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSites]:
    """The gitlab site alone, on a free port, with a private cache."""
    running = start_sites(["gitlab"], ports="auto", home=tmp_path_factory.mktemp("home"))
    yield running
    running.stop()


def _client(gl: RunningSites, instance: str, username: str | None = None) -> httpx.Client:
    cookies = {INSTANCE_COOKIE: instance}
    if username is not None:
        ck = gl.login_cookie("gitlab", instance, username)
        cookies[ck["name"]] = ck["value"]
    return httpx.Client(base_url=gl.urls["gitlab"], cookies=cookies, follow_redirects=True)


# -- seed and pure helpers ---------------------------------------------------------------------


def test_seed_is_deterministic(tmp_path: Path) -> None:
    backend = SITES["gitlab"].backend
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    backend.build(a)
    backend.build(b)
    with sqlite3.connect(a) as da, sqlite3.connect(b) as db:
        assert data_checksum(da) == data_checksum(db)
        count = {
            t: da.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
            for t in ("users", "namespaces", "projects", "issues", "merge_requests", "commits")
        }
        assert count["users"] == 30 and count["namespaces"] == 10 and count["projects"] == 25
        assert count["issues"] > 300 and count["merge_requests"] > 100 and count["commits"] > 300
        names = [r[0] for r in da.execute("SELECT name FROM projects")]
        assert len(set(names)) == len(names), "project names are unique"
        for user in SITES["gitlab"].users:
            row = da.execute(
                "SELECT password_hash FROM users WHERE username = ?", (user.username,)
            ).fetchone()
            assert row is not None and check_password(user.password, row[0])
        # iids follow creation order; a file tree goes several folders deep
        rows = da.execute("SELECT created_at FROM issues WHERE project_id = 1 ORDER BY iid")
        dates = [r[0] for r in rows]
        assert dates == sorted(dates)
        assert (
            da.execute(
                "SELECT MAX(LENGTH(path) - LENGTH(REPLACE(path, '/', ''))) FROM repo_files"
            ).fetchone()[0]
            >= 3
        )


def test_tree_entries() -> None:
    files = ["README.md", "src/a/x.py", "src/a/y.py", "src/b.py", "docs/g/s.md"]
    assert tree_entries(files, "") == (["docs", "src"], ["README.md"])
    assert tree_entries(files, "src") == (["a"], ["b.py"])
    assert tree_entries(files, "src/a") == ([], ["x.py", "y.py"])
    assert tree_entries(files, "nope") == ([], [])


def test_markdown_is_rendered_and_escaped() -> None:
    out = str(render_markdown("# T <b>\n\nSome <i>text</i>\n\n- one\n- two\n\n```\n<x>\n```"))
    assert "<h2>T &lt;b&gt;</h2>" in out
    assert "<p>Some &lt;i&gt;text&lt;/i&gt;</p>" in out
    assert "<ul><li>one</li><li>two</li></ul>" in out
    assert "<pre><code>&lt;x&gt;</code></pre>" in out


# -- pages over HTTP ---------------------------------------------------------------------------


def test_login_and_pages(gl: RunningSites) -> None:
    iid = gl.create_instance()
    with _client(gl, iid) as c:
        assert c.get("/").url.path == "/explore/projects"  # guests explore
        r = c.post("/login", data={"username": MAIN_USER, "password": "wrong"})
        assert "sign-in was incorrect" in r.text
        r = c.post("/login", data={"username": MAIN_USER, "password": MAIN_PASSWORD})
        assert r.url.path == "/dashboard/projects" and "Byte Blaze (@byteblaze)" in r.text
        assert c.get("/users/sign_in").url.path == "/login"
    db = gl.connect("gitlab", iid)
    pid = db.execute(
        "SELECT p.id FROM projects p JOIN namespaces n ON n.id = p.namespace_id "
        "WHERE n.path = 'acme-labs' AND p.path = 'ledger'"
    ).fetchone()[0]
    with _client(gl, iid, MAIN_USER) as c:
        r = c.get("/explore/projects", params={"name": "ledger"})
        assert "Acme Labs / Ledger" in r.text and "1 project" in r.text
        page = c.get(PROJECT).text
        assert "README.md" in page and "<h3>Installation</h3>" in page
        assert c.get(PROJECT + "/-/tree/main/internal").text.count("folder") >= 2
        blob = c.get(PROJECT + "/-/blob/main/internal/server/server.go").text
        assert "DefaultPort" in blob and "package server" in blob
        # the issue counts follow the filters
        bugs = db.execute(
            "SELECT COUNT(*) FROM issues i JOIN issue_labels il ON il.issue_id = i.id "
            "JOIN labels l ON l.id = il.label_id "
            "WHERE i.project_id = ? AND l.name = 'bug' AND i.state = 'opened'",
            (pid,),
        ).fetchone()[0]
        r = c.get(PROJECT + "/-/issues", params={"label_name[]": "bug"})
        assert f"<strong>Open {bugs}</strong>" in r.text
        r = c.get(PROJECT + "/-/issues", params={"search": "#1", "state": "all"})
        assert "#1 ·" in r.text and "All 1" in r.text
        assert "Merge requests" in c.get(PROJECT + "/-/merge_requests?state=all").text
        assert "Project members" in c.get(PROJECT + "/-/project_members").text
        assert "Personal projects" in c.get("/byteblaze").text
        assert "Group @acme-labs" in c.get("/acme-labs").text
        assert "Ledger" in c.get("/search", params={"search": "ledger"}).text
        commits = c.get(PROJECT + "/-/commits/main").text
        sha = re.search(r"/-/commit/([0-9a-f]{40})", commits).group(1)  # type: ignore[union-attr]
        assert "Authored by" in c.get(f"{PROJECT}/-/commit/{sha}").text
        for bad in (
            "/nobody",
            "/acme-labs/nope",
            PROJECT + "/-/issues/9999",
            PROJECT + "/-/blob/main/missing.txt",
            PROJECT + "/-/tree/dev",
        ):
            assert c.get(bad).status_code == 404, bad
    db.close()
    gl.delete_instance(iid)


def test_issue_workflow_and_members(gl: RunningSites) -> None:
    iid = gl.create_instance()
    db = gl.connect("gitlab", iid)
    with _client(gl, iid, MAIN_USER) as c:
        r = c.post(PROJECT + "/-/issues/new", data={"title": ""})
        assert "Title can&#39;t be blank" in r.text
        r = c.post(
            PROJECT + "/-/issues/new",
            data={"title": "New bug", "description": "It broke.", "label": "bug"},
        )
        assert "was created" in r.text and "New bug" in r.text
        n = int(re.search(r"/-/issues/(\d+)$", str(r.url)).group(1))  # type: ignore[union-attr]
        base = f"{PROJECT}/-/issues/{n}"
        assert "Your comment was added" in c.post(base + "/notes", data={"body": "Me too"}).text
        r = c.post(base + "/assign", data={"assignee_username": "omar.haddad"})
        assert "Assigned to Omar Haddad" in r.text
        assert "was closed" in c.post(base + "/close").text
        row = db.execute(
            "SELECT i.state, u.username FROM issues i JOIN users u ON u.id = i.assignee_id "
            "WHERE i.title = 'New bug'"
        ).fetchone()
        assert tuple(row) == ("closed", "omar.haddad")
        # members: the owner invites a non-member as Developer
        newcomer = db.execute(
            "SELECT username FROM users WHERE id NOT IN (SELECT user_id FROM members m "
            "JOIN projects p ON p.id = m.project_id WHERE p.path = 'weather-cli') LIMIT 1"
        ).fetchone()[0]
        own = "/byteblaze/weather-cli"
        r = c.post(own + "/-/project_members", data={"username": newcomer, "access_level": "30"})
        assert "added to the project as Developer" in r.text
        # stars toggle; a new project belongs to its creator
        first, second = c.post(PROJECT + "/-/star").text, c.post(PROJECT + "/-/star").text
        assert {"You starred Ledger" in first, "You starred Ledger" in second} == {True, False}
        assert "unstarred Ledger" in first + second
        r = c.post("/projects/new", data={"name": "My Tool", "visibility": "public"})
        assert r.url.path == "/byteblaze/my-tool" and "successfully created" in r.text
    level = db.execute(
        "SELECT access_level FROM members m JOIN users u ON u.id = m.user_id "
        "WHERE u.username = ? AND m.project_id = (SELECT id FROM projects WHERE path = ?)",
        (newcomer, "weather-cli"),
    ).fetchone()[0]
    assert level == 30
    db.close()
    gl.delete_instance(iid)


def test_permissions(gl: RunningSites) -> None:
    """A user who is not a member cannot close others' issues or invite members."""
    iid = gl.create_instance()
    db = gl.connect("gitlab", iid)
    ns, path, issue = db.execute(
        "SELECT n.path, p.path, i.iid FROM projects p JOIN namespaces n ON n.id = p.namespace_id "
        "JOIN issues i ON i.project_id = p.id WHERE i.state = 'opened' AND p.id NOT IN "
        "(SELECT project_id FROM members m JOIN users u ON u.id = m.user_id "
        "WHERE u.username = 'sam.rivera') AND i.author_id != "
        "(SELECT id FROM users WHERE username = 'sam.rivera') LIMIT 1"
    ).fetchone()
    with _client(gl, iid, "sam.rivera") as c:
        r = c.post(f"/{ns}/{path}/-/issues/{issue}/close")
        assert "at least the Reporter role" in r.text
        r = c.post(
            f"/{ns}/{path}/-/project_members", data={"username": "lross", "access_level": "30"}
        )
        assert "Only maintainers and owners" in r.text
    with _client(gl, iid) as guest:
        r = guest.post(f"/{ns}/{path}/-/issues/{issue}/notes", data={"body": "hi"})
        assert r.url.path == "/login"
    state = db.execute(
        "SELECT i.state FROM issues i JOIN projects p ON p.id = i.project_id "
        "WHERE p.path = ? AND i.iid = ?",
        (path, issue),
    ).fetchone()[0]
    assert state == "opened"
    db.close()
    gl.delete_instance(iid)


def test_instances_are_isolated_and_text_escaped(gl: RunningSites) -> None:
    a, b = gl.create_instance(), gl.create_instance()
    attack = '<script>alert("x")</script>'
    with _client(gl, a, MAIN_USER) as ca:
        r = ca.post(PROJECT + "/-/issues/new", data={"title": attack, "description": attack})
        assert attack not in r.text and "&lt;script&gt;alert" in r.text
        r = ca.post("/projects/new", data={"name": "Only In A", "visibility": "private"})
        assert "successfully created" in r.text
    with _client(gl, b, MAIN_USER) as cb:
        assert "Only In A" not in cb.get("/dashboard/projects").text
        assert cb.get("/byteblaze/only-in-a").status_code == 404
    for inst, want in ((a, 1), (b, 0)):
        with gl.connect("gitlab", inst) as db:
            n = db.execute("SELECT COUNT(*) FROM issues WHERE title = ?", (attack,)).fetchone()[0]
            assert n == want
    gl.delete_instance(a)
    gl.delete_instance(b)


# -- real Chromium -----------------------------------------------------------------------------


def _act(kind: str, el: str | None = None, arg: str | None = None) -> str:
    parts = [f'action="{kind}"']
    if arg is not None:
        parts.append(f'argument="{arg}"')
    if el is not None:
        parts.append(f'element="{el}"')
    return f"<answer>do({', '.join(parts)})</answer>"


@pytest.mark.browser
async def test_browser_login_isolation_and_escaping(browser, embedded_sites) -> None:  # noqa: ANN001
    from webagent_r1.config import EnvConfig
    from webagent_r1.rollout.env import WebEnv
    from webagent_r1.tasks.experts import find
    from webagent_r1.types import Task

    def task(url: str, user: str | None = MAIN_USER) -> Task:
        return Task(task_id="t", intent="test", start_url=url, sites=["gitlab"], user=user)

    envs = [WebEnv(browser, EnvConfig(max_turns=30), backend=embedded_sites) for _ in range(2)]
    a, b = envs
    try:
        # Login through the form: a wrong password is refused, the right one is accepted.
        obs = await a.reset(task("__GITLAB__/login", user=None))
        await a.step(_act("Type", find(obs, "textbox", "Username").id, MAIN_USER))
        await a.step(_act("Type", find(obs, "textbox", "Password").id, "nope"))
        r = await a.step(_act("Click", find(obs, "button", "Sign in").id))
        assert "sign-in was incorrect" in r.observation.text
        obs = r.observation
        await a.step(_act("Type", find(obs, "textbox", "Username").id, MAIN_USER))
        await a.step(_act("Type", find(obs, "textbox", "Password").id, MAIN_PASSWORD))
        r = await a.step(_act("Click", find(obs, "button", "Sign in").id))
        assert "Byte Blaze (@byteblaze)" in r.observation.text

        # Two parallel episodes on the same issue form; only A creates an issue.
        url = f"__GITLAB__{PROJECT}/-/issues/new"
        obs_a, obs_b = await asyncio.gather(a.reset(task(url)), b.reset(task(url)))
        assert a.instance_id != b.instance_id
        evil = "<img src=x onerror=window.__pwned=1><b>bold</b>"
        await a.step(_act("Type", find(obs_a, "textbox", "Title").id, evil))
        r = await a.step(_act("Click", find(obs_a, "button", "Create issue").id))
        assert r.observation.error is None and "was created" in r.observation.text
        page = a.session.page
        assert evil in await page.evaluate("() => document.querySelector('h1').innerText")
        assert await page.evaluate("() => window.__pwned === undefined")
        assert await page.evaluate("() => document.querySelectorAll('main b').length") == 0
        r_b = await b.step(_act("Click", find(obs_b, "link", "Issues (").id))
        assert "onerror" not in r_b.observation.text
        with embedded_sites.running.connect("gitlab", b.instance_id) as db:
            assert not db.execute("SELECT 1 FROM issues WHERE title = ?", (evil,)).fetchone()
    finally:
        for e in envs:
            await e.close()
