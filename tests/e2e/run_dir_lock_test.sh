#!/usr/bin/env bash
# run_dir_lock_test.sh: one run per run directory. While a run holds its directory, a second
# `mixprec train` on it (new, --resume or --overwrite) refuses with exit code 6 naming the
# directory and the holder's pid and host, and the first run completes intact (every step
# logged once, in order, its checkpoints and pointer its own). kill -9 releases the lock (the
# kernel drops a flock with the process), so --resume works right after. A new run refuses a
# directory holding a finished or partial run (exit 2, naming --resume and --overwrite), leaves
# it untouched, and replaces it with --overwrite; --overwrite with --resume is a usage error.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
BIN="$(cd "$1" && pwd)/mixprec"
WORK=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; rm -rf "$WORK"' EXIT
cd "$WORK"
export OMP_NUM_THREADS=2
COMMON=(--precision fp32 --dataset synthetic --batch-size 32 --epochs 1 --no-eval --no-self-check)
steps() { grep '"type":"step"' "$1/metrics.jsonl" | sed 's/.*"step":\([0-9]*\),.*/\1/' | tr '\n' ' '; }
pointer() { sed 's/.*"checkpoint": *"\([^"]*\)".*/\1/' "$1/last.json" 2> /dev/null; }
wait_for() {  # FILE PATTERN SECONDS: until FILE matches PATTERN (bounded)
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    grep -qE "$2" "$1" 2> /dev/null && return 0
    sleep 0.1
  done
  return 1
}

# ---- two concurrent runs on one directory ----
"$BIN" train "${COMMON[@]}" --max-steps 24 --save-every 2 --run-dir shared > first.log 2>&1 &
first=$!
pids+=("$first")
wait_for shared/run.lock "^pid $first host " 60 || fail "the first run never wrote its pid into shared/run.lock"
wait_for shared/last.json "step-" 120 || fail "the first run saved nothing"
expect concurrent-new 6 "run directory 'shared' is in use by another mixprec process \(pid $first host [^ ]+ since " -- \
  "$BIN" train "${COMMON[@]}" --max-steps 24 --run-dir shared
expect concurrent-resume 6 "'shared' is in use .*pid $first" -- "$BIN" train "${COMMON[@]}" --max-steps 30 --resume shared
expect concurrent-overwrite 6 "'shared' is in use .*pid $first" -- \
  "$BIN" train "${COMMON[@]}" --max-steps 24 --run-dir shared --overwrite
# Only meaningful if the first run was still going: otherwise the refusals above had other causes.
kill -0 "$first" 2> /dev/null && echo "ok   the first run was still running during the refusals" \
  || fail "the first run ended before the second ones started (the test proves nothing; slow it down)"
wait "$first"
code=$?
[[ $code -eq 0 ]] && echo "ok   the first run completes" || { fail "first run: exit $code"; tail -3 first.log; }
want="$(seq -s ' ' 1 24) "
[[ "$(steps shared)" == "$want" ]] && echo "ok   the first run's metrics.jsonl: steps 1-24, each once, in order" \
  || fail "first run's metrics: $(steps shared)"
[[ "$(pointer shared)" == "step-00000024.safetensors" ]] && echo "ok   the first run's last.json names its step 24" \
  || fail "last.json: $(cat shared/last.json)"
expect first-run-checkpoint 0 "global step 24" -- "$BIN" inspect shared
grep -q '"max_steps": 24' shared/config.json && echo "ok   the first run's config.json is its own" \
  || fail "config.json: $(cat shared/config.json)"

# ---- kill -9 releases the lock ----
"$BIN" train "${COMMON[@]}" --max-steps 400 --save-every 1 --run-dir killed > killed.log 2>&1 &
victim=$!
pids+=("$victim")
wait_for killed/last.json "step-" 120 || fail "the run to kill saved nothing"
kill -9 "$victim"
wait "$victim" 2> /dev/null
grep -q "^pid $victim " killed/run.lock && echo "ok   kill -9 leaves the holder line (harmless: the flock is gone)" \
  || fail "run.lock: $(cat killed/run.lock)"
at=$(pointer killed | sed 's/step-0*\([0-9]\)/\1/; s/\.safetensors//')
expect resume-after-kill 0 "summary: $((at + 2)) steps" -- "$BIN" train "${COMMON[@]}" --max-steps $((at + 2)) --resume killed
expect resume-after-kill-again 0 "summary: $((at + 3)) steps" -- \
  "$BIN" train "${COMMON[@]}" --max-steps $((at + 3)) --resume killed

# ---- a new run refuses a directory that holds a run ----
expect refuse-partial 2 "run directory 'killed' already holds a run \(.*\): pass --resume killed to continue it, --overwrite to replace it" -- \
  "$BIN" train "${COMMON[@]}" --max-steps 3 --run-dir killed
# (3 checkpoints: the run saved 12, --keep-checkpoints kept the newest 3)
expect refuse-finished 2 "'shared' already holds a run \(config.json, last.json, metrics.jsonl, 3 checkpoint files\)" -- \
  "$BIN" train "${COMMON[@]}" --max-steps 3 --run-dir shared
[[ "$(steps shared)" == "$want" && "$(pointer shared)" == "step-00000024.safetensors" ]] \
  && echo "ok   the refused run left the finished one untouched" || fail "refused run changed shared: $(steps shared)"
expect overwrite-with-resume 2 "--overwrite: cannot be combined with --resume" -- \
  "$BIN" train "${COMMON[@]}" --max-steps 30 --resume shared --overwrite
expect overwrite 0 "summary: 3 steps" -- "$BIN" train "${COMMON[@]}" --max-steps 3 --save-every 1 --run-dir shared --overwrite
[[ "$(steps shared)" == "1 2 3 " ]] && echo "ok   --overwrite: metrics.jsonl holds only the new run" \
  || fail "--overwrite: metrics $(steps shared)"
left=$(ls shared | grep '^step-' | tr '\n' ' ')
[[ $left == "step-00000001.safetensors step-00000002.safetensors step-00000003.safetensors " &&
   "$(pointer shared)" == "step-00000003.safetensors" ]] \
  && echo "ok   --overwrite: only the new run's checkpoints remain (steps 1-3)" \
  || fail "--overwrite: $(ls shared | tr '\n' ' ')"
grep -q '"max_steps": 3' shared/config.json && echo "ok   --overwrite: config.json is the new run's" \
  || fail "--overwrite: config.json $(cat shared/config.json)"
finish
