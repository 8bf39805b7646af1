"""Task files: WebArena configs load unchanged; broken files give clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webagent_r1.tasks import TaskError, load_tasks, write_tasks

from ..test_types import WEBARENA_ENTRY


def test_webarena_list_file_loads_and_round_trips(tmp_path) -> None:
    p = tmp_path / "wa.json"
    p.write_text(json.dumps([WEBARENA_ENTRY]))
    [t] = load_tasks(p)
    assert t.intent_template_id == 279 and t.extra["old_task_id"] == 0
    out = tmp_path / "out.jsonl"
    assert write_tasks([t], out) == 1
    [back] = load_tasks(out)
    assert back.to_dict() == t.to_dict()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps([{"task_id": 1}]), "lacks required field"),
        (json.dumps([{**WEBARENA_ENTRY, "eval": {"eval_types": ["magic"]}}]), "unknown eval"),
        (json.dumps([{**WEBARENA_ENTRY, "eval": {"eval_types": []}}]), "non-empty list"),
        (json.dumps([{**WEBARENA_ENTRY, "eval": {"eval_types": ["url_match"]}}]), "reference_url"),
        (json.dumps([WEBARENA_ENTRY, WEBARENA_ENTRY]), "duplicate task_id"),
        (json.dumps([[1, 2]]), "must be a JSON object"),
    ],
)
def test_broken_files_name_the_problem(tmp_path, content: str, message: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(TaskError, match=message):
        load_tasks(p)


def test_jsonl_errors_name_the_line(tmp_path) -> None:
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(WEBARENA_ENTRY) + "\n\n{oops\n")
    with pytest.raises(TaskError, match="bad.jsonl:3"):
        load_tasks(p)
    with pytest.raises(TaskError, match="not found"):
        load_tasks(tmp_path / "missing.jsonl")


def test_suite_is_deterministic_and_splits_are_disjoint() -> None:
    from webagent_r1.sources.embedded.suite import _SUITE_CACHE, build_suite

    a = [t.to_dict() for t in build_suite()]
    _SUITE_CACHE.clear()
    b = [t.to_dict() for t in build_suite()]
    assert a == b
    tasks = build_suite()
    ids = [t.task_id for t in tasks]
    assert len(ids) == len(set(ids))
    # Held-out templates never reach the train split.
    assert not [t for t in tasks if t.heldout_template and t.split == "train"]
    # Train and test instances of one template never share parameters.
    seen: dict[tuple, str] = {}
    for t in tasks:
        key = (t.intent_template_id, json.dumps(t.instantiation_dict, sort_keys=True))
        assert seen.setdefault(key, t.split) == t.split
    per_site: dict[str, set] = {}
    for t in tasks:
        per_site.setdefault(t.sites[0], set()).add(t.intent_template_id)
    for site in ("shopping", "shopping_admin"):
        assert len(per_site[site]) >= 12, f"{site} needs at least 12 templates"


def test_run_tasks_filters_and_names_bad_filters() -> None:
    from webagent_r1.sources.embedded.suite import all_templates, build_suite, run_tasks, select

    difficulty = {t.name: t.difficulty for t in all_templates()}
    short = run_tasks("train", [], [], ["1-2"])
    assert short and {difficulty[t.extra["template"]] for t in short} == {"1-2"}
    assert len(short) < len(select(build_suite(), split="train"))
    shop = run_tasks("test", ["shopping"], [], [])
    assert shop and all(t.sites == ["shopping"] for t in shop)  # cross-site tasks left out
    one = run_tasks("test", [], [short[0].extra["template"]], [])
    assert {t.extra["template"] for t in one} == {short[0].extra["template"]}
    with pytest.raises(ValueError, match="did you mean"):
        run_tasks("train", [], [short[0].extra["template"] + "x"], [])
    with pytest.raises(ValueError, match="unknown site"):
        run_tasks("train", ["shoping"], [], [])
    name = short[0].extra["template"]
    other = "map" if short[0].sites[0] != "map" else "reddit"
    with pytest.raises(ValueError, match="keeps no"):
        run_tasks("train", [other], [name], [])


def test_heldout_templates_replace_the_trained_templates_on_the_heldout_split_only() -> None:
    from webagent_r1.config import Config, load_config
    from webagent_r1.sources.embedded.source import EmbeddedSource
    from webagent_r1.sources.embedded.suite import all_templates, run_tasks, tasks_for

    held = sorted(t.name for t in all_templates() if t.heldout)
    trained = sorted(t.name for t in all_templates() if not t.heldout)
    assert len(held) >= 2 and trained
    # a recipe names trained templates: the held-out split has none of them, and says why
    with pytest.raises(ValueError, match="tasks.heldout_templates"):
        run_tasks("heldout", [], trained[:2], [])
    both = run_tasks("heldout", [], trained[:2], [], held[:2])
    assert {t.extra["template"] for t in both} == set(held[:2])
    assert all(t.heldout_template for t in both)
    # the test and train splits keep the trained templates alone
    test = run_tasks("test", [], trained[:2], [], held[:2])
    assert {t.extra["template"] for t in test} == set(trained[:2])
    # `templates` naming held-out ones picks them, with or without heldout_templates (an
    # override of a recipe that names some: `tasks.templates=[..]`)
    assert {t.extra["template"] for t in run_tasks("heldout", [], held[:1], [])} == {held[0]}
    picked = run_tasks("heldout", [], held[1:2], [], held[:1])
    assert {t.extra["template"] for t in picked} == {held[1]}
    with pytest.raises(ValueError, match="not held out"):
        run_tasks("heldout", [], [], [], [trained[0]])
    with pytest.raises(ValueError, match="tasks.heldout_templates: unknown template"):
        run_tasks("heldout", [], [], [], [held[0] + "x"])
    # the multi-turn recipe's held-out templates: 3-5 steps, never trained, through both paths
    cfg = load_config(Path(__file__).resolve().parents[2] / "configs" / "r1-multiturn.yaml")
    assert cfg.tasks.heldout_templates and set(cfg.tasks.heldout_templates) <= set(held)
    names = {t.extra["template"] for t in tasks_for(cfg, "heldout")}
    assert names == set(cfg.tasks.heldout_templates)
    assert not names & set(cfg.tasks.templates)
    via_source = EmbeddedSource.from_config(cfg).tasks("heldout")
    assert {t.extra["template"] for t in via_source} == names
    assert not Config().tasks.heldout_templates


def test_wide_split_adds_unseen_instances_and_leaves_train_and_test_alone() -> None:
    from webagent_r1.sources.embedded.suite import (
        WIDE_EXTRA,
        build_suite,
        run_tasks,
        select,
        spec_for,
    )

    default = build_suite()
    wide = build_suite(spec_for("wide"))
    for split in ("train", "test", "heldout"):
        assert [t.to_dict() for t in select(wide, split=split)] == [
            t.to_dict() for t in select(default, split=split)
        ]
    extra = select(wide, split="extra")
    assert extra and not select(default, split="extra")
    assert len({t.task_id for t in wide}) == len(wide)
    assert not [t for t in extra if t.heldout_template]
    # Extra instances share no parameters with the train or test instances of their template.
    used = {
        (t.intent_template_id, json.dumps(t.instantiation_dict, sort_keys=True))
        for t in select(wide, split="train") + select(wide, split="test")
    }
    assert not [
        t
        for t in extra
        if (t.intent_template_id, json.dumps(t.instantiation_dict, sort_keys=True)) in used
    ]
    per_template: dict[str, int] = {}
    for t in extra:
        per_template[t.extra["template"]] = per_template.get(t.extra["template"], 0) + 1
    assert max(per_template.values()) == WIDE_EXTRA
    # 'wide' is the test split plus the extra instances, through every way of asking for it.
    assert {t.task_id for t in select(wide, split="wide")} == {
        t.task_id for t in select(wide, split="test") + extra
    }
    # 'val' (the validation split) is the extra instances, under either name.
    assert [t.task_id for t in select(wide, split="val")] == [t.task_id for t in extra]
    assert [t.task_id for t in run_tasks("val", [], [], ["1-2"])] == [
        t.task_id for t in run_tasks("extra", [], [], ["1-2"])
    ]
    short = run_tasks("wide", [], [], ["1-2"])
    assert {t.split for t in short} == {"test", "extra"}
    assert len(short) > len(run_tasks("test", [], [], ["1-2"]))
    with pytest.raises(ValueError, match="wide, extra"):
        select(default, split="valid")
