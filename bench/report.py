#!/usr/bin/env python3
"""report.py: turn the RESULT lines of bench_gemm, bench_step and torch_step.py (one log per
round, written by run_benchmarks.sh) into markdown tables and the design.md §4 target check.
Plain python3, no dependencies.

  report.py [--env env.txt] ROUND_LOG [ROUND_LOG ...]

Every RESULT line carries the allocator configuration its process ran under (alloc=glibc,
tuned, tuned-thp, jemalloc, tcmalloc). The PyTorch peer's figure for a model and precision is its
fastest configuration (lowest median over rounds): the strongest peer. Ours is mixprec under
glibc's defaults (what a user gets); the table of configurations shows whether the
allocator changes it. Ratios are computed per round (the programs of one round ran back to
back) and the median over rounds is reported, with the range in brackets."""
import re
import statistics
import sys

OURS_DEFAULT_ALLOC = "glibc"
ALLOC_ORDER = ["glibc", "tuned", "tuned-thp", "jemalloc", "tcmalloc", "default"]
ALLOC_TEXT = {
    "glibc": "glibc malloc, defaults",
    "tuned": "glibc malloc, GLIBC_TUNABLES mmap/trim thresholds 2^31-1",
    "tuned-thp": "glibc malloc, tuned + glibc.malloc.hugetlb=1 (transparent huge pages)",
    "jemalloc": "jemalloc (LD_PRELOAD)",
    "tcmalloc": "tcmalloc-minimal (LD_PRELOAD)",
    "default": "not recorded: untuned (log from before the allocator matrix)",
}


def parse(paths):
    rounds = []
    for path in paths:
        rows = []
        with open(path) as f:
            for line in f:
                if not line.startswith("RESULT "):
                    continue
                kv = dict(m.groups() for m in re.finditer(r"(\w+)=(\S+)", line[len("RESULT "):]))
                kv.setdefault("alloc", "default")
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


def read_env(path):
    env = {}
    if path:
        with open(path) as f:
            for line in f:
                if ":" in line:
                    k, v = line.split(":", 1)
                    env[k.strip()] = v.strip()
    return env


def untoken(v):
    return v.replace("+", " ")


def peer_blas_line(rounds, env):
    """The peer's BLAS as its processes reported it (torch-info and torch-check lines): the
    OpenBLAS core (openblas_get_corename), openblas_get_config, its threads, what
    bench/peer_python removed from the environment, and the GEMM check against float64."""
    cores, configs, threads, unset, checks = set(), set(), set(), set(), []
    for rows in rounds:
        for r in rows:
            if r.get("impl") in ("torch-info", "torch-check") and "openblas_core" in r:
                cores.add(r["openblas_core"])
                configs.add(untoken(r.get("openblas_config", "?")))
                threads.add(r.get("openblas_threads", "?"))
                unset.add(untoken(r.get("openblas_unset", "?")))
            if r.get("impl") == "torch-check" and "f32_err" in r:
                checks.append((float(r["f32_err"]), float(r["bf16_err"])))
    if not cores:
        return ("Peer BLAS: OpenBLAS core **not recorded** (logs from before 2026-11-27: the peer may have run "
                "with a preset OPENBLAS_CORETYPE=Haswell, i.e. AVX2 kernels on an AVX-512 CPU).")
    line = (f"Peer BLAS: OpenBLAS core **{', '.join(sorted(cores))}** (openblas_get_corename; "
            f"openblas_get_config: {'; '.join(sorted(configs))}; {', '.join(sorted(threads))} threads); "
            f"removed from the peer's environment by bench/peer_python: {'; '.join(sorted(unset))}")
    if "peer openblas" in env:  # the up-front check of run_benchmarks.sh
        line += (f"; run_benchmarks.sh's up-front check: {env.get('peer gemm check', '?')}; torch.mm 1024^3 "
                 f"{env.get('peer torch.mm 1024^3', '?')}")
    if checks:
        line += (f"; {len(checks)} per-process GEMM checks against float64 passed, worst relative error f32 "
                 f"{max(c[0] for c in checks):.1e} (bound 1e-5), bf16 {max(c[1] for c in checks):.1e} (bound 2^-8)")
    if len(cores) > 1:
        line += ". **Warning: the peer's processes did not all run on the same OpenBLAS core.**"
    return line + "."


