"""The ``webarena-lite`` task source (``sources.SOURCES`` dispatches to ``task_source``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from webagent_r1.grading.base import EvaluatorFn, SiteBackend
from webagent_r1.sources.base import TaskSource
from webagent_r1.sources.webarena import data
from webagent_r1.sources.webarena.data import SCORINGS
from webagent_r1.sources.webarena.grading import evaluate
from webagent_r1.sources.webarena.results import headline, warn_shared_state
from webagent_r1.sources.webarena.sites import LoginPolicy, WebArenaSites, check_configured
from webagent_r1.types import Task, Trajectory

VAL_FRACTION = 0.1
"""Share of WebArena's 647 non-Lite tasks in the ``val`` split (about 65), the rest ``train``."""


def in_val(task_id: Any, val_fraction: float) -> bool:
    """Whether a non-Lite task belongs to ``val``: a stable hash of its id below the fraction
    (the same tasks on every machine; growing the fraction only moves tasks into ``val``)."""
    h = int(hashlib.sha256(f"webarena-val:{task_id}".encode()).hexdigest()[:12], 16)
    return h / 16**12 < val_fraction


def load_tasks(
    split: str = "test",
    path: str | Path | None = None,
    val_fraction: float = VAL_FRACTION,
) -> list[Task]:
    """The WebArena-Lite tasks of one split, each with ``webarena.evaluate`` attached.

    Args:
        split: ``"test"`` (the 165 Lite tasks), ``"train"`` (WebArena's 812 minus those and
            minus ``val``) or ``"val"`` (``val_fraction`` of those 647, chosen by a stable
            hash of the task id: where settings and checkpoints are chosen).
        path: for ``test``, a Lite-format file (default: the one in an installed
            ``browsergym-webarenalite``; ``"webagent-r1"``: WebAgent-R1's revised file,
            shipped with webagent-r1); for ``train`` and ``val``, WebArena's
            ``test.raw.json`` (required).
        val_fraction: share of the 647 in ``val``; 0 gives the paper's 647 training tasks
            and no ``val``.

    Raises:
        WebArenaDataError: unknown split, no file, the wrong file for the split, or an
            invalid config; the message says how to fix it.
    """
    if split == "test":
        file = data.resolve_test_file(path)
        if file is None:
            raise data.WebArenaDataError(
                f"the WebArena-Lite test configs were not found: {data.HOW_TO_GET}"
            )
        tasks = data.load_configs(file)
    elif split in ("train", "val"):
        if path is None:
            raise data.WebArenaDataError(
                f"the WebArena-Lite {split} split is drawn from WebArena's 812 tasks minus the "
                "165 Lite tasks: pass the path of WebArena's config_files/test.raw.json "
                "(github.com/web-arena-x/webarena; tasks.webarena.train_file); no package ships it"
            )
        if not 0 <= val_fraction < 1:
            raise data.WebArenaDataError(
                f"tasks.webarena.val_fraction must be in [0, 1), got {val_fraction}"
            )
        tasks = data.load_configs(path)
        if any("old_task_id" in t.extra for t in tasks):
            raise data.WebArenaDataError(
                f"{Path(path).name} is a WebArena-Lite file (its configs have old_task_id); "
                "the train split needs WebArena's full config_files/test.raw.json (812 tasks)"
            )
        tasks = [t for t in tasks if t.task_id not in data.LITE_OLD_TASK_IDS]
        tasks = [t for t in tasks if in_val(t.task_id, val_fraction) == (split == "val")]
        if not tasks:
            raise data.WebArenaDataError(
                f"tasks.webarena.val_fraction={val_fraction:g} leaves the {split} split empty"
            )
    else:
        raise data.WebArenaDataError(
            f"unknown WebArena-Lite split {split!r}; use 'test', 'train' or 'val'"
        )
    for t in tasks:
        t.split = split
        t.evaluator = evaluate
    return tasks


