#!/usr/bin/env python3
"""dp_model.py: a model, on paper, of data-parallel training beyond one machine (issue 16,
docs/distributed.md "Scaling to many machines").

Weak scaling: every rank keeps the per-rank batch, so its compute per step stays what it is on
one rank, and the gradient all-reduce is what is added. A ring all-reduce of S bytes over N
ranks moves 2 (N - 1) / N x S bytes in and out of every rank in 2 (N - 1) steps:

    T_allreduce = 2 (N - 1) / N x S / bandwidth + 2 (N - 1) x latency

With buckets started during backward (mixprec's default, as DDP) the reduction hides behind
the rest of backward; what stays exposed is what does not fit behind it, and at least the
reduction of the last bucket (the first layers' gradients, ready only when backward ends):

    exposed = max(T_allreduce - T_backward, T_allreduce x last_bucket_share)
    efficiency = T_step / (T_step + exposed)

Without overlap the whole T_allreduce is exposed. The inputs are this repository's measured
per-rank step and backward times (`mixprec bench --threads 1`, one core per rank) and
parameter counts; the link figures are nominal (10 GbE, 25 GbE, 100 Gb InfiniBand with
typical MPI latencies). It ignores the CPU time the reduction itself takes on the rank (on
one machine that, not the wire, is what costs: docs/benchmarks.md) and assumes every rank is
equally fast (the slowest rank sets the step). Usage: bench/dp_model.py
"""
import sys

# name: (parameters, per-rank step ms, per-rank backward ms, share of the gradient bytes in the
# last bucket) -- measured with `mixprec bench --threads 1` on AMD EPYC family 26 model 2
# (Zen5), amp-bf16, 2026-11-26; see docs/benchmarks.md.
# The last-bucket share is that of the default layout (--bucket-mb 25: a 1 MB first bucket,
# then 25 MB ones): small models put most of their gradients in the last bucket.
MODELS = {
    "seed-cnn (batch 64 per rank)": (1070794, 8.53, 4.6, 0.77),
    "gpt-tiny (8 x 128 bytes per rank)": (842496, 27.64, 17.3, 0.70),
    "gpt 6x384 (4 x 256 bytes per rank)": (10844160, 221.5, 137.5, 0.40),
}
LINKS = {  # bytes/s, seconds
    "10 GbE": (1.25e9, 25e-6),
    "25 GbE": (3.1e9, 15e-6),
    "100 Gb IB": (12.0e9, 3e-6),
}
RANKS = [8, 16, 32, 64]


def allreduce_ms(n, size_bytes, bandwidth, latency):
    return 1e3 * (2 * (n - 1) / n * size_bytes / bandwidth + 2 * (n - 1) * latency)


def efficiency(params, step_ms, backward_ms, last_share, n, wire_bytes, link, overlap=True):
    bandwidth, latency = LINKS[link]
    t = allreduce_ms(n, params * wire_bytes, bandwidth, latency)
    exposed = max(t - backward_ms, t * last_share) if overlap else t
    return step_ms / (step_ms + exposed), t


def main():
    # Cells: efficiency with buckets overlapping backward, f32 / bf16 on the wire; the last
    # column: 64 ranks, f32, everything reduced after backward (no overlap).
    print("| model | link | " + " | ".join("%d ranks" % n for n in RANKS) + " | 64 ranks, no overlap | all-reduce at 64 (f32) |")
    print("|---|---|" + "---|" * (len(RANKS) + 2))
    for name, (params, step, bwd, last) in MODELS.items():
        for link in LINKS:
            cells = []
            for n in RANKS:
                e32, _ = efficiency(params, step, bwd, last, n, 4, link)
                e16, _ = efficiency(params, step, bwd, last, n, 2, link)
                cells.append("%.0f%% / %.0f%%" % (100 * e32, 100 * e16))
            e0, t = efficiency(params, step, bwd, last, RANKS[-1], 4, link, overlap=False)
            cells.append("%.0f%%" % (100 * e0))
            cells.append("%.1f ms" % t)
            print("| %s | %s | %s |" % (name, link, " | ".join(cells)))


if __name__ == "__main__":
    sys.exit(main())
