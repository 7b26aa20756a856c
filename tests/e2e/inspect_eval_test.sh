#!/usr/bin/env bash
# inspect_eval_test.sh: `mixprec inspect` and `mixprec eval` as a user meets them.
# A checkpoint is written here by a small Python script (json + struct: the layout is plain
# safetensors), with hand-placed values whose float16 fate is known: so inspect's counts are
# checked against numbers worked out by hand, not against mixprec itself. When `mixprec train`
# has --run-dir, a real training run's checkpoint is inspected and evaluated too.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$1
BIN="$BUILD_DIR/mixprec"
TMP=$(mktemp -d /tmp/mixprec_inspect_e2e.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

# ---- error paths (always) ----
expect missing-inspect 4 "$TMP/nope.safetensors" -- "$BIN" inspect "$TMP/nope.safetensors"
expect missing-eval 4 "$TMP/nope.safetensors" -- "$BIN" eval --checkpoint "$TMP/nope.safetensors"
head -c 1000 /dev/urandom > "$TMP/garbage.safetensors"
expect garbage-inspect 4 "garbage.safetensors" -- "$BIN" inspect "$TMP/garbage.safetensors"
expect garbage-eval 4 "garbage.safetensors" -- "$BIN" eval --checkpoint "$TMP/garbage.safetensors"
mkdir -p "$TMP/emptyrun"
expect empty-run-dir 4 "emptyrun" -- "$BIN" inspect "$TMP/emptyrun"
expect inspect-needs-arg 2 "checkpoint" -- "$BIN" inspect
expect eval-needs-flag 2 "--checkpoint" -- "$BIN" eval

# ---- a hand-made checkpoint of the cnn (1x28x28) ----
PY=/usr/bin/python3
if [[ -x $PY ]]; then
  "$PY" - "$TMP" <<'EOF'
import array, json, random, struct, sys
out = sys.argv[1]
random.seed(0)
shapes = {"conv1.weight": [32, 1, 3, 3], "conv1.bias": [32], "conv2.weight": [64, 32, 3, 3],
          "conv2.bias": [64], "fc1.weight": [256, 3136], "fc1.bias": [256],
          "fc2.weight": [10, 256], "fc2.bias": [10]}
order = list(shapes)  # named_parameters() order, not alphabetical
def numel(s):
    n = 1
    for d in s: n *= d
    return n
values = {}
for name, s in shapes.items():
    fan_in = numel(s[1:]) if len(s) > 1 else 1
    bound = 1.0 / fan_in ** 0.5
    values[name] = [random.uniform(-bound, bound) for _ in range(numel(s))]
# conv1.bias: 3 values flush to 0 in f16 (1e-8, -1e-8 and exactly 2^-25, the tie that goes
# to even 0), 1 f16 subnormal (1e-6 < 2^-14), 1 overflow (70000 >= 65520); 65510 rounds to
# 65504, not inf. 3/32 = 9.38%, 1/32 = 3.12%.
values["conv1.bias"] = [1e-8, -1e-8, 2.0 ** -25, 1e-6, 70000.0, 65510.0, 0.0] + [0.01] * 25
optimizer = {"exp_avg.0": [float("nan"), float("inf"), float("-inf"), 1.0]}
def write(path, tensors, metadata):
    # metadata None: no "__metadata__" at all, as safetensors.torch.save_file(state_dict) writes.
    header, blobs, off = ({"__metadata__": metadata} if metadata is not None else {}), [], 0
    for name in sorted(tensors):
        shape, vals = tensors[name]
        data = array.array("f", vals).tobytes()  # little-endian host
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data); off += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text))); f.write(text)
        for b in blobs: f.write(b)
def metadata(model_names):
    return {"format": "mixprec-checkpoint", "version": "1", "model_name": "cnn", "precision": "fp32",
            "model_tensors": json.dumps(model_names),
            "scaler": json.dumps({"scale": 65536.0, "_growth_tracker": 3.0}), "rng_state": "1 2 3",
            "optimizer_steps": "7", "epoch": "0", "batch_in_epoch": "7", "global_step": "7",
            "config": json.dumps({"model": "cnn", "dataset": "synthetic", "seed": 0, "batch_size": 250})}
