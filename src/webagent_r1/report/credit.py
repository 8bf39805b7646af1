"""Where a run's M-GRPO credit went: each trained turn's share of the policy gradient, summed
by the kind of action the turn took and by template.

At the ratio 1 (the first update of a batch) the loss gives every token of turn j of
trajectory i the coefficient w_t · A_ij: ``w_t`` the normaliser's weight (``rl.normalization``,
``algos/mgrpo.py``) and ``A_ij`` the turn's advantage (``rl.advantage``: the episode's group
advantage, plus GiGPO's step-level term). The turn's *credit* is that coefficient summed over its
tokens, so a positive credit raises the probability of the whole action and a negative one
lowers it. With episode advantages and ``mgrpo`` weights, a step's positive and negative
credit cancel (advantages are centred within each group and every trajectory weighs 1/G);
what matters is where each lands. "exit has net credit -1.3" says
that the update pushed exits down on balance; a drift toward exiting early then comes from
somewhere else (mass taken from other actions).

The credit is recomputed from the rollouts a run saved (``rl/rollouts/step-S-rankR.jsonl``)
with the trainer's own functions (``train.rl.build_rl_batch`` and ``NORMALIZERS``) and the
settings given, so the same rollouts can be read under another advantage or normalisation.
A step's groups are rebuilt from the trajectories' ``(task_id, group_id)``; with several ranks
each rank's file is its own batch, as each process normalised its own share (``n_traj`` etc.
are summed over processes in training, so multi-process credits are exact only up to that
common factor).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from webagent_r1.config import Config
from webagent_r1.report.failures import template_of
from webagent_r1.report.load import ReportError, load_run, scan_trajectories
from webagent_r1.rollout.collect import Group
from webagent_r1.types import Trajectory, Turn

__all__ = ["INVALID", "CreditSum", "CreditTable", "action_kind", "credit_table", "run_credit"]

INVALID = "invalid"
"""Kind of a turn whose action the parser refused (``Turn.action`` is None)."""


def action_kind(turn: Turn) -> str:
    """The turn's action kind (``Click``, ``Type``, ``exit`` …) or ``INVALID``."""
    return INVALID if turn.action is None else turn.action.kind


@dataclass
class CreditSum:
    """Credit of a set of turns."""

    turns: int = 0
    positive: float = 0.0
    """Sum of the positive credits."""
    negative: float = 0.0
    """Sum of the negative credits (<= 0)."""

    @property
    def net(self) -> float:
        """positive + negative."""
        return self.positive + self.negative

    def add(self, credit: float) -> None:
        """Count one turn of this credit."""
        self.turns += 1
        if credit > 0:
            self.positive += credit
        elif credit < 0:
            self.negative += credit


@dataclass
class CreditTable:
    """Credit per action kind, overall and per template, over a run's steps."""

    by_kind: dict[str, CreditSum] = field(default_factory=lambda: defaultdict(CreditSum))
    by_template: dict[str, dict[str, CreditSum]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(CreditSum))
    )
    steps: int = 0
    groups_used: int = 0
    groups_skipped: int = 0
    """Groups that gave no gradient: equal rewards (with ``rl.drop_equal_groups``) or fewer
    than two usable trajectories."""

    @property
    def total(self) -> CreditSum:
        """All kinds together."""
        out = CreditSum()
        for c in self.by_kind.values():
            out.turns += c.turns
            out.positive += c.positive
            out.negative += c.negative
        return out

    def to_dict(self) -> dict:
        """JSON-ready: the sums per kind and per template."""

        def rows(d: dict[str, CreditSum]) -> dict:
            return {
                k: {"turns": c.turns, "positive": c.positive, "negative": c.negative, "net": c.net}
                for k, c in sorted(d.items())
            }

        return {
            "steps": self.steps,
            "groups_used": self.groups_used,
            "groups_skipped": self.groups_skipped,
            "by_kind": rows(self.by_kind),
            "by_template": {t: rows(d) for t, d in sorted(self.by_template.items())},
        }


