#!/usr/bin/env bash
# npy_dataset_test.sh: training on NumPy arrays, `--dataset npy` (issue 14): x_train.npy /
# y_train.npy (+ x_test.npy / y_test.npy, or --val-split) as uint8 images, float images and a
# float table; the model takes their shape; eval reads the same arrays; bad arrays are refused
# naming the file and element. Arrays are written by hand (no numpy needed).
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_npy.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -x $PY ]] || { fail "no $PY (scripts/setup installs python3)"; finish; exit; }
"$PY" - <<'PY' || { fail "writing the arrays"; finish; exit; }
import os, random, struct
def npy(path, descr, shape, fmt, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))
rng = random.Random(1)
def images(n, c, h, w, byte):  # class k: bright rows k::3
    xs, ys = [], []
    for i in range(n):
        k = i % 3
        for ch in range(c):
            for y in range(h):
                for x in range(w):
                    v = (200 if y % 3 == k else 30) + rng.randint(-20, 20)
                    xs.append(v if byte else v / 255.0)
        ys.append(k)
    return xs, ys
os.makedirs("u8"); os.makedirs("f32"); os.makedirs("table"); os.makedirs("bad")
x, y = images(60, 1, 9, 9, True)
npy("u8/x_train.npy", "|u1", "(60, 9, 9)", "B", x); npy("u8/y_train.npy", "<i8", "(60,)", "q", y)
x, y = images(15, 1, 9, 9, True)
npy("u8/x_test.npy", "|u1", "(15, 9, 9)", "B", x); npy("u8/y_test.npy", "<i8", "(15,)", "q", y)
x, y = images(60, 3, 8, 8, False)
npy("f32/x_train.npy", "<f4", "(60, 3, 8, 8)", "f", x); npy("f32/y_train.npy", "<f8", "(60,)", "d", [float(v) for v in y])
t = [rng.gauss(i % 3 * 5.0, 1.0) for i in range(90) for _ in range(4)]
npy("table/x_train.npy", "<f8", "(90, 4)", "d", t); npy("table/y_train.npy", "<i4", "(90,)", "i", [i % 3 for i in range(90)])
npy("bad/x_train.npy", "<f4", "(3, 4)", "f", [1, 2, float("nan"), 4] + [0] * 8)
npy("bad/y_train.npy", "<i8", "(3,)", "q", [0, 1, 2])
os.makedirs("badlabel")
npy("badlabel/x_train.npy", "<f4", "(3, 2)", "f", [0] * 6); npy("badlabel/y_train.npy", "<f4", "(3,)", "f", [0, 1.5, 2])
os.makedirs("ragged")
npy("ragged/x_train.npy", "<f4", "(3, 2)", "f", [0] * 6); npy("ragged/y_train.npy", "<i8", "(4,)", "q", [0, 1, 2, 0])
PY
common=(--batch-size 8 --no-self-check --threads 2 --precision fp32)
expect u8-images 0 "npy \(60 train, 15 test; 3 classes of 1x9x9\)" -- \
  "$BIN" train --dataset npy --data-dir u8 --epochs 3 --run-dir run "${common[@]}"
expect eval 0 "npy test set, 15 images" -- "$BIN" eval run
expect f32-images-resnet 0 "npy \(48 train, 12 held out; 3 classes of 3x8x8\)" -- \
  "$BIN" train --model resnet20 --dataset npy --data-dir f32 --val-split 0.2 --max-steps 2 --run-dir none "${common[@]}"
out=$("$BIN" train --model mlp --dataset npy --data-dir table --val-split 0.2 --epochs 6 --run-dir none "${common[@]}" 2>&1)
grep -qE "npy \(72 train, 18 held out; 3 classes, 4 feature columns\)" <<< "$out" && echo "ok   table" || fail "table: $(grep -E 'dataset|error' <<< "$out")"
acc=$(grep -oE "epoch 6/6: test accuracy [0-9.]+" <<< "$out" | grep -oE "[0-9.]+$")
awk -v a="$acc" 'BEGIN { exit !(a >= 80) }' && echo "ok   table-learns ($acc%)" || fail "table accuracy '$acc' < 80%"
expect table-needs-mlp 2 "--dataset npy is a table of 4 columns: use --model mlp or a model file" -- \
  "$BIN" train --dataset npy --data-dir table --val-split 0.2 --max-steps 1 --run-dir none "${common[@]}"
expect nan 3 "bad/x_train.npy: element 2 is nan, expected a finite float32 number" -- \
  "$BIN" train --model mlp --dataset npy --data-dir bad --val-split 0.3 --max-steps 1 --run-dir none "${common[@]}"
expect fractional-label 3 "badlabel/y_train.npy: label 1 is 1.5, expected a class number" -- \
  "$BIN" train --model mlp --dataset npy --data-dir badlabel --val-split 0.3 --max-steps 1 --run-dir none "${common[@]}"
expect label-count 3 "ragged/y_train.npy: shape \(4,\): expected \(3,\)" -- \
  "$BIN" train --model mlp --dataset npy --data-dir ragged --val-split 0.3 --max-steps 1 --run-dir none "${common[@]}"
expect no-test 2 "has no x_test.npy: pass --val-split 0.1" -- \
  "$BIN" train --model mlp --dataset npy --data-dir table --max-steps 1 --run-dir none "${common[@]}"
finish
