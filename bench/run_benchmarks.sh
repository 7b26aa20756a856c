#!/usr/bin/env bash
# run_benchmarks.sh: build (Release) and run the benchmark suite in one command: bench_gemm,
# then per model and precision mixprec's bench_step and the PyTorch peer (bench/torch_step.py),
# each precision in its own process, under every allocator configuration (glibc default,
# glibc with fixed mmap/trim thresholds, the same plus transparent huge pages, jemalloc,
# tcmalloc), interleaved, in ROUNDS rounds;
# then the tables (bench/report.py): the peer configuration that won per model and
# precision, and our ratios against that strongest peer, with the CPU model.
#
#   bench/run_benchmarks.sh [--threads 2] [--rounds 2] [--repeats 5] [--warmup 2] [--budget 20]
#       [--models seed-cnn,cnn,mlp,transformer] [--presets fp32,amp-bf16,amp-fp16,o2-bf16]
#       [--allocs glibc,tuned,tuned-thp,jemalloc,tcmalloc] [--ours-allocs LIST] [--build-dir DIR] [--out DIR]
#       [--no-build]
#
# --allocs: the peer's allocator configurations; --ours-allocs (default: the same list): the
# ones mixprec is also run under, to show that its caching allocator makes it insensitive.
# --no-build: use the bench programs already in --build-dir (e.g. another checkout's build).
# The peer runs through bench/peer_python (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed:
# OpenBLAS on its own kernels for this CPU), after bench/peer_check.py has checked its GEMMs
# against float64 (a failed check stops the run); mixprec runs in the caller's environment.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
THREADS=2
ROUNDS=2
REPEATS=5
WARMUP=2
BUILD="$ROOT/build-bench"
OUT=""
MODELS="seed-cnn,cnn,mlp,transformer"
PRESETS="fp32,amp-bf16,amp-fp16,o2-bf16"
ALLOCS="glibc,tuned,tuned-thp,jemalloc,tcmalloc"
OURS_ALLOCS=""
BUDGET=20  # seconds of timed steps per process: caps slow configurations (bf16 without AVX512)
NO_BUILD=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) THREADS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --warmup) WARMUP="$2"; shift 2 ;;
    --build-dir) BUILD="$2"; shift 2 ;;
    --out) OUT="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --presets) PRESETS="$2"; shift 2 ;;
    --allocs) ALLOCS="$2"; shift 2 ;;
    --ours-allocs) OURS_ALLOCS="$2"; shift 2 ;;
    --budget) BUDGET="$2"; shift 2 ;;
    --no-build) NO_BUILD=1; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_benchmarks.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
OURS_ALLOCS="${OURS_ALLOCS:-$ALLOCS}"
OUT="${OUT:-$BUILD/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
for a in ${ALLOCS//,/ } ${OURS_ALLOCS//,/ }; do
  case "$a" in glibc|tuned|tuned-thp|jemalloc|tcmalloc) ;;
    *) echo "run_benchmarks.sh: --allocs/--ours-allocs: unknown configuration '$a' (glibc, tuned, tuned-thp, jemalloc, tcmalloc)" >&2
       exit 2 ;;
  esac
done

if [[ $NO_BUILD == 1 ]]; then
  for p in bench_step bench_gemm; do
    [[ -x $BUILD/bench/$p ]] || { echo "run_benchmarks.sh: --no-build: $BUILD/bench/$p missing" >&2; exit 1; }
  done
  echo "== using the programs in $BUILD (--no-build)"
else
  echo "== build (Release) in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DMIXPREC_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j"$THREADS" --target bench_step bench_gemm
fi
# The source the programs were built from (with --no-build it may be another checkout).
BUILD_SRC="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)"
BUILD_SRC="${BUILD_SRC:-$ROOT}"

