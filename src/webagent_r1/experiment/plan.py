"""An experiment plan: arms of a recipe, seeds, a start checkpoint, a split, and comparisons.

A plan is a YAML file (``configs/experiments/``; ``docs/experiments.md`` explains each key)::

    recipe: configs/r1-multiturn.yaml      # the config every arm starts from
    init_from: runs/bc/bc/checkpoints/step-000120/model   # or null: the recipe's own start
    split: val                             # val (every choice) or test (final: true)
    final: false                           # true only with split: test
    seeds: [0, 1]
    overrides: [bc.steps=0]                # for every arm (optional)
    arms:
      mgrpo: []                            # the recipe as is
      no-pg: [rl.pg_coef=0]
    comparisons:
      rl-vs-control: {arm: mgrpo, control: no-pg}
    eval: {samples: 2, temperature: 1.0, max_turns: 8, subset: null, engine: hf}
    out_dir: runs/experiments/r1-multiturn-pg
    results: runs/experiments/r1-multiturn-pg/results.md   # optional
    reps: 2000                             # rliable bootstrap resamples (optional)
    archive: docs/results/NAME             # finished runs' small files, to commit (optional)

Relative paths are read from the working directory, as ``--config`` and ``run_dir`` are.
A malformed plan raises ``PlanError`` naming the key and how to fix it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webagent_r1.config import ConfigError, load_config
from webagent_r1.errors import LoadError

__all__ = ["Comparison", "EvalSettings", "Plan", "PlanError", "load_plan"]

SPLITS = ("val", "test")
ENGINES = ("hf", "vllm")
KEYS = {
    "recipe": "the YAML recipe every arm starts from, e.g. configs/r1-multiturn.yaml",
    "init_from": "the start checkpoint's model folder, or null",
    "split": "val or test",
    "final": "true only for the one test measurement of a fixed configuration",
    "seeds": "a list of integers, e.g. [0, 1]",
    "overrides": "config overrides for every arm, e.g. [bc.steps=0]",
    "arms": "arm name -> list of overrides, e.g. {mgrpo: [], no-pg: [rl.pg_coef=0]}",
    "comparisons": "name -> {arm: A, control: C}",
    "eval": "{samples, temperature, max_turns, subset, engine}",
    "out_dir": "the folder of the runs, e.g. runs/experiments/NAME",
    "results": "the results page, a .md file (default <out_dir>/results.md)",
    "reps": "rliable bootstrap resamples (default 2000)",
    "archive": "a folder for finished runs' small files, to commit (default: none)",
}
PRECISION_PINS = ("model.autocast_bf16=true", "model.autocast_bf16=false")
"""Overrides that fix the precision a run computes in on every machine (``auto`` does not)."""
REQUIRED = ("recipe", "split", "seeds", "arms", "comparisons", "out_dir")
EVAL_KEYS = ("samples", "temperature", "max_turns", "subset", "engine")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


class PlanError(LoadError):
    """The experiment plan is malformed (one line: the file, the key, how to fix it)."""


@dataclass
class EvalSettings:
    """How each run's final checkpoint is evaluated (the same for every run)."""

    samples: int = 1
    """Episodes per task (k > 1 samples at ``temperature``)."""
    temperature: float | None = None
    """Sampling temperature; None: greedy for one sample, else ``rollout.temperature``."""
    max_turns: int | None = None
    """Turn budget; None: the recipe's ``env.max_turns``."""
    subset: int | None = None
    """A fixed subset of N tasks of the split (stratified, seed 0); None: every task."""
    engine: str = "hf"
    """``hf`` (in-process) or ``vllm`` (CUDA GPU)."""


@dataclass
class Comparison:
    """One named comparison: ``arm`` against its ``control``, paired on the same tasks."""

    name: str
    arm: str
    control: str


