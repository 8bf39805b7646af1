"""The map task templates: well-formed and fully instantiable; their experts and a wrong exit
in real Chromium: ``test_template_experts.py``."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from webagent_r1.grading.embedded import url_matches
from webagent_r1.sites import SITES
from webagent_r1.sources.embedded.suite import SuiteSpec, build_suite, instantiate, public_params
from webagent_r1.tasks.templates.map import TEMPLATES, display_meters, display_minutes


@pytest.fixture(scope="module")
def pristine() -> Iterator[sqlite3.Connection]:
    path = SITES["map"].backend.ensure_pristine()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


def test_templates_are_well_formed() -> None:
    ids = [t.id for t in TEMPLATES]
    assert len(TEMPLATES) >= 12
    assert len(set(ids)) == len(ids) and all(500 <= i <= 549 for i in ids)
    assert all(t.name.startswith("map.") and t.sites == ["map"] for t in TEMPLATES)
    assert all(t.user is None for t in TEMPLATES)  # the map needs no login
    assert sum(t.heldout for t in TEMPLATES) == 4
    # no state to change on the map: questions and pages to reach
    assert {t.kind for t in TEMPLATES} == {"info", "nav"}
    assert {t.kind for t in TEMPLATES if t.heldout} == {"info", "nav"}
    assert {t.difficulty for t in TEMPLATES} == {"1-2", "3-5", "6-9", "10+"}


def test_display_parsers() -> None:
    assert display_minutes("25 min") == 25 and display_minutes("1 h 05 min") == 65
    assert display_meters("850 m") == 850 and display_meters("2.3 km") == 2300
    with pytest.raises(ValueError):
        display_minutes("soon")


def test_every_template_yields_its_full_count(pristine: sqlite3.Connection) -> None:
    spec = SuiteSpec()
    eval_types = set()
    for t in TEMPLATES:
        got = instantiate(t, pristine, spec)
        want = spec.n_heldout if t.heldout else spec.n_train + spec.n_test
        assert len(got) == want, t.name
        for _, params in got:
            intent = t.intent.format(**public_params(params))
            assert "{" not in intent, intent
            ev = t.evaluation(params)
            eval_types |= set(ev["eval_types"])
            if "url_match" in ev:
                assert ev["reference_url"].startswith("__MAP__/")
    assert eval_types == {"string_match", "url_match", "program_html"}


def test_directions_reference_urls_match_the_sites_redirect() -> None:
    """The reference URL is the canonical route URL the directions form redirects to."""
    base = "http://127.0.0.1:3000"
    task = next(t for t in build_suite(sites=["map"]) if t.extra["template"] == "map.directions")
    ref = task.eval["reference_url"].replace("__MAP__", base)
    engine, route = ref.split("?", 1)[1].split("&")
    final = f"{base}/directions?{engine}&route={route.split('=', 1)[1].replace(',', '%2C')}"
    assert url_matches(final.replace(";", "%3B"), ref)
    other = "fossgis_osrm_car" if "foot" in engine else "fossgis_osrm_foot"
    assert not url_matches(final.replace(engine.split("=")[1], other), ref)
