#!/usr/bin/env python3
"""long_context_torch.py: the PyTorch side of bench/long_context.sh (issue 15, target 5): the
same 2-layer encoder (byte embedding + learned positions, 2 x nn.TransformerEncoderLayer(128,
4 heads, ffn 512, no dropout, GELU, post-norm, batch_first), mean over positions, linear head
of 10), trained with Adam under autocast bf16 (or fp32), one sequence length per process.
Prints `RESULT length=T step_ms=M rss_growth_mib=R`: the median step over --steps after a
warm-up, and how far the process's peak resident memory rose during the steps above what it
held before them (PyTorch 1.13 on CPU has no memory-efficient attention: its [S, S] scores and
probabilities per head are stored for backward).

  /usr/bin/python3 bench/long_context_torch.py --length 1024 [--batch-size 4] [--steps 3]
      [--precision amp-bf16|fp32] [--threads 2]
"""
import argparse
import os
import resource
import statistics
import sys
import time

from peer_check import check_in_child, describe, native_openblas, openblas_info, rss_mib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--length", type=int, required=True)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--precision", default="amp-bf16", choices=["amp-bf16", "fp32"])
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    native_openblas()  # OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed (bench/peer_python), before torch loads
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    # The GEMMs of this model (2 layers, 128 wide, 4 heads, ffn 512, head 10) against float64,
    # in a child: the check's buffers must not count in this process's peak memory.
    check_in_child(f"encoder:{a.batch_size}:{a.length}:128:4:512:10", a.threads, who="long_context_torch")
    import torch
    import torch.nn as nn
    torch.set_num_threads(a.threads)
    print(f"long_context_torch: {describe(openblas_info(torch))}", file=sys.stderr)
    torch.manual_seed(0)
    T, E = a.length, 128

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(256, E)
            self.positions = nn.Embedding(T, E)
            self.layers = nn.Sequential(*[nn.TransformerEncoderLayer(E, 4, 512, dropout=0.0, activation="gelu",
                                                                     batch_first=True) for _ in range(2)])
            self.head = nn.Linear(E, 10)

        def forward(self, ids):
            x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
            return self.head(self.layers(x).mean(dim=1))

    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    ids = torch.randint(1, 256, (a.batch_size, T))
    labels = torch.randint(0, 10, (a.batch_size,))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.precision == "amp-bf16"):
            loss = nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        opt.step()

    before = rss_mib()
    step()  # warm-up (its peak counts: the steps after it need the same memory)
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(1e3 * (time.perf_counter() - t0))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("RESULT length=%d step_ms=%.2f rss_growth_mib=%.1f" % (T, statistics.median(times), peak - before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
