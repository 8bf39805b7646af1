"""WebArena-Lite configs: all 165 load and validate; the train split; clear errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from webagent_r1.sources.webarena import (
    LITE_OLD_TASK_IDS,
    WebArenaDataError,
    WebArenaSites,
    evaluate,
    find_lite_file,
    load_tasks,
    needs_judge,
    summarize,
)
from webagent_r1.sources.webarena.data import (
    EVAL_TYPES,
    HELPERS,
    PLACEHOLDERS,
    login_sites_of,
    parse_helper_call,
    sites_used,
    validate_config,
)
from webagent_r1.tasks import TaskError
from webagent_r1.types import Task

PLACEHOLDER = re.compile(r"__[A-Z]+(_[A-Z]+)*__")  # __SHOPPING__, not CSS's a__b
ALL_URLS = {s: f"http://wa.test:{7000 + i}" for i, s in enumerate(PLACEHOLDERS.values())}


def test_all_165_load_with_the_published_breakdown(lite_tasks: list[Task]) -> None:
    assert len(lite_tasks) == 165
    assert [t.task_id for t in lite_tasks] == list(range(165))
    # The published breakdown (docs/webarena-lite.md).
    assert summarize(lite_tasks)["sites"] == {
        "shopping": 45,
        "shopping_admin": 35,
        "gitlab": 30,
        "map": 26,
        "reddit": 19,
        "multi-site": 10,
    }
    assert summarize(lite_tasks)["eval_types"] == {
        "string_match": 78,
        "program_html": 48,
        "url_match+program_html": 19,
        "url_match": 18,
        "string_match+url_match": 2,
    }


def test_every_task_is_runnable(lite_tasks: list[Task]) -> None:
    sites = WebArenaSites(ALL_URLS)
    for t in lite_tasks:
        assert isinstance(t, Task) and t.split == "test" and t.evaluator is evaluate
        assert t.intent.strip() and t.eval["eval_types"]
        assert set(t.eval["eval_types"]) <= set(EVAL_TYPES)
        # Every placeholder of the start URL and eval spec resolves to a configured URL.
        assert not PLACEHOLDER.search(sites.resolve_url(t.start_url)), t.task_id
        assert not PLACEHOLDER.search(json.dumps(sites.substitute_all(t.eval))), t.task_id
        assert sites.resolve_url(t.start_url).startswith("http://wa.test:")
        assert sites.origins(t), t.task_id
        for spec in t.eval.get("program_html") or []:
            for expr in (spec["url"], spec["locator"]):
                if expr.startswith("func:"):
                    assert parse_helper_call(expr)[0] in HELPERS


def test_fields_are_kept_unchanged(lite_tasks: list[Task]) -> None:
    raw = json.loads(find_lite_file().read_text())  # type: ignore[union-attr]
    assert sorted(t.extra["old_task_id"] for t in lite_tasks) == sorted(LITE_OLD_TASK_IDS)
    for t, d in zip(lite_tasks, raw, strict=True):
        out = t.to_dict()
        for key, value in d.items():
            assert out[key] == value, (t.task_id, key)


def test_login_sites_follow_storage_state(lite_tasks: list[Task]) -> None:
    by_id = {t.task_id: t for t in lite_tasks}
    assert login_sites_of(by_id[0]) == ["shopping_admin"]
    both = [t for t in lite_tasks if t.storage_state and "gitlab.reddit" in t.storage_state]
    assert both and all(login_sites_of(t) == ["gitlab", "reddit"] for t in both)
    # Map tasks start logged out (WebArena gives them no storage_state).
    assert all(
        login_sites_of(t) == [] for t in lite_tasks if t.sites == ["map"]
    )  # fmt: skip
    # Task 144 (shopping + reddit) logs in to reddit only, as WebArena; "all" adds the shop.
    t144 = by_id[144]
    assert WebArenaSites(ALL_URLS).login_sites(t144) == ["reddit"]
    assert WebArenaSites(ALL_URLS, login="all").login_sites(t144) == ["shopping", "reddit"]
    assert WebArenaSites(ALL_URLS, login="none").login_sites(t144) == []


def test_judge_and_helper_needs(lite_tasks: list[Task]) -> None:
    judged = [t for t in lite_tasks if needs_judge(t)]
    assert len(judged) == 40  # 36 string fuzzy_match + 4 program_html fuzzy_match
    order_tasks = [t for t in lite_tasks if "shopping_get_latest_order_url" in json.dumps(t.eval)]
    assert len(order_tasks) == 3 and all("shopping" in sites_used(t) for t in order_tasks)


def test_multi_page_start_url(lite_tasks: list[Task]) -> None:
    multi = [t for t in lite_tasks if " |AND| " in t.start_url]
    assert len(multi) == 1
    sites = WebArenaSites(ALL_URLS)
    last = multi[0].start_url.split(" |AND| ")[-1]
    assert sites.resolve_url(multi[0].start_url) == sites.substitute(last)


def test_find_lite_file_does_not_import_browsergym() -> None:
    code = (
        "import sys; from webagent_r1.sources.webarena import find_lite_file, load_tasks;"
        "assert find_lite_file() is not None; assert len(load_tasks('test')) == 165;"
        "bad = [m for m in sys.modules if m.startswith(('browsergym.', 'nltk'))];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def _full_file(lite_tasks: list[Task], path: Path) -> Path:
    """A stand-in for WebArena's test.raw.json: 812 configs, ids 0..811, no old_task_id."""
    raw = [t.to_dict() for t in lite_tasks]
    configs = []
    for i in range(812):
        d = dict(raw[i % len(raw)])
        d.pop("old_task_id")
        d["task_id"] = i
        configs.append(d)
    path.write_text(json.dumps(configs))
    return path


