#!/usr/bin/env bash
# dashboard_test.sh: `mixprec dashboard`'s JSON API (issue 33; docs/dashboard.md), checked
# against the files themselves read here by Python: the runs listed (a finished run, one in a
# folder named "<script>alert(1)</script>", an experiment's trials grouped under it with its
# state file's fields), each run's latest values, running while its training holds run.lock
# and finished after; /api/metrics returns exactly the file's complete lines from an offset
# (a partial line only once complete, an offset past the end restarts); ids with "..", an
# absolute path or a symlink out of the folder are refused; a foreign Host is refused; the
# reproduce command trains the same losses again. Exit codes: Chart.js missing (1), a folder
# missing (2), the port in use (6). The page in a browser: dashboard_browser_test.sh.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_dashboard.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -x $PY ]] || { fail "no $PY (scripts/setup installs python3)"; finish; exit; }
CHART_JS=/usr/share/javascript/chart.js/chart.min.js
[[ -f $CHART_JS ]] || { echo "SKIP: $CHART_JS missing (scripts/setup installs libjs-chart.js)"; exit 77; }

train() { "$BIN" train --dataset synthetic --batch-size 16 --no-self-check --threads 1 "$@"; }
train --max-steps 6 --run-dir runs/done > done.log 2>&1 || { fail "train: $(tail -3 done.log)"; finish; exit; }
mkdir -p "runs/<script>alert(1)</script>" runs/sweep/trial-0001 runs/sweep/trial-0002 runs/partial outside
for d in "runs/<script>alert(1)</script>" runs/sweep/trial-0001 runs/sweep/trial-0002 runs/partial outside; do
  cp runs/done/config.json runs/done/metrics.jsonl "$d/"
done
sed -i 's/"lr": 0.001/"lr": 0.01/' runs/sweep/trial-0002/config.json
echo '{"best_trial": "trial-0002", "states": {"trial-0001": "stopped", "trial-0002": "done"}}' > runs/sweep/experiment.json
ln -s ../outside runs/escape                        # a run outside, through a symlink
ln -s ../../outside/config.json runs/sweep/leak.json  # a "state file" outside

serve_started dash.log -- "$BIN" dashboard runs --port 0 || { finish; exit; }
pids+=("$SERVER_PID")
grep -q "5 runs in 2 experiments" dash.log && echo "ok   banner-counts-runs" || fail "banner: $(head -2 dash.log)"

# A run still training: its lock is held until it ends (Ctrl-C saves and exits 130).
"$BIN" train --dataset synthetic --batch-size 16 --no-self-check --threads 1 --epochs 10000 --run-dir runs/live > live.log 2>&1 &
LIVE_PID=$!
pids+=("$LIVE_PID")

PORT=$PORT BIN="$BIN" LIVE_PID=$LIVE_PID CHART_JS=$CHART_JS "$PY" - <<'PY'
import http.client, json, os, shlex, signal, subprocess, time
from urllib.parse import quote as q
port, fails = int(os.environ["PORT"]), []
def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)[:400]))
    if not cond: fails.append(name)
def get(path, host=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers={"Host": host} if host else {})
    r = c.getresponse()
    body = r.read()
    return r.status, dict(r.getheaders()), body
def api(path):
    status, _, body = get(path)
    return status, json.loads(body)
def lines(path):  # the reference: the file's complete lines, parsed here
    text = open(path, "rb").read()
    return [json.loads(l) for l in text.split(b"\n")[:-1] if l.strip()]

status, listing = api("/api/runs")
check("runs-200", status == 200, listing)
by_path = {r["path"]: r for r in listing["runs"]}
hostile = "runs/<script>alert(1)</script>"
expected = {"runs/done", hostile, "runs/sweep/trial-0001", "runs/sweep/trial-0002", "runs/partial"}
check("runs-listed", expected <= set(by_path) and "runs/escape" not in by_path and
      not any(p.startswith("outside") for p in by_path), sorted(by_path))