@dataclass
class Plan:
    """A parsed, checked experiment plan."""

    path: Path
    """The plan file."""
    recipe: str
    init_from: str | None
    split: str
    final: bool
    seeds: list[int]
    arms: dict[str, list[str]]
    """Arm name -> its overrides (after the plan's common ``overrides``)."""
    comparisons: list[Comparison]
    out_dir: Path
    results: Path
    eval: EvalSettings = field(default_factory=EvalSettings)
    overrides: list[str] = field(default_factory=list)
    reps: int = 2000
    warnings: list[str] = field(default_factory=list)
    """Things worth saying that do not stop the plan (e.g. a single seed)."""
    archive: Path | None = None
    """Where finished runs' small files are kept and restored from (``experiment/archive.py``)."""

    def check_start(self) -> None:
        """Refuse a start checkpoint that is not there (checked when the plan runs, so that
        a plan can be written, and its keys checked, before its start checkpoint exists).

        Raises:
            PlanError: ``init_from`` names no folder.
        """
        if self.init_from is not None and not Path(self.init_from).exists():
            raise _fail(
                self.path,
                "init_from",
                f"{self.init_from} does not exist: train the start checkpoint first (the "
                "plan's header shows how), or set init_from: null",
            )

    def run_dir(self, arm: str, seed: int) -> Path:
        """The run folder of ``arm`` at ``seed``."""
        return self.out_dir / arm / f"seed-{seed}"

    def archive_dir(self, arm: str, seed: int) -> Path | None:
        """The archive folder of ``arm`` at ``seed`` (None without ``archive``)."""
        return None if self.archive is None else self.archive / arm / f"seed-{seed}"

    def sets_precision(self, arm: str) -> bool:
        """Whether ``arm``'s own overrides fix the precision (``PRECISION_PINS``): then the
        precision is what the arm compares, and it may differ from the other arms'."""
        return any(o.replace(" ", "").lower() in PRECISION_PINS for o in self.arms[arm])

    def run_overrides(self, arm: str, seed: int) -> list[str]:
        """Every override of one run: the plan's, the arm's, then seed, run_dir, init_from."""
        extra = [f"seed={seed}", f"run_dir={self.run_dir(arm, seed)}"]
        if self.init_from is not None:
            extra.append(f"init_from={self.init_from}")
        return [*self.overrides, *self.arms[arm], *extra]


def _fail(path: Path, key: str, problem: str) -> PlanError:
    return PlanError(f"{path}: {key}: {problem}")


def _str_list(path: Path, key: str, value: Any, example: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and "=" in v for v in value):
        raise _fail(path, key, f"needs a list of section.key=value overrides, e.g. {example}")
    return list(value)


def _int(path: Path, key: str, value: Any, optional: bool = True) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(path, key, f"needs an integer >= 1{' or null' if optional else ''}")
    return value


def _eval_settings(path: Path, raw: Any) -> EvalSettings:
    if raw is None:
        return EvalSettings()
    if not isinstance(raw, dict):
        raise _fail(path, "eval", f"needs a mapping {KEYS['eval']}")
    for k in raw:
        if k not in EVAL_KEYS:
            raise _fail(path, f"eval.{k}", f"unknown key; the keys are {', '.join(EVAL_KEYS)}")
    temp = raw.get("temperature")
    if temp is not None and (isinstance(temp, bool) or not isinstance(temp, int | float)):
        raise _fail(path, "eval.temperature", "needs a number >= 0 or null")
    if temp is not None and temp < 0:
        raise _fail(path, "eval.temperature", "needs a number >= 0 or null")
    s = EvalSettings(
        samples=_int(path, "eval.samples", raw.get("samples", 1), optional=False) or 1,
        temperature=None if temp is None else float(temp),
        max_turns=_int(path, "eval.max_turns", raw.get("max_turns")),
        subset=_int(path, "eval.subset", raw.get("subset")),
        engine=raw.get("engine", "hf"),
    )
    if s.engine not in ENGINES:
        raise _fail(path, "eval.engine", f"is {s.engine!r}; use one of {', '.join(ENGINES)}")
    if s.samples > 1 and s.temperature == 0:
        raise _fail(
            path,
            "eval.temperature",
            "0 with samples > 1 repeats one episode: set a temperature > 0 or samples: 1",
        )
    return s


def _arms(path: Path, raw: Any) -> dict[str, list[str]]:
    if not isinstance(raw, dict) or not raw:
        raise _fail(path, "arms", f"needs a non-empty mapping {KEYS['arms']}")
    arms = {}
    for name, ov in raw.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise _fail(
                path, "arms", f"arm name {name!r} is a folder name: letters, digits, _ . + -"
            )
        arms[name] = _str_list(path, f"arms.{name}", ov, "[rl.pg_coef=0] or []")
    return arms


def _comparisons(path: Path, raw: Any, arms: dict[str, list[str]]) -> list[Comparison]:
    if not isinstance(raw, dict) or not raw:
        raise _fail(path, "comparisons", f"needs a non-empty mapping {KEYS['comparisons']}")
    out = []
    for name, spec in raw.items():
        key = f"comparisons.{name}"
        if not isinstance(spec, dict) or set(spec) != {"arm", "control"}:
            raise _fail(path, key, "needs exactly {arm: ARM, control: ARM}")
        for role in ("arm", "control"):
            if spec[role] not in arms:
                raise _fail(
                    path,
                    f"{key}.{role}",
                    f"{spec[role]!r} is not an arm; the arms are {', '.join(arms)}",
                )
        if spec["arm"] == spec["control"]:
            raise _fail(path, key, "compares an arm with itself: name another control")
        out.append(Comparison(str(name), spec["arm"], spec["control"]))
    return out


