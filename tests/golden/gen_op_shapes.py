#!/usr/bin/python3
"""gen_op_shapes.py: PyTorch 1.13's answer to good and bad operand shapes, for
tests/unit/ops/op_shapes_test.cpp.

For every case below, runs the PyTorch op on f32 operands of the given shapes (and
arguments) and records the output shape, or "error: <PyTorch's message>". The C++ test runs
mixprec's op of the same name on the same shapes and expects the same shape, or an Error
where PyTorch raises (mixprec's own message, naming the op and the shapes).

Where PyTorch runs, it also records the output values and the gradient of every input for
the loss sum(out * r), so the C++ test checks semantics (weight layouts, where
output_padding goes, beta and alpha, the x = 0 side of prelu) against PyTorch itself, not
only against mixprec's float64 references. Operand k's element i is
float32(((i * 7919 + k * 104729 + 13) % 2001 - 1000) / 1000) and r's element i is
((i * 31 + 7) % 17 - 8) / 8, computed from integers so that C++ builds the same values.
Values are float32, written with 9 significant digits (exact).

Each case: [op, [operand shapes], {keyword arguments}]. The C++ side maps op names to
calls, with the keyword arguments by name; keep the two in step.

Writes tests/golden/data/op_shapes_torch113.json. Run with Debian's interpreter (it has
torch): /usr/bin/python3 tests/golden/gen_op_shapes.py
"""
import json
import os
import warnings

import torch
import torch.nn.functional as F

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "op_shapes_torch113.json")

OPS = {
    "mm": lambda a, b: torch.mm(a, b),
    "mv": lambda a, v: torch.mv(a, v),
    "addmm": lambda x, a, b, **kw: torch.addmm(x, a, b, **kw),
    "addmv": lambda x, a, v, **kw: torch.addmv(x, a, v, **kw),
    "addr": lambda x, u, v, **kw: torch.addr(x, u, v, **kw),
    "baddbmm": lambda x, a, b, **kw: torch.baddbmm(x, a, b, **kw),
    "addbmm": lambda x, a, b, **kw: torch.addbmm(x, a, b, **kw),
    "chain_matmul": lambda *m: torch.chain_matmul(*m),
    "prelu": lambda x, w: F.prelu(x, w),
    "conv1d": lambda *xs, **kw: F.conv1d(*xs, **kw),
    "conv2d": lambda *xs, **kw: F.conv2d(*xs, **kw),
    "conv3d": lambda *xs, **kw: F.conv3d(*xs, **kw),
    "conv_transpose1d": lambda *xs, **kw: F.conv_transpose1d(*xs, **kw),
    "conv_transpose2d": lambda *xs, **kw: F.conv_transpose2d(*xs, **kw),
    "conv_transpose3d": lambda *xs, **kw: F.conv_transpose3d(*xs, **kw),
}

