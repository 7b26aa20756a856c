#!/usr/bin/env bash
# predict_test.sh: `mixprec predict CHECKPOINT INPUT...` on the user's own inputs (issue 17):
# the same images as an IDX file, a uint8 .npy, a float .npy (ToTensor-style [0, 1]) and a
# CSV with a label column all give the same top classes; a single-sample .npy works; --json
# and --csv parse; the top-1 class agrees with a reference forward computed by `eval
# --save-predictions` on the same images; bad inputs give the documented exit codes.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_predict.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -x $PY ]] || { fail "no $PY (scripts/setup installs python3)"; finish; exit; }

# A small cnn trained a few steps on synthetic 1x28x28 data, run dir "run".
"$BIN" train --dataset synthetic --batch-size 16 --max-steps 4 --no-eval --run-dir run --no-self-check \
  --precision amp-bf16 > train.log 2>&1 || { fail "train: $(tail -3 train.log)"; finish; exit; }
# Reference: eval's first test batch (images normalised, logits) through --save-predictions.
"$BIN" eval run --batch-size 5 --save-predictions ref.safetensors > eval.log 2>&1 || fail "eval: $(tail -3 eval.log)"

# Five raw 28x28 images with known pixels, written as IDX, uint8 npy, float npy and CSV.
"$PY" - <<'PY'
import struct, random
random.seed(7)
imgs = [[random.randrange(256) for _ in range(784)] for _ in range(5)]
with open("five.idx", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, 5, 28, 28)); f.write(bytes(sum(imgs, [])))
def npy(path, descr, shape, payload):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload)
npy("five_u8.npy", "|u1", "(5, 28, 28)", bytes(sum(imgs, [])))
npy("five_f32.npy", "<f4", "(5, 1, 28, 28)", struct.pack("<%df" % (5 * 784), *[v / 255.0 for v in sum(imgs, [])]))
npy("one.npy", "|u1", "(28, 28)", bytes(imgs[0]))
with open("five.csv", "w") as f:
    f.write("label," + ",".join("pixel%d" % (i + 1) for i in range(784)) + "\n")
    for im in imgs: f.write("3," + ",".join(map(str, im)) + "\n")
# The first image as an 8-bit gray PNG and as an RGB PNG with alpha (gray = R = G = B), written
# by hand (zlib + CRCs, no imaging library).
import zlib
def png(path, w, h, color_type, rows):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
png("one.png", 28, 28, 0, [imgs[0][r * 28:(r + 1) * 28] for r in range(28)])
png("one_rgba.png", 28, 28, 6, [sum(([v, v, v, 255] for v in imgs[0][r * 28:(r + 1) * 28]), []) for r in range(28)])
png("big.png", 32, 32, 0, [[0] * 32 for _ in range(32)])
with open("broken.png", "wb") as f: f.write(open("one.png", "rb").read()[:60])
# Bad inputs.
npy("fortran.npy", "|u1", "(28, 28)", bytes(784)); open("fortran.npy", "r+b").write(
    open("fortran.npy", "rb").read().replace(b"False", b"True "))
npy("short.npy", "|u1", "(5, 28, 28)", bytes(100))
npy("wrongshape.npy", "|u1", "(5, 32, 32)", bytes(5 * 1024))
npy("obj.npy", "|O", "(1,)", bytes(8))
with open("ragged.csv", "w") as f: f.write(",".join(["1"] * 784) + "\n" + ",".join(["1"] * 780) + "\n")
with open("nan.npy.tmp", "w") as f: pass
npy("nan.npy", "<f4", "(28, 28)", struct.pack("<784f", *([float("nan")] + [0.5] * 783)))
PY

top1() { grep -v "^input" | awk -F'  +' '{ split($2, a, " \\("); print a[1] }'; }
expect predict-idx 0 "five.idx\[4\]" -- "$BIN" predict run five.idx
"$BIN" predict run five.idx | top1 > idx.top
for f in five_u8.npy five_f32.npy five.csv; do
  "$BIN" predict run "$f" > "$f.out" 2>&1 || fail "predict $f: $(tail -2 "$f.out")"
  top1 < "$f.out" > "$f.top"
  cmp -s idx.top "$f.top" && echo "ok   same-top1-$f" || fail "same-top1-$f: $(paste idx.top "$f.top" | head -3)"
done
[[ $(wc -l < idx.top) -eq 5 ]] && echo "ok   five-predictions" || fail "five-predictions: $(wc -l < idx.top)"
expect predict-single 0 "^one.npy " -- "$BIN" predict run one.npy
# PNG: the same pixels as one.npy, so the same probabilities to the last digit; RGBA is
# converted to gray (R = G = B here, so exactly the same pixels).
for f in one.png one_rgba.png; do
  a=$("$BIN" predict run one.npy --csv --top-k 10 | tail -n +2 | cut -d, -f2-)
  b=$("$BIN" predict run "$f" --csv --top-k 10 | tail -n +2 | cut -d, -f2-)
  [[ -n $a && "$a" == "$b" ]] && echo "ok   png-same-as-npy-$f" || fail "png-same-as-npy-$f: $(diff <(echo "$a") <(echo "$b") | head -3)"
