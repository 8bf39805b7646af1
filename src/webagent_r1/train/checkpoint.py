"""Checkpoints that survive SIGKILL: Hugging Face model folder + exact trainer state.

Layout of ``<run_dir>/<stage>/checkpoints/step-000040/``::

    model/             save_pretrained: weights (or LoRA adapters) + config + tokenizer
    model-merged/      optional: LoRA merged into the base model (``train.merge_lora_on_save``)
    trainer_state.pt   optimizer, scheduler, RNG states, step, data position, metrics so far
    optimizer/         sharded runs only (``train.sharding: fsdp``): the optimizer state, one
                       shard per process (torch.distributed.checkpoint), instead of the
                       optimizer in trainer_state.pt; ``model/`` is the gathered full model
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
from typing import TYPE_CHECKING, Any

import torch

from webagent_r1.config import ConfigError

if TYPE_CHECKING:
    from webagent_r1.train.setup import Dist

__all__ = [
    "latest_checkpoint",
    "load_trainer_state",
    "restore_optimizer",
    "rng_state",
    "save_checkpoint",
    "save_sharded_checkpoint",
    "set_rng",
]

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
    tmp = _begin(ckpt_dir, step)
    model.save_pretrained(tmp / "model")
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp / "model")
    if merge_lora and hasattr(model, "merge_and_unload"):
        import copy

        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(tmp / "model-merged")
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp / "model-merged")
    return _commit(tmp, step, trainer_state, keep)


def save_sharded_checkpoint(
    ckpt_dir: str | Path,
    step: int,
    model: Any,
    optimizer: Any,
    tokenizer: Any,
    trainer_state: dict[str, Any],
    dist: Dist,
    keep: int = 2,
) -> Path:
    """``save_checkpoint`` for a sharded model: called by every process (collectives).

    1) the full weights are gathered to rank 0 (on the CPU), which writes ``model/`` with
    ``save_pretrained``, an ordinary Hugging Face folder; 2) every process writes its shard of
    the optimizer state into ``optimizer/`` of the same temporary folder (the processes must
    share the file system); 3) rank 0 writes ``trainer_state.pt`` (without the optimizer) and
    ``meta.json`` and renames the folder into place, as ``save_checkpoint`` does.

    Args:
        ckpt_dir: the stage's ``checkpoints/`` folder.
        step: the folder's step.
        model: the sharded policy (``sharding.shard_model``).
        optimizer: its optimizer (over the sharded parameters).
        tokenizer: saved next to the model.
        trainer_state: RNG / data position / metrics (rank 0's is written).
        dist: the training processes.
        keep: checkpoints kept.

    Returns:
        The checkpoint folder (the same on every process).
    """
    from webagent_r1.train.batching import unwrap_model
    from webagent_r1.train.sharding import full_state_dict, save_sharded_optimizer

    weights = full_state_dict(model, all_ranks=False)  # rank 0: every tensor; others: {}
    tmp = None
    if dist.main:
        tmp = _begin(ckpt_dir, step)
        # the LM's config and file layout, the gathered weights instead of its own shards
        unwrap_model(model).save_pretrained(tmp / "model", state_dict=weights)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp / "model")
    del weights
    tmp = Path(dist.broadcast_object(str(tmp) if tmp is not None else None))
    save_sharded_optimizer(model, optimizer, tmp / "optimizer")
    dist.barrier()  # every shard is on disk before rank 0 renames the folder
    if dist.main:
        _commit(tmp, step, {**trainer_state, "sharded_optimizer": "optimizer"}, keep)
    dist.barrier()
    return Path(ckpt_dir) / f"step-{step:06d}"


def restore_optimizer(ckpt: str | Path, state: dict[str, Any], model: Any, optimizer: Any) -> None:
    """Load checkpoint ``ckpt``'s optimizer state: sharded (``optimizer/``) or whole.

    Args:
        ckpt: the checkpoint folder.
        state: its ``load_trainer_state``.
        model: the policy as the trainer built it (sharded or not).
        optimizer: its fresh optimizer.

    Raises:
        ConfigError: the checkpoint was written with the other ``train.sharding``.
    """
    from webagent_r1.train.sharding import is_sharded, load_sharded_optimizer

    saved_sharded = "sharded_optimizer" in state
    if saved_sharded != is_sharded(model):
        was = "fsdp" if saved_sharded else "none"
        raise ConfigError(
            f"{ckpt} was written with train.sharding={was}: resume it with the same setting, "
            f"or start a new run from its model/ folder (init_from={Path(ckpt) / 'model'})"
        )
    if saved_sharded:
        load_sharded_optimizer(model, optimizer, Path(ckpt) / state["sharded_optimizer"])
    else:
        optimizer.load_state_dict(state["optimizer"])


def _begin(ckpt_dir: str | Path, step: int) -> Path:
    """A fresh temporary folder next to where checkpoint ``step`` will be."""
    root = Path(ckpt_dir)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".tmp-step-{step:06d}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    return tmp


def _commit(tmp: Path, step: int, trainer_state: dict[str, Any], keep: int) -> Path:
    """Write the trainer state and ``meta.json``, flush, rename into place, prune."""
    root = tmp.parent
    final = root / f"step-{step:06d}"
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
