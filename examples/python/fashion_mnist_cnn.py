"""A typical mixed-precision tutorial loop, on mixprec: the CLI's `cnn` on Fashion-MNIST with
autocast (bf16), GradScaler, unscale_ + clip_grad_norm_, a PrecisionDebugger (parameters by
dtype; the gradients that overflowed, by name, when a step is skipped), loss and scale every
100 batches.
Only the imports differ from the PyTorch 1.13 version of this script, and the PrecisionDebugger's
lines (mixprec's own tool: a PyTorch tutorial writes a helper of its own there).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/fashion_mnist_cnn.py --epochs 2
"""
import argparse
import gzip
import pathlib
import time

import numpy as np

import mixprec as torch                       # was: import torch
from mixprec import nn, optim                 # was: from torch import nn, optim
from mixprec.amp import GradScaler, autocast  # was: from torch.cuda.amp import ...
from mixprec.debug import PrecisionDebugger   # PyTorch has none: the tutorial's own helper there


def read_idx(path):
    """An IDX file (the MNIST format) as a NumPy array: a magic number whose last byte is the
    rank, one big-endian 32-bit size per dim, then the bytes."""
    data = gzip.open(path, "rb").read()
    rank = data[3]
    shape = np.frombuffer(data, dtype=">u4", count=rank, offset=4)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(shape)


def load(data_dir, split):
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(data_dir / f"{prefix}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    labels = read_idx(data_dir / f"{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
    images = (images - 0.2860) / 0.3530  # Fashion-MNIST's mean and std, as the CLI normalises
    return images[:, None, :, :], labels


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-dir", type=pathlib.Path, default=pathlib.Path("/usr/share/datasets/fashion-mnist"))
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--max-steps", type=int, default=0, help="stop each epoch after this many steps (0: all)")
    parser.add_argument("--test-limit", type=int, default=0, help="evaluate on this many test images (0: all)")
    args = parser.parse_args()

    torch.manual_seed(0)
    x_train, y_train = load(args.data_dir, "train")
    x_test, y_test = load(args.data_dir, "test")
    if args.test_limit:
        x_test, y_test = x_test[:args.test_limit], y_test[:args.test_limit]
    model = Net()
    opt = optim.Adam(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()
    scaler = GradScaler()
    debugger = PrecisionDebugger(model, scaler)
    print("parameters by dtype:", {dtype: len(names) for dtype, names in debugger.track_precision().items()})
    rng = np.random.default_rng(0)

    for epoch in range(args.epochs):
        model.train()
        order = rng.permutation(len(x_train))
        start = time.perf_counter()
        steps = len(order) // args.batch_size
        if args.max_steps:
            steps = min(steps, args.max_steps)
        for step in range(steps):
            idx = order[step * args.batch_size:(step + 1) * args.batch_size]
            images, labels = torch.from_numpy(x_train[idx]), torch.from_numpy(y_train[idx])
            opt.zero_grad(set_to_none=True)
            with autocast(device_type="cpu", dtype=torch.bfloat16):
                loss = criterion(model(images), labels)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=5.0)
            scaler.step(opt)
            scaler.update()
            overflow = debugger.detect_overflow()  # None unless the scaler skipped this step
            if overflow is not None:
                print(f"epoch {epoch} step {step:4d}  skipped: inf/NaN in {', '.join(overflow['tensors'])}, "
                      f"scale now {overflow['scale']:.0f}")
            if step % 100 == 0:
                print(f"epoch {epoch} step {step:4d}  loss {loss.item():.4f}  scale {scaler.get_scale():.0f}")
        elapsed = time.perf_counter() - start

        model.eval()
        correct = 0
        with torch.no_grad(), autocast(device_type="cpu", dtype=torch.bfloat16):
            for i in range(0, len(x_test), 1000):
                logits = model(torch.from_numpy(x_test[i:i + 1000]))
                correct += (logits.argmax(-1) == torch.from_numpy(y_test[i:i + 1000])).sum().item()
        print(f"epoch {epoch}: test accuracy {correct / len(x_test):.2%} "
              f"({steps} steps, {elapsed:.1f} s, {steps * args.batch_size / elapsed:.0f} images/s)")


if __name__ == "__main__":
    main()
