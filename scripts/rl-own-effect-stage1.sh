#!/usr/bin/env bash
# Resume stage 1 of docs/results/2026-12-07-rl-own-effect-plan.md on this machine, in the
# background: the plan configs/experiments/r1-multiturn-bc.yaml run from the code of commit
# 685ddc3 (every arm of stage 1 runs that code), with runs/ and data/ shared with this checkout.
#
#   bash scripts/rl-own-effect-stage1.sh     # then: tail -f runs/experiments/r1-multiturn-bc/log.txt
#   bash scripts/rl-own-effect-stage1.sh checkpoint ARM [OVERRIDE ...]
#
# `checkpoint ARM` instead trains again the BC checkpoint of an archived arm (the start of
# stage 2; checkpoints are not archived), with the recipe and overrides its mark recorded, in
# its run folder, from the same commit: BC is reproducible (the `recipe` arm's held-out loss
# was 0.0618132 both times). Its log is <run folder>/retrain-log.txt.
# 1. Refuses a machine where the policy would compute in other numerics than the stage's
#    finished arms (bf16 autocast: `model.autocast_bf16: auto` resolves to fp32 on CPUs
#    without fast bf16). That commit predates `experiment`'s own check of it.
# 2. Makes the worktree ../webagent-r1-stage1 at 685ddc3 (once), linking runs/ and data/.
# 3. Restores every archived arm (docs/results/2026-12-07-rl-own-effect/stage1/) into its run
#    folder when that has no mark: that commit's `experiment` has no `archive` key, and
#    would otherwise train and evaluate a finished arm again.
# 4. Starts the plan with nohup; a second call while it runs does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
COMMIT=685ddc3
PLAN=configs/experiments/r1-multiturn-bc.yaml
OUT=runs/experiments/r1-multiturn-bc
ARCHIVE=docs/results/2026-12-07-rl-own-effect/stage1
WANT="cpu, bf16 autocast"
TREE=${WEBAGENT_R1_STAGE1_TREE:-$ROOT/../webagent-r1-stage1}
VPY=$ROOT/.venv/bin/python

log() { printf '[stage1] %s\n' "$*"; }
die() { printf '[stage1] error: %s\n' "$*" >&2; exit 1; }

[ -x "$VPY" ] || die "no $VPY: run bash scripts/setup.sh first"
MODE=${1:-plan}
if [ "$MODE" = plan ] && pgrep -f "webagent-r1 experiment $PLAN" >/dev/null; then
  log "already running: tail -f $OUT/log.txt"
  exit 0
fi

have=$("$VPY" -c 'from webagent_r1.config import ModelConfig
from webagent_r1.policy.precision import run_numerics
print("%s|%s" % run_numerics(ModelConfig()))' 2>/dev/null)
[ "${have%%|*}" = "$WANT" ] || die "this machine ($(echo "${have#*|}")) computes in ${have%%|*}; \
stage 1's arms ran in $WANT: run it on a CPU with fast bf16 (AVX512-BF16 or AMX)"
log "numerics: ${have%%|*} on ${have#*|}"

if [ ! -e "$TREE/.git" ]; then
  git worktree prune
  git worktree add --detach "$TREE" "$COMMIT" >/dev/null
  log "worktree $TREE at $COMMIT"
fi
[ "$(git -C "$TREE" rev-parse --short=7 HEAD)" = "$COMMIT" ] || die "$TREE is not at $COMMIT"
mkdir -p runs data
for d in runs data; do
  [ -L "$TREE/$d" ] || { rm -rf "${TREE:?}/$d"; ln -s "$ROOT/$d" "$TREE/$d"; }
done

for kept in "$ARCHIVE"/*/seed-*; do
  [ -f "$kept/experiment-run.json" ] || continue
  run="$OUT/${kept#"$ARCHIVE"/}"
  [ -f "$run/experiment-run.json" ] && continue
  traj=$("$VPY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print([r for r in d["results"] if r.get("max_turns") == 8][-1]["trajectories"])' "$kept/eval-val.json")
  mkdir -p "$run/eval-val"
  cp "$kept/config.yaml" "$run/config.yaml"
  cp "$kept/eval-val-outcomes.jsonl" "$run/eval-val/$traj"
  cp "$kept/eval-val.json" "$run/eval-val/eval.json"
  cp "$kept/experiment-run.json" "$run/experiment-run.json"  # last: the mark
  log "restored $run from $kept"
done

if [ "$MODE" = checkpoint ]; then
  ARM=${2:?usage: $0 checkpoint ARM [OVERRIDE ...]}
  shift 2
  mark="$ARCHIVE/$ARM/seed-0/experiment-run.json"
  [ -f "$mark" ] || die "no archived arm $ARM ($mark)"
  mapfile -t args < <("$VPY" -c 'import json, sys
m = json.load(open(sys.argv[1]))
print(m["model"]); print(m["recipe"]); print(*m["overrides"], sep="\n")' "$mark")
  model=${args[0]}
  [ -d "$model" ] && { log "$model is there already"; exit 0; }
  run=$(dirname "$(dirname "$(dirname "$(dirname "$model")")")")  # <run>/bc/checkpoints/step-N/model
  mkdir -p "$run"
  cd "$TREE"
  PYTHONPATH="$TREE/src" nohup setsid "$ROOT/.venv/bin/webagent-r1" train -c "${args[1]}" \
    "${args[@]:2}" "$@" --resume >>"$ROOT/$run/retrain-log.txt" 2>&1 </dev/null &
  log "training $model again (pid $!): tail -f $run/retrain-log.txt"
  exit 0
fi
[ "$MODE" = plan ] || die "unknown mode $MODE: give none (the plan) or checkpoint ARM"

mkdir -p "$OUT"
cd "$TREE"
PYTHONPATH="$TREE/src" nohup setsid "$ROOT/.venv/bin/webagent-r1" experiment "$PLAN" \
  >>"$ROOT/$OUT/log.txt" 2>&1 </dev/null &
log "started (pid $!): tail -f $OUT/log.txt"
