"""Faults are not failures: a grader that cannot read the site raises ``EnvError`` (the
episode becomes an ``env_error``, never a reward of 0 to train on); a bug in an evaluator
propagates.

The databases are real SQLite files (locked by a second connection, or not a database at
all); the closed page is a real Chromium tab.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Error as PlaywrightError

from webagent_r1.config import EnvConfig
from webagent_r1.grading import embedded as evaluators
from webagent_r1.grading.base import EnvError, EvalContext
from webagent_r1.grading.embedded import evaluate
from webagent_r1.rollout.env import WebEnv
from webagent_r1.types import Task

_STATE = {
    "eval_types": ["state_match"],
    "state_checks": [{"site": "s", "sql": "SELECT v FROM t", "expected": "1"}],
}


class _OneDb:
    def __init__(self, path: Path) -> None:
        self.path = path

    def instance_db_path(self, site: str, instance_id: str) -> Path:
        return self.path


def _task(ev: dict[str, Any]) -> Task:
    return Task(task_id="t", intent="q", start_url="__SHOPPING__/", sites=["s"], eval=ev)


def _ctx(ev: dict[str, Any], backend: Any = None, session: Any = None) -> EvalContext:
    return EvalContext(
        task=_task(ev), answer="x", session=session, url="", instance_id="i", backend=backend
    )


def _db(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (v TEXT)")
    conn.execute("INSERT INTO t VALUES ('1')")
    conn.commit()
    conn.close()
    return path


async def test_a_readable_database_grades(tmp_path) -> None:
    """The control: the same check on a healthy file gives a reward."""
    res = await evaluate(_ctx(_STATE, _OneDb(_db(tmp_path / "ok.sqlite"))))
    assert res.reward == 1.0, res.explanation


async def test_locked_database_is_an_env_error(tmp_path) -> None:
    path = _db(tmp_path / "locked.sqlite")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # a writer that never lets go (rollback journal)
    try:
        with pytest.raises(EnvError, match="database fault.*locked"):
            await evaluate(_ctx(_STATE, _OneDb(path)))
    finally:
        holder.execute("ROLLBACK")
        holder.close()


async def test_corrupt_database_is_an_env_error(tmp_path) -> None:
    path = tmp_path / "corrupt.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(EnvError, match="database fault"):
        await evaluate(_ctx(_STATE, _OneDb(path)))


async def test_missing_database_is_an_env_error(tmp_path) -> None:
    with pytest.raises(EnvError, match="database fault"):
        await evaluate(_ctx(_STATE, _OneDb(tmp_path / "gone.sqlite")))


class _ClosedPage:
    url = "http://h/"

    async def evaluate(self, script: str) -> Any:
        raise PlaywrightError("Target page, context or browser has been closed")


class _Session:
    page = _ClosedPage()


async def test_playwright_error_in_program_html_is_an_env_error() -> None:
    ev = {"eval_types": ["program_html"], "program_html": [{"url": "last", "locator": ""}]}
    with pytest.raises(EnvError, match="browser fault"):
        await evaluate(_ctx(ev, session=_Session()))


@pytest.mark.parametrize("exc", [TypeError, KeyError, AttributeError, ZeroDivisionError])
async def test_a_bug_in_an_evaluator_propagates(monkeypatch, exc: type[Exception]) -> None:
    async def buggy(ctx: EvalContext) -> tuple[float, str]:
        raise exc("a bug")

    monkeypatch.setitem(evaluators.CHECKS, "string_match", buggy)
    ev = {"eval_types": ["string_match"], "reference_answers": {"exact_match": "x"}}
    with pytest.raises(exc):
        await evaluate(_ctx(ev))


async def test_a_state_check_without_sql_is_a_key_error(tmp_path) -> None:
    ev = {"eval_types": ["state_match"], "state_checks": [{"site": "s", "expected": "1"}]}
    with pytest.raises(KeyError):
        await evaluate(_ctx(ev, _OneDb(_db(tmp_path / "ok.sqlite"))))


@pytest.fixture
async def env(browser, embedded_sites):
    e = WebEnv(browser, EnvConfig(max_turns=5), backend=embedded_sites, evaluator=evaluate)
    yield e
    await e.close()


@pytest.mark.browser
async def test_closed_page_ends_the_episode_as_env_error(env) -> None:
    """In real Chromium: the grader finds the episode's tab closed; the episode is an
    env_error with no reward, and the env runs the next episode normally."""
    ev = {"eval_types": ["program_html"], "program_html": [{"url": "last", "locator": ""}]}
    task = _task(ev)
    task.sites = ["shopping"]
    await env.reset(task)
    await env.session.page.close()
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.done and r.reward == 0.0
    assert r.info["status"] == "env_error" and "grader fault" in r.info["error"], r.info
    assert env.session is None  # the episode was closed
    await env.reset(task)
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.info["status"] == "done" and r.reward == 1.0, r.info


@pytest.mark.browser
async def test_locked_instance_database_ends_the_episode_as_env_error(env, embedded_sites) -> None:
    """In real Chromium over a real site instance: a state check that meets a locked
    database gives an env_error, not a reward of 0."""
    ev = {
        "eval_types": ["state_match"],
        "state_checks": [{"site": "shopping", "sql": "SELECT count(*) FROM products"}],
    }
    task = _task(ev)
    task.sites = ["shopping"]
    await env.reset(task)
    path = embedded_sites.instance_db_path("shopping", env.instance_id)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        r = await env.step('<answer>exit(message="")</answer>')
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert r.info["status"] == "env_error" and "database fault" in r.info["error"], r.info


@pytest.mark.browser
async def test_a_slow_episode_keeps_its_instance_and_a_lost_one_is_an_env_error(
    env, embedded_sites, monkeypatch
) -> None:
    """An episode whose turns make no request (a scroll) for longer than the reaper's idle
    timeout still holds its instance, because every step marks it in use; an instance that
    is gone anyway (deleted here) makes the state check an env_error, not a crash."""
    ev = {
        "eval_types": ["state_match"],
        "state_checks": [
            {"site": "shopping", "sql": "SELECT count(*) > 0 FROM products", "expected": "1"}
        ],
    }
    task = _task(ev)
    task.sites = ["shopping"]
    stores = [embedded_sites.running.store(s) for s in embedded_sites.urls]
    await env.reset(task)
    iid = env.instance_id
    # Idle 3.3 s in the middle of the episode: its last use moved back, not slept through. A
    # real sleep past a short timeout would race the server's own reaper (every minute),
    # which would take the instance whenever its tick fell in the idle stretch.
    for store in stores:
        with store._lock:
            if iid in store._instances:
                store._instances[iid].last_used -= 3.3
    r = await env.step('<answer>do(action="Scroll Down")</answer>')  # no request to the site
    assert not r.done
    timeouts = [store.idle_timeout_s for store in stores]
    for store in stores:  # a 3 s timeout for this reap: without the step's mark, it would go
        store.idle_timeout_s = 3.0
    try:
        assert iid not in embedded_sites.running.reap_idle()
    finally:
        for store, timeout in zip(stores, timeouts, strict=True):
            store.idle_timeout_s = timeout
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.info["status"] == "done" and r.reward == 1.0, r.info

    await env.reset(task)
    embedded_sites.running.delete_instance(env.instance_id)
    r = await env.step('<answer>exit(message="")</answer>')  # caught before the action
    assert r.info["status"] == "env_error" and "instance" in r.info["error"], r.info
    assert "is gone" in r.info["error"] and r.done and env.session is None

    # The grader's own check, for an instance lost during the last action.
    await env.reset(task)
    gone = env.instance_id
    real_keep_alive = embedded_sites.keep_alive

    def delete_then_keep(iid: str) -> bool:
        ok = real_keep_alive(iid)
        embedded_sites.running.delete_instance(gone)
        return ok

    monkeypatch.setattr(embedded_sites, "keep_alive", delete_then_keep)
    r = await env.step('<answer>exit(message="")</answer>')
    assert r.info["status"] == "env_error" and "site instance is gone" in r.info["error"], r.info
