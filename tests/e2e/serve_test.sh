#!/usr/bin/env bash
# serve_test.sh: `mixprec serve` (issue 17). A small trained cnn is served; clients check that
# POST /v1/predict gives the same classes and probabilities as `mixprec predict` for .npy,
# PNG and JSON bodies, from 24 concurrent clients with malformed requests mixed in (none of
# which disturbs the others) and that those requests were batched; /healthz, /v1/model and
# /metrics answer; 400 / 404 / 413 carry a JSON error; a full queue answers 503 with
# Retry-After; a client that stops mid-request is dropped after --timeout while others are
# served; SIGTERM answers the request in flight (16,384 images), then exits 0. Bad flags and
# a port in use give their exit codes.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_serve.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -x $PY ]] || { fail "no $PY (scripts/setup installs python3)"; finish; exit; }

"$BIN" train --dataset synthetic --batch-size 16 --max-steps 4 --no-eval --run-dir run --no-self-check \
  --precision amp-bf16 > train.log 2>&1 || { fail "train: $(tail -3 train.log)"; finish; exit; }

# Six 28x28 images: a uint8 .npy of all six, each one as JSON pixels, the first as a PNG.
"$PY" - <<'PY'
import json, random, struct, zlib
random.seed(11)
imgs = [[random.randrange(256) for _ in range(784)] for _ in range(6)]
header = "{'descr': '|u1', 'fortran_order': False, 'shape': (6, 28, 28), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
open("six.npy", "wb").write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(sum(imgs, [])))
json.dump(imgs, open("six.json", "w"))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)
raw = b"".join(b"\x00" + bytes(imgs[0][r * 28:(r + 1) * 28]) for r in range(28))
open("first.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
PY
"$BIN" predict run six.npy --json --top-k 10 > predict.json 2> predict.err || fail "predict: $(tail -2 predict.err)"

# Starts a server in the background with the given flags; sets PORT and SERVER_PID.
start_server() {
  local log=$1
  shift
  serve_started "$log" -- "$BIN" serve run --port 0 "$@"
  local started=$?
  pids+=("$SERVER_PID")
  return $started
}

# ---- the main server: predictions, concurrency, errors, metrics ----------------------------
if start_server serve.log --max-batch 16 --max-wait-us 20000 --workers 32 --max-body-bytes 200000 --timeout 2; then
  grep -q "model cnn" serve.log && echo "ok   banner-names-model" || fail "banner: $(head -3 serve.log)"
  PORT=$PORT "$PY" - <<'PY'
import http.client, json, os, socket, threading, time
port = int(os.environ["PORT"])
fails = []
def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)[:300]))
    if not cond: fails.append(name)
