"""Write budgets: a state-changing task fails when the episode changed more than the task
asks (a second vote, a comment, a star on another project), however right the target state.

The footprint is checked against hand-counted changes on real SQLite files, and against the
real sites' databases with changes written the way the sites store them; the experts staying
within their templates' budgets is checked by ``test_template_experts`` and ``tasks check``.
"""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from webagent_r1.grading.base import EvalContext
from webagent_r1.grading.embedded import evaluate
from webagent_r1.sources.embedded.suite import all_templates, build_suite, select, spec_for
from webagent_r1.types import Task


class _Files:
    """A backend of one pristine file and one instance file, behind any site name."""

    def __init__(self, pristine: Path, instance: Path) -> None:
        self.pristine, self.instance = pristine, instance

    def instance_db_path(self, site: str, instance_id: str) -> Path:
        return self.instance

    def pristine_db_path(self, site: str) -> Path:
        return self.pristine


def _files(tmp_path: Path) -> _Files:
    tmp_path.mkdir(parents=True, exist_ok=True)
    pristine = tmp_path / "pristine.sqlite"
    conn = sqlite3.connect(pristine)
    conn.executescript(
        """
        CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT);
        CREATE TABLE votes (u INTEGER, p INTEGER, c INTEGER, PRIMARY KEY (u, p));
        CREATE TABLE nopk (v TEXT);
        CREATE TABLE sessions (token TEXT PRIMARY KEY);
        INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c');
        INSERT INTO votes VALUES (1, 1, 1), (1, 2, 1);
        INSERT INTO nopk VALUES ('x');
        """
    )
    conn.commit()
    conn.close()
    instance = tmp_path / "instance.sqlite"
    shutil.copyfile(pristine, instance)
    return _Files(pristine, instance)


def _write(files: _Files, sql: str) -> None:
    conn = sqlite3.connect(files.instance)
    conn.executescript(sql)
    conn.commit()
    conn.close()


async def _grade(files: Any, writes: dict[str, int] | None, sites: tuple[str, ...] = ("s",)) -> Any:
    ev: dict[str, Any] = {
        "eval_types": ["state_match"],
        "state_checks": [{"site": sites[0], "sql": "SELECT 1", "expected": "1"}],
    }
    if writes is not None:
        ev["writes"] = writes
    task = Task(task_id="t", intent="q", start_url="/", sites=list(sites), eval=ev)
    ctx = EvalContext(task=task, answer=None, session=None, url="", instance_id="i", backend=files)
    return await evaluate(ctx)


_CHANGES = """
    INSERT INTO t VALUES (4, 'd');
    UPDATE t SET v = 'B' WHERE id = 2;
    DELETE FROM t WHERE id = 3;
    DELETE FROM votes WHERE p = 1;
    INSERT INTO votes VALUES (1, 1, 1);
    UPDATE votes SET c = -1 WHERE p = 2;
    INSERT INTO nopk VALUES ('y');
    INSERT INTO sessions VALUES ('tok');
"""
"""By hand: t 3 rows (an insert, an update, a delete); votes 1 (the vote on post 1 removed and
cast again is no change; the one on post 2 flipped); nopk 1 (by rowid); sessions ignored."""


async def test_the_footprint_counts_changed_rows_by_key(tmp_path) -> None:
    files = _files(tmp_path)
    _write(files, _CHANGES)
    budget = {"s.t": 3, "s.votes": 1, "s.nopk": 1}
    assert (await _grade(files, budget)).reward == 1.0
    for key in budget:  # one row fewer allowed anywhere: a side effect
        res = await _grade(files, {**budget, key: budget[key] - 1})
        assert res.reward == 0.0 and f"of {key} " in res.explanation, res.explanation
    res = await _grade(files, {"s.t": 3, "s.votes": 1})  # a table the task never changes
    assert res.reward == 0.0 and "1 row of s.nopk (the task changes at most 0)" in res.explanation


async def test_no_budget_no_check_and_sites_sharing_a_database_count_once(tmp_path) -> None:
    files = _files(tmp_path)
    _write(files, "INSERT INTO t VALUES (4, 'd');")
    assert (await _grade(files, None)).reward == 1.0  # WebArena's semantics: final state only
    assert (await _grade(files, {"a.t": 1}, sites=("a", "b"))).reward == 1.0
    assert (await _grade(files, {}, sites=("a", "b"))).explanation.endswith(
        "1 row of a.t (the task changes at most 0)"
    )


async def test_files_whose_paths_hold_uri_characters_are_read(tmp_path) -> None:
    """``?``, ``#`` and ``%`` in a database's path are not read as URI syntax."""
    files = _files(tmp_path / "runs?x=1#a%20b")
    _write(files, "INSERT INTO t VALUES (4, 'd');")
    assert (await _grade(files, {"s.t": 1})).reward == 1.0
    res = await _grade(files, {})
    assert res.reward == 0.0 and "1 row of s.t " in res.explanation, res.explanation