tensors = {n: (shapes[n], values[n]) for n in order}
# What PyTorch writes for a model's weights: the state_dict, no metadata.
write(out + "/plain.safetensors", dict(tensors), None)
wrong = dict(tensors); del wrong["fc2.bias"]; wrong["fc1.weight"] = ([128, 3136], values["fc1.weight"][:128 * 3136])
write(out + "/plain_wrong.safetensors", wrong, None)
tensors.update({"optimizer." + k: ([len(v)], v) for k, v in optimizer.items()})
write(out + "/good.safetensors", tensors, metadata(order))
md = metadata(order); md["precision"] = "fp7"
write(out + "/badprec.safetensors", tensors, md)
md = metadata(order); md["epoch"] = "-1"
write(out + "/badepoch.safetensors", tensors, md)
del tensors["fc2.bias"]
write(out + "/nobias.safetensors", tensors, metadata([n for n in order if n != "fc2.bias"]))
EOF
  G="$TMP/good.safetensors"
  expect inspect 0 "conv1.weight" -- "$BIN" inspect "$G"
  expect inspect-underflow 0 "conv1.bias +F32 +\[32\] .* 9\.38% \(3\) +3\.12% \(1\) +3\.12% \(1\) +0 +0" -- "$BIN" inspect "$G"
  expect inspect-max 0 "conv1.bias .* 7e\+04" -- "$BIN" inspect "$G"
  expect inspect-scaler 0 "scaler:.*scale=65536" -- "$BIN" inspect "$G"
  expect inspect-counters 0 "global step 7" -- "$BIN" inspect "$G"
  expect inspect-all-nonfinite 0 "optimizer.exp_avg.0 .* 1 +2$" -- "$BIN" inspect --all "$G"
  mkdir -p "$TMP/run" && cp "$G" "$TMP/run/step-00000007.safetensors"
  echo '{"checkpoint": "step-00000007.safetensors"}' > "$TMP/run/last.json"
  expect inspect-run-dir 0 "step-00000007" -- "$BIN" inspect "$TMP/run"
  expect eval 0 "accuracy [0-9.]+% \| loss [0-9.]+ \| [0-9]+ images/s" -- "$BIN" eval --checkpoint "$G"
  expect eval-run-dir 0 "1000 images" -- "$BIN" eval --checkpoint "$TMP/run" --precision amp-bf16
  expect eval-o2 0 "precision o2-bf16" -- "$BIN" eval --checkpoint "$G" --precision o2-bf16 --batch-size 100
  expect eval-bad-precision 2 "--precision" -- "$BIN" eval --checkpoint "$G" --precision fp8
  expect eval-missing-tensor 4 "missing tensor 'fc2.bias'" -- "$BIN" eval --checkpoint "$TMP/nobias.safetensors"
  expect eval-bad-precision-key 4 "metadata key 'precision'" -- "$BIN" eval --checkpoint "$TMP/badprec.safetensors"
  expect eval-precision-flag-wins 0 "precision fp32" -- "$BIN" eval --checkpoint "$TMP/badprec.safetensors" --precision fp32
  # the checkpoint either way: positional or --checkpoint, for inspect, eval and infer
  expect inspect-flag-form 0 "global step 7" -- "$BIN" inspect --checkpoint "$G"
  expect eval-positional 0 "accuracy [0-9.]+%" -- "$BIN" eval "$G"
  expect infer-positional 0 "predictions agree" -- "$BIN" infer "$G" --batch-size 8 --repeats 1
  expect infer-flag-form 0 "predictions agree" -- "$BIN" infer --checkpoint "$G" --batch-size 8 --repeats 1
  expect eval-two-checkpoints 2 "two checkpoints" -- "$BIN" eval "$G" --checkpoint "$TMP/nobias.safetensors"
  # a plain safetensors file (PyTorch's save_file(model.state_dict())): weights only
  P="$TMP/plain.safetensors"
  expect plain-inspect 0 "weights only.*matches model cnn \(8 tensors\)" -- "$BIN" inspect "$P"
  expect plain-inspect-values 0 "conv1.bias +F32 +\[32\] .* 9\.38% \(3\)" -- "$BIN" inspect "$P"
  expect plain-eval 0 "accuracy [0-9.]+% \| loss" -- "$BIN" eval "$P" --dataset synthetic
  expect plain-eval-fp32 0 "precision fp32" -- "$BIN" eval "$P" --dataset synthetic
  expect plain-infer 0 "predictions agree" -- "$BIN" infer "$P" --batch-size 8 --repeats 1
  W="$TMP/plain_wrong.safetensors"
  expect plain-wrong-inspect 0 "matches no mixprec model.*closest is cnn: missing 'fc2.bias'.*'fc1.weight' has shape \[128, 3136\], cnn has \[256, 3136\]" -- "$BIN" inspect "$W"
  expect plain-wrong-eval 4 "closest is cnn: missing 'fc2.bias'" -- "$BIN" eval "$W" --dataset synthetic
  expect inspect-bad-epoch 4 "badepoch.safetensors.*'epoch'" -- "$BIN" inspect "$TMP/badepoch.safetensors"
  size=$(stat -c %s "$G")
  head -c $((size - 10)) "$G" > "$TMP/cut.safetensors"
  expect inspect-truncated 4 "cut.safetensors" -- "$BIN" inspect "$TMP/cut.safetensors"
  expect eval-truncated 4 "cut.safetensors" -- "$BIN" eval --checkpoint "$TMP/cut.safetensors"
else
  # scripts/setup installs python3 for these cases: its absence is a broken setup, not a skip.
  fail "hand-made checkpoint cases: no $PY (scripts/setup installs python3)"
fi

# ---- a checkpoint written by training ----
{
  expect train-run 0 "" -- "$BIN" train --dataset synthetic --max-steps 3 --batch-size 32 --no-eval \
    --run-dir "$TMP/trained" --save-every 2
  expect trained-inspect 0 "conv1.weight" -- "$BIN" inspect "$TMP/trained"
  expect trained-eval 0 "accuracy" -- "$BIN" eval --checkpoint "$TMP/trained"
  ck=$(ls "$TMP"/trained/*.safetensors 2>/dev/null | head -1)
  if [[ -n $ck ]]; then
    size=$(stat -c %s "$ck")
    head -c $((size / 2)) "$ck" > "$TMP/trained_cut.safetensors"
    expect trained-truncated 4 "trained_cut.safetensors" -- "$BIN" inspect "$TMP/trained_cut.safetensors"
  else
    fail "trained-files: no .safetensors in $TMP/trained"
  fi
}

finish
