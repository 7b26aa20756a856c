#!/usr/bin/env bash
# time_to_accuracy.sh: how long until the model is good: the cnn trained on Fashion-MNIST with
# recipes/fashion-mnist.yaml until test accuracy reaches the target (evaluated every N steps),
# for mixprec and for PyTorch (bench/tta_torch.py) with the same model, recipe and data order
# (bench/data_order writes mixprec's per-epoch order for it), per precision. Training time
# excludes evaluation on both sides.
#
#   bench/time_to_accuracy.sh [--build-dir build-dev] [--target 0.92] [--precisions amp-bf16,fp32]
#       [--eval-every 117] [--threads 2] [--torch-malloc jemalloc|tcmalloc|glibc] [--out DIR]
#
# The peer runs with the allocator given (jemalloc by default: the fastest for this model in
# bench/run_benchmarks.sh's sweeps on this machine kind) and OpenBLAS (scripts/setup --with-torch)
# on its own kernels for this CPU (bench/peer_python removes OPENBLAS_CORETYPE and
# OPENBLAS_L2_SIZE), after a check of its GEMMs against float64 (bench/peer_check.py).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-dev TARGET=0.92 PRECISIONS=amp-bf16,fp32 EVAL_EVERY=117 THREADS=2 MALLOC=jemalloc OUT=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --precisions) PRECISIONS=$2; shift 2 ;;
    --eval-every) EVAL_EVERY=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --torch-malloc) MALLOC=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "time_to_accuracy.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
BUILD=$(cd "$ROOT" && cd "$BUILD" && pwd)
BIN=$BUILD/mixprec ORDER_TOOL=$BUILD/bench/data_order
for f in "$BIN" "$ORDER_TOOL"; do
  [[ -x $f ]] || { echo "time_to_accuracy.sh: $f not built (cmake --build $BUILD --target mixprec-cli data_order)" >&2; exit 1; }
done
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "time_to_accuracy.sh: PyTorch missing (scripts/setup --with-torch)" >&2; exit 1; }
case $MALLOC in
  jemalloc) PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ;;
  tcmalloc) PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ;;
  glibc) PRELOAD="" ;;
  *) echo "time_to_accuracy.sh: --torch-malloc $MALLOC (expected jemalloc, tcmalloc or glibc)" >&2; exit 2 ;;
esac
[[ -z $PRELOAD || -e $PRELOAD ]] || { echo "time_to_accuracy.sh: $PRELOAD missing (scripts/setup --with-torch)" >&2; exit 1; }
OUT=${OUT:-$BUILD/time-to-accuracy/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
cd "$OUT"
export OMP_NUM_THREADS=$THREADS
RECIPE=$ROOT/recipes/fashion-mnist.yaml
EPOCHS=$(sed -n 's/^epochs: *//p' "$RECIPE")
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | grep -o '[0-9]*$'), model $(grep -m1 '^model' /proc/cpuinfo | grep -o '[0-9]*$')), $(nproc) vCPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown); recipe $RECIPE; target $TARGET; eval every $EVAL_EVERY steps; $THREADS threads"
"$ORDER_TOOL" 60000 0 "$EPOCHS" order.bin

# The first evaluation at or above the target in a mixprec run: training seconds at that
# step (its step record's time, minus the evaluations before it).
mixprec_result() {  # RUN_DIR PRECISION
  /usr/bin/python3 - "$1" "$2" "$TARGET" <<'PY'
import json, sys
run, precision, target = sys.argv[1], sys.argv[2], float(sys.argv[3])
steps, evals = {}, []
for line in open(run + "/metrics.jsonl"):
    r = json.loads(line)
    if r["type"] == "step": steps[r["step"]] = r["time"]
    elif r["type"] == "eval": evals.append(r)
spent = 0.0
for e in evals:
    t = steps[e["step"]] - spent
    print(f"RESULT impl=mixprec precision={precision} step={e['step']} epoch={e['epoch'] + 1} "
          f"accuracy={e['accuracy']:.4f} train_seconds={t:.3f}")
    if e["accuracy"] >= target: break
    spent += e.get("seconds", 0.0)
PY
}

for p in ${PRECISIONS//,/ }; do
  "$BIN" train --config "$RECIPE" --precision "$p" --eval-every "$EVAL_EVERY" --threads "$THREADS" \
    --run-dir "mixprec-$p" --overwrite > "mixprec-$p.log" 2>&1 || { echo "mixprec $p failed: $(tail -3 "mixprec-$p.log")" >&2; exit 1; }
  mixprec_result "mixprec-$p" "$p" | tee "mixprec-$p.results"
  mean=$(/usr/bin/python3 -c "import json; print(json.load(open('mixprec-$p/config.json'))['norm_mean'][0])")
  std=$(/usr/bin/python3 -c "import json; print(json.load(open('mixprec-$p/config.json'))['norm_std'][0])")
  LD_PRELOAD=$PRELOAD "$ROOT/bench/peer_python" "$ROOT/bench/tta_torch.py" --order order.bin --mean "$mean" --std "$std" \
    --precision "$p" --epochs "$EPOCHS" --eval-every "$EVAL_EVERY" --target "$TARGET" --threads "$THREADS" \
    > "torch-$p.log" 2>&1 || { echo "torch $p failed: $(tail -3 "torch-$p.log")" >&2; exit 1; }
  grep '^peer_check\|^tta_torch: BLAS' "torch-$p.log" || true  # the peer's GEMM check and OpenBLAS core
  grep '^RESULT impl=torch ' "torch-$p.log" | tee "torch-$p.results"
done

echo
echo "| impl | precision | time to ${TARGET} (s, training only) | at step | accuracy there | best seen |"
echo "|---|---|---|---|---|---|"
/usr/bin/python3 - "$TARGET" $(ls ./*.results) <<'PY'
import re, sys
target = float(sys.argv[1])
times = {}
for path in sys.argv[2:]:
    rows = [dict(re.findall(r"(\w+)=(\S+)", l)) for l in open(path) if l.startswith("RESULT")]
    if not rows: continue
    hit = next((r for r in rows if float(r["accuracy"]) >= target), None)
    best = max(float(r["accuracy"]) for r in rows)
    key = (rows[0]["impl"], rows[0]["precision"])
    if hit:
        times[key] = float(hit["train_seconds"])
        print(f"| {key[0]} | {key[1]} | {float(hit['train_seconds']):.1f} | {hit['step']} | {float(hit['accuracy']):.2%} | {best:.2%} |")
    else:
        print(f"| {key[0]} | {key[1]} | not reached | - | - | {best:.2%} |")
for p in ("amp-bf16", "fp32"):
    a, b = times.get(("mixprec", p)), times.get(("torch", p))
    if a and b: print(f"\n{p}: mixprec reaches {target:.0%} {b / a:.2f}x sooner than PyTorch ({a:.1f} vs {b:.1f} s)")
PY
echo "logs: $OUT"
