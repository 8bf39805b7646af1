"""The loaders of user files (task files, trajectory files, configs) refuse bad input with their
own one-line error naming file, line and field: a fuzz list of known-bad files, and a property
test that no generated file makes a loader raise anything else."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_types import WEBARENA_ENTRY
from webagent_r1.config import ConfigError, load_config
from webagent_r1.errors import LoadError
from webagent_r1.rollout.trajectories import (
    TrajectoryFileError,
    read_trajectories,
    write_trajectories,
)
from webagent_r1.tasks import TaskError, load_tasks
from webagent_r1.types import Trajectory, Turn

DEEP = "[" * 100_000 + "]" * 100_000


def _traj_dict() -> dict[str, Any]:
    turn = Turn([5, 6], [7, 8], [-0.5, -0.25], "<answer>exit()</answer>", None)
    return Trajectory("t/1", 0, [turn], 1.0, "done", {"wall_s": 1.5}).to_dict()


def _with_turn(**patch: Any) -> dict[str, Any]:
    d = _traj_dict()
    d["turns"][0].update(patch)
    return d


def _one_line(e: BaseException) -> str:
    text = str(e)
    assert "\n" not in text and len(text) <= 1000, text
    return text


# --------------------------------------------------------------------------------------
# Task files
# --------------------------------------------------------------------------------------

TASK_CASES = [
    ({"task_id": [1, 2]}, "task_id must be an integer or a non-empty string"),
    ({"task_id": {"a": 1}}, "task_id must be an integer or a non-empty string"),
    ({"task_id": None}, "task_id must be an integer or a non-empty string, got None"),
    ({"task_id": True}, "task_id must be an integer or a non-empty string"),
    ({"task_id": " "}, "task_id must be an integer or a non-empty string"),
    ({"user": 5}, "user must be a string or null, got 5"),
    ({"require_login": "yes"}, "require_login must be true or false, got 'yes'"),
    ({"require_reset": 1}, "require_reset must be true or false"),
    ({"sites": ["moon"]}, "sites has unknown site"),
    ({"sites": "shopping"}, "sites must be a list of names"),
    ({"sites": [["shopping"]]}, r"sites\[0\] must be names"),
    ({"intent": 7}, "intent must be a non-empty string, got 7"),
    ({"start_url": None}, "start_url must be a string"),
    ({"eval": [1]}, "eval must be an object"),
    ({"instantiation_dict": [1]}, "instantiation_dict must be an object or null"),
    ({"intent_template_id": 1.5}, "intent_template_id must be an integer, a string or null"),
    ({"eval": {"eval_types": [["string_match"]]}}, "unknown eval type"),
]


@pytest.mark.parametrize(("patch", "message"), TASK_CASES)
@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_bad_task_fields_name_file_entry_and_field(
    tmp_path: Path, patch: dict, message: str, suffix: str
) -> None:
    p = tmp_path / f"tasks{suffix}"
    good, bad = {**WEBARENA_ENTRY, "task_id": 0}, {**WEBARENA_ENTRY, "task_id": 1, **patch}
    if suffix == ".jsonl":
        p.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        where = "tasks.jsonl:2: "
    else:
        p.write_text(json.dumps([good, bad]))
        where = r"tasks.json\[1\]: "
    with pytest.raises(TaskError, match=where + message) as e:
        load_tasks(p)
    _one_line(e.value)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'[{"intent": "caf\xe9"}]', "tasks.json:1: not UTF-8 text .byte 0xe9."),
        (b"\n\n\xff\xfe", "tasks.json:3: not UTF-8 text"),
        (DEEP.encode(), "nested deeper than 64"),
        (b"[" * 65 + b"]" * 65, "nested deeper than 64"),
        (b"1" * 5000, "unreadable JSON value"),
        (b'"just a string"', "expected a JSON list"),
        (b"[1]", "must be a JSON object"),
        (b"{oops", "not valid JSON"),
    ],
)
def test_bad_task_files_are_one_line_task_errors(tmp_path: Path, raw: bytes, message: str) -> None:
    p = tmp_path / "tasks.json"
    p.write_bytes(raw)
    with pytest.raises(TaskError, match=message) as e:
        load_tasks(p)
    _one_line(e.value)


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_task_files_with_a_byte_order_mark_load(tmp_path: Path, encoding: str) -> None:
    p = tmp_path / "tasks.json"
    p.write_bytes(json.dumps([{**WEBARENA_ENTRY, "intent": "Was kostet Kaffee?"}]).encode(encoding))
    [t] = load_tasks(p)
    assert t.intent == "Was kostet Kaffee?"


def test_every_embedded_site_is_a_known_task_site() -> None:
    from webagent_r1.sites import SITES
    from webagent_r1.tasks.io import KNOWN_SITES

    assert set(SITES) <= set(KNOWN_SITES)


# --------------------------------------------------------------------------------------
# Trajectory files
# --------------------------------------------------------------------------------------

TRAJECTORY_CASES = [
    (_with_turn(completion_logprobs=[float("nan"), -0.1]), r"completion_logprobs\[0\]"),
    (_with_turn(completion_logprobs=[-0.1, float("inf")]), r"completion_logprobs\[1\]"),
    (_with_turn(completion_logprobs=[-0.1, float("-inf")]), "finite log-probs"),
    (_with_turn(completion_logprobs=[-0.1, 0.5]), r"completion_logprobs\[1\] must be finite"),
    (_with_turn(completion_logprobs=[True, -0.1]), "got True"),
    (_with_turn(completion_logprobs=["-0.1", -0.1]), "got '-0.1'"),
    (_with_turn(prompt_ids=[1, True]), r"turn 0: prompt_ids\[1\] must be token ids"),
    (_with_turn(completion_ids=[1, -3]), r"completion_ids\[1\]"),
    (_with_turn(text=None), "turn 0: text must be a string"),
    (_with_turn(action=[1]), "turn 0: action must be an object or null"),
    (_with_turn(observation="page"), "turn 0: observation must be an object"),
    ({**_traj_dict(), "reward": "1"}, "reward must be 0 or 1, got '1'"),
    ({**_traj_dict(), "reward": True}, "reward must be 0 or 1, got True"),
    ({**_traj_dict(), "reward": float("nan")}, "reward must be 0 or 1, got nan"),
    ({**_traj_dict(), "task_id": [1]}, "task_id must be an integer or a non-empty string"),
    ({**_traj_dict(), "task_id": None}, "task_id must be"),
    ({**_traj_dict(), "group_id": {"g": 1}}, "group_id must be an integer or a string"),
    ({**_traj_dict(), "turns": {"0": 1}}, "turns must be a list"),
    ({**_traj_dict(), "turns": [5]}, r"turns\[0\] must be objects"),
    ({**_traj_dict(), "status": ["done"]}, "status must be one of"),
    ({**_traj_dict(), "info": "x"}, "info must be an object"),
]


@pytest.mark.parametrize(("d", "message"), TRAJECTORY_CASES)
def test_bad_trajectory_fields_name_file_line_and_field(
    tmp_path: Path, d: dict, message: str
) -> None:
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(_traj_dict()) + "\n" + json.dumps(d) + "\n")
    with pytest.raises(TrajectoryFileError, match=f"t.jsonl:2: .*{message}") as e:
        read_trajectories(p)
    _one_line(e.value)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (json.dumps(_traj_dict()).replace("exit", "caf\u00e9").encode("latin-1"), "t.jsonl:1: not"),
        (b"\n" + DEEP.encode(), "t.jsonl:2: JSON nested deeper"),
        (
            b'{"task_id": 1, "group_id": 0, "turns": [], "reward": ' + b"9" * 5000 + b"}",
            "t.jsonl:1",
        ),
    ],
)
def test_bad_trajectory_files_are_one_line_errors(tmp_path: Path, raw: bytes, message: str) -> None:
    p = tmp_path / "t.jsonl"
    p.write_bytes(raw)
    with pytest.raises(TrajectoryFileError, match=message) as e:
        read_trajectories(p)
    _one_line(e.value)


def test_writing_a_non_finite_log_prob_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    turn = Turn([5], [7], [math.nan], "", None)
    p = tmp_path / "t.jsonl"
    with pytest.raises(TrajectoryFileError, match="completion_logprobs"):
        write_trajectories([Trajectory("t", 0, [turn], 0.0)], p)
    assert p.read_text() == ""


def test_nan_outside_the_training_fields_still_loads(tmp_path: Path) -> None:
    """``info`` is free-form (the viewer shows NaN as empty): only training fields are strict."""
    d = {**_traj_dict(), "info": {"wall_s": float("nan")}}
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(d) + "\n")
    [t] = read_trajectories(p)
    assert math.isnan(t.info["wall_s"])


# --------------------------------------------------------------------------------------
# Property test: whatever the bytes, a loader raises its own error or returns
# --------------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _mutated(base: dict[str, Any], data: st.DataObject) -> dict[str, Any]:
    """``base`` with one field (possibly nested in a turn) replaced by any JSON value."""
    d = json.loads(json.dumps(base))
    target = d
    if "turns" in d and d["turns"] and data.draw(st.booleans()):
        target = d["turns"][0]
    key = data.draw(st.sampled_from(sorted(target) + ["unknown_key"]))
    target[key] = data.draw(_json)
    return d


def _encoded(text: str, data: st.DataObject) -> bytes:
    raw = text.encode(
        data.draw(st.sampled_from(["utf-8", "utf-16", "latin-1", "utf-16-le"])), errors="replace"
    )
    if data.draw(st.booleans()):  # damage it: drop or flip a byte
        i = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        raw = raw[:i] + bytes([data.draw(st.integers(0, 255))]) + raw[i + 1 :]
    return raw


SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@SETTINGS
@given(data=st.data())
def test_no_task_file_makes_the_loader_raise_anything_but_task_error(
    tmp_path: Path, data: st.DataObject
) -> None:
    entries = [_mutated(WEBARENA_ENTRY, data) if data.draw(st.booleans()) else data.draw(_json)]
    suffix = data.draw(st.sampled_from([".json", ".jsonl"]))
    text = "\n".join(json.dumps(e) for e in entries) if suffix == ".jsonl" else json.dumps(entries)
    p = tmp_path / f"tasks{suffix}"
    p.write_bytes(_encoded(text, data))
    try:
        load_tasks(p)
    except TaskError as e:
        _one_line(e)


@SETTINGS
@given(data=st.data())
def test_no_trajectory_file_makes_the_loader_raise_anything_but_its_error(
    tmp_path: Path, data: st.DataObject
) -> None:
    d = _mutated(_traj_dict(), data) if data.draw(st.booleans()) else data.draw(_json)
    p = tmp_path / "t.jsonl"
    p.write_bytes(_encoded(json.dumps(d) + "\n", data))
    try:
        for t in read_trajectories(p):
            assert all(
                math.isfinite(x) and x <= 1e-4 for u in t.turns for x in u.completion_logprobs
            )
            assert t.reward in (0.0, 1.0) and type(t.reward) is float
    except TrajectoryFileError as e:
        _one_line(e)


def _recipe_keys() -> list[tuple[str, ...]]:
    from webagent_r1.config import Config, to_dict

    def leaves(d: dict, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        return [
            k
            for key, v in d.items()
            for k in (leaves(v, (*prefix, key)) if isinstance(v, dict) else [(*prefix, key)])
        ]

    return leaves(to_dict(Config()))


@SETTINGS
@given(data=st.data())
def test_no_recipe_file_makes_the_config_loader_raise_anything_but_config_error(
    tmp_path: Path, data: st.DataObject
) -> None:
    import yaml

    recipe: dict[str, Any] = {}
    for path in data.draw(st.lists(st.sampled_from(_recipe_keys()), max_size=4)):
        node = recipe
        for part in path[:-1]:
            node = node.setdefault(part, {}) if isinstance(node.get(part, {}), dict) else {}
        node[path[-1]] = data.draw(_json)
    text = yaml.safe_dump(recipe) if data.draw(st.booleans()) else data.draw(st.text(max_size=80))
    p = tmp_path / "recipe.yaml"
    p.write_bytes(_encoded(text, data))
    try:
        load_config(p)
    except ConfigError as e:
        _one_line(e)


def test_loader_errors_share_one_base_class() -> None:
    assert issubclass(TaskError, LoadError) and issubclass(TrajectoryFileError, LoadError)
    assert issubclass(ConfigError, LoadError)
