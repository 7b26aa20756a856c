#!/usr/bin/env bash
# multi_host_test.sh: data-parallel training across two "hosts" (issue 31 item 22,
# docs/distributed.md "Several machines"): two network namespaces joined by a veth pair,
# each with its own hostname (a UTS namespace), TCP only (OpenMPI's tcp and self BTLs, no
# shared memory; the out-of-band channel on the veth too). mpirun runs in the first namespace;
# its rsh launcher starts the second host's orted through an agent script that enters that
# namespace with `ip netns exec` (as ssh would enter another machine).
#  - equivalence: 2 ranks x 32 over TCP give one process's losses (fp32, 50 steps, 1e-6
#    relative, as data_parallel_test.sh), and the gradients crossed the veth (its byte
#    counters hold at least half a gradient per step each way);
#  - a host killed (every process in the second namespace, -9) ends the job within 120 s, not
#    0; the last checkpoint resumes in one process with one process's losses (1e-6);
#  - a host unreachable (its veth taken down: no FIN, no RST, as a host that loses power or
#    its network) ends the job within 120 s with mpirun's OOB keepalive at 5 s + 3 x 2 s
#    (below --dist-timeout 30: see docs/distributed.md for why it must be below), and the
#    second host's orted exits by itself; the checkpoint resumes as above.
# Skips (77): not root / no CAP_NET_ADMIN (ip netns add or the veth fails), no unshare, no
# mpirun, or a mixprec built without MPI.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
BUILD_DIR=$(cd "$1" && pwd)
BIN="$BUILD_DIR/mixprec"
PY=/usr/bin/python3
if ! command -v mpirun > /dev/null; then echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; fi
deps=$(ldd "$BIN")
if [[ $deps != *libmpi* ]]; then echo "SKIP: $BIN was built without MPI (no libopenmpi-dev at configure)"; exit 77; fi
for tool in ip unshare hostname; do
  command -v $tool > /dev/null || { echo "SKIP: no '$tool' (iproute2, util-linux, hostname)"; exit 77; }
done
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
if [[ ${ASAN_OPTIONS:-} == *detect_leaks=1* ]]; then
  # OpenMPI's own allocations at MPI_Finalize (see data_parallel_test.sh).
  export ASAN_OPTIONS=${ASAN_OPTIONS//detect_leaks=1/detect_leaks=0}
fi

# Unique names (this shell's pid); the interface exists only inside the two namespaces, so
# the host's own interfaces and addresses are never touched, and 10.231.0.0/24 cannot clash.
NS_A=mixprec-a$$ NS_B=mixprec-b$$ VETH=mpv$$
IP_A=10.231.0.1 IP_B=10.231.0.2 NET=10.231.0.0/24
TMP=$(mktemp -d /tmp/mixprec_mh.XXXXXX)
# kill_ns NS: every process in NS, -9 (ip netns pids lists them whatever their UTS namespace).
kill_ns() { ip netns pids "$1" 2> /dev/null | xargs -r kill -9 2> /dev/null; }
cleanup() {
  for ns in $NS_A $NS_B; do
    kill_ns $ns
    # A process killed -9 leaves the namespace once reaped; deleting it also removes the veth.
    for _ in $(seq 50); do [[ -z $(ip netns pids $ns 2> /dev/null) ]] && break; sleep 0.1; done
    ip netns del $ns 2> /dev/null
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if ! err=$(ip netns add $NS_A 2>&1 && ip netns add $NS_B 2>&1); then
  echo "SKIP: cannot create network namespaces (ip netns add: $err)"; exit 77
fi
if ! err=$(ip link add $VETH netns $NS_A type veth peer name $VETH netns $NS_B 2>&1); then
  echo "SKIP: cannot create a veth pair between the namespaces ($err)"; exit 77
fi
if ! err=$(ip -n $NS_A addr add $IP_A/24 dev $VETH 2>&1 && ip -n $NS_B addr add $IP_B/24 dev $VETH 2>&1 &&
           ip -n $NS_A link set lo up 2>&1 && ip -n $NS_B link set lo up 2>&1 &&
           ip -n $NS_A link set $VETH up 2>&1 && ip -n $NS_B link set $VETH up 2>&1); then
  echo "FAIL: could not configure $VETH: $err"; exit 1
fi
if ! err=$(ip netns exec $NS_B unshare --uts sh -c 'hostname mh-b && hostname' 2>&1) || [[ $err != mh-b ]]; then
  echo "SKIP: cannot give a namespace its own hostname (unshare --uts: $err)"; exit 77
fi
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/data_parallel_lib.sh"  # write_dp_models
cd "$TMP" || exit 1

# The rsh launcher's agent: `agent HOST COMMAND...`, as `ssh HOST COMMAND...` (the words
# joined into one shell command line), run in HOST's namespace under HOST's own hostname.
cat > agent <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  $IP_A) ns=$NS_A name=mh-a ;;
  $IP_B) ns=$NS_B name=mh-b ;;
  *) echo "agent: unknown host \$host" >&2; exit 255 ;;
esac
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$name" "\$*"
EOF
chmod +x agent
printf '%s slots=1\n%s slots=1\n' $IP_A $IP_B > hosts
# mpirun on host A (its namespace and hostname), rank 0 beside it, rank 1 on host B.
# --bind-to none: each "host" would bind its one rank to core 0, the same core of this one
# machine (seen on a loaded 2-core machine: 88-100 ms a step bound, 0.3-0.5 ms unbound in
# most runs).
MPI=(ip netns exec "$NS_A" unshare --uts sh -c 'hostname mh-a && exec "$@"' sh
     mpirun --hostfile hosts -np 2 --bind-to none --mca plm_rsh_agent "$TMP/agent"
     --mca btl tcp,self --mca btl_tcp_if_include "$NET" --mca oob_tcp_if_include "$NET"
     --mca oob_tcp_keepalive_time 5 --mca oob_tcp_keepalive_intvl 2 --mca oob_tcp_keepalive_probes 3
     -x OMP_NUM_THREADS)
