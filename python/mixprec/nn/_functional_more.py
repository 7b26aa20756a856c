"""More of torch.nn.functional: activations, shape and padding ops, 1-d and adaptive pooling,
instance and local response norms, bilinear, channel dropouts, distances and losses, each a
composition of the engine's differentiable ops (where, clamp, exp, log, sum, gather), so their
gradients come from the engine's autograd. functional.py re-exports them (its last line), so
they are mixprec.nn.functional's names; `pad` here extends functional.py's constant pad with
the 'reflect', 'replicate' and 'circular' modes. docs/python.md lists what differs from PyTorch."""
import math
import warnings

import numpy as np

from .. import _mixprec as _C
from .._functions import abs as _abs, clamp, index_select, log1p, tensor_max
from .._masks import where
from .._methods import _numpy_values
from .._tensor import _wrap_dim, no_grad
from . import functional as _F  # partly initialised here: every name above its last line

_constant_pad = _F.pad
_reduce = _F._reduce

# SELU's constants (Klambauer et al. 2017), as PyTorch's.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's mapping of the deprecated size_average / reduce arguments to a reduction."""
    if size_average is None and reduce is None:
        return reduction
    warnings.warn("size_average and reduce args will be deprecated, please use reduction='"
                  f"{'none' if reduce is False else 'mean' if size_average in (None, True) else 'sum'}' instead.")
    if reduce is False:
        return "none"
    return "mean" if size_average in (None, True) else "sum"


def _f32_under_autocast(*tensors):
    """The tensors, 16-bit ones as float32 while autocast is on: the ops that PyTorch 1.13's CPU
    autocast runs in f32 (its reflection and replication pads, and its losses here but
    gaussian_nll_loss, a Python composition there)."""
    if not _C.is_autocast_enabled():
        return tensors
    low = (_C.dtype.bfloat16, _C.dtype.float16)
    return tuple(t.to(_C.dtype.float32) if t is not None and t.dtype in low else t for t in tensors)


def _in_dtype_of(out, input):
    """out in input's dtype: the ops below that reduce (sum, mean: f32 in mixprec's autocast
    table) give a 16-bit input's dtype back, as the engine's pooling and PyTorch's kernels do."""
    return out if out.dtype == input.dtype else out.to(input.dtype)


# ---- activations ---------------------------------------------------------------------------

def prelu(input, weight):
    """input where input > 0, else weight * input; weight holds one value or one per channel
    (dim 1; a 0-d or 1-d input has one channel). Composed of where, so it runs in the input's
    dtype under autocast, as PyTorch 1.13's CPU autocast (the engine's own prelu op, which
    lowers it as PyTorch 2 does, is not bound to Python)."""
    channels = input.shape[1] if input.ndim >= 2 else 1
    count = weight.numel()
    if count != 1 and count != channels:
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{count} and channel size = {channels}.")
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got ndim = {weight.ndim}")
    if count == 1:
        slope = weight.reshape(*([1] * input.ndim)) if input.ndim else weight.reshape()
    else:
        slope = weight.reshape(*([1, channels] + [1] * (input.ndim - 2)))
    if slope.dtype != input.dtype:  # PyTorch's rule: the weight takes the input's dtype
        slope = slope.to(input.dtype)
    return where(input > 0, input, input * slope)


def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6; its gradient (x / 3 + 0.5 on [-3, 3]) is PyTorch's, ends included."""
    return input * clamp(input + 3.0, 0.0, 6.0) * (1.0 / 6.0)


def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6, with PyTorch's gradient: 1/6 strictly inside (-3, 3), 0 at the ends."""
    return where(input <= -3.0, 0.0, where(input >= 3.0, 1.0, input * (1.0 / 6.0) + 0.5)).to(input.dtype)


def selu(input, inplace=False):
    return _F.elu(input, _SELU_ALPHA) * _SELU_SCALE


def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha (e^(x / alpha) - 1)."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return where(input > 0, input, (_C.exp(clamp(input, max=0.0) * (1.0 / alpha)) - 1.0) * alpha)


