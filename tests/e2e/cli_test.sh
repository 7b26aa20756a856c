#!/usr/bin/env bash
# cli_test.sh: `mixprec` as a user meets it: help, bad flags, missing data, a short run.
# Each failure case must give one clear message and the documented exit code.
set -uo pipefail
BUILD_DIR=$1
BIN="$BUILD_DIR/mixprec"
fails=0
expect() {  # expect NAME CODE PATTERN -- command...
  local name=$1 code=$2 pattern=$3
  shift 4
  local out
  out=$("$@" 2>&1)
  local got=$?
  if [[ $got -ne $code ]]; then
    echo "FAIL $name: exit $got, expected $code"; echo "$out" | tail -5; fails=$((fails + 1)); return
  fi
  if ! grep -qE -- "$pattern" <<< "$out"; then
    echo "FAIL $name: output lacks /$pattern/"; echo "$out" | tail -5; fails=$((fails + 1)); return
  fi
  echo "ok   $name"
}
expect help 0 "--batch-size" -- "$BIN" train --help
expect help-shows-defaults 0 "256" -- "$BIN" train --help
expect no-subcommand 2 "subcommand" -- "$BIN"
expect unknown-flag 2 "--bogus" -- "$BIN" train --bogus
expect bad-model 2 "--model" -- "$BIN" train --model resnet
expect bad-batch 2 "--batch-size" -- "$BIN" train --batch-size 0
expect not-a-number 2 "--lr" -- "$BIN" train --lr fast
expect missing-data 3 "/nonexistent/dir" -- "$BIN" train --data-dir /nonexistent/dir --max-steps 1
expect short-run 0 "summary" -- "$BIN" train --dataset synthetic --max-steps 3 --batch-size 32 --no-eval
expect bad-precision 2 "amp-bf16" -- "$BIN" train --precision fp8 --max-steps 1
expect bad-inject 2 "--inject-nonfinite" -- "$BIN" train --inject-nonfinite soon
expect bad-accumulate 2 "--accumulate" -- "$BIN" train --accumulate 0
expect policy 0 "conv2d +lower" -- "$BIN" policy
expect policy-presets 0 "pure-fp16" -- "$BIN" policy
expect no-amp 0 "precision +\\| fp32" -- "$BIN" train --no-amp --dataset synthetic --max-steps 2 --batch-size 16 --no-eval
expect self-check 0 "AMP self-check passed" -- "$BIN" train --precision amp-bf16 --dataset synthetic --max-steps 2 --batch-size 16 --no-eval
expect compare 0 "amp-bf16 .*x" -- "$BIN" compare --presets fp32,amp-bf16 --dataset synthetic --max-steps 3 --batch-size 16 --no-eval
expect compare-bad-preset 2 "--presets" -- "$BIN" compare --presets fp32,fp7 --dataset synthetic --max-steps 1
echo "$fails failed"
exit $((fails > 0))
