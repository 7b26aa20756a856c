#!/usr/bin/python3
"""gen_autocast_table.py: what PyTorch's CPU autocast does to each op, for
tests/unit/amp/autocast_table_test.cpp.

For every row of mixprec's autocast policy table with a PyTorch case (the torch113 column
of include/mixprec/ops/ops.def, which this script reads), runs that PyTorch call and records
the output dtype (or the error) for three input variants:

  f32       every floating input float32
  bf16      every floating input bfloat16
  bf16_f32  the data input bfloat16, the others float32 (a module's f32 parameters, or the
            second operand of a binary op); only for ops with more than one floating input

under two modes:

  bf16_autocast  torch.autocast("cpu", dtype=torch.bfloat16)
  no_autocast    outside any autocast region

torch.autocast("cpu", dtype=torch.float16) has no per-op record: PyTorch 1.13 warns that
CPU autocast supports only bfloat16, disables itself, and then raises when the region is
entered; the warning and the error are recorded once under "f16_autocast_cpu".

The C++ test runs every registered op that consults a row with its own shapes and compares
dtypes only, which the shapes do not change.

It also records the gradient of cross_entropy (mean over rows) with respect to f32 logits
for rows of 10 and 1000 classes, as float32 bit patterns, under "cross_entropy_grad". The
logits are x[i][j] = float32(((i * 7919 + j * 104729) % 2001 - 1000) / 100), computed from
integers so that C++ builds the same values without reading them from here.

Writes tests/golden/data/autocast_dtypes_torch113.json. Run with Debian's interpreter (it
has torch): /usr/bin/python3 tests/golden/gen_autocast_table.py
"""
import json
import os
import re
import struct
import warnings

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                   "autocast_dtypes_torch113.json")

NAMES = {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
         torch.float64: "f64", torch.int64: "i64"}


def rnd(*shape, positive=False):
    x = torch.rand(*shape)
    return x + 0.5 if positive else x * 2 - 1


# The cases: one per row of include/mixprec/ops/ops.def whose torch113 column is a PyTorch call
# (not "none: ..."), a Python expression over x(shape...) (uniform in [-1, 1)) and
# p(shape...) (uniform in [0.5, 1.5)): floating inputs made in the order written, the first
# being the data input. Integer targets and running statistics are not autocast inputs and
# are written as constants in the expression (targets i64, statistics f32).
OPS_DEF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "mixprec",
                       "ops.def")
ROW = re.compile(r'^MIXPREC_(?:UNARY_|BINARY_)?OP\((\w+),.*"(.*)"\)\s*$')


def read_cases(path=OPS_DEF):
    cases = {}
    with open(path) as f:
        for line in f:
            m = ROW.match(line)
            if m and not m.group(2).startswith("none:"):
                cases[m.group(1)] = m.group(2)
    return cases


class Inputs:
    """x(...) and p(...) for one evaluation: the i-th input made gets dtypes[i]."""

    def __init__(self, dtypes=None):
        self.dtypes, self.made = dtypes, 0

    def make(self, shape, positive):
        dt = self.dtypes[self.made] if self.dtypes is not None else torch.float32
        self.made += 1
        return rnd(*shape, positive=positive).to(dt)

    def env(self):
        return {"torch": torch, "F": F, "x": lambda *s: self.make(s, False), "p": lambda *s: self.make(s, True)}


def input_count(expr):
    counter = Inputs()
    eval(expr, counter.env())
    return counter.made


MODES = {
    "bf16_autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    "no_autocast": None,
}


def variants(n):
    out = {"f32": [torch.float32] * n, "bf16": [torch.bfloat16] * n}
    if n > 1:
        out["bf16_f32"] = [torch.bfloat16] + [torch.float32] * (n - 1)
    return out


def run(expr, dtypes, mode):
    torch.manual_seed(0)
    ctx = MODES[mode]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the f16 warning is recorded once, below
            if ctx is None:
                y = eval(expr, Inputs(dtypes).env())
            else:
                with ctx():
                    y = eval(expr, Inputs(dtypes).env())
        return NAMES[y.dtype]
    except RuntimeError as e:
        return "error: " + str(e).split("\n")[0]


def f16_autocast_cpu():
    # PyTorch 1.13: the constructor warns and sets enabled=False, then __enter__ still calls
    # set_autocast_cpu_dtype(float16), which raises: an f16 region cannot even be entered.
    out = {"warnings": [], "enter": "ok"}
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            with torch.autocast("cpu", dtype=torch.float16):
                out["enabled_inside_region"] = torch.is_autocast_cpu_enabled()
        except RuntimeError as e:
            out["enter"] = "error: " + str(e).split("\n")[0]
    out["warnings"] = [str(x.message) for x in w]
    return out


def ce_logits(rows, classes):
    return torch.tensor([[float(((i * 7919 + j * 104729) % 2001 - 1000) / 100) for j in range(classes)]
                         for i in range(rows)], dtype=torch.float32)


def bits(t):
    return [struct.unpack("<I", struct.pack("<f", v))[0] for v in t.flatten().tolist()]


def cross_entropy_grads():
    out = []
    for rows, classes in [(4, 10), (3, 1000)]:
        x = ce_logits(rows, classes).requires_grad_(True)
        target = torch.tensor([(7 * i + 3) % classes for i in range(rows)])
        loss = F.cross_entropy(x, target)
        loss.backward()
        out.append({"rows": rows, "classes": classes, "target": target.tolist(),
                    "loss_bits": bits(loss.detach()), "grad_bits": bits(x.grad)})
    return out


def main():
    torch.set_num_threads(1)
    ops = {}
    for name, expr in read_cases().items():
        n = input_count(expr)
        ops[name] = {mode: {v: run(expr, dts, mode) for v, dts in variants(n).items()}
                     for mode in MODES}
    golden = {
        "generator": "tests/golden/gen_autocast_table.py",
        "torch_version": torch.__version__,
        "cpu_capability": next((l.split(":")[1].strip() for l in torch.__config__.show().splitlines()
                                if "CPU capability usage" in l), "unknown"),
        "f16_autocast_cpu": f16_autocast_cpu(),
        "ops": ops,
        "cross_entropy_grad": cross_entropy_grads(),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(golden, f, indent=1, sort_keys=False)
        f.write("\n")
    with open(OUT) as f:  # round trip
        assert json.load(f)["ops"] == ops
    print("wrote", OUT)
    for name, modes in ops.items():
        print(f"{name:14s}", "  ".join(f"{m}:{modes[m]}" for m in ("bf16_autocast", "no_autocast")))


if __name__ == "__main__":
    main()
