"""Trajectory files (JSONL, one trajectory a line, exact token ids) and training samples.

``write_trajectories`` / ``read_trajectories`` store ``Trajectory.to_dict()`` one per line;
reading validates every line and names the line of the first problem. ``turn_samples`` turns
a trajectory into one training sample per turn (docs/design.md, "Context compression": each turn
has its own prompt), concatenating the stored prompt and completion ids exactly as they were
sampled: generated text is never re-tokenised.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webagent_r1.errors import LoadError
from webagent_r1.inputs import MAX_INT, Fields, parse_json, read_jsonl, show
from webagent_r1.types import Trajectory, Turn

__all__ = [
    "parse_trajectory_line",
    "read_trajectory_records",
    "trajectory_from_value",
    "IGNORE_INDEX",
    "STATUSES",
    "Sample",
    "TrajectoryFileError",
    "cut_to_budget",
    "read_trajectories",
    "turn_samples",
    "validate_trajectory",
    "write_trajectories",
]

STATUSES = ("done", "max_turns", "env_error")
"""Valid ``Trajectory.status`` values."""
IGNORE_INDEX = -100
"""Label of a position that carries no loss (the prompt), as in PyTorch's cross entropy."""


LOGPROB_SLACK = 1e-4
"""Largest positive log-prob accepted (rounding of a probability of 1); more is corrupt."""


class TrajectoryFileError(LoadError):
    """A trajectory file (or object) is malformed; the message names the line and the field."""


MAX_TOKEN_ID = 2**31 - 1
"""Largest token id a file may hold: every tokenizer's vocabulary is far smaller, and an id of
2**70 would pass an integer check and fail later, when a tensor is made of it."""


def _is_id(i: Any) -> bool:
    return isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= MAX_INT


def _is_token_id(i: Any) -> bool:
    return isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= MAX_TOKEN_ID


_INT = {int}
_NUMBER = {int, float}


def _is_ids(x: Any) -> bool:
    # builtins over the whole list (a file holds millions of ids); type() is not bool's int
    return (
        isinstance(x, list)
        and set(map(type, x)) <= _INT
        and (not x or (min(x) >= 0 and max(x) <= MAX_TOKEN_ID))
    )


def _are_logprobs(x: Any) -> bool:
    """Every item a finite number <= ``LOGPROB_SLACK`` (the fast whole-list form)."""
    return (
        isinstance(x, list)
        and set(map(type, x)) <= _NUMBER
        and all(map(math.isfinite, x))
        and (not x or max(x) <= LOGPROB_SLACK)
    )


def _is_logprob(x: Any) -> bool:
    """A finite number <= 0 (up to rounding): NaN or +inf would poison the ratio of M-GRPO."""
    return (
        isinstance(x, (int, float))
        and not isinstance(x, bool)
        and math.isfinite(x)
        and x <= LOGPROB_SLACK
    )


_TURN_FIELDS = frozenset(f.name for f in dataclasses.fields(Turn))


def _check_raw(d: Any) -> None:
    """Types of a trajectory line's JSON before ``Trajectory.from_dict`` converts any of it.

    ``from_dict`` calls ``float(reward)`` (which reads ``"1"`` as 1.0) and passes turns to
    dataclasses unchecked; checking the raw values first refuses what a writer never writes.
    """
    f = Fields(d, "", TrajectoryFileError)
    f.id("task_id")
    f.check(
        "group_id",
        lambda v: isinstance(v, (int, str)) and v is not True and v is not False,
        "an integer or a string",
    )
    f.number("reward", choices=(0.0, 1.0), default=0.0)
    f.one_of("status", STATUSES, default="done")
    f.mapping("info", default={})
    turns = f.items("turns", lambda t: isinstance(t, dict), "objects (one per turn)")
    for k, t in enumerate(turns):
        tf = Fields(t, "", TrajectoryFileError, prefix=f"turn {k}: ")
        # the fast whole-list check first; the item-by-item one only to name a bad item
        for key in ("prompt_ids", "completion_ids"):
            if not _is_ids(t.get(key)):
                tf.items(key, _is_token_id, f"token ids (integers in [0, {MAX_TOKEN_ID}])")
        if not _are_logprobs(t.get("completion_logprobs")):
            tf.items("completion_logprobs", _is_logprob, f"finite log-probs <= {LOGPROB_SLACK:g}")
        tf.text("text")
        tf.check("action", lambda v: v is None or isinstance(v, dict), "an object or null")
        tf.check(
            "weight_version",
            lambda v: v is None or _is_id(v),
            "a non-negative integer or null",
            default=None,
        )
        tf.optional_text("state_key")
        unknown = sorted(set(t) - _TURN_FIELDS, key=str)
        if unknown:
            raise TrajectoryFileError(
                f"not a trajectory: turn {k} has unknown field {show(unknown[0])} (known: "
                f"{', '.join(sorted(_TURN_FIELDS))})"
            )
        if isinstance(t.get("action"), dict):
            af = Fields(t["action"], "", TrajectoryFileError, prefix=f"turn {k}: action.")
            af.text("kind", nonempty=True)
            for key in ("element", "argument"):
                af.optional_text(key)
            af.text("raw", default="")
            extra = sorted(set(t["action"]) - {"kind", "element", "argument", "raw"}, key=str)
            if extra:
                raise TrajectoryFileError(
                    f"not a trajectory: turn {k}: action has unknown field {show(extra[0])}"
                )
        tf.mapping("observation", default={})
        tf.optional_text("error")
        tf.mapping("timings", default={})


