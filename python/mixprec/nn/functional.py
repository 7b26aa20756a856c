"""mixprec.nn.functional: PyTorch's torch.nn.functional names over the engine's ops."""
import math

import numpy as np

from .. import _mixprec as _C
from .._functions import abs as _abs, clamp, log1p, norm
from .._masks import _gather_rows, where
from .._methods import _numpy_values

_REDUCTIONS = ("none", "mean", "sum")


def linear(input, weight, bias=None):
    """input [*, in] -> [*, out]; the engine's linear is 2-D, other ranks are reshaped."""
    if input.ndim == 2:
        return _C.linear(input, weight, bias)
    lead = list(input.shape[:-1])
    out = _C.linear(_C.reshape(input, [-1, input.shape[-1]]), weight, bias)
    return _C.reshape(out, lead + [weight.shape[0]])


def _single(value, name):
    """The engine's conv1d takes one size (a 1-element sequence is that size)."""
    if isinstance(value, (tuple, list)):
        if len(set(value)) != 1:
            raise NotImplementedError(f"mixprec supports square {name}s only, got {tuple(value)}")
        return int(value[0])
    return int(value)


def _pair(value, name, op):
    """PyTorch's int-or-pair argument of a 2-D op as an (H, W) tuple of ints: an int is both
    axes, a sequence of 1 is that int, a sequence of 2 is (H, W)."""
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(values) not in (1, 2) or any(isinstance(v, bool) or not hasattr(v, "__index__") for v in values):
        raise RuntimeError(f"{op}: {name} must be a single int or a pair of ints (H, W), got {name}={value!r}")
    values = tuple(v.__index__() for v in values)
    return values * 2 if len(values) == 1 else values


