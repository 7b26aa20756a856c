#!/usr/bin/env bash
# serve_load.sh: load test of `mixprec serve` with wrk (Debian's `wrk`): throughput and
# p50/p99 latency per precision (fp32, bf16, fp16), with dynamic batching on (--max-batch 64)
# and off (--max-batch 1), at several numbers of concurrent clients; then a long run with 10%
# malformed requests that must lose nothing (every request answered: 200 for the good ones,
# 400 for the bad ones, no other status, the server's counters equal wrk's).
#
#   bench/serve_load.sh [--build-dir build-dev] [--model cnn] [--precisions fp32,bf16,fp16]
#       [--clients 1,8,64] [--seconds 10] [--threads 2] [--soak-requests 100000] [--out DIR]
#
# The server and wrk share the machine: wrk gets one thread and the model the rest (state it
# with the figures). Each request is one 28x28 uint8 .npy image (the cnn's input), the
# cheapest body to decode, so the figures are the model's and the batcher's, not JSON's.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build-dev MODEL=cnn PRECISIONS=fp32,bf16,fp16 CLIENTS=1,8,64 SECONDS_EACH=10 THREADS=2 SOAK=100000
OUT=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --build-dir) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --precisions) PRECISIONS=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --soak-requests) SOAK=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "serve_load.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v wrk >/dev/null && command -v curl >/dev/null || { echo "serve_load.sh: wrk and curl are needed (scripts/setup --with-torch installs them)" >&2; exit 1; }
BIN=$(cd "$ROOT" && cd "$BUILD" && pwd)/mixprec
[[ -x $BIN ]] || { echo "serve_load.sh: $BIN not built" >&2; exit 1; }
OUT=${OUT:-$ROOT/$BUILD/serve-load/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
cd "$OUT"
export OMP_NUM_THREADS=$THREADS

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') (family $(grep -m1 'cpu family' /proc/cpuinfo | grep -o '[0-9]*$'), model $(grep -m1 '^model' /proc/cpuinfo | grep -o '[0-9]*$')), $(nproc) vCPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)"

# A checkpoint to serve: the model trained briefly on synthetic data (weights do not change
# the cost of a forward pass).
"$BIN" train --model "$MODEL" --dataset synthetic --batch-size 32 --max-steps 3 --no-eval --no-self-check \
  --run-dir run > train.log 2>&1 || { echo "train failed: $(tail -3 train.log)" >&2; exit 1; }
/usr/bin/python3 - <<'PY'
import struct, random
random.seed(3)
header = "{'descr': '|u1', 'fortran_order': False, 'shape': (28, 28), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
body = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + bytes(random.randrange(256) for _ in range(784))
open("image.npy", "wb").write(body)
PY
# wrk scripts: every request posts the image; the soak script makes every 10th one malformed.
cat > post.lua <<'LUA'
local f = io.open("image.npy", "rb"); local body = f:read("*all"); f:close()
wrk.method = "POST"; wrk.body = body; wrk.headers["Content-Type"] = "application/x-npy"
LUA
cat > soak.lua <<'LUA'
local f = io.open("image.npy", "rb"); local good = f:read("*all"); f:close()
local n = 0
request = function()
  n = n + 1
  if n % 10 == 0 then
    return wrk.format("POST", "/v1/predict", {["Content-Type"] = "application/json"}, '{"inputs": [[1, 2,')
  end
  return wrk.format("POST", "/v1/predict", {["Content-Type"] = "application/x-npy"}, good)
end
LUA

PORT=""
start_server() {
  "$BIN" serve run --port 0 "$@" > server.log 2>&1 &
  SERVER=$!
  for _ in $(seq 1 300); do
    PORT=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' server.log)
    [[ -n $PORT ]] && return 0
    sleep 0.1
  done
  echo "server did not start: $(tail -3 server.log)" >&2
  exit 1
}
stop_server() { kill -TERM "$SERVER"; wait "$SERVER" || true; }
metric() { curl -s "http://127.0.0.1:$PORT/metrics" | awk -v k="$1" '$1 == k { print $2 }'; }
weight_mib() { curl -s "http://127.0.0.1:$PORT/v1/model" | /usr/bin/python3 -c 'import json,sys; print("%.2f" % (json.load(sys.stdin)["weight_bytes"] / 2**20))'; }

# wrk's latency lines are "50%  1.23ms"; converted to ms.
to_ms() { awk '{ v = $1; if (v ~ /us$/) { sub("us", "", v); v /= 1000 } else if (v ~ /ms$/) { sub("ms", "", v) } else if (v ~ /s$/) { sub("s", "", v); v *= 1000 } printf "%.2f", v }'; }

echo
echo "| precision | batching | clients | requests/s | p50 ms | p99 ms | mean batch | weights MiB | non-2xx |"
echo "|---|---|---|---|---|---|---|---|---|"
IFS=, read -ra precs <<< "$PRECISIONS"
IFS=, read -ra clients <<< "$CLIENTS"
for p in "${precs[@]}"; do
  for batching in on off; do
    if [[ $batching == on ]]; then max_batch=64; else max_batch=1; fi
    start_server --precision "$p" --max-batch $max_batch --max-wait-us 2000 --workers 128 --max-queue 4096
    mib=$(weight_mib)
    for c in "${clients[@]}"; do
      b0=$(metric mixprec_batch_size_count); s0=$(metric mixprec_batch_size_sum)
      wrk -t1 -c"$c" -d"${SECONDS_EACH}s" --latency -s post.lua "http://127.0.0.1:$PORT/v1/predict" > "wrk-$p-$batching-$c.txt" 2>&1
      b1=$(metric mixprec_batch_size_count); s1=$(metric mixprec_batch_size_sum)
      rps=$(awk '/Requests\/sec/ { print $2 }' "wrk-$p-$batching-$c.txt")
      p50=$(awk '$1 == "50%" { print $2 }' "wrk-$p-$batching-$c.txt" | to_ms)
      p99=$(awk '$1 == "99%" { print $2 }' "wrk-$p-$batching-$c.txt" | to_ms)
      non2xx=$(awk '/Non-2xx/ { print $NF }' "wrk-$p-$batching-$c.txt")
      mean=$(awk -v b="$((b1 - b0))" -v s="$(echo "$s1 - $s0" | bc)" 'BEGIN { if (b > 0) printf "%.1f", s / b; else print "-" }')
      echo "| $p | $batching | $c | $rps | $p50 | $p99 | $mean | $mib | ${non2xx:-0} |"
    done
    stop_server
  done
done

# Soak: at least SOAK requests over 64 connections, 10% malformed. wrk has no request-count
# flag: it runs for a time, again until the count is reached. Nothing may be lost: wrk sees no
# socket error or timeout, every answer is 200 (good) or 400 (malformed), and the server
# answered at least what wrk counted (wrk does not count the answers in flight when its time
# is up).
echo
start_server --precision bf16 --max-batch 64 --workers 128 --max-queue 4096
sent=0 non2xx=0 sockerr=0 secs=10 round=0
while (( sent < SOAK )); do
  round=$((round + 1))
  wrk -t1 -c64 -d"${secs}s" -s soak.lua "http://127.0.0.1:$PORT/v1/predict" > "wrk-soak-$round.txt" 2>&1
  sent=$(( sent + $(awk '/requests in/ { print $1 }' "wrk-soak-$round.txt") ))
  non2xx=$(( non2xx + $(awk '/Non-2xx/ { print $NF }' "wrk-soak-$round.txt" | grep . || echo 0) ))
  sockerr=$(( sockerr + $(awk '/Socket errors/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' "wrk-soak-$round.txt" | grep . || echo 0) ))
done
ok200=$(metric 'mixprec_requests_total{route="/v1/predict",code="200"}')
bad400=$(metric 'mixprec_requests_total{route="/v1/predict",code="400"}')
errors=$(metric mixprec_request_errors_total)
echo "soak: wrk counted $sent answers ($non2xx non-2xx, $sockerr socket errors or timeouts) in $round runs;"
echo "      the server answered $((ok200 + bad400)) (200: $ok200, 400: $bad400, any other status: $((errors - bad400)))"
if (( sockerr == 0 && errors == bad400 && ok200 + bad400 >= sent )); then
  echo "soak: nothing lost"
else
  echo "soak: FAILED"
fi
stop_server
echo "logs: $OUT"