check("hostile-name-verbatim", hostile in by_path and by_path[hostile]["name"] == "script>", by_path.get(hostile))
exps = {e["path"]: e for e in listing["experiments"]}
sweep = exps.get("runs/sweep", {})
check("trials-grouped", by_path["runs/sweep/trial-0001"]["experiment"] == sweep.get("id") and
      by_path["runs/sweep/trial-0002"]["experiment"] == sweep.get("id") and by_path["runs/done"]["experiment"] == "", listing)
files = {f["file"]: f for f in sweep.get("state_files", [])}
check("state-file-fields", files.get("experiment.json", {}).get("fields", {}).get("best_trial") == "trial-0002", files)
check("state-file-symlink-out-refused", "fields" not in files.get("leak.json", {}) and "error" in files.get("leak.json", {}), files)
check("hyperparameters", by_path["runs/sweep/trial-0002"]["config"]["lr"] == 0.01 and
      by_path["runs/done"]["config"]["precision"] == "amp-bf16", by_path["runs/sweep/trial-0002"]["config"])
ref = lines("runs/done/metrics.jsonl")
steps, evals = [r for r in ref if r["type"] == "step"], [r for r in ref if r["type"] == "eval"]
latest = by_path["runs/done"]["latest"]
check("latest-step", latest["step"] == steps[-1] and latest["steps_logged"] == len(steps) and
      latest["skipped_steps"] == sum(s["skipped"] for s in steps), latest)
check("latest-eval", latest["eval"] == evals[-1] and latest["best_accuracy"] == max(e["accuracy"] for e in evals), latest)
check("finished-state", by_path["runs/done"]["state"] == "finished", by_path["runs/done"]["state"])

# Incremental metrics: everything from 0, then nothing, a partial line held back, completed.
rid = by_path["runs/partial"]["id"]
status, m = api("/api/metrics?id=%s&from=0" % q(rid))
size = os.path.getsize("runs/partial/metrics.jsonl")
check("metrics-all", status == 200 and m["records"] == lines("runs/partial/metrics.jsonl") and m["offset"] == size and not m["reset"], m)
status, m2 = api("/api/metrics?id=%s&from=%d&file=%s" % (q(rid), m["offset"], q(m["file"])))
check("metrics-nothing-new", m2["records"] == [] and m2["offset"] == size, m2)
extra = {"type": "step", "step": 99, "epoch": 0, "loss": 0.5, "lr": 0.001, "scale": 1.0, "skipped": True, "time": 9.0}
text = json.dumps(extra)
with open("runs/partial/metrics.jsonl", "a") as f: f.write(text[:20])
status, m3 = api("/api/metrics?id=%s&from=%d&file=%s" % (q(rid), size, q(m["file"])))
check("metrics-partial-line-held", m3["records"] == [] and m3["offset"] == size, m3)
with open("runs/partial/metrics.jsonl", "a") as f: f.write(text[20:] + "\n")
status, m4 = api("/api/metrics?id=%s&from=%d&file=%s" % (q(rid), size, q(m["file"])))
check("metrics-completed-line", m4["records"] == [extra] and m4["offset"] == os.path.getsize("runs/partial/metrics.jsonl"), m4)
status, m5 = api("/api/metrics?id=%s&from=%d" % (q(rid), 10**12))
check("metrics-past-end-restarts", status == 200 and m5["reset"] and m5["records"] == lines("runs/partial/metrics.jsonl"), m5)
status, m6 = api("/api/metrics?id=%s&from=-5" % q(rid))
check("metrics-bad-offset-400", status == 400 and "from=-5" in m6["error"], m6)
# Lines no mixprec wrote: a field of an unexpected type, JSON nested 100,000 deep.
with open("runs/partial/metrics.jsonl", "a") as f:
    f.write('{"type": "step", "skipped": 1}\n' + "[" * 100000 + "]" * 100000 + "\n")
status, m7 = api("/api/metrics?id=%s&from=%d&file=%s" % (q(rid), m4["offset"], q(m4["file"])))
check("metrics-odd-lines", status == 200 and m7["records"] == [{"type": "step", "skipped": 1}] and m7["bad_lines"] == 1, m7)
status, again = api("/api/runs")
check("runs-survive-odd-lines", status == 200 and any(r["path"] == "runs/partial" for r in again["runs"]), again)

