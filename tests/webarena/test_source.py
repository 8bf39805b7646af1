"""The ``webarena-lite`` task source: tasks per split, checks before any browser, reset hook."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.webarena.conftest import FakeJudge
from tests.webarena.fakesites import FakeSite
from webagent_r1.sources.webarena import (
    ENV_VARS,
    OpenAIJudge,
    SitesNotConfiguredError,
    WebArenaSites,
    evaluate,
    task_source,
)
from webagent_r1.sources.webarena.source import WebArenaSource


def test_tasks_of_some_sites_need_only_their_urls(
    fake_sites: dict[str, FakeSite], judge_server: FakeJudge, tmp_path: Path
) -> None:
    marker = tmp_path / "reset-ran"
    sites = WebArenaSites(
        {"gitlab": fake_sites["gitlab"].base_url},
        judge=OpenAIJudge(judge_server.base_url, "m"),
        reset_command=f"touch {marker}",
    )
    source = WebArenaSource(sites=["gitlab"], backend=sites)
    tasks = source.tasks("test")  # checked: gitlab has a URL and answers, a judge is set
    assert len(tasks) == 30 and all(t.sites == ["gitlab"] for t in tasks)
    assert source.evaluator is evaluate
    with source:
        assert source.backend is sites
        assert marker.exists()  # the reset hook ran on start


def test_unconfigured_fails_when_tasks_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)
    cfg = SimpleNamespace(tasks=SimpleNamespace(webarena=SimpleNamespace(sites=["map"])))
    source = task_source(cfg)
    assert isinstance(source, WebArenaSource) and source.sites == ["map"]
    with pytest.raises(SitesNotConfiguredError, match="set WA_MAP"):
        source.tasks("test")
    with pytest.raises(ValueError, match="no WebArena-Lite test task uses only"):
        WebArenaSource(sites=["wikipedia"], check=False).tasks("test")


def test_registered_as_the_webarena_lite_source() -> None:
    from webagent_r1.sources import task_source as by_name

    source = by_name(SimpleNamespace(tasks=SimpleNamespace(source="webarena-lite")))
    assert isinstance(source, WebArenaSource)
    assert len(WebArenaSource(check=False).tasks("test")) == 165


def test_config_section_reaches_the_source(tmp_path: Path) -> None:
    """``tasks.webarena`` of a real config: a user's JSONL of WebArena configs is the test
    split, filtered by site; bad values fail when the config loads."""
    from webagent_r1.config import ConfigError, load_config
    from webagent_r1.sources import task_source as by_name
    from webagent_r1.sources.webarena import find_lite_file

    lite = json.loads(find_lite_file().read_text(encoding="utf-8"))
    picked = [d for d in lite if d["sites"] == ["reddit"]][:3]
    picked += [d for d in lite if d["sites"] == ["map"]][:2]
    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps(d) + "\n" for d in picked), encoding="utf-8")
    cfg = load_config(
        None,
        [
            "tasks.source=webarena-lite",
            f"tasks.webarena.test_file={mine}",
            "tasks.webarena.sites=reddit",
            "tasks.webarena.login=all",
            "tasks.webarena.reset=false",
            "tasks.webarena.check=false",
        ],
    )
    source = by_name(cfg)
    assert isinstance(source, WebArenaSource)
    assert (source.login, source.reset, source.check) == ("all", False, False)
    tasks = source.tasks("test")
    assert [t.task_id for t in tasks] == [d["task_id"] for d in picked[:3]]
    with pytest.raises(ConfigError, match="tasks.webarena.login must be one of"):
        load_config(None, ["tasks.webarena.login=always"])
    with pytest.raises(ConfigError, match=r"unknown site\(s\) \['wiki'\]"):
        load_config(None, ["tasks.webarena.sites=wiki"])


REVISED = Path(__file__).parent / "fixtures" / "revised" / "test_webarena_lite_revised_sample.json"


async def test_revised_test_file_through_the_config(
    fake_sites: dict[str, FakeSite], judge_server: FakeJudge
) -> None:
    """``tasks.webarena.test_file`` with a file in the format of a revised Lite file: a list
    ``must_include`` (81), judge checks (3), alternative URLs and a reworded intent (39),
    ``|OR|`` in an answer check (94); graded by the configured scoring."""
    from tests.webarena.conftest import by_id, score
    from webagent_r1.config import load_config
    from webagent_r1.sources import task_source as by_name

    cfg = load_config(
        None,
        [
            "tasks.source=webarena-lite",
            f"tasks.webarena.test_file={REVISED}",
            "tasks.webarena.check=false",
            "tasks.webarena.scoring=webarena",
        ],
    )
    source = by_name(cfg)
    assert isinstance(source, WebArenaSource) and source.scoring == "webarena"
    tasks = by_id(source.tasks("test"))
    assert sorted(tasks) == [3, 39, 81, 94]
    assert all(t.evaluator is evaluate and t.split == "test" for t in tasks.values())
    assert tasks[81].eval["reference_answers"]["must_include"] == ["yjlou"]
    assert tasks[39].intent == "Open the list of merge requests assigned to me"
    sites = WebArenaSites(
        {"gitlab": "http://gitlab.test:8023", "map": "http://map.test:3000", "shopping": "x"},
        judge=OpenAIJudge(judge_server.base_url, "m"),
    )
    gitlab = "http://gitlab.test:8023/dashboard/merge_requests"
    for scoring, or_in_answers in (("vab", 1.0), ("webarena", 0.0)):
        sites.scoring = scoring
        assert await score(tasks[81], "Only yjlou", sites) == 1.0
        assert await score(tasks[81], "Only yjlou2", sites) == float(scoring == "webarena")
        assert await score(tasks[3], "driving: 13min, walking: 1h 45min", sites) == 1.0
        assert await score(tasks[3], "driving: 13min", sites) == 0.0
        # Either alternative URL passes under VAB; WebArena's rule wants the query values of
        # all alternatives together, so the shorter one fails there.
        first = f"{gitlab}?assignee_username=byteblaze"
        assert await score(tasks[39], None, sites, first) == float(scoring == "vab")
        alt = f"{gitlab}?scope=all&state=opened&assignee_username=byteblaze"
        assert await score(tasks[39], None, sites, alt) == 1.0
        assert await score(tasks[39], None, sites, f"{gitlab}?author_username=byteblaze") == 0.0
        # "65% |OR| 3.1 |OR| 3 stars": alternatives in answers are VAB's only.
        assert await score(tasks[94], "3 stars", sites) == or_in_answers
