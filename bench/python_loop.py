#!/usr/bin/python3
"""python_loop.py: the seed CNN's amp-bf16 training step written as a Python loop on mixprec
(issue 32: the binding should add almost nothing), beside `mixprec bench`'s step (the same
step in C++) and beside the same loop in PyTorch 1.13 in its strongest configuration, in one
run. A benchmark, not a test: its numbers mean something only on a quiet machine.

    bench/python_loop.py                       # build/ of this checkout, 2 threads, 3 rounds
    bench/python_loop.py --build-dir build --threads 2 --rounds 3 --repeats 10 --warmup 3

The step everywhere: zero_grad(set_to_none=True), forward under autocast(bfloat16) +
cross_entropy + loss.item(), backward, Adam(lr=1e-3); batch 256 of 3x32x32, 10 classes.
  - mixprec-engine: the loop in Python on mixprec.nn.model("seed-cnn"), the engine's own
    model (what `mixprec bench` times; its forward is one call into C++).
  - mixprec-python: the loop in Python on bench/torch_models.py's definition with only its
    imports changed (import mixprec as torch): nn.Sequential of Conv2d, ReLU, MaxPool2d, ...,
    each layer a call from Python.
  - mixprec-bench: `mixprec bench --model seed-cnn --precision amp-bf16` (C++ only).
  - torch: bench/torch_step.py (the same loop in PyTorch, contiguous and channels_last, the
    faster one reported) through bench/peer_python (OpenBLAS on its own kernels), with glibc
    tuned (GLIBC_TUNABLES: no returning of activation buffers to the OS) and, when
    installed, jemalloc and tcmalloc by LD_PRELOAD; the fastest allocator is the peer.
Every configuration runs in its own process; a round runs each once, in an order that
rotates. Ratios are per round (median over rounds shown, with the range). The CPU model and
the host's load average before and after are printed: on a loaded host ratios move.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TUNED = "glibc.malloc.mmap_threshold=2147483647:glibc.malloc.trim_threshold=2147483647"


def worker(args):
    """One mixprec configuration in this process: prints a RESULT line."""
    import mixprec
    import mixprec.nn.functional as F
    mixprec.set_num_threads(args.threads)
    mixprec.manual_seed(0)
    if args.worker == "mixprec-engine":
        model = mixprec.nn.model("seed-cnn")
    else:
        sys.modules["torch"] = mixprec  # bench/torch_models.py with only its imports changed
        sys.modules["torch.nn"] = mixprec.nn
        sys.path.insert(0, HERE)
        from torch_models import make
        model, _ = make("seed-cnn")
    model.train()
    x = mixprec.randn(args.batch, 3, 32, 32)
    y = mixprec.tensor(list(range(10)) * (args.batch // 10) + list(range(args.batch % 10)))
    opt = mixprec.optim.Adam(model.parameters(), lr=1e-3)
    times = []
    for i in range(args.warmup + args.repeats):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with mixprec.amp.autocast(device_type="cpu", dtype=mixprec.bfloat16):
            out = model(x)
            loss = F.cross_entropy(out, y)
        last = loss.item()
        loss.backward()
        opt.step()
        if i >= args.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    print(f"RESULT impl={args.worker} step_ms={statistics.median(times):.3f} "
          f"step_min_ms={min(times):.3f} n={len(times)} loss={last:.5f}")
    return 0


def parse_result(text, impl_prefix):
    for line in text.splitlines():
        if line.startswith("RESULT impl=" + impl_prefix) and "step_ms=" in line:
            fields = dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)
            return float(fields["step_ms"]), fields
    return None, {}


def run(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(f"python_loop: {' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}{p.stderr}\n")
        return ""
    return p.stdout


def preload(name):
    hits = sorted(glob.glob(f"/usr/lib/*/lib{name}.so*") + glob.glob(f"/usr/lib/lib{name}.so*"))
    return hits[0] if hits else None


def configurations(args):
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    env.pop("LD_PRELOAD", None)
    py_env = dict(env, PYTHONPATH=os.path.join(args.build_dir, "python"))
    me = [sys.executable if sys.executable.startswith("/usr/bin/") else "/usr/bin/python3", os.path.abspath(__file__),
          "--threads", str(args.threads), "--repeats", str(args.repeats), "--warmup", str(args.warmup),
          "--batch", str(args.batch)]
    cli = os.path.join(args.build_dir, "mixprec")
    steps = ["--repeats", str(args.repeats), "--warmup", str(args.warmup), "--threads", str(args.threads),
             "--batch", str(args.batch)]
    torch_cmd = [os.path.join(HERE, "peer_python"), os.path.join(HERE, "torch_step.py"), "--model", "seed-cnn",
                 "--precision", "amp-bf16", *steps]
    configs = [
        ("mixprec-engine", me + ["--worker", "mixprec-engine"], py_env, "mixprec-engine"),
        ("mixprec-python", me + ["--worker", "mixprec-python"], py_env, "mixprec-python"),
        ("mixprec-bench", [cli, "bench", "--model", "seed-cnn", "--precision", "amp-bf16", "--json",
                           "--steps", str(args.repeats), "--warmup", str(args.warmup), "--threads",
                           str(args.threads), "--batch-size", str(args.batch)], env, None),
        ("torch glibc-tuned", torch_cmd, dict(env, GLIBC_TUNABLES=TUNED), "torch"),
    ]
    for lib in ("jemalloc", "tcmalloc_minimal"):
        path = preload(lib)
        if path and not args.quick:
            configs.append((f"torch {lib}", torch_cmd, dict(env, LD_PRELOAD=path), "torch"))
    return configs


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10, help="timed steps per process")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="the peer under glibc-tuned only")
    ap.add_argument("--worker", choices=["mixprec-engine", "mixprec-python"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    args.build_dir = os.path.abspath(args.build_dir)
    configs = configurations(args)
    load_before = open("/proc/loadavg").read().split()[:3]
    rounds = []  # per round: name -> step ms
    for r in range(args.rounds):
        got = {}
        for k in range(len(configs)):
            name, cmd, env, impl = configs[(k + r) % len(configs)]
            out = run(cmd, env)
            if impl is None:  # mixprec bench --json
                try:
                    got[name] = json.loads(out)["presets"][0]["median_ms"]
                except (ValueError, KeyError, IndexError):
                    pass
            else:
                ms, _ = parse_result(out, impl)
                if ms is not None:
                    got[name] = ms
            print(f"round {r + 1}: {name:<20} {got.get(name, float('nan')):9.2f} ms", flush=True)
        rounds.append(got)
    load_after = open("/proc/loadavg").read().split()[:3]

    names = [c[0] for c in configs]
    peers = [n for n in names if n.startswith("torch")]
    print(f"\nseed-cnn amp-bf16 step, batch {args.batch}, {args.threads} threads, {args.rounds} rounds x "
          f"{args.repeats} timed steps; CPU: {cpu_model()} ({os.cpu_count()} CPUs); load average "
          f"before {' '.join(load_before)}, after {' '.join(load_after)}")
    print(f"{'configuration':<20} {'median ms':>10} {'rounds':>7}")
    for n in names:
        vals = [g[n] for g in rounds if n in g]
        if vals:
            print(f"{n:<20} {statistics.median(vals):10.2f} {len(vals):>7}")

    def ratio(num, den):
        """Per-round num/den (den a name or the per-round fastest peer); median and range."""
        vals = []
        for g in rounds:
            d = min((g[p] for p in peers if p in g), default=None) if den == "peer" else g.get(den)
            if num in g and d:
                vals.append(g[num] / d)
        return (statistics.median(vals), min(vals), max(vals)) if vals else None

    print("\nratios (per round, median [min, max]):")
    for label, num, den, goal in [
        ("python loop (engine model) / mixprec bench", "mixprec-engine", "mixprec-bench", "<= 1.05"),
        ("python loop (python layers) / mixprec bench", "mixprec-python", "mixprec-bench", ""),
        ("strongest torch / python loop (engine model)", None, "mixprec-engine", ">= 1.8"),
        ("strongest torch / python loop (python layers)", None, "mixprec-python", ""),
    ]:
        if num is None:  # peer over ours: speed-up of ours
            vals = []
            for g in rounds:
                best = min((g[p] for p in peers if p in g), default=None)
                if best and g.get(den):
                    vals.append(best / g[den])
            r = (statistics.median(vals), min(vals), max(vals)) if vals else None
        else:
            r = ratio(num, den)
        text = f"{r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]" if r else "n/a"
        print(f"  {label:<48} {text}" + (f"   (issue 32's goal: {goal})" if goal else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