def glu(input, dim=-1):
    """a * sigmoid(b) for the two halves a, b of input along dim."""
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if size % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {size}")
    return input.narrow(d, 0, size // 2) * _C.sigmoid(input.narrow(d, size // 2, size // 2))


def softsign(input):
    return input / (_abs(input) + 1.0)


def _softmax_dim(ndim):
    """PyTorch's implicit dim for softmax-like calls without one (with its warning)."""
    warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the call to include dim=X "
                  "as an argument.")
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-input) over dim."""
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return _F.softmax(-input, dim, dtype)


def tanhshrink(input):
    return input - _C.tanh(input)


def threshold(input, threshold, value, inplace=False):
    """input where input > threshold, else value."""
    return where(input > threshold, input, float(value)).to(input.dtype)


def logsigmoid(input):
    """log(sigmoid(x)) without overflow: x - log1p(e^x) for x < 0, -log1p(e^-x) otherwise
    (each branch's exponent clamped to <= 0, so the branch not taken stays finite); its
    gradient is sigmoid(-x), 0.5 at 0 as PyTorch's."""
    negative = clamp(input, max=0.0)
    positive = clamp(input, min=0.0)
    return where(input < 0, negative - log1p(_C.exp(negative)), -log1p(_C.exp(-positive)))


# ---- shape ops -----------------------------------------------------------------------------

def pixel_shuffle(input, upscale_factor):
    """[*, C r^2, H, W] -> [*, C, H r, W r]."""
    r = int(upscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = int(np.prod(lead)) if lead else 1
    x = input.reshape(n, c // (r * r), r, r, h, w).permute(0, 1, 4, 2, 5, 3)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """[*, C, H r, W r] -> [*, C r^2, H, W] (pixel_shuffle's inverse)."""
    r = int(downscale_factor)
    if input.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.ndim} dimension(s)")
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *lead, c, h, w = input.shape
    if h % r:
        raise RuntimeError(f"pixel_unshuffle expects height to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} is not divisible by {r}")
    if w % r:
        raise RuntimeError(f"pixel_unshuffle expects width to be divisible by downscale_factor, but "
                           f"input.size(-1)={w} is not divisible by {r}")
    n = int(np.prod(lead)) if lead else 1
    x = input.reshape(n, c, h // r, r, w // r, r).permute(0, 1, 3, 5, 2, 4)
    return x.reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """[N, g * k, *] -> channels reordered as [N, k, g, *] flattened (ShuffleNet's)."""
    c = input.shape[1]
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    n, rest = input.shape[0], list(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(*input.shape)


# ---- padding -------------------------------------------------------------------------------

def _reflect_index(size, before, after):
    return np.abs((np.arange(-before, size + after) + (size - 1)) % (2 * size - 2) - (size - 1)) if size > 1 \
        else np.zeros(before + size + after, np.int64)


def _padding_index(mode, size, before, after):
    """For each padded position along one dim, the input position it copies."""
    positions = np.arange(-before, size + after)
    if mode == "reflect":
        return _reflect_index(size, before, after)
    if mode == "replicate":
        return np.clip(positions, 0, size - 1)
    return positions % size  # circular


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: 'constant' (functional.py's: negative amounts crop), and
    'reflect', 'replicate', 'circular': along each padded dim, the border positions gathered
    (index_select: their gradient sums back to the positions copied) around the input (cat)."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if mode == "constant":
        return _constant_pad(input, pad, "constant", 0.0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    dims = len(pad) // 2
    if input.ndim not in (dims + 1, dims + 2) or dims > 3:
        raise NotImplementedError("Only 2D, 3D, 4D, 5D padding with non-constant padding are supported for now")
    out = _f32_under_autocast(input)[0] if mode != "circular" else input
    for i in range(dims):
        d = input.ndim - 1 - i
        before, after = int(pad[2 * i]), int(pad[2 * i + 1])
        size = input.shape[d]
        if mode == "reflect" and (before >= size or after >= size):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({before}, {after}) at dimension {d} of input {size}")
        if mode == "circular" and (before > size or after > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if min(before, after) < 0:
            raise NotImplementedError(f"mixprec's pad: negative padding with mode={mode!r} is not implemented")
        if before or after:  # only the borders are gathered; the input itself is concatenated between
            index = _padding_index(mode, size, before, after)
            parts = [index_select(out, d, index[:before])] if before else []
            parts += [out] + ([index_select(out, d, index[before + size:])] if after else [])
            out = _C.cat(parts, d)
    return out


# ---- pooling -------------------------------------------------------------------------------

def _one(value, name):
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise RuntimeError(f"{name} must be an int or a tuple of one int, got {tuple(value)}")
        value = value[0]
    return int(value)


def _check_1d_pool(input, name, message=None):
    if input.ndim not in (2, 3):
        raise RuntimeError(message or f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for "
                                      f"argument #1 'self' (while checking arguments for {name})")


def _windows(input, starts, offsets):
    """input's last dim gathered into windows: [..., len(starts), len(offsets)], window i
    holding the positions starts[i] + offsets (one gather, the gradient summed back)."""
    idx = (np.asarray(starts, np.int64)[:, None] + np.asarray(offsets, np.int64)[None, :]).reshape(-1)
    lead = list(input.shape[:-1])
    return index_select(input, input.ndim - 1, idx).reshape(*lead, len(starts), len(offsets))


def _pool_starts(length, kernel, stride, padding, dilation, ceil_mode):
    """Window starts (in the padded input) of PyTorch's pooling output size: with ceil_mode a
    last partial window, if it starts inside the input or the left padding."""
    span = dilation * (kernel - 1) + 1
    numerator = length + 2 * padding - span
    out = (-(-numerator // stride) if ceil_mode else numerator // stride) + 1
    if ceil_mode and (out - 1) * stride >= length + padding:
        out -= 1
    return np.arange(max(out, 0)) * stride, span


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """The max over each window of [N, C, L] (or [C, L]): windows gathered from the input padded
    with -inf, then the max (a tie's gradient goes to the window's first maximum, as PyTorch)."""
    if return_indices:
        raise NotImplementedError("mixprec's max_pool1d has no return_indices")
    k, p, dil = _one(kernel_size, "kernel_size"), _one(padding, "padding"), _one(dilation, "dilation")
    s = k if stride is None or stride == [] or stride == () else _one(stride, "stride")
    _check_1d_pool(input, "max_pool1d", "max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim "
                                        f"batch size for input, but got:{list(input.shape)}")
    if k <= 0 or s <= 0 or dil <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size, stride and dilation must be greater than zero, but got "
                           f"kernel_size={k}, stride={s} and dilation={dil}")
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and "
                           f"kernel_size={k}")
    starts, span = _pool_starts(input.shape[-1], k, s, p, dil, ceil_mode)
    if not len(starts):
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {len(starts)}")
    right = max(int(starts[-1]) + span - input.shape[-1] - p, 0)
    x = _constant_pad(input, (p, right), "constant", -math.inf) if p or right else input
    return tensor_max(_windows(x, starts, np.arange(k) * dil), -1).values


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """The mean over each window of [N, C, L] (or [C, L]), padding counted as zeros unless
    count_include_pad=False (then the divisor is the window's count of input positions)."""
    k, p = _one(kernel_size, "kernel_size"), _one(padding, "padding")
    s = k if stride is None or stride == [] or stride == () else _one(stride, "stride")
    _check_1d_pool(input, "avg_pool1d")
    if k <= 0 or s <= 0:
        raise RuntimeError(f"avg_pool1d() kernel_size and stride must be greater than zero, but got "
                           f"kernel_size={k} and stride={s}")
    if p > k // 2:
        raise RuntimeError(f"pad should be at most half of kernel size, but got pad={p} and kernel_size={k}")
    length = input.shape[-1]
    starts, _ = _pool_starts(length, k, s, p, 1, ceil_mode)
    if not len(starts):
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, input.shape[:-1]))}x{length}). Calculated output "
                           f"size: ({'x'.join(map(str, input.shape[:-1]))}x0). Output size is too small")
    right = max(int(starts[-1]) + k - length - p, 0)
    x = _constant_pad(input, (p, right), "constant", 0.0) if p or right else input
    # PyTorch's divisors: the window clipped to input + padding (count_include_pad), or to the input.
    lo, hi = starts - p, starts - p + k
    if count_include_pad:
        divisor = np.minimum(hi, length + p) - np.maximum(lo, -p)
    else:
        divisor = np.minimum(hi, length) - np.maximum(lo, 0)
    scale = _C.from_numpy(np.ascontiguousarray(1.0 / divisor, np.float64)).to(input.dtype)
    return _in_dtype_of(_C.sum(_windows(x, starts, np.arange(k)), [input.ndim], False) * scale, input)


def _adaptive_bounds(size, out):
    i = np.arange(out)
    return (i * size) // out, -((-(i + 1) * size) // out)  # floor(i L / O), ceil((i + 1) L / O)


def _adaptive_last_dim(input, out, reduce_max):
    """PyTorch's adaptive pooling along the last dim: window i spans floor(i L / O) ..
    ceil((i + 1) L / O). Windows of unequal length are gathered at the longest length, the
    extra positions repeating the window's first (no effect on a max; weight 0 in a mean)."""
    size = input.shape[-1]
    start, end = _adaptive_bounds(size, out)
    width = int((end - start).max()) if out else 0
    offsets = np.arange(width)[None, :]
    inside = offsets < (end - start)[:, None]
    idx = np.where(inside, start[:, None] + offsets, start[:, None]).reshape(-1)
    lead = list(input.shape[:-1])
    windows = index_select(input, input.ndim - 1, idx).reshape(*lead, out, width)
    if reduce_max:
        return tensor_max(windows, -1).values
    weights = inside / (end - start)[:, None]
    return _in_dtype_of(_C.sum(windows * _C.from_numpy(np.ascontiguousarray(weights, np.float64)).to(input.dtype),
                               [input.ndim], False), input)


def _output_size(output_size, count, shape):
    sizes = [output_size] * count if isinstance(output_size, int) else list(output_size)
    if len(sizes) != count:
        raise ValueError(f"output_size must have {count} elements, got {output_size}")
    sizes = [shape[-count + i] if s is None else int(s) for i, s in enumerate(sizes)]
    if any(s < 0 for s in sizes):
        raise RuntimeError(f"adaptive pooling: output_size must be non-negative, got {output_size}")
    return sizes


def adaptive_avg_pool1d(input, output_size):
    _check_1d_pool(input, "adaptive_avg_pool1d")
    (out,) = _output_size(_one(output_size, "output_size"), 1, input.shape)
    return _adaptive_last_dim(input, out, reduce_max=False)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    if return_indices:
        raise NotImplementedError("mixprec's adaptive_max_pool1d has no return_indices")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"adaptive_max_pool1d(): Expected 2D or 3D tensor, but got: {list(input.shape)}")
    (out,) = _output_size(_one(output_size, "output_size"), 1, input.shape)
    return _adaptive_last_dim(input, out, reduce_max=True)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The max over PyTorch's adaptive windows of [N, C, H, W] (or [C, H, W]): along W, then
    along H (a window's max is the max of its rows' maxima; between equal maxima in one window
    the gradient may go to another of them than PyTorch's)."""
    if return_indices:
        raise NotImplementedError("mixprec's adaptive_max_pool2d has no return_indices")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_max_pool2d(): Expected 3D or 4D tensor, but got: {list(input.shape)}")
    oh, ow = _output_size(output_size, 2, input.shape)
    rows = _adaptive_last_dim(input, ow, reduce_max=True)
    return _adaptive_last_dim(rows.transpose(-1, -2), oh, reduce_max=True).transpose(-1, -2)


# ---- normalisation -------------------------------------------------------------------------

def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Each sample's channels normalised over their positions (biased variance), then
    weight * x + bias per channel. With running stats and use_input_stats, they are updated
    in place (no autograd) by the batch mean of the instances' means and unbiased variances,
    as PyTorch; without use_input_stats they normalise instead."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher input to instance_norm, got {input.ndim}D")
    n, c = input.shape[0], input.shape[1]
    positions = int(np.prod(input.shape[2:]))
    stats_shape = [1, c] + [1] * (input.ndim - 2)
    if use_input_stats:
        if positions <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size {list(input.shape)}")
        x = input.reshape(n, c, positions)
        mean = _C.mean(x, [2], True)
        centered = x - mean
        var = _C.mean(centered * centered, [2], True)
        out = (centered / _C.sqrt(var + eps)).reshape(*input.shape)
        if running_mean is not None or running_var is not None:
            with no_grad():
                batch_mean = _C.mean(mean.reshape(n, c), [0], False)
                batch_var = _C.mean(var.reshape(n, c), [0], False) * (positions / (positions - 1))
                if running_mean is not None:
                    running_mean.copy_((running_mean * (1.0 - momentum) + batch_mean.to(running_mean.dtype)
                                        * momentum).to(running_mean.dtype))
                if running_var is not None:
                    running_var.copy_((running_var * (1.0 - momentum) + batch_var.to(running_var.dtype)
                                       * momentum).to(running_var.dtype))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("Expected running_mean and running_var to be defined when use_input_stats is false")
        mean = running_mean.reshape(*stats_shape).to(input.dtype)
        var = running_var.reshape(*stats_shape).to(input.dtype)
        out = (input - mean) / _C.sqrt(var + eps)
    if weight is not None:
        if weight.numel() != c:
            raise RuntimeError(f"weight should contain {n * c} elements not {n * weight.numel()}")
        out = out * weight.reshape(*stats_shape)
    if bias is not None:
        out = out + bias.reshape(*stats_shape)
    return _in_dtype_of(out, input)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, the channel window
    zero-padded by size // 2 before and (size - 1) // 2 after, as PyTorch's."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    squares = (input * input).transpose(1, -1)  # channels last: the windows are gathered there
    padded = _constant_pad(squares, (size // 2, (size - 1) // 2), "constant", 0.0)
    window_sum = _C.sum(_windows(padded, np.arange(c), np.arange(size)), [squares.ndim], False)
    div = _C.pow(window_sum.transpose(1, -1) * (alpha / size) + k, beta)
    return _in_dtype_of(input / div, input)


# ---- two inputs ----------------------------------------------------------------------------

def bilinear(input1, input2, weight, bias=None):
    """out[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] (+ bias[o]): one
    matmul with weight as [in1, out * in2], then a product with input2 summed over j."""
    out_features, in1, in2 = weight.shape
    if input1.shape[:-1] != input2.shape[:-1]:
        first = next(i for i, (a, b) in enumerate(zip(input1.shape, input2.shape)) if a != b) \
            if input1.ndim == input2.ndim else 0
        raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {first}: got "
                           f"{input1.shape[first]} and {input2.shape[first]}")
    if input1.shape[-1] != in1:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but "
                           f"expected {in1}")
    if input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but "
                           f"expected {in2}")
    lead = list(input1.shape[:-1])
    x1, x2 = input1.reshape(-1, in1), input2.reshape(-1, 1, in2)
    mixed = _C.matmul(x1, weight.permute(1, 0, 2).reshape(in1, out_features * in2))
    out = _C.sum(mixed.reshape(-1, out_features, in2) * x2, [2], False)
    if bias is not None:
        out = out + bias
    return _in_dtype_of(out, input1).reshape(*lead, out_features)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim (p > 0, or inf), as PyTorch's."""
    d = x1 - x2 + eps
    dim = max(d.ndim, 1) - 1
    if d.ndim == 0:
        d = d.reshape(1)
    a = _abs(d)
    if p == math.inf:
        out = tensor_max(a, dim, keepdim).values
    elif p <= 0:
        raise NotImplementedError(f"mixprec's pairwise_distance: p > 0 (or inf) only, got p={p}")
    elif p == 2:
        out = _C.sqrt(_C.sum(a * a, [dim], keepdim))
    elif p == 1:
        out = _C.sum(a, [dim], keepdim)
    else:
        out = _C.pow(_C.sum(_C.pow(a, float(p)), [dim], keepdim), 1.0 / p)
    return _in_dtype_of(out, x1)


