"""Site configuration: URLs from WA_* variables, the clear error when unconfigured, reset hook."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.webarena.fakesites import FakeSite
from webagent_r1.cli import user_error_types
from webagent_r1.grading.base import EnvError
from webagent_r1.sources.webarena import (
    ENV_VARS,
    JudgeNotConfiguredError,
    OpenAIJudge,
    ResetError,
    SitesNotConfiguredError,
    WebArenaSites,
    check_configured,
)
from webagent_r1.types import Task


def _by_id(tasks: list[Task]) -> dict[int | str, Task]:
    return {t.task_id: t for t in tasks}


def test_env_var_names_are_browsergyms() -> None:
    assert ENV_VARS == {
        "shopping": "WA_SHOPPING",
        "shopping_admin": "WA_SHOPPING_ADMIN",
        "reddit": "WA_REDDIT",
        "gitlab": "WA_GITLAB",
        "map": "WA_MAP",
        "wikipedia": "WA_WIKIPEDIA",
        "homepage": "WA_HOMEPAGE",
    }


def test_from_env_reads_urls_judge_and_reset() -> None:
    sites = WebArenaSites.from_env(
        {
            "WA_SHOPPING": "http://h:7770/",
            "WA_SHOPPING_ADMIN": "http://h:7780/admin",
            "WA_MAP": "",
            "WA_JUDGE_BASE_URL": "http://j/v1",
            "WA_JUDGE_MODEL": "gpt",
            "WA_RESET_COMMAND": "true",
            "WA_FULL_RESET": "http://h:7565/",
        }
    )
    assert sites.urls == {"shopping": "http://h:7770", "shopping_admin": "http://h:7780/admin"}
    assert isinstance(sites.judge, OpenAIJudge) and sites.judge.model == "gpt"
    assert (sites.reset_command, sites.reset_url) == ("true", "http://h:7565")
    assert (
        sites.resolve_url("__SHOPPING_ADMIN__/sales/order/") == "http://h:7780/admin/sales/order/"
    )
    assert sites.resolve_url("__SHOPPING__") == "http://h:7770"
    with pytest.raises(ValueError, match="unknown WebArena site"):
        WebArenaSites({"shop": "http://x"})


def test_origins_cover_login_and_start_sites(lite_tasks: list[Task]) -> None:
    t = _by_id(lite_tasks)
    sites = WebArenaSites(
        {"shopping": "http://s:7770", "reddit": "http://r:9999", "gitlab": "http://g:8023"}
    )
    assert sites.origins(t[144]) == ["http://r:9999", "http://s:7770"]  # shopping + reddit
    assert sites.origins(t[0]) == []  # shopping_admin has no URL here: nothing allowed


def test_unconfigured_names_the_missing_variables(lite_tasks: list[Task]) -> None:
    sites = WebArenaSites({"shopping": "http://127.0.0.1:9"})
    with pytest.raises(SitesNotConfiguredError) as e:
        check_configured(sites, lite_tasks, check_reachable=False)
    msg = str(e.value)
    for var in ("WA_SHOPPING_ADMIN", "WA_REDDIT", "WA_GITLAB", "WA_MAP", "WA_WIKIPEDIA"):
        assert var in msg
    assert "WA_SHOPPING," not in msg and "WA_HOMEPAGE" not in msg  # set / not used
    assert "docs/webarena-lite.md" in msg
    # One line at the CLI, no traceback.
    assert isinstance(e.value, user_error_types())
    # Only the sites of the chosen tasks are needed.
    shop_only = [t for t in lite_tasks if t.sites == ["shopping"]]
    sites.judge = OpenAIJudge("http://127.0.0.1:9/v1", "m")
    with pytest.raises(SitesNotConfiguredError, match=r"not reachable: shopping \(http"):
        check_configured(sites, shop_only, timeout_s=2)


def test_unconfigured_with_nothing_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("WA_JUDGE_BASE_URL", raising=False)
    monkeypatch.delenv("WA_JUDGE_MODEL", raising=False)
    with pytest.raises(SitesNotConfiguredError, match="set WA_GITLAB, WA_MAP, WA_REDDIT"):
        check_configured()


def test_judge_is_required_only_when_tasks_use_it(
    lite_tasks: list[Task], fake_sites: dict[str, FakeSite]
) -> None:
    urls = {name: s.base_url for name, s in fake_sites.items()}
    maps = [t for t in lite_tasks if t.sites == ["map"]]
    with pytest.raises(JudgeNotConfiguredError, match=r"\d+ of these tasks use.*WA_JUDGE_MODEL"):
        check_configured(WebArenaSites(urls), maps, check_reachable=False)
    no_judge = [t for t in lite_tasks if t.sites == ["gitlab"] and "fuzzy" not in str(t.eval)]
    check_configured(WebArenaSites(urls), no_judge)  # reachable, no judge needed: passes
    judge = OpenAIJudge("http://127.0.0.1:9/v1", "m")
    check_configured(WebArenaSites(urls, judge=judge), maps, check_reachable=False)


def test_a_failing_site_is_reported(
    lite_tasks: list[Task], fake_sites: dict[str, FakeSite]
) -> None:
    class Down(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Down)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sites = WebArenaSites(
            {
                "gitlab": f"http://127.0.0.1:{server.server_address[1]}",
                "reddit": fake_sites["reddit"].base_url,
            }
        )
        both = [t for t in lite_tasks if set(t.sites) == {"gitlab", "reddit"}]
        with pytest.raises(SitesNotConfiguredError, match=r"gitlab \(http.*\): answered HTTP 502"):
            check_configured(sites, both)
    finally:
        server.shutdown()


def test_reset_command(tmp_path: Path) -> None:
    marker = tmp_path / "reset"
    assert WebArenaSites({}).reset() is False  # no hook: nothing to do
    assert WebArenaSites({}, reset_command=f"touch {marker}").reset() is True
    assert marker.exists()
    with pytest.raises(ResetError, match="exited 3: boom"):
        WebArenaSites({}, reset_command="echo boom >&2; exit 3").reset()
    with pytest.raises(ResetError, match="ran past"):
        WebArenaSites({}, reset_command="sleep 5").reset(timeout_s=0.2)
    assert issubclass(ResetError, EnvError)


def test_reset_url_follows_browsergyms_protocol() -> None:
    calls: list[str] = []

    class ResetServer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            calls.append(self.path)
            ready = calls.count("/status") >= 2
            body = b"Ready for duty!" if self.path == "/status" and ready else b"Resetting"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), ResetServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert WebArenaSites({}, reset_url=url).reset(poll_s=0.01) is True
        assert calls == ["/reset", "/status", "/status"]
    finally:
        server.shutdown()
    with pytest.raises(ResetError, match="does not answer"):
        WebArenaSites({}, reset_url="http://127.0.0.1:9").reset()
