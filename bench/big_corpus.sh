#!/usr/bin/env bash
# big_corpus.sh: a text corpus bigger than memory (issue 34). `--dataset text` maps the file
# and draws training windows at seeded random offsets, so a 6 GiB text should train gpt-tiny
# with the peak RSS of a 6 MiB one (target: within 10%) and resume bit-exactly. This builds
# both files from the King James Bible (Debian's bible-kjv, through scripts/prepare-kjv)
# repeated, trains gpt-tiny the same number of steps on each (each run's peak RSS is its
# VmHWM, read by getrusage of the child), then checks that a run of the big file stopped
# halfway and resumed logs the uninterrupted run's losses bit for bit. The big file is
# deleted at the end (it needs SIZE GiB free in --dir). Not a timed benchmark: the steps'
# speed is printed for information only.
#
#   bench/big_corpus.sh [--build-dir build] [--dir /tmp] [--gib 6] [--steps 40] [--batch-size 16]
#       [--precision amp-bf16]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build DIR=${TMPDIR:-/tmp} GIB=6 STEPS=40 BATCH=16 PRECISION=amp-bf16
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --dir) DIR=$2; shift 2 ;;
    --gib) GIB=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --batch-size) BATCH=$2; shift 2 ;;
    --precision) PRECISION=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "big_corpus.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
BIN=$(cd "$ROOT" && cd "$BUILD" && pwd)/mixprec
[[ -x $BIN ]] || { echo "big_corpus.sh: $BIN not built" >&2; exit 1; }
for v in GIB STEPS BATCH; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "big_corpus.sh: --${v,,} must be a positive integer, got '${!v}'" >&2; exit 2; }
done
((STEPS >= 2)) || { echo "big_corpus.sh: --steps must be at least 2 (the resume stops halfway)" >&2; exit 2; }
WORK=$(mktemp -d "$DIR/big_corpus.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
free_kib=$(df -Pk "$WORK" | awk 'NR == 2 { print $4 }')
((free_kib > GIB * 1024 * 1024 + 1024 * 1024)) ||
  { echo "big_corpus.sh: $DIR has $((free_kib / 1024 / 1024)) GiB free; $GIB GiB + 1 needed" >&2; exit 1; }

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$ROOT/scripts/prepare-kjv" "$WORK/kjv" > /dev/null
# A file of exactly N bytes: the Bible repeated (doubling, then cut), so both files hold text.
make_text() {  # make_text BYTES OUT
  cp "$WORK/kjv/kjv.txt" "$2"
  while (($(stat -c %s "$2") < $1)); do cat "$2" "$2" > "$2.tmp" && mv "$2.tmp" "$2"; done
  truncate -s "$1" "$2"
}
make_text $((6 * 1024 * 1024)) "$WORK/small.txt"
t0=$(date +%s)
make_text $((GIB * 1024 * 1024 * 1024)) "$WORK/big.txt"
echo "wrote $GIB GiB of text in $(($(date +%s) - t0)) s"

peak_kib() {  # peak_kib COMMAND...: the command's peak RSS in KiB (its VmHWM)
  /usr/bin/python3 - "$@" <<'PY'
import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
if r.returncode != 0:
    sys.exit("exit %d: %s" % (r.returncode, r.stderr.decode()[-400:]))
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
RUN=(train --model gpt-tiny --dataset text --precision "$PRECISION" --batch-size "$BATCH" --test-subset 64
     --eval-every "$STEPS" --no-self-check)
small=$(peak_kib "$BIN" "${RUN[@]}" --data-dir "$WORK/small.txt" --max-steps "$STEPS" --run-dir "$WORK/run-small")
big=$(peak_kib "$BIN" "${RUN[@]}" --data-dir "$WORK/big.txt" --max-steps "$STEPS" --run-dir "$WORK/run-big")
ratio=$(python3 -c "print('%.3f' % ($big / $small))")
echo "peak RSS, gpt-tiny $PRECISION, batch $BATCH, $STEPS steps: 6 MiB text $((small / 1024)) MiB, $GIB GiB text $((big / 1024)) MiB (ratio $ratio; target <= 1.10)"

half=$((STEPS / 2))
"$BIN" "${RUN[@]}" --data-dir "$WORK/big.txt" --max-steps "$half" --no-eval --run-dir "$WORK/run-split" > /dev/null 2>&1
"$BIN" train --resume "$WORK/run-split" --max-steps "$STEPS" > /dev/null 2>&1
losses() { python3 - "$1" "$half" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("type") == "step" and r["step"] > int(sys.argv[2]):
        print(r["step"], repr(r["loss"]))
PY
}
a=$(losses "$WORK/run-big/metrics.jsonl")
b=$(losses "$WORK/run-split/metrics.jsonl")
n=$(wc -l <<< "$a")
if [[ -n $a && $a == "$b" ]]; then
  echo "resume: steps $((half + 1))..$STEPS of the $GIB GiB run stopped at step $half and resumed equal the uninterrupted run's losses bit for bit ($n steps)"
else
  echo "resume: MISMATCH between the uninterrupted and the resumed run:"
  diff <(echo "$a") <(echo "$b") | head -5
  exit 1
fi
python3 -c "import sys; sys.exit(0 if $big <= 1.10 * $small else 1)" || { echo "peak RSS target missed"; exit 1; }
