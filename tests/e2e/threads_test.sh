#!/usr/bin/env bash
# threads_test.sh: the default thread count (mixprec/core/threads.h) as the commands apply it.
# MIXPREC_THREADS_OTHERS_BUSY stands in for the measurement and MIXPREC_CGROUP_ROOT for the
# cgroup tree (mixprec/core/cpu_quota.h: an empty one, or a fake CPU quota), so nothing here
# depends on the machine's real load or container; --threads and OMP_NUM_THREADS must turn
# the policy off, and say so when they exceed the quota. Beside such a load train and bench
# choose workers by default (choose_workers): the threads' own checks ask for --workers 1.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
SRC_DIR=$(cd "${2:-$(dirname "$0")/../..}" && pwd)
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
TMP=$(mktemp -d /tmp/mixprec_threads_test.XXXXXX)
SERVER_PID=""
trap '[[ -n $SERVER_PID ]] && kill -9 "$SERVER_PID" 2> /dev/null; rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
CORES=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # the cores this process may use, as the policy counts them
BENCH=(bench --model cnn --batch-size 16 --steps 2 --warmup 1 --precision fp32)
adaptive() { env -u OMP_NUM_THREADS MIXPREC_CGROUP_ROOT="$TMP/no-cgroup" "$@"; }
# A fake cgroup tree whose cpu.max holds $2 (QUOTA PERIOD): quota DIR TEXT
quota() { mkdir -p "$TMP/$1" && printf '%s\n' "$2" > "$TMP/$1/cpu.max"; }
quota half "50000 100000"
quota one "100000 100000"
quota bad "lots"
in_cgroup() { local dir=$1; shift; env -u OMP_NUM_THREADS MIXPREC_CGROUP_ROOT="$TMP/$dir" "$@"; }

# Others busy on more cores than there are: 1 thread, said in bench's header and JSON (one
# worker asked for: by default such a load chooses workers, below).
expect bench-adaptive-busy 0 "threads: adaptive \(now 1 of $CORES: other processes busy on ~99.0 cores" -- \
  adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${BENCH[@]}" --workers 1
expect bench-adaptive-busy-json 0 '"threads": 1,' -- adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${BENCH[@]}" --json --workers 1
# The first decision comes before the first timed step (the warm-up is its window): no timed
# step runs on the all-cores count the policy starts with.
every_step_on() {  # every_step_on N: bench --json on stdin, every timed step on N threads
  /usr/bin/python3 -c 'import json, sys; j = json.load(sys.stdin); n = int(sys.argv[1]); sys.exit(not (j["threads"] == n and all(t == n for p in j["presets"] for t in p["step_threads"])))' "$1"
}
if adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${BENCH[@]}" --json --workers 1 2> /dev/null | every_step_on 1; then
  echo "ok   bench-adaptive-busy-every-step"
else
  fail "bench-adaptive-busy-every-step: a timed step ran before the first decision"
fi
expect bench-adaptive-quiet 0 "threads: adaptive \(now $CORES of $CORES: other processes busy on ~0.0 cores" -- \
  adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}"
# Off: --threads N, or OMP_NUM_THREADS; the override is then not even read.
expect bench-flag-wins 0 "threads: 1 \(--threads\)" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}" --threads 1
expect bench-omp-wins 0 "threads: OMP_NUM_THREADS=1" -- \
  env OMP_NUM_THREADS=1 MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}"
expect bench-bad-override 0 "MIXPREC_THREADS_OTHERS_BUSY='lots' ignored: expected cores >= 0" -- \
  adaptive MIXPREC_THREADS_OTHERS_BUSY=lots "$BIN" "${BENCH[@]}" --workers 1  # the real load might choose workers

# A CPU quota caps the default (docker --cpus=0.5: 1 thread whatever the cores), and the header
# says why; explicit counts win over it with a warning; a malformed cpu.max is ignored.
if [[ $CORES -ge 2 ]]; then
  expect bench-quota 0 "threads: adaptive \(now 1 of $CORES: cgroup CPU quota 0.5 cores; other processes busy on ~0.0 cores" -- \
    in_cgroup half MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}"
  # Every timed step, the first included, on the quota's 1 thread.
  if in_cgroup half MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}" --json 2> /dev/null | every_step_on 1; then echo "ok   bench-quota-every-step"; else fail "bench-quota-every-step: a step ran on more threads than the quota's 1"; fi
fi
expect bench-flag-over-quota 0 "warning: --threads 2 starts 2 threads, but this process's cgroup CPU quota \($TMP/one/cpu.max\) is 1 core" -- \
  in_cgroup one "$BIN" "${BENCH[@]}" --threads 2
