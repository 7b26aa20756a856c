#!/usr/bin/env bash
# output_full_test.sh: results that cannot reach stdout are a failure, not a silent success
# (issue 31 item 12: `predict ... > /dev/full` and `generate ... > /dev/full` exited 0). With
# stdout on /dev/full (every write: ENOSPC) or closed, predict (image model and language
# model), generate, inspect, summary, models and policy must exit 1 and say so on stderr;
# generate must stop at the first byte it cannot write (a million bytes asked). The same
# commands with stdout on /dev/null exit 0, so the failures above are the output's.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
TMP=$(mktemp -d /tmp/mixprec_output_full.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -w /dev/full ]] || { echo "no writable /dev/full here"; exit 77; }

# stdout_fails NAME STDOUT EXPECTED_MESSAGE -- command...: with stdout sent to STDOUT
# (/dev/full, or "closed"), the command must exit 1 with EXPECTED_MESSAGE on stderr.
stdout_fails() {
  local name=$1 target=$2 message=$3 err code
  shift 4
  if [[ $target == closed ]]; then
    err=$(timeout 300 "$@" 2>&1 >&-)
  else
    err=$(timeout 300 "$@" 2>&1 > "$target")
  fi
  code=$?
  if [[ $code -ne 1 ]]; then fail "$name: exit $code, expected 1"; echo "$err" | tail -3; return; fi
  if ! grep -qF -- "$message" <<< "$err"; then fail "$name: stderr lacks '$message'"; echo "$err" | tail -3; return; fi
  echo "ok   $name"
}
FULL="mixprec: cannot write the output: No space left on device"

# A tiny image classifier and a tiny byte-level language model, a few steps each.
cat > small.yaml <<'YAML'
name: small
layers:
  - flatten
  - linear: {out: 16}
  - relu
  - linear: {out: classes}
YAML
cat > small-lm.yaml <<'YAML'
name: small-lm
layers:
  - embedding: {dim: 16, context: 16}
  - decoder: {heads: 2}
  - layernorm
  - lm_head
YAML
python3 -c "print('in the beginning god created the heaven and the earth. ' * 200)" > corpus.txt
"$BIN" train --model small.yaml --dataset synthetic --batch-size 16 --max-steps 2 --no-eval --no-self-check \
  --precision fp32 --run-dir run > train.log 2>&1 || { fail "train: $(tail -3 train.log)"; finish; exit; }
"$BIN" train --model small-lm.yaml --dataset text --data-dir corpus.txt --batch-size 4 --max-steps 2 --no-eval \
  --no-self-check --precision fp32 --run-dir run-lm > train-lm.log 2>&1 || { fail "train-lm: $(tail -3 train-lm.log)"; finish; exit; }
# One 28x28 image as a uint8 .npy.
python3 - <<'PY'
import struct
header = "{'descr': '|u1', 'fortran_order': False, 'shape': (28, 28), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open("one.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(range(28)) * 28)
PY

# The controls: the same commands succeed when their output can be written.
expect predict-to-null 0 '' -- bash -c "'$BIN' predict run one.npy > /dev/null"
expect predict-lm-to-null 0 '' -- bash -c "'$BIN' predict run-lm --prompt 'in the' > /dev/null"
expect generate-to-null 0 'generated 20 bytes' -- bash -c "'$BIN' generate run-lm --prompt 'in the' --max-tokens 20 > /dev/null"
expect inspect-to-null 0 '' -- bash -c "'$BIN' inspect run > /dev/null"

stdout_fails predict-full /dev/full "$FULL" -- "$BIN" predict run one.npy
stdout_fails predict-json-full /dev/full "$FULL" -- "$BIN" predict run one.npy --json
stdout_fails predict-csv-full /dev/full "$FULL" -- "$BIN" predict run one.npy --csv
stdout_fails predict-closed closed "mixprec: cannot write the output: Bad file descriptor" -- "$BIN" predict run one.npy
stdout_fails predict-lm-full /dev/full "$FULL" -- "$BIN" predict run-lm --prompt "in the"
# A million bytes at a few hundred bytes/s would outlast the 300 s guard: generate must stop
# at its first unwritable byte, without its "generated N bytes" summary.
stdout_fails generate-full /dev/full "$FULL" -- "$BIN" generate run-lm --prompt "in the" --max-tokens 1000000
if err=$("$BIN" generate run-lm --prompt "in the" --max-tokens 50 2>&1 > /dev/full); grep -q 'generated' <<< "$err"; then
  fail "generate-full-no-summary: it reported a generation whose output was lost: $err"
else
  echo "ok   generate-full-no-summary"
fi
stdout_fails inspect-full /dev/full "$FULL" -- "$BIN" inspect run
stdout_fails summary-full /dev/full "$FULL" -- "$BIN" summary --model small.yaml
stdout_fails models-full /dev/full "$FULL" -- "$BIN" models
stdout_fails policy-full /dev/full "$FULL" -- "$BIN" policy

# A command that failed for its own reason keeps its code: a missing checkpoint is 4.
expect missing-checkpoint-keeps-4 4 'checkpoint error' -- bash -c "'$BIN' predict no-such-run one.npy > /dev/full"
finish