def validate_trajectory(traj: Trajectory) -> None:
    """Check the invariants training relies on.

    Raises:
        TrajectoryFileError: reward not in {0, 1}, unknown status, ids not non-negative ints,
            a turn without completion ids, or one log-prob per completion id violated.
    """
    if traj.reward not in (0.0, 1.0):
        raise TrajectoryFileError(f"reward must be 0 or 1, got {show(traj.reward)}")
    if traj.status not in STATUSES:
        raise TrajectoryFileError(f"status must be one of {STATUSES}, got {show(traj.status)}")
    for k, turn in enumerate(traj.turns):
        if not _is_ids(turn.prompt_ids) or not turn.prompt_ids:
            raise TrajectoryFileError(f"turn {k}: prompt_ids must be a non-empty list of ids")
        if not _is_ids(turn.completion_ids) or not turn.completion_ids:
            raise TrajectoryFileError(f"turn {k}: completion_ids must be a non-empty list of ids")
        if len(turn.completion_logprobs) != len(turn.completion_ids):
            raise TrajectoryFileError(
                f"turn {k}: {len(turn.completion_logprobs)} logprobs for "
                f"{len(turn.completion_ids)} completion ids (need one each)"
            )
        bad = (
            []
            if _are_logprobs(turn.completion_logprobs)
            else [x for x in turn.completion_logprobs if not _is_logprob(x)]
        )
        if bad:
            raise TrajectoryFileError(
                f"turn {k}: completion_logprobs must be finite numbers <= {LOGPROB_SLACK:g} "
                f"(log-probabilities), got {show(bad[0])}"
            )
        v = turn.weight_version
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise TrajectoryFileError(
                f"turn {k}: weight_version must be a non-negative integer or null, got {show(v)}"
            )
        if turn.state_key is not None and not isinstance(turn.state_key, str):
            raise TrajectoryFileError(
                f"turn {k}: state_key must be a string or null, got {show(turn.state_key)}"
            )


def write_trajectories(trajs: Iterable[Trajectory], path: str | Path, append: bool = False) -> int:
    """Write trajectories as JSONL (parent folders created).

    Args:
        trajs: the trajectories (each validated first).
        path: the file.
        append: add to the file instead of replacing it.

    Returns:
        How many were written.

    Raises:
        TrajectoryFileError: a trajectory breaks an invariant (nothing of it is written).
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("a" if append else "w") as f:
        for traj in trajs:
            validate_trajectory(traj)
            f.write(json.dumps(traj.to_dict(), ensure_ascii=False) + "\n")
            n += 1
    return n


def parse_trajectory_line(line: str) -> Trajectory:
    """One JSONL line as a validated ``Trajectory``.

    Raises:
        TrajectoryFileError: what is wrong with the line (without its location).
    """
    return trajectory_from_value(parse_json(line, "", TrajectoryFileError))


def trajectory_from_value(d: Any) -> Trajectory:
    """One parsed JSONL record as a validated ``Trajectory`` (``read_jsonl``'s ``convert``).

    Raises:
        TrajectoryFileError: what is wrong with the record (without its location).
    """
    try:
        if not isinstance(d, dict):
            raise TrajectoryFileError("a line must hold one JSON object")
        missing = [k for k in ("task_id", "group_id", "turns") if k not in d]
        if missing:
            raise TrajectoryFileError(f"missing field(s) {missing}")
        _check_raw(d)
        traj = Trajectory.from_dict(d)
        validate_trajectory(traj)
    except TrajectoryFileError:
        raise
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        raise TrajectoryFileError(f"not a trajectory: {show(str(e), 120)}") from None
    return traj


def read_trajectories(path: str | Path) -> list[Trajectory]:
    """Read and validate a JSONL trajectory file (blank lines are skipped).

    Raises:
        FileNotFoundError: no such file.
        TrajectoryFileError: a malformed line: ``<path>:<line>: <what is wrong>``.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"trajectory file {str(p)!r} not found")
    return [t for _, t in read_trajectory_records(p)]