expect bench-flag-over-quota-header 0 "threads: 2 \(--threads; more than the cgroup CPU quota of 1 core\)" -- \
  in_cgroup one "$BIN" "${BENCH[@]}" --threads 2
expect bench-omp-over-quota 0 "warning: OMP_NUM_THREADS=2 starts 2 threads" -- \
  env OMP_NUM_THREADS=2 MIXPREC_CGROUP_ROOT="$TMP/one" "$BIN" "${BENCH[@]}"
out=$(in_cgroup one "$BIN" "${BENCH[@]}" --threads 1 2>&1)
if [[ $out == *warning* || $out != *"threads: 1 (--threads)"* ]]; then
  fail "bench-flag-within-quota: $(grep -E 'warning|threads:' <<< "$out")"
else
  echo "ok   bench-flag-within-quota"
fi
expect bench-quota-malformed 0 "now $CORES of $CORES: other processes busy on ~0.0 cores, as MIXPREC_THREADS_OTHERS_BUSY says\); $TMP/bad/cpu.max: 'lots' ignored" -- \
  in_cgroup bad MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}"

# train decides once and records the count: config.json, every step line, the banner.
TRAIN=(train --dataset synthetic --batch-size 16 --train-subset 160 --test-subset 32 --no-self-check --precision fp32)
expect train-adaptive 0 "threads +\| 1: adaptive \(now 1 of $CORES" -- \
  adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${TRAIN[@]}" --max-steps 3 --save-every 3 --run-dir a --workers 1
grep -q '"threads": 1,' a/config.json || fail "train-adaptive: config.json does not record threads 1: $(grep threads a/config.json)"
[[ $(grep -c '"type":"step".*"threads":1' a/metrics.jsonl) -eq 3 ]] || fail "train-adaptive: step lines lack \"threads\":1"
# Fewer threads than cores because others are busy, one worker asked for: the banner points at
# --workers; when the batch does not split over them, it says so instead.
if [[ $CORES -ge 2 ]]; then
  expect train-adaptive-workers-hint 0 "--workers $CORES" -- \
    adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${TRAIN[@]}" --max-steps 1 --run-dir none --workers 1
fi
# A resume keeps the recorded count whatever the load says now, and its losses are an
# uninterrupted run's.
expect train-resume-keeps 0 "threads +\| 1 " -- adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" train --resume a --max-steps 6
[[ $(grep -c '"type":"step".*"threads":1' a/metrics.jsonl) -eq 6 ]] || fail "train-resume-keeps: resumed steps not on 1 thread"
expect train-straight 0 "summary" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${TRAIN[@]}" --max-steps 6 --run-dir b --workers 1
compare_losses a b 0 || fail "train-resume-keeps: the resumed run's losses differ from an uninterrupted run's"
expect train-flag-wins 0 "threads +\| 1 " -- adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${TRAIN[@]}" --max-steps 1 --threads 1 --run-dir c
grep -q '"threads": 1,' c/config.json || fail "train-flag-wins: config.json: $(grep threads c/config.json)"
expect train-omp-wins 0 "threads +\| 1 " -- env OMP_NUM_THREADS=1 MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${TRAIN[@]}" --max-steps 1 --run-dir d
grep -q '"threads": 0,' d/config.json || fail "train-omp-wins: config.json: $(grep threads d/config.json)"

# train within a quota: the count recorded is the quota's, the banner says why; --threads above
# it is kept (a run's count is part of its reproducibility) with a warning.
if [[ $CORES -ge 2 ]]; then
  expect train-quota 0 "threads +\| 1: adaptive \(now 1 of $CORES: cgroup CPU quota 0.5 cores" -- \
    in_cgroup half MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${TRAIN[@]}" --max-steps 1 --run-dir e
  grep -q '"threads": 1,' e/config.json || fail "train-quota: config.json: $(grep threads e/config.json)"
  # A run that recorded 0 (OpenMP's default) resumes on OpenMP's default, within the quota.
  expect train-resume-zero-quota 0 "threads +\| 1: OpenMP's default, cgroup CPU quota 0.5 cores" -- \
    in_cgroup half "$BIN" train --resume d --max-steps 2
fi
expect train-flag-over-quota 0 "warning: --threads 2 starts 2 threads, but this process's cgroup CPU quota" -- \
  in_cgroup one "$BIN" "${TRAIN[@]}" --max-steps 1 --threads 2 --run-dir f
