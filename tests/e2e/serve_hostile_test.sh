#!/usr/bin/env bash
# serve_hostile_test.sh: `mixprec serve` against a hostile client over raw sockets (issue 31):
# invalid UTF-8 everywhere (path, query, Content-Type, JSON strings, the checkpoint's own path),
# malformed request lines, header floods, smuggling framings, chunked abuse past the body
# limit, trickling clients, idle-connection floods, connection floods beyond
# --max-connections, pipelining, and SIGTERM while clients trickle. After every attack the
# server still answers; its memory stays bounded; no request ends the process.
# No check depends on timing: a deadline is checked by waiting (with a generous bound) for
# the answer the deadline must produce.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
TMP=$(mktemp -d /tmp/mixprec_hostile.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
cd "$TMP"
[[ -x $PY ]] || { fail "no $PY (scripts/setup installs python3)"; finish; exit; }

"$BIN" train --dataset synthetic --batch-size 16 --max-steps 2 --no-eval --run-dir run --no-self-check \
  --precision fp32 > train.log 2>&1 || { fail "train: $(tail -3 train.log)"; finish; exit; }
# The same run under a directory name that is not UTF-8: /v1/model quotes it.
cp -r run "$(printf 'run-\xff')"

# The client the attacks share: raw sockets, so every byte is exactly what the test wrote.
cat > client.py <<'PY'
import json, os, socket, time
PORT = int(os.environ["PORT"])
fails = []
def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else ": " + repr(detail)[:300]))
    if not cond: fails.append(name)
def connect():
    s = socket.create_connection(("127.0.0.1", PORT))
    s.settimeout(60)  # an answer that never comes fails the check instead of hanging the test
    return s
_pending = {}  # bytes read past one response, per socket (pipelined answers)
def read_response(s):
    """(status, headers dict, body bytes) of one response, or (0, {}, b"") at EOF."""
    data = _pending.pop(s.fileno(), b"")
    while b"\r\n\r\n" not in data:
        try:
            more = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            more = b""
        if not more: return 0, {}, b""
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        more = s.recv(65536)
        if not more: break
        rest += more
    if len(rest) > n: _pending[s.fileno()] = rest[n:]
    return status, headers, rest[:n]
def exchange(raw):
    s = connect()
    s.sendall(raw)
    r = read_response(s)
    s.close()
    return r
def error_of(body):
    try:
        return json.loads(body)["error"]
    except Exception as e:
        return "not JSON: %r (%s)" % (body[:100], e)
