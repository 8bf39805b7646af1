"""Where a run's M-GRPO credit went: each trained turn's share of the policy gradient, summed
by the kind of action the turn took and by template.

The loss gives every token of turn j of trajectory i the weight w_t (``rl.normalization``,
``algos/mgrpo.py``; the same for every token of a turn) times the turn's advantage ``A_ij``
(``rl.advantage``: the episode's group advantage, plus GiGPO's step-level term). A turn's
*credit* is w_t · A_ij summed over its tokens: at the ratio 1 (the first update of a batch, π_old
recomputed, β = 0) it is the coefficient of the policy gradient on the action's mean token
log-probability, so a positive credit raises the probability of the whole action and a negative
one lowers it. With episode advantages and ``mgrpo`` weights, a step's positive and negative
credit cancel (advantages are centred within each group and every trajectory weighs 1/G);
what matters is where each lands. "exit has net credit -0.08" says that the updates pushed exits
down on balance; a drift toward exiting early then comes from somewhere else.

The credit is recomputed from the rollouts a run saved (``rl/rollouts/step-S-rankR.jsonl``)
with the trainer's own functions (``train.rl.build_rl_batch`` and ``NORMALIZERS``) and the
settings given, so the same rollouts can be read under another advantage or normalisation.
Each rank's file is that process's batch; the counts the weights divide by (trajectories,
tokens, turns) are summed over a step's ranks, as the trainer sums them over processes. A
group is a run of consecutive trajectories with the same ``(task_id, group_id)`` (the trainer
writes each group whole). Turns are not checked for staleness (``rl.max_staleness``): every
turn of a trained group counts.

Beside the credit, each template's rollouts are counted: groups, the groups the update used,
episodes and successes. A template whose groups never train (its rewards all 0, or
all 1) costs rollouts and teaches nothing; how the curriculum (``rl.curriculum``) spent a run's
rollouts shows there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webagent_r1.config import Config, ConfigError, load_config
from webagent_r1.errors import LoadError
from webagent_r1.report.failures import template_of
from webagent_r1.report.load import ReportError, load_run
from webagent_r1.rollout.collect import Group
from webagent_r1.rollout.trajectories import read_trajectory_records
from webagent_r1.train.runconfig import CONFIG_FILE, describe, differences, run_config_files
from webagent_r1.types import Trajectory, Turn

__all__ = [
    "CREDIT_SETTINGS",
    "INVALID",
    "CreditSum",
    "CreditTable",
    "RolloutCount",
    "action_kind",
    "credit_config",
    "credit_report",
    "credit_settings",
    "credit_table",
    "run_credit",
    "run_root",
]

INVALID = "invalid"
"""Kind of a turn whose action the parser refused (``Turn.action`` is None)."""

CREDIT_SETTINGS = (
    "rl.advantage",
    "rl.normalization",
    "rl.advantage_scale",
    "rl.drop_equal_groups",
    "rl.reward_requires_exit",
    "rl.step_weight",
    "rl.step_gamma",
    "rollout.max_new_tokens",
)
"""The settings ``credit_table`` reads: the credit changes with each of them."""


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

    def merge(self, other: CreditSum) -> None:
        """Add ``other``'s turns and sums."""
        self.turns += other.turns
        self.positive += other.positive
        self.negative += other.negative

    def add(self, credit: float) -> None:
        """Count one turn of this credit."""
        self.turns += 1
        if credit > 0:
            self.positive += credit
        elif credit < 0:
            self.negative += credit


@dataclass
class RolloutCount:
    """A template's share of the rollouts: groups and episodes, and the groups trained on."""

    groups: int = 0
    trained: int = 0
    """Groups the update used (``build_rl_batch``): at least two usable members, and, under
    ``rl.drop_equal_groups``, rewards not all equal."""
    episodes: int = 0
    successes: int = 0
    """Episodes with a positive reward."""

    def merge(self, other: RolloutCount) -> None:
        """Add ``other``'s counts to these."""
        self.groups += other.groups
        self.trained += other.trained
        self.episodes += other.episodes
        self.successes += other.successes


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
    rollouts: dict[str, RolloutCount] = field(default_factory=lambda: defaultdict(RolloutCount))
    """Per template: what its rollouts cost and how many of its groups were trained on."""

    @property
    def total(self) -> CreditSum:
        """All kinds together."""
        out = CreditSum()
        for c in self.by_kind.values():
            out.merge(c)
        return out

    def merge(self, other: CreditTable) -> None:
        """Add ``other``'s sums and counts to these."""
        for kind, c in other.by_kind.items():
            self.by_kind[kind].merge(c)
        for tpl, rows in other.by_template.items():
            for kind, c in rows.items():
                self.by_template[tpl][kind].merge(c)
        for tpl, r in other.rollouts.items():
            self.rollouts[tpl].merge(r)
        self.steps += other.steps
        self.groups_used += other.groups_used
        self.groups_skipped += other.groups_skipped

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
            "rollouts": {t: vars(r).copy() for t, r in sorted(self.rollouts.items())},
        }