# Libraries the peer configurations need. The system's copies (scripts/setup --with-torch
# installs them) are used when present; otherwise the Debian package is unpacked into the
# build directory (apt-get download + dpkg -x: no root, no change to the system).
LIBDIR=/usr/lib/x86_64-linux-gnu
PRIV="$BUILD/peer-libs"
unpack() {  # unpack PACKAGE into $PRIV/root once; quiet
  local pkg="$1"
  ls "$PRIV"/"$pkg"_*.deb >/dev/null 2>&1 && return 0
  mkdir -p "$PRIV"
  (cd "$PRIV" && apt-get download "$pkg" >/dev/null 2>&1 && dpkg -x "$pkg"_*.deb root) ||
    { echo "warning: could not fetch $pkg" >&2; return 1; }
}
find_lib() {  # find_lib PACKAGE FILE: the path of FILE from the system or the private unpack
  local pkg="$1" file="$2"
  if [[ -e "$LIBDIR/$file" ]]; then echo "$LIBDIR/$file"; return 0; fi
  unpack "$pkg" || return 0
  [[ -e "$PRIV/root$LIBDIR/$file" ]] && echo "$PRIV/root$LIBDIR/$file"
  return 0
}
JEMALLOC="$(find_lib libjemalloc2 libjemalloc.so.2)"
TCMALLOC="$(find_lib libtcmalloc-minimal4 libtcmalloc_minimal.so.4)"
. "$ROOT/bench/peer_alloc.sh"  # TUNABLES, THP_TUNABLES
alloc_env() {  # the env assignments of one allocator configuration
  case "$1" in
    glibc) ;;
    tuned) echo "GLIBC_TUNABLES=$TUNABLES" ;;
    tuned-thp) echo "GLIBC_TUNABLES=$THP_TUNABLES" ;;
    jemalloc) echo "LD_PRELOAD=$JEMALLOC" ;;
    tcmalloc) echo "LD_PRELOAD=$TCMALLOC" ;;
  esac
}
usable() {  # a configuration whose library is missing is dropped with a warning
  case "$1" in
    jemalloc) [[ -n "$JEMALLOC" ]] ;;
    tcmalloc) [[ -n "$TCMALLOC" ]] ;;
    *) true ;;
  esac
}
keep_usable() {
  local out=() a
  for a in ${1//,/ }; do
    if usable "$a"; then out+=("$a"); else echo "warning: no library for allocator '$a': skipped" >&2; fi
  done
  (IFS=,; echo "${out[*]}")
}
ALLOCS="$(keep_usable "$ALLOCS")"
OURS_ALLOCS="$(keep_usable "$OURS_ALLOCS")"

# PyTorch peer: Debian's interpreter, on OpenBLAS for both precisions (torch routes
# autocast-bf16 linear layers through its BLAS too; Debian's default netlib BLAS is 2-30x
# slower and would flatter us). The OpenMP build shares torch's libgomp thread pool.
# bench/peer_python runs /usr/bin/python3 without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# (a preset OPENBLAS_CORETYPE=Haswell pins OpenBLAS to AVX2 kernels on AVX-512 CPUs).
TORCH_PY="$ROOT/bench/peer_python"
BLAS_ENV=""
HAVE_TORCH=0
if "$TORCH_PY" -c "import torch" 2>/dev/null; then
  HAVE_TORCH=1
  if [[ "$(readlink -f $LIBDIR/libblas.so.3)" != *openblas* ]]; then
    unpack libopenblas0-openmp || true
    OB="$PRIV/root$LIBDIR/openblas-openmp"
    if [[ -e "$OB/libblas.so.3" ]]; then
      BLAS_ENV="LD_LIBRARY_PATH=$OB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    else
      echo "warning: no OpenBLAS; the PyTorch peer runs on $(readlink -f $LIBDIR/libblas.so.3) (slow, flatters us)" >&2
    fi
  fi
else
  echo "== PyTorch not found at $TORCH_PY: skipping the PyTorch comparison"
fi

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  if [[ $BUILD_SRC != "$ROOT" ]]; then
    echo "mixprec build: $BUILD from $BUILD_SRC at commit $(git -C "$BUILD_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$BUILD_SRC" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  fi
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) vCPUs"
  echo "flags: $(grep -o -w -E 'avx2|fma|f16c|avx512f|avx512_bf16|avx512_fp16|amx_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "threads: $THREADS, rounds: $ROUNDS, repeats: $REPEATS after $WARMUP warm-ups, budget ${BUDGET}s per process"
  echo "models: $MODELS; presets: $PRESETS"
  echo "peer allocators: $ALLOCS; mixprec allocators: $OURS_ALLOCS"
  echo "alloc tuned: GLIBC_TUNABLES=$TUNABLES"
  echo "alloc tuned-thp: GLIBC_TUNABLES=$THP_TUNABLES (kernel THP mode: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || echo unknown))"
  echo "alloc jemalloc: LD_PRELOAD=${JEMALLOC:-none}"
  echo "alloc tcmalloc: LD_PRELOAD=${TCMALLOC:-none}"
  if [[ $HAVE_TORCH == 1 ]]; then
    echo "peer: PyTorch $("$TORCH_PY" -c 'import torch; print(torch.__version__)' 2>/dev/null) ($TORCH_PY), BLAS: ${BLAS_ENV:-system libblas.so.3 -> $(readlink -f $LIBDIR/libblas.so.3)}"
    echo "openblas env of this shell: $(env | grep '^OPENBLAS_' | sort | tr '\n' ' ' || true)(OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are removed for the peer only)"
  fi
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/env.txt"

