#!/usr/bin/python3
"""peer_check.py: what every PyTorch peer script in bench/ does before it times anything.

1. native_openblas(): runs the process on OpenBLAS's own kernels for this CPU. Called first,
   before torch (or numpy) is imported: when the process did not come through
   bench/peer_python it re-executes itself through it, which removes OPENBLAS_CORETYPE and
   OPENBLAS_L2_SIZE (the list lives in that one file). Machines that preset
   OPENBLAS_CORETYPE=Haswell pin OpenBLAS to AVX2 kernels on AVX-512 CPUs: a handicapped peer.
2. openblas_info(torch): the OpenBLAS the process really mapped (/proc/self/maps, after
   `import torch`) and, through ctypes, openblas_get_corename(), openblas_get_config() and
   openblas_get_num_threads(); plus what bench/peer_python removed from the environment.
3. check_gemms(torch, shapes): the peer's GEMMs against float64, at the benchmark's shapes:
   every linear layer's forward and backward (nn.Linear: y = x W^T + b, dx = g W, dW = g^T x,
   db) in float32 and under torch.autocast('cpu', bfloat16), and the attention's batched
   matmuls (torch.bmm). Error: normwise relative, ||C - C64||_F / ||C64||_F. Bounds:
   float32 <= 1e-5 (the K-term sums in f32 give ~3e-7 on random N(0, 1) operands);
   bfloat16 <= 2^-8 = 3.9e-3, bf16's unit roundoff, against float64 computed from the same
   bf16-rounded operands: the result's one rounding to bf16 is at most that per element and
   about 1.7e-3 normwise (1.6-2.0e-3 measured), while a kernel that accumulated in bf16 would
   be several times above it at the larger K here (up to 4096). The float64 reference is
   itself a BLAS product (dgemm), so two of its rows per shape are recomputed without any
   BLAS (a float64 elementwise product and sum) and must agree to 1e-12. Any failure: a message on stderr
   and exit code 3 (PEER_CHECK_FAILED): a faster but wrong peer is not a peer.
4. gemm_rates(torch): f32 and bf16 torch.mm rates (GFLOP/s) at 1024^3, for the record.

bench/torch_step.py runs the check as a child process (this file, --no-rates) with its own
environment, before it imports torch itself: the check's large float64 buffers, once freed,
would move glibc's dynamic mmap threshold in the timed process and change the very
allocator configurations the suite compares.

Run alone, it prints all of it for the benchmark's models:

    bench/peer_python bench/peer_check.py [--models seed-cnn,transformer,gpt-tiny] [--threads 2]
    OPENBLAS_CORETYPE=Haswell /usr/bin/python3 bench/peer_check.py --keep-openblas-env   # the handicap, for comparison
"""
import argparse
import ctypes
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WRAPPER = os.path.join(HERE, "peer_python")
PEER_CHECK_FAILED = 3
F32_BOUND = 1e-5
BF16_BOUND = 2.0 ** -8
REF_BOUND = 1e-12


def native_openblas(keep_env=False):
    """Re-execute this script through bench/peer_python unless it already came through it
    (MIXPREC_PEER_UNSET is set by the wrapper). Must run before torch or numpy is imported:
    OpenBLAS reads its variables when the library is loaded."""
    if keep_env or "MIXPREC_PEER_UNSET" in os.environ:
        return
    loaded = [m for m in ("torch", "numpy") if m in sys.modules]
    if loaded:
        raise RuntimeError(f"peer_check.native_openblas() called after importing {', '.join(loaded)}")
    env = dict(os.environ, PEER_PYTHON=sys.executable)
    sys.stdout.flush()
    os.execve(WRAPPER, [WRAPPER, os.path.abspath(sys.argv[0])] + sys.argv[1:], env)


def _mapped_blas():
    paths = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "/" in path and "blas" in os.path.basename(path).lower() and path not in paths:
                paths.append(path)
    return paths