async def test_a_table_the_episode_created_or_dropped_counts_all_its_rows(tmp_path) -> None:
    files = _files(tmp_path)
    _write(files, "CREATE TABLE extra (v TEXT); INSERT INTO extra VALUES ('p'), ('q');")
    res = await _grade(files, {"s.extra": 1})
    assert res.reward == 0.0 and "2 rows of s.extra " in res.explanation, res.explanation
    files = _files(tmp_path / "dropped")
    _write(files, "DROP TABLE votes;")  # its two rows are gone
    assert (await _grade(files, {"s.votes": 2})).reward == 1.0
    res = await _grade(files, {"s.votes": 1})
    assert res.reward == 0.0 and "2 rows of s.votes " in res.explanation, res.explanation


def test_every_change_template_has_a_write_budget() -> None:
    missing = [t.name for t in all_templates() if t.kind == "change" and t.writes is None]
    assert not missing
    tasks = select(build_suite(spec_for("test")), split="test")
    changes = [t for t in tasks if t.extra["kind"] == "change"]
    assert changes and all(t.eval["writes"] for t in changes)
    assert not any("writes" in t.eval for t in tasks if t.extra["kind"] != "change")


# ------------------------------------------------------------------ the real sites' databases


def _task(template: str) -> Task:
    return next(t for t in select(build_suite(spec_for("test")), split="test", template=template))


@pytest.fixture
def instance(embedded_sites):
    iid = embedded_sites.running.create_instance()
    yield iid
    embedded_sites.running.delete_instance(iid)


async def _grade_after(
    embedded_sites, iid: str, task: Task, writes: list[tuple[str, list[Any]]]
) -> Any:
    """Grade ``task`` after these writes to the instance of its first site."""
    with embedded_sites.running.connect(task.sites[0], iid, readonly=False) as conn:
        for sql, params in writes:
            conn.execute(sql, params)
    ctx = EvalContext(
        task=task, answer=None, session=None, url="", instance_id=iid, backend=embedded_sites
    )
    return await evaluate(ctx)


@pytest.mark.parametrize("extra", ["none", "second vote", "comment"])
async def test_an_upvote_with_side_effects_fails(embedded_sites, instance, extra) -> None:
    task = _task("reddit.upvote_post")
    user, post = task.eval["state_checks"][0]["params"]
    with embedded_sites.running.connect("reddit", instance) as conn:
        other = next(r[0] for r in conn.execute("SELECT id FROM submissions") if r[0] != post)
    vote = "INSERT INTO submission_votes (user_id, submission_id, choice) VALUES (?, ?, 1)"
    writes = [(vote, [user, post])]
    if extra == "second vote":
        writes.append((vote, [user, other]))
    if extra == "comment":
        writes.append(
            (
                "INSERT INTO comments (submission_id, user_id, body, created_at) "
                "VALUES (?, ?, 'Upvote', '2026-01-01')",
                [post, user],
            )
        )
    res = await _grade_after(embedded_sites, instance, task, writes)
    if extra == "none":  # the control: the vote alone is the task done
        assert res.reward == 1.0, res.explanation
    else:
        table = "submission_votes" if extra == "second vote" else "comments"
        assert res.reward == 0.0 and f"reddit.{table}" in res.explanation, res.explanation
    # The final-state check alone (WebArena's semantics) passes every one of them.
    old = dataclasses.replace(task, eval={k: v for k, v in task.eval.items() if k != "writes"})
    ctx = EvalContext(
        task=old, answer=None, session=None, url="", instance_id=instance, backend=embedded_sites
    )
    assert (await evaluate(ctx)).reward == 1.0


@pytest.mark.parametrize("also_unstar", [False, True])
async def test_a_star_that_also_unstars_another_project_fails(
    embedded_sites, instance, also_unstar
) -> None:
    task = _task("gitlab.star_project")
    project, user = task.eval["state_checks"][0]["params"]
    writes = [
        (
            "INSERT INTO stars (project_id, user_id, created_at) VALUES (?, ?, '2026-01-01')",
            [project, user],
        )
    ]
    if also_unstar:
        writes.append(
            (
                "DELETE FROM stars WHERE user_id = ? AND project_id = "
                "(SELECT MIN(project_id) FROM stars WHERE user_id = ?)",
                [user, user],
            )
        )
    res = await _grade_after(embedded_sites, instance, task, writes)
    if also_unstar:
        assert res.reward == 0.0 and "2 rows of gitlab.stars" in res.explanation, res.explanation
    else:
        assert res.reward == 1.0, res.explanation


async def test_event_notes_are_left_out_of_the_diff(tmp_path) -> None:
    """GitLab logs each change as a system note; the change is counted in its own table, so
    assigning the wrong person and then the right one is not two side effects."""
    files = _files(tmp_path)
    _write(
        files,
        """
        CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT, system INTEGER);
        """,
    )
    shutil.copyfile(files.instance, files.pristine)
    _write(
        files,
        """
        INSERT INTO notes (body, system) VALUES ('assigned to @a', 1), ('assigned to @b', 1);
        UPDATE t SET v = 'assigned' WHERE id = 1;
        """,
    )
    assert (await _grade(files, {"s.t": 1})).reward == 1.0
    _write(files, "INSERT INTO notes (body, system) VALUES ('thanks!', 0);")  # a comment
    res = await _grade(files, {"s.t": 1})
    assert res.reward == 0.0 and "1 row of s.notes" in res.explanation, res.explanation
