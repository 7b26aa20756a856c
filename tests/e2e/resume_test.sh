#!/usr/bin/env bash
# resume_test.sh: checkpoints as a user relies on them. A run stopped after N steps and
# resumed for N more gives bit-identical losses to an uninterrupted 2N-step run; a kill -9
# at any moment leaves the last checkpoint loadable; --inject-nonfinite gives exactly one
# skipped step and halves the scale; a truncated checkpoint is refused with exit code 4, and so
# is one whose scaler, counters or rng_state are corrupt (one line per problem, naming the
# file and the field).
set -uo pipefail
BIN="$1/mixprec"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export OMP_NUM_THREADS=2
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
losses() { grep '"type":"step"' "$1/metrics.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
COMMON=(--dataset synthetic --batch-size 32 --epochs 1 --no-eval --no-self-check)

for precision in fp32 amp-fp16 o2-bf16; do
  "$BIN" train "${COMMON[@]}" --precision $precision --max-steps 8 --run-dir full-$precision > /dev/null 2>&1 \
    || fail "$precision: uninterrupted run"
  "$BIN" train "${COMMON[@]}" --precision $precision --max-steps 4 --run-dir part-$precision > /dev/null 2>&1 \
    || fail "$precision: first half"
  "$BIN" train "${COMMON[@]}" --precision $precision --max-steps 8 --resume part-$precision > resume.log 2>&1 \
    || { fail "$precision: resume"; tail -3 resume.log; }
  if [[ "$(losses full-$precision)" == "$(losses part-$precision)" && -n "$(losses full-$precision)" ]]; then
    echo "ok   $precision: resumed losses are bit-identical ($(losses full-$precision | wc -l) steps)"
  else
    fail "$precision: resumed losses differ"; paste <(losses full-$precision) <(losses part-$precision)
  fi
done

# A learning-rate schedule (warm-up, cosine) continues exactly: resuming an 8-step run from
# its step-4 checkpoint repeats the uninterrupted run's rates and losses bit for bit.
SCHED=(--precision fp32 --max-steps 8 --save-every 4 --lr-schedule cosine --warmup-steps 2)
"$BIN" train "${COMMON[@]}" "${SCHED[@]}" --run-dir sched > sched-run.log 2>&1 || { fail "schedule: run"; tail -3 sched-run.log; }
cp -r sched sched-resumed
rm sched-resumed/step-00000008.safetensors sched-resumed/run.lock
echo '{"checkpoint":"step-00000004.safetensors"}' > sched-resumed/last.json
"$BIN" train --resume sched-resumed > sched.log 2>&1 || { fail "schedule: resume"; tail -3 sched.log; }
lrs() { grep '"type":"step"' "$1/metrics.jsonl" | grep -o '"lr":[^,]*'; }
if [[ "$(lrs sched)" == "$(lrs sched-resumed)" && "$(losses sched)" == "$(losses sched-resumed)" ]] &&
   [[ $(lrs sched | head -1) == '"lr":0.0005' && $(lrs sched | tail -1) == '"lr":0.0' ]]; then
  echo "ok   schedule: warm-up + cosine resumed bit-exactly ($(lrs sched | tr '\n' ' '))"
else
  fail "schedule: rates or losses differ"; paste <(lrs sched) <(lrs sched-resumed)
fi

# Fault injection: one skipped step, scale halved (65536 -> 32768), training continues.
"$BIN" train "${COMMON[@]}" --precision amp-fp16 --max-steps 6 --inject-nonfinite 3:fc1.weight \
  --run-dir inject > inject.log 2>&1 || fail "inject run"
skipped=$(grep -c '"skipped":true' inject/metrics.jsonl)
[[ $skipped -eq 1 ]] && echo "ok   inject: exactly one skipped step" || fail "inject: $skipped skipped steps"
grep -q 'final loss scale 32768' inject.log && echo "ok   inject: scale halved" || fail "inject: scale not halved"

# kill -9 while checkpointing every step: the last pointer always names a loadable file.
"$BIN" train "${COMMON[@]}" --precision fp32 --max-steps 400 --save-every 1 --run-dir killed > /dev/null 2>&1 &
pid=$!
sleep 4
kill -9 $pid 2> /dev/null
wait $pid 2> /dev/null
if "$BIN" inspect killed > inspect.log 2>&1; then
  echo "ok   kill -9: last checkpoint loads"
else
  fail "kill -9: last checkpoint does not load"; tail -3 inspect.log
fi
"$BIN" train "${COMMON[@]}" --precision fp32 --max-steps 400 --resume killed > resume_killed.log 2>&1 &
rpid=$!
sleep 3
kill $rpid 2> /dev/null
wait $rpid
code=$?
# The resumed run must start (its log names the resumed step) and not crash; stop it.
grep -q "step" resume_killed.log && echo "ok   kill -9: resume runs" || { fail "kill -9: resume"; tail -3 resume_killed.log; }

# Half-precision inference of a trained checkpoint, beside f32.
for dt in bf16 f16; do
  if "$BIN" infer --checkpoint part-fp32 --dtype $dt --batch-size 32 --repeats 2 > infer.log 2>&1 &&
     grep -q "predictions agree" infer.log && grep -q "^$dt " infer.log; then
    echo "ok   infer $dt"
  else
    fail "infer $dt"; tail -3 infer.log
  fi
done
"$BIN" infer --checkpoint missing-dir --dtype bf16 > /dev/null 2>&1
[[ $? -eq 4 ]] && echo "ok   infer: missing checkpoint exits 4" || fail "infer: missing checkpoint"

# A truncated checkpoint: exit 4 and a message naming the file.
ckpt=$(ls part-fp32/step-*.safetensors | head -1)
head -c 1000 "$ckpt" > truncated.safetensors
"$BIN" train "${COMMON[@]}" --precision fp32 --max-steps 2 --resume truncated.safetensors > trunc.log 2>&1
code=$?
[[ $code -eq 4 ]] && echo "ok   truncated checkpoint: exit 4" || fail "truncated checkpoint: exit $code"
grep -q 'truncated.safetensors' trunc.log && echo "ok   truncated checkpoint: named" || fail "truncated: message lacks the file"

# A hand-corrupted checkpoint (valid container): a NaN loss scale, a growth tracker past the
# interval, more optimizer steps than steps, a garbage rng_state. Resume refuses it with exit
# 4 and one line per problem, each naming the file and the field; nothing is trained on it.
cp -r part-amp-fp16 corrupt
ck=$(sed 's/.*"checkpoint": *"\([^"]*\)".*/\1/' corrupt/last.json)
python3 - part-amp-fp16/$ck corrupt/$ck <<'PY'
import json, struct, sys
src, dst = sys.argv[1:3]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
md = h["__metadata__"]
sc = json.loads(md["scaler"]); sc["scale"] = "nan"; sc["_growth_tracker"] = 5000.0
md["scaler"] = json.dumps(sc); md["rng_state"] = "garbage"
md["optimizer_steps"] = str(int(md["global_step"]) + 1)
# Without its checksums (as an older mixprec wrote it) the file reaches the content checks;
# with them, the checksum refuses it first (below).
md.pop("mixprec.checksums")
t = json.dumps(h).encode()
t += b" " * ((8 - len(t) % 8) % 8)  # the data stays 8-byte aligned
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
# The same edit with the checksums left in: refused by the checksum (exit 4, naming the file
# and the header metadata); --no-verify-checksums loads it (inspect does not judge rng_state).
python3 - part-amp-fp16/$ck stale-$ck <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"]["rng_state"] = "garbage"
t = json.dumps(h).encode()
t += b" " * ((8 - len(t) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
grep -q "^checksums: verified" <<< "$("$BIN" inspect part-amp-fp16/$ck)" && echo "ok   inspect: checksums verified" ||
  fail "inspect: no 'checksums: verified' line"
"$BIN" inspect stale-$ck > stale.log 2>&1; code=$?
if [[ $code -eq 4 ]] && grep -q "stale-$ck': header metadata: checksum [0-9a-f]* does not match the stored" stale.log; then
  echo "ok   stale checksums: exit 4 naming the file"
else fail "stale checksums: exit $code: $(tail -2 stale.log)"; fi
"$BIN" inspect --no-verify-checksums stale-$ck > stale2.log 2>&1; code=$?
if [[ $code -eq 0 ]] && grep -q "model:" stale2.log && grep -q "^checksums: not checked" stale2.log; then
  echo "ok   --no-verify-checksums: the damaged file loads, inspect says it was not checked"
else fail "--no-verify-checksums: exit $code: $(tail -2 stale2.log)"; fi
before=$(md5sum < corrupt/metrics.jsonl)
# The file itself, and the run directory whose last.json names it (its older checkpoints
# moved away first, so there is nothing to fall back to).
mkdir older && mv corrupt/step-0000000[0-7].safetensors older/
for what in corrupt/$ck corrupt; do
  "$BIN" train "${COMMON[@]}" --max-steps 12 --resume $what > corrupt.log 2>&1
  code=$?
  lines=$(grep -cE "checkpoint 'corrupt/$ck': metadata key '(scaler', entry '(scale|_growth_tracker)|optimizer_steps|rng_state)'" corrupt.log)
  if [[ $code -eq 4 && $lines -eq 4 ]]; then echo "ok   corrupt scaler/counters/rng_state ($what): exit 4, one line per problem"
  else fail "corrupt checkpoint ($what): exit $code, $lines of 4 lines"; tail -6 corrupt.log; fi
done
[[ "$(md5sum < corrupt/metrics.jsonl)" == "$before" ]] && echo "ok   corrupt: nothing was trained on it" \
  || fail "corrupt: metrics.jsonl changed"
# With an older checkpoint in the directory, a resume of the directory passes over the corrupt
# one, says so, and continues from the older one.
mv older/* corrupt/
expect=$(ls corrupt/step-*.safetensors | grep -v "$ck" | tail -1)
"$BIN" train "${COMMON[@]}" --max-steps 12 --resume corrupt > fallback.log 2>&1
code=$?
if [[ $code -eq 0 ]] && grep -q "resume: passed over checkpoint 'corrupt/$ck'" fallback.log &&
   grep -q "resume: continuing from $expect" fallback.log && grep -q "summary: 12 steps" fallback.log; then
  echo "ok   corrupt last checkpoint: resume falls back to $expect and says so"
else
  fail "fallback past the corrupt checkpoint (exit $code)"; grep -v '^|' fallback.log | tail -6
fi

# --resume alone continues with the run's own settings (precision, dataset, batch size...):
# without them the defaults (amp-bf16 on Fashion-MNIST) would not fit the checkpoint.
"$BIN" train "${COMMON[@]}" --precision o2-bf16 --max-steps 3 --run-dir adopt > /dev/null 2>&1 || fail "adopt: first run"
"$BIN" train --resume adopt --max-steps 6 > adopt.log 2>&1
code=$?
if [[ $code -eq 0 ]] && grep -q "summary: 6 steps" adopt.log && grep -q "precision .*o2-bf16" adopt.log; then
  echo "ok   resume adopts the run's configuration"
else
  fail "resume did not adopt the run's configuration (exit $code)"; tail -3 adopt.log
fi
# A flag on the command line still wins: an explicit --precision that does not fit is refused.
"$BIN" train --resume adopt --max-steps 8 --precision fp32 > adopt2.log 2>&1
code=$?
[[ $code -eq 4 ]] && grep -q "o2-bf16" adopt2.log && echo "ok   resume: an explicit flag wins (and must fit)" \
  || { fail "resume: explicit --precision (exit $code)"; tail -3 adopt2.log; }

# Old checkpoints are deleted as new ones are saved: the newest --keep-checkpoints (default 3)
# stay, plus what best.json names; with 0, every one stays (issue 31).
"$BIN" train "${COMMON[@]}" --precision fp32 --max-steps 8 --save-every 1 --run-dir keep3 > /dev/null 2>&1 \
  || fail "keep: run with the default"
kept=$(cd keep3 && ls step-*.safetensors | tr '\n' ' ')
[[ $kept == "step-00000006.safetensors step-00000007.safetensors step-00000008.safetensors " ]] \
  && echo "ok   keep: the newest 3 checkpoints stay by default" || fail "keep: left $kept"
"$BIN" train "${COMMON[@]}" --precision fp32 --max-steps 4 --save-every 1 --keep-checkpoints 0 --run-dir keepall \
  > /dev/null 2>&1 || fail "keep: run with --keep-checkpoints 0"
n=$(ls keepall/step-*.safetensors | wc -l)
[[ $n -eq 4 ]] && echo "ok   keep: --keep-checkpoints 0 keeps all 4" || fail "keep: --keep-checkpoints 0 left $n"
"$BIN" train "${COMMON[@]}" --precision fp32 --max-steps 12 --resume keep3 > /dev/null 2>&1 || fail "keep: resume after pruning"

echo "$fails failed"
exit $((fails > 0))
