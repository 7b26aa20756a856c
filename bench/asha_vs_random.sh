#!/usr/bin/env bash
# asha_vs_random.sh: issue 33's search target. An ASHA sweep of 16 trials (the cnn on
# Fashion-MNIST in amp-bf16, learning rate log-uniform in 1e-5..1, batch size 64/128/256;
# bench/experiments/asha-fmnist.yaml) against random search given the same budget in steps:
# N = ASHA's steps / max_steps trials (at least 1) trained to the full max_steps, repeated
# with K different searcher seeds, none of them ASHA's (with ASHA's seed, random search
# would train the first N of ASHA's own 16 draws: one comparison, and a degenerate one).
# Reports, for ASHA and for each random seed, the best test accuracy, the steps spent and
# their share of the 16 x max_steps that 16 full trials take, then random search's mean (and
# spread) of the best accuracy over its seeds. The figures are steps and accuracies (not
# times), so a loaded host changes only how long it takes. Run again with the same --out
# (and flags), it resumes its sweeps: finished ones report at once, an interrupted one
# continues from its checkpoints (sweep --resume), so more seeds can be added to a run.
#
#   bench/asha_vs_random.sh [--build-dir build] [--out DIR] [--cores 2] [--target 0.92]
#       [--max-steps 2304]   (the top rung; rungs at max_steps / 16 and / 4, eta 4)
#       [--asha-seed 7]      (ASHA's searcher seed; default the experiment file's)
#       [--random-seeds 3]   (K: random search runs with seeds ASHA's + 1 ... ASHA's + K)
#       [--schedule constant] (the trials' rate after the warm-up: constant, as the file has it,
#                             or cosine: decayed to 0 over each rung's steps, restarted at a
#                             promotion, so every rung's evaluation is of a converged run)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build OUT="" CORES=$(nproc) TARGET=0.92 MAX_STEPS=2304 ASHA_SEED="" RANDOM_SEEDS=3
while [[ $# -gt 0 ]]; do
  case $1 in
    --asha-seed) ASHA_SEED=$2; shift 2 ;;
    --random-seeds) RANDOM_SEEDS=$2; shift 2 ;;
    --build-dir) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --cores) CORES=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --max-steps) MAX_STEPS=$2; shift 2 ;;
    --schedule) SCHEDULE=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "asha_vs_random.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ ${SCHEDULE:=constant} == constant || $SCHEDULE == cosine ]] ||
  { echo "asha_vs_random.sh: --schedule must be constant or cosine, got '$SCHEDULE'" >&2; exit 2; }
[[ $RANDOM_SEEDS =~ ^[1-9][0-9]*$ ]] && (( RANDOM_SEEDS <= 100 )) ||
  { echo "asha_vs_random.sh: --random-seeds must be an integer in 1..100, got '$RANDOM_SEEDS'" >&2; exit 2; }
