"""Adaptive curriculum for M-GRPO: spend rollouts on tasks whose outcomes are mixed.

A group whose G rewards are all equal has zero advantage and teaches nothing (``build_rl_batch``
skips it), yet costs a full rollout. This module chooses each step's tasks (``rl.curriculum``):

- ``uniform``: B distinct tasks drawn uniformly from the training split, exactly as before
  (``step_tasks``), so runs with the default config are unchanged;
- ``mixed``: templates drawn with probability ∝ p(1 − p) of their estimated success p (the
  variance of a binary reward: largest at p = ½, zero at 0 and 1), mixed with a uniform
  exploration floor so that no template starves (WebRL's "self-evolving curriculum" picks tasks
  at the edge of the policy's ability in the same spirit);
- ``dynamic``: the ``mixed`` draw, then, like DAPO's dynamic sampling (Yu et al., 2025,
  arXiv 2503.14476), more groups are collected until the step holds B groups with mixed rewards
  or ``rl.dynamic_max_extra`` extra groups were spent; groups with equal rewards are discarded
  (counted). ``rl.curriculum_floor=1`` gives DAPO's uniform prompts plus the filter.

With ``rl.min_mixed_groups`` = K, ``uniform`` and ``mixed`` roll out further rounds of B tasks
(no update in between, so every round comes from the policy that will be updated) until the step
holds K groups with mixed rewards or ``rl.dynamic_max_extra`` extra groups were spent
(``more_rounds``). Whole rounds of B, not the missing number of groups (a round is one decoding
batch), the last one cut to what is left of the cap. The trainer counts a group as mixed by the
rewards it trains on, and stops adding rounds when the time budget has no room for one more.

Success is tracked per template and per task instance from the rollouts the trainer does anyway:
a Beta(a + successes, a + failures) posterior whose counts decay by ``rl.curriculum_decay`` per
step (the policy changes, so old outcomes count less); an unseen template has the prior mean ½.

Fresh instances: the embedded suite fixes the training instances of each template
(``SuiteSpec.n_train``, 40 per template by default, disjoint from the test instances by their
parameters). With ``rl.curriculum_fresh`` the sampler picks, within a chosen template, an
instance used least recently (never-used ones first), so a run replays an instance only after it
has gone through all of that template's instances. Test instances and held-out templates are
never drawn: the curriculum refuses any task that is not a training task of a training template.

Every draw is a function of (seed, step, round, curriculum state) and the state is saved in the
trainer state, so a resumed run draws the same tasks as an uninterrupted one would have.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from webagent_r1.types import Task

if TYPE_CHECKING:
    from webagent_r1.config import RLConfig
    from webagent_r1.rollout.collect import Group

__all__ = [
    "CURRICULA",
    "Curriculum",
    "Estimate",
    "StepGroups",
    "SuccessTracker",
    "collect_step",
    "is_mixed",
    "mixed_weights",
    "more_groups",
    "more_rounds",
    "step_tasks",
    "template_key",
]


def step_tasks(train_tasks: list[Task], step: int, n: int, seed: int) -> list[Task]:
    """The B tasks of training step ``step`` (a function of the step: resumes draw alike)."""
    rng = random.Random(seed * 1_000_003 + step)
    return rng.sample(train_tasks, min(n, len(train_tasks)))


def template_key(task: Task) -> str:
    """The name a task's template is tracked under.

    Embedded tasks name it in ``extra["template"]``; WebArena tasks have ``intent_template_id``;
    a task with neither is its own template.
    """
    name = task.extra.get("template")
    if name:
        return str(name)
    if task.intent_template_id is not None:
        return f"template-{task.intent_template_id}"
    return f"task-{task.task_id}"


def is_mixed(rewards: Sequence[float]) -> bool:
    """Whether a group's rewards carry an advantage: at least two, and not all equal."""
    return len(rewards) >= 2 and any(r != rewards[0] for r in rewards)


def mixed_weights(p: Sequence[float], floor: float) -> list[float]:
    """Sampling probabilities of templates with estimated success ``p`` (the ``mixed`` rule).

    ``w_i = floor / K + (1 − floor) · p_i (1 − p_i) / Σ_j p_j (1 − p_j)``: a share ``floor`` of
    the mass spread evenly over the K templates (each gets at least ``floor / K``, even at
    p = 0 or 1), the rest in proportion to the reward variance p(1 − p). When every template
    sits at exactly 0 or 1 the variance term is uniform too.

    Args:
        p: (K,) estimated success probability of each template, in [0, 1].
        floor: exploration share in [0, 1]; 1 gives uniform weights.

    Returns:
        (K,) probabilities summing to 1 (empty for K = 0).
    """
    k = len(p)
    if k == 0:
        return []
    var = [max(x * (1.0 - x), 0.0) for x in p]  # (K,) p(1-p) in [0, 1/4]
    total = sum(var)
    share = [v / total for v in var] if total > 0 else [1.0 / k] * k
    return [floor / k + (1.0 - floor) * s for s in share]