grep -q '"threads": 2,' f/config.json || fail "train-flag-over-quota: config.json: $(grep threads f/config.json)"

# predict notes a count below what it could use on stderr; within a quota of 1 core, 1 thread
# is what it could use, so nothing is said.
/usr/bin/python3 - <<'PY'
import struct
header = "{'descr': '|u1', 'fortran_order': False, 'shape': (28, 28), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
open("one.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(784))
PY
out=$(in_cgroup one MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" predict a one.npy 2>&1)
if [[ $? -ne 0 || $out == *"threads:"* ]]; then fail "predict-quota-quiet: $(tail -3 <<< "$out")"; else echo "ok   predict-quota-quiet"; fi
if [[ $CORES -ge 2 ]]; then
  expect predict-busy-note 0 "threads: adaptive \(now 1 of $CORES" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" predict a one.npy
fi

# serve says its count at start-up, and GET /v1/model the current one.
# env itself, not in_cgroup: a shell function would run in a subshell, and killing SERVER_PID
# (the subshell) would leave the server running.
if serve_started serve.log -- env -u OMP_NUM_THREADS MIXPREC_CGROUP_ROOT="$TMP/one" MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" serve a --port 0; then
  if grep -qE "^mixprec serve: threads: adaptive \(now 1 of $CORES" serve.log; then echo "ok   serve-threads-banner"
  else fail "serve-threads-banner: $(cat serve.log)"; fi
  /usr/bin/python3 - "$PORT" <<'PY' && echo "ok   serve-threads-model-info" || fail "serve-threads-model-info"
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=60)
c.request("GET", "/v1/model")
m = json.loads(c.getresponse().read())
assert m["threads"] == 1 and m["thread_policy"].startswith("adaptive (now 1 of"), m
PY
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; SERVER_PID=""
fi

# bench --workers: the step as in-process data-parallel ranks, each on 1 thread unless --threads
# says otherwise; the batch must split over them.
expect bench-workers-header 0 "2 workers \(in-process data-parallel ranks\) x 1 threads" -- \
  adaptive "$BIN" "${BENCH[@]}" --workers 2
/usr/bin/python3 -c 'import json, sys; j = json.load(sys.stdin); p = j["presets"][0]
sys.exit(not (j["workers"] == 2 and j["threads"] == 1 and all(t == 1 for t in p["step_threads"]) and 0 < p["last_loss"] < 10))' \
  < <(adaptive "$BIN" "${BENCH[@]}" --workers 2 --json 2> /dev/null) && echo "ok   bench-workers-json" ||
  fail "bench-workers-json: workers, threads or the loss wrong in bench --workers 2 --json"
expect bench-workers-threads 0 "2 workers \(in-process data-parallel ranks\) x 2 threads" -- \
  adaptive "$BIN" "${BENCH[@]}" --workers 2 --threads 2
expect bench-workers-split 2 "--batch-size: 16 must divide evenly over --workers 3 \(try 15 or 18\)" -- \
  "$BIN" "${BENCH[@]}" --workers 3
expect bench-workers-negative 2 "--workers" -- "$BIN" "${BENCH[@]}" --workers -1
expect bench-workers-many 2 "--workers: must be from 0 \(chosen by the load\) to" -- "$BIN" "${BENCH[@]}" --workers 100000

# The default's workers (mixprec/core/threads.h's choose_workers): with neither --threads nor
# OMP_NUM_THREADS, a new run that finds other processes busy on its cores trains as one worker
# per core, BatchNorm synchronised, and records both; the same run as --workers N --sync-bn,
# bit for bit; quiet, or with a batch that does not split, one step on adaptive threads; a
# resume keeps the recorded count; a BatchNorm model trains as one process does; bench chooses
# alike and says so.
if [[ $CORES -ge 2 && $CORES -le 8 ]]; then
  expect train-auto-workers 0 "threads +\| 1 per worker \($CORES workers, chosen because other" -- \
    adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${TRAIN[@]}" --max-steps 6 --run-dir w
  grep -qE "\"workers\": $CORES,?\$" w/config.json && grep -q '"sync_bn": true,' w/config.json ||
    fail "train-auto-workers: config.json: $(grep -E 'workers|sync_bn' w/config.json)"
  expect train-auto-workers-explicit 0 "summary" -- \
    adaptive "$BIN" "${TRAIN[@]}" --max-steps 6 --run-dir wx --workers "$CORES" --sync-bn
  compare_losses w wx 0 || fail "train-auto-workers: the chosen workers' losses differ from --workers $CORES --sync-bn's"
  expect train-auto-workers-first 0 "summary" -- \
    adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${TRAIN[@]}" --max-steps 3 --save-every 3 --run-dir wr
  expect train-auto-workers-resume 0 "threads +\| 1 per worker \($CORES workers\)" -- \
    adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" train --resume wr --max-steps 6
  compare_losses w wr 0 || fail "train-auto-workers-resume: the resumed run's losses differ from an uninterrupted run's"
  expect train-auto-quiet 0 "threads +\| $CORES: adaptive \(now $CORES of $CORES" -- \
    adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${TRAIN[@]}" --max-steps 1 --run-dir q
  grep -qE '"workers": 1,?$' q/config.json || fail "train-auto-quiet: config.json: $(grep workers q/config.json)"
  odd=$((CORES * 8 + 1))
  expect train-auto-odd-batch 0 "but the batch of $odd does not divide" -- \
    adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" train --dataset synthetic --batch-size $odd --train-subset 160 \
    --test-subset 32 --no-self-check --precision fp32 --max-steps 1 --run-dir odd
  grep -qE '"workers": 1,?$' odd/config.json || fail "train-auto-odd-batch: config.json: $(grep workers odd/config.json)"
  expect train-auto-omp 0 "threads +\| 1 " -- env OMP_NUM_THREADS=1 MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${TRAIN[@]}" --max-steps 1 --run-dir o
  grep -qE '"workers": 1,?$' o/config.json || fail "train-auto-omp: config.json: $(grep workers o/config.json)"
  # A BatchNorm model: the chosen workers normalise over the whole batch (sync_bn), so they
  # train as one process does (to rounding: 1e-3 over 5 fp32 steps); workers without it differ.
  BN=(train --model "$SRC_DIR/models/small-resnet.yaml" --dataset synthetic --batch-size 32 --train-subset 320
      --test-subset 64 --no-self-check --precision fp32 --max-steps 5)
  expect train-auto-workers-bn 0 "BatchNorm synchronised" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${BN[@]}" --run-dir bn-auto
  expect train-bn-one 0 "summary" -- adaptive "$BIN" "${BN[@]}" --workers 1 --threads 1 --run-dir bn-one
  expect train-bn-local 0 "summary" -- adaptive "$BIN" "${BN[@]}" --workers "$CORES" --run-dir bn-local
  compare_losses bn-auto bn-one 1e-3 || fail "train-auto-workers-bn: the chosen workers' BatchNorm model strays from one process's"
  if compare_losses bn-local bn-one 1e-2 > /dev/null; then
    fail "train-auto-workers-bn: per-worker BatchNorm matched one process too: the check has no teeth"
  else echo "ok   train-auto-workers-bn: per-worker statistics (no sync_bn) differ from one process's"; fi
  expect bench-auto-workers 0 "workers: $CORES, chosen because other processes busy on ~99.0 of $CORES cores" -- \
    adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${BENCH[@]}"
  /usr/bin/python3 -c 'import json, sys; j = json.load(sys.stdin)
sys.exit(not (j["workers"] == int(sys.argv[1]) and j["threads"] == 1 and "chosen because" in j["workers_note"]))' "$CORES" \
    < <(adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" "${BENCH[@]}" --json 2> /dev/null) && echo "ok   bench-auto-workers-json" ||
    fail "bench-auto-workers-json: workers, threads or workers_note wrong"
  expect bench-auto-quiet 0 "threads: adaptive \(now $CORES of $CORES" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=0 "$BIN" "${BENCH[@]}"
  expect bench-auto-odd-batch 0 "workers: 1, though other processes busy on ~99.0 of $CORES cores: the batch of $odd does not divide" -- \
    adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" bench --model cnn --batch-size "$odd" --steps 2 --warmup 1 --precision fp32
else
  echo "skip the default's workers: $CORES usable cores (chosen on 2 to 8)"
fi

# eval reports the policy; predict says so on stderr when it runs on fewer cores.
expect eval-adaptive 0 "threads: adaptive \(now 1 of $CORES" -- adaptive MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" eval a
out=$(OMP_NUM_THREADS=1 MIXPREC_THREADS_OTHERS_BUSY=99 "$BIN" eval a 2>&1)
if [[ $out != *accuracy* || $out == *"threads: adaptive"* ]]; then
  fail "eval-omp-wins: eval under OMP_NUM_THREADS failed or reports an adaptive count: $(tail -2 <<< "$out")"
else
  echo "ok   eval-omp-wins"
fi
finish
