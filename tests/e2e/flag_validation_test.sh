#!/usr/bin/env bash
# flag_validation_test.sh: values that used to be accepted, wrapped, or crash `train` are
# refused with exit 2 (usage) and a message naming the flag and the accepted range; a file
# that cannot serve as --init-from weights is exit 4 (issue 12).
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
TMP=$(mktemp -d /tmp/mixprec_flags.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
T=(train --dataset synthetic --batch-size 4 --max-steps 1 --no-eval --run-dir none --no-self-check)

# Overflowing integers were wrapped (a 20-digit batch size ended as "an epoch has 0 batches").
expect batch-overflow 2 "--batch-size: expected an integer in 1\.\.16777216, got 99999999999999999999 \(out of range\)" -- \
  "$BIN" "${T[@]}" --batch-size 99999999999999999999
expect batch-too-large 2 "--batch-size: expected an integer in 1\.\.16777216, got 16777217" -- \
  "$BIN" "${T[@]}" --batch-size 16777217
expect batch-not-integer 2 "--batch-size: expected an integer in 1\.\.16777216, got '4x'" -- "$BIN" "${T[@]}" --batch-size 4x
# 100,000 threads crashed the OpenMP runtime (exit 139).
expect threads-huge 2 "--threads: must be from 0 \(all cores\) to [0-9]+ \(4x this machine's [0-9]+ hardware threads\), got 100000" -- \
  "$BIN" "${T[@]}" --threads 100000
# Non-finite or negative hyper-parameters were accepted and poisoned every update.
expect momentum-nan 2 "--momentum: expected a number >= 0, got 'nan'" -- "$BIN" "${T[@]}" --optimizer sgd --momentum nan
expect momentum-negative 2 "--momentum: must be >= 0, got -1" -- "$BIN" "${T[@]}" --optimizer sgd --momentum -1
expect lr-inf 2 "--lr: expected a number > 0, got 'inf'" -- "$BIN" "${T[@]}" --lr inf
expect growth-nan 2 "--growth-factor: must be" -- "$BIN" "${T[@]}" --growth-factor nan
# Gradient-underflow telemetry's cadence: 0 turns it off, a negative value is refused.
expect underflow-every-negative 2 "--underflow-every: expected an integer >= 0, got -1" -- \
  "$BIN" "${T[@]}" --precision amp-fp16 --underflow-every -1
# A negative seed was wrapped to 2^64-1; the largest seed itself is fine.
expect seed-negative 2 "--seed: expected an integer from 0 to 18446744073709551615, got '-1'" -- "$BIN" "${T[@]}" --seed -1
expect seed-max 0 "summary:" -- "$BIN" "${T[@]}" --seed 18446744073709551615
# An unknown parameter name injected nothing, silently.
expect inject-unknown 2 "--inject-nonfinite: model cnn has no parameter 'fc1.wieght' \(did you mean 'fc1.weight'\?\); its parameters: conv1.weight, .*fc1.weight" -- \
  "$BIN" "${T[@]}" --inject-nonfinite 1:fc1.wieght
expect inject-known 0 "summary:" -- "$BIN" "${T[@]}" --inject-nonfinite 1:fc1.weight
# --resume restores the run's weights; --init-from would be ignored or overwrite them.
"$BIN" train --dataset synthetic --batch-size 4 --max-steps 2 --no-eval --run-dir run --no-self-check > /dev/null 2>&1 ||
  fail "train run: could not create a run to resume"
cp run/last.json not-weights.safetensors 2> /dev/null || echo 'not a safetensors file' > not-weights.safetensors
expect resume-and-init-from 2 "--init-from: cannot be combined with --resume" -- \
  "$BIN" train --resume run --init-from not-weights.safetensors
# A file that is not a weights file is a checkpoint error (4), naming the file.
expect init-from-garbage 4 "--init-from: .*not-weights\.safetensors" -- "$BIN" "${T[@]}" --init-from not-weights.safetensors

# --config FILE: config.json's keys, flags given win, unknown keys and bad values named.
printf '{"model": "mlp", "lr": 0.01, "lr_schedule": "cosine", "warmup_steps": 2}' > recipe.json
expect config-file 0 "\| model +\| mlp .*\| optimizer +\| adam \(lr 0\.02,.*\| lr schedule +\| cosine to 0, 2 warm-up" -- \
  bash -c "'$BIN' ${T[*]} --config recipe.json --lr 0.02 | tr '\n' ' '"
printf '{"modle": "mlp"}' > typo.json
expect config-typo 2 "typo.json:1:11: 'modle' is not a setting.*did you mean 'model'" -- "$BIN" "${T[@]}" --config typo.json
printf '{"epochs": "two"}' > badtype.json
expect config-type 2 "badtype.json:1:12: configuration: field 'epochs' has the wrong type" -- "$BIN" "${T[@]}" --config badtype.json
expect config-missing 2 "--config: .*nowhere.json" -- "$BIN" "${T[@]}" --config nowhere.json
expect config-resume 2 "--config cannot be combined with --resume" -- "$BIN" train --resume run --config recipe.json
finish
