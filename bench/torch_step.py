#!/usr/bin/python3
"""torch_step.py: the PyTorch peer of bench_step: the same training step (zero_grad, forward,
cross_entropy, backward, Adam) on the same models, in fp32 and autocast-bf16, interleaved
round-robin in one process, timed by phase. Prints "RESULT impl=torch ..." lines that
bench/report.py reads.

Run with the Debian interpreter (/usr/bin/python3 has python3-torch 1.13). torch must use
OpenBLAS (its default netlib BLAS is 2-30x slower; autocast-bf16 linear layers go through the
BLAS too): bench/run_benchmarks.sh uses the system's OpenBLAS if libblas.so.3 points to it,
else puts an unpacked libopenblas0-openmp on LD_LIBRARY_PATH. The malloc matters as much:
with glibc's default dynamic mmap/trim thresholds torch 1.13 returns its large activation
buffers to the OS after each step and page-faults them back in on the next, so
run_benchmarks.sh runs each precision in its own process under each allocator configuration
(GLIBC_TUNABLES, LD_PRELOAD of jemalloc or tcmalloc) and keeps the fastest. The BLAS and the
malloc actually in the process (read from /proc/self/maps) are printed and put in the
RESULT lines. The convolutional models also run in both memory formats, contiguous and
channels_last (oneDNN without layout reorders), and the faster one's RESULT is printed
(memory_format=...). Exits 0 with a message when torch is not installed.

OpenBLAS on its own kernels: the script re-executes itself through bench/peer_python unless
it came through it, which removes OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (a preset
OPENBLAS_CORETYPE=Haswell pins OpenBLAS to AVX2 kernels on an AVX-512 CPU). Before timing it
runs bench/peer_check.py as a child process in the same environment: the models' GEMMs in
float32 and autocast-bf16 against float64 (exit 3 and no RESULT if they are wrong). The
OpenBLAS core, configuration and thread count of the timed process are printed and put in
the torch-info RESULT line.

--context T runs the language models at T positions (bench/gpt_context.sh); each model's
RESULT line also says how far the process's peak resident memory rose during its steps above
what it held before them (peak_rss_growth_mib: activations, gradients, Adam's state, the
allocator's caching; of the whole process, so one model and precision per process for a
clean figure)."""
import argparse
import importlib.util
import os
import resource
import statistics
import sys
import time