def request(method, path, body=None, ctype=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": ctype} if ctype else {}
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data

ref = json.load(open("predict.json"))["predictions"]
def same_as_predict(pred, i, name):
    mine = [(t["class"], t["probability"]) for t in pred["top"]]
    theirs = [(t["class"], t["probability"]) for t in ref[i]["top"]]
    ok = mine[0][0] == theirs[0][0] and all(abs(a[1] - b[1]) < 1e-5 for a, b in zip(sorted(mine), sorted(theirs)))
    check(name, ok and len(mine) == len(theirs), (mine[:3], theirs[:3]))

s, _, body = request("GET", "/healthz"); check("healthz", s == 200 and json.loads(body)["status"] == "ok", body)
s, _, body = request("GET", "/v1/model"); m = json.loads(body)
check("model-info", s == 200 and m["model"] == "cnn" and m["input_shape"] == [1, 28, 28] and m["classes"] == 10
      and m["precision"] == "amp-bf16" and m["parameters"] > 0 and m["weight_bytes"] == 4 * m["parameters"], m)

s, _, body = request("POST", "/v1/predict?top_k=10", open("six.npy", "rb").read(), "application/x-npy")
preds = json.loads(body)["predictions"] if s == 200 else []
check("npy-six-predictions", s == 200 and len(preds) == 6, body[:200])
for i, p in enumerate(preds): same_as_predict(p, i, "npy-same-as-predict-%d" % i)
s, _, body = request("POST", "/v1/predict?top_k=10", open("first.png", "rb").read(), "image/png")
check("png-status", s == 200, body[:200])
if s == 200: same_as_predict(json.loads(body)["predictions"][0], 0, "png-same-as-predict")

# 24 concurrent clients, 4 requests each: every 4th request is malformed; every good answer
# must be the answer predict gives for that image.
imgs = json.load(open("six.json"))
results, lock = [], threading.Lock()
def client(k):
    for r in range(4):
        i = (k + r) % 6
        if (k + r) % 4 == 3:
            s, _, body = request("POST", "/v1/predict", b'{"inputs": [[1, 2, ', "application/json")
            with lock: results.append(("bad", s, body, i))
        else:
            s, _, body = request("POST", "/v1/predict?top_k=10", json.dumps({"inputs": [imgs[i]]}), "application/json")
            with lock: results.append(("good", s, body, i))
threads = [threading.Thread(target=client, args=(k,)) for k in range(24)]
for t in threads: t.start()
for t in threads: t.join()
good = [r for r in results if r[0] == "good"]; bad = [r for r in results if r[0] == "bad"]
check("concurrent-good-all-200", all(r[1] == 200 for r in good), [r[1] for r in good])
check("concurrent-bad-all-400", all(r[1] == 400 and "malformed JSON" in json.loads(r[2])["error"] for r in bad),
      [r[2][:100] for r in bad[:2]])
matched = 0
for _, s, body, i in good:
    if s != 200: continue
    mine = json.loads(body)["predictions"][0]["top"]
    theirs = ref[i]["top"]
    if mine[0]["class"] == theirs[0]["class"] and abs(mine[0]["probability"] - theirs[0]["probability"]) <= 1e-5:
        matched += 1
check("concurrent-answers-match-predict", matched == 72 and len(good) == 72, "%d of %d match" % (matched, len(good)))

# Errors: a JSON body naming the problem, and the status the docs give.
s, _, body = request("POST", "/v1/predict", json.dumps({"inputs": [[1, 2, 3]]}), "application/json")
check("400-wrong-shape", s == 400 and "shape [3], expected [1, 28, 28] or [28, 28] or [784]" in json.loads(body)["error"], body)
s, _, body = request("POST", "/v1/predict", "x", "text/csv")
check("400-content-type", s == 400 and "Content-Type 'text/csv'" in json.loads(body)["error"], body)
s, _, body = request("POST", "/v1/predict?top_k=11", open("six.npy", "rb").read(), "application/x-npy")
check("400-top-k", s == 400 and "top_k=11" in json.loads(body)["error"], body)
s, _, body = request("POST", "/v1/predict", b"[" + b"0," * 150000 + b"0]", "application/json")
check("413-body-too-large", s == 413 and "max-body-bytes" in json.loads(body)["error"], (s, body[:200]))
s, _, body = request("GET", "/v2/nothing")
check("404-json", s == 404 and "no route GET /v2/nothing" in json.loads(body)["error"], (s, body))

# A client that sends half a request is dropped after --timeout (2 s); others are served meanwhile.
slow = socket.create_connection(("127.0.0.1", port))
slow.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inp")
s, _, _ = request("GET", "/healthz")
check("served-beside-a-slow-client", s == 200)
slow.settimeout(10)
t0 = time.time()
try:
    data = slow.recv(4096)
except socket.timeout:
    data = None
check("slow-client-dropped", data is not None and time.time() - t0 < 8, (data, time.time() - t0))

s, _, body = request("GET", "/metrics"); text = body.decode()
def metric(name):
    for line in text.splitlines():
        if line.startswith(name + " "): return float(line.split()[-1])
    return None
batches, samples = metric("mixprec_batch_size_count"), metric("mixprec_batch_size_sum")
check("metrics-requests", 'mixprec_requests_total{route="/v1/predict",code="200"}' in text
      and metric('mixprec_requests_total{route="/v1/predict",code="400"}') >= 27, text[:400])
check("metrics-batched", batches is not None and samples is not None and samples > batches,
      "%s samples in %s forward passes" % (samples, batches))
check("metrics-latency-histogram", metric('mixprec_request_duration_seconds_bucket{le="+Inf"}') == metric("mixprec_request_duration_seconds_count"))
print("batching: %d samples in %d forward passes" % (samples or 0, batches or 0))
raise SystemExit(1 if fails else 0)
PY
  [[ $? -eq 0 ]] || fail "main server checks (above)"
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; rc=$?
  [[ $rc -eq 0 ]] && echo "ok   sigterm-exit-0" || fail "sigterm: exit $rc: $(tail -3 serve.log)"
fi

# ---- a queue of one sample under a flood: 503 with Retry-After, the rest answered ----------
if start_server queue.log --max-queue 1 --max-inputs 1 --workers 64; then
  PORT=$PORT "$PY" - <<'PY'
import http.client, json, os, threading
port = int(os.environ["PORT"])
one = json.dumps({"inputs": [json.load(open("six.json"))[0]]})
got, lock = [], threading.Lock()
def client():
    for _ in range(10):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        c.request("POST", "/v1/predict", body=one, headers={"Content-Type": "application/json"})
        r = c.getresponse(); body = r.read(); c.close()
        with lock: got.append((r.status, r.getheader("Retry-After"), body))
threads = [threading.Thread(target=client) for _ in range(64)]
for t in threads: t.start()
for t in threads: t.join()
full = [g for g in got if g[0] == 503]
ok = all(g[0] == 200 for g in got if g[0] != 503)
good503 = all(g[1] == "1" and "queue is full" in json.loads(g[2])["error"] for g in full)
print("%d answered: %d x 200, %d x 503" % (len(got), len(got) - len(full), len(full)))
assert len(got) == 640 and ok and full and good503, (len(got), ok, len(full), full[:1])
PY
  [[ $? -eq 0 ]] && echo "ok   503-when-queue-full" || fail "503-when-queue-full (above)"
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"
fi

# ---- SIGTERM while a long request runs: it is answered in full, then the server exits 0 -----
if start_server drain.log --max-inputs 16384 --max-queue 16384; then
  PORT=$PORT SERVER_PID=$SERVER_PID "$PY" - <<'PY'
import http.client, os, signal, struct, threading, time, json
port, pid = int(os.environ["PORT"]), int(os.environ["SERVER_PID"])
fails = []
def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + str(detail)[:300]))
    if not cond: fails.append(name)