CASES = [
    ["mm", [[4, 8], [8, 3]], {}],
    ["mm", [[4], [4, 3]], {}],
    ["mm", [[4, 8], [7, 3]], {}],
    ["mm", [[2, 4, 8], [8, 3]], {}],
    ["mv", [[4, 8], [8]], {}],
    ["mv", [[4, 8], [7]], {}],
    ["mv", [[4, 8], [8, 1]], {}],
    ["mv", [[8], [8]], {}],
    ["addmm", [[4, 3], [4, 8], [8, 3]], {}],
    ["addmm", [[3], [4, 8], [8, 3]], {"beta": 0.5, "alpha": 2.0}],
    ["addmm", [[1], [4, 8], [8, 3]], {}],
    ["addmm", [[], [4, 8], [8, 3]], {}],
    ["addmm", [[4, 1], [4, 8], [8, 3]], {}],
    ["addmm", [[5, 3], [4, 8], [8, 3]], {}],
    ["addmm", [[4], [4, 8], [8, 3]], {}],
    ["addmm", [[2, 4, 3], [4, 8], [8, 3]], {}],
    ["addmm", [[4, 3], [4, 8], [7, 3]], {}],
    ["addmm", [[4, 3], [8], [8, 3]], {}],
    ["addmv", [[4], [4, 8], [8]], {}],
    ["addmv", [[1], [4, 8], [8]], {"beta": 0.0}],
    ["addmv", [[5], [4, 8], [8]], {}],
    ["addmv", [[4, 1], [4, 8], [8]], {}],
    ["addmv", [[4], [4, 8], [7]], {}],
    ["addr", [[4, 3], [4], [3]], {}],
    ["addr", [[3], [4], [3]], {}],
    ["addr", [[5, 3], [4], [3]], {}],
    ["addr", [[4, 3], [4, 1], [3]], {}],
    ["baddbmm", [[2, 4, 3], [2, 4, 8], [2, 8, 3]], {}],
    ["baddbmm", [[4, 3], [2, 4, 8], [2, 8, 3]], {"beta": 2.0}],
    ["baddbmm", [[3, 4, 3], [2, 4, 8], [2, 8, 3]], {}],
    ["baddbmm", [[2, 4, 3], [2, 4, 8], [3, 8, 3]], {}],
    ["baddbmm", [[2, 4, 3], [2, 4, 8], [2, 7, 3]], {}],
    ["baddbmm", [[4, 3], [4, 8], [8, 3]], {}],
    ["addbmm", [[4, 3], [2, 4, 8], [2, 8, 3]], {}],
    ["addbmm", [[3], [2, 4, 8], [2, 8, 3]], {}],
    ["addbmm", [[5, 3], [2, 4, 8], [2, 8, 3]], {}],
    ["addbmm", [[4, 3], [2, 4, 8], [3, 8, 3]], {}],
    ["addbmm", [[4, 3], [2, 4, 8], [2, 7, 3]], {}],
    ["chain_matmul", [[4, 8]], {}],
    ["chain_matmul", [[4, 8], [8, 3]], {}],
    ["chain_matmul", [[4, 8], [8, 3], [3, 5], [5, 2]], {}],
    ["chain_matmul", [[4, 8], [7, 3]], {}],
    ["chain_matmul", [[4, 8], [8]], {}],
    ["chain_matmul", [], {}],
    ["prelu", [[2, 3, 4], [3]], {}],
    ["prelu", [[2, 3, 4], [1]], {}],
    ["prelu", [[2, 3, 4], []], {}],
    ["prelu", [[2, 3, 4, 5], [3]], {}],
    ["prelu", [[2, 3, 4, 5, 6], [3]], {}],
    ["prelu", [[4, 3], [3]], {}],
    ["prelu", [[5], [1]], {}],
    ["prelu", [[], [1]], {}],
    ["prelu", [[2, 3, 4], [4]], {}],
    ["prelu", [[2, 3, 4], [3, 1]], {}],
    ["prelu", [[5], [5]], {}],
    # Convolutions; the groups and dilation cases follow each op's plain ones.
    ["conv1d", [[2, 3, 8], [4, 3, 3]], {}],
    ["conv1d", [[2, 3, 8], [4, 3, 3], [4]], {"stride": 2, "padding": 1}],
    ["conv1d", [[3, 8], [4, 3, 3], [4]], {"padding": 2}],
    ["conv1d", [[2, 3, 8], [4, 3, 8]], {}],
    ["conv1d", [[2, 3, 8], [4, 3, 9]], {}],
    ["conv1d", [[2, 5, 8], [4, 3, 3]], {}],
    ["conv1d", [[2, 3, 8], [4, 3, 3], [5]], {}],
    ["conv1d", [[2, 3, 8], [4, 3, 3, 3]], {}],
    ["conv1d", [[2, 3, 4, 8], [4, 3, 3]], {}],
    ["conv1d", [[2, 3, 8], [4, 3, 3]], {"stride": 0}],
    ["conv1d", [[2, 3, 8], [4, 3, 3]], {"padding": -1}],
    ["conv1d", [[2, 4, 8], [6, 2, 3], [6]], {"groups": 2}],
    ["conv1d", [[2, 6, 10], [6, 2, 3]], {"groups": 3, "dilation": 2, "padding": 1, "stride": 2}],
    ["conv1d", [[4, 8], [4, 1, 3]], {"groups": 4, "dilation": 3}],
    ["conv1d", [[2, 4, 8], [6, 3, 3]], {"groups": 2}],
    ["conv1d", [[2, 4, 8], [5, 2, 3]], {"groups": 2}],
    ["conv1d", [[2, 3, 8], [4, 3, 3]], {"dilation": 0}],
    ["conv1d", [[2, 3, 8], [4, 3, 3]], {"dilation": 4}],
    ["conv1d", [[2, 3, 8], [4, 3, 3]], {"groups": 0}],
    ["conv2d", [[2, 3, 6, 6], [4, 3, 3, 3], [4]], {"stride": 2, "padding": 1}],
    ["conv2d", [[2, 4, 6, 6], [4, 1, 3, 3], [4]], {"padding": 1, "groups": 4}],
    ["conv2d", [[2, 3, 7, 7], [4, 3, 3, 3]], {"dilation": 2, "padding": 2}],
    ["conv2d", [[1, 2, 9, 8], [3, 2, 3, 2], [3]], {"stride": 2, "dilation": 3, "padding": 1}],
    ["conv2d", [[2, 4, 6, 6], [6, 2, 3, 3]], {"groups": 2, "dilation": 2, "padding": 1}],
    ["conv2d", [[2, 3, 6, 6], [4, 1, 3, 3]], {"groups": 2}],
    ["conv2d", [[2, 4, 6, 6], [3, 2, 3, 3]], {"groups": 2}],
    ["conv2d", [[2, 3, 6, 6], [4, 3, 3, 3]], {"dilation": 0}],
    ["conv2d", [[2, 3, 6, 6], [4, 3, 3, 3]], {"groups": 0}],
    ["conv2d", [[2, 3, 4, 4], [4, 3, 3, 3]], {"dilation": 2}],
    ["conv3d", [[2, 3, 4, 5, 5], [4, 3, 2, 3, 3], [4]], {}],
    ["conv3d", [[2, 2, 5, 4, 6], [3, 2, 3, 2, 3], [3]], {"stride": 2, "padding": 1}],
    ["conv3d", [[2, 4, 4, 4], [3, 2, 2, 2, 2]], {"padding": 1}],
    ["conv3d", [[2, 3, 4, 5, 5], [4, 2, 2, 3, 3]], {}],
    ["conv3d", [[2, 3, 1, 5, 5], [4, 3, 2, 3, 3]], {}],
    ["conv3d", [[2, 3, 4, 5, 5], [4, 3, 3, 3]], {}],
    ["conv3d", [[2, 2, 6, 5, 5], [3, 2, 2, 2, 2], [3]], {"dilation": 2, "padding": 1}],
    ["conv3d", [[2, 4, 4, 4, 4], [4, 2, 2, 3, 3]], {"groups": 2, "stride": 2, "padding": 1}],
    ["conv3d", [[1, 4, 5, 5, 5], [4, 1, 2, 2, 2], [4]], {"groups": 4, "dilation": 2}],
    ["conv3d", [[2, 4, 4, 4, 4], [4, 1, 2, 2, 2]], {"groups": 2}],
    ["conv3d", [[2, 2, 3, 5, 5], [3, 2, 2, 3, 3]], {"dilation": 3}],
    ["conv_transpose1d", [[2, 3, 5], [3, 4, 3]], {}],
    ["conv_transpose1d", [[2, 3, 5], [3, 4, 3], [4]], {"stride": 2, "padding": 1, "output_padding": 1}],
    ["conv_transpose1d", [[3, 5], [3, 4, 3]], {"stride": 3}],
    ["conv_transpose1d", [[2, 5, 5], [3, 4, 3]], {}],
    ["conv_transpose1d", [[2, 3, 5], [3, 4, 3], [3]], {}],
    ["conv_transpose1d", [[2, 3, 5], [3, 4, 3]], {"stride": 2, "output_padding": 2}],
    ["conv_transpose1d", [[2, 3, 1], [3, 4, 3]], {"padding": 2}],
    ["conv_transpose1d", [[2, 4, 5], [4, 3, 3], [6]], {"groups": 2, "stride": 2}],
    ["conv_transpose1d", [[2, 3, 5], [3, 2, 3]], {"dilation": 3, "output_padding": 2}],
    ["conv_transpose1d", [[2, 3, 5], [3, 2, 3]], {"stride": 2, "dilation": 2, "output_padding": 2}],
    ["conv_transpose1d", [[2, 3, 5], [3, 2, 3]], {"groups": 2}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 4, 3, 3]], {}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 4, 3, 3], [4]], {"stride": 2, "padding": 1, "output_padding": 1}],
    ["conv_transpose2d", [[2, 3, 4, 5], [3, 2, 2, 3]], {"stride": 3}],
    ["conv_transpose2d", [[3, 4, 4], [3, 4, 3, 3], [4]], {"stride": 2}],
    ["conv_transpose2d", [[2, 4, 4, 4], [3, 4, 3, 3]], {}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 4, 3, 3], [3]], {}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 4, 3]], {}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 4, 3, 3]], {"stride": 2, "output_padding": 2}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 4, 3, 3]], {"output_padding": 1}],
    ["conv_transpose2d", [[2, 3, 1, 1], [3, 4, 3, 3]], {"padding": 2}],
    ["conv_transpose2d", [[2, 4, 4, 4], [4, 2, 3, 3], [4]],
     {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2, "dilation": 2}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 1, 3, 3]], {"groups": 3}],
    ["conv_transpose2d", [[1, 2, 3, 4], [2, 2, 2, 3]], {"dilation": 3, "output_padding": 2}],
    ["conv_transpose2d", [[2, 4, 4, 4], [4, 2, 3, 3]], {"groups": 3}],
    ["conv_transpose2d", [[2, 4, 4, 4], [4, 2, 3, 3]], {"groups": 2}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 4, 3, 3]], {"stride": 2, "dilation": 2, "output_padding": 2}],
    ["conv_transpose2d", [[2, 3, 4, 4], [3, 4, 3, 3]], {"dilation": 0}],
    ["conv_transpose3d", [[2, 3, 2, 3, 3], [3, 4, 2, 2, 2]], {}],
    ["conv_transpose3d", [[2, 3, 3, 2, 4], [3, 2, 3, 2, 3], [2]], {"stride": 2, "padding": 1, "output_padding": 1}],
    ["conv_transpose3d", [[3, 2, 2, 2], [3, 2, 2, 2, 2]], {"stride": 3}],
    ["conv_transpose3d", [[1, 4, 3, 2, 2], [4, 1, 2, 2, 2], [2]], {"groups": 2, "dilation": 3, "output_padding": 2}],
    ["conv_transpose3d", [[2, 4, 2, 3, 3], [4, 2, 2, 2, 2]], {"groups": 2, "stride": 2, "dilation": 2, "padding": 1}],
    ["conv_transpose3d", [[2, 4, 2, 3, 3], [3, 2, 2, 2, 2]], {}],
    ["conv_transpose3d", [[2, 3, 2, 3, 3], [3, 2, 2, 2, 2], [3]], {}],
    ["conv_transpose3d", [[2, 3, 2, 3, 3], [3, 2, 2, 2]], {}],
    ["conv_transpose3d", [[2, 3, 2, 3, 3], [3, 2, 2, 2, 2]], {"stride": 2, "output_padding": 2}],
    ["conv_transpose3d", [[2, 4, 2, 3, 3], [4, 2, 2, 2, 2]], {"groups": 3}],
    ["conv_transpose3d", [[2, 3, 1, 1, 1], [3, 2, 2, 2, 2]], {"padding": 2}],
]


