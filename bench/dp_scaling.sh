#!/usr/bin/env bash
# dp_scaling.sh: data-parallel training on this machine (issue 16, docs/distributed.md): the
# same `mixprec train` command as 1 process x T threads and as `mpirun -np R` x T/R threads,
# with the gradient buckets started during backward (the default), reduced after backward
# (--bucket-mb 0), and with bf16 on the wire. Reports the median step time (the summary line),
# the efficiency against one process, and the share of rank 0's step time spent waiting for
# the others (the summary's data-parallel line). Rounds alternate the configurations so that
# a noisy neighbour hits all of them alike; the median over rounds is reported.
#
#   bench/dp_scaling.sh [--build-dir build-dev] [--ranks 2] [--threads 2] [--rounds 3]
#       [--models seed-cnn,gpt-tiny]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-dev RANKS=2 THREADS=2 ROUNDS=3 MODELS=seed-cnn,gpt-tiny
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "dp_scaling.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
BIN=$(cd "$ROOT" && cd "$BUILD" && pwd)/mixprec
command -v mpirun > /dev/null || { echo "dp_scaling.sh: mpirun not found (scripts/setup installs openmpi-bin)" >&2; exit 1; }
((THREADS % RANKS == 0)) || { echo "dp_scaling.sh: --threads $THREADS does not split over --ranks $RANKS" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PER_RANK=$((THREADS / RANKS))
TMP=$(mktemp -d /tmp/mixprec_dp_scaling.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# What each model trains on: a global batch and enough steps for a stable median.
args_for() {
  case $1 in
    seed-cnn) echo "--model seed-cnn --dataset synthetic --batch-size 128 --max-steps 40" ;;
    cnn) echo "--model cnn --batch-size 256 --max-steps 40 --train-subset 20480" ;;
    gpt-tiny) echo "--model gpt-tiny --dataset kjv --batch-size 16 --max-steps 30" ;;
    gpt) echo "--model gpt --dataset kjv --batch-size 8 --max-steps 8" ;;
    *) echo "dp_scaling.sh: no settings for model '$1' (seed-cnn, cnn, gpt-tiny, gpt)" >&2; exit 2 ;;
  esac
}

# run NAME CMD...: appends "median_ms wait_pct" of one run to $TMP/NAME.
run() {
  local name=$1; shift
  local out
  out=$("$@" --no-eval --run-dir none --no-self-check 2>&1) || { echo "$out" | tail -5 >&2; exit 1; }
  local ms wait
  ms=$(grep -o '([0-9.]* ms/step median)' <<< "$out" | grep -o '[0-9.]*' | head -1)
  wait=$(grep -o 'spent [0-9.]*% of its step time' <<< "$out" | grep -o '[0-9.]*' | head -1 || true)
  echo "$ms ${wait:--}" >> "$TMP/$name"
}

source "$ROOT/bench/neighbours.sh"  # median

echo "# Data-parallel scaling: $RANKS ranks x $PER_RANK thread(s) vs 1 process x $THREADS threads"
echo
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $(date -u +%FT%TZ);" \
  "commit $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?'); $ROUNDS rounds"
echo
echo "| model, precision | 1 x $THREADS | $RANKS x $PER_RANK, buckets during backward | efficiency | waiting | $RANKS x $PER_RANK, after backward | waiting | $RANKS x $PER_RANK, bf16 wire | waiting |"
echo "|---|---|---|---|---|---|---|---|---|"
IFS=, read -ra models <<< "$MODELS"
for model in "${models[@]}"; do
  read -ra A <<< "$(args_for "$model")"
  for precision in fp32 amp-bf16; do
    key="$model-$precision"
    for ((r = 0; r < ROUNDS; r++)); do
      run "$key-one" "$BIN" train "${A[@]}" --precision "$precision" --threads "$THREADS"
      run "$key-dp" mpirun --oversubscribe -np "$RANKS" "$BIN" train "${A[@]}" --precision "$precision" --threads "$PER_RANK"
      run "$key-after" mpirun --oversubscribe -np "$RANKS" "$BIN" train "${A[@]}" --precision "$precision" \
        --threads "$PER_RANK" --bucket-mb 0
      run "$key-bf16" mpirun --oversubscribe -np "$RANKS" "$BIN" train "${A[@]}" --precision "$precision" \
        --threads "$PER_RANK" --allreduce-dtype bf16
    done
    one=$(cut -d' ' -f1 "$TMP/$key-one" | median)
    row="| $model, $precision | $one ms"
    for cfg in dp after bf16; do
      ms=$(cut -d' ' -f1 "$TMP/$key-$cfg" | median)
      wait=$(cut -d' ' -f2 "$TMP/$key-$cfg" | median)
      row+=" | $ms ms"
      [[ $cfg == dp ]] && row+=" | $(awk -v a="$one" -v b="$ms" 'BEGIN { printf "%.0f%%", 100 * a / b }')"
      row+=" | $wait%"
    done
    echo "$row |"
  done
done