def _groups(trajs: Iterable[Trajectory]) -> list[Group]:
    """One group per ``(task_id, group_id)``, members in file order."""
    members: dict[tuple[int | str, int | str], list[Trajectory]] = defaultdict(list)
    for t in trajs:
        members[(t.task_id, t.group_id)].append(t)
    # build_rl_batch reads only the members; the task is not needed to weigh them
    return [Group(task=None, trajectories=m) for m in members.values()]  # type: ignore[arg-type]


def credit_table(steps: Iterable[list[Trajectory]], cfg: Config) -> CreditTable:
    """Sum the credit of every trained turn of each step's trajectories.

    Args:
        steps: the trajectories of each batch (a step's rollouts on one process).
        cfg: the run's settings: ``rl`` (advantage, normalisation, their parameters) and
            ``rollout.max_new_tokens`` (the dr_grpo constant).

    Returns:
        The sums (no staleness check: every turn of a used group counts).
    """
    # heavy: torch and the trainer, needed here only, kept off the report package's imports
    from webagent_r1.algos.mgrpo import NORMALIZERS, turn_count
    from webagent_r1.train.rl import _token_tensors, build_rl_batch  # heavy: as above

    rl = cfg.rl
    table = CreditTable()
    for trajs in steps:
        table.steps += 1
        groups = _groups(trajs)
        batch = build_rl_batch(
            groups,
            rl.advantage_scale,
            rl.drop_equal_groups,
            advantage=rl.advantage,
            step_weight=rl.step_weight,
            step_gamma=rl.step_gamma,
        )
        table.groups_used += batch.groups_used
        table.groups_skipped += batch.groups_equal + batch.groups_small
        if not batch.samples:
            continue
        traj_t, turn_t, adv_t, starts = _token_tensors(batch)
        weights = NORMALIZERS[rl.normalization](
            traj_t,
            turn_t,
            n_traj=max(batch.n_traj, 1),
            n_tokens=int(traj_t.numel()),
            n_turns=turn_count(traj_t, turn_t),
            max_tokens=cfg.rollout.max_new_tokens,
        )
        coef = (weights * adv_t).tolist()
        ends = [*starts[1:], len(coef)]
        for k, s in enumerate(batch.samples):
            traj = batch.trajectories[batch.traj[k]]
            kind = action_kind(traj.turns[s.turn_index])
            credit = sum(coef[starts[k] : ends[k]])
            table.by_kind[kind].add(credit)
            table.by_template[template_of(traj) or "?"][kind].add(credit)
    return table


def run_credit(target: str | Path, cfg: Config) -> tuple[CreditTable, list[str]]:
    """The credit of every step a run folder saved rollouts of.

    Args:
        target: a run folder of ``webagent-r1 train`` (or its ``rl/`` stage folder).
        cfg: the settings the run trained with (see ``credit_table``).

    Returns:
        The table and notes (lines that were not trajectories, skipped).

    Raises:
        ReportError: no rollouts in the folder.
        FileNotFoundError: the folder does not exist.
    """
    root = Path(target)
    if root.name == "rl" and (root / "rollouts").is_dir():
        root = root.parent
    data = load_run(root)
    if not data.rollout_files:
        raise ReportError(
            f"no training rollouts in {str(root)!r} (rl/rollouts/step-*-rank*.jsonl): "
            "pass the run folder of an M-GRPO run"
        )
    notes: list[str] = []

    def batches() -> Iterable[list[Trajectory]]:
        for step, rank, path in data.rollout_files:
            trajs: list[Trajectory] = []
            bad = scan_trajectories(path, trajs.append)
            if bad:
                notes.append(f"step {step} rank {rank}: {bad} line(s) not trajectories, skipped")
            yield trajs

    return credit_table(batches(), cfg), notes