echo "note: mpirun in $NS_A (mh-a, $IP_A), rank 1 in $NS_B (mh-b, $IP_B) over $VETH: ${MPI[*]:10}"

write_dp_models
COMMON=(--model "$TMP/mlp.yaml" --train-subset 4096 --test-subset 512 --threads 1 --no-self-check --batch-size 64
        --precision fp32)

veth_bytes() { ip netns exec $NS_B cat /sys/class/net/$VETH/statistics/$1_bytes; }

# ---- equivalence over TCP between the namespaces ----
"$BIN" train "${COMMON[@]}" --max-steps 50 --run-dir one > one.log 2>&1 || fail "1 process: exit $?"
tx0=$(veth_bytes tx) rx0=$(veth_bytes rx)
expect "2 hosts over TCP: banner says global batch 64 = 2 x 32" 0 "global batch 64 = 2 x 32 per rank" -- \
  timeout 300 "${MPI[@]}" "$BIN" train "${COMMON[@]}" --max-steps 50 --run-dir two
if out=$(compare_losses one two 1e-6); then echo "ok   2 hosts vs 1 process, fp32 losses: $out"; else fail "losses: $out"; fi
# The MLP's gradient is 50,890 f32 (203,560 bytes); with 2 ranks each sends about half of it
# twice per step (reduce-scatter, all-gather). 50 steps: at least 5 MB each way on the veth.
tx=$(( $(veth_bytes tx) - tx0 )) rx=$(( $(veth_bytes rx) - rx0 ))
if (( tx >= 5000000 && rx >= 5000000 )); then echo "ok   the gradients crossed the veth: host B sent $tx, received $rx bytes"
else fail "the veth carried only $tx / $rx bytes: the ranks did not talk over TCP between the namespaces"; fi

# take_down NAME HOW: a 2-host run, host B taken down (HOW: kill | unplug) once rank 0 has
# written a checkpoint (whichever step that is: the steps take 0.3 to 100 ms here, and only
# the newest 3 checkpoints are kept); the job must end (not 0) within 120 s, and its last
# checkpoint must resume in one process with the losses of a 1-process run never interrupted.
K=("${COMMON[@]}" --save-every 5 --no-eval --epochs 1000)
take_down() {
  local name=$1 how=$2 start took rc last
  ("${MPI[@]}" "$BIN" train "${K[@]}" --dist-timeout 30 --run-dir $name > $name.log 2>&1; echo $? > $name.rc) &
  local job=$!
  for _ in $(seq 600); do [[ -e $name/last.json ]] && break; kill -0 $job 2> /dev/null || break; sleep 0.2; done
  if [[ ! -e $name/last.json ]] || ! kill -0 $job 2> /dev/null; then
    fail "$how: no checkpoint within 120 s, or the job ended first: $(tr '\r' '\n' < $name.log | tail -3)"
    kill_ns $NS_A; kill_ns $NS_B; wait $job; return
  fi
  start=$(date +%s)
  case $how in
    kill) kill_ns $NS_B ;;
    unplug) ip -n $NS_B link set $VETH down ;;
  esac
  for _ in $(seq 1200); do kill -0 $job 2> /dev/null || break; sleep 0.1; done
  took=$(( $(date +%s) - start ))
  if kill -0 $job 2> /dev/null; then
    fail "$how: the job still runs ${took} s after host B went down: $(tr '\r' '\n' < $name.log | tail -3)"
    kill_ns $NS_A; kill_ns $NS_B
  fi
  wait $job
  rc=$(cat $name.rc 2> /dev/null)
  if [[ ${rc:-0} -ne 0 && $took -le 120 ]]; then
    echo "ok   host B down ($how) ends the job in ${took} s, exit $rc"
  else
    fail "host B down ($how): exit '${rc}' after ${took} s"; tr '\r' '\n' < $name.log | tail -5
  fi
  last=$(sed -n 's/.*step-0*\([0-9][0-9]*\)\.safetensors.*/\1/p' $name/last.json)
  [[ -n $last ]] || { fail "$how: last.json names no checkpoint: $(cat $name/last.json)"; return; }
  expect "$how: the last checkpoint (step $last) resumes in one process" 0 "summary:" -- \
    "$BIN" train --resume $name --max-steps $((last + 10))
  "$BIN" train "${K[@]}" --max-steps $((last + 10)) --run-dir $name-one > $name-one.log 2>&1 || fail "1-process run: exit $?"
  if out=$(compare_losses $name-one $name 1e-6); then echo "ok   $how: resumed run vs 1 process: $out"
  else fail "$how: resumed run: $out"; fi
}
take_down killed kill
# After the kill the namespace is empty but its veth is up: the next run can use it.
take_down unplugged unplug
# (It notices the lost link as mpirun does, by the OOB keepalive: a bounded poll.)
for _ in $(seq 300); do [[ -z $(ip netns pids $NS_B) ]] && break; sleep 0.1; done
if [[ -n $(ip netns pids $NS_B) ]]; then
  fail "host B still runs after the job ended: $(ip netns pids $NS_B | xargs -r ps -o args= -p | cut -c1-80)"
else echo "ok   host B's orted and rank exited by themselves (lost their link to mpirun)"; fi

finish
