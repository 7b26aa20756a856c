#!/usr/bin/env bash
# image_folder_test.sh: training on the user's own images, `--dataset folder` (issue 14): a
# folder of PNGs with one subfolder per class (made by make_image_folder.py) trains a cnn to
# high accuracy with --val-split; config.json records the classes and geometry, so eval,
# predict (which prints the folder's class names) and a resume rebuild the same model; a
# train/ + test/ layout needs no --val-split; colour images give a 3-channel resnet20; bad
# folders (mixed sizes, an unreadable image, an empty class, a test class train lacks, no
# test split and no --val-split) are refused naming the file or folder; --random-crop and
# --hflip augment, show in the banner and resume bit-exactly.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_folder.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -x $PY ]] || { fail "no $PY (scripts/setup installs python3)"; finish; exit; }
MAKE="$PY $SRC/tests/e2e/make_image_folder.py"
$MAKE colour --size 20x16 || { fail "make_image_folder.py"; finish; exit; }
$MAKE gray --size 20x16 --gray --layout split || { fail "make_image_folder.py"; finish; exit; }
common=(--batch-size 16 --no-self-check --threads 2)

# Colour images, flat layout: 20% held out, a cnn fitted to 3x16x20 and 3 classes.
out=$("$BIN" train --dataset folder --data-dir colour --val-split 0.2 --epochs 3 --run-dir run \
      --precision amp-bf16 "${common[@]}" 2>&1)
rc=$?
if [[ $rc -ne 0 ]]; then fail "train colour: exit $rc: $(tail -3 <<< "$out")"; finish; exit; fi
grep -qE "folder \(96 train, 24 held out; 3 classes of 3x16x20\)" <<< "$out" && echo "ok   banner" ||
  fail "banner lacks the folder's split and geometry: $(grep dataset <<< "$out")"
acc=$(grep -oE "epoch 3/3: test accuracy [0-9.]+" <<< "$out" | grep -oE "[0-9.]+$")
awk -v a="$acc" 'BEGIN { exit !(a >= 90) }' && echo "ok   accuracy $acc%" || fail "accuracy '$acc' < 90% after 3 epochs"
"$PY" - <<'PY' && echo "ok   config-records-geometry" || fail "config.json lacks the folder's classes/geometry"
import json
c = json.load(open("run/config.json"))
assert c["class_names"] == ["bars", "rings", "stripes"], c["class_names"]
assert (c["input_channels"], c["input_height"], c["input_width"], c["num_classes"]) == (3, 16, 20, 3), c
assert c["val_split"] == 0.2
PY

# eval reads the same held-out images and gets the final accuracy again.
expect eval 0 "folder test set, 24 images" -- "$BIN" eval run
ev=$("$BIN" eval run 2>&1 | grep -oE "accuracy [0-9.]+" | grep -oE "[0-9.]+$")
[[ "$ev" == "$acc" ]] && echo "ok   eval-equals-training" || fail "eval accuracy $ev, training said $acc"
# eval on new labelled images scores all of them (issue 31): a flat folder of the run's classes,
# a train/test layout on its test/, a folder holding only test/ on it (not as a class "test"),
# and a train/ without test/ is refused, naming what to pass instead.
$MAKE newimgs --size 20x16 --per-class 7 > /dev/null || fail "make_image_folder.py newimgs"
expect eval-new-folder 0 "newimgs \(21 images in 3 classes\), all 21 labelled samples" -- "$BIN" eval run --data-dir newimgs
$MAKE newsplit --size 20x16 --layout split > /dev/null || fail "make_image_folder.py newsplit"
expect eval-split-layout 0 "newsplit/test \(30 images in 3 classes\), all 30 labelled samples" -- "$BIN" eval run --data-dir newsplit
mkdir -p onlytest && cp -r newsplit/test onlytest/test
expect eval-only-test 0 "onlytest/test \(30 images in 3 classes\), all 30 labelled samples" -- "$BIN" eval run --data-dir onlytest
mkdir -p onlytrain && cp -r newsplit/train onlytrain/train
expect eval-only-train 2 "holds train/ but no test/ \(or val/\).*--data-dir onlytrain/train" -- "$BIN" eval run --data-dir onlytrain
new_acc=$("$BIN" eval run --data-dir newimgs 2>&1 | grep -oE "accuracy [0-9.]+" | grep -oE "[0-9.]+$")
awk -v a="$new_acc" 'BEGIN { exit !(a >= 80) }' && echo "ok   eval-new-folder-accuracy $new_acc%" ||
  fail "accuracy on new images '$new_acc' < 80%"
# predict names the folder's classes.
expect predict-names 0 "colour/rings/rings_001.png +rings \(" -- "$BIN" predict run colour/rings/rings_001.png
expect predict-names-bars 0 "bars \(" -- "$BIN" predict run colour/bars/bars_002.png
# A resume continues with the recorded classes and geometry.
expect resume 0 "step 24/30|epoch 4/4" -- "$BIN" train --resume run --epochs 4

