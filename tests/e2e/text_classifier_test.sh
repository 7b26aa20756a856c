#!/usr/bin/env bash
# text_classifier_test.sh: a BERT-style classifier on the user's own texts (issue 14):
# `--dataset csv --text-column text` with models/text-encoder.yaml on a CSV of three topics
# (make_texts.py: quoted fields, an id column that is not read, named labels) reaches >= 90%
# test accuracy in amp-bf16; config.json records the text column and length; eval repeats the
# accuracy; predict classifies --prompt texts and a CSV's rows (table, --json); serve answers
# JSON strings with predict's classes and refuses numbers; its ONNX export gives predict's
# probabilities; --skip-bad leaves out bad rows
# that otherwise stop the run; a resume
# continues; misuse is refused naming the flag, the file or the column.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_texts.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -x $PY ]] || { fail "no $PY (scripts/setup installs python3)"; finish; exit; }
$PY "$SRC/tests/e2e/make_texts.py" topics || { fail "make_texts.py"; finish; exit; }
common=(--model "$SRC/models/text-encoder.yaml" --dataset csv --data-dir topics --text-column text
        --label-column topic --max-tokens 64 --batch-size 32 --lr 1e-3 --threads 2)

out=$("$BIN" train "${common[@]}" --epochs 3 --precision amp-bf16 --save-every 50 --run-dir run 2>&1)
rc=$?
if [[ $rc -ne 0 ]]; then fail "train: exit $rc: $(tail -3 <<< "$out")"; finish; exit; fi
grep -qE "csv \(1200 train, 300 test; 3 classes; column 'text', up to" <<< "$out" &&
  echo "ok   banner" || fail "banner: $(grep dataset <<< "$out")"
acc=$(grep -oE "epoch 3/3: test accuracy [0-9.]+" <<< "$out" | grep -oE "[0-9.]+$")
awk -v a="$acc" 'BEGIN { exit !(a >= 90) }' && echo "ok   accuracy $acc%" || fail "accuracy '$acc' < 90%"
"$PY" - <<'PY' && echo "ok   config records the text column" || fail "config.json lacks the text settings"
import json
c = json.load(open("run/config.json"))
assert c["text_column"] == "text" and c["max_tokens"] == 64, c
assert c["class_names"] == ["food", "sport", "tech"], c["class_names"]
assert (c["input_channels"], c["input_height"], c["input_width"], c["num_classes"]) == (1, 1, 64, 3), c
PY
ev=$("$BIN" eval run 2>&1 | grep -oE "accuracy [0-9.]+" | grep -oE "[0-9.]+$")
[[ "$ev" == "$acc" ]] && echo "ok   eval equals training ($ev%)" || fail "eval accuracy '$ev', training said $acc"

# predict: --prompt texts and a CSV of the same column (other columns and order ignored).
printf 'text,note\n"the coach and the team, a goal",x\nbake bread with cheese,y\n' > ask.csv
out=$("$BIN" predict run --prompt "server and network code for the cloud" ask.csv 2>&1)
first() { grep -F "$1" <<< "$out" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /\(/) { print $(i - 1); exit } }'; }
[[ $(first "prompt 1") == tech && $(first "ask.csv:2") == sport && $(first "ask.csv:3") == food ]] &&
  echo "ok   predict: tech, sport, food" || fail "predict: $out"
expect "predict --json" 0 '"name": "tech"' -- "$BIN" predict run --prompt "laptop chip data" --json
expect "predict refuses an image for a text model" 2 "this model classifies texts \(column 'text' of a CSV\)" -- \
  "$BIN" predict run "$SRC/README.md"

# serve: texts as JSON strings give predict's classes; other bodies are refused with a 400.
if serve_started serve.log -- "$BIN" serve run --port 0; then
  PORT=$PORT "$PY" - <<'PY' && echo "ok   serve answers texts" || fail "serve on texts"
import http.client, json, os
c = http.client.HTTPConnection("127.0.0.1", int(os.environ["PORT"]), timeout=30)
def post(body, kind="application/json"):
    c.request("POST", "/v1/predict", body, {"Content-Type": kind})
    r = c.getresponse()
    return r.status, json.loads(r.read())
