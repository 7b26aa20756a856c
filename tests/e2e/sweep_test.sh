#!/usr/bin/env bash
# sweep_test.sh: `mixprec sweep` as a user relies on it (docs/experiments.md). An ASHA sweep
# killed with kill -9 twice (each time once experiment.json records a given number of finished
# rungs, a point the state file decides, not a clock) and resumed ends exactly as the same
# sweep run without interruption: the same trials, hyperparameters, states, steps and metrics,
# and every trial's metrics.jsonl line for line (no step lost or trained twice). The printed
# reproduce command trains the best trial again to the same evaluation. Checkpoints are
# garbage-collected (keep_checkpoints: 1; the best trial keeps its last) with pointers that
# name existing files. A trial that fails is retried max_restarts times, then marked failed
# with the end of its log. Ctrl-C stops with checkpoints (exit 130) and the printed resume
# command finishes the same sweep. Bad files, a second sweep without --resume, and a resume with a
# changed file are usage errors (exit 2).
# Args: BUILD_DIR SOURCE_DIR.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
BIN="$(cd "$1" && pwd)/mixprec"
WORK=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done; rm -rf "$WORK"' EXIT
cd "$WORK"
export OMP_NUM_THREADS=1

cat > asha.yaml << 'EOF'
name: tiny-asha
base:
  dataset: synthetic
  precision: fp32
  batch_size: 32
  test_subset: 100
  threads: 1
hyperparameters:
  lr: {type: log, min: 1.0e-4, max: 1.0e-1}
  optimizer: {type: categorical, values: [adam, sgd]}
searcher: {name: asha, max_trials: 6, reduction_factor: 2, min_steps: 2, seed: 3}
max_steps: 8
max_concurrent_trials: 1
metric: accuracy
keep_checkpoints: 1
EOF

# What a sweep left, comparable across runs: each trial's record without its wall time, and
# each trial's metrics.jsonl without times and memory. memory_bytes counts the batches the
# loader's background thread has prefetched when the step ends (0 to `prefetch` of them: one
# cnn batch of 64 is 100,608 bytes), which depends on timing, and peak_memory_bytes likewise.
summary() {
  python3 - "$1" << 'EOF'
import json, sys, glob, os, re
d = sys.argv[1]
s = json.load(open(os.path.join(d, "experiment.json")))
print("status", s["status"])
for t in s["trials"]:
    print(t["id"], t["dir"], json.dumps(t["hyperparameters"], sort_keys=True), t["state"], t["steps"], t["metrics"], t["restarts"])
    lines = open(os.path.join(d, t["dir"], "metrics.jsonl")).read().splitlines()
    print("  lines", len(lines))
    for l in lines:
        print("  ", re.sub(r',"(time|seconds|memory_bytes|peak_memory_bytes)":[^,}]*', "", l))
EOF
}
rungs_done() {  # the rungs experiment.json records as finished, summed over trials
  python3 -c 'import json,sys
try: print(sum(len(t["metrics"]) for t in json.load(open(sys.argv[1]))["trials"]))
except Exception: print(0)' "$1/experiment.json"
}

mid_rung() {  # DIR MIN_RUNGS: "yes" once MIN_RUNGS rungs are done and a running trial has logged a step of its next rung
  python3 -c 'import json,sys,os
d, need = sys.argv[1], int(sys.argv[2])
try:
    s = json.load(open(os.path.join(d, "experiment.json")))
    done = sum(len(t["metrics"]) for t in s["trials"])
    for t in s["trials"]:
        if done >= need and t["state"] == "running":
            for l in open(os.path.join(d, t["dir"], "metrics.jsonl")):
                r = json.loads(l)
                if r["type"] == "step" and r["step"] > t["steps"]: print("yes"); sys.exit()
except Exception: pass
print("no")' "$1" "$2"
}

# ---- the uninterrupted sweep ----
"$BIN" sweep asha.yaml --experiment-dir ref > ref.log 2>&1 || { fail "reference sweep: exit $?"; tail -5 ref.log; }
summary ref > ref.summary
trials=$(grep -c '^[0-9]' ref.summary)
if [[ $trials -eq 6 ]] && grep -q "completed" ref.summary && grep -q "stopped" ref.summary; then
  echo "ok   reference sweep: 6 trials, some stopped early, one completed"
else
  fail "reference sweep: $trials trials"; cat ref.summary | grep '^[0-9]'
fi

