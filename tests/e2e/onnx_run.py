#!/usr/bin/python3
"""onnx_run.py: runs an ONNX file mixprec exported, outside mixprec, and compares its outputs.

  onnx_run.py MODEL.onnx INPUT.npy --runtime opencv|numpy [--expected EXPECTED.npy]
              [--output logits|probabilities] [--rtol R] [--atol A] [--save OUT.npy]

First onnx's own checker (onnx.checker.check_model, full check) and a reload. Then one of two
runtimes that share no code with mixprec:
  opencv  OpenCV's dnn module (Debian python3-opencv 4.6) reads the file and runs it. It only
          reads f32 ONNX (no FLOAT16/BFLOAT16 tensors) and, in 4.6, not LayerNormalization or
          a Gather on a runtime input: the convolutional and MLP models.
  numpy   a reference interpreter below, written from the ONNX operator specification for the
          ops mixprec emits, computing each op in the dtype the graph gives it (numpy float16
          for an fp16 graph, so f16 rounding happens where the graph says).
Exit 0 when the chosen output matches EXPECTED within rtol/atol (|a - e| <= atol + rtol |e|),
1 with the worst element named otherwise, 2 on a usage error.
"""
import argparse
import math
import sys

import numpy as np
import onnx
from onnx import numpy_helper

ERF = np.vectorize(math.erf, otypes=[np.float64])


def tensor_value(t):
    if t.data_type == onnx.TensorProto.BFLOAT16:  # numpy has no bfloat16: widen the bits
        bits = np.frombuffer(t.raw_data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(tuple(t.dims)).astype(np.float32)
    return numpy_helper.to_array(t)


NP_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
            onnx.TensorProto.INT64: np.int64, onnx.TensorProto.DOUBLE: np.float64,
            onnx.TensorProto.BOOL: np.bool_}


def attrs_of(node):
    out = {}
    for a in node.attribute:
        out[a.name] = onnx.helper.get_attribute_value(a)
    return out


def conv2d(x, w, b, strides, pads, dilations=(1, 1), group=1):
    """ONNX Conv: w [O, C / group, kh, kw]; output channel o reads its group's input channels."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    og = o // group
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    acc = np.zeros((n, o, oh, ow), dtype=np.float64)
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                r, q = i * dilations[0], j * dilations[1]
                patch = xs[:, :, r:r + strides[0] * oh:strides[0], q:q + strides[1] * ow:strides[1]].astype(np.float64)
                acc[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch,
                                                         w[g * og:(g + 1) * og, :, i, j].astype(np.float64))
    if b is not None:
        acc += b.astype(np.float64)[None, :, None, None]
    return acc.astype(x.dtype)


def conv_transpose2d(x, w, b, strides, pads, output_padding, dilations=(1, 1), group=1):
    """ONNX ConvTranspose: each input pixel of channel c scatters w[c] [O / group, kh, kw] over
    its group's output channels, taps dilations apart."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // group
    full_h = (h - 1) * strides[0] + dilations[0] * (kh - 1) + 1 + output_padding[0]
    full_w = (wd - 1) * strides[1] + dilations[1] * (kw - 1) + 1 + output_padding[1]
    acc = np.zeros((n, og * group, full_h, full_w), dtype=np.float64)
    xd = x.astype(np.float64)
    for g in range(group):
        for i in range(kh):
            for j in range(kw):
                r, q = i * dilations[0], j * dilations[1]
                contrib = np.einsum("nchw,co->nohw", xd[:, g * cg:(g + 1) * cg],
                                    w[g * cg:(g + 1) * cg, :, i, j].astype(np.float64))
                acc[:, g * og:(g + 1) * og, r:r + strides[0] * h:strides[0], q:q + strides[1] * wd:strides[1]] += contrib
    acc = acc[:, :, pads[0]:full_h - pads[2], pads[1]:full_w - pads[3]]
    if b is not None:
        acc += b.astype(np.float64)[None, :, None, None]
    return acc.astype(x.dtype)