def more_groups(mixed: int, target: int, extra: int, max_extra: int) -> int:
    """The ``dynamic`` stopping rule: how many more groups to collect this step (0 = stop).

    Collect the missing number of mixed groups (at most what is left of the cap), so that the
    step never holds more than ``target`` mixed groups.

    Args:
        mixed: groups with mixed rewards collected so far this step (all processes).
        target: mixed groups wanted (B).
        extra: groups collected beyond the first B so far.
        max_extra: cap on extra groups per step.

    Returns:
        Groups to collect next, 0 when the step holds ``target`` mixed groups or the cap is
        spent.
    """
    if mixed >= target or extra >= max_extra:
        return 0
    return min(target - mixed, max_extra - extra)


@dataclass
class Estimate:
    """A success estimate: Beta posterior mean and standard deviation."""

    mean: float
    std: float
    n: float
    """Observations behind it (decayed counts; 0 for the bare prior)."""


class SuccessTracker:
    """Beta posteriors of success per key (template or task id), with exponential forgetting.

    Key k holds decayed counts (s_k, f_k); its posterior is Beta(prior + s_k, prior + f_k). When
    observations of a later step arrive, every count is first multiplied by
    ``decay ** (steps elapsed)``, so an outcome ``d`` steps old weighs ``decay ** d`` (an
    effective window of about 1 / (1 − decay) steps).

    Args:
        prior: pseudo-counts of success and of failure (Beta(prior, prior); 1 = uniform).
        decay: per-step factor on old counts, in (0, 1]; 1 never forgets.
    """

    def __init__(self, prior: float = 1.0, decay: float = 0.8) -> None:
        if prior <= 0 or not 0 < decay <= 1:
            raise ValueError(f"need prior > 0 and decay in (0, 1], got {prior}, {decay}")
        self.prior = prior
        self.decay = decay
        self.counts: dict[str, list[float]] = {}
        """key -> [successes, failures] (decayed)."""
        self.step: int | None = None
        """Step of the newest observations (the counts are decayed up to it)."""

    def advance(self, step: int) -> None:
        """Decay the counts up to ``step`` (no-op for the current or an earlier step)."""
        if self.step is not None and step > self.step and self.decay < 1:
            f = self.decay ** (step - self.step)
            for c in self.counts.values():
                c[0] *= f
                c[1] *= f
        if self.step is None or step > self.step:
            self.step = step

    def observe(self, key: str, successes: float, failures: float, step: int) -> None:
        """Add the outcomes of ``step`` for ``key`` (rewards in [0, 1] count fractionally)."""
        self.advance(step)
        c = self.counts.setdefault(key, [0.0, 0.0])
        c[0] += successes
        c[1] += failures

    def estimate(self, key: str) -> Estimate:
        """Posterior mean and std of the success probability of ``key`` (prior if unseen)."""
        s, f = self.counts.get(key, (0.0, 0.0))
        a, b = self.prior + s, self.prior + f
        n = a + b
        return Estimate(mean=a / n, std=math.sqrt(a * b / (n * n * (n + 1))), n=s + f)

    def state_dict(self) -> dict[str, Any]:
        """Plain-Python state (``torch.save``-able, JSON-able)."""
        return {
            "prior": self.prior,
            "decay": self.decay,
            "step": self.step,
            "counts": {k: list(v) for k, v in self.counts.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore the counts of ``state_dict`` (prior and decay stay those of the config)."""
        self.step = state.get("step")
        self.counts = {str(k): [float(v[0]), float(v[1])] for k, v in state["counts"].items()}


def _check_training_tasks(tasks: Sequence[Task], what: str) -> None:
    bad = [t for t in tasks if t.split != "train" or t.heldout_template]
    if bad:
        t = bad[0]
        raise ValueError(
            f"{what}: {len(bad)} task(s) are not training tasks of a training template, e.g. "
            f"{t.task_id} (split={t.split!r}, heldout_template={t.heldout_template}); the "
            "curriculum must only ever draw from the training split"
        )


@dataclass
class StepGroups:
    """The groups one training step collected (``collect_step``)."""

    groups: list[Group] = field(default_factory=list)
    """This process's groups, every round, in collection order."""
    total: int = 0
    """Groups collected this step, all processes."""
    mixed: int = 0
    """Of them, groups whose rewards are mixed (all processes): ``collect_step``'s
    ``rewards_of``, by default the usable members' graded rewards."""
    extra: int = 0
    """Groups collected beyond the first round (``dynamic`` or ``min_mixed``)."""
    rounds: int = 0
    """Collection rounds (1 unless ``dynamic`` or ``min_mixed`` collected more)."""


class Curriculum:
    """Chooses each step's training tasks and tracks success per template and instance.

    Args:
        train_tasks: the training split (every task must have ``split == "train"`` and a
            non-held-out template; anything else raises ``ValueError``).
        sampler: ``uniform``, ``mixed`` or ``dynamic`` (``CURRICULA``).
        seed: the run's seed.
        floor: exploration share of the ``mixed`` weights (``mixed_weights``).
        decay: per-step forgetting of the success counts.
        fresh: within a template, prefer the instance used least recently.
        max_extra: ``dynamic`` and ``min_mixed``: cap on extra groups per step.
        prior: Beta prior pseudo-counts.
        min_mixed: ``uniform``/``mixed``: more rounds of B tasks until this many groups are
            mixed (``more_rounds``; 0: one round a step).
    """

    def __init__(
        self,
        train_tasks: Sequence[Task],
        sampler: str = "uniform",
        seed: int = 0,
        floor: float = 0.2,
        decay: float = 0.8,
        fresh: bool = True,
        max_extra: int = 8,
        prior: float = 1.0,
        min_mixed: int = 0,
    ) -> None:
        if sampler not in CURRICULA:
            raise ValueError(f"unknown curriculum {sampler!r}; choose one of {sorted(CURRICULA)}")
        if not train_tasks:
            raise ValueError("the curriculum needs at least one training task")
        if not 0 <= floor <= 1:
            raise ValueError(f"floor must be in [0, 1], got {floor}")
        if min_mixed and sampler == "dynamic":
            raise ValueError("min_mixed applies to 'uniform' and 'mixed' ('dynamic' has B)")
        _check_training_tasks(train_tasks, "Curriculum")
        self.sampler = sampler
        self.seed = seed
        self.floor = floor
        self.fresh = fresh
        self.max_extra = max_extra
        if min_mixed < 0:
            raise ValueError(f"min_mixed must be >= 0 (0: one round a step), got {min_mixed}")
        self.min_mixed = int(min_mixed)
        self.tasks = list(train_tasks)  # order kept: ``uniform`` samples this list
        self.index = {str(t.task_id): i for i, t in enumerate(self.tasks)}
        if len(self.index) != len(self.tasks):
            raise ValueError("the curriculum's training tasks must have unique task ids")
        self.by_template: dict[str, list[Task]] = {}
        for t in self.tasks:
            self.by_template.setdefault(template_key(t), []).append(t)
        self.template_names = sorted(self.by_template)
        self.templates = SuccessTracker(prior, decay)
        self.instances = SuccessTracker(prior, decay)
        self.last_used: dict[str, int] = {}
        """task id -> last step it was drawn."""

    @classmethod
    def from_config(cls, train_tasks: Sequence[Task], rl: RLConfig, seed: int) -> Curriculum:
        """The curriculum an ``RLConfig`` describes (``rl.curriculum`` and its options)."""
        return cls(
            train_tasks,
            rl.curriculum,
            seed,
            floor=rl.curriculum_floor,
            decay=rl.curriculum_decay,
            fresh=rl.curriculum_fresh,
            max_extra=rl.dynamic_max_extra,
            min_mixed=rl.min_mixed_groups,
        )

    # ---- estimates -------------------------------------------------------------------

    def estimate(self, template: str) -> Estimate:
        """Success estimate of a template (the prior when unseen)."""
        return self.templates.estimate(template)

    def task_estimate(self, task: Task) -> Estimate:
        """Success estimate of one task instance (the prior when never rolled out)."""
        return self.instances.estimate(str(task.task_id))

    def weights(self) -> dict[str, float]:
        """Probability of drawing each template: ``mixed_weights`` for ``mixed``/``dynamic``,
        each template's share of the training tasks for ``uniform``."""
        names = self.template_names
        if self.sampler == "uniform":
            return {n: len(self.by_template[n]) / len(self.tasks) for n in names}
        w = mixed_weights([self.estimate(n).mean for n in names], self.floor)
        return dict(zip(names, w, strict=True))

    def metrics(self) -> dict[str, float]:
        """``curriculum/p/<template>``: estimated success of every template."""
        return {f"curriculum/p/{n}": self.estimate(n).mean for n in self.template_names}

    # ---- drawing ---------------------------------------------------------------------

    def draw(self, step: int, n: int, rnd: int = 0) -> list[Task]:
        """The tasks of round ``rnd`` of step ``step``: ``min(n, available)`` distinct tasks.

        Round 0 of ``uniform`` is ``step_tasks`` (today's draw). Later rounds (``dynamic``,
        ``min_mixed``) avoid the instances already drawn this step while others remain. A
        function of (seed, step, round, state); it marks the drawn instances as used at
        ``step``.

        Args:
            step: the training step.
            n: tasks wanted.
            rnd: collection round within the step (0 unless ``dynamic`` or ``min_mixed``
                collects more).

        Returns:
            Distinct training tasks, in draw order.

        Raises:
            ValueError: never expected: a drawn task is not a training task (checked on every
                draw, not only at construction, so no future sampler can leak a test task).
        """
        if self.sampler == "uniform" and rnd == 0:
            out = step_tasks(self.tasks, step, n, self.seed)
        else:
            # a str seed is hashed with SHA-512: the same stream in every process and run
            rng = random.Random(f"curriculum/{self.seed}/{step}/{rnd}")
            taken = {k for k, s in self.last_used.items() if s == step}
            out = DRAWS[self.sampler](self, rng, n, taken)
        _check_training_tasks(out, f"Curriculum.draw ({self.sampler})")
        for t in out:
            self.last_used[str(t.task_id)] = step
        return out

    def _draw_uniform(self, rng: random.Random, n: int, taken: set[str]) -> list[Task]:
        """Later rounds of ``uniform``: distinct tasks not drawn yet this step, if any."""
        pool = [t for t in self.tasks if str(t.task_id) not in taken] or self.tasks
        return rng.sample(pool, min(n, len(pool)))

    def _draw_mixed(self, rng: random.Random, n: int, taken: set[str]) -> list[Task]:
        """Templates by ``weights`` (with replacement), then one unused instance each."""
        w = self.weights()
        out: list[Task] = []
        for _ in range(min(n, len(self.tasks))):
            avail = self._templates_left(taken)
            if not avail:  # every instance drawn this step: earlier rounds' ones may come back
                taken = {str(t.task_id) for t in out}
                avail = self._templates_left(taken)
            ws = [w[m] for m in avail]
            if sum(ws) <= 0:  # floor 0 and only p in {0, 1} templates left
                ws = [1.0] * len(avail)
            name = rng.choices(avail, weights=ws)[0]
            task = self._instance(name, taken, rng)
            taken.add(str(task.task_id))
            out.append(task)
        return out

    def _templates_left(self, taken: set[str]) -> list[str]:
        """Templates with at least one instance not in ``taken``."""
        return [
            m
            for m in self.template_names
            if any(str(t.task_id) not in taken for t in self.by_template[m])
        ]

    def _instance(self, template: str, taken: set[str], rng: random.Random) -> Task:
        """An instance of ``template`` not in ``taken``: the least recently used when
        ``fresh`` (never-used ones first), else any, ties broken by ``rng``."""
        cands = [t for t in self.by_template[template] if str(t.task_id) not in taken]
        if self.fresh:
            oldest = min(self.last_used.get(str(t.task_id), -1) for t in cands)
            cands = [t for t in cands if self.last_used.get(str(t.task_id), -1) == oldest]
        return rng.choice(cands)

    # ---- outcomes --------------------------------------------------------------------

    def outcome_vector(self, groups: Sequence[Group]) -> list[float]:
        """(2·T,) successes and failures per training task of ``groups``' usable members.

        A fixed-size vector, so that processes can sum theirs (``Dist.all_reduce_sum``) and
        every process records the same outcomes (identical state: identical draws).
        """
        vec = [0.0] * (2 * len(self.tasks))
        for g in groups:
            i = self.index.get(str(g.task.task_id))
            if i is None:
                raise KeyError(f"group of task {g.task.task_id} is not a curriculum task")
            rewards = [min(max(float(t.reward), 0.0), 1.0) for t in g.usable]
            vec[2 * i] += sum(rewards)
            vec[2 * i + 1] += len(rewards) - sum(rewards)
        return vec

    def record(self, step: int, vec: Sequence[float]) -> None:
        """Add the outcomes of ``outcome_vector`` (summed over processes) at ``step``."""
        if len(vec) != 2 * len(self.tasks):
            want = 2 * len(self.tasks)
            raise ValueError(f"outcome vector has {len(vec)} entries, expected {want}")
        self.templates.advance(step)
        self.instances.advance(step)
        for i, t in enumerate(self.tasks):
            s, f = vec[2 * i], vec[2 * i + 1]
            if s + f > 0:
                self.templates.observe(template_key(t), s, f, step)
                self.instances.observe(str(t.task_id), s, f, step)

    # ---- state -----------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs to draw alike: success counts and last use per instance."""
        return {
            "version": 1,
            "sampler": self.sampler,
            "templates": self.templates.state_dict(),
            "instances": self.instances.state_dict(),
            "last_used": dict(self.last_used),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict`` (the sampler and its options stay those of the config)."""
        self.templates.load_state_dict(state["templates"])
        self.instances.load_state_dict(state["instances"])
        self.last_used = {str(k): int(v) for k, v in state.get("last_used", {}).items()}


def more_rounds(mixed: int, min_mixed: int, extra: int, max_extra: int, n: int) -> int:
    """The ``rl.min_mixed_groups`` stopping rule: how many groups the next round collects.

    Args:
        mixed: groups with mixed rewards collected so far this step (all processes).
        min_mixed: mixed groups the step must hold (K; 0: one round a step).
        extra: groups collected beyond the first round so far.
        max_extra: cap on extra groups per step.
        n: tasks per round (B).

    Returns:
        ``n`` (or what is left of the cap, if less) while fewer than ``min_mixed`` groups are
        mixed; 0 when the step holds ``min_mixed`` mixed groups or the cap is spent.
    """
    if mixed >= min_mixed or extra >= max_extra:
        return 0
    return min(n, max_extra - extra)


DRAWS: dict[str, Callable[[Curriculum, random.Random, int, set[str]], list[Task]]] = {
    "uniform": Curriculum._draw_uniform,
    "mixed": Curriculum._draw_mixed,
    "dynamic": Curriculum._draw_mixed,
}
"""Sampler name -> draw of one round (round 0 of ``uniform`` is ``step_tasks``)."""
CURRICULA = tuple(DRAWS)
"""The values ``rl.curriculum`` accepts."""


async def collect_step(
    cur: Curriculum,
    step: int,
    n: int,
    collect_round: Callable[[list[Task], int], Awaitable[list[Group]]],
    reduce_sum: Callable[[list[float]], list[float]] | None = None,
    rank: int = 0,
    world: int = 1,
    rewards_of: Callable[[Group], Sequence[float]] | None = None,
    may_extend: Callable[[int], bool] | None = None,
) -> StepGroups:
    """Draw and roll out one step's tasks; ``dynamic`` collects more until B mixed groups,
    ``min_mixed`` more rounds of B until that many.

    Every round draws its tasks (the same list on every process), rolls out this process's
    share ``tasks[rank::world]`` and records all processes' outcomes in ``cur``, so the
    estimates are updated with every group the trainer collects.

    Args:
        cur: the curriculum.
        step: the training step.
        n: tasks per step (B).
        collect_round: ``(tasks, round) -> groups`` (``rollout.collect`` with the round's
            sampling seed).
        reduce_sum: element-wise sum over processes (``Dist.all_reduce_sum``; None: one
            process).
        rank: this process's rank.
        world: number of processes.
        rewards_of: the rewards a group is trained on, which decide whether it is mixed
            (None: its usable members' graded rewards). The curriculum's estimates always
            count the graded rewards.
        may_extend: ``(rounds so far) -> bool``, asked before every later round (the same
            answer on every process); False ends the step's collection (a time budget).

    Returns:
        This process's groups and the step's counts over all processes.
    """
    reduce = reduce_sum or list
    out = StepGroups()
    want, target, rnd = n, n, 0
    while want > 0:
        tasks = cur.draw(step, want, rnd)
        if not tasks:
            break
        if rnd == 0:
            target = len(tasks)  # fewer training tasks than B
        else:
            out.extra += len(tasks)
        mine = tasks[rank::world]
        groups = await collect_round(mine, rnd) if mine else []
        out.groups.extend(groups)
        mixed_here = sum(
            is_mixed(rewards_of(g) if rewards_of else [t.reward for t in g.usable]) for g in groups
        )
        summed = reduce([*cur.outcome_vector(groups), float(mixed_here)])
        cur.record(step, summed[:-1])
        out.mixed += int(round(summed[-1]))
        out.total += len(tasks)
        out.rounds += 1
        rnd += 1
        if cur.sampler == "dynamic":
            want = more_groups(out.mixed, target, out.extra, cur.max_extra)
        else:
            want = more_rounds(out.mixed, cur.min_mixed, out.extra, cur.max_extra, n)
        if want > 0 and may_extend is not None and not may_extend(out.rounds):
            break
    return out