def test_train_split_is_webarena_minus_lite(lite_tasks: list[Task], tmp_path: Path) -> None:
    full = _full_file(lite_tasks, tmp_path / "test.raw.json")
    train, val = load_tasks("train", full), load_tasks("val", full)
    ids = {"train": {t.task_id for t in train}, "val": {t.task_id for t in val}}
    assert not ids["train"] & ids["val"]
    assert len(ids["train"] | ids["val"]) == 812 - 165
    assert 40 <= len(val) <= 90  # a tenth of the 647, by a hash of the id
    assert not (ids["train"] | ids["val"]) & LITE_OLD_TASK_IDS
    assert all(t.split == "train" and t.evaluator is evaluate for t in train)
    assert all(t.split == "val" and t.evaluator is evaluate for t in val)
    assert [t.task_id for t in load_tasks("val", full)] == [t.task_id for t in val]  # stable
    assert len(load_tasks("train", full, val_fraction=0.0)) == 812 - 165  # the paper's 647
    wider = {t.task_id for t in load_tasks("val", full, val_fraction=0.2)}
    assert ids["val"] < wider  # a larger share only moves tasks into val
    with pytest.raises(WebArenaDataError, match="leaves the val split empty"):
        load_tasks("val", full, val_fraction=0.0)


def test_train_split_errors(tmp_path: Path) -> None:
    with pytest.raises(WebArenaDataError, match="test.raw.json"):
        load_tasks("train")
    with pytest.raises(WebArenaDataError, match="is a WebArena-Lite file"):
        load_tasks("train", find_lite_file())
    with pytest.raises(WebArenaDataError, match="val split is drawn from"):
        load_tasks("val")
    with pytest.raises(WebArenaDataError, match="unknown WebArena-Lite split 'dev'"):
        load_tasks("dev")


def test_explicit_path_and_missing_file(lite_tasks: list[Task], tmp_path: Path) -> None:
    sub = tmp_path / "five.jsonl"
    sub.write_text("\n".join(json.dumps(t.to_dict()) for t in lite_tasks[:5]))
    assert [t.task_id for t in load_tasks("test", sub)] == [0, 1, 2, 3, 4]
    with pytest.raises(WebArenaDataError, match="not found"):
        load_tasks("test", tmp_path / "nope.json")


def test_missing_package_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from webagent_r1.sources.webarena import data, source

    looked: list[bool] = []
    monkeypatch.setattr(data, "find_lite_file", lambda: looked.append(True))
    with pytest.raises(WebArenaDataError, match="pip install --no-deps browsergym-webarenalite"):
        source.load_tasks("test")
    assert looked == [True]  # the stand-in answered, not the installed package
    assert issubclass(WebArenaDataError, TaskError)  # a one-line error at the CLI


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"sites": ["shopping", "moon"]}, "unknown site"),
        ({"storage_state": "./.auth/map_state.json"}, "without a login"),
        ({"eval": {"eval_types": ["state_match"], "state_checks": [{}]}}, "not one of"),
        (
            {"eval": {"eval_types": ["string_match"], "reference_answers": {"regex": "x"}}},
            "reference_answers.regex is unknown",
        ),
        (
            {"eval": {"eval_types": ["url_match"], "reference_url": "x", "url_note": "SAME HOST"}},
            "url_note 'SAME HOST'",
        ),
        (
            {
                "eval": {
                    "eval_types": ["program_html"],
                    "program_html": [
                        {"url": "last", "locator": "$('x')", "required_contents": {"x": 1}}
                    ],
                }
            },
            "unknown locator",
        ),
        (
            {
                "eval": {
                    "eval_types": ["program_html"],
                    "program_html": [
                        {
                            "url": "func:os.system('rm -rf /')",
                            "locator": "",
                            "required_contents": {"must_include": ["x"]},
                        }
                    ],
                }
            },
            "must look like name",
        ),
        (
            {
                "eval": {
                    "eval_types": ["program_html"],
                    "program_html": [
                        {
                            "url": "func:reddit_get_post_url()",
                            "locator": "",
                            "required_contents": {"must_include": ["x"]},
                        }
                    ],
                }
            },
            "takes 1 argument",
        ),
        ({"intent": ""}, "intent"),
        ({"start_url": "__SHOP__/x"}, "unknown site placeholder __SHOP__"),
    ],
)
def test_bad_configs_name_task_and_field(lite_tasks: list[Task], patch: dict, message: str) -> None:
    d = {**lite_tasks[0].to_dict(), **patch}
    with pytest.raises(WebArenaDataError, match=message) as e:
        validate_config(d, "file.json[0]")
    assert "file.json[0]" in str(e.value)