def max_pool(x, k, strides, pads):
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=-np.inf)
    oh = (x.shape[2] + pads[0] + pads[2] - k[0]) // strides[0] + 1
    ow = (x.shape[3] + pads[1] + pads[3] - k[1]) // strides[1] + 1
    out = np.full(x.shape[:2] + (oh, ow), -np.inf, dtype=x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            out = np.maximum(out, xp[:, :, i:i + strides[0] * oh:strides[0], j:j + strides[1] * ow:strides[1]])
    return out


def rounded(values, like):
    """A float64 result rounded once to the dtype of the op's inputs (what a runtime returns)."""
    return np.asarray(values).astype(like.dtype)


def run_numpy(model, feeds):
    env = {init.name: tensor_value(init) for init in model.graph.initializer}
    env.update(feeds)
    for node in model.graph.node:
        a = attrs_of(node)
        x = [env[i] if i else None for i in node.input]
        op = node.op_type
        if op == "Cast":
            y = x[0].astype(NP_TYPES[a["to"]])
        elif op in ("Add", "Sub", "Mul", "Div"):
            f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
            y = rounded(f(x[0].astype(np.float64), x[1].astype(np.float64)), x[0])
        elif op == "Relu":
            y = np.maximum(x[0], 0).astype(x[0].dtype)
        elif op == "Erf":
            y = rounded(ERF(x[0].astype(np.float64)), x[0])
        elif op == "Identity":
            y = x[0]
        elif op == "Conv" and x[0].ndim == 3:  # 1-D: a conv2d of unit height
            p = a.get("pads", [0, 0])
            y = conv2d(x[0][:, :, None, :], x[1][:, :, None, :], x[2] if len(x) > 2 else None,
                       [1] + a.get("strides", [1]), [0, p[0], 0, p[1]], [1] + a.get("dilations", [1]),
                       a.get("group", 1))[:, :, 0, :]
        elif op == "Conv":
            y = conv2d(x[0], x[1], x[2] if len(x) > 2 else None, a.get("strides", [1, 1]), a.get("pads", [0, 0, 0, 0]),
                       a.get("dilations", [1, 1]), a.get("group", 1))
        elif op == "ConvTranspose":
            assert "output_shape" not in a
            y = conv_transpose2d(x[0], x[1], x[2] if len(x) > 2 else None, a.get("strides", [1, 1]),
                                 a.get("pads", [0, 0, 0, 0]), a.get("output_padding", [0, 0]),
                                 a.get("dilations", [1, 1]), a.get("group", 1))
        elif op == "PRelu":
            y = rounded(np.where(x[0] > 0, x[0].astype(np.float64), x[0].astype(np.float64) * x[1].astype(np.float64)),
                        x[0])
        elif op == "MaxPool":
            assert a.get("ceil_mode", 0) == 0
            y = max_pool(x[0], a["kernel_shape"], a.get("strides", [1, 1]), a.get("pads", [0, 0, 0, 0]))
        elif op == "GlobalAveragePool":
            y = rounded(x[0].astype(np.float64).mean(axis=(2, 3), keepdims=True), x[0])
        elif op == "Flatten":
            axis = a.get("axis", 1)
            y = x[0].reshape(int(np.prod(x[0].shape[:axis])), -1)
        elif op == "Gemm":
            xa = x[0].astype(np.float64)
            wb = x[1].astype(np.float64)
            if a.get("transA", 0):
                xa = xa.T
            if a.get("transB", 0):
                wb = wb.T
            acc = a.get("alpha", 1.0) * (xa @ wb)
            if len(x) > 2 and x[2] is not None:
                acc = acc + a.get("beta", 1.0) * x[2].astype(np.float64)
            y = rounded(acc, x[0])
        elif op == "MatMul":
            y = rounded(np.matmul(x[0].astype(np.float64), x[1].astype(np.float64)), x[0])
        elif op == "Reshape":
            shape = [x[0].shape[i] if d == 0 else int(d) for i, d in enumerate(x[1])]
            y = x[0].reshape(shape)
        elif op == "Transpose":
            y = np.transpose(x[0], a["perm"])
        elif op == "ReduceMean":
            y = rounded(x[0].astype(np.float64).mean(axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1))), x[0])
        elif op == "Softmax":
            z = x[0].astype(np.float64)
            z = np.exp(z - z.max(axis=a.get("axis", -1), keepdims=True))
            y = rounded(z / z.sum(axis=a.get("axis", -1), keepdims=True), x[0])
        elif op == "LayerNormalization":
            axis = a.get("axis", -1)
            axes = tuple(range(axis % x[0].ndim, x[0].ndim))
            z = x[0].astype(np.float64)
            mean = z.mean(axis=axes, keepdims=True)
            var = ((z - mean) ** 2).mean(axis=axes, keepdims=True)
            z = (z - mean) / np.sqrt(var + a.get("epsilon", 1e-5)) * x[1].astype(np.float64)
            if len(x) > 2 and x[2] is not None:
                z = z + x[2].astype(np.float64)
            y = rounded(z, x[0])
        elif op == "BatchNormalization":
            assert a.get("training_mode", 0) == 0
            sh = (1, -1, 1, 1)
            z = (x[0].astype(np.float64) - x[3].astype(np.float64).reshape(sh)) / np.sqrt(
                x[4].astype(np.float64).reshape(sh) + a.get("epsilon", 1e-5))
            y = rounded(z * x[1].astype(np.float64).reshape(sh) + x[2].astype(np.float64).reshape(sh), x[0])
        elif op == "Gather":
            y = np.take(x[0], x[1], axis=a.get("axis", 0))
        elif op == "Shape":
            y = np.array(x[0].shape[a.get("start", 0):a.get("end", x[0].ndim)], dtype=np.int64)
        elif op == "Concat":
            y = np.concatenate(x, axis=a["axis"])
        elif op == "Slice":
            starts, ends = x[1], x[2]
            axes = x[3] if len(x) > 3 and x[3] is not None else range(len(starts))
            sl = [slice(None)] * x[0].ndim
            for s, e, ax in zip(starts, ends, axes):
                sl[ax] = slice(int(s), int(e))
            y = x[0][tuple(sl)]
        else:
            raise SystemExit("onnx_run.py: no numpy implementation of %s (node %s)" % (op, node.name))
        env[node.output[0]] = y
    return {o.name: env[o.name] for o in model.graph.output}


