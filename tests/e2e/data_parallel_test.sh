#!/usr/bin/env bash
# data_parallel_test.sh: `mpirun -np 2 mixprec train` (issue 16, docs/distributed.md) against
# one process:
#  - equivalence: 2 ranks x 32 give the losses of 1 rank x 64, fp32 within 1e-6 relative per
#    step over 50 steps, amp-bf16 within 1e-2;
#  - gradient buckets started during backward (--bucket-mb) end with the weights of one
#    reduction after backward, bit for bit (fp32, o2-bf16); the summary reports the wait;
#  - --allreduce-dtype bf16 stays within 2e-2 of one process and differs from the f32 wire;
#  - --sync-bn: a BatchNorm model on 2 ranks x 32 matches 1 process x 64 within 1e-5 (and
#    does not without it);
#  - evaluation sharded over the ranks gives one process's accuracy and loss on all 512
#    test samples;
#  - --on-divergence rollback: a NaN loss rolls every rank back to the same checkpoint and the
#    run ends with one process's losses;
#  - found-inf consensus: an overflow injected on rank 0 only makes both ranks skip that step
#    and halves the scale once, as in one process;
#  - BatchNorm: running statistics stay identical on the ranks (the replica check passes);
#  - refusals: a global batch that does not split over the ranks (exit 2), ranks with
#    different settings (exit 7, naming the setting);
#  - failures: a rank killed with -9 ends the job within 30 s naming the rank, the last
#    checkpoint resumes with 2 ranks and ends bit-identical to an uninterrupted run; a rank
#    that hangs (SIGSTOP) ends the job with exit 7 within --dist-timeout + a margin;
#  - SIGUSR1 to mpirun stops every rank after the same step with a checkpoint (exit 130);
#  - resuming a 1-process run with 2 ranks continues it (same global batches).
# Skips (77) only when this mixprec was built without MPI or mpirun is missing (scripts/setup
# installs OpenMPI, so CI runs it). OpenMPI refuses root unless told; CI runs as root.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
if ! command -v mpirun > /dev/null; then echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; fi
# ldd's output whole, then the test: `ldd | grep -q` under pipefail fails whenever grep quits
# before ldd has written everything (SIGPIPE), which skipped this test on a busy machine.
deps=$(ldd "$BIN")
if [[ $deps != *libmpi* ]]; then echo "SKIP: $BIN was built without MPI (no libopenmpi-dev at configure)"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Under scripts/sanitize: OpenMPI leaks allocations of its own at MPI_Finalize (libmpi's op
# selection, libopen-pal, MCA components it has unloaded, so LeakSanitizer cannot even name
# them), which would fail every rank. Leak detection is off for these processes only; ASan's
# memory checks and UBSan stay on, and the data-parallel code is leak-checked by its unit
# tests (gradient_reducer_test, batch_norm_sync_test) in the same run.
if [[ ${ASAN_OPTIONS:-} == *detect_leaks=1* ]]; then
  export ASAN_OPTIONS=${ASAN_OPTIONS//detect_leaks=1/detect_leaks=0}
  echo "note: LeakSanitizer off for the mpirun ranks (OpenMPI's own allocations at MPI_Finalize)"
fi
# Two ranks on however few cores the machine has; one OpenMP thread each.
MPI=(mpirun --oversubscribe -np 2)
export OMP_NUM_THREADS=1
TMP=$(mktemp -d /tmp/mixprec_dp.XXXXXX)
trap 'pkill -KILL -f "$TMP" 2> /dev/null; rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/data_parallel_lib.sh"  # write_dp_models, dump_weights, same_weights
cd "$TMP"

write_dp_models
# (A flag may be given once: the arrays below leave --batch-size and --max-steps to each run.)
COMMON=(--model "$TMP/mlp.yaml" --train-subset 4096 --test-subset 512 --threads 1 --no-self-check)


# ---- equivalence ----
for precision in fp32 amp-bf16; do
  # bf16 rounds each GEMM's output to 8 bits: a 32-row and a 64-row GEMM may accumulate in
  # another order, and one ulp is 3.9e-3 relative.
  tol=1e-6
  [[ $precision == amp-bf16 ]] && tol=1e-2
  "$BIN" train "${COMMON[@]}" --batch-size 64 --precision $precision --max-steps 50 --run-dir one-$precision > one-$precision.log 2>&1 ||
    fail "1 process $precision: exit $?"
  expect "2 ranks $precision: banner says global batch 64 = 2 x 32" 0 "global batch 64 = 2 x 32 per rank" -- \
    "${MPI[@]}" "$BIN" train "${COMMON[@]}" --batch-size 64 --precision $precision --max-steps 50 --run-dir two-$precision
  if out=$(compare_losses one-$precision two-$precision $tol); then echo "ok   $precision losses: $out"; else fail "$precision losses: $out"; fi
done

# ---- a log file of mpirun's output holds plain lines: the ranks' output is OpenMPI's
# pseudo-terminal, but no \r progress line or terminal escape reaches the file (issue 31) ----
"${MPI[@]}" "$BIN" train "${COMMON[@]}" --batch-size 64 --max-steps 30 --no-eval --run-dir plain-log > plain.log 2>&1 ||
  fail "mpirun train into a log file: exit $?"
if grep -q $'\r\|\033' plain.log; then
  fail "mpirun log holds \\r or escapes: $(grep -c $'\r' plain.log) lines with \\r"
elif grep -q "step 30" plain.log; then
  echo "ok   mpirun-log-plain-lines"
else
  fail "mpirun log shows no progress: $(tail -3 plain.log)"
fi

# ---- a hostfile, as on several machines: the same launch path (one host here, named with
# two slots), the same losses as one process ----
printf 'localhost slots=2\n' > hosts
expect "2 ranks from --hostfile: banner says global batch 64 = 2 x 32" 0 "global batch 64 = 2 x 32 per rank" -- \
  mpirun --oversubscribe --hostfile hosts -np 2 "$BIN" train "${COMMON[@]}" --batch-size 64 --precision fp32 \
  --max-steps 50 --run-dir hosts-fp32
if out=$(compare_losses one-fp32 hosts-fp32 1e-6); then echo "ok   --hostfile losses: $out"; else fail "--hostfile losses: $out"; fi

# ---- gradient buckets reduced during backward: the same bits as one reduction after it ----
# (20 KB buckets: the MLP's output layer and first bias in one, its 200 KB first weight in
# another; two ranks add a + b in either order, so bucketing cannot change a bit.)
for precision in fp32 o2-bf16; do
  for mb in 0 0.02; do
    # 0: one bucket after backward; 0.02: two, both started from backward's hook.
    buckets="1.0 gradient buckets per step, 0.0 of them"
    [[ $mb == 0.02 ]] && buckets="2.0 gradient buckets per step, 2.0 of them"
    expect "2 ranks $precision, --bucket-mb $mb: $buckets" 0 "$buckets started while backward" -- \
      "${MPI[@]}" "$BIN" train "${COMMON[@]}" --batch-size 64 --precision $precision --max-steps 20 --no-eval \
      --save-every 20 --bucket-mb $mb --run-dir bucket-$precision-$mb
  done
  if same_weights bucket-$precision-0 bucket-$precision-0.02; then
    echo "ok   $precision: buckets started during backward give the weights of one reduction after it, bit for bit"
  else fail "$precision: --bucket-mb 0.02 and --bucket-mb 0 end with different weights"; fi
done

# ---- evaluation: each rank evaluates its half of the test set, the sums are added ----
EV=("${COMMON[@]}" --batch-size 64 --precision fp32 --max-steps 20 --eval-every 10)
"$BIN" train "${EV[@]}" --run-dir eval-one > eval-one.log 2>&1 || fail "1 process with eval: exit $?"
"${MPI[@]}" "$BIN" train "${EV[@]}" --run-dir eval-two > eval-two.log 2>&1 || fail "2 ranks with eval: exit $?"
"$PY" - <<'PY' && echo "ok   sharded evaluation: the whole test set's accuracy and loss, as one process" ||
import json
def evals(d):
    return [r for r in map(json.loads, open(d + "/metrics.jsonl")) if r.get("type") == "eval"]
a, b = evals("eval-one"), evals("eval-two")
assert [r["step"] for r in a] == [10, 20] == [r["step"] for r in b], (a, b)
for x, y in zip(a, b):
    # Equal up to the f32 rounding of the training steps (1e-6 per step, above) and of the
    # evaluation's batch boundaries: a sample's logits do not depend on its batch.
    assert abs(x["accuracy"] - y["accuracy"]) <= 1 / 512, (x, y)
    assert abs(x["loss"] - y["loss"]) <= 1e-5 * abs(x["loss"]), (x, y)
PY
  fail "sharded evaluation differs from one process's: $(grep -h '"type":"eval"' eval-one/metrics.jsonl eval-two/metrics.jsonl)"
grep -q "(512 examples)" eval-two.log && echo "ok   sharded evaluation reports all 512 test samples" ||
  fail "sharded evaluation: $(grep -m1 'test accuracy' eval-two.log)"

# ---- --on-divergence rollback: every rank restores the checkpoint rank 0 picks ----
# An inf gradient at step 5 (fp32 Adam: NaN weights, so step 6's loss is NaN on every rank,
# the inf having travelled in the gradient sum): back to step 3, batch 6 skipped, the run
# completes with one process's losses.
RB=("${COMMON[@]}" --batch-size 64 --precision fp32 --max-steps 12 --save-every 3 --inject-nonfinite 5
    --on-divergence rollback --no-eval)
"$BIN" train "${RB[@]}" --run-dir rollback-one > rollback-one.log 2>&1 || fail "1 process rollback: exit $?"
expect "2 ranks roll back together" 0 "rolled back to .*rollback-two/step-00000003.safetensors \(step 3\) and skipping batch 6" -- \
  "${MPI[@]}" "$BIN" train "${RB[@]}" --run-dir rollback-two
if out=$(compare_losses rollback-one rollback-two 1e-6); then echo "ok   rollback on 2 ranks vs 1 process: $out"
else fail "rollback on 2 ranks: $out"; fi

# ---- bf16 on the wire: close to one process, but not the f32 wire's bits ----
expect "2 ranks, --allreduce-dtype bf16" 0 "gradients averaged in bf16" -- \
  "${MPI[@]}" "$BIN" train "${COMMON[@]}" --batch-size 64 --precision fp32 --max-steps 50 --allreduce-dtype bf16 \
  --run-dir two-bf16-wire
if out=$(compare_losses one-fp32 two-bf16-wire 2e-2); then echo "ok   bf16 wire vs 1 process: $out"; else fail "bf16 wire: $out"; fi
if out=$(compare_losses two-fp32 two-bf16-wire 0); then fail "the bf16 wire changed nothing: $out"
else echo "ok   the bf16 wire rounds the gradients (the f32 wire's losses differ)"; fi

# ---- --sync-bn: 2 ranks x 32 normalise as 1 process x 64 does ----
BN=(--model "$TMP/bn.yaml" --train-subset 2048 --test-subset 256 --threads 1 --no-self-check --precision fp32
    --max-steps 30 --no-eval)
"$BIN" train "${BN[@]}" --batch-size 64 --run-dir bn-one > bn-one.log 2>&1 || fail "1 process BatchNorm: exit $?"
expect "2 ranks --sync-bn" 0 "BatchNorm synchronised" -- \
  "${MPI[@]}" "$BIN" train "${BN[@]}" --batch-size 64 --sync-bn --run-dir bn-sync
"${MPI[@]}" "$BIN" train "${BN[@]}" --batch-size 64 --run-dir bn-local > bn-local.log 2>&1 || fail "2 ranks BatchNorm: exit $?"
if out=$(compare_losses bn-one bn-sync 1e-5); then echo "ok   --sync-bn vs 1 process: $out"; else fail "--sync-bn: $out"; fi
if out=$(compare_losses bn-one bn-local 1e-4); then fail "per-rank BatchNorm matched 1 process too: the --sync-bn check has no teeth ($out)"
else echo "ok   without --sync-bn the ranks' statistics differ from one process's"; fi

# ---- found-inf consensus: an inf injected into rank 0's gradient only ----
F=("${COMMON[@]}" --batch-size 64 --precision amp-fp16 --max-steps 6 --no-eval)
"$BIN" train "${F[@]}" --inject-nonfinite 3 --run-dir inf-one > inf-one.log 2>&1 || fail "1 process inject: exit $?"
mpirun --oversubscribe -np 1 "$BIN" train "${F[@]}" --inject-nonfinite 3 --run-dir inf-two : \
  -np 1 "$BIN" train "${F[@]}" --run-dir inf-two > inf-two.log 2>&1 || fail "2 ranks inject: exit $?"
if "$PY" - inf-one inf-two <<'PY'
import json, sys
def steps(d): return [r for r in map(json.loads, open(d + "/metrics.jsonl")) if r.get("type") == "step"]
for d in sys.argv[1:]:
    s = steps(d)
    skipped = [r["step"] for r in s if r["skipped"]]
    scales = [r["scale"] for r in s]
    assert skipped == [3], (d, skipped)
    assert scales == [65536.0] * 3 + [32768.0] * 3, (d, scales)
print("both skip step 3 only; the scale halves once")
PY
then echo "ok   an overflow on one rank: every rank skips the step"; else fail "found-inf consensus"; fi

# ---- BatchNorm buffers stay the same on both ranks (the replica check at the end passes) ----
expect "2 ranks with BatchNorm: replicas agree" 0 "summary:" -- \
  "${MPI[@]}" "$BIN" train --model "$TMP/bn.yaml" --train-subset 1024 --test-subset 256 --batch-size 32 --threads 1 \
  --max-steps 12 --dist-check-every 4 --run-dir none --no-self-check

# ---- refusals ----
expect "global batch that does not split" 2 "must divide evenly over 2 ranks \(try 64 or 66\)" -- \
  "${MPI[@]}" "$BIN" train "${COMMON[@]}" --batch-size 65 --max-steps 2 --run-dir none
expect "ranks with different settings" 7 "lr 0.001 here, 0.01 on rank 0" -- \
  mpirun --oversubscribe -np 1 "$BIN" train "${COMMON[@]}" --batch-size 64 --max-steps 2 --run-dir none --lr 0.01 : \
  -np 1 "$BIN" train "${COMMON[@]}" --batch-size 64 --max-steps 2 --run-dir none

# ---- a rank killed with -9: the job ends, the last checkpoint resumes bit-exactly ----
# Every checkpoint kept (--keep-checkpoints 0): the waits below look for step 10's file, which
# the default pruning (the newest 3) would delete again after step 25 on a fast host.
K=("${COMMON[@]}" --batch-size 64 --precision fp32 --save-every 5 --no-eval --epochs 100 --keep-checkpoints 0)
"${MPI[@]}" "$BIN" train "${K[@]}" --max-steps 300 --run-dir straight > straight.log 2>&1 || fail "uninterrupted 2-rank run: exit $?"
("${MPI[@]}" "$BIN" train "${K[@]}" --max-steps 300 --run-dir killed > killed.log 2>&1; echo $? > killed.rc) &
for _ in $(seq 100); do [[ -e killed/step-00000010.safetensors ]] && break; sleep 0.2; done
victim=$(pgrep -f "^$BIN train.*--run-dir killed" | tail -1)
start=$(date +%s)
[[ -n $victim ]] && kill -9 "$victim"
wait
took=$(( $(date +%s) - start ))
if [[ -n $victim && $(cat killed.rc) -ne 0 && $took -le 30 ]] && grep -q "rank 1" killed.log; then
  echo "ok   a killed rank ends the job in ${took} s, exit $(cat killed.rc), naming rank 1"
else
  fail "killed rank: victim '$victim', exit $(cat killed.rc 2> /dev/null), ${took} s"; tail -5 killed.log
fi
[[ -e killed/step-00000300.safetensors ]] && fail "the killed run had finished before the kill: the test proves nothing"
expect "resume the killed job with 2 ranks" 0 "summary:" -- "${MPI[@]}" "$BIN" train --resume killed
if same_weights straight killed; then echo "ok   resumed weights are bit-identical to the uninterrupted run's"
else fail "resumed weights differ from the uninterrupted run's"; fi

# ---- a rank that hangs: exit 7 within the timeout and a margin ----
("${MPI[@]}" "$BIN" train "${K[@]}" --max-steps 5000 --dist-timeout 5 --run-dir hung > hung.log 2>&1; echo $? > hung.rc) &
for _ in $(seq 100); do [[ -e hung/step-00000010.safetensors ]] && break; sleep 0.2; done
victim=$(pgrep -f "^$BIN train.*--dist-timeout 5" | tail -1)
start=$(date +%s)
[[ -n $victim ]] && kill -STOP "$victim"
wait
took=$(( $(date +%s) - start ))
if [[ -n $victim && $(cat hung.rc) -eq 7 && $took -le 25 ]] && grep -qE "did not (complete|reach step)" hung.log; then
  echo "ok   a hung rank ends the job in ${took} s with exit 7"
else
  fail "hung rank: victim '$victim', exit $(cat hung.rc 2> /dev/null), ${took} s"; tr '\r' '\n' < hung.log | tail -5
fi

# ---- SIGUSR1 to mpirun: every rank stops after the same step with a checkpoint ----
("${MPI[@]}" "$BIN" train "${K[@]}" --max-steps 5000 --run-dir usr1 > usr1.log 2>&1; echo $? > usr1.rc) &
for _ in $(seq 100); do [[ -e usr1/step-00000010.safetensors ]] && break; sleep 0.2; done
launcher=$(pgrep -f "^mpirun .*--run-dir usr1" | head -1)
[[ -n $launcher ]] && kill -USR1 "$launcher"
wait
if [[ -n $launcher && $(cat usr1.rc) -eq 130 ]] && grep -q "interrupted at step" usr1.log; then
  echo "ok   SIGUSR1 stops every rank with a checkpoint (exit 130)"
else
  fail "SIGUSR1: launcher '$launcher', exit $(cat usr1.rc 2> /dev/null)"; tr '\r' '\n' < usr1.log | tail -5
fi
# The stop lands wherever the job is when the signal arrives (10 steps on a slow host, 140 on
# a fast one): resume for 20 steps past it.
stopped=$(tr '\r' '\n' < usr1.log | grep -o "interrupted at step [0-9]*" | grep -o "[0-9]*$" | tail -1)
expect "the stopped job resumes" 0 "summary:" -- "${MPI[@]}" "$BIN" train --resume usr1 --max-steps $((${stopped:-0} + 20))

# ---- a 1-process run continued by 2 ranks: the same global batches ----
R=("${COMMON[@]}" --batch-size 64 --precision fp32 --save-every 10 --no-eval)
"$BIN" train "${R[@]}" --max-steps 20 --run-dir whole > /dev/null 2>&1 || fail "1-process run: exit $?"
"$BIN" train "${R[@]}" --max-steps 10 --run-dir half > /dev/null 2>&1 || fail "1-process half run: exit $?"
expect "2 ranks resume a 1-process run" 0 "summary:" -- "${MPI[@]}" "$BIN" train --resume half --max-steps 20
if out=$(compare_losses whole half 1e-6); then echo "ok   re-sharded resume: $out"; else fail "re-sharded resume: $out"; fi

finish
