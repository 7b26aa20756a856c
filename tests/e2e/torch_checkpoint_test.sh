#!/usr/bin/env bash
# torch_checkpoint_test.sh: PyTorch reads a mixprec checkpoint as a state_dict and predicts
# what mixprec predicts (tests/golden/check_checkpoint_torch.py). Where /usr/bin/python3
# has no torch (it is optional: scripts/setup --with-torch) it exits 77, which ctest reports
# as skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt), never as passed.
# Also checks the other direction: a checkpoint written from a PyTorch model loads in mixprec.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$1
SOURCE_DIR=$2
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
CHECK="$SOURCE_DIR/tests/golden/check_checkpoint_torch.py"
if ! [[ -x $PY ]] || ! "$PY" -c "import torch" 2>/dev/null; then
  echo "skipped: $PY has no torch (scripts/setup --with-torch installs it)"; exit 77
fi
TMP=$(mktemp -d /tmp/mixprec_torch_ckpt.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
run() {  # run NAME command...: must exit 0
  local name=$1; shift
  local out
  if out=$("$@" 2>&1); then echo "ok   $name"; echo "$out" | tail -2 | sed 's/^/     /'
  else echo "FAIL $name"; echo "$out" | tail -8; fails=$((fails + 1)); fi
}

# PyTorch -> mixprec: a checkpoint written from torch's state_dict loads, and both agree.
run torch-make "$PY" "$CHECK" make "$TMP/from_torch.safetensors"
run torch-made-eval "$BIN" eval --checkpoint "$TMP/from_torch.safetensors" --precision fp32 \
  --batch-size 64 --save-predictions "$TMP/pred_torch.safetensors"
run torch-made-check "$PY" "$CHECK" check "$TMP/from_torch.safetensors" "$TMP/pred_torch.safetensors"

# mixprec training -> PyTorch.
run train "$BIN" train --dataset synthetic --max-steps 3 --batch-size 32 --no-eval \
  --run-dir "$TMP/run" --save-every 2
run trained-eval "$BIN" eval --checkpoint "$TMP/run" --precision fp32 --batch-size 64 \
  --save-predictions "$TMP/pred_run.safetensors"
ck=$(ls "$TMP"/run/*.safetensors 2>/dev/null | grep -v pred | head -1)
# The file eval resolved: the run's last pointer, else any checkpoint in it.
if [[ -f $TMP/run/last.json ]]; then
  ck="$TMP/run/$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["checkpoint"])' "$TMP/run/last.json")"
elif [[ -f $TMP/run/last.safetensors ]]; then
  ck="$TMP/run/last.safetensors"
fi
run trained-check "$PY" "$CHECK" check "$ck" "$TMP/pred_run.safetensors"
echo "$fails failed"
exit $((fails > 0))
