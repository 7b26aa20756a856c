# expect.sh: the assertion helpers the e2e scripts share (sourced, not a test itself).
#   expect NAME CODE PATTERN -- command...   run it; its exit code must be CODE and its
#                                            output (stdout+stderr) must match PATTERN
#   fail MESSAGE                             count a failure
#   compare_losses A B TOL                   the step losses of run dirs A and B (their
#                                            metrics.jsonl) are at the same steps and agree
#                                            within TOL relative; prints the largest difference
#   serve_started LOG -- command...          start a server (mixprec serve ... --port 0) in the
#                                            background, output in LOG; once it listens,
#                                            SERVER_PID and PORT are set (return 0), else a
#                                            counted failure (return 1)
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
serve_started() {
  local log=$1
  shift 2  # LOG --
  "$@" > "$log" 2>&1 &
  SERVER_PID=$!
  PORT=""
  for _ in $(seq 1 300); do
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log")
    [[ -n $PORT ]] && return 0
    kill -0 "$SERVER_PID" 2> /dev/null || break
    sleep 0.1
  done
  fail "server did not start: $(tail -3 "$log")"
  return 1
}
compare_losses() {
  /usr/bin/python3 - "$1" "$2" "$3" <<'PY'
import json, sys
def losses(d):
    return {r["step"]: r["loss"] for r in map(json.loads, open(d + "/metrics.jsonl")) if r.get("type") == "step"}
a, b, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
if sorted(a) != sorted(b) or not a:
    sys.exit("steps differ: %d vs %d" % (len(a), len(b)))
worst = max(abs(a[s] - b[s]) / max(abs(a[s]), 1e-30) for s in a)
print("%d steps, largest relative difference %.3g (tolerance %g)" % (len(a), worst, tol))
sys.exit(0 if worst <= tol else 1)
PY
}
