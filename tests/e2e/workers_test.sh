#!/usr/bin/env bash
# workers_test.sh: `mixprec train --workers N`, a data-parallel run whose ranks are threads of
# one process (docs/distributed.md, "Workers in one process"):
#  - the same run as `mpirun -np 2 ... --threads 1`: losses and final weights bit for bit, an
#    MLP in fp32 and amp-bf16 and a BatchNorm model (its buffers from rank 0) (skipped, and
#    said so, only where mpirun or an MPI build is missing: scripts/setup installs OpenMPI);
#  - evaluation sharded over the workers: one process's accuracy on the same test samples;
#  - a resume continues exactly: 4 steps, then 4 more, equal an uninterrupted 8, and the run
#    keeps its worker count (config.json; --workers is fixed on resume);
#  - Ctrl-C stops every worker after the same step with a checkpoint (exit 130), and the run
#    resumes from it;
#  - the memory check counts every worker (one fits in 30 MiB, two do not: exit 8);
#  - refusals naming the flag: a batch that does not split over the workers, a worker count
#    above the machine's bound and --workers inside an mpirun job (exit 2), another count on
#    resume (exit 4, as every setting fixed on resume).
# Nothing here depends on timing: the Ctrl-C waits for a checkpoint file, not a clock.
# Args: BUILD_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_workers.XXXXXX)
trap 'pkill -KILL -f "$TMP" 2> /dev/null; rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/data_parallel_lib.sh"  # write_dp_models, dump_weights
cd "$TMP" || exit 1

write_dp_models
COMMON=(--train-subset 4096 --test-subset 512 --threads 1 --no-self-check --batch-size 64)

