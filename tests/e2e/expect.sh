# expect.sh: the assertion helpers the e2e scripts share (sourced, not a test itself).
#   expect NAME CODE PATTERN -- command...   run it; its exit code must be CODE and its
#                                            output (stdout+stderr) must match PATTERN
#   fail MESSAGE                             count a failure
# Each script ends with: finish
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
expect() {
  local name=$1 code=$2 pattern=$3
  shift 4
  local out got
  out=$("$@" 2>&1)
  got=$?
  if [[ $got -ne $code ]]; then
    fail "$name: exit $got, expected $code"; echo "$out" | tail -5; return
  fi
  if ! grep -qE -- "$pattern" <<< "$out"; then
    fail "$name: output lacks /$pattern/"; echo "$out" | tail -5; return
  fi
  echo "ok   $name"
}
finish() {
  echo "$fails failed"
  [[ $fails -eq 0 ]]
}