# The peer's GEMMs against float64, once up front (every torch_step.py process checks again
# before it times): a faster but wrong peer is not a peer, so a failure stops the run. Its
# OpenBLAS core and GEMM rates go into env.txt for the report.
if [[ $HAVE_TORCH == 1 ]]; then
  echo "== the peer's GEMMs against float64 (bench/peer_check.py)"
  if ! env ${BLAS_ENV:+"$BLAS_ENV"} OMP_NUM_THREADS="$THREADS" "$TORCH_PY" "$ROOT/bench/peer_check.py" \
      --models "$MODELS" --threads "$THREADS" > "$OUT/peer_check.log" 2>&1; then
    cat "$OUT/peer_check.log" >&2
    echo "run_benchmarks.sh: the peer's GEMM check failed: not timing a wrong peer" >&2
    exit 1
  fi
  cat "$OUT/peer_check.log"
  awk '/^RESULT impl=torch-check/ {
      for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = substr($i, length(kv[1]) + 2) }
      gsub("\\+", " ", v["openblas_config"]); gsub("\\+", " ", v["openblas_unset"])
      printf "peer openblas: core %s (openblas_get_config: %s), %s threads; removed from its environment: %s\n",
             v["openblas_core"], v["openblas_config"], v["openblas_threads"], v["openblas_unset"]
      printf "peer gemm check: %s checks, worst relative error f32 %s (bound 1e-5), bf16 %s (bound 2^-8)\n",
             v["checks"], v["f32_err"], v["bf16_err"]
      printf "peer torch.mm 1024^3: f32 %s GFLOP/s, bf16 %s GFLOP/s (median)\n", v["f32_mm_gflops"], v["bf16_mm_gflops"] }' \
    "$OUT/peer_check.log" | tee -a "$OUT/env.txt"
fi

rotate() {  # rotate LIST (comma separated) left by N
  local -a a; IFS=',' read -ra a <<< "$1"
  local n=${#a[@]} k=$(( $2 % ${#a[@]} )) i out=()
  for ((i = 0; i < n; i++)); do out+=("${a[(i + k) % n]}"); done
  echo "${out[@]}"
}
in_list() { [[ ",$2," == *",$1,"* ]]; }

# Every program's RESULT lines get the configuration they ran under ("alloc=..."). A
# process that fails is reported and skipped: one broken configuration must not lose the run.
tagged() {  # tagged LOG ALLOC ENV... -- CMD...
  local log="$1" alloc="$2"; shift 2
  local envs=()
  while [[ "$1" != "--" ]]; do [[ -n "$1" ]] && envs+=("$1"); shift; done
  shift
  local tmp rc=0
  tmp="$(mktemp)"
  env ${envs[@]+"${envs[@]}"} "$@" > "$tmp" 2>&1 || rc=$?
  sed "s/^RESULT /RESULT alloc=$alloc /" "$tmp" >> "$log"
  # One progress line per result: configuration, program, model, precision, median step.
  awk -v a="$alloc" '/^RESULT impl=(mixprec|torch) / {
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      printf "  %-8s %-7s %-11s %-8s step %9.1f ms (min %9.1f, n %s)%s\n", a, v["impl"], v["model"],
             v["precision"], v["step_ms"], v["step_min_ms"], v["n"], (v["malloc"] ? "  malloc " v["malloc"] ", blas " v["blas"] : "") }' "$tmp"
  rm -f "$tmp"
  if [[ $rc == 3 && "$*" == *torch_step.py* ]]; then  # bench/peer_check.py's PEER_CHECK_FAILED
    echo "run_benchmarks.sh: the peer's GEMM check failed under $alloc: not timing a wrong peer" | tee -a "$log" >&2
    exit 1
  fi
  if [[ $rc != 0 ]]; then echo "warning: exit code $rc under $alloc: $*" | tee -a "$log" >&2; fi
}

export OMP_NUM_THREADS="$THREADS"
IFS=',' read -ra MODEL_LIST <<< "$MODELS"
IFS=',' read -ra PRESET_LIST <<< "$PRESETS"
for r in $(seq 1 "$ROUNDS"); do
  LOG="$OUT/round$r.log"
  : > "$LOG"
  echo "== round $r/$ROUNDS ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))"
  "$BUILD/bench/bench_gemm" --threads "$THREADS" --repeats 5 --warmup 1 >> "$LOG" 2>&1 ||
    echo "warning: bench_gemm failed" | tee -a "$LOG" >&2
  for m in "${MODEL_LIST[@]}"; do
    for p in "${PRESET_LIST[@]}"; do
      # The allocator order rotates every round; ours and the peer alternate per configuration.
      for a in $(rotate "$(echo "$ALLOCS,$OURS_ALLOCS" | tr ',' '\n' | awk '!s[$0]++' | paste -sd,)" $((r - 1))); do
        if in_list "$a" "$OURS_ALLOCS"; then
          tagged "$LOG" "$a" "$(alloc_env "$a")" -- "$BUILD/bench/bench_step" --model "$m" --precision "$p" \
            --threads "$THREADS" --repeats "$REPEATS" --warmup "$WARMUP" --budget "$BUDGET"
        fi
        if [[ $HAVE_TORCH == 1 ]] && in_list "$a" "$ALLOCS" && in_list "$p" "fp32,amp-bf16"; then
          tagged "$LOG" "$a" "$(alloc_env "$a")" "$BLAS_ENV" -- "$TORCH_PY" "$ROOT/bench/torch_step.py" --model "$m" \
            --precision "$p" --threads "$THREADS" --repeats "$REPEATS" --warmup "$WARMUP" --budget "$BUDGET"
        fi
      done
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"

echo
echo "== results ($OUT)"
python3 "$ROOT/bench/report.py" --env "$OUT/env.txt" "$OUT"/round*.log | tee "$OUT/report.md"