def healthy():
    return exchange(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")[0] == 200
def rss_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"): return int(line.split()[1])
PY

start_server() {
  local log=$1
  shift
  serve_started "$log" -- "$BIN" serve "$@" --port 0
  local started=$?
  pids+=("$SERVER_PID")
  return $started
}

# ---- bytes that are not UTF-8, malformed requests, framing ----------------------------------
if start_server bytes.log run --max-body-bytes 200000 --timeout 3; then
  PORT=$PORT SERVER_PID=$SERVER_PID "$PY" - <<'PY'
exec(open("client.py").read())
s, _, body = exchange(b"GET /x%FF HTTP/1.1\r\nHost: t\r\n\r\n")
check("invalid-utf8-path-is-404-json", s == 404 and "/x\ufffd" in error_of(body), (s, body))
check("alive-after-invalid-utf8-path", healthy())
s, _, body = exchange(b"POST /v1/predict?top_k=%FF HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n[]")
check("invalid-utf8-query-is-400", s == 400 and "top_k=\ufffd" in error_of(body), (s, body))
s, _, body = exchange(b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: image/\xffpng\r\nContent-Length: 1\r\n\r\nx")
check("invalid-utf8-content-type-is-400", s == 400 and "Content-Type" in error_of(body), (s, body))
bad_json = b'{"inputs": ["\xff"]}'
s, _, body = exchange(b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(bad_json), bad_json))
check("invalid-utf8-json-string-is-400", s == 400 and "malformed JSON" in error_of(body), (s, body))
s, _, body = exchange(b"G\xffT / HTTP/1.1\r\nHost: t\r\n\r\n")
check("invalid-utf8-method-is-400", s == 400, (s, body))
s, _, body = exchange(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-\xff: 1\r\n\r\n")
check("invalid-utf8-header-name-is-400", s == 400, (s, body))
s, _, body = exchange(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Name: \xff\xfe\r\n\r\n")
check("invalid-utf8-header-value-is-accepted", s == 200, (s, body))  # obs-text: RFC 9110 allows it
for name, raw, want in (
        ("garbage-line", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n", 400),  # a TLS hello
        ("http2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        ("no-version", b"GET /healthz\r\nHost: t\r\n\r\n", 400),
        ("no-host", b"GET /healthz HTTP/1.1\r\n\r\n", 400),
        ("long-request-line", b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414),
        ("header-flood", b"GET /healthz HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(1000)) + b"\r\n", 431),
        ("huge-header", b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"v" * 100000 + b"\r\n\r\n", 431),
        ("folded-header", b"GET /healthz HTTP/1.1\r\nHost: t\r\nX: a\r\n b\r\n\r\n", 400),
        ("space-before-colon", b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length : 2\r\n\r\n[]", 400),
        ("conflicting-content-length", b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n[]x", 400),
        ("content-length-and-chunked", b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        ("unknown-transfer-coding", b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        ("bad-chunk-size", b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n", 400),
        ("chunk-longer-than-its-size", b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]]\r\n0\r\n\r\n", 400),
        ("get-on-post-route", b"GET /v1/predict HTTP/1.1\r\nHost: t\r\n\r\n", 405),
        ("post-on-get-route", b"POST /healthz HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", 405)):
    s, headers, body = exchange(raw)
    check(name + "-is-%d" % want, s == want and error_of(body) and not error_of(body).startswith("not JSON"), (s, body))
s, headers, _ = exchange(b"GET /v1/predict HTTP/1.1\r\nHost: t\r\n\r\n")
check("405-names-allowed-methods", headers.get("allow") == "POST", headers)
# A chunked body well within the limit is read and answered like any other.
body = b'{"inputs": [[' + b",".join(b"0" for _ in range(784)) + b"]]}"
chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 100]), body[i:i + 100]) for i in range(0, len(body), 100)) + b"0\r\n\r\n"
s, _, answer = exchange(b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
check("chunked-body-answered", s == 200 and len(json.loads(answer)["predictions"]) == 1, (s, answer[:200]))
# Pipelined: three requests in one write, three answers in order on the same connection.
c = connect()
c.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\nGET /nothing HTTP/1.1\r\nHost: t\r\n\r\nGET /v1/model HTTP/1.1\r\nHost: t\r\n\r\n")
got = [read_response(c)[0] for _ in range(3)]
c.close()
check("pipelined-answers-in-order", got == [200, 404, 200], got)
# A 64 MiB chunked body against a 200 kB limit: 413 at the chunk that crosses it, the body
# never buffered (the server's memory grows by far less than the body).
pid = int(os.environ["SERVER_PID"])
before = rss_kib(pid)
c = connect()
c.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
chunk = b"10000\r\n" + b"1" * 0x10000 + b"\r\n"
sent = 0
try:
    while sent < 64 << 20:
        c.sendall(chunk)
        sent += len(chunk)
except OSError:
    pass
s, _, body = read_response(c)
c.close()
after = rss_kib(pid)
check("chunked-past-limit-is-413", s == 413 and "200000" in error_of(body), (s, body))
check("chunked-past-limit-not-buffered", sent < 64 << 20 and after - before < 32 * 1024,
      "sent %d bytes, server RSS %d -> %d KiB" % (sent, before, after))
s, _, body = exchange(b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 300000\r\n\r\n")
check("content-length-past-limit-is-413", s == 413, (s, body))
check("alive-after-framing-attacks", healthy())
raise SystemExit(1 if fails else 0)
PY
  [[ $? -eq 0 ]] || fail "bytes and framing checks (above)"
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; rc=$?
  [[ $rc -eq 0 ]] && echo "ok   exit-0-after-attacks" || fail "exit $rc after the attacks: $(tail -3 bytes.log)"
fi

# /v1/model of a checkpoint whose path is not UTF-8: 200, the path with U+FFFD.
if start_server model.log "$(printf 'run-\xff')"; then
  PORT=$PORT "$PY" - <<'PY' && echo "ok   non-utf8-checkpoint-path-model-info" || fail "non-utf8 checkpoint path /v1/model"
exec(open("client.py").read())
s, _, body = exchange(b"GET /v1/model HTTP/1.1\r\nHost: t\r\n\r\n")
assert s == 200 and "run-\ufffd" in json.loads(body)["checkpoint"], (s, body)
PY
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"
fi

# ---- slow clients, idle floods, connection floods -------------------------------------------
if start_server slow.log run --workers 4 --timeout 2 --max-connections 64 --keep-alive-timeout 3600; then
  PORT=$PORT SERVER_PID=$SERVER_PID "$PY" - <<'PY'
exec(open("client.py").read())
import threading
# Four clients sending a byte a second hold no worker: health checks answer meanwhile, and
# each trickler gets 408 once its request outlives --timeout (2 s), however steadily it sends.
request = b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n" + b" " * 5000
statuses = []
def trickle():
    s = connect()
    status = 0
    for i in range(len(request)):
        try:
            s.sendall(request[i:i + 1])
        except OSError:
            break
        s.settimeout(1.0)
        try:
            peek = s.recv(1, socket.MSG_PEEK)
        except socket.timeout:
            continue
        except OSError:
            break
        break
    s.settimeout(60)
    statuses.append(read_response(s)[0])
    s.close()
threads = [threading.Thread(target=trickle) for _ in range(4)]
for t in threads: t.start()
check("health-answers-beside-tricklers", all(healthy() for _ in range(5)))
for t in threads: t.join()
check("tricklers-get-408", statuses == [408] * 4, statuses)
# 300 idle connections against --max-connections 64: the oldest idle ones are shed, and a
# health check is answered.
idle = []
for _ in range(300):
    idle.append(connect())
check("health-answers-beside-300-idle-sockets", healthy())
shed = 0
for s in idle:
    s.settimeout(60)
    try:
        if s.recv(1) == b"": shed += 1
    except OSError:
        shed += 1
    if shed >= 236: break
check("idle-connections-shed", shed >= 236, shed)  # keep-alive is 3600 s: only shedding closes them
s = connect()
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
text = read_response(s)[2].decode()
s.close()
shed_metric = [float(l.split()[-1]) for l in text.splitlines() if l.startswith("mixprec_connections_shed_total ")]
check("metrics-count-shed-connections", shed_metric and shed_metric[0] >= 236, text[-300:])
for s in idle: s.close()
# 100 connections each in the middle of a request (none idle, none sheddable) against 64: the
# newcomers beyond the limit get 503 + Retry-After; the others are answered 408 in time.
busy, answers = [], []
for _ in range(100):
    s = connect()
    s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n[")
    busy.append(s)
for s in busy:
    answers.append(read_response(s)[0])
    s.close()
check("connection-flood-503-or-408", set(answers) <= {503, 408} and 503 in answers and 408 in answers,
      sorted(set(answers)))
check("alive-after-floods", healthy())
raise SystemExit(1 if fails else 0)
PY
  [[ $? -eq 0 ]] || fail "slow-client and flood checks (above)"
  kill -TERM "$SERVER_PID"; wait "$SERVER_PID"
fi

# ---- SIGTERM with a client trickling: the server exits anyway, promptly ----------------------
if start_server term.log run --timeout 3600; then
  PORT=$PORT SERVER_PID=$SERVER_PID "$PY" - <<'PY'
exec(open("client.py").read())
import signal
s = connect()
s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n[")
check("server-answering", healthy())  # the trickler is open, its request unfinished
os.kill(int(os.environ["SERVER_PID"]), signal.SIGTERM)
s.settimeout(60)
try:
    data = s.recv(1)
except OSError:
    data = b""
check("trickler-closed-on-sigterm", data == b"", data)
raise SystemExit(1 if fails else 0)
PY
  [[ $? -eq 0 ]] || fail "sigterm checks (above)"
  # Bounded: the server must be gone within 60 s (it takes milliseconds); a hang fails here.
  for _ in $(seq 600); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    fail "server still running 60 s after SIGTERM with a trickling client"
  else
    wait "$SERVER_PID"; rc=$?
    [[ $rc -eq 0 ]] && echo "ok   sigterm-with-trickler-exit-0" || fail "sigterm with trickler: exit $rc"
  fi
fi
finish
