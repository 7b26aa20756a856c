#!/usr/bin/env bash
# plot_figure_test.sh: `mixprec plot` draws a figure a user would put in a report (issue 31):
# each run keeps one colour on every panel; a learning-rate panel; throughput and loss from
# zero; no empty panel for runs without a loss scaler (and the loss scale and skipped steps for
# runs with one); a language model's panels in bits/byte and tokens/s. Checked in the gnuplot
# script plot writes beside the PNG (BASE.gp), which is what gnuplot drew.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
TMP=$(mktemp -d /tmp/mixprec_plot_figure.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
if ! command -v gnuplot > /dev/null; then
  echo "gnuplot is not installed (scripts/setup installs gnuplot-nox): nothing to test"
  exit 77
fi
COMMON=(--dataset synthetic --batch-size 16 --train-subset 320 --test-subset 64 --no-self-check --threads 2)
"$BIN" train "${COMMON[@]}" --precision fp32 --epochs 2 --run-dir a > a.log 2>&1 || fail "train a: $(tail -2 a.log)"
"$BIN" train "${COMMON[@]}" --precision amp-fp16 --epochs 2 --lr-schedule cosine --warmup-steps 5 --run-dir b > b.log 2>&1 ||
  fail "train b: $(tail -2 b.log)"

expect plot-two 0 "plots: both.png, both.svg" -- "$BIN" plot a b -o both
gp=both.gp
# One colour per run: every plotted file of run a in a's colour, every one of run b in b's.
colours() { grep -o "'$1/plot_[a-z]*.dat' using [0-9:]* with [a-z ]*[0-9. ]* lc rgb '#[0-9a-f]*'" "$gp" | grep -o "#[0-9a-f]*" | sort -u; }
ca=$(colours a) cb=$(colours b)
[[ $(wc -l <<< "$ca") -eq 1 && $(wc -l <<< "$cb") -eq 1 && -n $ca && $ca != "$cb" ]] &&
  echo "ok   one-colour-per-run ($ca, $cb)" || fail "colours per run: a: $ca; b: $cb"
grep -q "set title 'learning rate'" "$gp" && echo "ok   learning-rate-panel" || fail "no learning-rate panel"
grep -q "set title 'test accuracy (%)'" "$gp" && echo "ok   accuracy-panel" || fail "no accuracy panel"
grep -A3 "set title 'throughput (images/s)'" "$gp" | grep -q "set yrange \[0:\*\]" && echo "ok   throughput-from-zero" ||
  fail "throughput not from zero"
grep -A3 "set title 'training loss'" "$gp" | grep -q "set yrange \[0:\*\]" && echo "ok   loss-from-zero" || fail "loss not from zero"
# The loss scale and skipped steps: only run b has a scaler, so only b is drawn there.
grep -A4 "set title 'loss scale'" "$gp" | grep -q "'b/plot_steps.dat'" && ! grep -A4 "set title 'loss scale'" "$gp" | grep -q "'a/plot_steps.dat'" &&
  echo "ok   loss-scale-for-scaler-runs-only" || fail "loss scale panel: $(grep -A4 "set title 'loss scale'" "$gp")"
grep -q "set multiplot layout 3,2" "$gp" && echo "ok   six-panels" || fail "layout: $(grep multiplot "$gp" | head -1)"

# Runs without a scaler: four panels, none left blank.
expect plot-no-scaler 0 "plots:" -- "$BIN" plot a -o only-a
grep -q "set multiplot layout 2,2" only-a.gp && ! grep -q "loss scale\|multiplot next" only-a.gp &&
  echo "ok   no-empty-panel-without-scaler" || fail "only-a: $(grep -E 'multiplot|loss scale' only-a.gp)"

# A language model: bits/byte and tokens/s.
head -c 40000 "$2/README.md" > corpus.txt
"$BIN" train --model gpt-tiny --dataset text --data-dir corpus.txt --batch-size 4 --max-steps 6 --eval-every 3 \
  --test-subset 8 --no-self-check --threads 2 --run-dir lm > lm.log 2>&1 || fail "train lm: $(tail -2 lm.log)"
expect plot-lm 0 "plots:" -- "$BIN" plot lm -o lm-plot
grep -q "set title 'test bits per byte'" lm-plot.gp && grep -q "set title 'throughput (tokens/s)'" lm-plot.gp &&
  echo "ok   language-model-units" || fail "lm panels: $(grep "set title" lm-plot.gp)"
# tokens/s = sequences/s x 128 (gpt-tiny's context): the rate column is that multiple of images/s.
awk 'NR == 2 {exit !($4 > 0)}' lm/plot_steps.dat && echo "ok   lm-rate-positive" || fail "lm rate: $(head -2 lm/plot_steps.dat)"

# A damaged run: fields of the wrong type in config.json and metrics.jsonl (a null scale, a
# string lr, a numeric dataset) are taken as absent, not a crash (nlohmann's value() threw).
cp -r a damaged
/usr/bin/python3 - <<'PY'
import json
c = json.load(open("damaged/config.json"))
c.update(dataset=5, model=[1], precision={"x": 1}, batch_size="big")
json.dump(c, open("damaged/config.json", "w"))
lines = [json.loads(l) for l in open("damaged/metrics.jsonl")]
for r in lines:
    if r.get("type") == "step" and r["step"] % 2 == 1:  # every other step: the rest still draws
        r.update(scale=None, lr="fast", time=[1], skipped="no")
open("damaged/metrics.jsonl", "w").write("".join(json.dumps(r) + "\n" for r in lines))
PY
expect plot-damaged 0 "plots:" -- "$BIN" plot damaged -o damaged-plot
finish
