#!/usr/bin/env bash
# omp_wait.sh: how the OpenMP runtime's waiting threads cost a training step on a shared
# machine. libgomp (the OpenMP of GCC, which mixprec, oneDNN and Debian's PyTorch all use)
# lets an idle worker spin for about 300,000 iterations (milliseconds) before it sleeps; when
# other processes want the same cores, that spinning takes the time slices the step's own
# threads need. This runs `mixprec bench` under several wait settings, on a quiet machine and
# beside N busy processes of its own making (normal priority, one core each), the settings
# alternating within each round so that outside noise hits them alike; medians over rounds.
#
#   bench/omp_wait.sh [--build-dir build-dev] [--models gpt-tiny,seed-cnn] [--precision amp-bf16]
#       [--threads 2] [--rounds 3] [--steps 15] [--neighbours 0,1]
#       [--settings default,GOMP_SPINCOUNT=30000,GOMP_SPINCOUNT=10000,GOMP_SPINCOUNT=3000,OMP_WAIT_POLICY=passive]
#
# Settings: `default` (neither variable set: libgomp's own default) or an assignment of
# GOMP_SPINCOUNT or OMP_WAIT_POLICY.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-dev MODELS=gpt-tiny,seed-cnn PRECISION=amp-bf16 THREADS=2 ROUNDS=3 STEPS=15 NEIGHBOURS=0,1
SETTINGS=default,GOMP_SPINCOUNT=30000,GOMP_SPINCOUNT=10000,GOMP_SPINCOUNT=3000,OMP_WAIT_POLICY=passive
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --neighbours) NEIGHBOURS=$2; shift 2 ;;
    --settings) SETTINGS=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "omp_wait.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
BIN=$(cd "$ROOT" && cd "$BUILD" && pwd)/mixprec
[[ -x $BIN ]] || { echo "omp_wait.sh: $BIN not built" >&2; exit 1; }
for v in ROUNDS STEPS THREADS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "omp_wait.sh: --${v,,} must be a positive integer, got '${!v}'" >&2; exit 2; }
done
IFS=, read -r -a models <<< "$MODELS"
IFS=, read -r -a settings <<< "$SETTINGS"
IFS=, read -r -a neighbours <<< "$NEIGHBOURS"
for s in "${settings[@]}"; do
  [[ $s == default || $s =~ ^(GOMP_SPINCOUNT=[0-9]+|OMP_WAIT_POLICY=(active|passive|ACTIVE|PASSIVE))$ ]] ||
    { echo "omp_wait.sh: setting '$s' is not default, GOMP_SPINCOUNT=N or OMP_WAIT_POLICY=active|passive" >&2; exit 2; }
done
TMP=$(mktemp -d /tmp/mixprec_omp_wait.XXXXXX)
source "$ROOT/bench/neighbours.sh"  # start_busy, stop_busy, median
trap 'stop_busy; rm -rf "$TMP"' EXIT


echo "# OpenMP wait settings: $PRECISION step, $THREADS threads"
echo
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; $(date -u +%FT%TZ);" \
     "commit $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Command per cell: \`mixprec bench --model M --precision $PRECISION --steps $STEPS --warmup 3 --threads $THREADS\`," \
     "median step ms over $ROUNDS rounds (each round runs every setting once, in turn)."
echo
header="| neighbours | model |"; rule="|---|---|"
for s in "${settings[@]}"; do header+=" $s |"; rule+="---|"; done
echo "$header"; echo "$rule"
for n in "${neighbours[@]}"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "omp_wait.sh: --neighbours takes counts, got '$n'" >&2; exit 2; }
  start_busy "$n"
  for m in "${models[@]}"; do
    for ((r = 0; r < ROUNDS; r++)); do
      for s in "${settings[@]}"; do
        env_args=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
        [[ $s != default ]] && env_args+=("$s")
        ms=$("${env_args[@]}" "$BIN" bench --model "$m" --precision "$PRECISION" --steps "$STEPS" --warmup 3 \
              --threads "$THREADS" --json 2> /dev/null |
             python3 -c 'import json, sys; print(json.load(sys.stdin)["presets"][0]["median_ms"])') ||
          { echo "omp_wait.sh: mixprec bench failed for $m under $s" >&2; exit 1; }
        echo "$ms" >> "$TMP/$n.$m.$s"
      done
    done
    row="| $n | $m |"
    base=$(median < "$TMP/$n.$m.${settings[0]}")
    for s in "${settings[@]}"; do
      med=$(median < "$TMP/$n.$m.$s")
      row+=" $(awk -v a="$med" -v b="$base" 'BEGIN { printf "%.1f (%+.0f%%)", a, 100 * (a / b - 1) }') |"
    done
    echo "$row"
  done
  stop_busy
done
echo
echo "Percentages: against the first setting of the same row."