n = 16384  # 16384 images: a forward pass of seconds, not milliseconds
header = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, 28, 28), }" % n
header += " " * (63 - (10 + len(header)) % 64) + "\n"
body = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(range(256)) * (n * 784 // 256)
answer = []
def post():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/predict", body=body, headers={"Content-Type": "application/x-npy"})
    r = c.getresponse(); answer.append((r.status, r.read()))
t = threading.Thread(target=post); t.start()
time.sleep(0.5)  # received and decoded; the model is working on it
os.kill(pid, signal.SIGTERM)
time.sleep(0.2)
try:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5); c.request("GET", "/healthz"); c.getresponse(); refused = False
except OSError:
    refused = True
t.join()
check("no-new-connections-after-sigterm", refused)
check("sigterm-answers-in-flight", answer and answer[0][0] == 200 and len(json.loads(answer[0][1])["predictions"]) == n,
      answer[0][0] if answer else "no answer")
raise SystemExit(1 if fails else 0)
PY
  [[ $? -eq 0 ]] || fail "drain checks (above)"
  wait "$SERVER_PID"; rc=$?
  [[ $rc -eq 0 ]] && echo "ok   drained-exit-0" || fail "drain: exit $rc: $(tail -3 drain.log)"
  grep -q "answering the requests in flight" drain.log && echo "ok   drain-message" || fail "drain message: $(tail -3 drain.log)"
fi

# ---- flags and start-up errors ----------------------------------------------------------------
expect bad-precision 2 "unknown precision 'bf15'.*did you mean 'bf16'" -- "$BIN" serve run --precision bf15
expect bad-port 2 "port" -- "$BIN" serve run --port 70000
expect queue-smaller-than-request 2 "max-queue \(4\) must be at least --max-inputs \(8\)" -- \
  "$BIN" serve run --max-queue 4 --max-inputs 8
expect missing-checkpoint 4 "checkpoint error" -- "$BIN" serve nothing-here
if start_server hold.log; then
  expect port-in-use 6 "cannot listen on 127.0.0.1:$PORT" -- "$BIN" serve run --port "$PORT"
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"
fi
# bf16 deployment: weights cast once to bf16, half the bytes of fp32.
if start_server bf16.log --precision bf16; then
  "$PY" - "$PORT" <<'PY' && echo "ok   bf16-weights-half" || fail "bf16 weights: $(tail -2 bf16.log)"
import http.client, json, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1])); c.request("GET", "/v1/model"); m = json.loads(c.getresponse().read())
assert m["precision"] == "o2-bf16" and m["weight_bytes"] == 2 * m["parameters"], m
PY
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"
fi
finish