# ---- the same sweep killed twice with kill -9 and resumed ----
"$BIN" sweep asha.yaml --experiment-dir cut > cut1.log 2>&1 &
sweep=$!; pids+=($sweep)
# The first kill lands while a trial is training (it has logged a step of its next rung). The
# sweep and its trials are stopped (SIGSTOP) before that is trusted: a rung of a few steps can
# end, and the sweep record it, between a poll and the kill (it did under load: "0 to
# continue"); if it ended, they run on and the wait goes on. kill -9 then takes the trials with
# the sweep (their parent-death signal), as a crash would.
for ((i = 0; i < 1200; i++)); do
  if [[ $(mid_rung cut 3) == yes ]]; then
    kill -STOP $sweep $(pgrep -P $sweep) 2> /dev/null
    [[ $(mid_rung cut 3) == yes ]] && break
    kill -CONT $sweep $(pgrep -P $sweep) 2> /dev/null
  fi
  sleep 0.02
done
kill -9 $sweep 2> /dev/null; wait $sweep 2> /dev/null
first_cut=$(rungs_done cut)
"$BIN" sweep asha.yaml --experiment-dir cut --resume > cut2.log 2>&1 &
sweep=$!; pids+=($sweep)
for ((i = 0; i < 1200 && $(rungs_done cut) < 7; i++)); do sleep 0.05; done
kill -9 $sweep 2> /dev/null; wait $sweep 2> /dev/null
second_cut=$(rungs_done cut)
expect "resume after two kill -9" 0 "best trial: " -- "$BIN" sweep asha.yaml --experiment-dir cut --resume
summary cut > cut.summary
if [[ $first_cut -ge 3 && $second_cut -ge 7 && $second_cut -lt $(rungs_done ref) ]] && diff ref.summary cut.summary > /dev/null; then
  echo "ok   killed at $first_cut and $second_cut finished rungs, resumed: trials, states, metrics and every metrics.jsonl line as uninterrupted"
else
  fail "killed sweep (cuts at $first_cut, $second_cut of $(rungs_done ref) rungs) differs from the uninterrupted one"
  diff ref.summary cut.summary | head -20
fi
# Identical results could also come from retraining finished rungs from scratch (training is
# deterministic), so the launches are checked too: per trial, the rungs it was started for are
# the reference's, each once, except the run a kill interrupted, started again once for the same
# rung, with --resume when it had a checkpoint.
python3 - ref cut << 'EOF' && echo "ok   no finished rung trained again; an interrupted rung continued from its checkpoint" || fail "launches differ"
import sys, os, re, glob
def launches(d):
    out = {}
    for log in sorted(glob.glob(os.path.join(d, "trial-*", "train.log"))):
        heads = [l for l in open(log) if l.startswith("=== mixprec sweep:")]
        out[os.path.basename(os.path.dirname(log))] = [(re.search(r"--max-steps (\d+)", h).group(1), "--resume" in h) for h in heads]
    return out
ref, cut = launches(sys.argv[1]), launches(sys.argv[2])
assert ref.keys() == cut.keys(), (ref.keys(), cut.keys())
extra = 0
for trial, runs in cut.items():
    want = [steps for steps, _ in ref[trial]]
    got = [steps for steps, _ in runs]
    dedup = [s for i, s in enumerate(got) if i == 0 or s != got[i - 1]]
    assert dedup == want, (trial, got, want)
    for i in range(1, len(runs)):
        if runs[i][0] == runs[i - 1][0]:
            extra += 1
            assert runs[i][1] or i == 1 and not runs[0][1], (trial, runs)  # a first rung may restart fresh
assert 1 <= extra <= 2, extra
print("  launches beyond the reference:", extra)
EOF
grep -q "resuming: .* 1 to continue" cut2.log && echo "ok   the resume continues the trial the kill interrupted" ||
  fail "no resume line for the interrupted trial: $(grep resuming cut2.log)"

# ---- Ctrl-C (SIGINT to the sweep): the running trial saves a checkpoint, exit 130, and the
# printed resume command finishes the sweep as if it had not stopped ----
"$BIN" sweep asha.yaml --experiment-dir int > int1.log 2>&1 &
sweep=$!; pids+=($sweep)
for ((i = 0; i < 1200; i++)); do [[ $(mid_rung int 2) == yes ]] && break; sleep 0.02; done
kill -INT $sweep; wait $sweep; code=$?
resume_cmd=$(sed -n '/Resume with:/{n;s/^ *//;p}' int1.log)
if [[ $code -eq 130 && -n $resume_cmd ]]; then
  echo "ok   Ctrl-C: exit 130, resume command printed ($(grep -o 'stopped at step [0-9]* with a checkpoint' int1.log || echo 'the trial had just finished its rung'))"
else
  fail "Ctrl-C: exit $code"; tail -5 int1.log
fi
eval "$resume_cmd" > int2.log 2>&1 || fail "resume after Ctrl-C: $(tail -3 int2.log)"
summary int > int.summary
diff ref.summary int.summary > /dev/null && echo "ok   resumed after Ctrl-C: the same trials, metrics and metrics.jsonl lines" ||
  { fail "resumed after Ctrl-C differs"; diff ref.summary int.summary | head; }