def read_trajectory_records(
    path: str | Path, skipped: list[str] | None = None
) -> list[tuple[int, Trajectory]]:
    """``(line number, trajectory)`` of a JSONL trajectory file, read by ``read_jsonl``.

    Args:
        path: the file.
        skipped: None: a bad line raises; a list: each bad line's one-line error
            (``file:line: …``) is appended and the line left out.

    Raises:
        TrajectoryFileError: the file is missing or not text, or (without ``skipped``) a line
            is malformed: ``<path>:<line>: <what is wrong>``.
    """
    return read_jsonl(
        path, TrajectoryFileError, "trajectory file", trajectory_from_value, skipped=skipped
    )


@dataclass
class Sample:
    """One turn as a training sequence: prompt then completion, loss on the completion only.

    All lists have the same length T = len(prompt_ids) + len(completion_ids).
    """

    input_ids: list[int]
    """prompt_ids + completion_ids, exactly as stored."""
    labels: list[int]
    """``IGNORE_INDEX`` on prompt positions, the completion ids after."""
    completion_mask: list[int]
    """1 on completion positions (where the loss is taken), 0 on the prompt."""
    old_logprobs: list[float]
    """The sampler's log-prob of each completion id (len = number of completion ids)."""
    prompt_len: int
    """Number of prompt positions."""
    advantage: float = 0.0
    """The turn's advantage (placeholder: set by the trainer; the trajectory's for every turn,
    or per turn with ``rl.advantage: gigpo``)."""
    task_id: int | str = ""
    group_id: int | str = ""
    turn_index: int = 0
    num_turns: int = 1
    """Turns of the trajectory (for M-GRPO's 1/|τ| normalisation)."""


def turn_samples(traj: Trajectory, advantage: float = 0.0) -> list[Sample]:
    """One training sample per turn of ``traj``, from its stored ids only.

    Args:
        traj: a trajectory (any status; callers drop ``env_error`` ones).
        advantage: value put in every sample's ``advantage``.

    Returns:
        The samples, in turn order.
    """
    out = []
    for k, turn in enumerate(traj.turns):
        p, c = list(turn.prompt_ids), list(turn.completion_ids)
        out.append(
            Sample(
                input_ids=p + c,
                labels=[IGNORE_INDEX] * len(p) + c,
                completion_mask=[0] * len(p) + [1] * len(c),
                old_logprobs=list(turn.completion_logprobs),
                prompt_len=len(p),
                advantage=advantage,
                task_id=traj.task_id,
                group_id=traj.group_id,
                turn_index=k,
                num_turns=len(traj.turns),
            )
        )
    return out


def cut_to_budget(traj: Trajectory, max_turns: int) -> Trajectory:
    """The episode as a budget of ``max_turns`` turns would have ended it.

    The prompt never states the budget, so up to turn ``max_turns`` an episode of a longer
    budget is the one a ``max_turns`` budget runs (the same prompts, the same per-turn seeds);
    what it does not show is the grade of the state the shorter budget would have stopped
    in, which the env records at the turns of ``env.grade_at_turns`` (``info["graded_at"]``).

    An episode that ended within ``max_turns`` turns is returned as it is, and so is one whose
    env error came before turn ``max_turns`` ended. A longer one becomes its first
    ``max_turns`` turns, status ``max_turns``, with the recorded grade; without a grade (not
    recorded, or a grader fault) it becomes an env error, never a failure.
    """
    n = len(traj.turns)
    if n <= max_turns and traj.status != "env_error":
        return traj
    grade = traj.info.get("graded_at", {}).get(str(max_turns))
    if n < max_turns:  # an env error before the budget ran out
        return traj
    drop = ("answer", "explanation", "error", "answer_shown")
    info = {k: v for k, v in traj.info.items() if k not in drop}
    info["cut_from_turns"] = n
    if grade is not None and grade.get("reward") is not None:
        info["explanation"] = grade.get("explanation", "")
        return dataclasses.replace(
            traj,
            turns=traj.turns[:max_turns],
            reward=float(grade["reward"]),
            status="max_turns",
            info=info,
        )
    why = grade.get("explanation") if grade else None
    if why is None and traj.status == "env_error":  # the error came in turn max_turns
        why = traj.info.get("error")
    info["error"] = why or f"the episode was not graded at turn {max_turns}"
    return dataclasses.replace(
        traj, turns=traj.turns[:max_turns], reward=0.0, status="env_error", info=info
    )
