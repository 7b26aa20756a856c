#!/usr/bin/env bash
# dashboard_browser_test.sh: `mixprec dashboard`'s page rendered by Debian's chromium,
# headless (issue 33). A finished run, a run still training, and runs in folders named
# "<script>alert(1)</script>" and "<img src=x onerror=document.title=...>" are served; the
# DOM chromium dumps after running the page must hold a chart canvas per metric with the runs'
# points, an experiment's state file shown field by field (the page writes each chart's point count into data-points), the hostile names as
# text only (escaped in the dump, no element made from them, the title unchanged, no script
# but the page's own two; a hostile tensor name in the gradient-underflow list likewise), the
# underflow chart's points and worst tensors of an amp-fp16 run and the note of a bf16 run, the table sorted by a column both ways, a run's reproduce command, and a live update: dumped again until the loss chart holds more
# points (polled, bounded; no sleep stands for synchronisation). A screenshot is kept:
# BUILD_DIR/dashboard_screenshot.png. Without chromium the test is skipped (exit 77).
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
CHROMIUM=$(command -v chromium || true)
[[ -n $CHROMIUM ]] || { echo "SKIP: no chromium (scripts/setup installs it)"; exit 77; }
[[ -f /usr/share/javascript/chart.js/chart.min.js ]] || { echo "SKIP: no Chart.js (scripts/setup installs libjs-chart.js)"; exit 77; }
TMP=$(mktemp -d /tmp/mixprec_dashboard_browser.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"

# amp-fp16 at a low loss scale, counting gradient underflow at every step: the underflow
# chart has points and its list names tensors (the live run, amp-bf16, has none, and says why).
"$BIN" train --dataset synthetic --batch-size 16 --no-self-check --threads 1 --max-steps 8 --run-dir runs/done \
  --precision amp-fp16 --init-scale 0.001 --underflow-every 1 > done.log 2>&1 || { fail "train: $(tail -3 done.log)"; finish; exit; }
IMG_NAME='<img src=x onerror=document.title=42>'
for d in "runs/<script>alert(1)</script>" "runs/$IMG_NAME"; do
  mkdir -p "$d" && cp runs/done/config.json runs/done/metrics.jsonl "$d/"
done
# Tensor names come from model files (user input): one hostile name in the underflow list.
"$PY" - "runs/$IMG_NAME/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
for r in lines:
    if "grad_underflow" in r:
        r["grad_underflow"]["worst"].insert(0, {"tensor": "<img src=x onerror=document.title=43>.weight",
                                                "values": 9, "subnormal": 9, "flushed": 0})
open(sys.argv[1], "w").write("".join(json.dumps(r) + "\n" for r in lines))
PY
# An experiment: a trial and a state file shaped as mixprec sweep's (the page shows any JSON
# file's fields generically; a list of objects as a table).
mkdir -p runs/sweep/trial-0001 && cp runs/done/config.json runs/done/metrics.jsonl runs/sweep/trial-0001/
echo '{"format": "mixprec-experiment", "status": "running", "trials": [{"id": 1, "dir": "trial-0001",
  "hyperparameters": {"lr": 0.0021}, "state": "paused-for-the-test"}]}' > runs/sweep/experiment.json
# The live run: slowed by a small batch on one thread, so the page sees it grow.
"$BIN" train --dataset synthetic --batch-size 16 --no-self-check --threads 1 --epochs 10000 --run-dir runs/live \
  > live.log 2>&1 &
pids+=($!)
for _ in $(seq 1 600); do  # its first step logged (bounded: 60 s)
  [[ -s runs/live/metrics.jsonl ]] && break
  sleep 0.1
done
[[ -s runs/live/metrics.jsonl ]] || { fail "live run logged nothing: $(tail -3 live.log)"; finish; exit; }

serve_started dash.log -- "$BIN" dashboard runs --port 0 || { finish; exit; }
pids+=("$SERVER_PID")
URL="http://127.0.0.1:$PORT/"

# chromium as the machine notes require (root: --no-sandbox), a fresh profile each time.
browse() {
  local profile
  profile=$(mktemp -d "$TMP/profile.XXXXXX")
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$profile" \
    --window-size=1280,900 --virtual-time-budget=5000 "$@" "$URL${FRAGMENT:-}" 2> "$TMP/chromium.log"
}

SHOT="$BUILD_DIR/dashboard_screenshot.png"
rm -f "$SHOT"
browse --screenshot="$SHOT" > /dev/null
if [[ -s $SHOT ]] && head -c 8 "$SHOT" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a"; then
  echo "ok   screenshot $SHOT"
else
  fail "no PNG screenshot at $SHOT: $(tail -3 "$TMP/chromium.log")"
fi

browse --dump-dom > dom1.html || fail "chromium --dump-dom: $(tail -3 chromium.log)"
# Checks one dumped DOM; prints the loss chart's point count last.
check_dom() {
  IMG_NAME=$IMG_NAME "$PY" - "$1" <<'PY'
import html.parser, os, sys
text = open(sys.argv[1], encoding="utf-8").read()
class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.title, self.in_title, self.charts, self.texts = [], "", False, {}, []
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        self.in_title = tag == "title"
        if tag == "figure" and "data-chart" in a: self.charts[a["data-chart"]] = int(a.get("data-points", "0"))
    def handle_endtag(self, tag): self.in_title = False
    def handle_data(self, data):
        if self.in_title: self.title += data
        self.texts.append(data)
d = Dom()
d.feed(text)
fails = []
def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)[:300]))
    if not cond: fails.append(name)