# ---- the table, the reproduce command, garbage collection ----
"$BIN" sweep asha.yaml --experiment-dir ref --resume > again.log 2>&1
grep -qE '^trial +state +steps +accuracy +lr +optimizer$' again.log && echo "ok   the table's header" || fail "table: $(cat again.log)"
repro=$(sed -n 's/^reproduce it: //p' again.log)
best_dir=$(sed -n 's/^best trial: .*; run directory \(.*\)$/\1/p' again.log)
if [[ -n $repro && -d $best_dir ]]; then
  eval "$repro" > repro.log 2>&1 || fail "reproduce command failed: $repro"
  want=$(grep '"type":"eval"' "$best_dir/metrics.jsonl" | tail -1 | sed 's/,"seconds".*//')
  got=$(grep '"type":"eval"' runs/train/metrics.jsonl 2> /dev/null | tail -1 | sed 's/,"seconds".*//')
  [[ -n $want && $want == "$got" ]] && echo "ok   '$repro' reproduces the best trial: $got" ||
    fail "reproduced evaluation '$got', the best trial's '$want'"
else
  fail "no reproduce command or best run directory: $(tail -3 again.log)"
fi
python3 - ref "$best_dir" << 'EOF' && echo "ok   checkpoints collected: one per trial, the best trial's last, pointers to existing files" || fail "checkpoint garbage collection"
import json, sys, os, glob
d, best = sys.argv[1], os.path.basename(sys.argv[2])
for t in json.load(open(os.path.join(d, "experiment.json")))["trials"]:
    run = os.path.join(d, t["dir"])
    ckpts = sorted(os.path.basename(p) for p in glob.glob(os.path.join(run, "step-*.safetensors")))
    assert len(ckpts) == 1, (t["dir"], ckpts)
    for which in ("last", "best"):
        target = json.load(open(os.path.join(run, which + ".json")))["checkpoint"]
        assert target in ckpts, (t["dir"], which, target, ckpts)
    if t["dir"] == best:
        assert ckpts == ["step-%08d.safetensors" % t["steps"]], ckpts
EOF

# ---- failures: retried, then failed with the log's end ----
cat > failing.yaml << 'EOF'
name: failing
base: {dataset: synthetic, precision: fp32, batch_size: 32, test_subset: 100, threads: 1, data_dir: /nonexistent}
hyperparameters:
  dataset: {type: categorical, values: [synthetic, mnist]}
searcher: {name: grid}
max_steps: 2
max_restarts: 1
max_concurrent_trials: 2
EOF
expect "a failing trial" 0 "trial 2 failed: exit code 3: " -- "$BIN" sweep failing.yaml --experiment-dir fail --cores 2
[[ $(grep -c '^=== mixprec sweep:' fail/trial-0002/train.log) -eq 2 ]] && echo "ok   the failing trial ran twice (max_restarts 1)" ||
  fail "failing trial ran $(grep -c '^=== mixprec sweep:' fail/trial-0002/train.log) times"
grep -q '"state": "failed"' fail/experiment.json && grep -q '"error": "exit code 3: .*nonexistent' fail/experiment.json &&
  echo "ok   experiment.json marks it failed, with the end of its log" || fail "not failed in experiment.json: $(grep error fail/experiment.json)"

# ---- usage errors ----
printf 'name: x\nhyperparameters:\n  lrr: 0.1\nsearcher: {name: random, max_trials: 2}\n' > bad.yaml
expect "unknown hyperparameter" 2 "bad.yaml:3:8: hyperparameters.lrr: not a setting \(did you mean 'lr'\?\)" -- "$BIN" sweep bad.yaml
printf 'name: x\nbase: {dataset: synthetic}\nhyperparameters:\n  precision: {type: categorical, values: [fp32, amp-bf17]}\nsearcher: {name: random, max_trials: 2}\n' > preset.yaml
expect "unknown preset, before any trial" 2 "preset.yaml:4:14: hyperparameters.precision = \"amp-bf17\": --precision: .*amp-bf16" -- "$BIN" sweep preset.yaml --experiment-dir preset
[[ ! -e preset/trial-0001 ]] && echo "ok   no trial started" || fail "a trial started for a bad preset"
expect "again without --resume" 2 "already holds an experiment.*--resume" -- "$BIN" sweep asha.yaml --experiment-dir ref
sed 's/max_trials: 6/max_trials: 7/' asha.yaml > changed.yaml
expect "resume with another file" 2 "differs from the experiment" -- "$BIN" sweep changed.yaml --experiment-dir ref --resume
expect "resume of nothing" 2 "no sweep to continue" -- "$BIN" sweep asha.yaml --experiment-dir none --resume
finish