def run_opencv(path, feed):
    import cv2
    net = cv2.dnn.readNetFromONNX(path)
    net.setInput(feed)
    names = ["logits", "probabilities"]
    outs = net.forward(names)
    return dict(zip(names, outs))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("input")
    p.add_argument("--runtime", choices=["opencv", "numpy"], required=True)
    p.add_argument("--expected")
    p.add_argument("--output", default="probabilities", choices=["logits", "probabilities"])
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--atol", type=float, default=1e-5)
    p.add_argument("--save")
    args = p.parse_args()

    onnx.checker.check_model(args.model, full_check=True)  # full: strict shape inference too
    model = onnx.load(args.model)
    feed = np.load(args.input)
    name = model.graph.input[0].name
    if name == "tokens":
        feed = feed.astype(np.int64)
    else:
        feed = feed.astype(np.float32)
    outs = run_opencv(args.model, feed) if args.runtime == "opencv" else run_numpy(model, {name: feed})
    got = np.asarray(outs[args.output], dtype=np.float64)
    if args.save:
        np.save(args.save, got)
    if not np.all(np.isfinite(got)):
        print("onnx_run.py: %s has non-finite values" % args.output)
        return 1
    if args.expected is None:
        print("onnx_run.py: %s ran on %s: %s %s" % (args.model, args.runtime, args.output, got.shape))
        return 0
    want = np.load(args.expected).astype(np.float64)
    if got.shape != want.shape:
        print("onnx_run.py: %s shape %s, expected %s" % (args.output, got.shape, want.shape))
        return 1
    err = np.abs(got - want) - (args.atol + args.rtol * np.abs(want))
    worst = np.unravel_index(np.argmax(err), err.shape)
    print("onnx_run.py: %s on %s: max |diff| %.3g (element %s: %r vs expected %r), rtol %g atol %g" %
          (args.output, args.runtime, np.abs(got - want).max(), worst, got[worst], want[worst], args.rtol, args.atol))
    return 0 if err.max() <= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