# train/ + test/ layout, gray: no --val-split needed; --val-split beside test/ is refused.
expect split-layout 0 "folder \(90 train, 30 test; 3 classes of 1x16x20\)" -- \
  "$BIN" train --dataset folder --data-dir gray --max-steps 2 --run-dir none "${common[@]}"
expect split-with-val-split 2 "gray/test is the test split already" -- \
  "$BIN" train --dataset folder --data-dir gray --val-split 0.1 --max-steps 1 --run-dir none "${common[@]}"
# Colour images into a residual network: resnet20 takes the folder's 3 channels.
expect resnet20-colour 0 "resnet20 \(27" -- \
  "$BIN" train --model resnet20 --dataset folder --data-dir colour --val-split 0.2 --max-steps 2 --run-dir none \
  "${common[@]}"

# Augmentation (--random-crop, --hflip): in the banner, and a run stopped after epoch 1 and
# resumed gives bit-identical losses to an uninterrupted one (each sample's crop and flip are
# drawn from the seed, the epoch and the sample alone).
losses() { grep '"type":"step"' "$1/metrics.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
aug=(--dataset folder --data-dir colour --val-split 0.2 --random-crop 2 --hflip --precision fp32 "${common[@]}")
expect augment-banner 0 "augmentation +\| random crop \(padding 2\), horizontal flip" -- \
  "$BIN" train "${aug[@]}" --epochs 2 --run-dir aug-full
"$BIN" train "${aug[@]}" --epochs 1 --run-dir aug-part > aug1.log 2>&1 || fail "augment part 1: $(tail -3 aug1.log)"
"$BIN" train --resume aug-part --epochs 2 > aug2.log 2>&1 || fail "augment resume: $(tail -3 aug2.log)"
if [[ -n "$(losses aug-full)" && "$(losses aug-full)" == "$(losses aug-part)" ]]; then
  echo "ok   augment-resume-bit-exact ($(losses aug-full | wc -l) steps)"
else
  fail "augmented resume: losses differ"; paste <(losses aug-full) <(losses aug-part) | head -12
fi
# Without augmentation the same run has other losses: the augmentation really ran.
"$BIN" train --dataset folder --data-dir colour --val-split 0.2 --precision fp32 "${common[@]}" --epochs 1 \
  --run-dir plain > plain.log 2>&1 || fail "plain run: $(tail -3 plain.log)"
[[ "$(losses plain | sed -n 2p)" != "$(losses aug-full | sed -n 2p)" ]] && echo "ok   augment-changes-losses" ||
  fail "augmentation left the losses unchanged"
expect augment-text 2 "--random-crop/--hflip: dataset text is text" -- \
  "$BIN" train --model gpt-tiny --dataset text --data-dir "$SRC/README.md" --hflip --max-steps 1 --run-dir none \
  "${common[@]}"
expect augment-range 2 "--random-crop" -- \
  "$BIN" train "${aug[@]}" --random-crop 65 --max-steps 1 --run-dir none

# Bad folders.
expect no-val-split 2 "no test/ \(or val/\) folder: pass --val-split 0.1" -- \
  "$BIN" train --dataset folder --data-dir colour --max-steps 1 --run-dir none "${common[@]}"
expect no-data-dir 2 "--dataset folder needs --data-dir" -- \
  "$BIN" train --dataset folder --max-steps 1 --run-dir none "${common[@]}"
expect missing-dir 3 "--data-dir nowhere: no such folder" -- \
  "$BIN" train --dataset folder --data-dir nowhere --val-split 0.1 --max-steps 1 --run-dir none "${common[@]}"
cp -r colour sizes && $MAKE big --size 24x16 --per-class 1 && cp big/rings/rings_000.png sizes/rings/zz_big.png
expect mixed-sizes 3 "sizes/rings/zz_big.png is 24x16 pixels but .* is 20x16" -- \
  "$BIN" train --dataset folder --data-dir sizes --val-split 0.2 --max-steps 1 --run-dir none "${common[@]}"
cp -r colour broken && head -c 60 colour/bars/bars_000.png > broken/bars/bars_000.png
expect unreadable-image 3 "broken/bars/bars_000.png" -- \
  "$BIN" train --dataset folder --data-dir broken --val-split 0.2 --max-steps 1 --run-dir none "${common[@]}"
cp -r colour empty && mkdir empty/nothing
expect empty-class 3 "class folder 'nothing' holds no .png/.jpg/.jpeg image" -- \
  "$BIN" train --dataset folder --data-dir empty --val-split 0.2 --max-steps 1 --run-dir none "${common[@]}"
cp -r gray extra && mkdir extra/test/cats && cp gray/test/bars/*.png extra/test/cats/
expect unknown-test-class 3 "class 'cats' is not one of the training classes \(bars, rings, stripes\)" -- \
  "$BIN" train --dataset folder --data-dir extra --max-steps 1 --run-dir none "${common[@]}"
expect val-split-range 2 "--val-split" -- \
  "$BIN" train --dataset folder --data-dir colour --val-split 1 --max-steps 1 --run-dir none "${common[@]}"
expect val-split-builtin 2 "dataset synthetic has a test split" -- \
  "$BIN" train --dataset synthetic --val-split 0.1 --max-steps 1 --run-dir none "${common[@]}"
finish
