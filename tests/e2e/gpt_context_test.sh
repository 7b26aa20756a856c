#!/usr/bin/env bash
# gpt_context_test.sh: bench/gpt_context.sh (gpt at long contexts, issue 34) without the
# PyTorch peer: its options are validated (exit 2 with a message), a --quick run at contexts
# 64 and 128 on the built mixprec and bench_gemm reports both rows with a step, a share of the
# causal floor and the activation memory per position; and its report's arithmetic
# (bench/gpt_context_report.py, bench/compute_floor.py's causal count) against hand-made
# inputs. No timing assertion: the figures only have to be there. About 50 s at load 10-12 on 2 vCPUs.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$1 SOURCE_DIR=$2
source "$SOURCE_DIR/tests/e2e/expect.sh"
[[ -x $BUILD_DIR/mixprec && -x $BUILD_DIR/bench/bench_gemm ]] ||
  { echo "skipped: needs mixprec and bench/bench_gemm in $BUILD_DIR"; exit 77; }
command -v python3 > /dev/null || { echo "skipped: no python3"; exit 77; }
SCRIPT="$SOURCE_DIR/bench/gpt_context.sh"
TMP=$(mktemp -d /tmp/mixprec_gpt_context.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# Options.
expect "--help" 0 "--contexts 256,512,1024,2048" -- "$SCRIPT" --help
expect "--contexts 0" 2 "--contexts: expected a positive integer, got '0'" -- "$SCRIPT" --contexts 0
expect "--contexts with an empty item" 2 "positive integers separated by commas" -- "$SCRIPT" --contexts 64,,128
expect "--contexts twice the same" 2 "names a context twice" -- "$SCRIPT" --contexts 64,64
expect "--batch-size x" 2 "--batch-size: expected a positive integer" -- "$SCRIPT" --batch-size x
expect "--precision amp-fp16" 2 "--precision: expected fp32, amp-bf16 or o2-bf16" -- "$SCRIPT" --precision amp-fp16
expect "--peer-alloc jemalloc" 2 "--peer-alloc: expected glibc, tuned or tuned-thp" -- "$SCRIPT" --peer-alloc jemalloc
expect "--warmup -1" 2 "--warmup: expected 0 or a positive integer" -- "$SCRIPT" --warmup -1
expect "a flag without its value" 2 "--threads needs a value" -- "$SCRIPT" --threads
expect "an unknown flag" 2 "unknown argument '--context'" -- "$SCRIPT" --context 64
expect "a missing build dir" 2 "--build-dir: no directory" -- "$SCRIPT" --build-dir "$TMP/none"

# A quick run on the built binaries, no peer.
out=$("$SCRIPT" --quick --contexts 64,128 --no-peer --build-dir "$BUILD_DIR" --out "$TMP/run" 2>&1)
rc=$?
if [[ $rc != 0 ]]; then fail "quick run: exit $rc"; echo "$out" | tail -20
else
  report="$TMP/run/report.md"
  num='[0-9]+\.[0-9]+'
  for T in 64 128; do
    [[ -s $TMP/run/gpt-$T.yaml ]] && grep -q "context: $T}" "$TMP/run/gpt-$T.yaml" ||
      fail "quick run: no model file gpt-$T.yaml with context $T"
    # | context | floor | mixprec median (min) | % of floor | peer – | ratio – | MiB | MiB per 1k positions | –
    if grep -qE "^\| $T \| $num \| $num \($num\) \| [0-9]+% \| – \(–\) \| – \| $num \| $num \| – \|$" "$report"; then
      echo "ok   quick run: the context $T row has a step, a share of the floor and memory per position"
    else fail "quick run: no complete row for context $T in the report"; cat "$report"
    fi
  done
  expect "quick run: the verdict on memory per position" 0 \
    "activation memory per 1k positions: $num MiB at context 64, $num at 128" -- cat "$report"
  expect "quick run: uptime, CPU and quiet? lines" 0 "uptime end: .*load average" -- \
    bash -c "grep -q '^- cpu: ' '$report' && grep -q '^- uptime start: ' '$report' && grep -q '^- quiet? ' '$report' && cat '$report'"
fi

# The report's arithmetic on hand-made results: 2 rounds, contexts 100 and 200, batch 2.
mk() {  # mk DIR ROUND CONTEXT MEDIAN_MS MIN_MS ACT_BYTES
  printf '{"presets": [{"median_ms": %s, "min_ms": %s, "peak_activation_bytes": %s}]}\n' "$4" "$5" "$6" \
    > "$1/mixprec-$3-r$2.json"
}
fake() {  # fake DIR ACT100 ACT200: activation bytes at contexts 100 and 200
  mkdir -p "$1"
  printf 'cpu: test\nuptime start: 00:00 up 1 day, load average: 0.10, 0.10, 0.10\nuptime end: 00:01 up 1 day, load average: 2.20, 1.00, 0.50\nthreads: 2\n' > "$1/env.txt"
  echo "RESULT impl=onednn-gemm-best threads=2 bf16_gflops=100.00 f32_gflops=50.00" > "$1/gemm-r1.log"
  echo "RESULT impl=onednn-gemm-best threads=2 bf16_gflops=200.00 f32_gflops=90.00" > "$1/gemm-r2.log"
  mk "$1" 1 100 40 35 "$2"; mk "$1" 2 100 60 30 "$2"; mk "$1" 1 200 80 70 "$3"; mk "$1" 2 200 100 75 "$3"
  echo "RESULT impl=torch model=gpt precision=amp-bf16 step_ms=100.0 step_min_ms=90.0 peak_rss_growth_mib=300.0" \
    > "$1/torch-100-r1.log"
  echo "RESULT impl=torch model=gpt precision=amp-bf16 step_ms=180.0 step_min_ms=95.0 peak_rss_growth_mib=500.0" \
    > "$1/torch-100-r2.log"
}
REPORT="$SOURCE_DIR/bench/gpt_context_report.py"
# The causal floor, from an independent count: per layer 12 d^2 multiply-adds per token for the
# linear layers and d per query-key pair at or below the diagonal for each of the two attention
# products; plus the tied head (d x 256); 3 passes each; 2 FLOP per multiply-add.
floor100=$(python3 -c "
b, T, d, L = 2, 100, 384, 6
pairs = sum(1 for i in range(T) for j in range(i + 1))
macs = L * (12 * d * d * b * T + 2 * b * pairs * d) + b * T * d * 256
print('%.1f' % (2 * 3 * macs / 1e9 / 200 * 1e3))")  # at the best bf16 rate of the two rounds, 200 GFLOP/s
fake "$TMP/linear" 1000000 2000000
expect "report: floor at the run's best rate, median step, its share" 0 \
  "^\| 100 \| $floor100 \| 50\.0 \(30\.0\) \| [0-9]+% \| 140\.0 \(90\.0\) \| 2\.75x \| 1\.0 \| 4\.77 \| 400\.0 \|" -- \
  python3 "$REPORT" "$TMP/linear" --contexts 100,200 --batch 2 --precision amp-bf16
expect "report: memory proportional to the context is linear" 0 \
  "4\.77 MiB at context 100, 4\.77 at 200 \(x1\.00\): linear" -- \
  python3 "$REPORT" "$TMP/linear" --contexts 100,200 --batch 2 --precision amp-bf16
expect "report: the quiet rule (0.10 at the start, 2.20 < 2 threads + 0.5 at the end)" 0 "quiet\? yes" -- \
  python3 "$REPORT" "$TMP/linear" --contexts 100,200 --batch 2 --precision amp-bf16
fake "$TMP/quadratic" 1000000 4000000
expect "report: memory quadratic in the context is not linear" 0 "\(x2\.00\): grows faster than linear" -- \
  python3 "$REPORT" "$TMP/quadratic" --contexts 100,200 --batch 2 --precision amp-bf16
finish
