#!/usr/bin/env bash
# Stage 1 of docs/results/2026-12-07-rl-own-effect-plan.md on this machine: the plan
# configs/experiments/r1-multiturn-bc.yaml run from the code of commit 685ddc3 (every arm of
# stage 1 runs that code), with runs/ and data/ shared with this checkout.
#
#   bash scripts/rl-own-effect-stage1.sh                  # resume the plan in the background
#   bash scripts/rl-own-effect-stage1.sh archive          # after an arm finished: keep it
#   bash scripts/rl-own-effect-stage1.sh checkpoint ARM [OVERRIDE ...]
#
# Every mode first refuses a machine where the policy would compute in other numerics than the
# stage's finished arms (bf16 autocast; `model.autocast_bf16: auto` resolves to fp32 on CPUs
# without fast bf16): that commit predates `experiment`'s own check. Then:
#
# - (no mode) makes the worktree ../webagent-r1-stage1 at 685ddc3 (once), linking runs/ and
#   data/; restores every archived arm (docs/results/2026-12-07-rl-own-effect/stage1/) into its
#   run folder when that has no mark, since that commit's `experiment` has no `archive` key and
#   would train and evaluate a finished arm again; and starts the plan with nohup (a second
#   call while it runs does nothing). Log: runs/experiments/r1-multiturn-bc/log.txt.
# - `archive` keeps every finished arm in the archive folder, with this code's
#   `experiment/archive.py` (that commit does not archive), and records in each mark without
#   one the numerics checked above: commit that folder as each arm ends.
# - `checkpoint ARM` trains an archived arm's BC checkpoint again (the start of stage 2;
#   checkpoints are not archived) with the recipe and overrides its mark recorded, in its run
#   folder, from the same commit: BC is reproducible (the `recipe` arm's held-out loss was
#   0.0618132 both times). Log: <run folder>/retrain-log.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
COMMIT=685ddc3
PLAN=configs/experiments/r1-multiturn-bc.yaml
OUT=runs/experiments/r1-multiturn-bc
ARCHIVE=docs/results/2026-12-07-rl-own-effect/stage1
SPLIT=val
MAX_TURNS=8   # the plan's eval.max_turns
WANT="cpu, bf16 autocast"
TREE=${WEBAGENT_R1_STAGE1_TREE:-$ROOT/../webagent-r1-stage1}
VPY=$ROOT/.venv/bin/python

log() { printf '[stage1] %s\n' "$*"; }
die() { printf '[stage1] error: %s\n' "$*" >&2; exit 1; }

MODE=${1:-plan}
case "$MODE" in
  plan | archive | checkpoint) ;;
  *) die "unknown mode $MODE: give none (the plan), archive, or checkpoint ARM" ;;
esac
[ -x "$VPY" ] || die "no $VPY: run bash scripts/setup.sh first"

have=$("$VPY" -c 'from webagent_r1.config import ModelConfig
from webagent_r1.policy.precision import run_numerics
print("%s|%s" % run_numerics(ModelConfig()))') || die "could not resolve this machine's numerics"
have=$(printf '%s\n' "$have" | tail -n 1)
[ "${have%%|*}" = "$WANT" ] || die "this machine (${have#*|}) computes in ${have%%|*}; \
stage 1's arms ran in $WANT: run it on a CPU with fast bf16 (AVX512-BF16 or AMX)"
log "numerics: ${have%%|*} on ${have#*|}"

if [ "$MODE" = archive ]; then
  "$VPY" - "$OUT" "$ARCHIVE" "$SPLIT" "$MAX_TURNS" "${have%%|*}" "${have#*|}" <<'EOF'
import json, sys
from pathlib import Path
from webagent_r1.experiment.archive import archive_run
out, kept, split, turns, numerics, machine = sys.argv[1:]
for mark in sorted(Path(out).glob("*/seed-*/experiment-run.json")):
    run = mark.parent
    if not (run / f"eval-{split}" / "eval.json").is_file():
        continue  # trained, not yet evaluated
    d = json.loads(mark.read_text())
    if "numerics" not in d:  # trained here, after the check above
        tmp = mark.with_suffix(".tmp")
        tmp.write_text(json.dumps(d | {"numerics": numerics, "machine": machine}))
        tmp.replace(mark)
    dest = Path(kept) / run.relative_to(out)
    archive_run(run, run / f"eval-{split}", dest, split, mark.name, int(turns))
    print(f"[stage1] archived {run} in {dest}")
EOF
  exit 0
fi

if [ "$MODE" = plan ] && pgrep -f "webagent-r1 experiment $PLAN" >/dev/null; then
  log "already running: tail -f $OUT/log.txt"
  exit 0
fi

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
print([r for r in d["results"] if r.get("max_turns") == int(sys.argv[2])][-1]["trajectories"])' \
    "$kept/eval-$SPLIT.json" "$MAX_TURNS")
  mkdir -p "$run/eval-$SPLIT"
  cp "$kept/config.yaml" "$run/config.yaml"
  cp "$kept/eval-$SPLIT-outcomes.jsonl" "$run/eval-$SPLIT/$traj"
  cp "$kept/eval-$SPLIT.json" "$run/eval-$SPLIT/eval.json"
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

mkdir -p "$OUT"
cd "$TREE"
PYTHONPATH="$TREE/src" nohup setsid "$ROOT/.venv/bin/webagent-r1" experiment "$PLAN" \
  >>"$ROOT/$OUT/log.txt" 2>&1 </dev/null &
log "started (pid $!): tail -f $OUT/log.txt"
