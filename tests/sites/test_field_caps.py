"""Every write form of the forum and of GitLab refuses a text field over its cap
(``FIELD_MAX`` for one-line fields, ``TEXT_MAX`` for texts): the error is shown where the form's
other errors are, nothing is stored, and a field exactly at its cap is taken as before."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from webagent_r1.sites import INSTANCE_COOKIE, RunningSites, start_sites
from webagent_r1.sites.base import FIELD_MAX, TEXT_MAX
from webagent_r1.sites.reddit.views import MAX_RETURN_TO
from webagent_r1.sites.seed_utils import slugify

USERS = {"reddit": "MarvelsGrantMan136", "gitlab": "byteblaze"}
ISSUE = "/byteblaze/dotfiles/-/issues/1"
MR = "/byteblaze/dotfiles/-/merge_requests/1"
MEMBERS = "/byteblaze/weather-cli/-/project_members"


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSites]:
    """The forum and GitLab on free ports, with a private cache of their pristine databases."""
    running = start_sites(["reddit", "gitlab"], ports="auto", home=tmp_path_factory.mktemp("home"))
    yield running
    running.stop()


def _client(sites: RunningSites, site: str, iid: str) -> httpx.Client:
    ck = sites.login_cookie(site, iid, USERS[site])
    cookies = {INSTANCE_COOKIE: iid, ck["name"]: ck["value"]}
    return httpx.Client(base_url=sites.urls[site], cookies=cookies, timeout=30)


def _targets(db: sqlite3.Connection, site: str) -> dict[str, object]:
    """Ids and URLs of the seeded rows the forms write to."""
    if site != "reddit":
        return {}
    own_id, own_forum = db.execute(
        "SELECT s.id, f.name FROM submissions s JOIN forums f ON f.id = s.forum_id "
        "WHERE s.user_id = (SELECT id FROM users WHERE username = ?) ORDER BY s.id LIMIT 1",
        (USERS["reddit"],),
    ).fetchone()
    cid, pid, forum, title = db.execute(
        "SELECT c.id, s.id, f.name, s.title FROM comments c "
        "JOIN submissions s ON s.id = c.submission_id JOIN forums f ON f.id = s.forum_id "
        "ORDER BY c.id LIMIT 1"
    ).fetchone()
    return {
        "own": f"/f/{own_forum}/{own_id}",
        "own_id": own_id,
        "post": f"/f/{forum}/{pid}",
        "thread": f"/f/{forum}/{pid}/{slugify(title)}",
        "cid": cid,
    }


@dataclass(frozen=True)
class Case:
    """One field of one form: where it is posted, the rest of the form, and what to expect."""

    site: str
    path: str  # the form's action; {name} from _targets
    form: dict[str, str]  # "?" marks the field under test
    label: str  # the field as the error names it
    cap: int
    state: str  # SQL whose result a refused form leaves unchanged
    shown_on: str  # the page that shows the error
    at_cap: str  # text of the response to a form with the field exactly at its cap
    stored: str | None = None  # SQL counting rows holding a value of exactly ``cap`` characters

    def fill(self, t: dict[str, object], value: str) -> tuple[str, dict[str, str]]:
        data = {k: (value if v == "?" else v.format(**t)) for k, v in self.form.items()}
        return self.path.format(**t), data


N_POSTS, N_COMMENTS = "SELECT COUNT(*) FROM submissions", "SELECT COUNT(*) FROM comments"
OWN_POST = "SELECT title, body, edited_at FROM submissions WHERE id = {own_id}"
N_PROJECTS, N_ISSUES = "SELECT COUNT(*) FROM projects", "SELECT COUNT(*) FROM issues"
N_NOTES = "SELECT COUNT(*) FROM notes"
ISSUE_1 = (
    "SELECT i.assignee_id, i.updated_at, (SELECT COUNT(*) FROM issue_labels), "
    "(SELECT COUNT(*) FROM notes) FROM issues i JOIN projects p ON p.id = i.project_id "
    "WHERE p.path = 'dotfiles' AND i.iid = 1"
)
F, T = FIELD_MAX, TEXT_MAX

# fmt: off
CASES = {
    # -- forum --
    "submit-title": Case(
        "reddit", "/submit", {"forum": "books", "title": "?", "body": "b"}, "Title", F,
        N_POSTS, "/submit", "Your post was submitted.",
        f"SELECT COUNT(*) FROM submissions WHERE length(title) = {F}",
    ),
    "submit-body": Case(
        "reddit", "/submit", {"forum": "books", "title": "t", "body": "?"}, "Body", T,
        N_POSTS, "/submit", "Your post was submitted.",
        f"SELECT COUNT(*) FROM submissions WHERE length(body) = {T}",
    ),
    "submit-forum": Case(
        "reddit", "/submit", {"forum": "?", "title": "t", "body": "b"}, "Forum", F,
        N_POSTS, "/submit", "Please choose a forum.",
    ),
    "comment": Case(
        "reddit", "{post}/-/comment", {"body": "?"}, "Comment", T,
        N_COMMENTS, "{thread}", "Your comment was posted.",
        f"SELECT COUNT(*) FROM comments WHERE length(body) = {T} AND parent_id IS NULL",
    ),
    "reply": Case(
        "reddit", "{post}/-/comment", {"body": "?", "parent_id": "{cid}"}, "Comment", T,
        N_COMMENTS, "{post}/-/comment/{cid}", "Your comment was posted.",
        f"SELECT COUNT(*) FROM comments WHERE length(body) = {T} AND parent_id IS NOT NULL",
    ),
    "edit-title": Case(
        "reddit", "{own}/-/edit", {"title": "?", "body": "b"}, "Title", F,
        OWN_POST, "{own}/-/edit", "The submission was edited.",
        f"SELECT COUNT(*) FROM submissions WHERE length(title) = {F} AND id = {{own_id}}",
    ),
    "edit-body": Case(
        "reddit", "{own}/-/edit", {"title": "t", "body": "?"}, "Body", T,
        OWN_POST, "{own}/-/edit", "The submission was edited.",
        f"SELECT COUNT(*) FROM submissions WHERE length(body) = {T} AND id = {{own_id}}",
    ),
    # -- GitLab --
    "project-name": Case(
        "gitlab", "/projects/new", {"name": "?", "path": "capped", "visibility": "public"},
        "Project name", F, N_PROJECTS, "/projects/new", "was successfully created.",
        f"SELECT COUNT(*) FROM projects WHERE length(name) = {F}",
    ),
    "project-slug": Case(
        "gitlab", "/projects/new", {"name": "Capped", "path": "?", "visibility": "public"},
        "Project slug", F, N_PROJECTS, "/projects/new",
        "Project slug can contain only letters",  # and at most 100 characters
    ),
    "project-description": Case(
        "gitlab", "/projects/new", {"name": "Capped", "description": "?", "visibility": "public"},
        "Project description", T, N_PROJECTS, "/projects/new", "was successfully created.",
        f"SELECT COUNT(*) FROM projects WHERE length(description) = {T}",
    ),
    "project-namespace": Case(
        "gitlab", "/projects/new", {"name": "Capped", "namespace": "?", "visibility": "public"},
        "Namespace", F, N_PROJECTS, "/projects/new",
        "You can only create projects in your own namespace or groups you own.",
    ),
    "issue-title": Case(
        "gitlab", "/byteblaze/dotfiles/-/issues/new", {"title": "?"}, "Title", F,
        N_ISSUES, "/byteblaze/dotfiles/-/issues/new", "was created.",
        f"SELECT COUNT(*) FROM issues WHERE length(title) = {F}",
    ),
    "issue-description": Case(
        "gitlab", "/byteblaze/dotfiles/-/issues/new", {"title": "t", "description": "?"},
        "Description", T, N_ISSUES, "/byteblaze/dotfiles/-/issues/new", "was created.",
        f"SELECT COUNT(*) FROM issues WHERE length(description) = {T}",
    ),
    "issue-assignee": Case(
        "gitlab", "/byteblaze/dotfiles/-/issues/new", {"title": "t", "assignee_username": "?"},
        "Assignee", F, N_ISSUES, "/byteblaze/dotfiles/-/issues/new", "was created.",
    ),
    "issue-label": Case(
        "gitlab", "/byteblaze/dotfiles/-/issues/new", {"title": "t", "label": "?"},
        "Label", F, N_ISSUES, "/byteblaze/dotfiles/-/issues/new", "was created.",
    ),
    "issue-comment": Case(
        "gitlab", ISSUE + "/notes", {"body": "?"}, "Comment", T,
        N_NOTES, ISSUE, "Your comment was added.",
        f"SELECT COUNT(*) FROM notes WHERE length(body) = {T} AND noteable_type = 'issue'",
    ),
    "mr-comment": Case(
        "gitlab", MR + "/notes", {"body": "?"}, "Comment", T,
        N_NOTES, MR, "Your comment was added.",
        f"SELECT COUNT(*) FROM notes WHERE length(body) = {T} "
        "AND noteable_type = 'merge_request'",
    ),
    "assign": Case(
        "gitlab", ISSUE + "/assign", {"assignee_username": "?"}, "Assignee", F,
        ISSUE_1, ISSUE, "There is no user xxx",
    ),
    "add-label": Case(
        "gitlab", ISSUE + "/labels", {"label": "?"}, "Label", F,
        ISSUE_1, ISSUE, "Choose a label to add.",
    ),
    "add-member": Case(
        "gitlab", MEMBERS, {"username": "?", "access_level": "30"}, "Username", F,
        "SELECT COUNT(*) FROM members", MEMBERS, "Select a user to invite.",
    ),
}
# fmt: on


def _post(
    sites: RunningSites, case: Case, value: str
) -> tuple[httpx.Response, dict[str, object], tuple[object, ...], tuple[object, ...]]:
    """Post the case's form with ``value`` in a fresh instance; the response (redirects
    followed), the targets, and the case's state before and after."""
    iid = sites.create_instance()
    try:
        db = sites.connect(case.site, iid)
        t = _targets(db, case.site)
        before = tuple(db.execute(case.state.format(**t)).fetchone())
        path, data = case.fill(t, value)
        with _client(sites, case.site, iid) as c:
            r = c.post(path, data=data, follow_redirects=True)
        after = tuple(db.execute(case.state.format(**t)).fetchone())
        if case.stored is not None:
            t["n_stored"] = db.execute(case.stored.format(**t)).fetchone()[0]
        db.close()
    finally:
        sites.delete_instance(iid)
    return r, t, before, after