def _seeds(path: Path, raw: Any) -> tuple[list[int], list[str]]:
    ok = (
        isinstance(raw, list)
        and raw
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in raw)
    )
    if not ok:
        raise _fail(path, "seeds", "needs a non-empty list of integers >= 0, e.g. [0, 1]")
    if len(set(raw)) != len(raw):
        raise _fail(path, "seeds", f"lists a seed twice ({raw}): each seed is one run per arm")
    warn = []
    if len(raw) < 2:
        warn.append(
            "one seed per arm: the interval over runs cannot show how far runs of a recipe "
            "spread; use seeds: [0, 1] or more for a claim about a recipe"
        )
    return list(raw), warn


def _split(path: Path, raw: dict[str, Any]) -> tuple[str, bool]:
    split, final = raw["split"], raw.get("final", False)
    if split not in SPLITS:
        raise _fail(path, "split", f"is {split!r}; use val (every choice) or test (final: true)")
    if not isinstance(final, bool):
        raise _fail(path, "final", "needs true or false")
    if split == "test" and not final:
        raise _fail(
            path,
            "final",
            "split: test is the one measurement of a configuration fixed beforehand: add "
            "final: true to run it (it is logged in each run's test-evaluations.jsonl), or "
            "use split: val for choices",
        )
    if split == "val" and final:
        raise _fail(path, "final", "true marks a test measurement: with split: val set false")
    return split, final


def _check_keys(path: Path, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise PlanError(f"{path}: needs a YAML mapping with the keys {', '.join(REQUIRED)}")
    for k in raw:
        if k not in KEYS:
            close = difflib.get_close_matches(str(k), KEYS, n=1)
            hint = f"did you mean {close[0]}?" if close else f"the keys are {', '.join(KEYS)}"
            raise _fail(path, str(k), f"unknown key; {hint}")
    for k in REQUIRED:
        if raw.get(k) is None:
            raise _fail(path, k, f"missing: {KEYS[k]}")
    return raw


def _path_value(path: Path, key: str, value: Any, suffix: str | None = None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, key, f"needs a path: {KEYS[key]}")
    if suffix and not value.endswith(suffix):
        raise _fail(path, key, f"needs a {suffix} file (the JSON goes beside it), got {value!r}")
    return value


def load_plan(path: str | Path) -> Plan:
    """Read and check a plan file; every arm's config is loaded once, so a bad override fails
    here and not hours into the experiment.

    Raises:
        PlanError: unreadable YAML, an unknown or missing key, a bad value, an arm's override
            the config rejects, or a recipe that does not exist (a missing start checkpoint
            is refused when the plan runs: ``Plan.check_start``).
    """
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise PlanError(f"{p}: no such plan file (see configs/experiments/)") from None
    except (OSError, yaml.YAMLError) as e:
        raise PlanError(f"{p}: cannot read it as YAML ({e})") from None
    raw = _check_keys(p, raw)
    recipe = _path_value(p, "recipe", raw["recipe"])
    if not Path(recipe).is_file():
        raise _fail(p, "recipe", f"{recipe} does not exist: name a YAML recipe (configs/*.yaml)")
    init_from = raw.get("init_from")
    if init_from is not None:
        init_from = _path_value(p, "init_from", init_from)
    split, final = _split(p, raw)
    seeds, warnings = _seeds(p, raw["seeds"])
    arms = _arms(p, raw["arms"])
    out_dir = Path(_path_value(p, "out_dir", raw["out_dir"]))
    results = raw.get("results")
    plan = Plan(
        path=p,
        recipe=recipe,
        init_from=init_from,
        split=split,
        final=final,
        seeds=seeds,
        arms=arms,
        comparisons=_comparisons(p, raw["comparisons"], arms),
        out_dir=out_dir,
        results=Path(_path_value(p, "results", results, ".md"))
        if results is not None
        else out_dir / "results.md",
        eval=_eval_settings(p, raw.get("eval")),
        overrides=_str_list(p, "overrides", raw.get("overrides"), "[bc.steps=0]"),
        reps=_int(p, "reps", raw.get("reps", 2000), optional=False) or 2000,
        warnings=warnings,
        archive=None
        if raw.get("archive") is None
        else Path(_path_value(p, "archive", raw["archive"])),
    )
    for arm in arms:
        try:
            cfg = load_config(recipe, plan.run_overrides(arm, seeds[0]))
        except ConfigError as e:
            raise _fail(p, f"arms.{arm}", f"the config rejects it: {e}") from None
        if init_from is not None and cfg.bc.steps > 0:
            plan.warnings.append(
                f"arm {arm}: BC runs {cfg.bc.steps} steps from init_from before M-GRPO; add "
                "bc.steps=0 to overrides to start M-GRPO from the checkpoint itself"
            )
    return plan