def _same_padding(kernel, stride, dilation, op):
    """padding='same' as PyTorch 1.13 computes it per axis: dilation * (kernel - 1) in total,
    half of it (rounded down) on each side and the odd one at the end (bottom, right).
    Returns the symmetric padding and the extra (H, W) rows/columns at the end."""
    if stride != (1, 1):
        raise RuntimeError(f"{op}: padding='same' is not supported for strided convolutions")
    total = tuple(d * (k - 1) for k, d in zip(kernel, dilation))
    return tuple(t // 2 for t in total), tuple(t % 2 for t in total)


def _string_padding(padding, kernel, stride, dilation, op):
    """'valid' (no padding) or 'same' as (symmetric padding, extra at the end) per axis."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        return _same_padding(kernel, stride, dilation, op)
    raise RuntimeError(f"Invalid padding string: '{padding}' (expected 'valid' or 'same')")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """Each of stride, padding and dilation an int (both axes) or an (H, W) pair; padding
    'valid' or 'same' (stride 1; an odd total along an axis pads its extra row or column at
    the end, as PyTorch's)."""
    stride, dilation = _pair(stride, "stride", "conv2d"), _pair(dilation, "dilation", "conv2d")
    if isinstance(padding, str):
        padding, extra = _string_padding(padding, tuple(weight.shape[-2:]), stride, dilation, "conv2d")
        if any(extra):
            input = pad(input, (0, extra[1], 0, extra[0]))
    else:
        padding = _pair(padding, "padding", "conv2d")
    return _C.conv2d(input, weight, bias, stride, padding, dilation, int(groups))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _C.conv1d(input, weight, bias, _single(stride, "stride"), _single(padding, "padding"),
                     _single(dilation, "dilation"), int(groups))


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    op = "conv_transpose2d"
    return _C.conv_transpose2d(input, weight, bias, _pair(stride, "stride", op), _pair(padding, "padding", op),
                               _pair(output_padding, "output_padding", op), int(groups),
                               _pair(dilation, "dilation", op))


def _pool_args(op, kernel_size, stride, padding):
    """A pooling's kernel, stride (None or empty: the kernel's, as PyTorch's) and padding as
    (H, W) pairs."""
    kernel = _pair(kernel_size, "kernel_size", op)
    no_stride = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    return kernel, kernel if no_stride else _pair(stride, "stride", op), _pair(padding, "padding", op)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    if _pair(dilation, "dilation", "max_pool2d") != (1, 1) or ceil_mode or return_indices:
        raise NotImplementedError("mixprec's max_pool2d has no dilation, ceil_mode or return_indices")
    return _C.max_pool2d(input, *_pool_args("max_pool2d", kernel_size, stride, padding))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    if ceil_mode or not count_include_pad or divisor_override is not None:
        raise NotImplementedError("mixprec's avg_pool2d: ceil_mode=False, count_include_pad=True and "
                                  "divisor_override=None only")
    return _C.avg_pool2d(input, *_pool_args("avg_pool2d", kernel_size, stride, padding))


def relu(input, inplace=False):
    return _C.relu(input)


def gelu(input, approximate="none"):
    if approximate != "none":
        raise NotImplementedError("mixprec's gelu is the exact (erf) one: approximate='none'")
    return _C.gelu(input)


def softmax(input, dim, dtype=None):
    return _C.softmax(input if dtype is None else input.to(dtype), dim)


def log_softmax(input, dim, dtype=None):
    return _C.log_softmax(input if dtype is None else input.to(dtype), dim)


def dropout(input, p=0.5, training=True, inplace=False):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _C.dropout(input, p, training)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    return _C.layer_norm(input, shape, weight, bias, eps)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    return _C.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def embedding(input, weight):
    return _C.embedding(input, weight)


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """The engine's fused cross_entropy; label_smoothing as PyTorch 1.13's: (1 - e) times it
    plus e times the mean over classes of -log_softmax, reduced the same way."""
    if weight is not None:
        raise NotImplementedError("mixprec's cross_entropy has no class weights")
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    reduction = _check_reduction(reduction)
    loss = _C.cross_entropy(input, target, reduction)
    if label_smoothing == 0.0:
        return loss
    smooth = _C.mean(_C.neg(_C.log_softmax(input, 1)), [1], False)  # per row: mean over classes
    return loss * (1.0 - label_smoothing) + _reduce(smooth, reduction) * label_smoothing


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    if weight is not None:
        raise NotImplementedError("mixprec's nll_loss has no class weights")
    return _C.nll_loss(input, target, _check_reduction(reduction))


def mse_loss(input, target, reduction="mean"):
    return _C.mse_loss(input, target, _check_reduction(reduction))


def l1_loss(input, target, reduction="mean"):
    """Mean (sum, none) of |input - target|; its gradient is sign(input - target), 0 at 0."""
    return _reduce(_abs(input - target), reduction)


def _reduce(loss, reduction):
    reduction = _check_reduction(reduction)
    return loss if reduction == "none" else (loss.sum() if reduction == "sum" else loss.mean())


def smooth_l1_loss(input, target, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)."""
    d = input - target
    if beta == 0.0:
        return _reduce(_abs(d), reduction)
    a = _abs(d)
    return _reduce(where(a < beta, d * d * (0.5 / beta), a - 0.5 * beta), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """PyTorch's stable form, (1 - y) x + m + log(e^-m + e^(-x-m)) with m = max(-x, 0): no
    overflow for any logit, and its gradient is sigmoid(x) - y (0.5 - y at 0, as PyTorch's)."""
    if pos_weight is not None:
        raise NotImplementedError("mixprec's binary_cross_entropy_with_logits has no pos_weight")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({list(target.shape)}) must be the same as input size ({list(input.shape)})")
    m = clamp(-input, min=0.0)
    loss = (1.0 - target) * input + m + _C.log(_C.exp(-m) + _C.exp(-input - m))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _log_at_least_minus_100(p):
    """max(log p, -100), -100 at p = 0, with a gradient that is 1/p where the log is taken
    and 0 elsewhere: log never sees a 0 (whose 1/0 would make the gradient NaN)."""
    positive = p > 0
    return clamp(where(positive, _C.log(where(positive, p, 1.0)), -100.0), min=-100.0)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(y log p + (1 - y) log(1 - p)), each log at least -100 as PyTorch's, so p = 0 or 1 gives
    a finite loss (and no NaN in the gradient). Where p or 1 - p is below 1e-12 the gradient
    differs from PyTorch's, which divides by max(p (1 - p), 1e-12): mixprec's is the exact
    -y/p + (1 - y)/(1 - p), 0 where the log was clamped."""
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({list(target.shape)}) that is different to the input size "
                         f"({list(input.shape)}) is deprecated. Please ensure they have the same size.")
    values = _numpy_values(input)
    if values.size and ((values < 0).any() or (values > 1).any()):
        raise RuntimeError("all elements of input should be between 0 and 1")
    log_p, log_q = _log_at_least_minus_100(input), _log_at_least_minus_100(1.0 - input)
    loss = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope x (the slope's branch at 0, as PyTorch's gradient)."""
    return where(input > 0, input, input * negative_slope)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha (e^x - 1); e^x of min(x, 0) so that the branch not taken
    never overflows into the gradient."""
    return where(input > 0, input, (_C.exp(clamp(input, max=0.0)) - 1.0) * alpha)


def silu(input, inplace=False):
    """x sigmoid(x)."""
    return input * _C.sigmoid(input)


def one_hot(tensor, num_classes=-1):
    """int64 [..., num_classes] with a 1 at each index (num_classes=-1: the largest index + 1)."""
    if tensor.dtype != _C.dtype.int64:
        raise RuntimeError("one_hot is only applicable to index tensor.")
    idx = tensor.numpy()
    if num_classes == -1:
        if idx.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(idx.max()) + 1
    if idx.size and idx.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    if idx.size and idx.max() >= num_classes:
        raise RuntimeError("Class values must be smaller than num_classes.")
    out = np.zeros(idx.shape + (num_classes,), dtype=np.int64)
    np.put_along_axis(out, idx[..., None], 1, axis=-1)
    return _C.from_numpy(out)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to output_size where each output covers the same number of inputs: 1
    (the mean over H and W) or a size that divides the input's (an avg_pool2d); other sizes
    (PyTorch's overlapping windows) are not implemented."""
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else output_size
    h, w = input.shape[-2], input.shape[-1]
    oh, ow = h if oh is None else oh, w if ow is None else ow
    if (oh, ow) == (1, 1):
        return _C.mean(input, [input.ndim - 2, input.ndim - 1], True)
    if h % oh == 0 and w % ow == 0 and h // oh == w // ow:
        return _C.avg_pool2d(input, h // oh, h // oh, 0)
    raise NotImplementedError(f"mixprec's adaptive_avg_pool2d: output {oh}x{ow} from {h}x{w} needs equal square "
                              "windows (output 1, or a size dividing the input by the same factor both ways)")


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalises each sample's channels in num_groups groups (mean and biased variance over
    the group's channels and positions), then weight * x + bias per channel: torch's GroupNorm,
    composed of the engine's reductions (f32 statistics for f32 inputs)."""
    n, c = input.shape[0], input.shape[1]
    if c % num_groups != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    x = input.reshape(n, num_groups, -1)
    centered = x - _C.mean(x, [2], True)
    var = _C.mean(centered * centered, [2], True)
    out = (centered / _C.sqrt(var + eps)).reshape(*input.shape)
    if weight is not None or bias is not None:
        shape = [1, c] + [1] * (input.ndim - 2)
        if weight is not None:
            out = out * weight.reshape(*shape)
        if bias is not None:
            out = out + bias.reshape(*shape)
    return out


_INTERPOLATING_MODES = ("linear", "bilinear", "bicubic", "trilinear")


def _interpolate_sizes(input, size, scale_factor, recompute_scale_factor):
    """PyTorch 1.13's output size (H, W) and the scales its kernels use: a given scale_factor
    (recompute_scale_factor None or False) is kept, so a source index is dst / scale_factor,
    else (size, or recompute_scale_factor=True) in / out."""
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        out = tuple(size) if isinstance(size, (tuple, list)) else (size, size)
        if len(out) != 2:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {spatial} and output size of {size}. Please provide input tensor "
                             "in (N, C, d1, d2, ...,dK) format and output size in (o1, o2, ...,oK) format.")
        return tuple(int(o) for o in out), (None, None)
    if scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    factors = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor, scale_factor)
    if len(factors) != 2:
        raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input with "
                         f"spatial dimensions of {spatial} and scale_factor of shape {scale_factor}. Please provide "
                         "input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in (s1, s2, ...,sK) format.")
    out = tuple(int(math.floor(float(n) * float(f))) for n, f in zip(spatial, factors))
    return out, (None, None) if recompute_scale_factor else tuple(float(f) for f in factors)


def _source_scale(in_size, out_size, scale, acc):
    """PyTorch's compute_scales_value: 1 / the given scale, else in / out, in the kernel's
    accumulation type `acc`."""
    return acc(1.0 / scale) if scale is not None and scale > 0 else acc(in_size) / acc(out_size)


def _nearest_source(in_size, out_size, scale):
    """PyTorch 1.13's nearest_idx: out == in copies, out == 2 in halves, else
    min(floor(dst * s), in - 1) with s and the product in float32, as its CPU kernel."""
    dst = np.arange(out_size, dtype=np.int64)
    if out_size == in_size:
        return dst
    if out_size == 2 * in_size:
        return dst >> 1
    s = _source_scale(in_size, out_size, scale, np.float32)
    src = np.floor(dst.astype(np.float32) * s).astype(np.int64)
    return np.minimum(src, in_size - 1)


def _linear_source(in_size, out_size, scale, align_corners, acc):
    """PyTorch 1.13's linear interpolation taps along one axis: for each output index the two
    input indices and their weights (compute_source_index_and_lambda, in the kernel's
    accumulation type `acc`: float32 for 16- and 32-bit inputs, float64 for float64)."""
    dst = np.arange(out_size, dtype=acc)
    if out_size == in_size:  # PyTorch copies (whatever the scale)
        idx = np.arange(out_size, dtype=np.int64)
        return idx, idx, np.ones(out_size, acc), np.zeros(out_size, acc)
    if align_corners:
        ratio = acc(in_size - 1) / acc(out_size - 1) if out_size > 1 else acc(0)
        real = ratio * dst
    else:
        ratio = _source_scale(in_size, out_size, scale, acc)
        real = np.maximum(ratio * (dst + acc(0.5)) - acc(0.5), acc(0))
    i0 = real.astype(np.int64)  # real >= 0: truncation is floor
    i1 = i0 + (i0 < in_size - 1)
    l1 = np.clip(real - i0.astype(acc), acc(0), acc(1)).astype(acc)
    return i0, i1, (acc(1) - l1).astype(acc), l1


def _select_rows(x, index):
    """x [N, C, H, W] at rows `index` along H -> [N, C, len(index), W]: one gather of whole
    rows, whose gradient sums back into the rows read."""
    n, c, h, w = x.shape
    flat = (np.arange(n * c, dtype=np.int64)[:, None] * h + index[None, :]).reshape(-1)
    return _gather_rows(x.reshape(n * c * h, w), 1, flat).reshape(n, c, index.size, w)


def _select_columns(x, index):
    """x [N, C, H, W] at columns `index` along W (rows of the transpose)."""
    return _C.transpose(_select_rows(_C.transpose(x, 2, 3), index), 2, 3)


def _lerp(select, x, taps, dim):
    """Linear interpolation along dim (2 or 3): w0 x[i0] + w1 x[i1] per output index."""
    i0, i1, w0, w1 = taps
    if np.array_equal(i0, np.arange(x.shape[dim])) and not w1.any():
        return x  # the same size: PyTorch copies
    shape = [1, 1, 1, 1]
    shape[dim] = i0.size

    def weight(w):
        return _C.cast(_C.from_numpy(np.ascontiguousarray(w.reshape(shape))), x.dtype)
    return select(x, i0) * weight(w0) + select(x, i1) * weight(w1)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch 1.13's F.interpolate on [N, C, H, W] in mode 'nearest' (its nearest_idx rule,
    any size or factor) and 'bilinear' (align_corners False or True), composed of row gathers
    and weighted sums: gradients sum back into the rows and columns read. A 16-bit input is
    interpolated in float32 (PyTorch's accumulation type) and rounded once to its dtype."""
    if mode in _INTERPOLATING_MODES:
        align_corners = bool(align_corners)
    elif align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if mode not in ("nearest", "bilinear") or antialias:
        raise NotImplementedError(f"mixprec's interpolate: mode 'nearest' or 'bilinear' (antialias=False) only, "
                                  f"got mode={mode!r}, antialias={antialias}")
    if input.ndim != 4:
        if mode == "bilinear":
            raise NotImplementedError(f"Got {input.ndim}D input, but bilinear mode needs 4D input")
        raise NotImplementedError(f"mixprec's interpolate: 4-d input [N, C, H, W] only, got {input.ndim}-d")
    (oh, ow), (sh, sw) = _interpolate_sizes(input, size, scale_factor, recompute_scale_factor)
    h, w = input.shape[2], input.shape[3]
    if oh <= 0 or ow <= 0 or h <= 0 or w <= 0:
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input (H: {h}, W: {w}) "
                           f"output (H: {oh}, W: {ow})")
    if mode == "nearest":
        return _select_columns(_select_rows(input, _nearest_source(h, oh, sh)), _nearest_source(w, ow, sw))
    acc = np.float64 if input.dtype == _C.dtype.float64 else np.float32
    work = input if input.dtype in (_C.dtype.float32, _C.dtype.float64) else _C.cast(input, _C.dtype.float32)
    out = _lerp(_select_rows, work, _linear_source(h, oh, sh, align_corners, acc), 2)
    out = _lerp(_select_columns, out, _linear_source(w, ow, sw, align_corners, acc), 3)
    if out is input:  # the same size both ways: a copy, as PyTorch's, never the input itself
        return input.clone()
    return out if out.dtype == input.dtype else _C.cast(out, input.dtype)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input / max(||input||_p over dim, eps) (p = 1 or 2)."""
    return input / clamp(norm(input, p, dim, keepdim=True), min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 x2) / sqrt(max(||x1||^2 ||x2||^2, eps^2)) over dim (PyTorch 1.13's formula)."""
    w12 = _C.sum(x1 * x2, [dim % x1.ndim], False)
    w1 = _C.sum(x1 * x1, [dim % x1.ndim], False)
    w2 = _C.sum(x2 * x2, [dim % x2.ndim], False)
    return w12 / _C.sqrt(clamp(w1 * w2, min=eps * eps))