def operand(k, shape):
    n = 1
    for s in shape:
        n *= s
    v = [((i * 7919 + k * 104729 + 13) % 2001 - 1000) / 1000 for i in range(n)]
    return torch.tensor(v, dtype=torch.float32).reshape(shape).requires_grad_()


def loss_weights(n):
    return torch.tensor([((i * 31 + 7) % 17 - 8) / 8 for i in range(n)], dtype=torch.float32)


def f32s(t):
    return [float(f"{v:.9g}") for v in t.detach().flatten().tolist()]


def run(op, shapes, kwargs):
    """(output shape, values) or ("error: ...", None)."""
    xs = [operand(k, s) for k, s in enumerate(shapes)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # chain_matmul's deprecation
            y = OPS[op](*xs, **kwargs)
    except (RuntimeError, IndexError) as e:
        return "error: " + str(e).split("\n")[0], None
    (y.flatten() * loss_weights(y.numel())).sum().backward()
    grads = [f32s(x.grad) if x.grad is not None else None for x in xs]
    return list(y.shape), {"out": f32s(y), "grads": grads}


def main():
    torch.set_num_threads(1)
    cases = []
    for op, shapes, kw in CASES:
        result, values = run(op, shapes, kw)
        case = {"op": op, "shapes": shapes, "kwargs": kw, "torch": result}
        if values is not None:
            case["values"] = values
        cases.append(case)
    golden = {"generator": "tests/golden/gen_op_shapes.py", "torch_version": torch.__version__, "cases": cases}
    with open(OUT, "w") as f:
        json.dump(golden, f, separators=(",", ":"))  # one line: ~6700 numbers
        f.write("\n")
    for c in cases:
        print(c["op"], c["shapes"], c["kwargs"], "->", c["torch"])


if __name__ == "__main__":
    main()
