#!/usr/bin/env bash
# busy_machine.sh: a training step beside other processes' busy threads on the same cores
# (issue 34's target: the default step slows down no more than its fair share allows, at
# most 2x beside 2 busy threads on 2 cores and 4x beside 4). Runs `mixprec bench` under
# each thread setting, on a quiet machine and beside N busy loops of the script's own (same
# session, hence the same autogroup as the step: the scheduler shares the cores between them
# as it would between a user's own jobs), the settings alternating within each round so that
# outside noise hits them alike; medians over rounds, and each cell's ratio to the same
# setting's row without neighbours.
#
#   bench/busy_machine.sh [--build-dir build-dev] [--models gpt-tiny,seed-cnn] [--precision amp-bf16]
#       [--rounds 3] [--steps 10] [--neighbours 0,2,4] [--settings all-cores,adaptive,threads,one]
#
# Settings: `all-cores` is the first default (--threads = the usable cores, libgomp's wait),
# `adaptive` the default (no --threads, --workers or OMP_NUM_THREADS: mixprec/core/threads.h;
# the adaptive thread count, or one worker per core when other processes keep cores busy at the
# start; the cell shows [tN] the thread count its timed steps ran on or [wN] the workers),
# `threads` the adaptive thread count alone (--workers 1: the default before it chose
# workers), `one` is --threads 1, and `torch`
# the PyTorch 1.13 peer (bench/peer_python bench/torch_step.py on all cores; slow beside
# neighbours, so not in the default list), and `workers` is --workers <usable cores> (the step
# as one-thread workers, in-process data-parallel ranks each on its share of the batch, meeting
# at the step's few collectives instead of at every OpenMP region's barrier).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-dev MODELS=gpt-tiny,seed-cnn PRECISION=amp-bf16 ROUNDS=3 STEPS=10 NEIGHBOURS=0,2,4
SETTINGS=all-cores,adaptive,threads,one
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --neighbours) NEIGHBOURS=$2; shift 2 ;;
    --settings) SETTINGS=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "busy_machine.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
BIN=$(cd "$ROOT" && cd "$BUILD" && pwd)/mixprec
[[ -x $BIN ]] || { echo "busy_machine.sh: $BIN not built" >&2; exit 1; }
for v in ROUNDS STEPS; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "busy_machine.sh: --${v,,} must be a positive integer, got '${!v}'" >&2; exit 2; }
done
IFS=, read -r -a models <<< "$MODELS"
IFS=, read -r -a settings <<< "$SETTINGS"
IFS=, read -r -a neighbours <<< "$NEIGHBOURS"
for s in "${settings[@]}"; do
  [[ $s =~ ^(all-cores|adaptive|threads|one|torch|workers)$ ]] ||
    { echo "busy_machine.sh: setting '$s' is not all-cores, adaptive, threads, one, torch or workers" >&2; exit 2; }
done
for n in "${neighbours[@]}"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "busy_machine.sh: --neighbours takes counts, got '$n'" >&2; exit 2; }
done
CORES=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
TMP=$(mktemp -d /tmp/mixprec_busy_machine.XXXXXX)
source "$ROOT/bench/neighbours.sh"  # start_busy, stop_busy, median
trap 'stop_busy; rm -rf "$TMP"' EXIT


# One cell's run: prints "MEDIAN_MS COUNT", COUNT tN (the most frequent thread count of the timed
# steps) or wN (the step ran as N workers).
run_setting() {
  local s=$1 m=$2
  local bench=("$BIN" bench --model "$m" --precision "$PRECISION" --steps "$STEPS" --warmup 3 --json)
  local pick='import json, sys
r = json.load(sys.stdin); p = r["presets"][0]; t = p.get("step_threads") or [r["threads"]]
w = r.get("workers", 1)
print(p["median_ms"], "w%d" % w if w > 1 else "t%d" % max(set(t), key=t.count))'
  case $s in
    all-cores) env -u OMP_NUM_THREADS "${bench[@]}" --threads "$CORES" 2> /dev/null | python3 -c "$pick" ;;
    adaptive) env -u OMP_NUM_THREADS -u MIXPREC_THREADS_OTHERS_BUSY "${bench[@]}" 2> /dev/null | python3 -c "$pick" ;;
    threads) env -u OMP_NUM_THREADS -u MIXPREC_THREADS_OTHERS_BUSY "${bench[@]}" --workers 1 2> /dev/null |
      python3 -c "$pick" ;;
    one) env -u OMP_NUM_THREADS "${bench[@]}" --threads 1 2> /dev/null | python3 -c "$pick" ;;
    workers) env -u OMP_NUM_THREADS "${bench[@]}" --workers "$CORES" 2> /dev/null | python3 -c "$pick" ;;
    torch)
      local prec=$PRECISION
      "$ROOT/bench/peer_python" "$ROOT/bench/torch_step.py" --model "$m" --precision "$prec" --repeats "$STEPS" \
        --warmup 3 --threads "$CORES" 2> /dev/null |
        sed -n "s/^RESULT impl=torch model=$m precision=$prec threads=\([0-9]*\) .*step_ms=\([0-9.]*\) .*/\2 \1/p" | head -1 ;;
  esac
}

echo "# Beside busy neighbours: $PRECISION step"
echo
echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $CORES usable CPUs; $(date -u +%FT%TZ);" \
     "commit $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "Per cell: \`mixprec bench --model M --precision $PRECISION --steps $STEPS --warmup 3\` with the setting's threads," \
     "median step ms over $ROUNDS rounds (each round runs every setting once, in turn); [tN]: the thread count" \
     "of most timed steps, [wN]: N workers (the rounds' most frequent); (x): the ratio to the same setting without neighbours;" \
     "{x}: the ratio to the adaptive default's row without neighbours (issue 34's measure). A neighbour is a busy loop."
echo
header="| neighbours | model |"; rule="|---|---|"
for s in "${settings[@]}"; do header+=" $s |"; rule+="---|"; done
echo "$header"; echo "$rule"
for n in "${neighbours[@]}"; do
  start_busy "$n"
  for m in "${models[@]}"; do
    for ((r = 0; r < ROUNDS; r++)); do
      for s in "${settings[@]}"; do
        out=$(run_setting "$s" "$m") && [[ -n $out ]] ||
          { echo "busy_machine.sh: $s failed for $m beside $n neighbours" >&2; exit 1; }
        echo "${out% *}" >> "$TMP/$n.$m.$s.ms"
        echo "${out#* }" >> "$TMP/$n.$m.$s.threads"
      done
    done
    row="| $n | $m |"
    for s in "${settings[@]}"; do
      med=$(median < "$TMP/$n.$m.$s.ms")
      echo "$med" > "$TMP/med.$n.$m.$s"
      t=$(sort "$TMP/$n.$m.$s.threads" | uniq -c | sort -rn | awk 'NR == 1 { print $2 }')
      quiet=$(cat "$TMP/med.${neighbours[0]}.$m.$s" 2> /dev/null || echo "$med")
      default=$(cat "$TMP/med.${neighbours[0]}.$m.adaptive" 2> /dev/null || echo 0)
      row+=" $(awk -v a="$med" -v b="$quiet" -v t="$t" -v d="$default" \
        'BEGIN { printf "%.1f [%s] (%.2fx)", a, t, a / b; if (d > 0) printf " {%.2fx}", a / d }') |"
    done
    echo "$row"
  done
  stop_busy
done
echo
echo "Ratios: against the first --neighbours count's row (give 0 first), same setting. Issue 34's target for the"
echo "default on 2 cores: at most 2x beside 2 busy threads, 4x beside 4."
