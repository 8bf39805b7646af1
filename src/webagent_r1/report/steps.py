"""The M-GRPO steps of a run, one row each: what was rolled out and what was trained on.

A row joins the step's line of ``rl/metrics.jsonl`` (the last one logged for the step wins,
as after ``--resume``) with its rollout files. The rollouts of the update logged at step S are
in ``rl/rollouts/step-(S-1)-rank*.jsonl`` (every rank). From the rollouts: successes of the
scored episodes (environment errors left out), the mean turns of successes and of failures,
how many episodes ended by themselves (the agent's ``exit`` or the page ending the episode,
on any turn, the last one included) rather than being cut off at the turn limit, and how many
successes were cut off there (the task's end state reached, but the agent never said it was
done). From the metrics: the groups trained on (``train/groups_used``: those whose rewards
differ, and under ``rl.drop_equal_groups: false`` the others too) out of the groups rolled
out, the RMS of the update, the trained turns in GiGPO's step groups of more than one turn
(``rl.advantage: gigpo``) and the wall times.

A step without scored rollouts (files deleted, a run from before they were kept, or only
environment errors) takes its success and turns from the metrics (``rollout/success``,
``rollout/turns_success``, ``rollout/turns_failure``); what neither has is shown as ``–``.
Every rollout file is parsed (they hold every turn's token ids): on a long run this is most
of the report's time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webagent_r1.errors import LoadError
from webagent_r1.report.load import GROUP_KEYS, RunData, num, read_episode_stats
from webagent_r1.report.markdown import MISSING, duration, md_table

__all__ = ["StepRow", "step_rows", "steps_markdown"]


@dataclass
class StepRow:
    """One M-GRPO step (None: not known)."""

    step: int
    episodes: int | None = None
    """Scored rollout episodes (environment errors left out)."""
    successes: int | None = None
    success_rate: float | None = None
    """``successes / episodes``, or ``rollout/success`` without rollout files."""
    turns_success: float | None = None
    turns_failure: float | None = None
    ended: int | None = None
    """Episodes that ended by themselves, not cut off at the turn limit."""
    successes_at_limit: int | None = None
    """Successes cut off at the turn limit (never exited)."""
    groups_used: int | None = None
    groups: int | None = None
    step_group_turns: int | None = None
    step_group_frac: float | None = None
    update_rms: float | None = None
    rollout_s: float | None = None
    update_s: float | None = None
    step_s: float | None = None


def _mean(xs: list[int]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def step_rows(data: RunData) -> list[StepRow]:
    """One row per M-GRPO step found in the metrics or the rollout files, by step.

    A rollout file that cannot be read, or lines of it that are not trajectories, are named
    in ``data.problems``.
    """
    metrics: dict[int, dict[str, Any]] = {}
    for r in data.rl_metrics:
        step = int(r["step"])
        if step >= 1 and any(k.startswith(("train/", "rollout/")) for k in r):
            metrics[step] = r  # the last logged wins (a resumed step replaces the dead run's)
    files: dict[int, list[Path]] = {}
    for s, _rank, path in data.rollout_files:
        files.setdefault(s + 1, []).append(path)
    rows = []
    for step in sorted(set(metrics) | set(files)):
        m = metrics.get(step, {})
        row = StepRow(step=step)
        turns: list[int] = []
        success: list[bool] = []
        ended: list[bool] = []
        for path in files.get(step, []):
            try:
                st = read_episode_stats(path, "")
            except (OSError, LoadError) as e:
                data.problems.append(f"{data.rel(path)}: unreadable ({e}); skipped")
                continue
            if st.bad_lines:
                data.problems.append(f"{data.rel(path)}: skipped {st.bad_note}")
            turns += st.turns
            success += st.success
            ended += st.ended
        if success:
            row.episodes = len(success)
            row.successes = sum(success)
            row.success_rate = row.successes / row.episodes
            row.turns_success = _mean([t for t, ok in zip(turns, success, strict=True) if ok])
            row.turns_failure = _mean([t for t, ok in zip(turns, success, strict=True) if not ok])
            row.ended = sum(ended)
            row.successes_at_limit = sum(ok and not e for ok, e in zip(success, ended, strict=True))
        else:
            row.success_rate = num(m.get("rollout/success"))
            row.turns_success = num(m.get("rollout/turns_success"))
            row.turns_failure = num(m.get("rollout/turns_failure"))
        counts = [num(m.get(k)) for k in GROUP_KEYS]
        if counts[0] is not None:
            row.groups_used = int(counts[0])
            row.groups = int(sum(c or 0 for c in counts))
        if (v := num(m.get("train/step_group_turns"))) is not None:
            row.step_group_turns = int(v)
            row.step_group_frac = num(m.get("train/step_group_frac"))
        row.update_rms = num(m.get("train/update_rms"))
        row.rollout_s = num(m.get("rollout/wall_s"))
        row.update_s = num(m.get("train/update_s"))
        row.step_s = num(m.get("train/step_s"))
        rows.append(row)
    return rows


def _f(x: float | None, fmt: str) -> str:
    return MISSING if x is None else format(x, fmt)


def _success_cell(r: StepRow) -> str:
    if r.episodes is not None and r.successes is not None:
        return f"{r.successes}/{r.episodes}"
    return MISSING if r.success_rate is None else f"{100 * r.success_rate:.1f}%"


def steps_markdown(rows: list[StepRow]) -> list[str]:
    """The section ``## M-GRPO steps``: the table and a line of totals (none without rows)."""
    if not rows:
        return []
    gigpo = any(r.step_group_turns is not None for r in rows)
    header = [
        "Step",
        "Rollout success",
        "Groups trained on",
        "Mean turns, successes / failures",
        "Ended by itself",
        "Successes cut off at the limit",
        *(["Turns in step groups > 1"] if gigpo else []),
        "Update RMS",
        "Rollout",
        "Update",
        "Step",
    ]
    body = []
    for r in rows:
        groups = MISSING if r.groups_used is None else f"{r.groups_used}/{r.groups}"
        turns = f"{_f(r.turns_success, '.1f')} / {_f(r.turns_failure, '.1f')}"
        ended = MISSING if r.ended is None else f"{r.ended}/{r.episodes}"
        at_limit = MISSING if r.successes_at_limit is None else str(r.successes_at_limit)
        sg = []
        if gigpo:
            sg = [MISSING]
            if r.step_group_turns is not None:
                frac = "" if r.step_group_frac is None else f" ({100 * r.step_group_frac:.0f}%)"
                sg = [f"{r.step_group_turns}{frac}"]
        body.append(
            [
                str(r.step),
                _success_cell(r),
                groups,
                turns,
                ended,
                at_limit,
                *sg,
                _f(r.update_rms, ".1e"),
                duration(r.rollout_s),
                duration(r.update_s),
                duration(r.step_s),
            ]
        )
    lines = ["## M-GRPO steps", "", *md_table(header, body), ""]
    counted = [r for r in rows if r.episodes is not None and r.successes is not None]
    totals = []
    if counted:
        ok = sum(r.successes or 0 for r in counted)
        n = sum(r.episodes or 0 for r in counted)
        rate = f" ({100 * ok / n:.1f}%)" if n else ""
        totals.append(f"rollout success {ok}/{n}{rate} over {len(counted)} step(s) with rollouts")
        at_limit = sum(r.successes_at_limit or 0 for r in counted)
        totals.append(f"{at_limit} success(es) cut off at the turn limit")
    used = [r for r in rows if r.groups_used is not None]
    if used:
        totals.append(
            f"{sum(r.groups_used or 0 for r in used)} of {sum(r.groups or 0 for r in used)} "
            "groups trained on"
        )
    timed = [r.step_s for r in rows if r.step_s is not None]
    if timed:
        totals.append(f"{duration(sum(timed))} in {len(timed)} timed step(s)")
    if totals:
        lines += ["Totals: " + "; ".join(totals) + ".", ""]
    lines += [
        "Rollout columns from `rl/rollouts/` (a step's episodes, environment errors left out; "
        "an episode ends by itself with the agent's `exit` or the page ending it; a success cut "
        "off at the limit reached the task's end state and never exited); groups, update and "
        "times from `rl/metrics.jsonl`. The groups trained on are those whose rewards differ "
        "(with `rl.drop_equal_groups: false`, all of them).",
        "",
    ]
    return lines
