#!/usr/bin/env bash
# gpt_context.sh: the built-in gpt (6 layers, 384 wide, 6 heads, byte-level) at long contexts
# (issue 34): at each context, mixprec's training step (`mixprec bench --model FILE`: median and
# min step, peak activation memory) and, beside it in the same run, PyTorch 1.13's step of the
# same model (bench/torch_step.py --context; dense attention, as 1.13 computes it), against
# the step's compute floor counting causal attention FLOPs only (bench/compute_floor.py) at
# the best GEMM rate bench_gemm measures in the same run. The table (bench/gpt_context_report.py)
# says whether mixprec's activation memory grows linearly with the context.
#
#   bench/gpt_context.sh [--contexts 256,512,1024,2048] [--batch-size 4] [--precision amp-bf16]
#       [--threads 2] [--rounds 2] [--steps 5] [--warmup 1] [--peer-alloc tuned]
#       [--build-dir build] [--out DIR] [--quick] [--no-peer]
#
# --precision: fp32, amp-bf16 or o2-bf16 (the peer runs its autocast-bf16 step for o2-bf16:
#   PyTorch has no O2). --quick: 1 round, 2 steps, no warm-up (over those flags), a short bench_gemm.
# --no-peer: mixprec and the floor only (no PyTorch needed). --peer-alloc: the peer's malloc,
#   glibc, tuned or tuned-thp as bench/peer_alloc.sh defines them. --build-dir: where
#   mixprec and bench/bench_gemm were built (Release). Writes the model files, every process's
#   output and report.md into --out (default BUILD/gpt-context/<UTC time>).
# The peer runs through bench/peer_python (OpenBLAS on its own kernels) and checks its GEMMs at
# each context's shapes against float64 (bench/peer_check.py) before timing; mixprec and the
# peer alternate context by context, the one that goes first alternates every round.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONTEXTS=256,512,1024,2048 BATCH=4 PRECISION=amp-bf16 THREADS=2 ROUNDS=2 STEPS=5 WARMUP=1
PEER_ALLOC=tuned BUILD=build OUT="" QUICK=0 NO_PEER=0
die_usage() { echo "gpt_context.sh: $*" >&2; exit 2; }
need_value() { [[ $# -ge 2 && -n $2 ]] || die_usage "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --contexts|--batch-size|--precision|--threads|--rounds|--steps|--warmup|--peer-alloc|--build-dir|--out)
      need_value "$@"
      case "$1" in
        --contexts) CONTEXTS=$2 ;; --batch-size) BATCH=$2 ;; --precision) PRECISION=$2 ;;
        --threads) THREADS=$2 ;; --rounds) ROUNDS=$2 ;; --steps) STEPS=$2 ;; --warmup) WARMUP=$2 ;;
        --peer-alloc) PEER_ALLOC=$2 ;; --build-dir) BUILD=$2 ;; --out) OUT=$2 ;;
      esac
      shift 2 ;;
    --quick) QUICK=1; shift ;;
    --no-peer) NO_PEER=1; shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die_usage "unknown argument '$1' (see --help)" ;;
  esac
done
if ((QUICK)); then ROUNDS=1 STEPS=2 WARMUP=0; fi

positive() { [[ $2 =~ ^[1-9][0-9]{0,6}$ ]] || die_usage "$1: expected a positive integer, got '$2'"; }
positive --batch-size "$BATCH"
positive --threads "$THREADS"
positive --rounds "$ROUNDS"
positive --steps "$STEPS"
[[ $WARMUP =~ ^[0-9]{1,6}$ ]] || die_usage "--warmup: expected 0 or a positive integer, got '$WARMUP'"
[[ $CONTEXTS =~ ^[0-9]+(,[0-9]+)*$ ]] || die_usage "--contexts: expected positive integers separated by commas, got '$CONTEXTS'"
IFS=, read -ra CONTEXT_LIST <<< "$CONTEXTS"
for T in "${CONTEXT_LIST[@]}"; do positive --contexts "$T"; done
[[ $(printf '%s\n' "${CONTEXT_LIST[@]}" | sort -u | wc -l) == "${#CONTEXT_LIST[@]}" ]] ||
  die_usage "--contexts: '$CONTEXTS' names a context twice"
case "$PRECISION" in
  fp32) PEER_PRECISION=fp32 ;;
  amp-bf16|o2-bf16) PEER_PRECISION=amp-bf16 ;;
  *) die_usage "--precision: expected fp32, amp-bf16 or o2-bf16, got '$PRECISION'" ;;
esac
case "$PEER_ALLOC" in glibc|tuned|tuned-thp) ;;
  *) die_usage "--peer-alloc: expected glibc, tuned or tuned-thp, got '$PEER_ALLOC'" ;;
esac

# --build-dir: relative to the current directory, or else to the checkout (as long_context.sh).
[[ -d $BUILD || ! -d $ROOT/$BUILD ]] || BUILD="$ROOT/$BUILD"
[[ -d $BUILD ]] || die_usage "--build-dir: no directory '$BUILD' (here or under $ROOT)"
BUILD="$(cd "$BUILD" && pwd)"
BIN="$BUILD/mixprec" GEMM="$BUILD/bench/bench_gemm"
for p in "$BIN" "$GEMM"; do
  [[ -x $p ]] || { echo "gpt_context.sh: $p missing: cmake --build $BUILD --target mixprec-cli bench_gemm" >&2; exit 1; }
done

# The peer's allocator: the thresholds bench/peer_alloc.sh defines (also run_benchmarks.sh's).
PEER_ENV=()
if [[ $PEER_ALLOC != glibc ]]; then
  . "$ROOT/bench/peer_alloc.sh"
  PEER_ENV=("GLIBC_TUNABLES=$([[ $PEER_ALLOC == tuned ]] && echo "$TUNABLES" || echo "$THP_TUNABLES")")
