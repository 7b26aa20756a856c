#!/usr/bin/env bash
# peer_env_test.sh: the PyTorch peer of bench/ runs on OpenBLAS's own kernels: bench/peer_python
# removes OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (and only those) from the interpreter's
# environment and says what it removed, and a peer script started without it
# (bench/peer_check.py's native_openblas()) re-executes itself through it with its arguments.
# Needs python3, not torch; about 0.1 s. Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
SOURCE_DIR=$2
PY=/usr/bin/python3
[[ -x $PY ]] || { echo "skipped: no $PY"; exit 77; }
WRAP="$SOURCE_DIR/bench/peer_python"
TMP=$(mktemp -d /tmp/mixprec_peer_env.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
fails=0
check() {  # check NAME EXPECTED ACTUAL
  if [[ $2 == "$3" ]]; then echo "ok   $1"; else echo "FAIL $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}
SHOW='import os, sys; print(os.environ.get("OPENBLAS_CORETYPE", "-"), os.environ.get("OPENBLAS_L2_SIZE", "-"), os.environ.get("OPENBLAS_NUM_THREADS", "-"), os.environ.get("KEEP", "-"), "[" + os.environ.get("MIXPREC_PEER_UNSET", "absent") + "]", *sys.argv[1:])'

# The wrapper: both variables removed, everything else kept, what was removed reported.
out=$(OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=524288 OPENBLAS_NUM_THREADS=2 KEEP=yes PEER_PYTHON=$PY \
      "$WRAP" -c "$SHOW" a "b c")
check "peer_python removes both, keeps the rest" "- - 2 yes [OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=524288] a b c" "$out"
out=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE KEEP=yes PEER_PYTHON=$PY "$WRAP" -c "$SHOW")
check "peer_python with nothing to remove" "- - - yes []" "$out"
out=$(OPENBLAS_CORETYPE= PEER_PYTHON=$PY "$WRAP" -c "$SHOW")
check "peer_python removes a set-but-empty variable" "- - - - [OPENBLAS_CORETYPE=]" "$out"

# A peer script started directly re-executes itself through the wrapper, arguments intact.
cat > "$TMP/peer_script.py" <<EOF
import os, sys
sys.path.insert(0, "$SOURCE_DIR/bench")
import peer_check
peer_check.native_openblas()
$SHOW
EOF
out=$(OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1 KEEP=yes "$PY" "$TMP/peer_script.py" x "y z")
check "native_openblas() re-executes through peer_python" "- - - yes [OPENBLAS_CORETYPE=Haswell OPENBLAS_L2_SIZE=1] x y z" "$out"
out=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" "$TMP/peer_script.py")
check "native_openblas() without preset variables" "- - - - []" "$out"

# Too late once numpy or torch is loaded (OpenBLAS has read its variables): an error, not silence.
cat > "$TMP/late.py" <<EOF
import sys
sys.modules["numpy"] = object()  # stands in for an imported numpy
sys.path.insert(0, "$SOURCE_DIR/bench")
import peer_check
try:
    peer_check.native_openblas()
except RuntimeError as e:
    print("refused")
EOF
out=$(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE -u MIXPREC_PEER_UNSET "$PY" "$TMP/late.py")
check "native_openblas() after numpy is refused" "refused" "$out"

((fails == 0)) && echo "peer_env_test: all passed" || echo "peer_env_test: $fails failed"
exit $((fails > 0))