def pad(input, pad, mode="constant", value=0.0):
    """Constant padding (pad: (left, right) for the last dim, then the one before, ...);
    negative amounts crop. Differentiable (the engine's cat and narrow)."""
    if mode != "constant":
        raise NotImplementedError(f"mixprec's pad: mode='constant' only, got mode={mode!r}")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError("Padding length must be divisible by 2 and at most twice the input's dims")
    out = input
    for i in range(len(pad) // 2):
        d = input.ndim - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        if before < 0:
            out, before = out.narrow(d, -before, out.shape[d] + before), 0
        if after < 0:
            out, after = out.narrow(d, 0, out.shape[d] + after), 0
        parts = []
        for n in (before, None, after):
            if n is None:
                parts.append(out)
            elif n:
                shape = list(out.shape)
                shape[d] = n
                parts.append(_C._full(shape, float(value), out.dtype))
        out = _C.cat(parts, d) if len(parts) > 1 else out
    return out


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Whole channels zeroed with probability p (one draw per sample and channel from mixprec's
    generator), the rest scaled by 1 / (1 - p)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    shape = list(input.shape[:2]) + [1] * (input.ndim - 2)
    keep = _C._uniform(shape, 0.0, 1.0, _C.dtype.float64).numpy() >= p
    mask = _C.from_numpy(keep.astype("float64") / (1.0 - p))
    return input * _C.cast(mask, input.dtype)


def softplus(input, beta=1, threshold=20):
    """log(1 + e^(beta x)) / beta, x itself where beta x > threshold (torch's); log1p keeps the
    tiny values of very negative x."""
    scaled = input * beta if beta != 1 else input
    soft = log1p(_C.exp(clamp(scaled, max=float(threshold))))
    return where(scaled > threshold, input, soft * (1.0 / beta) if beta != 1 else soft)


def mish(input, inplace=False):
    """x tanh(softplus(x))."""
    return input * _C.tanh(softplus(input))


def relu6(input, inplace=False):
    return clamp(input, 0.0, 6.0)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return clamp(input, min_val, max_val)


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)


def flatten(input, start_dim=0, end_dim=-1):
    return _C.flatten(input, start_dim, end_dim)


from ._functional_more import *  # noqa: E402,F401,F403 (activations, pads, 1-d pools, losses; its pad extends this one)
