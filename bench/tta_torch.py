#!/usr/bin/python3
"""tta_torch.py: the PyTorch peer of bench/time_to_accuracy.sh: the cnn trained on
Fashion-MNIST with mixprec's recipe and mixprec's data order, evaluated every N steps, until
test accuracy reaches the target. Prints one RESULT line per evaluation.

  tta_torch.py --order ORDER.bin --mean M --std S [--precision fp32|amp-bf16] [--epochs 10]
      [--batch 256] [--lr 2e-3] [--weight-decay 0.05] [--warmup 100] [--eval-every 235]
      [--target 0.92] [--threads 2] [--data /usr/share/datasets/fashion-mnist]

Same as mixprec's run: the model (include/mixprec/nn/models.h: Cnn), AdamW (PyTorch's, decoupled
weight decay, betas 0.9/0.999, eps 1e-8), the learning rate of step k (1-based) as
src/train/lr_schedule.cpp computes it (linear warm-up lr * k / W, then cosine to 0), batch
256 with the last partial batch kept, inputs (pixel / 255 - mean) / std with mixprec's
recorded mean and std, the sample order of every epoch from bench/data_order (ORDER.bin:
epochs x 60000 int64). The weights' initial values differ (PyTorch's generator). PyTorch in
its fastest setting found: channels_last tensors (oneDNN convolutions without reorders) and
the foreach AdamW.
Training time excludes evaluation, as time_to_accuracy.sh counts mixprec's.
"""
import argparse
import gzip
import math
import os
import struct
import sys
import time

from peer_check import check_in_child, describe, native_openblas, openblas_info


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    dims = [struct.unpack(">I", data[4 + 4 * i:8 + 4 * i])[0] for i in range(magic & 0xFF)]
    return data[4 + 4 * len(dims):], dims


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--order", required=True)
    ap.add_argument("--mean", type=float, required=True)
    ap.add_argument("--std", type=float, required=True)
    ap.add_argument("--precision", default="amp-bf16", choices=["fp32", "amp-bf16"])
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.05)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--eval-every", type=int, default=235)
    ap.add_argument("--target", type=float, default=0.92)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--memory-format", default="channels_last", choices=["channels_last", "contiguous"],
                    help="channels_last: 1.2-1.45x faster steps for this cnn with torch 1.13 on Zen5")
    args = ap.parse_args()
    native_openblas()  # OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed (bench/peer_python), before torch loads
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    check_in_child("cnn", args.threads, args.batch, who="tta_torch")  # its GEMMs against float64
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch_models import make  # bench/torch_models.py: the cnn, shared with torch_step.py
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    def images(name):
        raw, dims = read_idx(os.path.join(args.data, name))
        x = np.frombuffer(raw, dtype=np.uint8).reshape(dims[0], 1, dims[1], dims[2]).astype(np.float32) / 255.0
        return torch.from_numpy((x - args.mean) / args.std)

    def labels(name):
        raw, dims = read_idx(os.path.join(args.data, name))
        return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8).astype(np.int64))

    xtr, ytr = images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz")
    xte, yte = images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz")
    n = xtr.shape[0]
    order = np.fromfile(args.order, dtype="<i8")
    if order.size < args.epochs * n:
        sys.exit(f"tta_torch: {args.order} holds {order.size // n} epochs of order, need {args.epochs}")
    order = torch.from_numpy(order[: args.epochs * n].reshape(args.epochs, n).copy())

    model, _ = make("cnn")
    channels_last = args.memory_format == "channels_last"
    if channels_last:  # oneDNN's convolutions without layout conversions
        model = model.to(memory_format=torch.channels_last)
        xtr = xtr.contiguous(memory_format=torch.channels_last)
        xte = xte.contiguous(memory_format=torch.channels_last)
    # foreach: the multi-tensor update (no slower here, and the faster one for larger models).
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=args.weight_decay, foreach=True)
    steps_per_epoch = (n + args.batch - 1) // args.batch
    total = steps_per_epoch * args.epochs
    amp = args.precision == "amp-bf16"

    def lr_at(step):  # src/train/lr_schedule.cpp, cosine to min_lr 0
        if args.warmup > 0 and step <= args.warmup:
            return args.lr * step / args.warmup
        span = total - args.warmup - 1
        p = 1.0 if span <= 0 else min(max((step - args.warmup - 1) / span, 0.0), 1.0)
        return 0.5 * args.lr * (1.0 + math.cos(math.pi * p))

    def evaluate():
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            for i in range(0, xte.shape[0], args.batch):
                correct += (model(xte[i:i + args.batch]).argmax(1) == yte[i:i + args.batch]).sum().item()
        model.train()
        return correct / xte.shape[0]

    print(f"tta_torch: torch {torch.__version__}, {torch.get_num_threads()} threads, {args.precision}, {args.memory_format}, "
          f"{total} steps of batch {args.batch}, eval every {args.eval_every}")
    print(f"tta_torch: {describe(openblas_info(torch))}")
    step, train_seconds = 0, 0.0
    for epoch in range(args.epochs):
        perm = order[epoch]
        for b in range(steps_per_epoch):
            idx = perm[b * args.batch:(b + 1) * args.batch]
            t0 = time.perf_counter()
            x, y = xtr[idx], ytr[idx]
            step += 1
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            train_seconds += time.perf_counter() - t0
            if step % args.eval_every == 0 or step == total:
                acc = evaluate()
                print(f"RESULT impl=torch precision={args.precision} step={step} epoch={epoch + 1} "
                      f"accuracy={acc:.4f} train_seconds={train_seconds:.3f} loss={loss.item():.4f}", flush=True)
                if acc >= args.target:
                    return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