class WebArenaSource(TaskSource):
    """WebArena-Lite tasks on the user's WebArena sites.

    ``tasks(split)`` loads the split and, before any browser starts, checks that its sites
    have URLs and answer and that a judge is configured if needed (``check_configured``);
    ``start()`` reads the sites from the environment and runs the reset hook if one is set.

    Args:
        test_file: Lite-format configs for ``test`` (default: the installed package's file;
            ``"webagent-r1"``: WebAgent-R1's revised file, shipped).
        train_file: WebArena's ``config_files/test.raw.json`` for ``train`` and ``val``.
        val_fraction: share of its non-Lite tasks in ``val`` (``load_tasks``).
        sites: keep only tasks whose sites are all in this list (empty keeps all), so a run
            on some sites needs only their URLs.
        login: ``WebArenaSites`` login policy (``storage_state`` | ``all`` | ``none``).
        reset: run the reset hook (``WA_RESET_COMMAND`` / ``WA_FULL_RESET``) on ``start()``.
        check: run ``check_configured`` when tasks are listed.
        scoring: the grading rules (``"vab"`` | ``"webarena"``; ``WebArenaSites.scoring``).
        backend: the sites to use instead of ``WebArenaSites.from_env()`` (tests).
    """

    name: ClassVar[str] = "webarena-lite"
    splits: ClassVar[tuple[str, ...]] = ("train", "test", "val")

    def __init__(
        self,
        test_file: str | Path | None = None,
        train_file: str | Path | None = None,
        sites: list[str] | None = None,
        login: LoginPolicy = "storage_state",
        reset: bool = True,
        check: bool = True,
        scoring: str = "vab",
        backend: WebArenaSites | None = None,
        val_fraction: float = VAL_FRACTION,
    ) -> None:
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, not {scoring!r}")
        self.files = {"test": test_file, "train": train_file, "val": train_file}
        self.val_fraction = val_fraction
        self.sites = list(sites or [])
        self.login = login
        self.reset = reset
        self.check = check
        self.scoring = scoring
        self._sites = backend
        self._checked: set[str] = set()

    @classmethod
    def from_config(cls, cfg: Any) -> WebArenaSource:
        """From a ``Config``: the optional ``tasks.webarena`` section (fields as the
        arguments above: ``test_file``, ``train_file``, ``sites``, ``login``, ``reset``,
        ``check``, ``scoring``, ``val_fraction``); defaults when the config has none."""
        section = getattr(getattr(cfg, "tasks", None), "webarena", None)

        def get(key: str, default: Any) -> Any:
            value = getattr(section, key, None) if section is not None else None
            return default if value is None else value

        return cls(
            test_file=get("test_file", None) or None,
            train_file=get("train_file", None) or None,
            sites=get("sites", []),
            login=get("login", "storage_state"),
            reset=get("reset", True),
            check=get("check", True),
            scoring=get("scoring", "vab"),
            val_fraction=get("val_fraction", VAL_FRACTION),
        )

    def _backend_for_checks(self) -> WebArenaSites:
        if self._sites is None:
            self._sites = WebArenaSites.from_env(login=self.login, scoring=self.scoring)
        return self._sites

    def tasks(self, split: str) -> list[Task]:
        tasks = load_tasks(split, self.files.get(split), self.val_fraction)
        if self.sites:
            tasks = [t for t in tasks if set(t.sites) <= set(self.sites)]
            if not tasks:
                raise ValueError(f"no WebArena-Lite {split} task uses only the sites {self.sites}")
        if self.check and split not in self._checked:
            check_configured(self._backend_for_checks(), tasks)
            self._checked.add(split)
        return tasks

    @property
    def evaluator(self) -> EvaluatorFn:
        return evaluate

    def check_run(self, tasks: Sequence[Task], samples: int, concurrency: int) -> None:
        """Warn (``results.SharedStateWarning``, naming the task ids) when several samples
        or episodes at once meet tasks graded by site state alone."""
        warn_shared_state(tasks, samples, concurrency)

    def headline_result(
        self, tasks: Sequence[Task], trajectories: Sequence[Trajectory]
    ) -> dict[str, Any]:
        """The paper's denominator: success over every episode, env errors as failures, per
        site too (``results.headline``)."""
        return headline(tasks, trajectories)

    def _start(self) -> SiteBackend:
        sites = self._backend_for_checks()
        if self.reset:
            sites.reset()
        return sites

    def _stop(self, backend: SiteBackend) -> None:
        return None  # the sites are the user's: nothing to stop


def task_source(cfg: Any) -> WebArenaSource:
    """The ``webarena-lite`` task source for a run's config (what ``sources.SOURCES`` calls)."""
    return WebArenaSource.from_config(cfg)
