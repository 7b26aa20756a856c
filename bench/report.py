#!/usr/bin/env python3
"""report.py: turn the RESULT lines of bench_gemm, bench_step and torch_step.py (one log per
round, rounds interleaved by run_benchmarks.sh) into markdown tables and the design.md §4
target check. Plain python3, no dependencies.

Ratios are computed per round (the programs of one round ran back to back) and the median
over rounds is reported, with the range in brackets."""
import re
import statistics
import sys
from collections import defaultdict

TARGETS_NOTE = "targets: design.md §4"


def parse(paths):
    rounds = []
    for path in paths:
        rows = []
        with open(path) as f:
            for line in f:
                if not line.startswith("RESULT "):
                    continue
                kv = dict(m.groups() for m in re.finditer(r"(\w+)=(\S+)", line[len("RESULT "):]))
                rows.append(kv)
        rounds.append(rows)
    return rounds


def find(rows, **want):
    for r in rows:
        if all(r.get(k) == v for k, v in want.items()):
            return r
    return None


def med_range(values, fmt="{:.1f}"):
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    m = statistics.median(values)
    if len(values) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} [{fmt.format(min(values))}–{fmt.format(max(values))}]"


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main(paths):
    rounds = parse(paths)
    models = []
    precs = []
    for rows in rounds:
        for r in rows:
            if r.get("impl") == "mixprec":
                if r["model"] not in models:
                    models.append(r["model"])
                if r["precision"] not in precs:
                    precs.append(r["precision"])

    def series(impl, model, prec, key):
        out = []
        for rows in rounds:
            r = find(rows, impl=impl, model=model, precision=prec)
            out.append(float(r[key]) if r and key in r else None)
        return out

    def ratio_series(a, b):  # per round a/b
        return [x / y if x is not None and y else None for x, y in zip(a, b)]

    gemm_bf16 = []
    gemm_f32 = []
    gemm_bf16_best = []  # fastest single sample of any bf16 shape
    for rows in rounds:
        g = find(rows, impl="onednn-gemm-best")
        gemm_bf16.append(float(g["bf16_gflops"]) if g else None)
        gemm_f32.append(float(g["f32_gflops"]) if g else None)
        best = [float(r["best_gflops"]) for r in rows if r.get("impl") == "onednn-gemm" and r.get("dtype") == "bf16"]
        gemm_bf16_best.append(max(best) if best else None)

    def gflop_at(ms, model="mlp"):  # amp-bf16 rate of a step time, from the rate bench_step printed
        rows = [r for rows_ in rounds for r in rows_
                if r.get("impl") == "mixprec" and r.get("model") == model and r.get("precision") == "amp-bf16"]
        if ms is None or not rows:
            return None
        r = rows[0]
        return float(r["gflops"]) * float(r["step_ms"]) / ms
    blas = {r.get("blas") for rows in rounds for r in rows if r.get("impl") == "torch-info"}

    print(f"Rounds: {len(rounds)}. Cells: median over rounds [min–max of the per-round medians].")
    print(f"Best oneDNN matmul (median of its best shape, per round): bf16 {med_range(gemm_bf16)} GFLOP/s, "
          f"f32 {med_range(gemm_f32)} GFLOP/s; fastest bf16 sample {med_range(gemm_bf16_best)}. PyTorch BLAS: {', '.join(sorted(blas)) or 'torch not run'}.\n")

    print("| model | preset | step ms (ours) | fwd / bwd / opt ms | GFLOP/s | peak act. MiB | AMP machinery % "
          "| allocs / prims per step | torch step ms | ours vs torch | vs our fp32 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model in models:
        fp32 = series("mixprec", model, "fp32", "step_ms")
        for prec in precs:
            ours = series("mixprec", model, prec, "step_ms")
            if all(v is None for v in ours):
                continue
            fwd, bwd, opt = (med(series("mixprec", model, prec, k)) for k in ("fwd_ms", "bwd_ms", "opt_ms"))
            gf = series("mixprec", model, prec, "gflops")
            act = [v / 2 ** 20 if v is not None else None for v in series("mixprec", model, prec, "peak_act_bytes")]
            amp = [(a + c) / s * 100 if None not in (a, c, s) else None
                   for a, c, s in zip(series("mixprec", model, prec, "amp_ms"),
                                      series("mixprec", model, prec, "cast_ms"), ours)]
            allocs = max((v for v in series("mixprec", model, prec, "allocs_per_step") if v is not None), default=0)
            prims = max((v for v in series("mixprec", model, prec, "prims_per_step") if v is not None), default=0)
            torch = series("torch", model, prec, "step_ms")
            vs_torch = ratio_series(torch, ours)
            vs_fp32 = ratio_series(fp32, ours) if prec != "fp32" else [None]
            print(f"| {model} | {prec} | {med_range(ours)} | {fwd:.1f} / {bwd:.1f} / {opt:.1f} | {med_range(gf)} | "
                  f"{med_range(act)} | {med_range(amp, '{:.2f}')} | {int(allocs)} / {int(prims)} | "
                  f"{med_range(torch)} | {med_range(vs_torch, '{:.2f}x')} | {med_range(vs_fp32, '{:.2f}x')} |")

    # The design.md §4 targets. Judged on medians; the ratio of the per-round fastest steps
    # (min) is shown too: on a loaded host it is the better guess of the unloaded ratio.
    print("\n| target (design.md §4) | goal | measured (medians) | from fastest steps | met? |")
    print("|---|---|---|---|---|")

    def row(name, goal, values, ok, fmt, mins=None):
        m = med(values)
        verdict = "–" if m is None else ("yes" if ok(m) else "**no**")
        print(f"| {name} | {goal} | {med_range(values, fmt)} | {med_range(mins, fmt) if mins else '–'} | {verdict} |")

    def speedup(slow_impl, slow_prec, fast_impl, fast_prec, model, key):
        return ratio_series(series(slow_impl, model, slow_prec, key), series(fast_impl, model, fast_prec, key))

    sc = "seed-cnn"
    if sc in models:
        for slow, prec, fast_prec, goal, name in (
                ("torch", "amp-bf16", "amp-bf16", 3, "seed-cnn amp-bf16 vs torch autocast-bf16"),
                ("torch", "fp32", "fp32", 2, "seed-cnn fp32 vs torch fp32 (OpenBLAS)"),
                ("mixprec", "fp32", "amp-bf16", 2, "seed-cnn amp-bf16 vs our fp32")):
            row(name, f">= {goal}x", speedup(slow, prec, "mixprec", fast_prec, sc, "step_ms"),
                lambda m, g=goal: m >= g, "{:.2f}x", speedup(slow, prec, "mixprec", fast_prec, sc, "step_min_ms"))
        act = ratio_series(series("mixprec", sc, "amp-bf16", "peak_act_bytes"),
                           series("mixprec", sc, "fp32", "peak_act_bytes"))
        row("seed-cnn peak activations amp-bf16 / fp32", "<= 55%", [a * 100 if a else None for a in act],
            lambda m: m <= 55, "{:.1f}%")
    for model, goal in (("mlp", 50), ("transformer", 35)):
        if model not in models:
            continue
        rate = series("mixprec", model, "amp-bf16", "gflops")
        rate_best = [gflop_at(v, model) for v in series("mixprec", model, "amp-bf16", "step_min_ms")]
        row(f"{model} amp-bf16 step vs best oneDNN bf16 GEMM (same round)", f">= {goal}%",
            [m / g * 100 if m is not None and g else None for m, g in zip(rate, gemm_bf16)],
            lambda m, g=goal: m >= g, "{:.1f}%",
            [m / g * 100 if m is not None and g else None for m, g in zip(rate_best, gemm_bf16_best)])
    for model in models:
        for prec in precs:
            if prec == "fp32":
                continue
            amp = [(a + c) / s * 100 if None not in (a, c, s) else None
                   for a, c, s in zip(series("mixprec", model, prec, "amp_ms"),
                                      series("mixprec", model, prec, "cast_ms"),
                                      series("mixprec", model, prec, "step_ms"))]
            if any(v is not None for v in amp):
                row(f"AMP machinery share, {model} {prec}", "< 3%", amp, lambda m: m < 3, "{:.2f}%")
    allocs = max((float(r["allocs_per_step"]) for rows in rounds for r in rows if r.get("impl") == "mixprec"), default=0)
    prims = max((float(r["prims_per_step"]) for rows in rounds for r in rows if r.get("impl") == "mixprec"), default=0)
    print(f"| heap allocations / primitive creations per steady-state step (max, all rows) | 0 / 0 | "
          f"{int(allocs)} / {int(prims)} | – | {'yes' if allocs == 0 and prims == 0 else '**no**'} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: report.py ROUND_LOG [ROUND_LOG ...]")
    main(sys.argv[1:])
