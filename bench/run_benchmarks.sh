#!/usr/bin/env bash
# run_benchmarks.sh: build (Release) and run the whole benchmark suite in one command:
# bench_gemm, bench_step (every model, presets interleaved in-process) and the PyTorch peer
# (bench/torch_step.py), in ROUNDS rounds so that each comparison is made side by side, then
# print the markdown table (bench/report.py). About 8-12 minutes on 2 threads.
#
#   bench/run_benchmarks.sh [--threads 2] [--rounds 2] [--repeats 10] [--build-dir DIR] [--out DIR]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS=2
ROUNDS=2
REPEATS=10
WARMUP=3
BUILD="$ROOT/build-bench"
OUT=""
MODELS="seed-cnn,cnn,mlp,transformer"
PRESETS="fp32,amp-bf16,amp-fp16,o2-bf16"
BUDGET=10  # seconds per preset and model in one round: caps slow presets (f16 emulation, fp32 mlp)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --build-dir) BUILD="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --presets) PRESETS="$2"; shift 2 ;;
    --budget) BUDGET="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "run_benchmarks.sh: unknown flag $1" >&2; exit 2 ;;
  esac
done
OUT="${OUT:-$BUILD/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"

echo "== build (Release) in $BUILD"
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMIXPREC_BUILD_BENCH=ON >/dev/null
cmake --build "$BUILD" -j"$THREADS" --target bench_step bench_gemm

# PyTorch peer: Debian's interpreter; fp32 must run on OpenBLAS, not netlib (limits.md §4).
# Unpack libopenblas0-openmp into a private directory instead of switching the system BLAS.
TORCH_PY=/usr/bin/python3
TORCH_ENV=()
HAVE_TORCH=0
if "$TORCH_PY" -c "import torch" 2>/dev/null; then
  HAVE_TORCH=1
  OB="$BUILD/openblas"
  if ! ls "$OB"/root/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3 >/dev/null 2>&1; then
    mkdir -p "$OB"
    (cd "$OB" && apt-get download libopenblas0-openmp >/dev/null 2>&1 && dpkg -x libopenblas0-openmp_*.deb root) \
      || echo "warning: could not fetch libopenblas0-openmp; torch fp32 will use the default BLAS"
  fi
  if [[ -e "$OB/root/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3" ]]; then
    TORCH_ENV=(LD_LIBRARY_PATH="$OB/root/usr/lib/x86_64-linux-gnu/openblas-openmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  fi
else
  echo "== PyTorch not found at $TORCH_PY: skipping the PyTorch comparison"
fi

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs"
  echo "flags: $(grep -o -w -E 'avx512f|avx512_bf16|avx512_fp16|amx_bf16|amx_tile|f16c' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "threads: $THREADS, rounds: $ROUNDS, repeats: $REPEATS after $WARMUP warm-ups"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/env.txt"

export OMP_NUM_THREADS="$THREADS"
for r in $(seq 1 "$ROUNDS"); do
  LOG="$OUT/round$r.log"
  : > "$LOG"
  echo "== round $r/$ROUNDS ($(date -u +%H:%M:%S))"
  "$BUILD/bench/bench_gemm" --threads "$THREADS" --repeats 10 | tee -a "$LOG"
  IFS=',' read -ra MODEL_LIST <<< "$MODELS"
  for m in "${MODEL_LIST[@]}"; do
    "$BUILD/bench/bench_step" --model "$m" --precision "$PRESETS" --threads "$THREADS" \
      --repeats "$REPEATS" --warmup "$WARMUP" --budget "$BUDGET" | tee -a "$LOG"
    if [[ $HAVE_TORCH == 1 ]]; then
      env "${TORCH_ENV[@]}" OMP_NUM_THREADS="$THREADS" "$TORCH_PY" "$ROOT/bench/torch_step.py" --model "$m" \
        --threads "$THREADS" --repeats "$REPEATS" --warmup "$WARMUP" --budget "$BUDGET" | tee -a "$LOG"
    fi
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"

echo
echo "== results ($OUT)"
python3 "$ROOT/bench/report.py" "$OUT"/round*.log | tee "$OUT/report.md"
