#!/usr/bin/env bash
# plot_hostile_names_test.sh: `mixprec plot` on run directories whose names (and whose
# config.json precision, the legend) hold shell and gnuplot syntax must draw the chart and run
# nothing (issue 12: plot used to start gnuplot through a shell with the path in the command
# line). A name with a line break is refused with exit 2, before gnuplot runs.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
TMP=$(mktemp -d /tmp/mixprec_plot_hostile.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
if ! command -v gnuplot > /dev/null; then
  echo "gnuplot is not installed (scripts/setup installs gnuplot-nox): nothing to test"
  exit 77
fi
FAST=(--dataset synthetic --batch-size 4 --no-self-check --max-steps 2 --no-eval --precision fp32)

# Every attack writes a file named PWNED* into $TMP if it runs.
hostile=(
  "q'; touch PWNED1; echo '"
  'd$(touch PWNED2)'
  'b`touch PWNED3`'
  "mix\"'\\\`touch PWNED5\`"
)
for i in "${!hostile[@]}"; do
  dir=${hostile[$i]}
  if ! "$BIN" train "${FAST[@]}" --run-dir "$dir" > "train$i.log" 2>&1; then
    fail "train into hostile dir $i: $(tail -2 "train$i.log")"
    continue
  fi
  expect "plot-hostile-$i" 0 "plots:" -- "$BIN" plot -- "$dir"
  [[ -s "$dir/training.png" && -s "$dir/training.svg" ]] && echo "ok   plot-hostile-$i-files" ||
    fail "plot-hostile-$i-files: no training.png/svg in the hostile directory"
done

# The legend comes from config.json, which anyone can edit: gnuplot syntax there is a label.
"$BIN" train "${FAST[@]}" --run-dir legend > /dev/null 2>&1 || fail "train legend"
sed -i 's/"precision": *"[^"]*"/"precision": "x'"'"'\\n system(\\"touch PWNED6\\") `touch PWNED7`"/' legend/config.json
grep -q PWNED6 legend/config.json || fail "legend: config.json not rewritten: $(grep precision legend/config.json)"
expect plot-hostile-legend 0 "plots:" -- "$BIN" plot legend

# A directory name with a line break cannot be written into a gnuplot script: exit 2.
mkdir -p $'nl\nsystem("touch PWNED8")'
cp legend/metrics.jsonl legend/config.json $'nl\nsystem("touch PWNED8")'/
expect plot-newline-refused 2 "control character" -- "$BIN" plot $'nl\nsystem("touch PWNED8")'
expect plot-output-newline-refused 2 "control character" -- "$BIN" plot legend -o $'out\nx'

# Nothing ran, anywhere under $TMP.
pwned=$(find "$TMP" -name 'PWNED*' 2> /dev/null)
[[ -z $pwned ]] && echo "ok   nothing-executed" || fail "nothing-executed: found $pwned"
finish