FILE_SEED=$(sed -n 's/^  seed: *//p' "$ROOT/bench/experiments/asha-fmnist.yaml")
ASHA_SEED=${ASHA_SEED:-$FILE_SEED}
[[ $ASHA_SEED =~ ^[0-9]+$ ]] && (( ${#ASHA_SEED} <= 15 )) ||
  { echo "asha_vs_random.sh: --asha-seed must be a non-negative integer, got '$ASHA_SEED'" >&2; exit 2; }
BUILD=$(cd "$ROOT" && cd "$BUILD" && pwd)
BIN=$BUILD/mixprec
[[ -x $BIN ]] || { echo "asha_vs_random.sh: $BIN not built (cmake --build $BUILD --target mixprec-cli)" >&2; exit 1; }
OUT=${OUT:-$BUILD/asha-vs-random/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
[[ $MAX_STEPS =~ ^[1-9][0-9]*$ ]] && (( MAX_STEPS % 16 == 0 )) ||
  { echo "asha_vs_random.sh: --max-steps must be a positive multiple of 16, got '$MAX_STEPS'" >&2; exit 2; }
# The experiment file with its rungs scaled to --max-steps, ASHA's seed, and its recipe path
# made absolute.
ASHA_FILE=$OUT/asha-fmnist.yaml
sed -e "s/^max_steps: .*/max_steps: $MAX_STEPS/" -e "s/^  min_steps: .*/  min_steps: $(( MAX_STEPS / 16 ))/" \
    -e "s/^  seed: .*/  seed: $ASHA_SEED/" -e "s/^  lr_schedule: constant/  lr_schedule: $SCHEDULE/" \
    -e "s#recipe: ../../recipes/#recipe: $ROOT/recipes/#" "$ROOT/bench/experiments/asha-fmnist.yaml" > "$ASHA_FILE"
grep -q "^  lr_schedule: $SCHEDULE\$" "$ASHA_FILE" || { echo "asha_vs_random.sh: could not set the schedule in $ASHA_FILE" >&2; exit 1; }
grep -q "^  seed: $ASHA_SEED\$" "$ASHA_FILE" || { echo "asha_vs_random.sh: could not set the seed in $ASHA_FILE" >&2; exit 1; }

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | grep -o '[0-9]*$'), model $(grep -m1 '^model' /proc/cpuinfo | grep -o '[0-9]*$')), $(nproc) vCPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); bench/experiments/asha-fmnist.yaml with max_steps $MAX_STEPS; ASHA seed $ASHA_SEED; schedule $SCHEDULE; random search with $RANDOM_SEEDS seed(s); $CORES cores"

# --resume where an earlier run of this script left the experiment (finished or not).
resume_flag() {  # EXPERIMENT_DIR
  [[ -f $1/experiment.json ]] && echo --resume
}

start=$(date +%s)
"$BIN" sweep "$ASHA_FILE" --experiment-dir "$OUT/asha" --cores "$CORES" $(resume_flag "$OUT/asha") >> "$OUT/asha.log" 2>&1 ||
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

# Random search: the same file with the random searcher and n_random trials, once per seed.
# Each seed's results go on one line of $OUT/random-seeds.txt: seed, then summary's fields.
: > "$OUT/random-seeds.txt"
for (( k = 1; k <= RANDOM_SEEDS; ++k )); do
  seed=$(( ASHA_SEED + k ))
  file=$OUT/random-fmnist-s$seed.yaml
  sed -e "s/^name: asha-fmnist/name: random-fmnist-s$seed/" -e "s/^  name: asha/  name: random/" \
      -e "s/^  max_trials: 16/  max_trials: $n_random/" -e '/^  reduction_factor:/d' -e '/^  min_steps:/d' \
      -e "s/^  seed: .*/  seed: $seed/" "$ASHA_FILE" > "$file"
  start=$(date +%s)
  "$BIN" sweep "$file" --experiment-dir "$OUT/random-s$seed" --cores "$CORES" $(resume_flag "$OUT/random-s$seed") \
    >> "$OUT/random-s$seed.log" 2>&1 ||
    { echo "asha_vs_random.sh: the random sweep with seed $seed failed; see $OUT/random-s$seed.log" >&2
      tail -5 "$OUT/random-s$seed.log" >&2; exit 1; }
  echo "$seed $(summary "$OUT/random-s$seed") $(( $(date +%s) - start ))" >> "$OUT/random-seeds.txt"
done

/usr/bin/python3 - "$asha_steps" "$asha_trials" "$asha_best" "$asha_best_id" "$asha_best_steps" "$asha_best_hp" \
  "$full" "$TARGET" "$asha_seconds" "$ASHA_SEED" "$OUT/random-seeds.txt" <<'PY' | tee "$OUT/report.md"
import statistics, sys
a = sys.argv[1:]
full, target = int(a[6]), float(a[7])
def row(name, steps, trials, best, bid, bsteps, hp, secs):
    print(f"| {name} | {trials} | {steps} | {100 * int(steps) / full:.1f}% | {100 * float(best):.2f}% | "
          f"{bid} ({bsteps}, {hp}) | {secs} |")
print("| search | trials | steps spent | of 16 full trials | best accuracy | best trial (steps, values) | wall s |")
print("|---|---|---|---|---|---|---|")
row(f"ASHA, seed {a[9]}", *a[0:6], a[8])
bests = []
for line in open(a[10]):
    seed, steps, trials, best, bid, bsteps, hp, secs = line.split()
    row(f"random, seed {seed}, same budget", steps, trials, best, bid, bsteps, hp, secs)
    bests.append(float(best))
mean = statistics.fmean(bests)
spread = f", sd {100 * statistics.stdev(bests):.2f} points" if len(bests) > 1 else ""
print(f"\nrandom search over {len(bests)} seed(s): best accuracy mean {100 * mean:.2f}% "
      f"(min {100 * min(bests):.2f}%, max {100 * max(bests):.2f}%{spread}); ASHA {100 * float(a[2]):.2f}%")
ok = float(a[2]) >= target and int(a[0]) <= 0.4 * full
print(f"target (ASHA >= {100 * target:.0f}% with <= 40% of {full} steps): {'met' if ok else 'NOT met'}")
PY
echo "runs: $OUT (dashboard: $BIN dashboard $OUT)"
