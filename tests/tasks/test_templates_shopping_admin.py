"""The shopping_admin task templates: suite shape and intents; their experts and a wrong exit
in real Chromium: ``test_template_experts.py``."""

from __future__ import annotations

import string

from webagent_r1.sources.embedded.suite import SuiteSpec, build_suite, select
from webagent_r1.tasks.templates.shopping_admin import TEMPLATES


def _suite() -> list:
    return select(build_suite(SuiteSpec()), site="shopping_admin")


def test_template_ids_names_and_kinds() -> None:
    assert len(TEMPLATES) >= 13
    ids = [t.id for t in TEMPLATES]
    assert len(set(ids)) == len(ids) and all(200 <= i <= 299 for i in ids)
    assert all(t.name.startswith("shopping_admin.") for t in TEMPLATES)
    assert all(t.sites == ["shopping_admin"] and t.user == "admin" for t in TEMPLATES)
    assert sum(t.heldout for t in TEMPLATES) == 3
    assert {t.kind for t in TEMPLATES} == {"info", "nav", "change"}
    assert {t.kind for t in TEMPLATES if t.heldout} == {"info", "nav", "change"}
    assert sum(t.difficulty in ("6-9", "10+") for t in TEMPLATES) >= 2
    assert {"1-2", "3-5", "6-9", "10+"} <= {t.difficulty for t in TEMPLATES}


def test_every_template_yields_its_full_count_of_distinct_instances() -> None:
    spec = SuiteSpec()
    tasks = _suite()
    for t in TEMPLATES:
        mine = [x for x in tasks if x.extra["template"] == t.name]
        want = spec.n_heldout if t.heldout else spec.n_train + spec.n_test
        assert len(mine) == want, t.name
        assert len({x.intent for x in mine}) == want, f"{t.name}: duplicate intents"
        if t.heldout:
            assert all(x.split == "test" and x.heldout_template for x in mine)
        else:
            assert sum(x.split == "test" for x in mine) == spec.n_test


def test_intents_use_every_public_parameter() -> None:
    for t in TEMPLATES:
        fields = {f for _, f, _, _ in string.Formatter().parse(t.intent) if f}
        task = next(x for x in _suite() if x.extra["template"] == t.name)
        assert fields == set(task.instantiation_dict), t.name
        assert not any(k.startswith("_") for k in task.instantiation_dict)
