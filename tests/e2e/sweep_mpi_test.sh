#!/usr/bin/env bash
# sweep_mpi_test.sh: a sweep whose trials are data-parallel runs (`ranks_per_trial: 2`,
# docs/experiments.md): each trial is started as `mpirun -np 2 ... mixprec train ...` (as root
# with mpirun's explicit consent, which the sweep adds itself), and its run directory shows a
# 2-rank run: every step line of metrics.jsonl says "ranks":2 and the trial's log holds
# train's data-parallel banner. The printed reproduce command runs under mpirun too. More ranks
# than the sweep's cores is a usage error (exit 2) before any trial starts.
# Skips (77) where mpirun is missing or mixprec was built without MPI.
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
BIN="$(cd "$1" && pwd)/mixprec"
if ! command -v mpirun > /dev/null; then echo "SKIP: no mpirun (scripts/setup installs openmpi-bin)"; exit 77; fi
deps=$(ldd "$BIN")  # whole, then tested: `ldd | grep -q` under pipefail can fail on SIGPIPE
if [[ $deps != *libmpi* ]]; then echo "SKIP: $BIN was built without MPI (no libopenmpi-dev at configure)"; exit 77; fi
if [[ ${ASAN_OPTIONS:-} == *detect_leaks=1* ]]; then  # OpenMPI's own leaks at MPI_Finalize (data_parallel_test.sh)
  export ASAN_OPTIONS=${ASAN_OPTIONS//detect_leaks=1/detect_leaks=0}
fi
WORK=$(mktemp -d /tmp/mixprec_sweep_mpi.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
export OMP_NUM_THREADS=1

cat > dp.yaml << 'YAML'
name: dp-grid
base:
  dataset: synthetic
  precision: fp32
  batch_size: 16        # the global batch: 8 per rank
  test_subset: 64
hyperparameters:
  lr: {type: categorical, values: [0.01, 0.001]}
searcher: {name: grid}
max_steps: 3
ranks_per_trial: 2
YAML

"$BIN" sweep dp.yaml --experiment-dir exp --cores 2 > sweep.log 2>&1
code=$?
if [[ $code -eq 0 ]]; then echo "ok   sweep of data-parallel trials (exit 0)"; else fail "sweep exit $code: $(tail -20 sweep.log)"; fi
grep -q "1 trial(s) at once, 2 ranks x 1 thread(s) each (2 cores)" sweep.log && echo "ok   cores divided over ranks" ||
  fail "no division line: $(head -3 sweep.log)"
grep -qE "^reproduce it: mpirun -np 2 .*mixprec train --config exp/trial-000[12]/config.json --max-steps 3$" sweep.log &&
  echo "ok   reproduce command under mpirun" || fail "reproduce line: $(grep reproduce sweep.log)"
python3 - exp << 'PY' && echo "ok   each trial's run directory is a 2-rank run" || fail "trial run directories (above)"
import json, os, sys
d = sys.argv[1]
s = json.load(open(os.path.join(d, "experiment.json")))
assert len(s["trials"]) == 2, s["trials"]
for t in s["trials"]:
    assert t["state"] == "completed" and t["steps"] == 3 and len(t["metrics"]) == 1, t
    run = os.path.join(d, t["dir"])
    steps = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if '"type":"step"' in l]
    assert [x["step"] for x in steps] == [1, 2, 3], steps
    assert all(x.get("ranks") == 2 for x in steps), steps
    log = open(os.path.join(run, "train.log")).read()
    assert " -np 2 --oversubscribe --bind-to none" in log, log[:500]
    assert "data-parallel" in log and "2 ranks" in log, log[-2000:]
    assert json.load(open(os.path.join(run, "config.json")))["lr"] == t["hyperparameters"]["lr"]
PY

sed 's/ranks_per_trial: 2/ranks_per_trial: 3/' dp.yaml > dp3.yaml
expect too-many-ranks 2 "ranks_per_trial 3 is more than the 2 core\(s\) this sweep may use" -- \
  "$BIN" sweep dp3.yaml --experiment-dir exp3 --cores 2
[[ ! -e exp3/trial-0001 ]] && echo "ok   no trial started" || fail "a trial started with too many ranks"
finish
