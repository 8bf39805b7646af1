"""The settings a run trained with, saved in its folder.

``webagent-r1 train`` writes ``<run_dir>/config.yaml`` when a run starts: every setting,
resolved (the recipe, its overrides and the defaults), so that the run can be read later
without its command (``webagent-r1 credit`` takes its settings from it). A resume with other
settings (e.g. ``rl.steps=16``) leaves that file as it is, writes ``config.resume-<n>.yaml``
beside it and says what changed; the newest file holds the settings of the latest start or
resume. Each file loads as a recipe: ``webagent-r1 train -c <run_dir>/config.yaml``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from webagent_r1 import __version__
from webagent_r1.config import Config, ConfigError, load_config, to_dict

__all__ = [
    "CONFIG_FILE",
    "describe",
    "differences",
    "latest_run_config",
    "run_config_files",
    "save_run_config",
]

CONFIG_FILE = "config.yaml"
_RESUME = re.compile(r"config\.resume-(\d+)\.yaml")


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differences(
    a: Config, b: Config, keys: Iterable[str] | None = None
) -> list[tuple[str, Any, Any]]:
    """``(key, value in a, value in b)`` for every setting (or only ``keys``) that differs."""
    fa, fb = _flat(to_dict(a)), _flat(to_dict(b))
    names = list(keys) if keys is not None else sorted(fa.keys() | fb.keys())
    return [(k, fa.get(k), fb.get(k)) for k in names if fa.get(k) != fb.get(k)]


def describe(diff: list[tuple[str, Any, Any]], limit: int = 8) -> str:
    """``key: a → b`` for the first ``limit`` differences, then how many more."""
    parts = [f"{k}: {a!r} → {b!r}" for k, a, b in diff[:limit]]
    if len(diff) > limit:
        parts.append(f"and {len(diff) - limit} more")
    return "; ".join(parts)


def run_config_files(run_dir: str | Path) -> list[Path]:
    """The run's settings files, oldest first: ``config.yaml``, then each resume's."""
    root = Path(run_dir)
    first = [root / CONFIG_FILE] if (root / CONFIG_FILE).is_file() else []
    resumes = []
    if root.is_dir():
        for p in root.iterdir():
            m = _RESUME.fullmatch(p.name)
            if m and p.is_file():
                resumes.append((int(m.group(1)), p))
    return first + [p for _, p in sorted(resumes)]


def latest_run_config(run_dir: str | Path) -> Path | None:
    """The settings file of the run's latest start or resume, or None (a run from before
    they were saved, or not a run folder)."""
    files = run_config_files(run_dir)
    return files[-1] if files else None


def _write(cfg: Config, path: Path, what: str) -> None:
    head = (
        f"# {what}, resolved (recipe, overrides and defaults), by webagent-r1 {__version__}.\n"
        "# Written by `webagent-r1 train`; `webagent-r1 credit` reads it. It loads as a recipe.\n"
    )
    body = yaml.safe_dump(to_dict(cfg), sort_keys=False, allow_unicode=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(head + body, encoding="utf-8")
    tmp.replace(path)


def save_run_config(cfg: Config, resume: bool) -> list[str]:
    """Record the settings of this start of ``cfg.run_dir``; returns notes to print.

    A fresh start writes ``config.yaml`` (and removes the resume files of a start it
    replaces). A resume with the settings of the newest file (``run_dir`` aside, which may be
    spelled another way) writes nothing; with others it
    writes the next ``config.resume-<n>.yaml`` and notes what changed. A newest file that no
    longer loads (settings renamed since) is noted and the resume's settings written after it.
    """
    root = Path(cfg.run_dir)
    root.mkdir(parents=True, exist_ok=True)
    files = run_config_files(root)
    if not resume or not files:
        for stale in files:
            if stale.name != CONFIG_FILE:
                stale.unlink()
        what = "The settings this run started with"
        if resume:
            what = "The settings of a resume of this run (the start's were not saved)"
        _write(cfg, root / CONFIG_FILE, what)
        return []
    last = files[-1]
    try:
        before = load_config(last, [])
    except ConfigError as e:
        diff_note = f"{last} does not load with this version ({e}); its settings are kept as is"
    else:
        diff = [d for d in differences(before, cfg) if d[0] != "run_dir"]  # its spelling
        if not diff:
            return []
        diff_note = f"resuming with settings that differ from {last.name}: {describe(diff)}"
    taken = [int(m.group(1)) for f in files if (m := _RESUME.fullmatch(f.name))]
    n = max(taken, default=0) + 1
    path = root / f"config.resume-{n}.yaml"
    _write(cfg, path, f"The settings of resume {n} of this run")
    return [f"{diff_note} (this resume's: {path.name})"]