@pytest.mark.parametrize("name", list(CASES))
def test_a_field_over_its_cap_is_refused_and_nothing_stored(both: RunningSites, name: str) -> None:
    case = CASES[name]
    r, t, before, after = _post(both, case, "x" * (case.cap + 1))
    assert r.status_code == 200
    assert r.url.path == case.shown_on.format(**t)
    error = f"{case.label} is too long: use at most {case.cap:,} characters."
    assert f'<p class="msg error" role="alert">{error}</p>' in r.text or (
        f'<p class="msg error" role="status">{error}</p>' in r.text
    ), r.text[:2000]
    assert after == before
    if case.stored is not None:
        assert t["n_stored"] == 0


@pytest.mark.parametrize("name", list(CASES))
def test_a_field_exactly_at_its_cap_is_taken(both: RunningSites, name: str) -> None:
    case = CASES[name]
    r, t, _, _ = _post(both, case, "x" * case.cap)
    assert r.status_code == 200
    assert case.at_cap in r.text and "too long" not in r.text, r.text[:2000]
    if case.stored is not None:
        assert t["n_stored"] == 1


@pytest.mark.parametrize(
    ("site", "path", "form", "label", "state"),
    [
        ("reddit", "/submit", {"forum": "books", "title": "?", "body": "b"}, "Title", N_POSTS),
        ("gitlab", "/byteblaze/dotfiles/-/issues/new", {"title": "?"}, "Title", N_ISSUES),
    ],
    ids=["forum-post-title", "gitlab-issue-title"],
)
def test_a_megabyte_title_is_refused(
    both: RunningSites, site: str, path: str, form: dict[str, str], label: str, state: str
) -> None:
    case = Case(site, path, form, label, F, state, path, "")
    r, _, before, after = _post(both, case, "x" * 1_000_000)
    assert r.status_code == 200 and f"{label} is too long: use at most 255 characters." in r.text
    assert after == before


@pytest.mark.parametrize(
    ("path", "form"),
    [("/f/books/subscribe", {}), ("/sv/{pid}", {"choice": "1"})],
    ids=["subscribe", "vote"],
)
def test_an_overlong_return_to_goes_to_the_default_page(
    both: RunningSites, path: str, form: dict[str, str]
) -> None:
    """``return_to`` is not stored; one over ``MAX_RETURN_TO`` is ignored, not refused."""
    iid = both.create_instance()
    db = both.connect("reddit", iid)
    t = _targets(db, "reddit")
    db.close()
    post = str(t["post"])
    action = path.format(pid=post.rsplit("/", 1)[1])
    default = "/f/books" if action == "/f/books/subscribe" else t["thread"]
    at_cap = "/" + "x" * (MAX_RETURN_TO - 1)
    with _client(both, "reddit", iid) as c:
        for back, location in ((at_cap + "x", default), (at_cap, at_cap)):
            r = c.post(action, data={**form, "return_to": back})
            assert r.status_code == 303 and r.headers["location"] == location
    both.delete_instance(iid)
