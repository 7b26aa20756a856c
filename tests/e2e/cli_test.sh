#!/usr/bin/env bash
# cli_test.sh: `mixprec` as a user meets it: help, bad flags, missing data, a short run.
# Each failure case must give one clear message and the documented exit code.
set -uo pipefail
BUILD_DIR=$1
BIN="$BUILD_DIR/mixprec"
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
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
expect policy-keep 0 "batch_norm +keep +input" -- "$BIN" policy
expect policy-differences 0 "softmax +bf16_autocast +bf16 +bf16 +f32" -- "$BIN" policy
expect no-amp 0 "precision +\\| fp32" -- "$BIN" train --no-amp --dataset synthetic --max-steps 2 --batch-size 16 --no-eval
expect self-check 0 "AMP self-check passed" -- "$BIN" train --precision amp-bf16 --dataset synthetic --max-steps 2 --batch-size 16 --no-eval
expect compare 0 "amp-bf16 .*x" -- "$BIN" compare --presets fp32,amp-bf16 --dataset synthetic --max-steps 3 --batch-size 16 --no-eval
expect compare-bad-preset 2 "--presets" -- "$BIN" compare --presets fp32,fp7 --dataset synthetic --max-steps 1
expect bench 0 "amp-bf16 .*x" -- "$BIN" bench --model cnn --batch-size 16 --steps 2 --warmup 1
expect bench-threads 2 "--threads: must be from 0 \(all cores\) to [0-9]+, got 99999" -- "$BIN" bench --model cnn --threads 99999
for command in predict generate eval serve; do
  expect "$command-threads" 2 "--threads" -- "$BIN" $command nothing-here --threads 99999
done
expect bench-json 0 '"heap_allocations": 0' -- "$BIN" bench --model cnn --batch-size 16 --steps 2 --warmup 1 --json
# A language model is measured in tokens/s: 2 sequences of gpt-tiny's 128 tokens per step.
expect bench-tokens 0 "tokens/s" -- "$BIN" bench --model gpt-tiny --batch-size 2 --steps 1 --warmup 0
expect bench-tokens-json 0 '"tokens_per_sample": 128' -- "$BIN" bench --model gpt-tiny --batch-size 2 --steps 1 --warmup 0 --json
expect bench-bad-model 2 "--model" -- "$BIN" bench --model resnet
expect bench-bad-preset 2 "--precision" -- "$BIN" bench --precision fp32,fp7
expect bench-bad-steps 2 "--steps: must be >= 1" -- "$BIN" bench --steps 0
# The OpenMP wait setting a benchmark ran under is in its header (tools/mixprec/omp_wait.h).
expect omp-wait-bench-header 0 "OpenMP waits: libgomp's default" -- \
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$BIN" bench --model cnn --batch-size 4 --steps 1 --warmup 0
expect omp-wait-bench-json 0 '"omp_wait": "OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT=0 \(environment\)"' -- \
  env OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=0 "$BIN" bench --model cnn --batch-size 4 --steps 1 --warmup 0 --json
expect bad-on-divergence 2 "--on-divergence" -- "$BIN" train --on-divergence explode
expect bad-loss-spike 2 "--loss-spike" -- "$BIN" train --loss-spike 0.5 --dataset synthetic --max-steps 1
expect rollback-needs-run-dir 2 "--on-divergence" -- "$BIN" train --on-divergence rollback --run-dir none --dataset synthetic --max-steps 1
finish
