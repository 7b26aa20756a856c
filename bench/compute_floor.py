#!/usr/bin/env python3
"""compute_floor.py: the least time a training step of a built-in model can take on a machine,
from its arithmetic alone: the multiply-adds of its convolutions, linear layers and attention
matmuls (forward, input gradient except for the first layer, weight gradient) at the
machine's best GEMM rate, with every other pass free. A speed target against a peer that
needs a step shorter than this floor cannot be met by any implementation on that machine.

    bench/compute_floor.py --bf16-gflops 1012 --f32-gflops 504 \\
        [--peer seed-cnn:amp-bf16:29.8 --peer transformer:fp32:104.1 ...] [--target 3]

The GEMM rates are bench_gemm's "best median" line of the same session
(OMP_NUM_THREADS=2 build-dev/bench/bench_gemm); peer step times are bench/run_benchmarks.sh's
strongest-PyTorch medians. Batch sizes are the benchmark defaults (bench_step,
bench/torch_step.py)."""
import argparse


def conv(batch, cin, cout, h, w, k, first=False):
    """multiply-adds of one pass, and how many passes training runs (no input gradient for the
    first layer)."""
    return batch * cout * h * w * cin * k * k, 2 if first else 3


def linear(rows, fin, fout, first=False):
    return rows * fin * fout, 2 if first else 3


def encoder_layer(batch, seq, d, ffn, causal=False):
    tokens = batch * seq
    layers = [linear(tokens, d, 3 * d), linear(tokens, d, d), linear(tokens, d, ffn), linear(tokens, ffn, d)]
    # QK^T and PV per head: seq x seq x head_dim per token pair; all heads together seq x d.
    # (A causal kernel could skip half; mixprec's and PyTorch 1.13's do not.)
    attention = batch * seq * seq * d
    layers += [(attention, 3), (attention, 3)]
    return layers


def model_macs(name):
    """[(multiply-adds per pass, passes)] of one training step at the benchmark batch."""
    if name in ("seed-cnn", "cnn"):
        b, c, s = (256, 3, 32) if name == "seed-cnn" else (256, 1, 28)
        return [conv(b, c, 32, s, s, 3, first=True), conv(b, 32, 64, s // 2, s // 2, 3),
                linear(b, 64 * (s // 4) ** 2, 256), linear(b, 256, 10)]
    if name == "mlp":
        b = 512
        return [linear(b, 784, 4096, first=True), linear(b, 4096, 4096), linear(b, 4096, 10)]
    if name == "transformer":  # 128 tokens of 256 features, one encoder layer (4 heads, ffn 1024)
        return encoder_layer(32, 128, 256, 1024) + [linear(32, 256, 10)]
    if name in ("gpt-tiny", "gpt"):
        b, seq, layers, d = (16, 128, 4, 128) if name == "gpt-tiny" else (16, 256, 6, 384)
        out = []
        for _ in range(layers):
            out += encoder_layer(b, seq, d, 4 * d)
        return out + [linear(b * seq, d, 256)]  # the tied head
    raise SystemExit(f"compute_floor.py: unknown model {name}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bf16-gflops", type=float, required=True)
    ap.add_argument("--f32-gflops", type=float, required=True)
    ap.add_argument("--models", default="seed-cnn,cnn,mlp,transformer,gpt-tiny,gpt")
    ap.add_argument("--peer", action="append", default=[], help="MODEL:PRECISION:STEP_MS of the strongest peer")
    ap.add_argument("--ours", action="append", default=[], help="MODEL:PRECISION:STEP_MS of mixprec")
    args = ap.parse_args()
    peers = {tuple(p.split(":")[:2]): float(p.split(":")[2]) for p in args.peer}
    ours = {tuple(p.split(":")[:2]): float(p.split(":")[2]) for p in args.ours}
    print(f"| model | GFLOP per step | precision | floor ms | mixprec ms (% of floor's speed) | strongest peer ms | "
          f"most any step can beat the peer by |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        gflop = sum(2 * macs * passes for macs, passes in model_macs(name)) / 1e9
        for precision, rate in (("fp32", args.f32_gflops), ("amp-bf16", args.bf16_gflops)):
            floor = gflop / rate * 1e3
            mine = ours.get((name, precision))
            peer = peers.get((name, precision))
            print(f"| {name} | {gflop:.2f} | {precision} | {floor:.1f} | "
                  f"{f'{mine:.1f} ({100 * floor / mine:.0f}%)' if mine else '-'} | {f'{peer:.1f}' if peer else '-'} | "
                  f"{f'{peer / floor:.2f}x' if peer else '-'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