from peer_check import check_in_child, describe, native_openblas, openblas_info, rss_mib, result_fields


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="seed-cnn,cnn,mlp,transformer")
    ap.add_argument("--precision", default="fp32,amp-bf16", help="fp32 and/or amp-bf16 (torch.autocast)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=0,
                    help="0: the model's default (256; mlp 512; transformer 32; gpt-tiny and gpt 16 sequences)")
    ap.add_argument("--budget", type=float, default=0, help="seconds per precision, 0 = none")
    ap.add_argument("--context", type=int, default=0,
                    help="positions per sequence of gpt-tiny and gpt (0: theirs, 128 and 256)")
    args = ap.parse_args()
    if args.context < 0:
        ap.error(f"--context: expected 0 or a positive integer, got {args.context}")
    if args.context and any(m not in ("gpt-tiny", "gpt") for m in args.model.split(",")):
        ap.error(f"--context: applies to gpt-tiny and gpt only, not to --model {args.model}")

    native_openblas()  # before torch is imported: OpenBLAS reads its variables when it is loaded
    # Both knobs, before torch starts its pools: torch's own default here is 1 thread.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    if importlib.util.find_spec("torch") is None:
        print("torch_step: PyTorch not available (no module named 'torch'); skipping the PyTorch comparison")
        return 0
    # The GEMM check, in a child with this process's environment (allocator, BLAS, threads).
    check_in_child(args.model, args.threads, args.batch, who="torch_step", context=args.context)
    try:
        import torch
        import torch.nn.functional as F
        from torch_models import make  # bench/torch_models.py: the models, shared with the other peer scripts
    except ImportError as e:
        print(f"torch_step: PyTorch not available ({e}); skipping the PyTorch comparison")
        return 0
    torch.set_num_threads(args.threads)
    blas = blas_in_use(torch)
    malloc = malloc_in_use()
    ob = openblas_info(torch)
    print(f"torch_step: torch {torch.__version__}, {torch.get_num_threads()} threads, BLAS: {blas}, malloc: {malloc}")
    print(f"torch_step: {describe(ob)}")
    print(f"RESULT impl=torch-info version={torch.__version__} threads={torch.get_num_threads()} "
          f"blas={blas.split()[0]} malloc={malloc} {result_fields(ob)}")

    for model_name in args.model.split(","):
        batch = args.batch or {"mlp": 512, "transformer": 32, "gpt-tiny": 16, "gpt": 16}.get(model_name, 256)
        language_model = model_name.startswith("gpt")
        runs = []
        # Convolutional models run in both memory formats and report the faster: channels_last
        # lets oneDNN skip its layout reorders (1.2-1.45x faster steps for the cnn on Zen5).
        formats = ["contiguous", "channels_last"] if model_name in ("seed-cnn", "cnn") else ["contiguous"]
        for prec in args.precision.split(","):
            if prec not in ("fp32", "amp-bf16"):
                print(f"torch_step: --precision: '{prec}' not supported (fp32, amp-bf16); "
                      "PyTorch 1.13 has no f16 on CPU")
                return 2
            for fmt in formats:
                torch.manual_seed(0)
                model, shape = make(model_name, context=args.context if language_model else 0)
                x = torch.randint(0, 256, (batch, *shape)) if language_model else torch.randn(batch, *shape)
                if fmt == "channels_last":
                    model = model.to(memory_format=torch.channels_last)
                    x = x.contiguous(memory_format=torch.channels_last)
                opt = torch.optim.Adam(model.parameters(), lr=1e-3)
                y = torch.randint(0, 256, (batch, *shape)) if language_model else torch.randint(0, 10, (batch,))
                runs.append(dict(prec=prec, fmt=fmt, model=model, opt=opt, x=x, y=y, fwd=[], bwd=[], optm=[],
                                 whole=[], secs=0.0))

        def step(r):
            t0 = time.perf_counter()
            r["opt"].zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=r["prec"] == "amp-bf16"):
                out = r["model"](r["x"])
                loss = F.cross_entropy(out.flatten(0, -2), r["y"].flatten()) if out.dim() == 3 else F.cross_entropy(out, r["y"])
            r["loss"] = loss.item()
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            r["opt"].step()
            t3 = time.perf_counter()
            return (t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t3 - t0) * 1e3

        rss_before = rss_mib()
        for _ in range(args.warmup):
            for r in runs:
                step(r)
        for i in range(args.repeats):
            for k in range(len(runs)):
                r = runs[(k + i) % len(runs)]  # rotate: no precision always runs first
                if args.budget > 0 and r["secs"] > args.budget:
                    continue
                f, b, o, w = step(r)
                r["fwd"].append(f)
                r["bwd"].append(b)
                r["optm"].append(o)
                r["whole"].append(w)
                r["secs"] += w / 1e3

        rss_growth = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0 - rss_before
        print(f"\n== torch {model_name}, batch {batch}, {torch.get_num_threads()} threads ==")
        print(f"{'precision':<9} {'format':<13} {'n':>4} {'fwd ms':>9} {'bwd ms':>9} {'opt ms':>9} {'step med':>9} {'step min':>9}")
        for r in runs:
            print(f"{r['prec']:<9} {r['fmt']:<13} {len(r['whole']):>4} {statistics.median(r['fwd']):9.2f} "
                  f"{statistics.median(r['bwd']):9.2f} {statistics.median(r['optm']):9.2f} "
                  f"{statistics.median(r['whole']):9.2f} {min(r['whole']):9.2f}")
        # One RESULT per precision: the faster memory format's.
        best = {}
        for r in runs:
            if r["prec"] not in best or statistics.median(r["whole"]) < statistics.median(best[r["prec"]]["whole"]):
                best[r["prec"]] = r
        for r in best.values():
            med = statistics.median(r["whole"])
            print(f"  repro: bench/peer_python bench/torch_step.py --model {model_name} --precision {r['prec']} "
                  f"--repeats {args.repeats} --warmup {args.warmup} --threads {args.threads} --batch {batch}"
                  f"{f' --context {args.context}' if args.context and language_model else ''}"
                  f"  (env: {' '.join(f'{k}={os.environ[k]}' for k in ENV_KNOBS if os.environ.get(k)) or 'none'})")
            print(f"RESULT impl=torch model={model_name} precision={r['prec']} threads={torch.get_num_threads()} "
                  f"batch={batch} n={len(r['whole'])} fwd_ms={statistics.median(r['fwd']):.3f} "
                  f"bwd_ms={statistics.median(r['bwd']):.3f} opt_ms={statistics.median(r['optm']):.3f} "
                  f"step_ms={med:.3f} step_min_ms={min(r['whole']):.3f} loss={r['loss']:.5f} blas={blas.split()[0]} "
                  f"malloc={malloc} memory_format={r['fmt']} peak_rss_growth_mib={rss_growth:.1f}"
                  f"{f' context={args.context}' if args.context and language_model else ''}")
        sys.stdout.flush()
    return 0


ENV_KNOBS = ("LD_LIBRARY_PATH", "LD_PRELOAD", "GLIBC_TUNABLES", "OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT",
             "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def malloc_in_use():
    """The allocator this process really uses: a preloaded jemalloc/tcmalloc if one is mapped,
    else glibc, marked 'glibc-tuned' when GLIBC_TUNABLES fixes the mmap and trim thresholds
    (and 'glibc-tuned-thp' when it also asks for transparent huge pages)
    (glibc reads the variable at start-up; a typo in it is silently ignored, so the effect
    shows only in the step times)."""
    with open("/proc/self/maps") as maps:
        names = {os.path.basename(line.split()[-1]) for line in maps if "/" in line}
    for lib in ("jemalloc", "tcmalloc"):
        if any(lib in n for n in names):
            return lib
    tun = os.environ.get("GLIBC_TUNABLES", "")
    if "mmap_threshold" in tun and "trim_threshold" in tun:
        return "glibc-tuned-thp" if "hugetlb=1" in tun else "glibc-tuned"
    return "glibc"


def blas_in_use(torch):
    """Which BLAS library the process really mapped, plus an fp32 GEMM rate as a check
    (netlib reference BLAS runs at a few GFLOP/s, OpenBLAS at tens to hundreds)."""
    a = torch.randn(512, 512)
    torch.mm(a, a)
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            base = os.path.basename(path)
            if "blas" in base.lower():
                libs.add(os.path.realpath(path))
    t0 = time.perf_counter()
    for _ in range(5):
        torch.mm(a, a)
    gflops = 5 * 2 * 512 ** 3 / (time.perf_counter() - t0) / 1e9
    kind = "openblas" if any("openblas" in p for p in libs) else "netlib" if libs else "unknown"
    return f"{kind} ({', '.join(sorted(libs)) or 'no BLAS mapped'}; fp32 512^3 mm {gflops:.1f} GFLOP/s)"


if __name__ == "__main__":
    sys.exit(main())
