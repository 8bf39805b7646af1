"""Checkpoints that survive SIGKILL: Hugging Face model folder + exact trainer state.

Layout of ``<run_dir>/<stage>/checkpoints/step-000040/``::

    model/             save_pretrained: weights (or LoRA adapters) + config + tokenizer
    model-merged/      optional: LoRA merged into the base model (``train.merge_lora_on_save``)
    trainer_state.pt   optimizer, scheduler, RNG states, step, data position, metrics so far
    meta.json          written last: a checkpoint without it is incomplete and never loaded

Everything is written into a temporary sibling folder first and renamed into place at the
end (a rename within one file system is atomic), so a run killed at any moment leaves either
the previous checkpoints or the new one, never a half-written one.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from pathlib import Path
from typing import Any

import torch

__all__ = ["latest_checkpoint", "load_trainer_state", "rng_state", "save_checkpoint", "set_rng"]

_STEP_DIR = re.compile(r"^step-(\d+)$")


def rng_state() -> dict[str, Any]:
    """Every random generator a trainer draws from."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng(state: dict[str, Any]) -> None:
    """Restore what ``rng_state`` captured."""
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    ckpt_dir: str | Path,
    step: int,
    model: Any,
    tokenizer: Any,
    trainer_state: dict[str, Any],
    keep: int = 2,
    merge_lora: bool = False,
) -> Path:
    """Write checkpoint ``step`` atomically and prune old ones.

    Args:
        ckpt_dir: the stage's ``checkpoints/`` folder.
        step: optimizer/training step the state is at (the folder's name).
        model: the policy (plain or PEFT; DDP-unwrapped by the caller).
        tokenizer: saved next to the model, so the folder loads on its own.
        trainer_state: optimizer / scheduler / RNG / data position (``torch.save``-able).
        keep: checkpoints kept (the oldest are removed).
        merge_lora: for a PEFT model, also save the merged full model.

    Returns:
        The checkpoint folder.
    """
    root = Path(ckpt_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:06d}"
    tmp = root / f".tmp-step-{step:06d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    model.save_pretrained(tmp / "model")
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp / "model")
    if merge_lora and hasattr(model, "merge_and_unload"):
        import copy

        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(tmp / "model-merged")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp / "model-merged")
    torch.save(trainer_state, tmp / "trainer_state.pt")
    meta = {"step": step, "time": time.time(), "complete": True}
    (tmp / "meta.json").write_text(json.dumps(meta))
    _fsync_tree(tmp)
    if final.exists():  # a re-run of the same step (e.g. after resume): replace it
        shutil.rmtree(final)
    os.rename(tmp, final)
    _prune(root, keep)
    return final


def _fsync_tree(path: Path) -> None:
    """Flush the files' data to disk before the rename makes them visible."""
    for p in path.rglob("*"):
        if p.is_file():
            with p.open("rb") as f:
                os.fsync(f.fileno())


def _complete(root: Path) -> list[tuple[int, Path]]:
    out = []
    if not root.is_dir():
        return out
    for p in root.iterdir():
        m = _STEP_DIR.match(p.name)
        if m and (p / "meta.json").is_file():
            out.append((int(m.group(1)), p))
    return sorted(out)


def _prune(root: Path, keep: int) -> None:
    for _, p in _complete(root)[:-keep]:
        shutil.rmtree(p, ignore_errors=True)
    for p in root.glob(".tmp-step-*"):  # leftovers of killed runs
        if p.name.endswith(f"-{os.getpid()}"):
            continue
        shutil.rmtree(p, ignore_errors=True)


def latest_checkpoint(ckpt_dir: str | Path) -> Path | None:
    """The newest complete checkpoint in ``ckpt_dir`` (None when there is none)."""
    done = _complete(Path(ckpt_dir))
    return done[-1][1] if done else None


def load_trainer_state(ckpt: str | Path) -> dict[str, Any]:
    """The trainer state of checkpoint folder ``ckpt``."""
    return torch.load(Path(ckpt) / "trainer_state.pt", weights_only=False)