def _groups(trajs: Iterable[Trajectory]) -> list[Group]:
    """Runs of consecutive trajectories with the same ``(task_id, group_id)``: the groups."""
    out: list[Group] = []
    last: tuple[str, str] | None = None
    for t in trajs:
        key = (str(t.task_id), str(t.group_id))
        if key != last:
            # build_rl_batch reads only the members; the task is not needed to weigh them
            out.append(Group(task=None, trajectories=[]))  # type: ignore[arg-type]
            last = key
        out[-1].trajectories.append(t)
    return out


def credit_table(steps: Iterable[list[list[Trajectory]]], cfg: Config) -> CreditTable:
    """Sum the credit of every trained turn of each step's trajectories.

    Args:
        steps: per step, the trajectories of each process (rank), in the order saved.
        cfg: the run's settings: ``rl`` (advantage, normalisation, their parameters) and
            ``rollout.max_new_tokens`` (the dr_grpo constant).

    Returns:
        The sums.
    """
    # heavy: torch and the trainer, needed here only, kept off the report package's imports
    from webagent_r1.algos.mgrpo import NORMALIZERS, turn_count
    from webagent_r1.train.rl import _token_tensors, build_rl_batch  # heavy: as above

    rl = cfg.rl
    table = CreditTable()
    for ranks in steps:
        table.steps += 1
        batches = []
        for trajs in ranks:
            groups = _groups(trajs)
            batch = build_rl_batch(
                groups,
                rl.advantage_scale,
                rl.drop_equal_groups,
                advantage=rl.advantage,
                step_weight=rl.step_weight,
                step_gamma=rl.step_gamma,
                require_exit=rl.reward_requires_exit,
            )
            table.groups_used += batch.groups_used
            table.groups_skipped += batch.groups_equal + batch.groups_small
            trained = {id(t) for t in batch.trajectories}
            for g in groups:
                r = table.rollouts[template_of(g.trajectories[0])]
                r.groups += 1
                r.trained += any(id(t) in trained for t in g.trajectories)
                r.episodes += len(g.trajectories)
                r.successes += sum(t.reward > 0 for t in g.trajectories)
            if batch.samples:
                batches.append((batch, _token_tensors(batch)))
        # the weights divide by counts over every process of the step, as in the trainer
        n_traj = sum(b.n_traj for b, _ in batches)
        n_tokens = sum(int(t[0].numel()) for _, t in batches)
        n_turns = sum(turn_count(t[0], t[1]) for _, t in batches)
        for batch, (traj_t, turn_t, adv_t, starts) in batches:
            weights = NORMALIZERS[rl.normalization](
                traj_t,
                turn_t,
                n_traj=max(n_traj, 1),
                n_tokens=n_tokens,
                n_turns=n_turns,
                max_tokens=cfg.rollout.max_new_tokens,
            )
            coef = (weights * adv_t).tolist()
            ends = [*starts[1:], len(coef)]
            for k, s in enumerate(batch.samples):
                traj = batch.trajectories[batch.traj[k]]
                kind = action_kind(traj.turns[s.turn_index])
                credit = sum(coef[starts[k] : ends[k]])
                table.by_kind[kind].add(credit)
                table.by_template[template_of(traj)][kind].add(credit)
    return table


def run_root(target: str | Path) -> Path:
    """The run folder of ``target``: itself, or its parent when ``target`` is the run's
    ``rl/`` stage folder."""
    root = Path(target)
    if root.name == "rl" and (root / "rollouts").is_dir():
        return root.parent
    return root


