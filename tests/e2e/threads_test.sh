#!/usr/bin/env bash
# threads_test.sh: the default thread count (mixprec/core/threads.h) as the commands apply it.
# MIXPREC_THREADS_OTHERS_BUSY stands in for the measurement, so nothing here depends on the
# machine's real load; --threads and OMP_NUM_THREADS must turn the policy off.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
TMP=$(mktemp -d /tmp/mixprec_threads_test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
CORES=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # the cores this process may use, as the policy counts them
BENCH=(bench --model cnn --batch-size 16 --steps 2 --warmup 1 --precision fp32)
adaptive() { env -u OMP_NUM_THREADS "$@"; }

# Others busy on more cores than there are: 1 thread, said in bench's header and JSON.
expect bench-adaptive-busy 0 "threads: adaptive \(now 1 of $CORES: other processes busy on ~99.0 cores" -- \
  adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${BENCH[@]}"
expect bench-adaptive-busy-json 0 '"threads": 1,' -- adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${BENCH[@]}" --json
expect bench-adaptive-quiet 0 "threads: adaptive \(now $CORES of $CORES: other processes busy on ~0.0 cores" -- \
  adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}"
# Off: --threads N, or OMP_NUM_THREADS; the override is then not even read.
expect bench-flag-wins 0 "threads: 1 \(--threads\)" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}" --threads 1
expect bench-omp-wins 0 "threads: OMP_NUM_THREADS=1" -- \
  env OMP_NUM_THREADS=1 MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}"
expect bench-bad-override 0 "MIXPREC_THREADS_OTHERS_BUSY='lots' ignored: expected cores >= 0" -- \
  adaptive MIXPREC_THREADS_OTHERS_BUSY=lots "$BIN" "${BENCH[@]}"

# train decides once and records the count: config.json, every step line, the banner.
TRAIN=(train --dataset synthetic --batch-size 16 --train-subset 160 --test-subset 32 --no-self-check --precision fp32)
expect train-adaptive 0 "threads +\| 1: adaptive \(now 1 of $CORES" -- \
  adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${TRAIN[@]}" --max-steps 3 --save-every 3 --run-dir a
grep -q '"threads": 1,' a/config.json || fail "train-adaptive: config.json does not record threads 1: $(grep threads a/config.json)"
[[ $(grep -c '"type":"step".*"threads":1' a/metrics.jsonl) -eq 3 ]] || fail "train-adaptive: step lines lack \"threads\":1"
# A resume keeps the recorded count whatever the load says now, and its losses are an
# uninterrupted run's.
expect train-resume-keeps 0 "threads +\| 1 " -- adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" train --resume a --max-steps 6
[[ $(grep -c '"type":"step".*"threads":1' a/metrics.jsonl) -eq 6 ]] || fail "train-resume-keeps: resumed steps not on 1 thread"
expect train-straight 0 "summary" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${TRAIN[@]}" --max-steps 6 --run-dir b
compare_losses a b 0 || fail "train-resume-keeps: the resumed run's losses differ from an uninterrupted run's"
expect train-flag-wins 0 "threads +\| 1 " -- adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${TRAIN[@]}" --max-steps 1 --threads 1 --run-dir c
grep -q '"threads": 1,' c/config.json || fail "train-flag-wins: config.json: $(grep threads c/config.json)"
expect train-omp-wins 0 "threads +\| 1 " -- env OMP_NUM_THREADS=1 MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${TRAIN[@]}" --max-steps 1 --run-dir d
grep -q '"threads": 0,' d/config.json || fail "train-omp-wins: config.json: $(grep threads d/config.json)"

# eval reports the policy; predict says so on stderr when it runs on fewer cores.
expect eval-adaptive 0 "threads: adaptive \(now 1 of $CORES" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" eval a
out=$(OMP_NUM_THREADS=1 MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" eval a 2>&1)
if [[ $out != *accuracy* || $out == *"threads: adaptive"* ]]; then
  fail "eval-omp-wins: eval under OMP_NUM_THREADS failed or reports an adaptive count: $(tail -2 <<< "$out")"
else
  echo "ok   eval-omp-wins"
fi
finish
