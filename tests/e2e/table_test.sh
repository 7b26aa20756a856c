#!/usr/bin/env bash
# table_test.sh: training on the user's own table, `--dataset csv` (issue 14): a CSV of four
# feature columns on very different scales and a named label column (make_table.py) trains an
# mlp with --val-split; config.json records the feature columns and classes, so eval, predict
# (its input's columns found by name, in any order) and a resume read the same columns; a
# folder of train.csv and test.csv with numeric labels needs no --val-split; bad tables and
# misuse are refused naming the file, line and column.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_table.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -x $PY ]] || { fail "no $PY (scripts/setup installs python3)"; finish; exit; }
$PY "$SRC/tests/e2e/make_table.py" iris.csv --named || { fail "make_table.py"; finish; exit; }
common=(--model mlp --batch-size 16 --no-self-check --threads 2)

out=$("$BIN" train --dataset csv --data-dir iris.csv --label-column species --val-split 0.2 --epochs 4 \
      --run-dir run --precision fp32 "${common[@]}" 2>&1)
rc=$?
if [[ $rc -ne 0 ]]; then fail "train: exit $rc: $(tail -3 <<< "$out")"; finish; exit; fi
grep -qE "csv \(120 train, 30 held out; 3 classes, 4 feature columns\)" <<< "$out" && echo "ok   banner" ||
  fail "banner: $(grep dataset <<< "$out")"
acc=$(grep -oE "epoch 4/4: test accuracy [0-9.]+" <<< "$out" | grep -oE "[0-9.]+$")
awk -v a="$acc" 'BEGIN { exit !(a >= 90) }' && echo "ok   accuracy $acc%" || fail "accuracy '$acc' < 90%"
"$PY" - <<'PY' && echo "ok   config-records-columns" || fail "config.json lacks the table's columns/classes"
import json
c = json.load(open("run/config.json"))
assert c["feature_names"] == ["sepal", "weight", "ratio", "offset"], c["feature_names"]
assert c["class_names"] == ["setosa", "versicolor", "virginica"], c["class_names"]
assert (c["input_channels"], c["input_height"], c["input_width"], c["num_classes"]) == (4, 1, 1, 3), c
assert c["label_column"] == "species" and len(c["norm_mean"]) == 4
PY
ev=$("$BIN" eval run 2>&1 | grep -oE "accuracy [0-9.]+" | grep -oE "[0-9.]+$")
[[ "$ev" == "$acc" ]] && echo "ok   eval-equals-training" || fail "eval accuracy '$ev', training said $acc"
# eval on a new labelled table scores every row of it (issue 31), not a --val-split share.
$PY "$SRC/tests/e2e/make_table.py" new.csv --named --rows 50 --seed 5 || fail "make_table.py new.csv"
expect eval-new-table 0 "new.csv \(50 rows of 4 features\), all 50 labelled samples" -- "$BIN" eval run --data-dir new.csv
# predict: other column order, no label column; the blobs' centres are clear-cut.
printf 'offset,ratio,weight,sepal\n-5,0.001,200,1.0\n5,0.002,320,3.0\n' > query.csv
out=$("$BIN" predict run query.csv 2>&1)
grep -qE "query.csv:2 +setosa \(" <<< "$out" && grep -qE "query.csv:3 +virginica \(" <<< "$out" &&
  echo "ok   predict-by-column-name" || fail "predict: $out"
expect predict-missing-column 3 "query2.csv: no column 'weight', which the model reads" -- \
  bash -c "printf 'offset,ratio,sepal\n1,2,3\n' > query2.csv && '$BIN' predict run query2.csv"
expect predict-image 2 "trained on a table \(--dataset csv\)" -- "$BIN" predict run "$SRC/README.md"
expect resume 0 "epoch 5/5" -- "$BIN" train --resume run --epochs 5

# train.csv + test.csv, numeric labels (the default label column name).
mkdir split
$PY "$SRC/tests/e2e/make_table.py" split/train.csv --rows 90 && $PY "$SRC/tests/e2e/make_table.py" split/test.csv --rows 30 --seed 9
sed -i '1s/species/label/' split/train.csv split/test.csv
expect split-files 0 "csv \(90 train, 30 test; 3 classes, 4 feature columns\)" -- \
  "$BIN" train --dataset csv --data-dir split --max-steps 2 --run-dir none "${common[@]}"
# A run too small for its settings trains, and says why it may disappoint (issue 31).
expect batch-larger-than-data 0 "warning: --batch-size 256 is larger than the training set \(90 examples\): every step takes the whole set" -- \
  "$BIN" train --dataset csv --data-dir split --model mlp --batch-size 256 --max-steps 2 --run-dir none --no-self-check --threads 2
expect warmup-longer-than-run 0 "warning: --warmup-steps 10 is not shorter than the run \(2 steps\): the learning rate never reaches --lr" -- \
  "$BIN" train --dataset csv --data-dir split --warmup-steps 10 --max-steps 2 --run-dir none "${common[@]}"

# Misuse and bad tables.
expect wrong-model 2 "--dataset csv is a table of 4 columns: use --model mlp" -- \
  "$BIN" train --dataset csv --data-dir iris.csv --label-column species --val-split 0.2 --model cnn --max-steps 1 \
  --run-dir none --no-self-check
expect label-typo 2 "no column 'specis' for the labels \(did you mean 'species'\?\)" -- \
  "$BIN" train --dataset csv --data-dir iris.csv --label-column specis --val-split 0.2 --max-steps 1 --run-dir none \
  "${common[@]}"
expect no-val-split 2 "pass --val-split 0.1" -- \
  "$BIN" train --dataset csv --data-dir iris.csv --label-column species --max-steps 1 --run-dir none "${common[@]}"
head -5 iris.csv > ragged.csv && echo "1,2,setosa" >> ragged.csv
expect ragged-row 3 "ragged.csv: row 6 has 3 fields, the header has 5" -- \
  "$BIN" train --dataset csv --data-dir ragged.csv --label-column species --val-split 0.2 --max-steps 1 \
  --run-dir none "${common[@]}"
head -3 iris.csv > nan.csv && echo "nan,1,1,setosa,1" >> nan.csv
expect nan-value 3 "nan.csv: row 4, column 'sepal': 'nan' is not a finite number" -- \
  "$BIN" train --dataset csv --data-dir nan.csv --label-column species --val-split 0.2 --max-steps 1 \
  --run-dir none "${common[@]}"
expect augment-table 2 "--random-crop/--hflip: dataset csv is a table; augmentation is for images" -- \
  "$BIN" train --dataset csv --data-dir iris.csv --label-column species --val-split 0.2 --hflip --max-steps 1 \
  --run-dir none "${common[@]}"
finish
