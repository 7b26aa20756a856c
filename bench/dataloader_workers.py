#!/usr/bin/python3
"""dataloader_workers.py: what mixprec.data.DataLoader's workers buy, per kind of dataset:
num_workers=0, 2 worker threads (worker_threads=True) and 2 worker processes (the default,
as PyTorch's), side by side in one run. A benchmark, not a test: its numbers mean something
only on a quiet machine; the CPU model and the load average are printed with them.

    PYTHONPATH=build/python bench/dataloader_workers.py [--rounds 3] [--workers 2]

Datasets: a map-style dataset whose __getitem__ is pure Python (~0.3 ms a sample, holding
the GIL: what decoding or augmenting in Python costs), and Fashion-MNIST's training split as
a TensorDataset in memory (Debian's dataset-fashion-mnist), one epoch each."""
import argparse
import os
import statistics
import subprocess
import time

import numpy as np


from mixprec.data import DataLoader, fashion_mnist


class PurePython:
    """1280 samples of [3, 32, 32], each computed by a Python loop (~0.3 ms)."""

    def __len__(self):
        return 64 * 20

    def __getitem__(self, i):
        s = 0.0
        for k in range(6000):
            s += (k * i) % 7
        return np.full((3, 32, 32), s, np.float32), i


def epoch_ms(dataset, batch_size, rounds, **kw):
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in DataLoader(dataset, batch_size=batch_size, seed=1, **kw):
            pass
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def cpu_model():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "unknown")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    load_before = open("/proc/loadavg").read().split()[:3]
    w = args.workers
    settings = [("num_workers=0", {}), (f"{w} threads", dict(num_workers=w, worker_threads=True)),
                (f"{w} processes", dict(num_workers=w))]
    rows = []
    for name, ds, bs in [("pure-Python __getitem__, 1280 samples, batch 64", PurePython(), 64),
                         ("Fashion-MNIST train (TensorDataset), batch 128", fashion_mnist("train"), 128)]:
        for label, kw in settings:
            rows.append((name, label, epoch_ms(ds, bs, args.rounds, **kw)))
    load_after = open("/proc/loadavg").read().split()[:3]
    print(f"DataLoader, one epoch, median of {args.rounds}; CPU: {cpu_model()} ({os.cpu_count()} CPUs); "
          f"load average before {' '.join(load_before)}, after {' '.join(load_after)}")
    print(f"| dataset | workers | epoch ms |\n|---|---|---|")
    for name, label, ms in rows:
        print(f"| {name} | {label} | {ms:.1f} |")


if __name__ == "__main__":
    main()
