"""A plan's finished runs in a small folder to commit, restored from it on another machine.

A plan of several arms and seeds runs for days, and the machine under it may not last that
long. With ``archive: DIR`` in the plan, every run whose evaluation has finished keeps in
``DIR/<arm>/seed-<seed>/`` what the results page reads, a few hundred KB:

- ``experiment-run.json``: the run's mark (its final model's path, overrides, settings hash);
- ``config.yaml``: the settings the run was trained with (read when the hash differs: the
  code may have added settings since);
- ``eval-<split>.json``: its evaluation's ``eval.json``;
- ``eval-<split>-outcomes.jsonl``: one row per episode (``webagent-r1 outcomes``);
- ``test-evaluations.jsonl``: its test ledger, when it has one.

On a machine where a run's folder has no mark, the plan takes these files back into it (the
outcomes as the evaluation's trajectory file) before anything is trained, so the run counts as
done: it is not trained or evaluated again, and the page reads it as before. Checkpoints are
not kept: a plan that starts from a lost checkpoint (``init_from``) needs it trained again.
A restored mark is checked like any other (the same overrides and settings hash), so a stale
archive of other settings is refused, not used.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from webagent_r1.report.paired import write_outcomes

__all__ = ["archive_run", "restore_run"]

LEDGER = "test-evaluations.jsonl"
SETTINGS = "config.yaml"


def _trajectory_name(eval_json: dict[str, Any], max_turns: int | None) -> str:
    """The trajectory file an ``eval.json`` names for ``max_turns`` (its last budget if None)."""
    results = [r for r in eval_json.get("results", []) if isinstance(r, dict)]
    for r in reversed(results):
        if max_turns is None or r.get("max_turns") == max_turns:
            name = r.get("trajectories")
            if isinstance(name, str) and name and "/" not in name:
                return name
    return f"trajectories-t{max_turns}.jsonl" if max_turns else "trajectories.jsonl"


def _write(path: Path, text: str) -> None:
    """Through a temporary file: a kill leaves the old file or the new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def archive_run(
    run_dir: Path, eval_dir: Path, dest: Path, split: str, done_file: str, max_turns: int | None
) -> None:
    """Keep a finished run's mark, ``eval.json``, outcomes and test ledger in ``dest``."""
    write_outcomes(eval_dir, dest / f"eval-{split}-outcomes.jsonl", max_turns)
    _write(dest / f"eval-{split}.json", (eval_dir / "eval.json").read_text())
    for name in (LEDGER, SETTINGS):
        if (run_dir / name).is_file():
            _write(dest / name, (run_dir / name).read_text())
    _write(dest / done_file, (run_dir / done_file).read_text())  # last: it marks dest complete


def restore_run(
    run_dir: Path, src: Path, split: str, done_file: str, max_turns: int | None
) -> bool:
    """Take an archived run back into ``run_dir`` when that has no mark of its own; True if
    it did. An incomplete archive folder (no mark, or a file missing) is left alone."""
    eval_json, outcomes = src / f"eval-{split}.json", src / f"eval-{split}-outcomes.jsonl"
    if (run_dir / done_file).is_file() or not all(
        p.is_file() for p in (src / done_file, eval_json, outcomes)
    ):
        return False
    eval_dir = run_dir / f"eval-{split}"
    d = json.loads(eval_json.read_text())
    eval_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(outcomes, eval_dir / _trajectory_name(d, max_turns))
    (eval_dir / "eval-progress.json").unlink(missing_ok=True)
    _write(eval_dir / "eval.json", eval_json.read_text())
    for name in (LEDGER, SETTINGS):
        if (src / name).is_file() and not (run_dir / name).is_file():
            shutil.copyfile(src / name, run_dir / name)
    _write(run_dir / done_file, (src / done_file).read_text())
    return True