def openblas_info(torch):
    """The BLAS torch loaded and, if it is OpenBLAS, its core, configuration and threads."""
    torch.mm(torch.ones(8, 8), torch.ones(8, 8))  # make sure the BLAS is loaded and initialised
    paths = _mapped_blas()
    info = dict(library=", ".join(os.path.realpath(p) for p in paths) or "no BLAS mapped", core="none",
                config="none", threads=0, kind="netlib" if paths else "unknown",
                unset=os.environ.get("MIXPREC_PEER_UNSET", "(not run through bench/peer_python)") or "nothing set",
                env=" ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_")) or "none")
    # The real OpenBLAS first (libopenblas*.so), then anything else that may export its API.
    for path in sorted(paths, key=lambda p: "openblas" not in os.path.basename(p).lower()):
        try:
            lib = ctypes.CDLL(path)
            corename, config = lib.openblas_get_corename, lib.openblas_get_config
        except (OSError, AttributeError):
            continue
        corename.restype = config.restype = ctypes.c_char_p
        info.update(kind="openblas", library=os.path.realpath(path), core=corename().decode(),
                    config=config().decode(), threads=int(lib.openblas_get_num_threads()))
        break
    return info


def rss_mib():
    """The process's resident memory now, MiB (torch_step.py and long_context_torch.py)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def describe(info):
    return (f"BLAS {info['kind']} {info['library']}; OpenBLAS core {info['core']} "
            f"(openblas_get_config: {info['config']}; {info['threads']} threads); "
            f"removed from the environment: {info['unset']}; OPENBLAS_* now: {info['env']}")


def result_fields(info):
    """key=value fields for RESULT lines: spaces inside a value become '+'."""
    def token(s):
        return str(s).replace(" ", "+") or "none"
    return (f"openblas_core={token(info['core'])} openblas_threads={info['threads']} "
            f"openblas_config={token(info['config'])} openblas_unset={token(info['unset'])}")


# --- the benchmark's GEMM shapes ------------------------------------------------------------

def encoder_shapes(batch, seq, d, heads, ffn, head_rows, head_out):
    """Linear (rows, in, out) and batched-matmul (batch, m, k, n) shapes of an encoder block
    (fused Q|K|V projection as nn.MultiheadAttention's in_proj) and its output head."""
    t = batch * seq
    linear = [("in_proj", t, d, 3 * d), ("out_proj", t, d, d), ("ffn1", t, d, ffn), ("ffn2", t, ffn, d),
              ("head", head_rows, d, head_out)]
    bmm = [("scores", batch * heads, seq, d // heads, seq), ("context", batch * heads, seq, seq, d // heads)]
    return linear, bmm


def model_shapes(model, batch=0, context=0):
    """The GEMMs of bench/torch_models.py's model at the benchmark batch (torch_step.py's) and,
    for the language models, at `context` positions (0: the model's own)."""
    if context and model not in ("gpt-tiny", "gpt"):
        raise ValueError(f"peer_check: a context applies to gpt-tiny and gpt, not '{model}'")
    if model in ("seed-cnn", "cnn"):
        b = batch or 256
        flat = 64 * (32 // 4) ** 2 if model == "seed-cnn" else 64 * (28 // 4) ** 2
        return [("fc1", b, flat, 256), ("fc2", b, 256, 10)], []
    if model == "mlp":
        b = batch or 512
        return [("fc1", b, 784, 4096), ("fc2", b, 4096, 4096), ("fc3", b, 4096, 10)], []
    if model == "transformer":
        b = batch or 32
        return encoder_shapes(b, 128, 256, 4, 1024, b, 10)
    if model in ("gpt-tiny", "gpt"):
        b = batch or 16
        seq, d, heads = (128, 128, 4) if model == "gpt-tiny" else (256, 384, 6)
        seq = context or seq
        return encoder_shapes(b, seq, d, heads, 4 * d, b * seq, 256)  # the tied head: 256 bytes
    if model.startswith("encoder:"):  # encoder:BATCH:SEQ:WIDTH:HEADS:FFN:OUT (long_context_torch.py's)
        b, seq, d, heads, ffn, out = (int(v) for v in model.split(":")[1:])
        return encoder_shapes(b, seq, d, heads, ffn, b, out)
    raise ValueError(f"peer_check: unknown model '{model}'")


# --- the check ------------------------------------------------------------------------------

def _rel(torch, got, ref):
    ref = ref.double()
    return float(torch.linalg.norm(got.double() - ref) / max(float(torch.linalg.norm(ref)), 1e-300))


def _ref_rows_ok(torch, x64, w64, y64, rows=(0, -1)):
    """Rows of x64 @ w64^T recomputed without BLAS (elementwise product and sum in float64)."""
    worst = 0.0
    for r in rows:
        row = (x64[r][:, None] * w64.t()).sum(0)
        worst = max(worst, _rel(torch, row, y64[r]))
    return worst


def check_gemms(torch, linear, bmm, label="", out=sys.stdout):
    """Check every shape; print one line per check; exit PEER_CHECK_FAILED on any failure.
    Returns (worst f32 error, worst bf16 error, worst reference error, number of checks)."""
    import torch.nn as nn
    gen = torch.Generator().manual_seed(1234)
    failures, worst = [], {"f32": 0.0, "bf16": 0.0, "ref": 0.0}
    n = 0

    def record(kind, what, err, bound):
        nonlocal n
        n += 1
        worst[kind] = max(worst[kind], err)
        if not err <= bound:  # NaN fails too
            failures.append(f"{what}: relative error {err:.3g} > {bound:.3g}")

    t0 = time.perf_counter()
    seen = set()
    for name, rows, fin, fout in linear:
        if (rows, fin, fout) in seen:
            continue
        seen.add((rows, fin, fout))
        shape = f"{name} [{rows}x{fin}]x[{fin}x{fout}]"
        x = torch.randn(rows, fin, generator=gen)
        g = torch.randn(rows, fout, generator=gen)
        lin = nn.Linear(fin, fout)
        # float32 forward + backward against float64 of the same values
        xf = x.clone().requires_grad_(True)
        y = lin(xf)
        y.backward(g)
        w64, b64, x64, g64 = lin.weight.detach().double(), lin.bias.detach().double(), x.double(), g.double()
        y64 = x64 @ w64.t() + b64
        record("ref", f"float64 reference rows, {shape}", _ref_rows_ok(torch, x64, w64, y64 - b64), REF_BOUND)
        record("f32", f"f32 linear forward {shape}", _rel(torch, y.detach(), y64), F32_BOUND)
        record("f32", f"f32 linear backward dx {shape}", _rel(torch, xf.grad, g64 @ w64), F32_BOUND)
        record("f32", f"f32 linear backward dW {shape}", _rel(torch, lin.weight.grad, g64.t() @ x64), F32_BOUND)
        record("f32", f"f32 linear backward db {shape}", _rel(torch, lin.bias.grad, g64.sum(0)), F32_BOUND)
        # autocast bf16 forward + backward against float64 of the bf16-rounded operands
        lin.zero_grad(set_to_none=True)
        xb = x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yb = lin(xb)
        gb = g.bfloat16()
        yb.backward(gb)
        r = lambda t: t.detach().bfloat16().double()  # noqa: E731
        wr, br, xr, gr = r(lin.weight), r(lin.bias), r(x), gb.double()
        record("bf16", f"bf16 (autocast) linear forward {shape}", _rel(torch, yb.detach(), xr @ wr.t() + br),
               BF16_BOUND)
        record("bf16", f"bf16 (autocast) linear backward dx {shape}", _rel(torch, xb.grad, gr @ wr), BF16_BOUND)
        record("bf16", f"bf16 (autocast) linear backward dW {shape}", _rel(torch, lin.weight.grad, gr.t() @ xr),
               BF16_BOUND)
        record("bf16", f"bf16 (autocast) linear backward db {shape}", _rel(torch, lin.bias.grad, gr.sum(0)),
               BF16_BOUND)
    for name, batch, m, k, n_ in bmm:
        if ("bmm", batch, m, k, n_) in seen:
            continue
        seen.add(("bmm", batch, m, k, n_))
        batch = max(1, min(batch, (64 << 20) // (8 * m * n_)))  # the float64 result within 64 MiB
        shape = f"{name} {batch} x [{m}x{k}]x[{k}x{n_}]"
        a = torch.randn(batch, m, k, generator=gen)
        b = torch.randn(batch, k, n_, generator=gen)
        ref = a.double() @ b.double()
        record("f32", f"f32 bmm {shape}", _rel(torch, torch.bmm(a, b), ref), F32_BOUND)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            cb = torch.bmm(a, b)
        record("bf16", f"bf16 (autocast) bmm {shape}", _rel(torch, cb, a.bfloat16().double() @ b.bfloat16().double()),
               BF16_BOUND)
    secs = time.perf_counter() - t0
    verdict = "FAILED" if failures else "ok"
    print(f"peer_check{(' ' + label) if label else ''}: {n} GEMM checks against float64 {verdict} in {secs:.1f} s: "
          f"worst relative error f32 {worst['f32']:.2e} (bound {F32_BOUND:.0e}), bf16 {worst['bf16']:.2e} "
          f"(bound 2^-8 = {BF16_BOUND:.2e}), float64 reference vs non-BLAS rows {worst['ref']:.1e} "
          f"(bound {REF_BOUND:.0e})", file=out)
    if failures:
        print("peer_check: THE PEER'S GEMMS ARE WRONG; refusing to time it (a faster but wrong peer is not a "
              "peer):\n  " + "\n  ".join(failures), file=sys.stderr)
        sys.stdout.flush()
        sys.exit(PEER_CHECK_FAILED)
    return worst["f32"], worst["bf16"], worst["ref"], n


def check_models(torch, models, batch=0, label="", context=0):
    linear, bmm = [], []
    for m in models:
        lin, bm = model_shapes(m, batch, context)
        linear += lin
        bmm += bm
    return check_gemms(torch, linear, bmm, label=label or ",".join(models))


def check_in_child(models, threads, batch=0, who="peer", context=0):
    """Run this file's check (--no-rates) in a child process with this process's environment,
    before the caller imports torch; exit PEER_CHECK_FAILED if it fails. The child's lines
    (the OpenBLAS core, the errors, a RESULT impl=torch-check line) go to the caller's stdout."""
    import subprocess
    sys.stdout.flush()
    rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--no-rates", "--models", models,
                         "--threads", str(threads), "--batch", str(batch), "--context", str(context)]).returncode
    if rc != 0:
        print(f"{who}: the peer's GEMM check failed (exit {rc}): not timing a wrong peer", file=sys.stderr)
        sys.exit(PEER_CHECK_FAILED)


def gemm_rates(torch, size=1024, repeats=10):
    """Median GFLOP/s of torch.mm at size^3 in float32 and bfloat16."""
    rates = {}
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        a = torch.randn(size, size).to(dtype)
        b = torch.randn(size, size).to(dtype)
        for _ in range(3):
            torch.mm(a, b)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.mm(a, b)
            times.append(time.perf_counter() - t0)
        rates[name] = 2 * size ** 3 / statistics.median(times) / 1e9
        rates[name + "_best"] = 2 * size ** 3 / min(times) / 1e9
    return rates


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="seed-cnn,transformer,gpt-tiny")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=0, help="0: each model's benchmark batch (torch_step.py's)")
    ap.add_argument("--context", type=int, default=0, help="0: each language model's own context (torch_step.py's)")
    ap.add_argument("--no-rates", action="store_true", help="only the check (what torch_step.py runs)")
    ap.add_argument("--rate-size", type=int, default=1024)
    ap.add_argument("--rate-repeats", type=int, default=20)
    ap.add_argument("--keep-openblas-env", action="store_true",
                    help="do not remove OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (to show what they cost)")
    args = ap.parse_args()
    native_openblas(keep_env=args.keep_openblas_env)
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import torch
    torch.set_num_threads(args.threads)
    info = openblas_info(torch)
    print(f"peer_check: torch {torch.__version__}, {torch.get_num_threads()} threads, {describe(info)}")
    f32, bf16, ref, n = check_models(torch, args.models.split(","), args.batch, context=args.context)
    if args.no_rates:
        print(f"RESULT impl=torch-check {result_fields(info)} models={args.models} checks={n} f32_err={f32:.3e} "
              f"bf16_err={bf16:.3e} ref_err={ref:.1e}")
        return 0
    rates = gemm_rates(torch, args.rate_size, args.rate_repeats)
    print(f"peer_check: torch.mm {args.rate_size}^3 median (best) GFLOP/s: f32 {rates['f32']:.1f} "
          f"({rates['f32_best']:.1f}), bf16 {rates['bf16']:.1f} ({rates['bf16_best']:.1f})")
    print(f"RESULT impl=torch-check {result_fields(info)} models={args.models} checks={n} f32_err={f32:.3e} bf16_err={bf16:.3e} "
          f"ref_err={ref:.1e} f32_mm_gflops={rates['f32']:.1f} bf16_mm_gflops={rates['bf16']:.1f} "
          f"f32_mm_best_gflops={rates['f32_best']:.1f} bf16_mm_best_gflops={rates['bf16_best']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
