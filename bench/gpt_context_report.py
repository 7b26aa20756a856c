#!/usr/bin/env python3
"""gpt_context_report.py: the table of bench/gpt_context.sh from the files it wrote into its
output directory: env.txt, gemm-rR.log (bench_gemm), mixprec-T-rR.json (`mixprec bench
--json`), torch-T-rR.log (bench/torch_step.py). Plain python3, no dependencies.

    bench/gpt_context_report.py OUT_DIR --contexts 256,512,1024,2048 --batch 4 --precision amp-bf16

Per context: mixprec's and the peer's step (median over rounds of each process's median, and
the lowest step seen), their ratio (median of the per-round ratios: the two ran back to back
in each round), the compute floor counting causal attention FLOPs only (bench/compute_floor.py's
arithmetic at the highest bench_gemm rate of the run: the machine's best, so a loaded round
does not lower the bar), mixprec's peak activation memory and that per 1,000 positions of the
batch (flat when memory is linear in the context), and the peer's peak RSS growth."""
import argparse
import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compute_floor import step_gflop  # noqa: E402  the one definition of a step's arithmetic

# Per-position memory may fall with the context (fixed parts spread over more positions) but
# must not rise: a dense [T, T] score matrix per head would double it at every doubling of T
# once it dominates. 10% leaves room for the allocator's block rounding.
LINEAR_SLACK = 1.10


def results(path, prefix):
    """key=value fields of the RESULT lines starting with `prefix` in a log."""
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith(prefix):
                out.append(dict(m.groups() for m in re.finditer(r"(\w+)=(\S+)", line)))
    return out


def rounds_of(out, pattern):
    """{round: path} of the files matching pattern (with a {r} field for the round)."""
    found = {}
    for path in glob.glob(os.path.join(out, pattern.format(r="*"))):
        m = re.search(r"-r(\d+)\.\w+$", path)
        if m:
            found[int(m.group(1))] = path
    return found


def load(text):
    m = re.search(r"load average: ([0-9.]+), ([0-9.]+), ([0-9.]+)", text or "")
    return [float(v) for v in m.groups()] if m else None


def fmt(value, spec="{:.1f}"):
    return spec.format(value) if value is not None else "–"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--contexts", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--precision", required=True)
    args = ap.parse_args()
    contexts = [int(t) for t in args.contexts.split(",")]

    env = {}
    with open(os.path.join(args.out, "env.txt")) as f:
        for line in f:
            key, _, value = line.partition(": ")
            env[key] = value.strip()

    gemm = [r for path in rounds_of(args.out, "gemm-r{r}.log").values()
            for r in results(path, "RESULT impl=onednn-gemm-best")]
    bf16 = max((float(r["bf16_gflops"]) for r in gemm), default=0.0)
    f32 = max((float(r["f32_gflops"]) for r in gemm), default=0.0)
    rate = f32 if args.precision == "fp32" else bf16

    rows, per_position, checks = [], {}, []
    for t in contexts:
        ours = {r: json.load(open(p))["presets"][0] for r, p in rounds_of(args.out, f"mixprec-{t}-r{{r}}.json").items()}
        peer = {}
        for r, p in rounds_of(args.out, f"torch-{t}-r{{r}}.log").items():
            checks += results(p, "RESULT impl=torch-check")
            timed = results(p, "RESULT impl=torch model=")
            if timed:
                peer[r] = timed[0]
        floor = step_gflop("gpt", args.batch, t, causal=True) / rate * 1e3 if rate > 0 else None
        our_med = statistics.median(o["median_ms"] for o in ours.values()) if ours else None
        our_min = min(o["min_ms"] for o in ours.values()) if ours else None
        peer_med = statistics.median(float(p["step_ms"]) for p in peer.values()) if peer else None
        peer_min = min(float(p["step_min_ms"]) for p in peer.values()) if peer else None
        ratios = [float(peer[r]["step_ms"]) / ours[r]["median_ms"] for r in ours if r in peer]
        act = max(o["peak_activation_bytes"] for o in ours.values()) / 2**20 if ours else None
        rss = statistics.median(float(p["peak_rss_growth_mib"]) for p in peer.values()) if peer else None
        if act is not None:
            per_position[t] = act / (args.batch * t / 1000)
        rows.append(f"| {t} | {fmt(floor)} | {fmt(our_med)} ({fmt(our_min)}) | "
                    f"{fmt(100 * floor / our_med if floor and our_med else None, '{:.0f}%')} | "
                    f"{fmt(peer_med)} ({fmt(peer_min)}) | "
                    f"{fmt(statistics.median(ratios) if ratios else None, '{:.2f}x')} | {fmt(act)} | "
                    f"{fmt(per_position.get(t), '{:.2f}')} | {fmt(rss)} |")

    threads = int(env.get("threads", "2"))
    start, end = load(env.get("uptime start")), load(env.get("uptime end"))
    # Quiet: nothing else ran at the start (1-minute load under 0.5) and at the end no more than
    # this run's own threads (+0.5): the load average counts our processes too.
    quiet = start is not None and end is not None and start[0] < 0.5 and end[0] < threads + 0.5
    print(f"# gpt at long contexts: {args.precision}, batch {args.batch}, {threads} threads")
    print()
    for key in ("date", "commit", "cpu", "flags", "run", "peer", "uptime start", "uptime end"):
        if key in env:
            print(f"- {key}: {env[key]}")
    print(f"- quiet? {'yes' if quiet else 'no'}: 1-minute load {fmt(start[0] if start else None, '{:.2f}')} at "
          f"the start, {fmt(end[0] if end else None, '{:.2f}')} at the end (quiet: < 0.5 at the start and < "
          f"threads + 0.5 at the end){'' if quiet else '; figures under load, preliminary'}")
    if checks:
        cores = sorted({c.get("openblas_core", "?") for c in checks})
        print(f"- peer GEMM checks against float64: {sum(int(c['checks']) for c in checks)} passed in "
              f"{len(checks)} processes, worst f32 {max(float(c['f32_err']) for c in checks):.2e}, bf16 "
              f"{max(float(c['bf16_err']) for c in checks):.2e}; OpenBLAS core {', '.join(cores)}")
    print(f"- floor: bench/compute_floor.py's GEMM arithmetic of gpt at batch {args.batch}, causal attention FLOPs "
          f"only, at bench_gemm's best median {'f32' if args.precision == 'fp32' else 'bf16'} rate of the run, "
          f"{fmt(rate)} GFLOP/s (bf16 {fmt(bf16)}, f32 {fmt(f32)}; highest over {len(gemm)} rounds)")
    print()
    print("| context | causal floor ms | mixprec ms, median (min) | % of causal floor | PyTorch ms, median (min) | "
          "PyTorch / mixprec | mixprec activations MiB | MiB per 1k positions (batch x context) | "
          "PyTorch peak RSS growth MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(row)
    print()
    if len(per_position) >= 2:
        lo, hi = min(per_position), max(per_position)
        growth = per_position[hi] / per_position[lo]
        verdict = ("linear: the memory per position does not grow with the context" if growth <= LINEAR_SLACK
                   else "grows faster than linear in the context")
        print(f"mixprec activation memory per 1k positions: {per_position[lo]:.2f} MiB at context {lo}, "
              f"{per_position[hi]:.2f} at {hi} (x{growth:.2f}): {verdict}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
