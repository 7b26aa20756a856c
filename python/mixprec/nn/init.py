"""mixprec.nn.init: torch.nn.init's initialisers (PyTorch 1.13's names, arguments, defaults,
formulas and error messages).

Each fills its tensor in place without recording autograd (a Parameter that requires grad stays
a leaf with no grad) and returns the same object. The values are written by the engine
(copy_, fill_), which bumps the storage's version, so the engine's weight caches see them.

Random values come from mixprec's generator (mixprec.manual_seed makes them reproducible),
drawn in double precision and rounded once to the tensor's dtype (float32, float16, bfloat16,
float64). They follow the same distributions as PyTorch's but are not the numbers torch's
generator gives for the same seed.
"""
import math
import warnings

import numpy as np

from .. import _mixprec as _C
from .._mixprec import dtype
from .._tensor import no_grad

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "orthogonal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_"]

# PyTorch's names for the dtypes, as its error messages print them.
_TORCH_NAMES = {dtype.float32: "Float", dtype.float64: "Double", dtype.float16: "Half", dtype.bfloat16: "BFloat16",
                dtype.int64: "Long", dtype.int32: "Int", dtype.uint8: "Byte"}
_MAX = {dtype.float32: float(np.finfo(np.float32).max), dtype.float64: float(np.finfo(np.float64).max),
        dtype.float16: 65504.0, dtype.bfloat16: 3.3895313892515355e38}


def _torch_name(d):
    return _TORCH_NAMES.get(d, str(d))


def _num(x):
    """A number as C++'s default stream prints it (PyTorch's messages)."""
    return format(float(x), "g")


def _shape(tensor):
    return [int(s) for s in tensor.shape]


def _write(tensor, values):
    """tensor := values (a mixprec tensor or a NumPy array of its shape), converted to the
    tensor's dtype, through the engine (version bump), with no autograd."""
    if isinstance(values, np.ndarray):
        values = _C.from_numpy(np.ascontiguousarray(values, dtype=np.float64))
    with no_grad():
        tensor.copy_(values)
    return tensor


def _check_floating(tensor, kernel):
    if not tensor.dtype.is_floating_point:
        raise RuntimeError(f'"{kernel}" not implemented for \'{_torch_name(tensor.dtype)}\'')


def _check_uniform_bounds(tensor, a, b):
    _check_floating(tensor, "check_uniform_bounds")
    if not a <= b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={_num(a)} > to={_num(b)}")
    if b - a > _MAX[tensor.dtype]:
        raise RuntimeError(f"uniform_ expects to-from <= std::numeric_limits<{_torch_name(tensor.dtype)}>::max(), "
                           f"but found to={_num(b)} and from={_num(a)} which result in to-from to exceed the limit")


def _draw_uniform(tensor, a, b):
    _check_uniform_bounds(tensor, a, b)
    return _write(tensor, _C._uniform(_shape(tensor), float(a), float(b), tensor.dtype))


def _draw_normal(tensor, mean, std):
    _check_floating(tensor, "normal_kernel_cpu")
    if not std >= 0.0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_num(std)}")
    if std == 0.0:  # N(mean, 0); the engine's distribution needs std > 0
        return _fill(tensor, mean)
    return _write(tensor, _C._normal(_shape(tensor), float(mean), float(std), tensor.dtype))


def _fill(tensor, val):
    with no_grad():
        tensor.fill_(float(val))  # an engine write: bumps the version as copy_ does
    return tensor


# ---- gains and fans -----------------------------------------------------------------------

def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (its nn.functional name): 1 for linear, the
    convolutions and sigmoid; 5/3 for tanh; sqrt(2) for relu; sqrt(2 / (1 + negative_slope^2))
    for leaky_relu (param: negative_slope, default 0.01); 3/4 for selu."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif (isinstance(param, int) and not isinstance(param, bool)) or isinstance(param, float):
            negative_slope = param  # bool is an int: refused, as in PyTorch
        else:
            raise ValueError("negative_slope {} not a valid number".format(param))
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError("Unsupported nonlinearity {}".format(nonlinearity))


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out): size(1) and size(0), each times the product of the dims after the
    first two (a convolution's receptive field)."""
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive_field_size = 1
    for s in shape[2:]:
        receptive_field_size *= s
    return shape[1] * receptive_field_size, shape[0] * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError("Mode {} not supported, please use one of {}".format(mode, valid_modes))
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


# ---- fills ---------------------------------------------------------------------------------

def uniform_(tensor, a=0.0, b=1.0):
    """Fills tensor with values from U(a, b)."""
    return _draw_uniform(tensor, a, b)


def normal_(tensor, mean=0.0, std=1.0):
    """Fills tensor with values from N(mean, std^2)."""
    return _draw_normal(tensor, mean, std)


# Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9,
# far below float32's resolution), vectorised: NumPy has no erfinv.
_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
      -3.066479806614716e+01, 2.506628277459239e+00)