s, r = post(json.dumps({"inputs": ["server and network code for the cloud", "bake bread with cheese"]}))
assert s == 200 and [p["top"][0]["name"] for p in r["predictions"]] == ["tech", "food"], (s, r)
s, r = post(json.dumps({"inputs": [[1, 2, 3]]}))
assert s == 400 and "this model classifies texts" in r["error"], (s, r)
c.request("GET", "/v1/model")
m = json.loads(c.getresponse().read())
assert m["input"] == "text" and m["max_text_bytes"] == 64, m
c.request("POST", "/v1/generate", json.dumps({"prompt": "x"}))
r = c.getresponse()
assert r.status == 404 and "is a classifier" in json.loads(r.read())["error"]
PY
  kill "$SERVER_PID"
  wait "$SERVER_PID" 2> /dev/null
fi

# export: the classifier as ONNX (byte ids in, 0-padded to --max-tokens), run by the numpy
# reference interpreter (tests/e2e/onnx_run.py): predict's probabilities.
expect "export a text classifier" 0 "tokens i64 \[batch, 64\]" -- "$BIN" export run -o text.onnx
"$BIN" predict run --prompt "server and network code for the cloud" --json --precision fp32 > text_pred.json 2>&1 ||
  fail "predict --json: $(tail -2 text_pred.json)"
"$PY" - "$SRC/tests/e2e" <<'PY' && echo "ok   text classifier ONNX = predict" || fail "text classifier ONNX vs predict"
import json, sys
import numpy as np, onnx
sys.path.insert(0, sys.argv[1])
import onnx_run
text = b"server and network code for the cloud"
ids = np.zeros((1, 64), dtype=np.int64)
ids[0, :len(text)] = list(text)
p = onnx_run.run_numpy(onnx.load("text.onnx"), {"tokens": ids})["probabilities"][0]
top = json.load(open("text_pred.json"))["predictions"][0]["top"]
assert len(top) >= 3
for t in top:
    assert abs(p[t["class"]] - t["probability"]) < 1e-4, (t, p)
PY

# infer: the model file's run cast to bf16 beside f32 (random byte ids as input).
expect "infer on a text model file" 0 "predictions agree on" -- "$BIN" infer run --dtype bf16 --batch-size 8 --repeats 2

# resume: continues from the last checkpoint to the new end.
expect "resume" 0 "summary:" -- "$BIN" train --resume run --epochs 4

# misuse
expect "--text-column without --dataset csv" 2 "--text-column: reads a CSV's text column: it needs --dataset csv" -- \
  "$BIN" train --dataset fashion-mnist --text-column text --max-steps 1 --run-dir none
expect "a built-in model on texts" 2 "need a model file that starts with an embedding layer" -- \
  "$BIN" train --model mlp --dataset csv --data-dir topics --text-column text --label-column topic --max-steps 1 \
  --run-dir none
expect "a misspelt text column" 2 "no column 'txt' for the text \(did you mean 'text'\?\)" -- \
  "$BIN" train --model "$SRC/models/text-encoder.yaml" --dataset csv --data-dir topics --text-column txt \
  --label-column topic --max-steps 1 --run-dir none
# --skip-bad: a ragged row and a row with a NUL byte stop the run (exit 3, naming the row);
# with --skip-bad they are left out and counted, and the run trains on the rest.
mkdir -p bad && cp topics/test.csv bad/test.csv
{ cat topics/train.csv; printf '1200,a ragged row,sport,extra\n1201,"nul\0byte",food\n'; } > bad/train.csv
bad_args=(--model "$SRC/models/text-encoder.yaml" --dataset csv --data-dir bad --text-column text --label-column topic
          --max-tokens 32 --max-steps 2 --run-dir none --no-self-check)
expect "a bad row stops the run" 3 "bad/train.csv: row 1202 has 4 fields, the header has 3" -- "$BIN" train "${bad_args[@]}"
expect "--skip-bad skips and counts" 0 "skip-bad: training data: 2 bad samples skipped \(first: bad/train.csv: row 1202" -- \
  "$BIN" train "${bad_args[@]}" --skip-bad
finish
