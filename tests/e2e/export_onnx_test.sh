#!/usr/bin/env bash
# export_onnx_test.sh: `mixprec export CHECKPOINT -o model.onnx [--precision ...]` (issue 17),
# run by runtimes that share no code with mixprec (tests/e2e/onnx_run.py, after onnx's own
# checker), on the same inputs as `mixprec predict`:
#   fp32 files of the cnn, resnet20 and a model file (with a `precision: fp32` head, trained
#   under o2-bf16) through OpenCV's dnn module: probabilities equal predict's (1e-4);
#   fp16 files through the numpy interpreter: equal `predict --precision fp16` within 2e-3;
#   bf16 files (bf16 weights, f32 compute) within 1e-2 of `predict --precision bf16` (which
#   also rounds activations to bf16: docs/cli.md);
#   a GPT's file runs on token input of any length and gives `predict --prompt`'s next-byte
#   probabilities; models/transformer.yaml (rows as tokens) through the numpy interpreter
#   (text classifiers and language-model files: text_classifier_test, language_model_test);
# the metadata carries the class names and normalisation; bad use gives the documented codes.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
SRC_DIR=$(cd "$2" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
RUN="$SRC_DIR/tests/e2e/onnx_run.py"
TMP=$(mktemp -d /tmp/mixprec_export.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
# scripts/setup installs these; a machine without them fails here rather than skipping.
"$PY" -c "import onnx, cv2, numpy" 2> deps.log || { fail "python3-onnx, python3-opencv, python3-numpy: $(tail -1 deps.log) (run scripts/setup)"; finish; exit; }

"$PY" - <<'PY'
import numpy as np
rng = np.random.default_rng(3)
np.save("x28.npy", rng.random((4, 1, 28, 28), dtype=np.float32))
np.save("x32.npy", rng.random((4, 3, 32, 32), dtype=np.float32))  # colour, batch 4
PY

# predict's probabilities of every class, as a [N, classes] .npy (the reference).
predict_probs() {  # RUN_DIR PRECISION OUT.npy [INPUT.npy]
  "$BIN" predict "$1" "${4:-x28.npy}" --top-k 10 --json --precision "$2" > "pred.json" 2> pred.err ||
    { fail "predict $1 $2: $(tail -2 pred.err)"; return 1; }
  "$PY" - "$3" <<'PY'
import json, sys, numpy as np
d = json.load(open("pred.json"))
p = np.zeros((len(d["predictions"]), 10))
for i, r in enumerate(d["predictions"]):
    for t in r["top"]:
        p[i, t["class"]] = t["probability"]
np.save(sys.argv[1], p)
PY
}

check() {  # NAME MODEL.onnx RUNTIME EXPECTED.npy RTOL ATOL [INPUT.npy]
  local out
  if out=$("$PY" "$RUN" "$2" "${7:-x28.npy}" --runtime "$3" --expected "$4" --rtol "$5" --atol "$6" 2>&1); then
    echo "ok   $1: $(tail -1 <<< "$out")"
  else
    fail "$1: $(tail -3 <<< "$out")"
  fi
}

# ---- cnn (amp-bf16 run): fp32 on OpenCV, fp16 and bf16 on the numpy interpreter ----
"$BIN" train --dataset synthetic --batch-size 16 --max-steps 4 --no-eval --run-dir cnn --no-self-check \
  --precision amp-bf16 > train.log 2>&1 || { fail "train cnn: $(tail -3 train.log)"; finish; exit; }
expect export-fp32 0 "wrote cnn.onnx: ONNX opset 17, fp32 weights" -- "$BIN" export cnn -o cnn.onnx
predict_probs cnn fp32 want32.npy && check cnn-fp32-opencv cnn.onnx opencv want32.npy 1e-4 1e-5
expect export-fp16 0 "fp16 weights" -- "$BIN" export --checkpoint cnn -o cnn16.onnx --precision fp16
predict_probs cnn fp16 want16.npy && check cnn-fp16-numpy cnn16.onnx numpy want16.npy 2e-3 2e-3
expect export-bf16 0 "bf16 weights" -- "$BIN" export cnn -o cnnbf16.onnx --precision bf16
predict_probs cnn bf16 wantbf16.npy && check cnn-bf16-numpy cnnbf16.onnx numpy wantbf16.npy 1e-2 1e-2
# Half the bytes: the weights are most of the file.
"$PY" - <<'PY' || fail "16-bit files are not about half the fp32 file"
import os
full, half, bhalf = (os.path.getsize(f) for f in ("cnn.onnx", "cnn16.onnx", "cnnbf16.onnx"))
print("ok   sizes: fp32 %d, fp16 %d (%.3f), bf16 %d (%.3f)" % (full, half, half / full, bhalf, bhalf / full))
assert half < 0.51 * full and bhalf < 0.51 * full
PY
# The file says what it is: class names, normalisation, the source checkpoint.
"$PY" - <<'PY' || fail "metadata"
import json, onnx
m = onnx.load("cnn.onnx")
meta = {p.key: p.value for p in m.metadata_props}
assert meta["mixprec.model"] == "cnn" and meta["mixprec.precision"] == "fp32", meta
assert len(json.loads(meta["mixprec.normalization"])["mean"]) == 1, meta
assert m.graph.input[0].name == "input" and [o.name for o in m.graph.output] == ["logits", "probabilities"]
assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
print("ok   metadata:", sorted(meta))
PY

# ---- resnet20 (batch norm, strided and 1x1 convolutions, global pooling) on OpenCV ----
"$BIN" train --model resnet20 --dataset synthetic --batch-size 8 --max-steps 2 --no-eval --run-dir resnet \
  --no-self-check > resnet.log 2>&1 || fail "train resnet20: $(tail -3 resnet.log)"
expect export-resnet 0 "wrote resnet.onnx" -- "$BIN" export resnet -o resnet.onnx
predict_probs resnet fp32 wantres.npy && check resnet20-fp32-opencv resnet.onnx opencv wantres.npy 1e-4 1e-5

# ---- colour images at batch 4 (seed-cnn, 3x32x32): OpenCV 4.6 once failed on every colour
# model at batch > 1 (the normalisation's per-channel constants); numpy in fp16 too ----
"$BIN" train --model seed-cnn --dataset synthetic --batch-size 8 --max-steps 2 --no-eval --run-dir seed \
  --no-self-check > seed.log 2>&1 || fail "train seed-cnn: $(tail -3 seed.log)"
expect export-colour 0 "wrote seed.onnx" -- "$BIN" export seed -o seed.onnx
predict_probs seed fp32 wantseed.npy x32.npy && check colour-batch4-fp32-opencv seed.onnx opencv wantseed.npy 1e-4 1e-5 x32.npy
expect export-colour-fp16 0 "fp16 weights" -- "$BIN" export seed -o seed16.onnx --precision fp16
predict_probs seed fp16 wantseed16.npy x32.npy && check colour-batch4-fp16-numpy seed16.onnx numpy wantseed16.npy 2e-3 2e-3 x32.npy

# ---- a model file with an fp32 head, trained under o2-bf16 ----
"$BIN" train --model "$SRC_DIR/models/small-resnet.yaml" --dataset synthetic --batch-size 8 --max-steps 2 --no-eval \
  --run-dir file --no-self-check --precision o2-bf16 > file.log 2>&1 || fail "train model file o2-bf16: $(tail -3 file.log)"
expect export-model-file 0 "wrote file.onnx" -- "$BIN" export file -o file.onnx
predict_probs file fp32 wantfile.npy && check model-file-fp32-opencv file.onnx opencv wantfile.npy 1e-4 1e-5
expect export-model-file-fp16 0 "fp16 weights" -- "$BIN" export file -o file16.onnx --precision fp16
predict_probs file fp16 wantfile16.npy && check model-file-fp16-numpy file16.onnx numpy wantfile16.npy 2e-3 2e-3

# ---- models/transformer.yaml: image rows as tokens (`sequence`), an encoder, the mean ----
"$BIN" train --model "$SRC_DIR/models/transformer.yaml" --dataset synthetic --batch-size 8 --max-steps 2 --no-eval \
  --run-dir rows --no-self-check > rows.log 2>&1 || fail "train transformer.yaml: $(tail -3 rows.log)"
expect export-sequence-file 0 "wrote rows.onnx" -- "$BIN" export rows -o rows.onnx
predict_probs rows fp32 wantrows.npy && check sequence-file-fp32-numpy rows.onnx numpy wantrows.npy 1e-4 1e-5

# ---- a GPT: token input of any length up to the context ----
"$PY" -c "print('In the beginning God created the heaven and the earth. ' * 400)" > corpus.txt
"$BIN" train --model gpt-tiny --dataset text --data-dir corpus.txt --batch-size 4 --max-steps 2 --no-eval \
  --run-dir gpt --no-self-check > gpt.log 2>&1 || fail "train gpt-tiny: $(tail -3 gpt.log)"
expect export-gpt 0 "tokens i64 \[batch, T <= 128\]" -- "$BIN" export gpt -o gpt.onnx
"$PY" - "$RUN" <<'PY' || fail "gpt onnx"
import sys, numpy as np, onnx
sys.argv = [sys.argv[1]]
sys.path.insert(0, __import__("os").path.dirname(sys.argv[0]))
import onnx_run
m = onnx.load("gpt.onnx")
for T in (1, 7, 128):
    tokens = np.frombuffer(b"In the beginning God created the heaven"[:T].ljust(T, b" "), dtype=np.uint8).astype(np.int64)[None]
    p = onnx_run.run_numpy(m, {"tokens": tokens})["probabilities"]
    assert p.shape == (1, T, 256), p.shape
    assert np.allclose(p.sum(-1), 1, atol=1e-5), p.sum(-1)
print("ok   gpt: T = 1, 7, 128 run; probability rows sum to 1")
PY
# ... and its next-byte distribution is `predict --prompt`'s.
"$BIN" predict gpt --prompt "In the beginning" --top-k 256 --json --precision fp32 > gpt_pred.json 2>&1 ||
  fail "predict gpt: $(tail -2 gpt_pred.json)"
"$PY" - "$RUN" <<'PY' || fail "gpt onnx vs predict"
import json, sys, os, numpy as np, onnx
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import onnx_run
tokens = np.frombuffer(b"In the beginning", dtype=np.uint8).astype(np.int64)[None]
p = onnx_run.run_numpy(onnx.load("gpt.onnx"), {"tokens": tokens})["probabilities"][0, -1]
want = np.zeros(256)
for t in json.load(open("gpt_pred.json"))["predictions"][0]["top"]:
    want[t["class"]] = t["probability"]
err = np.abs(p - want).max()
assert err < 1e-5, err
print("ok   gpt-onnx-vs-predict: next-byte probabilities equal within %.2g" % err)
PY

# ---- bad use ----
cp cnn.onnx before.onnx
expect exists 2 "already exists \(pass --force" -- "$BIN" export cnn -o cnn.onnx
cmp -s cnn.onnx before.onnx || fail "an existing file was changed without --force"
expect force 0 "wrote cnn.onnx" -- "$BIN" export cnn -o cnn.onnx --force --precision fp16
expect bad-precision 2 "fp32, fp16, bf16|fp32" -- "$BIN" export cnn -o x.onnx --precision fp8
expect bad-format 2 "onnx" -- "$BIN" export cnn -o x.onnx --format tflite
expect no-checkpoint 4 "checkpoint error" -- "$BIN" export nowhere.safetensors -o x.onnx
expect no-dir 1 "nodir" -- "$BIN" export cnn -o nodir/x.onnx
[[ ! -e x.onnx ]] || fail "a failed export left x.onnx"
ls ./*.tmp.* > /dev/null 2>&1 && fail "a temp file was left behind"

finish