# Ids that leave the folder: malformed ones 400, symlinked ones 404, raw paths no route.
for bad in ["0:../outside", "0:..", "0:%2E%2E/outside", "/etc", "0:/etc", "../outside", "0:done/../../outside", "7:done"]:
    for route in ["/api/metrics?id=", "/api/run?id="]:
        status, body = api(route + q(bad))
        check("refused-400 %s %s" % (route, bad), status == 400 and "error" in body, (status, body))
for route in ["/api/metrics?id=", "/api/run?id="]:
    status, body = api(route + q("0:escape"))
    check("symlink-out-404 " + route, status == 404, (status, body))
status, _, body = get("/../outside/config.json")
check("raw-dotdot-path-404", status == 404, body)
status, _, body = get("/api/runs", host="attacker.example:%d" % port)
check("foreign-host-403", status == 403, body)

# The page and Debian's Chart.js, served by the dashboard itself.
status, headers, page = get("/")
check("page", status == 200 and b"<title>mixprec dashboard</title>" in page and
      "script-src 'self'" in headers.get("Content-Security-Policy", ""), headers)
status, headers, js = get("/chart.min.js")
check("chart-js-is-debians", status == 200 and js == open(os.environ["CHART_JS"], "rb").read(), len(js))

# The reproduce command trains the same run again: the same losses, step by step.
status, run = api("/api/run?id=" + q(by_path["runs/done"]["id"]))
check("reproduce-command", status == 200 and " train --config 'runs/done/config.json'" in run["reproduce"], run)
argv = shlex.split(run["reproduce"])
done = subprocess.run(argv, capture_output=True, text=True)
check("reproduce-runs", done.returncode == 0, done.stderr[-400:])
if done.returncode == 0:
    again = [r["loss"] for r in lines(argv[-1] + "/metrics.jsonl") if r["type"] == "step"]
    check("reproduce-same-losses", again == [s["loss"] for s in steps], (again, [s["loss"] for s in steps]))

# Running while the training holds its lock, finished once it ends (polled, generous bound).
def live_state():
    status, listing = api("/api/runs")
    return {r["path"]: r for r in listing["runs"]}.get("runs/live", {}).get("state")
def live_steps():
    status, listing = api("/api/runs")
    return {r["path"]: r for r in listing["runs"]}.get("runs/live", {}).get("latest", {}).get("steps_logged", 0)
deadline = time.time() + 300
while live_state() != "running" and time.time() < deadline: time.sleep(0.2)
check("live-running", live_state() == "running", live_state())
# Interrupted once it trains (its Ctrl-C handler is installed by then; a background job
# starts with SIGINT ignored).
while live_steps() < 1 and time.time() < deadline: time.sleep(0.2)
os.kill(int(os.environ["LIVE_PID"]), signal.SIGINT)
deadline = time.time() + 300
while live_state() != "finished" and time.time() < deadline: time.sleep(0.2)
check("live-finished-after-stop", live_state() == "finished", live_state())
raise SystemExit(1 if fails else 0)
PY
if [[ $? -eq 0 ]]; then
  wait "$LIVE_PID"  # interrupted by the checks above
  code=$?
  [[ $code -eq 130 ]] && echo "ok   live-run-interrupted-130" || fail "live run after SIGINT: exit $code, expected 130"
else
  fail "dashboard API checks (above)"
  kill -9 "$LIVE_PID"  # the checks may have stopped before interrupting it
fi
expect port-in-use 6 "cannot listen" -- "$BIN" dashboard runs --port "$PORT"
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
code=$?
[[ $code -eq 0 ]] && echo "ok   sigterm-exits-0" || fail "dashboard after SIGTERM: exit $code"

expect chart-js-missing 1 "libjs-chart.js" -- env MIXPREC_CHART_JS="$TMP/none.js" "$BIN" dashboard runs --port 0
expect folder-missing 2 "nope.*no such directory" -- "$BIN" dashboard "$TMP/nope" --port 0
finish
