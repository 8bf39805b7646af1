"""The embedded suite is pinned: every template's metadata and every generated task (ids,
splits, intents, parameters, eval specs, start URLs) hash to a recorded value.

Refactoring the templates or the sites must leave this hash unchanged. A deliberate change to
the suite (a new template, a changed intent or eval spec) updates ``SUITE_SHA256`` in the same
commit, with the new value printed by the failing test.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from webagent_r1.sources.embedded.suite import all_templates, build_suite, spec_for

SUITE_SHA256 = "267e0fdd0a305f80f7e426755a4cc2e8f10cedaaa6261d0434a505a0394b42e9"
"""sha256 of ``exported_suite()`` as canonical JSON."""


def exported_suite() -> dict[str, Any]:
    """The templates' metadata, in registry order, and the wide suite's tasks (the default
    train and test splits plus the extra instances), in generation order."""
    templates = [
        {
            "id": t.id,
            "name": t.name,
            "sites": t.sites,
            "kind": t.kind,
            "intent": t.intent,
            "start_url": t.start_url,
            "user": t.user,
            "heldout": t.heldout,
            "difficulty": t.difficulty,
            "backend_site": t.backend_site,
            "backend_sites": t.backend_sites,
            "logins": t.logins,
            "extra": t.extra,
            "sample": t.sample.__name__,
            "expert": t.expert.__name__,
        }
        for t in all_templates()
    ]
    tasks = [t.to_dict() for t in build_suite(spec_for("wide"))]
    return {"templates": templates, "tasks": tasks}


def suite_digest() -> str:
    blob = json.dumps(exported_suite(), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def test_exported_suite_hash_is_unchanged() -> None:
    got = suite_digest()
    assert got == SUITE_SHA256, f"the embedded suite changed: sha256 {got}"


def test_wide_suite_contains_the_default_suite() -> None:
    # The hash covers the default suite too: its tasks are the wide suite's train and test ones.
    default = [t.to_dict() for t in build_suite()]
    wide = [t.to_dict() for t in build_suite(spec_for("wide")) if t.split != "extra"]
    assert default and default == wide