def main(argv):
    env_path = None
    if len(argv) >= 2 and argv[0] == "--env":
        env_path, argv = argv[1], argv[2:]
    if not argv:
        sys.exit("usage: report.py [--env env.txt] ROUND_LOG [ROUND_LOG ...]")
    env = read_env(env_path)
    rounds = parse(argv)
    models, precs = [], []
    for rows in rounds:
        for r in rows:
            if r.get("impl") in ("mixprec", "torch") and "model" in r:
                if r["model"] not in models:
                    models.append(r["model"])
                if r.get("impl") == "mixprec" and r["precision"] not in precs:
                    precs.append(r["precision"])

    def allocs_of(impl):
        seen = {r["alloc"] for rows in rounds for r in rows if r.get("impl") == impl}
        return [a for a in ALLOC_ORDER if a in seen] + sorted(seen - set(ALLOC_ORDER))

    ours_allocs, peer_allocs = allocs_of("mixprec"), allocs_of("torch")
    ours = OURS_DEFAULT_ALLOC if OURS_DEFAULT_ALLOC in ours_allocs else (ours_allocs[0] if ours_allocs else None)

    def series(impl, model, prec, key, alloc):
        out = []
        for rows in rounds:
            r = find(rows, impl=impl, model=model, precision=prec, alloc=alloc)
            out.append(float(r[key]) if r and key in r else None)
        return out

    def ratio_series(a, b):  # per round a/b
        return [x / y if x is not None and y else None for x, y in zip(a, b)]

    # The strongest peer per model and precision: the configuration with the lowest median.
    strongest = {}
    for model in models:
        for prec in ("fp32", "amp-bf16"):
            best = None
            for a in peer_allocs:
                m = med(series("torch", model, prec, "step_ms", a))
                if m is not None and (best is None or m < best[1]):
                    best = (a, m)
            if best:
                strongest[(model, prec)] = best[0]

    def peer(model, prec, key="step_ms"):
        a = strongest.get((model, prec))
        return series("torch", model, prec, key, a) if a else [None] * len(rounds)

    def ours_s(model, prec, key):
        return series("mixprec", model, prec, key, ours)

    gemm_bf16, gemm_f32, gemm_bf16_best = [], [], []
    for rows in rounds:
        g = find(rows, impl="onednn-gemm-best")
        gemm_bf16.append(float(g["bf16_gflops"]) or None if g else None)  # 0: no bf16 matmul here
        gemm_f32.append(float(g["f32_gflops"]) or None if g else None)
        best = [float(r["best_gflops"]) for r in rows if r.get("impl") == "onednn-gemm" and r.get("dtype") == "bf16"]
        gemm_bf16_best.append(max(best) if best else None)

    info = {}  # alloc -> (blas, malloc actually mapped) of the peer
    for rows in rounds:
        for r in rows:
            if r.get("impl") == "torch-info":
                info[r["alloc"]] = (r.get("blas", "?"), r.get("malloc", "?"), r.get("version", "?"))

    cpu = env.get("cpu", "not recorded (run with --env ENV_TXT)")
    print(f"CPU: {cpu}; flags: {env.get('flags', '?')}")
    if peer_allocs:
        print(peer_blas_line(rounds, env))
    if env:
        print(f"Date: {env.get('date', '?')}; commit: {env.get('commit', '?')}; threads: {env.get('threads', '?')}; "
              f"load {env.get('load before', '?')} before, {env.get('load after', '?')} after.")
    print(f"Rounds: {len(rounds)}. Cells: median over rounds [min–max of the per-round medians]. Every "
          "precision ran in its own process; ours = mixprec under "
          f"{ALLOC_TEXT.get(ours, ours)}; peer = PyTorch in its fastest configuration per model and precision.")
    print(f"Best oneDNN matmul (median of its best shape, per round): bf16 "
          f"{med_range(gemm_bf16) if any(gemm_bf16) else 'none (no oneDNN bf16 matmul on this CPU)'}"
          f"{' GFLOP/s' if any(gemm_bf16) else ''}, f32 {med_range(gemm_f32)} GFLOP/s.\n")

    if "default" in peer_allocs:
        print("**Warning: these logs do not record the peer's allocator configuration (written before "
              "run_benchmarks.sh ran the peer per allocator): the PyTorch figures are of an untuned peer "
              "and are not strongest-peer ratios.**\n")
    if peer_allocs:
        print("**Peer configurations** (PyTorch "
              f"{next(iter(info.values()))[2] if info else '?'}; step ms, median over rounds; "
              "the fastest PyTorch configuration per row is the strongest peer):\n")
        print("| model | precision | allocator | BLAS / malloc mapped (peer) | PyTorch step ms | mixprec step ms |")
        print("|---|---|---|---|---|---|")
        for model in models:
            for prec in ("fp32", "amp-bf16"):
                if (model, prec) not in strongest:
                    continue
                for a in [x for x in ALLOC_ORDER if x in set(peer_allocs) | set(ours_allocs)]:
                    t = series("torch", model, prec, "step_ms", a)
                    o = series("mixprec", model, prec, "step_ms", a)
                    win = a == strongest[(model, prec)]
                    blas, malloc, _ = info.get(a, ("?", "?", "?"))
                    tcell = med_range(t)
                    print(f"| {model} | {prec} | {a}{' **(strongest)**' if win else ''} | "
                          f"{blas + ' / ' + malloc if a in info else '–'} | "
                          f"{'**' + tcell + '**' if win else tcell} | {med_range(o)} |")
        print()
        print("Strongest peer: " + "; ".join(f"{m} {p}: {a} ({ALLOC_TEXT.get(a, a)}, BLAS {info.get(a, ('?',))[0]})"
                                             for (m, p), a in strongest.items()) + ".")
        spread = []
        for model in models:
            for prec in precs:
                meds = [med(series("mixprec", model, prec, "step_ms", a)) for a in ours_allocs]
                meds = [m for m in meds if m]
                if len(meds) > 1:
                    spread.append(f"{model} {prec} {max(meds) / min(meds):.2f}x")
        if spread:
            print("mixprec across allocator configurations (slowest / fastest median): " + ", ".join(spread) + ".")
        print()

    print(f"| model | preset | step ms (ours) | fwd / bwd / opt ms | GFLOP/s | peak act. MiB | AMP machinery % "
          "| allocs / prims per step | strongest peer step ms | ours vs strongest peer | vs our fp32 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")

    def machinery(model, prec):
        # The fused update's AMP work is the optimizer phase's excess over fp32's (same Adam on
        # f32 weights; fp32 ran in its own process of the same round), plus the weight casts.
        fp32_opt = ours_s(model, "fp32", "opt_ms")
        out = []
        for o, f, c, s in zip(ours_s(model, prec, "opt_ms"), fp32_opt, ours_s(model, prec, "cast_ms"),
                              ours_s(model, prec, "step_ms")):
            out.append(None if None in (o, c, s) or not s else (max(0.0, o - (f if f is not None else o)) + c) / s * 100)
        return out

    for model in models:
        fp32 = ours_s(model, "fp32", "step_ms")
        for prec in precs:
            mine = ours_s(model, prec, "step_ms")
            if all(v is None for v in mine):
                continue
            fwd, bwd, opt = (med(ours_s(model, prec, k)) for k in ("fwd_ms", "bwd_ms", "opt_ms"))
            gf = ours_s(model, prec, "gflops")
            act = [v / 2 ** 20 if v is not None else None for v in ours_s(model, prec, "peak_act_bytes")]
            amp = machinery(model, prec) if prec != "fp32" else [0.0]
            allocs = max((v for v in ours_s(model, prec, "allocs_per_step") if v is not None), default=0)
            prims = max((v for v in ours_s(model, prec, "prims_per_step") if v is not None), default=0)
            torch = peer(model, prec)
            label = f" ({strongest[(model, prec)]})" if (model, prec) in strongest else ""
            vs_torch = ratio_series(torch, mine)
            vs_fp32 = ratio_series(fp32, mine) if prec != "fp32" else [None]
            print(f"| {model} | {prec} | {med_range(mine)} | {fwd:.1f} / {bwd:.1f} / {opt:.1f} | {med_range(gf)} | "
                  f"{med_range(act)} | {med_range(amp, '{:.2f}')} | {int(allocs)} / {int(prims)} | "
                  f"{med_range(torch)}{label if any(torch) else ''} | {med_range(vs_torch, '{:.2f}x')} | "
                  f"{med_range(vs_fp32, '{:.2f}x')} |")

    # The design.md §4 targets. Judged on medians; the ratio of the per-round fastest steps
    # (min) is shown too: on a loaded host it is the better guess of the unloaded ratio.
    print(f"\n| target (design.md §4), CPU: {cpu.rsplit(',', 1)[0]} | goal | measured (medians) | from fastest steps | met? |")
    print("|---|---|---|---|---|")

    def row(name, goal, values, ok, fmt, mins=None, why=None):
        m = med(values)
        verdict = (why or "–") if m is None else ("yes" if ok(m) else "**no**")
        print(f"| {name} | {goal} | {med_range(values, fmt)} | {med_range(mins, fmt) if mins else '–'} | {verdict} |")

    sc = "seed-cnn"
    if sc in models:
        for prec, goal in (("amp-bf16", 3), ("fp32", 2)):
            a = strongest.get((sc, prec), "none")
            row(f"seed-cnn {prec} vs strongest PyTorch {prec} ({a})", f">= {goal}x",
                ratio_series(peer(sc, prec), ours_s(sc, prec, "step_ms")), lambda m, g=goal: m >= g, "{:.2f}x",
                ratio_series(peer(sc, prec, "step_min_ms"), ours_s(sc, prec, "step_min_ms")))
        row("seed-cnn amp-bf16 vs our fp32", ">= 2x",
            ratio_series(ours_s(sc, "fp32", "step_ms"), ours_s(sc, "amp-bf16", "step_ms")), lambda m: m >= 2,
            "{:.2f}x", ratio_series(ours_s(sc, "fp32", "step_min_ms"), ours_s(sc, "amp-bf16", "step_min_ms")))
        act = ratio_series(ours_s(sc, "amp-bf16", "peak_act_bytes"), ours_s(sc, "fp32", "peak_act_bytes"))
        row("seed-cnn peak activations amp-bf16 / fp32", "<= 55%", [a * 100 if a else None for a in act],
            lambda m: m <= 55, "{:.1f}%")
    for model, goal in (("mlp", 50), ("transformer", 35)):
        if model not in models:
            continue
        rate = ours_s(model, "amp-bf16", "gflops")
        row(f"{model} amp-bf16 step vs best oneDNN bf16 GEMM (same round)", f">= {goal}%",
            [m / g * 100 if m is not None and g else None for m, g in zip(rate, gemm_bf16)],
            lambda m, g=goal: m >= g, "{:.1f}%", why="not measurable: no oneDNN bf16 matmul on this CPU"
            if not any(gemm_bf16) else None)
    for model in models:
        for prec in precs:
            if prec == "fp32":
                continue
            amp = machinery(model, prec)
            if any(v is not None for v in amp):
                row(f"AMP machinery share, {model} {prec}", "< 3%", amp, lambda m: m < 3, "{:.2f}%")
    rows_ours = [r for rows in rounds for r in rows if r.get("impl") == "mixprec"]
    allocs = max((float(r["allocs_per_step"]) for r in rows_ours), default=0)
    prims = max((float(r["prims_per_step"]) for r in rows_ours), default=0)
    print(f"| heap allocations / primitive creations per steady-state step (max, all rows) | 0 / 0 | "
          f"{int(allocs)} / {int(prims)} | – | {'yes' if allocs == 0 and prims == 0 else '**no**'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
