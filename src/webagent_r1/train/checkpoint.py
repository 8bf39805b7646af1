"""Checkpoints that survive SIGKILL: Hugging Face model folder + exact trainer state.

Layout of ``<run_dir>/<stage>/checkpoints/step-000040/``::

    model/             save_pretrained: weights (or LoRA adapters) + config + tokenizer
    model-merged/      optional: LoRA merged into the base model (``train.merge_lora_on_save``)
    trainer_state.pt   optimizer, scheduler, RNG states, step, data position, metrics so far
    optimizer/         sharded runs only (``train.sharding: fsdp``): the optimizer state, one
                       shard per process (torch.distributed.checkpoint), instead of the
                       optimizer in trainer_state.pt; ``model/`` is the gathered full model
    meta.json          written last: a checkpoint without it is incomplete and never loaded

``--resume`` (``resume_checkpoint``) goes from the newest checkpoint to the oldest and takes the
first one that loads completely: ``meta.json`` says ``complete: true`` for its own step, every
weight file is whole, and ``trainer_state.pt`` loads and is that step's. It says which one it
resumed from and why it skipped each newer one (a disk that filled up, a copy cut short, a
file deleted by hand), instead of failing on the newest.

A checkpoint is data, never code: runs are copied between machines and shared.
``trainer_state.pt`` is read with ``torch.load(weights_only=True)`` (tensors and plain
containers: a pickle naming any other function or class is refused before anything runs),
and a sharded run's ``optimizer/.metadata`` is unpickled first with an allow-list of the
checkpoint library's own record classes. The state is written in those forms (``plain_state``),
and its parts are checked before use: the random generators' states restore into scratch
generators, and every optimizer tensor of a parameter has one shape, found among the weights of
``model/``. A checkpoint that fails any of this is skipped like a truncated one.

Everything is written into a temporary sibling folder first and renamed into place at the
end (a rename within one file system is atomic), so a run killed at any moment leaves either
the previous checkpoints or the new one, never a half-written one.
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import pickle
import random
import re
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from webagent_r1.config import ConfigError

if TYPE_CHECKING:
    from webagent_r1.train.dist import Dist

__all__ = [
    "checkpoint_problem",
    "latest_checkpoint",
    "load_trainer_state",
    "plain_state",
    "print_note",
    "restore_optimizer",
    "resume_checkpoint",
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
    """Restore what ``rng_state`` captured (as ``torch.load(weights_only=True)`` gives it:
    the Python state's tuples may come back as lists)."""
    random.setstate(_python_rng(state["python"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _python_rng(value: Any) -> tuple[Any, ...]:
    """``random.getstate()``'s form of a saved Python RNG state (lists back to tuples)."""
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise ValueError("the Python RNG state is not a 3-tuple")
    version, internal, gauss = value
    if not isinstance(internal, list | tuple):
        raise ValueError("the Python RNG state holds no Mersenne Twister words")
    return (version, tuple(internal), gauss)


def plain_state(value: Any, where: str = "trainer state") -> Any:
    """``value`` in the forms ``torch.load(weights_only=True)`` reads: tensors, ``None``,
    bools, ints, finite or not floats, strings, bytes, and lists, tuples and dicts of them
    (NumPy scalars become Python numbers).

    Raises:
        TypeError: something else (an object, a function …) is in the state: a bug of the
            stage that put it there, caught at save time instead of at ``--resume``.
    """
    if value is None or isinstance(value, torch.Tensor | bool | int | float | str | bytes):
        return value
    if isinstance(value, dict):
        return {k: plain_state(v, f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple):
        out = [plain_state(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return out if isinstance(value, list) else tuple(out)
    item = getattr(value, "item", None)  # a NumPy scalar
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    raise TypeError(
        f"{where} is a {type(value).__name__}: a checkpoint holds only tensors and plain data "
        "(weights_only=True loads nothing else)"
    )


def _rng_problem(rng: Any) -> str | None:
    """Why the saved RNG states ``rng`` cannot be restored (None: each restores into a
    scratch generator of its kind)."""
    if not isinstance(rng, dict) or "python" not in rng or "torch" not in rng:
        return "the RNG state is not a dict of the Python and torch states"
    try:
        random.Random().setstate(_python_rng(rng["python"]))
    except (ValueError, TypeError, OverflowError) as e:
        return f"the Python RNG state does not restore ({_one_line(e)})"
    t = rng["torch"]
    if not isinstance(t, torch.Tensor) or t.dtype != torch.uint8 or t.dim() != 1:
        return "the torch RNG state is not a 1-D uint8 tensor"
    try:
        torch.Generator().set_state(t)
    except RuntimeError as e:
        return f"the torch RNG state does not restore ({_one_line(e)})"
    cuda = rng.get("cuda", [])
    if not isinstance(cuda, list | tuple) or not all(
        isinstance(c, torch.Tensor) and c.dtype == torch.uint8 and c.dim() == 1 for c in cuda
    ):
        return "the CUDA RNG states are not 1-D uint8 tensors"
    return None


def _weight_shapes(ckpt: Path) -> Counter[tuple[int, ...]] | None:
    """How many tensors of each shape the safetensors files of ``ckpt/model`` hold (None:
    a ``.bin`` file, whose shapes only unpickling would tell)."""
    model = ckpt / "model"
    if any(model.glob("*.bin")):
        return None
    shapes: Counter[tuple[int, ...]] = Counter()
    for path in model.glob("*.safetensors"):
        with path.open("rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        for k, v in header.items():
            if k != "__metadata__" and isinstance(v, dict) and isinstance(v.get("shape"), list):
                shapes[tuple(v["shape"])] += 1
    return shapes


def _optimizer_shapes(opt: Any) -> tuple[dict[int, tuple[int, ...]] | None, str | None]:
    """The shape of every parameter an optimizer state dict holds tensors for, read from
    those tensors, or why the state is malformed (a parameter's tensors of several shapes,
    a non-finite step, an index no parameter group lists)."""
    if not isinstance(opt, dict) or not isinstance(opt.get("state"), dict):
        return None, "the optimizer state is not an optimizer state dict"
    groups = opt.get("param_groups")
    if not isinstance(groups, list) or not all(
        isinstance(g, dict) and isinstance(g.get("params"), list) for g in groups
    ):
        return None, "the optimizer state has no parameter groups"
    listed = {i for g in groups for i in g["params"]}
    shapes: dict[int, tuple[int, ...]] = {}
    for index, per_param in opt["state"].items():
        if index not in listed or not isinstance(per_param, dict):
            return None, f"the optimizer state of parameter {index!r} is in no parameter group"
        for name, v in per_param.items():
            if isinstance(v, torch.Tensor) and v.dim() > 0:
                shape = tuple(v.shape)
                if shapes.setdefault(index, shape) != shape:
                    return None, (
                        f"the optimizer state of parameter {index} has tensors of shapes "
                        f"{list(shapes[index])} and {list(shape)} ({name})"
                    )
            elif _non_finite(v):
                return None, f"the optimizer state of parameter {index} has {name} = {v}"
    return shapes, None


def _non_finite(v: Any) -> bool:
    """Whether ``v`` is a number (or a one-number tensor) that is NaN or infinite."""
    number = isinstance(v, torch.Tensor | int | float) and not isinstance(v, bool)
    return number and not math.isfinite(float(v))


def _optimizer_problem(opt: Any, ckpt: Path) -> str | None:
    """Why the optimizer state ``opt`` of ``ckpt`` does not fit its model (None: it is
    well-formed and each of its parameters' shapes is among the weights of ``model/``)."""
    shapes, problem = _optimizer_shapes(opt)
    if problem or shapes is None:
        return problem
    weights = _weight_shapes(ckpt)
    if weights is None:
        return None
    missing = Counter(shapes.values()) - weights
    if missing:
        shape = next(iter(missing))
        index = next(i for i, s in shapes.items() if s == shape)
        return (
            f"the optimizer state of parameter {index} has shape {list(shape)}, which no "
            "weight of model/ has (the state is of another model)"
        )
    return None


_DCP_RECORDS = (
    "torch.distributed.checkpoint.metadata",
    "torch.distributed.checkpoint.filesystem",
)


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles a ``torch.distributed.checkpoint`` index with an allow-list: the library's own
    record classes, ``torch.Size``, dtypes, layouts and paths; any other global (a function
    a crafted file would call) is refused before it is looked up."""

    def find_class(self, module: str, name: str) -> Any:
        """The allowed global ``module.name``.

        Raises:
            pickle.UnpicklingError: any other global.
        """
        allowed = (
            (module in _DCP_RECORDS and not name.startswith("__"))
            or (
                module == "torch"
                and (name == "Size" or isinstance(getattr(torch, name, None), torch.dtype))
            )
            or (module == "torch.serialization" and name == "_get_layout")
            or (module == "pathlib" and name in ("PosixPath", "PurePosixPath", "WindowsPath"))
            or (module == "collections" and name == "OrderedDict")
        )
        if allowed:
            found = super().find_class(module, name)
            if module not in _DCP_RECORDS or isinstance(found, type):
                return found
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")


def _sharded_problem(folder: Path) -> str | None:
    """Why the sharded optimizer index ``folder/.metadata`` must not be loaded (None: it
    holds only the checkpoint library's records)."""
    path = folder / ".metadata"
    if not path.is_file():
        return "the sharded optimizer state (optimizer/.metadata) is missing"
    try:
        _MetadataUnpickler(io.BytesIO(path.read_bytes())).load()
    except Exception as e:  # a refused global, a truncated or garbled file
        return f"optimizer/.metadata does not load as data ({_one_line(e)})"
    return None


def _one_line(e: BaseException, limit: int = 80) -> str:
    """``Type: message`` of ``e`` on one line, the message cut to ``limit`` characters."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:limit]}"


def _refused_global(e: BaseException) -> str | None:
    """The global a ``weights_only`` load refused (``posix.system``), if that is why it
    failed."""
    m = re.search(r"GLOBAL (\S+)", str(e))
    return m.group(1) if m and isinstance(e, pickle.UnpicklingError) else None


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
    # heavy: keeps transformers off the import path
    from webagent_r1.policy.trainable import unwrap_model

    # heavy: keeps transformers off the import path
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
    # heavy: keeps transformers off the import path
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
        problem = _fit_problem(state["optimizer"], optimizer)
        if problem:
            raise ConfigError(
                f"{ckpt}: {problem}: move that checkpoint aside to resume from the one before, "
                "or resume with the model and train.* settings it was written with"
            )
        optimizer.load_state_dict(state["optimizer"])


def _fit_problem(saved: dict[str, Any], optimizer: Any) -> str | None:
    """Why the optimizer state ``saved`` does not fit ``optimizer``'s parameters (None: as
    many groups of as many parameters, each saved tensor of its parameter's shape)."""
    groups = optimizer.param_groups
    saved_groups = saved["param_groups"]
    if len(saved_groups) != len(groups) or any(
        len(a["params"]) != len(b["params"]) for a, b in zip(saved_groups, groups, strict=True)
    ):
        sizes = [len(g["params"]) for g in saved_groups]
        return (
            f"the optimizer state has parameter groups of {sizes} parameters, the model "
            f"{[len(g['params']) for g in groups]}"
        )
    params = {
        i: p
        for a, b in zip(saved_groups, groups, strict=True)
        for i, p in zip(a["params"], b["params"], strict=True)
    }
    for index, per_param in saved["state"].items():
        for name, v in per_param.items():
            if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape != params[index].shape:
                return (
                    f"the optimizer's {name} of parameter {index} has shape {list(v.shape)}, "
                    f"the parameter {list(params[index].shape)}"
                )
    return None


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
    torch.save(plain_state(trainer_state), tmp / "trainer_state.pt")
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


def _read_meta(ckpt: Path) -> dict[str, Any] | None:
    """``meta.json`` of ``ckpt`` when it is a JSON object (None: missing or unreadable)."""
    try:
        meta = json.loads((ckpt / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _complete(root: Path) -> list[tuple[int, Path]]:
    """Checkpoint folders whose ``meta.json`` says they are complete, oldest first."""
    out = []
    if not root.is_dir():
        return out
    for p in root.iterdir():
        m = _STEP_DIR.match(p.name)
        if m and (p / "meta.json").is_file():
            meta = _read_meta(p)
            if meta is not None and meta.get("complete") is True:
                out.append((int(m.group(1)), p))
    return sorted(out)


def _safetensors_problem(path: Path) -> str | None:
    """Why the safetensors file ``path`` is not whole (None: header and size agree)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{path.name} is truncated ({size} bytes)"
            n = int.from_bytes(head, "little")
            if n > size - 8:
                return f"{path.name} is truncated (header of {n} bytes, file of {size})"
            header = json.loads(f.read(n))
    except (OSError, ValueError) as e:
        return f"{path.name} cannot be read ({type(e).__name__})"
    if not isinstance(header, dict):
        return f"{path.name} has no tensor table"
    ends = [
        v["data_offsets"][1]
        for k, v in header.items()
        if k != "__metadata__" and isinstance(v, dict) and len(v.get("data_offsets", [])) == 2
    ]
    expected = 8 + n + max(ends, default=0)
    if size != expected:
        return f"{path.name} is truncated ({size} of {expected} bytes)"
    return None


def _model_problem(ckpt: Path) -> str | None:
    """Why ``ckpt/model`` cannot be loaded (None: config and whole weight files present)."""
    model = ckpt / "model"
    if not model.is_dir():
        return "model/ is missing"
    if not (model / "config.json").is_file() and not (model / "adapter_config.json").is_file():
        return "model/config.json is missing"
    weights = sorted(model.glob("*.safetensors")) + sorted(model.glob("*.bin"))
    if not weights:
        return "model/ holds no weight file"
    for w in weights:
        if w.stat().st_size == 0:
            return f"model/{w.name} is empty"
        if w.suffix == ".safetensors":
            problem = _safetensors_problem(w)
            if problem:
                return f"model/{problem}"
    return None


def _state_problem(ckpt: Path, step: int) -> tuple[dict[str, Any] | None, str | None]:
    """``(trainer state, None)`` when ``trainer_state.pt`` loads and is step ``step``'s,
    else ``(None, why)``."""
    path = ckpt / "trainer_state.pt"
    if not path.is_file():
        return None, "trainer_state.pt is missing"
    if path.stat().st_size == 0:
        return None, "trainer_state.pt is empty"
    try:
        state = torch.load(path, weights_only=True)
    except Exception as e:  # a truncated pickle/zip raises any of half a dozen types
        refused = _refused_global(e)
        if refused:  # nothing of it ran: the unpickler refuses before looking the name up
            return None, (
                f"trainer_state.pt holds more than tensors and plain data ({refused}), "
                "refused unloaded: resume only from a checkpoint this version wrote"
            )
        return None, f"trainer_state.pt does not load ({_one_line(e)})"
    if not isinstance(state, dict) or "rng" not in state or "step" not in state:
        return None, "trainer_state.pt lacks the step or the RNG state"
    if state["step"] != step:
        return None, f"trainer_state.pt is of step {state['step']}, not {step}"
    problem = _rng_problem(state["rng"])
    if problem:
        return None, f"trainer_state.pt: {problem}"
    if "sharded_optimizer" in state:
        problem = _sharded_problem(ckpt / str(state["sharded_optimizer"]))
    elif "optimizer" not in state:
        problem = "trainer_state.pt lacks the optimizer state"
    else:
        problem = _optimizer_problem(state["optimizer"], ckpt)
        problem = problem and f"trainer_state.pt: {problem}"
    return (None, problem) if problem else (state, None)


def checkpoint_problem(ckpt: str | Path) -> str | None:
    """Why checkpoint folder ``ckpt`` cannot be resumed from, or None when it loads
    completely (meta, weights and trainer state; the state itself is loaded to check)."""
    p = Path(ckpt)
    m = _STEP_DIR.match(p.name)
    if not m:
        return f"{p.name} is not a step-NNNNNN folder"
    return _inspect(p, int(m.group(1)))[1]


def _inspect(p: Path, step: int) -> tuple[dict[str, Any] | None, str | None]:
    meta = _read_meta(p)
    if meta is None:
        return None, (
            "meta.json is missing (the save never finished)"
            if not (p / "meta.json").exists()
            else "meta.json is not a JSON object"
        )
    if meta.get("complete") is not True:
        return None, "meta.json does not say complete: true"
    if meta.get("step") != step:
        return None, f"meta.json is of step {meta.get('step')!r}, not {step}"
    problem = _model_problem(p)
    if problem:
        return None, problem
    return _state_problem(p, step)


def print_note(message: str) -> None:
    """One line on stderr (where the CLI's messages go; stdout keeps the results)."""
    print(message, file=sys.stderr, flush=True)


def resume_checkpoint(
    ckpt_dir: str | Path, say: Callable[[str], None] | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint of ``ckpt_dir`` that loads completely, with its trainer state.

    Newer checkpoints that do not load (truncated, empty or missing ``trainer_state.pt``,
    ``complete: false``, a cut weight file …) are skipped, each with the reason.

    Args:
        ckpt_dir: the stage's ``checkpoints/`` folder.
        say: called with one line per skipped checkpoint and one naming the one resumed
            from (or saying that none loads); None says nothing.

    Returns:
        ``(folder, trainer state)``, or None when no checkpoint loads (a fresh start).
    """
    root = Path(ckpt_dir)
    found = []
    if root.is_dir():
        found = sorted(
            (int(m.group(1)), p)
            for p in root.iterdir()
            if (m := _STEP_DIR.match(p.name)) and p.is_dir()
        )
    tell = say or (lambda _msg: None)
    for step, p in reversed(found):
        state, problem = _inspect(p, step)
        if problem is None and state is not None:
            tell(f"resuming from {p} (step {step})")
            return p, state
        tell(f"skipping checkpoint {p}: {problem}")
    if found:
        tell(f"no checkpoint in {root} loads completely: starting from step 0")
    return None


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
    """The trainer state of checkpoint folder ``ckpt`` (tensors and plain data only)."""
    return torch.load(Path(ckpt) / "trainer_state.pt", weights_only=True)