done
# JPEG: written by libjpeg itself (a tiny writer compiled here), lossy, so only decoded and predicted.
cat > jw.c <<'CEOF'
#include <stdio.h>
#include <jpeglib.h>
int main(void) {
  struct jpeg_compress_struct c; struct jpeg_error_mgr e; unsigned char row[28]; JSAMPROW r = row;
  c.err = jpeg_std_error(&e); jpeg_create_compress(&c);
  FILE* f = fopen("one.jpg", "wb"); jpeg_stdio_dest(&c, f);
  c.image_width = 28; c.image_height = 28; c.input_components = 1; c.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&c); jpeg_set_quality(&c, 95, TRUE); jpeg_start_compress(&c, TRUE);
  for (int y = 0; y < 28; ++y) { for (int x = 0; x < 28; ++x) row[x] = (unsigned char)(x * 9); jpeg_write_scanlines(&c, &r, 1); }
  jpeg_finish_compress(&c); fclose(f); jpeg_destroy_compress(&c); return 0;
}
CEOF
if cc jw.c -o jw -ljpeg 2> jw.log && ./jw; then
  expect predict-jpeg 0 "^one.jpg " -- "$BIN" predict run one.jpg
  head -c 200 one.jpg > broken.jpg
  expect bad-jpeg 3 "broken.jpg.*JPEG" -- "$BIN" predict run broken.jpg
else
  fail "could not build the JPEG writer: $(head -3 jw.log)"
fi
expect bad-png-size 3 "big.png: image of 32x32 pixels, model cnn takes 28x28" -- "$BIN" predict run big.png
expect bad-png-truncated 3 "broken.png.*PNG" -- "$BIN" predict run broken.png
expect predict-checkpoint-flag 0 "five.idx\[0\]" -- "$BIN" predict --checkpoint run five.idx --top-k 1

# --json: valid JSON, top-k entries with probabilities summing to at most 1, sorted.
"$BIN" predict run five_u8.npy --json --top-k 10 > p.json || fail "predict --json"
"$PY" - <<'PY' && echo "ok   json" || echo "FAIL json"
import json
d = json.load(open("p.json"))
assert d["model"] == "cnn" and d["precision"] == "amp-bf16", d
assert len(d["predictions"]) == 5
for p in d["predictions"]:
    probs = [t["probability"] for t in p["top"]]
    assert len(probs) == 10 and abs(sum(probs) - 1) < 1e-4 and probs == sorted(probs, reverse=True), probs
PY
lines=$("$BIN" predict run five.csv --csv --top-k 2 | tail -n +2 | wc -l)
[[ $lines -eq 10 ]] && echo "ok   csv-output" || fail "csv-output: $lines lines"

# Against eval: eval's first test batch (normalised images and logits, --save-predictions)
# turned back into pixels with the run's recorded mean/std, predicted, must give the softmax
# of eval's logits (same model, same precision).
"$PY" - <<'PY' || fail "reference: could not rebuild eval's images"
import json, math, struct
b = open("ref.safetensors", "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); data = b[8 + n:]
def arr(name):
    e = h[name]; lo, hi = e["data_offsets"]; fmt = {"F32": "f", "I64": "q"}[e["dtype"]]
    return list(struct.unpack("<%d%s" % ((hi - lo) // struct.calcsize(fmt), fmt), data[lo:hi])), e["shape"]
images, ishape = arr("images"); logits, lshape = arr("logits")
cfg = json.load(open("run/config.json")); mean, std = cfg["norm_mean"][0], cfg["norm_std"][0]
pixels = [round((v * std + mean) * 255) for v in images]
assert all(0 <= p <= 255 for p in pixels)
with open("ref.idx", "wb") as f:
    f.write(struct.pack(">IIII", 0x803, ishape[0], 28, 28)); f.write(bytes(pixels))
probs = []
for i in range(lshape[0]):
    row = logits[i * lshape[1]:(i + 1) * lshape[1]]; m = max(row); e = [math.exp(x - m) for x in row]; s = sum(e)
    probs.append([x / s for x in e])
json.dump(probs, open("ref_probs.json", "w"))
PY
"$BIN" predict run ref.idx --json --top-k 10 --batch-size 5 > ref_pred.json || fail "predict ref.idx"
"$PY" - <<'PY' && echo "ok   matches-eval-softmax" || fail "matches-eval-softmax"
import json
ref = json.load(open("ref_probs.json")); got = json.load(open("ref_pred.json"))["predictions"]
assert len(got) == len(ref)
worst = 0.0
for r, g in zip(ref, got):
    for t in g["top"]:
        worst = max(worst, abs(t["probability"] - r[t["class"]]))
print("  max |p - eval softmax| = %.2e" % worst)
assert worst < 1e-5, worst
PY

# Bad inputs: documented exit codes, the file named.
expect bad-fortran 3 "fortran.npy.*Fortran order" -- "$BIN" predict run fortran.npy
expect bad-truncated 3 "short.npy.*data: the shape and dtype need 3920 bytes, the file holds 100" -- "$BIN" predict run short.npy
expect bad-shape 3 "wrongshape.npy: shape \[5, 32, 32\] does not fit model cnn" -- "$BIN" predict run wrongshape.npy
expect bad-dtype 3 "obj.npy.*dtype '\|O' is not supported" -- "$BIN" predict run obj.npy
expect bad-ragged 3 "ragged.csv: row 2 has 780 values, model cnn needs 784" -- "$BIN" predict run ragged.csv
expect bad-nan 3 "nan.npy: element 0 is nan" -- "$BIN" predict run nan.npy
mkfifo pipe.csv
expect bad-fifo 3 "pipe.csv.*FIFO" -- timeout 20 "$BIN" predict run pipe.csv
expect bad-kind 2 "unknown input kind '.txt'" -- "$BIN" predict run notes.txt
expect bad-no-inputs 2 "no input files" -- "$BIN" predict run
expect bad-checkpoint 4 "nosuch" -- "$BIN" predict nosuch five.idx
finish
