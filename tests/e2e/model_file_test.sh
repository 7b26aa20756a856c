#!/usr/bin/env bash
# model_file_test.sh: `mixprec train --model FILE.yaml` (issue 14): the example files in
# models/ train on Fashion-MNIST-shaped synthetic data and on a folder of colour images (the
# model takes the data's channels, size and classes); the run records the file's text, so
# eval, predict and a resume work after the file is gone; a copy of models/cnn.yaml reaches
# bit-identical losses to the built-in cnn; `summary` shows each layer's shape and dtypes
# under a preset and `models` lists what there is; a broken file is exit 2 at file:line:column.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_modelfile.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
common=(--batch-size 16 --no-self-check --threads 2 --precision fp32)
losses() { grep '"type":"step"' "$1/metrics.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }

# models/cnn.yaml is the built-in cnn: the same losses, bit for bit.
cp "$SRC/models/cnn.yaml" my_cnn.yaml
"$BIN" train --model my_cnn.yaml --dataset synthetic --max-steps 6 --run-dir file "${common[@]}" > file.log 2>&1 ||
  fail "train my_cnn.yaml: $(tail -3 file.log)"
"$BIN" train --model cnn --dataset synthetic --max-steps 6 --run-dir builtin "${common[@]}" > builtin.log 2>&1 ||
  fail "train cnn: $(tail -3 builtin.log)"
if [[ -n "$(losses file)" && "$(losses file)" == "$(losses builtin)" ]]; then
  echo "ok   cnn-file-equals-built-in ($(losses file | wc -l) steps)"
else
  fail "cnn.yaml and the built-in cnn differ"; paste <(losses file) <(losses builtin) | head -6
fi
grep -q '"model_text": "# cnn.yaml' file/config.json && echo "ok   records-model-text" || fail "config.json lacks model_text"

# The file gone: eval, predict and resume use the recorded text.
rm my_cnn.yaml
expect eval-without-file 0 "accuracy" -- "$BIN" eval file
$PY - <<'PY'
import struct
header = "{'descr': '|u1', 'fortran_order': False, 'shape': (28, 28), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
open("one.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(range(256)) * 3 + bytes(16))
PY
expect predict-without-file 0 "one.npy" -- "$BIN" predict file one.npy
expect resume-without-file 0 "step 8/8|summary: 2 steps" -- "$BIN" train --resume file --max-steps 8

# Colour images of 16x20 into the small ResNet and the MLP file.
$PY "$SRC/tests/e2e/make_image_folder.py" images --size 20x16 --per-class 20 || fail "make_image_folder.py"
# (Copied here: the banner wraps a long path, and the clone's path can be long.)
for m in small-resnet mlp; do
  cp "$SRC/models/$m.yaml" "$m.yaml"
  expect "folder-$m" 0 " $m.yaml \([0-9]+ parameters\)" -- \
    "$BIN" train --model "$m.yaml" --dataset folder --data-dir images --val-split 0.25 --max-steps 3 \
    --run-dir none "${common[@]}"
done

# summary: shapes, parameters and the dtype of each layer under a preset (the autocast table).
expect summary-amp 0 "3\.body\.0 +conv2d +\[32, 32, 32\] +9216 +f32 +bf16 +autocast: lower" -- \
  "$BIN" summary --model "$SRC/models/small-resnet.yaml" --input 3x32x32
expect summary-fp32-layer 0 "15 +linear +\[10\] +650 +f32 +f32 +precision: fp32 in the file" -- \
  "$BIN" summary --model "$SRC/models/small-resnet.yaml" --input 3x32x32
expect summary-o2 0 "conv1 +conv2d +\[32, 28, 28\] +320 +bf16 +bf16" -- \
  "$BIN" summary --model "$SRC/models/cnn.yaml" --precision o2-bf16
expect summary-bad-input 2 "--input: expected CxHxW" -- "$BIN" summary --model "$SRC/models/cnn.yaml" --input 3x32
expect summary-builtin 0 "model resnet20 \(built in\): 272186 parameters" -- "$BIN" summary --model resnet20
# A built-in's rows add up to its parameters (attention's fused input projection included:
# issue 31), and the footer names the model file that is this built-in, not models/cnn.yaml.
for m in gpt-tiny:842496:gpt-tiny.yaml transformer:792330:transformer.yaml cnn:824458:cnn.yaml; do
  IFS=: read -r name total file <<< "$m"
  out=$("$BIN" summary --model "$name" 2>&1)
  sum=$(awk 'NR > 2 && $3 ~ /^[0-9]+$/ {s += $3} END {print s}' <<< "$out")
  [[ $sum == "$total" ]] && echo "ok   summary-$name-rows-add-up" || fail "summary $name: rows sum to $sum, not $total"
  grep -q "models/$file is this $name as one" <<< "$out" && echo "ok   summary-$name-footer" ||
    fail "summary $name footer: $(tail -1 <<< "$out")"
done
# models: the built-ins and the files in ./models.
expect models 0 "models/cnn.yaml +1x28x28 +824458" -- bash -c "cd '$SRC' && '$BIN' models"

# Mistakes.
printf 'layers:\n  - conv2d: {out: 8}\n  - relu\n  - flaten\n  - linear: {out: classes}\n' > typo.yaml
expect typo 2 "typo.yaml:4:5: unknown layer type 'flaten' \(did you mean 'flatten'\?\)" -- \
  "$BIN" train --model typo.yaml --dataset synthetic --max-steps 1 --run-dir none "${common[@]}"
printf 'layers:\n  - conv2d: {out: 8}\n  - linear: {out: classes}\n' > shape.yaml
expect shape 2 "shape.yaml:3:13: linear takes flat features \[F\]; its input here is \[8, 26, 26\]" -- \
  "$BIN" train --model shape.yaml --dataset synthetic --max-steps 1 --run-dir none "${common[@]}"
expect missing-file 2 "--model nowhere.yaml: .*nowhere.yaml" -- \
  "$BIN" train --model nowhere.yaml --dataset synthetic --max-steps 1 --run-dir none "${common[@]}"
expect text-dataset 2 "--dataset text is text, for a language model" -- \
  "$BIN" train --model "$SRC/models/mlp.yaml" --dataset text --data-dir "$SRC/README.md" --max-steps 1 --run-dir none \
  "${common[@]}"
finish