scripts = [a.get("src") for t, a in d.tags if t == "script"]
check("title-unchanged", d.title == "mixprec dashboard", d.title)
check("only-the-pages-scripts", scripts == ["/chart.min.js", "/dashboard.js"], scripts)
check("no-img-element", not any(t == "img" for t, _ in d.tags), [a for t, a in d.tags if t == "img"])
check("no-inline-handlers", not any(k.startswith("on") for _, a in d.tags for k in a), "an on* attribute")
alltext = "".join(d.texts)
check("script-name-shown-as-text", "runs/<script>alert(1)</script>" in alltext and "&lt;script&gt;alert(1)&lt;/script&gt;" in text)
check("img-name-shown-as-text", "runs/" + os.environ["IMG_NAME"] in alltext)
expected = {"loss", "test_loss", "accuracy", "lr", "throughput", "scale", "skipped", "memory", "underflow"}
canvases = sum(1 for t, _ in d.tags if t == "canvas")
check("charts-have-canvases", expected <= set(d.charts) and canvases >= len(d.charts), (sorted(d.charts), canvases))
# Four finished runs of 8 steps each are drawn, plus the live run's steps so far.
check("loss-chart-shows-points", d.charts.get("loss", 0) > 4 * 8, d.charts)
check("lr-chart-shows-points", d.charts.get("lr", 0) > 4 * 8, d.charts)
check("memory-chart-shows-points", d.charts.get("memory", 0) > 4 * 8, d.charts)  # step lines carry memory_bytes
# Four fp16 runs of 8 counted steps, two lines each (subnormal, flushed); the live run none.
check("underflow-chart-shows-points", d.charts.get("underflow", 0) >= 4 * 8 * 2, d.charts)
check("underflow-worst-tensors-named", any(t.startswith("fc1.weight: ") and "subnormal" in t for t in d.texts),
      [t for t in d.texts if "subnormal" in t][:5])
check("underflow-hostile-tensor-name-as-text", "<img src=x onerror=document.title=43>.weight: 9 subnormal" in alltext)
check("underflow-bf16-run-says-not-counted", "live: gradient underflow not counted" in alltext and
      "bf16 has f32's exponent range" in alltext, "no note for the bf16 run")
check("accuracy-chart-shows-points", d.charts.get("accuracy", 0) >= 3, d.charts)
check("table-lists-runs", alltext.count("finished") >= 4 and "running" in alltext, "states")
check("experiment-state-file-shown", "paused-for-the-test" in d.texts and "hyperparameters.lr" in d.texts and
      "trial-0001" in d.texts, "experiment.json's trials table")
print("LOSS_POINTS", d.charts.get("loss", 0))
sys.exit(1 if fails else 0)
PY
}
out=$(check_dom dom1.html)
code=$?
echo "$out" | grep -v LOSS_POINTS
[[ $code -eq 0 ]] || fail "rendered DOM (above)"
first=$(sed -n 's/^LOSS_POINTS //p' <<< "$out")

# Sorting by a column, both ways (the address's #sort=KEY&dir=±1, as a heading's click sets
# it): by step, the live run (the most steps) comes first descending, last ascending among
# the runs outside experiments.
for dir in -1 1; do
  FRAGMENT="#sort=step&dir=$dir" browse --dump-dom > "sorted$dir.html"
  order=$("$PY" - "sorted$dir.html" <<'PY'
import html.parser, sys
class Rows(html.parser.HTMLParser):
    ids, group = [], False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("class") == "group": self.group = True  # experiments' trials follow
        if tag == "tr" and "data-id" in a and not self.group: self.ids.append(a["data-id"])
r = Rows()
r.feed(open(sys.argv[1], encoding="utf-8").read())
print(" ".join(r.ids))
PY
)
  if [[ $dir == -1 && $order == "0:live "* ]] || [[ $dir == 1 && $order == *" 0:live" ]]; then
    echo "ok   sort-by-step dir=$dir ($order)"
  else
    fail "sort by step dir=$dir: rows $order"
  fi
done

# A run's config and reproduce command (#run=ID, as a click on its name sets it), for the run
# whose path holds "<script>": shown as text.
FRAGMENT="#run=0:%253Cscript%253Ealert%25281%2529%253C/script%253E" browse --dump-dom > details.html
"$PY" - details.html <<'PY'
import html.parser, sys
class Pre(html.parser.HTMLParser):
    text, inside, tags = "", False, []
    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.inside = tag == "pre" and ("id", "reproduce") in attrs
    def handle_endtag(self, tag): self.inside = False
    def handle_data(self, data):
        if self.inside: self.text += data
p = Pre()
p.feed(open(sys.argv[1], encoding="utf-8").read())
want = " train --config 'runs/<script>alert(1)</script>/config.json' --run-dir 'runs/<script>alert(1)</script>-reproduced'"
ok = want in p.text and p.tags.count("script") == 2
print(("ok   " if ok else "FAIL ") + "reproduce-command-shown-as-text" + ("" if ok else ": " + repr(p.text)))
sys.exit(0 if ok else 1)
PY
[[ $? -eq 0 ]] || fail "the run's details (above)"

# A live update: the loss chart of a later render holds more points (the live run's new steps).
grown=""
deadline=$((SECONDS + 240))
while [[ $SECONDS -lt $deadline ]]; do
  browse --dump-dom > dom2.html || continue
  now=$(check_dom dom2.html | sed -n 's/^LOSS_POINTS //p')
  if [[ -n $now && -n $first && $now -gt $first ]]; then grown=$now; break; fi
done
[[ -n $grown ]] && echo "ok   live-update ($first -> $grown loss points)" ||
  fail "the loss chart did not grow past $first points while runs/live trained"
finish
