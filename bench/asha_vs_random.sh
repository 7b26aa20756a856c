#!/usr/bin/env bash
# asha_vs_random.sh: issue 33's search target. An ASHA sweep of 16 trials (the cnn on
# Fashion-MNIST in amp-bf16, learning rate log-uniform in 1e-5..1, batch size 64/128/256;
# bench/experiments/asha-fmnist.yaml) against random search given the same budget in steps:
# the same searcher seed, so random search trains the first N of the same 16 draws to the
# full max_steps, N = ASHA's steps / max_steps (at least 1). Reports, for each, the best test
# accuracy, the steps spent and their share of the 16 x max_steps that 16 full trials take.
# The figures are steps and accuracies (not times), so a loaded host changes only how long
# it takes.
#
#   bench/asha_vs_random.sh [--build-dir build] [--out DIR] [--cores 2] [--target 0.92]
#       [--max-steps 2304]   (the top rung; rungs at max_steps / 16 and / 4, eta 4)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build OUT="" CORES=$(nproc) TARGET=0.92 MAX_STEPS=2304
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --cores) CORES=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --max-steps) MAX_STEPS=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "asha_vs_random.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$ROOT" && cd "$BUILD" && pwd)
BIN=$BUILD/mixprec
[[ -x $BIN ]] || { echo "asha_vs_random.sh: $BIN not built (cmake --build $BUILD --target mixprec-cli)" >&2; exit 1; }
OUT=${OUT:-$BUILD/asha-vs-random/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[[ $MAX_STEPS =~ ^[1-9][0-9]*$ ]] && (( MAX_STEPS % 16 == 0 )) ||
  { echo "asha_vs_random.sh: --max-steps must be a positive multiple of 16, got '$MAX_STEPS'" >&2; exit 2; }
# The experiment file with its rungs scaled to --max-steps (and its recipe path made absolute).
ASHA_FILE=$OUT/asha-fmnist.yaml
sed -e "s/^max_steps: .*/max_steps: $MAX_STEPS/" -e "s/^  min_steps: .*/  min_steps: $(( MAX_STEPS / 16 ))/" \
    -e "s#recipe: ../../recipes/#recipe: $ROOT/recipes/#" "$ROOT/bench/experiments/asha-fmnist.yaml" > "$ASHA_FILE"

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | grep -o '[0-9]*$'), model $(grep -m1 '^model' /proc/cpuinfo | grep -o '[0-9]*$')), $(nproc) vCPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); bench/experiments/asha-fmnist.yaml with max_steps $MAX_STEPS; $CORES cores"

start=$(date +%s)
"$BIN" sweep "$ASHA_FILE" --experiment-dir "$OUT/asha" --cores "$CORES" > "$OUT/asha.log" 2>&1 ||
  { echo "asha_vs_random.sh: the ASHA sweep failed; see $OUT/asha.log" >&2; tail -5 "$OUT/asha.log" >&2; exit 1; }
asha_seconds=$(( $(date +%s) - start ))

# Sums a finished experiment's steps and finds its best metric.
summary() {  # EXPERIMENT_DIR
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
e = json.load(open(sys.argv[1] + "/experiment.json"))
assert e["status"] == "finished", e["status"]
trials = e["trials"]
steps = sum(t["steps"] for t in trials)
scored = [(t["metrics"][-1], t) for t in trials if t["metrics"] and t["metrics"][-1] is not None]
best, bt = max(scored, key=lambda p: p[0]) if scored else (float("nan"), None)
print(steps, len(trials), best, bt["id"] if bt else 0, bt["steps"] if bt else 0,
      json.dumps(bt["hyperparameters"], separators=(",", ":")) if bt else "{}")
PY
}
read -r asha_steps asha_trials asha_best asha_best_id asha_best_steps asha_best_hp < <(summary "$OUT/asha")
max_steps=$(sed -n 's/^max_steps: *//p' "$ASHA_FILE")
full=$(( 16 * max_steps ))
n_random=$(( asha_steps / max_steps )); (( n_random >= 1 )) || n_random=1

# Random search: the same file with the random searcher, the same seed, n_random trials.
sed -e "s/^name: asha-fmnist/name: random-fmnist/" -e "s/^  name: asha/  name: random/" \
    -e "s/^  max_trials: 16/  max_trials: $n_random/" -e '/^  reduction_factor:/d' -e '/^  min_steps:/d' \
    "$ASHA_FILE" > "$OUT/random-fmnist.yaml"
start=$(date +%s)
"$BIN" sweep "$OUT/random-fmnist.yaml" --experiment-dir "$OUT/random" --cores "$CORES" > "$OUT/random.log" 2>&1 ||
  { echo "asha_vs_random.sh: the random sweep failed; see $OUT/random.log" >&2; tail -5 "$OUT/random.log" >&2; exit 1; }
random_seconds=$(( $(date +%s) - start ))
read -r random_steps random_trials random_best random_best_id random_best_steps random_best_hp < <(summary "$OUT/random")

/usr/bin/python3 - "$asha_steps" "$asha_trials" "$asha_best" "$asha_best_id" "$asha_best_steps" "$asha_best_hp" \
  "$random_steps" "$random_trials" "$random_best" "$random_best_id" "$random_best_steps" "$random_best_hp" \
  "$full" "$TARGET" "$asha_seconds" "$random_seconds" <<'PY' | tee "$OUT/report.md"
import sys
a = sys.argv[1:]
full, target = int(a[12]), float(a[13])
print("| search | trials | steps spent | of 16 full trials | best accuracy | best trial (steps, values) | wall s |")
print("|---|---|---|---|---|---|---|")
for name, o, secs in (("ASHA", 0, a[14]), ("random, same budget", 6, a[15])):
    steps, trials, best, bid, bsteps, hp = a[o:o + 6]
    print(f"| {name} | {trials} | {steps} | {100 * int(steps) / full:.1f}% | {100 * float(best):.2f}% | "
          f"{bid} ({bsteps}, {hp}) | {secs} |")
ok = float(a[2]) >= target and int(a[0]) <= 0.4 * full
print(f"\ntarget (>= {100 * target:.0f}% with <= 40% of {full} steps): {'met' if ok else 'NOT met'}")
PY
echo "runs: $OUT (dashboard: $BIN dashboard $OUT)"
