#!/usr/bin/env python3
"""compute_floor.py: the least time a training step of a built-in model can take on a machine,
from its arithmetic alone: the multiply-adds of its convolutions, linear layers and attention
matmuls (forward, input gradient except for the first layer, weight gradient) at the
machine's best GEMM rate, with every other pass free. A speed target against a peer that
needs a step shorter than this floor cannot be met by any implementation on that machine.

    bench/compute_floor.py --bf16-gflops 1012 --f32-gflops 504 \\
        [--peer seed-cnn:amp-bf16:29.8 --peer transformer:fp32:104.1 ...] [--target 3]
    bench/compute_floor.py --bf16-gflops 444 --f32-gflops 222 --models gpt --batch 4 --context 1024 --causal

The GEMM rates are bench_gemm's "best median" line of the same session
(OMP_NUM_THREADS=2 build-dev/bench/bench_gemm); peer step times are bench/run_benchmarks.sh's
strongest-PyTorch medians. Batch sizes are the benchmark defaults (bench_step,
bench/torch_step.py) unless --batch says otherwise; --context sets the language models'
sequence length (bench/gpt_context.sh), and --causal counts only the attention work a causal
kernel has to do: the T(T+1)/2 query-key pairs at or below the diagonal, not all T^2."""
import argparse


def conv(batch, cin, cout, h, w, k, first=False):
    """multiply-adds of one pass, and how many passes training runs (no input gradient for the
    first layer)."""
    return batch * cout * h * w * cin * k * k, 2 if first else 3


def linear(rows, fin, fout, first=False):
    return rows * fin * fout, 2 if first else 3


def attention_pairs(seq, causal):
    """Query-key pairs whose score and weighted value a step must compute: all seq^2, or under
    a causal mask only those at or below the diagonal (what a kernel that skips masked work
    does; PyTorch 1.13 computes all of them, so the causal floor is the stricter yardstick)."""
    return seq * (seq + 1) // 2 if causal else seq * seq


def encoder_layer(batch, seq, d, ffn, causal=False):
    tokens = batch * seq
    layers = [linear(tokens, d, 3 * d), linear(tokens, d, d), linear(tokens, d, ffn), linear(tokens, ffn, d)]
    # QK^T and PV per head: head_dim multiply-adds per query-key pair; all heads together d.
    attention = batch * attention_pairs(seq, causal) * d
    layers += [(attention, 3), (attention, 3)]
    return layers


LANGUAGE_MODELS = ("gpt-tiny", "gpt")


def model_macs(name, batch=0, context=0, causal=False):
    """[(multiply-adds per pass, passes)] of one training step at the benchmark batch (or
    `batch`); `context` and `causal` apply to the language models only."""
    if (context or causal) and name not in LANGUAGE_MODELS:
        raise SystemExit(f"compute_floor.py: --context and --causal apply to {', '.join(LANGUAGE_MODELS)}, not {name}")
    if name in ("seed-cnn", "cnn"):
        b, c, s = (batch or 256, 3, 32) if name == "seed-cnn" else (batch or 256, 1, 28)
        return [conv(b, c, 32, s, s, 3, first=True), conv(b, 32, 64, s // 2, s // 2, 3),
                linear(b, 64 * (s // 4) ** 2, 256), linear(b, 256, 10)]
    if name == "mlp":
        b = batch or 512
        return [linear(b, 784, 4096, first=True), linear(b, 4096, 4096), linear(b, 4096, 10)]
    if name == "transformer":  # 128 tokens of 256 features, one encoder layer (4 heads, ffn 1024)
        b = batch or 32
        return encoder_layer(b, 128, 256, 1024) + [linear(b, 256, 10)]
    if name in LANGUAGE_MODELS:
        seq, layers, d = (128, 4, 128) if name == "gpt-tiny" else (256, 6, 384)
        b, seq = batch or 16, context or seq
        out = []
        for _ in range(layers):
            out += encoder_layer(b, seq, d, 4 * d, causal)
        return out + [linear(b * seq, d, 256)]  # the tied head
    raise SystemExit(f"compute_floor.py: unknown model {name}")


def step_gflop(name, batch=0, context=0, causal=False):
    """GEMM arithmetic of one training step, in GFLOP (2 per multiply-add)."""
    return sum(2 * macs * passes for macs, passes in model_macs(name, batch, context, causal)) / 1e9


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bf16-gflops", type=float, required=True)
    ap.add_argument("--f32-gflops", type=float, required=True)
    ap.add_argument("--models", default="seed-cnn,cnn,mlp,transformer,gpt-tiny,gpt")
    ap.add_argument("--peer", action="append", default=[], help="MODEL:PRECISION:STEP_MS of the strongest peer")
    ap.add_argument("--ours", action="append", default=[], help="MODEL:PRECISION:STEP_MS of mixprec")
    ap.add_argument("--batch", type=positive_int, default=0, help="batch size (default: each model's benchmark batch)")
    ap.add_argument("--context", type=positive_int, default=0,
                    help="sequence length of gpt-tiny and gpt (default: theirs, 128 and 256)")
    ap.add_argument("--causal", action="store_true",
                    help="count only the causal mask's T(T+1)/2 attention pairs (gpt-tiny, gpt)")
    args = ap.parse_args()
    peers = {tuple(p.split(":")[:2]): float(p.split(":")[2]) for p in args.peer}
    ours = {tuple(p.split(":")[:2]): float(p.split(":")[2]) for p in args.ours}
    # Every model's arithmetic first: a bad --models/--context combination fails before any row.
    gflops = {name: step_gflop(name, args.batch, args.context, args.causal) for name in args.models.split(",")}
    shape = ", ".join(([f"batch {args.batch}"] if args.batch else []) + ([f"context {args.context}"] if args.context else [])
                      + (["causal"] if args.causal else []))
    print(f"| model | GFLOP per step | precision | floor ms | mixprec ms (% of floor's speed) | strongest peer ms | "
          f"most any step can beat the peer by |")
    print("|---|---|---|---|---|---|---|")
    for name, gflop in gflops.items():
        label = f"{name} ({shape})" if shape else name
        for precision, rate in (("fp32", args.f32_gflops), ("amp-bf16", args.bf16_gflops)):
            floor = gflop / rate * 1e3
            mine = ours.get((name, precision))
            peer = peers.get((name, precision))
            print(f"| {label} | {gflop:.2f} | {precision} | {floor:.1f} | "
                  f"{f'{mine:.1f} ({100 * floor / mine:.0f}%)' if mine else '-'} | {f'{peer:.1f}' if peer else '-'} | "
                  f"{f'{peer / floor:.2f}x' if peer else '-'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