fi
HAVE_TORCH=0
if ((!NO_PEER)); then
  if "$ROOT/bench/peer_python" -c "import torch" 2>/dev/null; then HAVE_TORCH=1
  else echo "gpt_context.sh: PyTorch not found (bench/peer_python -c 'import torch'): no peer columns; --no-peer silences this" >&2
  fi
fi

OUT="${OUT:-$BUILD/gpt-context/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
# The model files: models/gpt.yaml with only the embedding's context changed.
for T in "${CONTEXT_LIST[@]}"; do
  sed -E "s/^(  - embedding: \{dim: 384, context: )256\}/\1$T}/" "$ROOT/models/gpt.yaml" > "$OUT/gpt-$T.yaml"
  grep -q "context: $T}" "$OUT/gpt-$T.yaml" ||
    { echo "gpt_context.sh: models/gpt.yaml has no 'embedding: {dim: 384, context: 256}' line to change" >&2; exit 1; }
done

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet 2>/dev/null || echo ' (+ uncommitted changes)')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) vCPUs"
  echo "flags: $(grep -o -w -E 'avx2|avx512f|avx512_bf16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "run: contexts $CONTEXTS, batch $BATCH, $PRECISION, $THREADS threads, rounds $ROUNDS, timed steps per process $STEPS after warm-up steps $WARMUP$( ((QUICK)) && echo ' (--quick)')"
  if ((HAVE_TORCH)); then
    echo "peer: PyTorch $("$ROOT/bench/peer_python" -c 'import torch; print(torch.__version__)' 2>/dev/null) through bench/peer_python, its $PEER_PRECISION step, malloc $PEER_ALLOC${PEER_ENV[0]:+ (${PEER_ENV[0]})}"
  fi
  echo "uptime start: $(uptime)"
  echo "threads: $THREADS"
} | tee "$OUT/env.txt"

export OMP_NUM_THREADS="$THREADS"
run_ours() {  # run_ours ROUND CONTEXT
  local f="$OUT/mixprec-$2-r$1.json"
  if ! "$BIN" bench --model "$OUT/gpt-$2.yaml" --precision "$PRECISION" --batch-size "$BATCH" --steps "$STEPS" \
      --warmup "$WARMUP" --threads "$THREADS" --json > "$f" 2> "$OUT/mixprec-$2-r$1.err"; then
    cat "$OUT/mixprec-$2-r$1.err" >&2
    echo "gpt_context.sh: mixprec bench failed at context $2 (above)" >&2
    exit 1
  fi
}
run_peer() {  # run_peer ROUND CONTEXT: torch_step.py checks its GEMMs first (exit 3: wrong peer)
  local f="$OUT/torch-$2-r$1.log" rc=0
  env ${PEER_ENV[@]+"${PEER_ENV[@]}"} "$ROOT/bench/peer_python" "$ROOT/bench/torch_step.py" --model gpt \
    --context "$2" --batch "$BATCH" --precision "$PEER_PRECISION" --repeats "$STEPS" --warmup "$WARMUP" \
    --threads "$THREADS" > "$f" 2>&1 || rc=$?
  if ((rc == 3)); then cat "$f" >&2; echo "gpt_context.sh: the peer's GEMM check failed: not timing a wrong peer" >&2; exit 1; fi
  if ((rc != 0)) || ! grep -q '^RESULT impl=torch model=' "$f"; then
    echo "warning: the peer failed at context $2 (exit $rc; $f): its cells stay empty" >&2
  fi
}
progress() {  # one line per process: what ran and its median step
  if [[ $1 == ours ]]; then
    python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["presets"][0]
print("  context %5s mixprec %9.1f ms (min %9.1f), activations %.1f MiB" % (sys.argv[2], p["median_ms"], p["min_ms"], p["peak_activation_bytes"] / 2**20))' \
      "$OUT/mixprec-$3-r$2.json" "$3"
  else
    awk -v t="$3" '/^RESULT impl=torch model=/ {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "  context %5s PyTorch %9.1f ms (min %9.1f), peak RSS growth %.1f MiB\n", t, v["step_ms"],
               v["step_min_ms"], v["peak_rss_growth_mib"] }' "$OUT/torch-$3-r$2.log"
  fi
}

for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r/$ROUNDS ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))"
  if ((QUICK)); then gemm_args=(--repeats 2 --warmup 1); else gemm_args=(--repeats 5 --warmup 1); fi
  "$GEMM" --threads "$THREADS" "${gemm_args[@]}" > "$OUT/gemm-r$r.log" 2>&1 ||
    { cat "$OUT/gemm-r$r.log" >&2; echo "gpt_context.sh: bench_gemm failed" >&2; exit 1; }
  sed -n 's/^best median/  bench_gemm best median/p' "$OUT/gemm-r$r.log"
  for T in "${CONTEXT_LIST[@]}"; do
    order=(ours peer)
    ((r % 2 == 0)) && order=(peer ours)
    for who in "${order[@]}"; do
      if [[ $who == ours ]]; then run_ours "$r" "$T"; progress ours "$r" "$T"
      elif ((HAVE_TORCH)); then run_peer "$r" "$T"; progress peer "$r" "$T"
      fi
    done
  done
done
echo "uptime end: $(uptime)" | tee -a "$OUT/env.txt"

echo
echo "== results ($OUT)"
python3 "$ROOT/bench/gpt_context_report.py" "$OUT" --contexts "$CONTEXTS" --batch "$BATCH" --precision "$PRECISION" |
  tee "$OUT/report.md"