# ---- dropout -------------------------------------------------------------------------------

def _check_p(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _keep_mask(shape, p):
    """1 with probability 1 - p, else 0, float64, from mixprec's generator."""
    return (_C._uniform(list(shape), 0.0, 1.0, _C.dtype.float64).numpy() >= p).astype(np.float64)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Whole channels of [N, C, L] (or [C, L]) zeroed with probability p, the rest scaled by
    1 / (1 - p)."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    if input.ndim == 2:
        return _F.dropout2d(input.unsqueeze(0), p, training).squeeze(0)
    return _F.dropout2d(input, p, training)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """SELU's dropout: dropped elements set to -alpha * scale, then an affine map a x + b that
    keeps the mean and variance of a unit normal input (PyTorch's a and b)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    alpha_prime = -_SELU_ALPHA * _SELU_SCALE
    a = ((1.0 - p) * (1.0 + p * alpha_prime ** 2)) ** -0.5
    keep = _keep_mask(input.shape, p)
    mask = _C.from_numpy(np.ascontiguousarray(keep * a)).to(input.dtype)
    shift = _C.from_numpy(np.ascontiguousarray((1.0 - keep) * a * alpha_prime - a * alpha_prime * p))
    return input * mask + shift.to(input.dtype)


# ---- losses --------------------------------------------------------------------------------

def _check_same_shape(input, target):
    if tuple(input.shape) != tuple(target.shape):
        raise RuntimeError(f"The size of tensor a ({list(input.shape)}) must match the size of tensor b "
                           f"({list(target.shape)})")


def _xlogy(x):
    """x log x, 0 where x is 0, NaN where x < 0 or NaN (a constant: 0 * NaN in the backward of
    a branch not taken would be NaN); the gradient log x + 1 where x > 0, else 0."""
    positive = x > 0
    return where(positive, x * _C.log(where(positive, x, 1.0).to(x.dtype)), where(x == 0, 0.0, math.nan))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """target (log target - input) summed as reduction says, input being log-probabilities;
    'batchmean' divides the sum by the batch size ('mean' divides by every element, with
    PyTorch's warning). target = 0 adds 0 (x log x at 0)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    input, target = _f32_under_autocast(input, target)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.")
    if log_target:
        loss = _C.exp(target) * (target - input)
    else:
        loss = _xlogy(target) - target * input
    if reduction == "batchmean":
        return loss.sum() * (1.0 / input.shape[0]) if input.ndim else loss.sum()
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target)."""
    _check_same_shape(input, target)
    input, target = _f32_under_autocast(input, target)
    d = input - target
    a = _abs(d)
    return _reduce(where(a < delta, d * d * 0.5, (a - 0.5 * delta) * delta), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target (input1 - input2) + margin)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {list(input1.shape)}, input2: {list(input2.shape)}, target: {list(target.shape)} ")
    input1, input2, target = _f32_under_autocast(input1, input2, target)
    return _reduce(clamp(-target * (input1 - input2) + margin, min=0.0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where target is -1 (PyTorch's: both where
    the target is neither)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    input, = _f32_under_autocast(input)
    margin_part = where(target != 1, clamp(-input + margin, min=0.0), 0.0)
    self_part = where(target != -1, input, 0.0)
    return _reduce((margin_part + self_part).to(input.dtype), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + e^(-target input)), as -logsigmoid(target input) (no overflow for any product)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_same_shape(input, target)
    input, target = _f32_under_autocast(input, target)
    return _reduce(-logsigmoid(input * target), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(y logsigmoid(x) + (1 - y) logsigmoid(-x)), times weight, averaged over the classes
    (the last dim): one value per sample before the reduction."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_same_shape(input, target)
    loss = -(target * logsigmoid(input) + (1.0 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    classes = input.shape[-1] if input.ndim else 1
    loss = _C.sum(loss, [max(input.ndim, 1) - 1], False) * (1.0 / classes) if input.ndim else loss
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos - margin) where it is -1; cos is PyTorch's
    sum(x1 x2) / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12)) over the feature dim."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if target.ndim == 1 and (input1.ndim != 2 or input2.ndim != 2):
        raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if target.ndim == 0 and (input1.ndim != 1 or input2.ndim != 1):
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    input1, input2 = _f32_under_autocast(input1, input2)
    dim = input1.ndim - 1
    eps = 1e-12
    dot = _C.sum(input1 * input2, [dim], False)
    denom = _C.sqrt((_C.sum(input1 * input1, [dim], False) + eps) * (_C.sum(input2 * input2, [dim], False) + eps))
    cos = dot / denom
    loss = where(target == 1, 1.0 - cos, 0.0) + where(target == -1, clamp(cos - margin, min=0.0), 0.0)
    return _reduce(loss.to(cos.dtype), reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the pairwise p-distance
    (with swap, the smaller of d(a, n) and d(p, n))."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"All inputs should have same dimension but got {anchor.ndim}D, {positive.ndim}D and "
                           f"{negative.ndim}D inputs.")
    anchor, positive, negative = _f32_under_autocast(anchor, positive, negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_swap = pairwise_distance(positive, negative, p, eps)
        d_neg = where(d_swap < d_neg, d_swap, d_neg)
    return _reduce(clamp(d_pos - d_neg + margin, min=0.0), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """e^input - target input (log_input), or input - target log(input + eps); full adds
    Stirling's target log target - target + 0.5 log(2 pi target) where target > 1."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    input, target = _f32_under_autocast(input, target)
    if log_input:
        loss = _C.exp(input) - target * input
    else:
        loss = input - target * _C.log(input + eps)
    if full:
        big = target > 1
        safe = where(big, target, 2.0).to(target.dtype)
        stirling = safe * _C.log(safe) - safe + _C.log(safe * (2 * math.pi)) * 0.5
        loss = loss + where(big, stirling, 0.0).to(stirling.dtype)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (input - target)^2 / var) (+ 0.5 log 2 pi with full); var is clamped to
    eps in value only (the gradient passes as if unclamped, PyTorch's no_grad clamp). var may
    lack the last dim or have it 1 (one variance per sample)."""
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid")
    if (_numpy_values(var) < 0).any():
        raise ValueError("var has negative entry/entries")
    frozen = var.detach()
    var = var + (clamp(frozen, min=eps) - frozen)
    d = input - target
    loss = (_C.log(var) + d * d / var) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """For each sample, sum over classes i != y of max(0, margin - x[y] + x[i])^p (times
    weight[y]), divided by the number of classes."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input.reshape(1, -1) if input.ndim == 1 else input
    if x.ndim != 2:
        raise RuntimeError(f"Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    n, c = x.shape
    y = target.reshape(-1).numpy().astype(np.int64)
    if y.size != n:
        raise RuntimeError(f"inconsistent target size, expected {n} but got {list(target.shape)}")
    if y.size and (y.min() < 0 or y.max() >= c):
        raise RuntimeError("target out of range")
    from .._functions import gather
    x, = _f32_under_autocast(x)
    x_y = gather(x, 1, y.reshape(n, 1))
    z = clamp(x - x_y + margin, min=0.0)
    if p == 2:
        z = z * z
    others = np.ones((n, c), np.float64)
    others[np.arange(n), y] = 0.0
    if weight is not None:
        others = others * weight.detach().double().numpy()[y][:, None]
    loss = _C.sum(z * _C.from_numpy(others).to(z.dtype), [1], False) * (1.0 / c)
    return _reduce(loss.reshape() if input.ndim == 1 else loss, reduction)


__all__ = ["pad", "prelu", "hardswish", "hardsigmoid", "selu", "celu", "glu", "softsign", "softmin",
           "tanhshrink", "threshold", "logsigmoid", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
           "max_pool1d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "adaptive_max_pool2d",
           "instance_norm", "local_response_norm", "bilinear", "pairwise_distance", "dropout1d", "alpha_dropout",
           "kl_div", "huber_loss", "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss",
           "multilabel_soft_margin_loss", "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
           "gaussian_nll_loss", "multi_margin_loss"]
