"""mixprec.nn.functional: PyTorch's torch.nn.functional names over the engine's ops."""
import numpy as np

from .. import _mixprec as _C
from .._functions import abs as _abs, clamp, expand, log1p, norm
from .._masks import where
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
    """The engine's conv and pooling take one size for both spatial dims."""
    if isinstance(value, (tuple, list)):
        if len(set(value)) != 1:
            raise NotImplementedError(f"mixprec supports square {name}s only, got {tuple(value)}")
        return int(value[0])
    return int(value)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    dilation = _single(dilation, "dilation")
    if padding == "same":
        k = weight.shape[-1]
        if _single(stride, "stride") != 1 or (dilation * (k - 1)) % 2 == 1:
            raise NotImplementedError("padding='same' needs stride 1 and an even dilation * (kernel - 1) here")
        padding = dilation * (k - 1) // 2
    elif padding == "valid":
        padding = 0
    return _C.conv2d(input, weight, bias, _single(stride, "stride"), _single(padding, "padding"), dilation,
                     int(groups))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _C.conv1d(input, weight, bias, _single(stride, "stride"), _single(padding, "padding"),
                     _single(dilation, "dilation"), int(groups))


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _C.conv_transpose2d(input, weight, bias, _single(stride, "stride"), _single(padding, "padding"),
                               _single(output_padding, "output_padding"), int(groups), _single(dilation, "dilation"))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    if _single(dilation, "dilation") != 1 or ceil_mode or return_indices:
        raise NotImplementedError("mixprec's max_pool2d has no dilation, ceil_mode or return_indices")
    stride = -1 if stride is None else _single(stride, "stride")
    return _C.max_pool2d(input, _single(kernel_size, "kernel_size"), stride, _single(padding, "padding"))


def avg_pool2d(input, kernel_size, stride=None, padding=0):
    stride = -1 if stride is None else _single(stride, "stride")
    return _C.avg_pool2d(input, _single(kernel_size, "kernel_size"), stride, _single(padding, "padding"))


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


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Upsampling by whole factors in mode 'nearest' (each value repeated factor x factor
    times, its gradient the sum over its copies); other modes and fractional factors are not
    implemented."""
    if mode != "nearest":
        raise NotImplementedError(f"mixprec's interpolate: mode='nearest' only, got mode={mode!r}")
    if input.ndim != 4:
        raise NotImplementedError(f"mixprec's interpolate: 4-d input [N, C, H, W] only, got {input.ndim}-d")
    h, w = input.shape[2], input.shape[3]
    if (size is None) == (scale_factor is None):
        raise ValueError("either size or scale_factor should be defined")
    if size is not None:
        oh, ow = (size, size) if isinstance(size, int) else tuple(size)
        if oh % h or ow % w:
            raise NotImplementedError(f"mixprec's interpolate: size {oh}x{ow} must be a whole multiple of {h}x{w}")
        fh, fw = oh // h, ow // w
    else:
        fh, fw = (scale_factor, scale_factor) if not isinstance(scale_factor, (tuple, list)) else scale_factor
        if fh != int(fh) or fw != int(fw) or fh < 1 or fw < 1:
            raise NotImplementedError(f"mixprec's interpolate: whole scale factors only, got {scale_factor}")
        fh, fw = int(fh), int(fw)
    n, c = input.shape[0], input.shape[1]
    tiled = expand(input.reshape(n, c, h, 1, w, 1), n, c, h, fh, w, fw)
    return tiled.reshape(n, c, h * fh, w * fw)


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
