#!/usr/bin/python3
"""gen_autocast_table.py: what PyTorch's CPU autocast does to each op, for
tests/unit/amp/autocast_table_test.cpp.

For every row of mixprec's autocast policy table (src/amp/policy.cpp) and the public ops
that reach a row (mul/add by a scalar), runs the PyTorch equivalent and records the output
dtype (or the error) for three input variants:

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

The op cases (shapes, arguments) are the ones the C++ test builds; keep them in step.

It also records the gradient of cross_entropy (mean over rows) with respect to f32 logits
for rows of 10 and 1000 classes, as float32 bit patterns, under "cross_entropy_grad". The
logits are x[i][j] = float32(((i * 7919 + j * 104729) % 2001 - 1000) / 100), computed from
integers so that C++ builds the same values without reading them from here.

Writes tests/golden/data/autocast_dtypes_torch113.json. Run with Debian's interpreter (it
has torch): /usr/bin/python3 tests/golden/gen_autocast_table.py
"""
import json
import os
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


# name -> (function of the floating inputs, [(shape, positive)] of the floating inputs).
# The first floating input is the data input. Integer targets and running statistics are
# not autocast inputs and are created inside the function (targets i64, statistics f32).
TARGET4 = torch.tensor([1, 0, 3, 2])
CASES = {
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, stride=1, padding=1),
               [((2, 3, 6, 6), False), ((4, 3, 3, 3), False), ((4,), False)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [((4, 8), False), ((5, 8), False), ((5,), False)]),
    "matmul": (lambda a, b: torch.matmul(a, b), [((4, 8), False), ((8, 3), False)]),
    "bmm": (lambda a, b: torch.bmm(a, b), [((2, 4, 8), False), ((2, 8, 3), False)]),
    "softmax": (lambda x: F.softmax(x, 1), [((4, 5), False)]),
    "log_softmax": (lambda x: F.log_softmax(x, 1), [((4, 5), False)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (6,), w, b),
                   [((4, 6), False), ((6,), True), ((6,), False)]),
    "batch_norm": (lambda x, w, b: F.batch_norm(x, torch.zeros(3), torch.ones(3), w, b, True),
                   [((2, 3, 4, 4), False), ((3,), True), ((3,), False)]),
    "exp": (lambda x: torch.exp(x), [((7,), False)]),
    "log": (lambda x: torch.log(x), [((7,), True)]),
    "pow": (lambda x: torch.pow(x, 3.0), [((4, 6), False)]),
    "sum": (lambda x: torch.sum(x, 1), [((3, 4), False)]),
    "mean": (lambda x: torch.mean(x), [((3, 4), False)]),
    "mse_loss": (lambda a, b: F.mse_loss(a, b), [((4, 5), False), ((4, 5), False)]),
    "nll_loss": (lambda x: F.nll_loss(x, TARGET4), [((4, 5), False)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, TARGET4), [((4, 5), False)]),
    "add": (lambda a, b: torch.add(a, b), [((4, 5), False), ((4, 5), False)]),
    "sub": (lambda a, b: torch.sub(a, b), [((4, 5), False), ((4, 5), False)]),
    "mul": (lambda a, b: torch.mul(a, b), [((4, 5), False), ((5,), False)]),
    "div": (lambda a, b: torch.div(a, b), [((4, 5), False), ((4, 5), True)]),
    "cat": (lambda a, b: torch.cat([a, b], 0), [((2, 3), False), ((2, 3), False)]),
    "stack": (lambda a, b: torch.stack([a, b], 1), [((2, 3), False), ((2, 3), False)]),
    "relu": (lambda x: F.relu(x), [((4, 5), False)]),
    "gelu": (lambda x: F.gelu(x), [((4, 5), False)]),
    "max_pool2d": (lambda x: F.max_pool2d(x, 2), [((1, 2, 4, 4), False)]),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2), [((1, 2, 4, 4), False)]),
    "dropout": (lambda x: F.dropout(x, 0.4, True), [((5, 7), False)]),
    "reshape": (lambda x: torch.reshape(x, (5, 4)), [((4, 5), False)]),
    "flatten": (lambda x: torch.flatten(x, 1), [((2, 3, 2, 2), False)]),
    "transpose": (lambda x: torch.transpose(x, 0, 1), [((3, 4), False)]),
    "neg": (lambda x: torch.neg(x), [((4, 5), False)]),
    "embedding": (lambda w: F.embedding(torch.tensor([[4, 0], [2, 4]]), w), [((5, 3), False)]),
    # PyTorch's BLAS-style ops (mixprec's src/ops/blas.cpp).
    "mm": (lambda a, b: torch.mm(a, b), [((4, 8), False), ((8, 3), False)]),
    "mv": (lambda a, v: torch.mv(a, v), [((4, 8), False), ((8,), False)]),
    "addmm": (lambda x, a, b: torch.addmm(x, a, b, beta=0.5, alpha=2.0),
              [((4, 3), False), ((4, 8), False), ((8, 3), False)]),
    "addmv": (lambda x, a, v: torch.addmv(x, a, v, beta=0.5, alpha=2.0),
              [((4,), False), ((4, 8), False), ((8,), False)]),
    "addr": (lambda x, u, v: torch.addr(x, u, v, beta=0.5, alpha=2.0),
             [((4, 3), False), ((4,), False), ((3,), False)]),
    "baddbmm": (lambda x, a, b: torch.baddbmm(x, a, b, beta=0.5, alpha=2.0),
                [((2, 4, 3), False), ((2, 4, 8), False), ((2, 8, 3), False)]),
    "addbmm": (lambda x, a, b: torch.addbmm(x, a, b, beta=0.5, alpha=2.0),
               [((4, 3), False), ((2, 4, 8), False), ((2, 8, 3), False)]),
    "chain_matmul": (lambda a, b, c: torch.chain_matmul(a, b, c),
                     [((4, 8), False), ((8, 3), False), ((3, 5), False)]),
    "prelu": (lambda x, w: F.prelu(x, w), [((2, 3, 4), False), ((3,), True)]),
    # Public ops that reach a row: mixprec's mul(Tensor, double) / add(Tensor, double).
    "mul_scalar": (lambda x: torch.mul(x, 2.5), [((4, 5), False)]),
    "add_scalar": (lambda x: torch.add(x, 2.5), [((4, 5), False)]),
}

MODES = {
    "bf16_autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    "no_autocast": None,
}


def variants(specs):
    n = len(specs)
    out = {"f32": [torch.float32] * n, "bf16": [torch.bfloat16] * n}
    if n > 1:
        out["bf16_f32"] = [torch.bfloat16] + [torch.float32] * (n - 1)
    return out


def run(fn, specs, dtypes, mode):
    torch.manual_seed(0)
    inputs = [rnd(*shape, positive=pos).to(dt) for (shape, pos), dt in zip(specs, dtypes)]
    ctx = MODES[mode]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the f16 warning is recorded once, below
            if ctx is None:
                y = fn(*inputs)
            else:
                with ctx():
                    y = fn(*inputs)
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
    for name, (fn, specs) in CASES.items():
        ops[name] = {mode: {v: run(fn, specs, dts, mode) for v, dts in variants(specs).items()}
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
