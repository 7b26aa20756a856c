#!/usr/bin/python3
"""torch_profile.py: where the strongest PyTorch peer's seed-CNN training step goes, by kind of
work (issue 18): PyTorch 1.13's autograd profiler over the same step as bench/torch_step.py
(channels_last, Adam, batch 256, 2 threads), each op's self CPU time put in one bucket:
oneDNN convolutions (forward and backward), GEMMs (the linear layers, OpenBLAS or oneDNN),
ReLU/pooling, autocast's casts, the loss, the optimizer, everything else (autograd and
dispatch). The convolution and GEMM kernels are oneDNN's and the BLAS's: mixprec calls the
same oneDNN, so their time bounds how far ahead of this peer any step built on them can be.

    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=2147483647:glibc.malloc.trim_threshold=2147483647 \\
        /usr/bin/python3 bench/torch_profile.py [--precision amp-bf16] [--steps 10] [--batch 256]

Run under the peer's fastest allocator (the tunables above: run_benchmarks.sh's `tuned`).
Prints one table per precision: ms per step and share for each bucket, and the ops in it."""
import argparse
import os
import statistics
import time

from peer_check import check_in_child, describe, native_openblas, openblas_info


BUCKETS = [
    ("convolution (oneDNN)", ("mkldnn_convolution", "convolution_backward", "_convolution", "convolution")),
    ("GEMM (linear layers)", ("addmm", "mm", "bmm", "linear", "matmul", "_mkldnn")),
    ("ReLU / max-pool", ("relu", "clamp_min", "threshold", "max_pool", "pool")),
    ("autocast casts / copies", ("_to_copy", "to", "copy_", "empty_like", "clone", "contiguous")),
    ("loss (log_softmax, nll)", ("log_softmax", "nll_loss", "cross_entropy", "_log_softmax")),
    ("optimizer (Adam)", ("_foreach", "addcmul", "addcdiv", "lerp", "sqrt", "mul_", "add_", "div_", "adam",
                          "Optimizer")),
]


def bucket_of(name):
    op = name.split("::")[-1]
    for bucket, keys in BUCKETS:
        if any(op == k or op.startswith(k) for k in keys):
            return bucket
    return "other (autograd, dispatch, views, zero_grad)"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--precision", default="fp32,amp-bf16")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()
    native_openblas()  # OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed (bench/peer_python), before torch loads
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    check_in_child("seed-cnn", args.threads, args.batch, who="torch_profile")  # its GEMMs against float64
    try:
        import torch
        import torch.nn.functional as F
        from torch_models import make  # the same seed CNN as torch_step.py
    except ImportError as e:
        print(f"torch_profile: PyTorch not available ({e})")
        return 0
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch {args.batch}, channels_last, "
          f"GLIBC_TUNABLES={os.environ.get('GLIBC_TUNABLES', '(unset)')} LD_PRELOAD={os.environ.get('LD_PRELOAD', '(unset)')}")
    print(f"torch_profile: {describe(openblas_info(torch))}")
    for prec in args.precision.split(","):
        torch.manual_seed(0)
        model, shape = make("seed-cnn")
        model = model.to(memory_format=torch.channels_last)
        x = torch.randn(args.batch, *shape).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 10, (args.batch,))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=prec == "amp-bf16"):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        for _ in range(args.warmup):
            step()
        plain = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            plain.append((time.perf_counter() - t0) * 1e3)
        with torch.autograd.profiler.profile() as prof:
            for _ in range(args.steps):
                step()
        totals, ops = {}, {}
        for e in prof.key_averages():
            b = bucket_of(e.key)
            ms = e.self_cpu_time_total / 1e3 / args.steps
            totals[b] = totals.get(b, 0.0) + ms
            ops.setdefault(b, []).append((ms, e.key))
        whole = sum(totals.values())
        print(f"\n== PyTorch seed-cnn {prec}: {statistics.median(plain):.2f} ms/step unprofiled (median of "
              f"{args.steps}); {whole:.2f} ms/step of op self time under the profiler ==")
        print(f"{'bucket':<46} {'ms/step':>8} {'share':>6}  largest ops")
        for b, ms in sorted(totals.items(), key=lambda kv: -kv[1]):
            top = ", ".join(f"{k} {m:.2f}" for m, k in sorted(ops[b], reverse=True)[:3])
            print(f"{b:<46} {ms:8.2f} {100 * ms / whole:5.1f}%  {top}")
        kernels = totals.get("convolution (oneDNN)", 0.0) + totals.get("GEMM (linear layers)", 0.0)
        print(f"convolution + GEMM kernels: {kernels:.2f} ms/step ({100 * kernels / whole:.1f}% of the op time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
