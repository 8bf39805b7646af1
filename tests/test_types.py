"""Task / Trajectory (de)serialisation, WebArena compatibility."""

from __future__ import annotations

import pytest

from webagent_r1.types import Action, Task, Trajectory, Turn

WEBARENA_ENTRY = {
    "sites": ["shopping_admin"],
    "task_id": 0,
    "require_login": True,
    "storage_state": "./.auth/shopping_admin_state.json",
    "start_url": "__SHOPPING_ADMIN__",
    "geolocation": None,
    "intent_template": "What is the top-{{n}} best-selling product in {{year}}",
    "instantiation_dict": {"n": 1, "year": 2022},
    "intent": "What is the top-1 best-selling product in 2022",
    "require_reset": False,
    "eval": {
        "eval_types": ["string_match"],
        "reference_answers": {"exact_match": "Quest Lumaflex™ Band"},
        "reference_url": "",
        "program_html": [],
        "string_note": "",
    },
    "intent_template_id": 279,
    "old_task_id": 0,  # a field we do not know: kept
}


def test_webarena_entry_round_trips() -> None:
    t = Task.from_dict(WEBARENA_ENTRY)
    assert t.task_id == 0 and t.sites == ["shopping_admin"]
    assert t.extra == {"old_task_id": 0}
    out = t.to_dict()
    for k, v in WEBARENA_ENTRY.items():
        assert out[k] == v


def test_task_missing_fields() -> None:
    with pytest.raises(ValueError, match="intent"):
        Task.from_dict({"task_id": 1, "start_url": "x"})


def test_trajectory_round_trip() -> None:
    turn = Turn(
        prompt_ids=[1, 2, 3],
        completion_ids=[4, 5],
        completion_logprobs=[-0.1, -0.2],
        text='<answer>exit(message="x")</answer>',
        action=Action(kind="exit", argument="x"),
        timings={"generate_s": 0.1},
    )
    tr = Trajectory(task_id="t1", group_id=3, turns=[turn], reward=1.0, status="done")
    back = Trajectory.from_dict(tr.to_dict())
    assert back == tr