_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
      -1.328068155288572e+01, 1.0)
_C_TAIL = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
           4.374664141464968e+00, 2.938163982698783e+00)
_D_TAIL = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00, 1.0)
_P_LOW = 0.02425


def _polyval(coeffs, x):
    out = np.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        out = out * x + c
    return out


def _normal_quantile(p):
    """Phi^-1(p) for p in [0, 1] (float64 array); -inf at 0, +inf at 1."""
    p = np.asarray(p, dtype=np.float64)
    x = np.empty_like(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = p < _P_LOW
        high = p > 1.0 - _P_LOW
        mid = ~(low | high)
        q = p[mid] - 0.5
        r = q * q
        x[mid] = _polyval(_A, r) * q / _polyval(_B, r)
        q = np.sqrt(-2.0 * np.log(p[low]))
        x[low] = _polyval(_C_TAIL, q) / _polyval(_D_TAIL, q)
        q = np.sqrt(-2.0 * np.log1p(-p[high]))
        x[high] = -_polyval(_C_TAIL, q) / _polyval(_D_TAIL, q)
    x[p <= 0.0] = -np.inf  # the tails' ratio is inf / inf there
    x[p >= 1.0] = np.inf
    return x


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Fills tensor with values from N(mean, std^2) truncated to [a, b], by PyTorch's method:
    a uniform draw between the normal CDF's values at a and b, through the inverse CDF, then
    clamped to [a, b]. Works best when a <= mean <= b."""
    def norm_cdf(x):
        return (1. + math.erf(x / math.sqrt(2.))) / 2.

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.",
                      stacklevel=2)
    low = norm_cdf((a - mean) / std)
    high = norm_cdf((b - mean) / std)
    # PyTorch draws U(2l - 1, 2u - 1) and applies erfinv: the same distribution as this.
    _check_uniform_bounds(tensor, 2 * low - 1, 2 * high - 1)
    p = _C._uniform(_shape(tensor), low, high, dtype.float64).numpy()
    values = np.clip(_normal_quantile(p) * std + mean, a, b)
    return _write(tensor, values)


def constant_(tensor, val):
    """Fills tensor with val."""
    return _fill(tensor, val)


def ones_(tensor):
    """Fills tensor with 1."""
    return _fill(tensor, 1.0)


def zeros_(tensor):
    """Fills tensor with 0."""
    return _fill(tensor, 0.0)


def eye_(tensor):
    """Fills a 2-d tensor with the identity matrix (ones on the main diagonal of a
    rectangular one)."""
    if tensor.dim() != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _write(tensor, np.eye(*_shape(tensor)))


def orthogonal_(tensor, gain=1):
    """Fills tensor (2 or more dims; the dims after the first flattened) with a (semi-)
    orthogonal matrix times gain: the Q of a QR factorisation (NumPy's, in float64) of a
    standard normal draw, its columns' signs fixed by R's diagonal (so the matrix is uniform
    over the orthogonal group), as PyTorch's."""
    if tensor.dim() < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = _shape(tensor)[0]
    cols = tensor.numel() // rows
    flattened = _C._normal([rows, cols], 0.0, 1.0, dtype.float64).numpy()
    if rows < cols:
        flattened = flattened.T
    q, r = np.linalg.qr(flattened)
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(_shape(tensor)))


# ---- Glorot and He -------------------------------------------------------------------------

def xavier_uniform_(tensor, gain=1.0):
    """Glorot initialisation: U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return _draw_uniform(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    """Glorot initialisation: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return _draw_normal(tensor, 0.0, std)


def _kaiming_std(tensor, a, mode, nonlinearity):
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    return gain / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He initialisation: U(-bound, bound), bound = gain * sqrt(3 / fan_mode); a is
    leaky_relu's negative slope (used with nonlinearity='leaky_relu' only)."""
    if 0 in _shape(tensor):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return _draw_uniform(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    """He initialisation: N(0, std^2), std = gain / sqrt(fan_mode)."""
    if 0 in _shape(tensor):
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    return _draw_normal(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity))