# losses DIR: every step's loss in the run's metrics, one per line.
losses() { "$PY" -c 'import json, sys
for line in open(sys.argv[1] + "/metrics.jsonl"):
    r = json.loads(line)
    if "loss" in r and "step" in r: print(r["step"], repr(r["loss"]))' "$1"; }
# same_run A B WHAT: the two runs' losses and final weights are identical.
same_run() {
  local a=$1 b=$2 what=$3
  if [[ -s $a/metrics.jsonl ]] && cmp -s <(losses "$a") <(losses "$b") && cmp -s <(dump_weights "$a") <(dump_weights "$b"); then
    echo "ok   $what: $(losses "$a" | wc -l) steps, losses and weights bit for bit"
  else
    fail "$what: runs differ"; diff <(losses "$a") <(losses "$b") | head -6
  fi
}

# ---- the same run as mpirun -np 2 ----
mpi=""
if ! command -v mpirun > /dev/null; then
  echo "skip mpirun comparisons: no mpirun (scripts/setup installs openmpi-bin)"
elif [[ $(ldd "$BIN") != *libmpi* ]]; then
  echo "skip mpirun comparisons: $BIN was built without MPI"
else
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  if [[ ${ASAN_OPTIONS:-} == *detect_leaks=1* ]]; then  # OpenMPI's own allocations at MPI_Finalize
    export ASAN_OPTIONS=${ASAN_OPTIONS//detect_leaks=1/detect_leaks=0}
  fi
  mpi=(mpirun --oversubscribe -np 2)
fi
for case in "mlp fp32" "mlp amp-bf16" "bn amp-bf16"; do
  read -r model precision <<< "$case"
  A=(train --model "$TMP/$model.yaml" "${COMMON[@]}" --precision "$precision" --max-steps 12 --no-eval)
  expect "$model $precision: banner says 2 workers" 0 "2 ranks \(threads\): global batch 64 = 2 x 32 per rank" -- \
    "$BIN" "${A[@]}" --workers 2 --run-dir w-$model-$precision
  [[ -n $mpi ]] || continue
  "${mpi[@]}" "$BIN" "${A[@]}" --run-dir m-$model-$precision > m.log 2>&1 || { fail "mpirun $case: exit $?"; tail -3 m.log; }
  same_run w-$model-$precision m-$model-$precision "$model $precision: --workers 2 and mpirun -np 2"
done

# ---- evaluation over the workers' shards: one process's figures ----
E=(train --model "$TMP/mlp.yaml" "${COMMON[@]}" --precision fp32 --max-steps 4 --run-dir none)
acc() { tr '\r' '\n' | grep -o "best test accuracy [0-9.]*%" | tail -1; }
one=$("$BIN" "${E[@]}" 2>&1 | acc)
two=$("$BIN" "${E[@]}" --workers 2 2>&1 | acc)
if [[ -n $one && $one == "$two" ]]; then echo "ok   evaluation over 2 workers: $two, as one process"
else fail "evaluation: one process '$one', 2 workers '$two'"; fi

# ---- resume: 4 + 4 steps are the uninterrupted 8 ----
R=(train --model "$TMP/bn.yaml" "${COMMON[@]}" --precision amp-bf16 --no-eval --workers 2)
"$BIN" "${R[@]}" --max-steps 8 --run-dir straight > /dev/null 2>&1 || fail "uninterrupted run: exit $?"
"$BIN" "${R[@]}" --max-steps 4 --run-dir halves > /dev/null 2>&1 || fail "first half: exit $?"
expect "resume keeps the workers" 0 "2 ranks \(threads\): global batch 64" -- "$BIN" train --resume halves --max-steps 8
same_run straight halves "resumed --workers 2 run"
grep -q '"workers": 2' halves/config.json && echo "ok   config.json records the workers" ||
  fail "config.json lacks \"workers\": 2"

# ---- Ctrl-C: every worker stops after the same step, with a checkpoint ----
("$BIN" "${R[@]}" --epochs 100000 --max-steps 10000000 --save-every 5 --run-dir stopped > stop.log 2>&1; echo $? > stop.rc) &
for _ in $(seq 600); do [[ -e stopped/step-00000005.safetensors ]] && break; sleep 0.1; done
pid=$(pgrep -f "mixprec train .*--run-dir stopped" | head -1)
[[ -n $pid ]] && kill -INT "$pid"
wait
if [[ -n $pid && $(cat stop.rc) -eq 130 ]] && grep -q "interrupted at step" stop.log; then
  echo "ok   Ctrl-C stops the workers with a checkpoint (exit 130)"
else
  fail "Ctrl-C: pid '$pid', exit $(cat stop.rc 2> /dev/null)"; tr '\r' '\n' < stop.log | tail -5
fi
at=$(tr '\r' '\n' < stop.log | grep -o "interrupted at step [0-9]*" | grep -o "[0-9]*$" | tail -1)
expect "the stopped run resumes" 0 "summary:" -- "$BIN" train --resume stopped --max-steps $((${at:-0} + 3))

# ---- refusals ----
# The memory check counts every worker's replica and activations: 1 worker fits in 30 MiB, 2 do not.
expect "memory of one worker" 0 "summary:" -- env MIXPREC_MEMORY_LIMIT=30M \
  "$BIN" train --model seed-cnn --dataset synthetic --batch-size 64 --max-steps 1 --run-dir none --no-eval --workers 1
expect "memory of two workers" 8 "not enough memory for this run: .*x 2 workers" -- env MIXPREC_MEMORY_LIMIT=30M \
  "$BIN" train --model seed-cnn --dataset synthetic --batch-size 64 --max-steps 1 --run-dir none --no-eval --workers 2
# Workers the default chose beside busy processes (no --threads, no OMP_NUM_THREADS) that do
# not fit: the message says they were chosen, and how to train one replica.
if [[ $(env -u OMP_NUM_THREADS nproc) -eq 2 ]]; then
  expect "memory of the default's workers" 8 "the default chose 2 workers, a replica each, because other processes busy on ~99.0 of 2 cores: --workers 1 trains one" -- \
    env -u OMP_NUM_THREADS MIXPREC_THREADS_OTHERS_BUSY=99 MIXPREC_CGROUP_ROOT="$TMP/no-cgroup" MIXPREC_MEMORY_LIMIT=30M \
    "$BIN" train --model seed-cnn --dataset synthetic --batch-size 64 --max-steps 1 --run-dir none --no-eval
fi
expect "a batch that does not split" 2 "--batch-size: 64 must divide evenly over --workers 3 \(try 63 or 66\)" -- \
  "$BIN" train --model "$TMP/mlp.yaml" "${COMMON[@]}" --max-steps 1 --run-dir none --workers 3
expect "too many workers" 2 "--workers: must be from 0 \(chosen by the load\) to" -- \
  "$BIN" train --model "$TMP/mlp.yaml" "${COMMON[@]}" --max-steps 1 --run-dir none --workers 100000
expect "another worker count on resume" 4 "--workers: cannot change on --resume: the run was trained with '2', given '4'" -- \
  "$BIN" train --resume halves --max-steps 9 --workers 4
if [[ -n $mpi ]]; then
  expect "--workers inside mpirun" 2 "use one or the other" -- \
    "${mpi[@]}" "$BIN" train --model "$TMP/mlp.yaml" "${COMMON[@]}" --max-steps 1 --run-dir none --workers 2
fi
finish
