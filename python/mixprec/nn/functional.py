"""mixprec.nn.functional: PyTorch's torch.nn.functional names over the engine's ops."""
from .. import _mixprec as _C

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
    if weight is not None or label_smoothing != 0.0:
        raise NotImplementedError("mixprec's cross_entropy has no class weights or label smoothing")
    return _C.cross_entropy(input, target, _check_reduction(reduction))


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean"):
    if weight is not None:
        raise NotImplementedError("mixprec's nll_loss has no class weights")
    return _C.nll_loss(input, target, _check_reduction(reduction))


def mse_loss(input, target, reduction="mean"):
    return _C.mse_loss(input, target, _check_reduction(reduction))


def l1_loss(input, target, reduction="mean"):
    """Mean (sum, none) of |input - target|; its gradient is sign(input - target), 0 at 0."""
    from .._functions import abs as _abs
    diff = _abs(input - target)
    reduction = _check_reduction(reduction)
    return diff if reduction == "none" else (diff.sum() if reduction == "sum" else diff.mean())


def sigmoid(input):
    return _C.sigmoid(input)


def tanh(input):
    return _C.tanh(input)


def flatten(input, start_dim=0, end_dim=-1):
    return _C.flatten(input, start_dim, end_dim)