def run_credit(
    target: str | Path, cfg: Config, steps: tuple[int, int] | None = None
) -> tuple[CreditTable, list[str]]:
    """The credit of every step a run folder saved rollouts of.

    Args:
        target: a run folder of ``webagent-r1 train`` (or its ``rl/`` stage folder).
        cfg: the settings the run trained with (see ``credit_table``).
        steps: only the updates ``first..last`` (inclusive, numbered as the run logs them:
            update ``S`` trained on the rollouts of ``step-(S-1)``); None: all.

    Returns:
        The table and notes: lines that were not trajectories (their step's credit is then
        computed without them, so it is approximate), and steps whose recomputed trained groups
        differ from what the run logged (``train/groups_used``: other settings than the run's).

    Raises:
        ReportError: no rollouts in the folder, or none in ``steps``.
        FileNotFoundError: the folder does not exist.
        OSError: a rollout file cannot be read.
    """
    root = run_root(target)
    data = load_run(root)
    if not data.rollout_files:
        raise ReportError(
            f"no training rollouts in {str(root)!r} (rl/rollouts/step-*-rank*.jsonl): "
            "pass the run folder of an M-GRPO run"
        )
    by_step: dict[int, list[Path]] = defaultdict(list)
    for step, _, path in data.rollout_files:  # sorted by step, then rank
        if steps is None or steps[0] <= step + 1 <= steps[1]:
            by_step[step].append(path)
    if not by_step and steps is not None:
        have = sorted({step + 1 for step, _, _ in data.rollout_files})
        raise ReportError(
            f"no training rollouts of steps {steps[0]}-{steps[1]} in {str(root)!r}: it has "
            f"steps {have[0]}-{have[-1]}"
        )
    notes: list[str] = []

    def read(step: int, path: Path) -> list[Trajectory]:
        skipped: list[str] = []
        try:
            trajs = [t for _, t in read_trajectory_records(path, skipped=skipped)]
        except LoadError as e:  # not text: the whole file
            notes.append(f"{data.rel(path)}: unreadable ({e}); skipped")
            return []
        if skipped:
            notes.append(
                f"{data.rel(path)}: {len(skipped)} line(s) not trajectories, skipped "
                f"(step {step + 1}'s credit is approximate); the first: {skipped[0]}"
            )
        return trajs

    logged = {
        int(r["step"]): r["train/groups_used"]
        for r in data.rl_metrics
        if isinstance(r.get("train/groups_used"), (int, float))
    }
    table = CreditTable()
    for step, paths in sorted(by_step.items()):
        one = credit_table([[read(step, p) for p in paths]], cfg)
        # the update of rollouts step-S is logged at step S + 1
        if step + 1 in logged and logged[step + 1] != one.groups_used:
            notes.append(
                f"step {step + 1}: {one.groups_used} group(s) trained here, the run logged "
                f"{logged[step + 1]:g}: are these the run's settings?"
            )
        table.merge(one)
    return table, notes


def credit_config(
    target: str | Path,
    config: str | None,
    overrides: list[str],
    on_note: Callable[[str], None],
) -> Config:
    """The settings to read a run's credit under: ``config`` with ``overrides`` when given,
    else the run's newest saved settings (``config.yaml`` or ``config.resume-<n>.yaml``) with
    the overrides, else the defaults. ``on_note`` gets a line for what the reader should
    know: whose settings these are, credit settings that differ from the run's, and a resume
    that changed them (the steps before it trained under the earlier ones).

    Raises:
        ReportError: the run's settings do not load and no ``config`` is given.
    """
    saved = run_config_files(run_root(target))
    ran = saved[-1] if saved else None
    ran_cfg: Config | None = None
    if ran is not None:
        try:
            ran_cfg = load_config(ran, [])
        except ConfigError as e:
            if config is None:
                raise ReportError(
                    f"the run's settings do not load ({e}): pass -c <the recipe the run "
                    "trained with> and its overrides"
                ) from None
            on_note(f"note: {ran} does not load ({e})")
    if config is not None:
        cfg = load_config(config, overrides)
    elif ran is not None and ran_cfg is not None:
        cfg = load_config(ran, overrides) if overrides else ran_cfg
        on_note(f"settings: {ran} (the run's own)")
    else:
        cfg = load_config(None, overrides)
        on_note(
            f"note: no --config and no {CONFIG_FILE} in {target}: the default settings; "
            "pass the recipe the run trained with"
        )
    if (
        ran is not None
        and ran_cfg is not None
        and (diff := differences(ran_cfg, cfg, CREDIT_SETTINGS))
    ):
        on_note(
            f"note: credit under settings the run did not train with ({ran.name}): "
            + describe(diff)
        )
    _resumes_that_changed_credit(saved, on_note)
    return cfg


def _resumes_that_changed_credit(saved: list[Path], on_note: Callable[[str], None]) -> None:
    """A note for each resume whose settings changed what the credit reads."""
    for older, newer in zip(saved, saved[1:], strict=False):
        try:
            changed = differences(load_config(older, []), load_config(newer, []), CREDIT_SETTINGS)
        except ConfigError:
            continue
        if changed:
            on_note(
                f"note: {newer.name} changed settings the credit reads ({describe(changed)}); "
                "the steps before that resume trained under the earlier ones, and every step "
                "is read here under one set"
            )


def credit_report(
    target: str | Path,
    config: str | None,
    overrides: list[str],
    steps: tuple[int, int] | None,
    on_note: Callable[[str], None],
) -> tuple[Config, CreditTable]:
    """``webagent-r1 credit``: the settings (``credit_config``) and the credit of the run's
    steps under them (``run_credit``, its notes passed to ``on_note``).

    Raises:
        ReportError: the run's settings do not load without ``config``; no rollouts.
        OSError: a rollout file cannot be read.
    """
    cfg = credit_config(target, config, overrides, on_note)
    table, notes = run_credit(target, cfg, steps)
    for n in notes:
        on_note(f"note: {n}")
    return cfg, table


def credit_settings(cfg: Config) -> dict[str, Any]:
    """The values of ``CREDIT_SETTINGS`` by their names in their section
    (``"rl.advantage"`` → ``"advantage"``)."""
    settings = {}
    for key in CREDIT_SETTINGS:
        section, name = key.split(".")
        settings[name] = getattr(getattr(cfg, section), name)
    return settings
