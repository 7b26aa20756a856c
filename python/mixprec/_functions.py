"""The torch.* functions training scripts call (torch.flatten(x, 1), torch.max(out, 1),
torch.clamp, torch.arange, torch.save, torch.set_grad_enabled, torch.device, ...) and the
Tensor methods behind them that the engine has no op of its own for: each is the engine's op
(tanh, sqrt, sigmoid: their own kernels and backward), a composition of its differentiable ops
(max/min over a dim: the extreme's index, then a gather that routes the gradient to it;
clamp and abs: where), or NumPy where the result has no gradient in PyTorch either (indices,
comparisons, masks, new tensors). docs/python.md lists them with what differs."""
import builtins
import collections
import os
import pickle

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor, dtype
from . import _masks
from ._masks import where
from ._methods import _numpy_values as _values
from ._tensor import _EngineScope, _dims, _to_dtype, _wrap_dim, from_numpy, no_grad, tensor

# ---- extremes ---------------------------------------------------------------------------

# torch.return_types.max / min: a named pair (values, indices) that unpacks as a tuple.
max_result = collections.namedtuple("max", ["values", "indices"])
min_result = collections.namedtuple("min", ["values", "indices"])


def _take(x, flat_index, shape):
    """x's elements at flat (row-major) positions, shaped `shape`: a floating x through the
    engine's gather (embedding), so the gradient reaches exactly those elements."""
    flat = np.ascontiguousarray(flat_index, dtype=np.int64).reshape(-1)
    if not x.dtype.is_floating_point:
        return from_numpy(np.ascontiguousarray(_values(x).reshape(-1)[flat].reshape(shape)))
    return _masks._gather_rows(x, x.ndim, flat).reshape(*shape)


def _gather_along(x, idx, d):
    """x's elements at indices idx (int64, x's shape but for dim d) along dim d, with the
    gradient routed back to them (the engine's gather)."""
    pos = list(np.indices(idx.shape, sparse=True))
    pos[d] = idx
    return _take(x, np.ravel_multi_index(tuple(np.broadcast_arrays(*pos)), x.shape), idx.shape)


def _extreme(name, arg, result):
    """Tensor.max / min: over everything, over one dim ((values, indices)), or elementwise
    against another tensor (maximum / minimum)."""
    def extreme(self, dim=None, keepdim=False):
        if isinstance(dim, Tensor):
            return (maximum if name == "max" else minimum)(self, dim)
        if dim is None:
            if self.numel() == 0:
                raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                                   "Specify the reduction dim with the 'dim' argument.")
            return extreme(self.reshape(-1), 0).values.reshape()
        if self.ndim == 0:
            return result(self, from_numpy(np.array(0, dtype=np.int64)))
        d = _wrap_dim(dim, self.ndim)
        if self.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
        # NumPy's argmax/argmin take the first extreme, and the first NaN (which wins), as PyTorch's CPU kernel.
        idx = np.expand_dims(arg(_values(self), axis=d), d)
        values = _gather_along(self, idx, d)
        if not keepdim:
            values, idx = values.squeeze(d), idx.squeeze(d)
        return result(values, from_numpy(np.ascontiguousarray(idx, dtype=np.int64)))
    return extreme


tensor_max = _extreme("max", np.argmax, max_result)
tensor_min = _extreme("min", np.argmin, min_result)


def _argmin(self, dim=None, keepdim=False):
    if dim is None:
        return from_numpy(np.array(np.argmin(_values(self)), dtype=np.int64))
    return tensor_min(self, dim, keepdim).indices


def maximum(input, other):
    """Elementwise max (NaN wins, as PyTorch's); a tie's gradient goes to input."""
    return where((input >= other) | isnan(input), input, other)


def minimum(input, other):
    """Elementwise min (NaN wins); a tie's gradient goes to input."""
    return where((input <= other) | isnan(input), input, other)


sort_result = collections.namedtuple("sort", ["values", "indices"])
topk_result = collections.namedtuple("topk", ["values", "indices"])


def _index_array(index, size, dim):
    """An index list, array or integer tensor as int64 in [0, size), negatives wrapped; torch's
    IndexError for one out of range."""
    idx = np.asarray(index.numpy() if isinstance(index, Tensor) else index)
    if idx.dtype.kind not in "iu" and idx.size:
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    idx = idx.astype(np.int64)
    if idx.size and (idx.min() < -size or idx.max() >= size):
        bad = idx[(idx < -size) | (idx >= size)].flat[0]
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")
    return np.where(idx < 0, idx + size, idx)


def index_select(input, dim, index):
    """The slices of input at `index` (1-d) along dim, with the gradient summed back to them."""
    d = _wrap_dim(dim, input.ndim)
    idx = _index_array(index, input.shape[d], d).reshape(-1)
    if d == 0:  # whole rows: one gather of rows, not of every element
        return _masks._gather_rows(input, 1, idx)
    if input.dtype.is_floating_point and 6 * idx.size >= input.shape[d]:
        # dim d moved first, whole rows gathered, moved back: two copies of the input (~3 ns an
        # element) and a row gather instead of a gather of every output element (~20-30 ns
        # each), so it pays from ~1/6 of the dim on (1 thread: 64 x 512 along dim 1 0.61 ->
        # 0.08 ms, [8, 64, 32, 32] along dim 3 16.1 -> 1.7 ms); a reflect pad's border
        # (1 of 32) stays an element gather.
        return _masks._gather_rows(input.transpose(0, d), 1, idx).transpose(0, d).contiguous()
    shape = [1] * input.ndim
    shape[d] = idx.size
    full = list(input.shape)
    full[d] = idx.size
    return _gather_along(input, np.broadcast_to(idx.reshape(shape), full), d)


def gather(input, dim, index):
    """out[i][j][k] = input[i][index[i][j][k]][k] for dim 1 (and so on): torch.gather, with the
    gradient summed back to the gathered elements."""
    d = _wrap_dim(dim, input.ndim)
    idx = _index_array(index, input.shape[d], d)
    if idx.ndim != input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if any(idx.shape[k] > input.shape[k] for k in range(input.ndim) if k != d):
        raise RuntimeError(f"Size does not match at dimension {next(k for k in range(input.ndim) if k != d and idx.shape[k] > input.shape[k])} "
                           f"expected index {list(idx.shape)} to be smaller than self {list(input.shape)} apart from "
                           f"dimension {d}")
    return _gather_along(input, idx, d)


def cumsum(input, dim, dtype=None):
    """Running sums along dim, as a product with a triangle of ones (the engine's matmul:
    exact for integers up to 2^24, within f32 accumulation otherwise; O(n^2) in dim's size)."""
    d = _wrap_dim(dim, input.ndim)
    if not input.dtype.is_floating_point:
        return from_numpy(np.ascontiguousarray(np.cumsum(input.numpy(), axis=d)))
    n = input.shape[d]
    upper = _to_dtype(from_numpy(np.triu(np.ones((n, n), np.float32))), input.dtype)
    moved = input.transpose(d, -1) if d != input.ndim - 1 else input
    out = _C.matmul(moved.reshape(-1, n), upper).reshape(*moved.shape)
    return out.transpose(d, -1) if d != input.ndim - 1 else out


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) along dim, ascending unless descending; equal values keep their order
    (a stable sort, which PyTorch's CPU sort gives too); NaN sorts as the largest."""
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    if input.ndim == 0:
        return sort_result(input, from_numpy(np.array(0, dtype=np.int64)))
    values = _values(input)
    if descending:  # stable on the negated keys keeps ties in order; NaN first, as PyTorch's
        keys = np.where(np.isnan(values), -np.inf, -values) if values.dtype.kind == "f" else -values.astype(np.int64)
        idx = np.argsort(keys, axis=d, kind="stable")
        if values.dtype.kind == "f":  # -inf keys of NaN and of +inf tie: put the NaN first
            idx = np.take_along_axis(idx, np.argsort(~np.isnan(np.take_along_axis(values, idx, d)), axis=d,
                                                     kind="stable"), d)
    else:
        idx = np.argsort(values, axis=d, kind="stable")
    return sort_result(_gather_along(input, idx, d), from_numpy(np.ascontiguousarray(idx, dtype=np.int64)))


def argsort(input, dim=-1, descending=False, stable=False):
    return sort(input, dim, descending).indices


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The k largest (smallest) along dim as (values, indices), in order."""
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    size = input.shape[d] if input.ndim else 1
    if not 0 <= k <= size:
        raise RuntimeError("selected index k out of range")
    values, indices = sort(input, d, descending=largest)
    return topk_result(values.narrow(d, 0, k), indices.narrow(d, 0, k))


def var(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """Variance: mean of squared deviations, divided by n - 1 (unbiased, PyTorch's default) or n."""
    ddof = (1 if unbiased else 0) if correction is None else correction
    dims = list(range(input.ndim)) if dim is None else [_wrap_dim(d, input.ndim) for d in _dims(dim)]
    n = builtins.int(np.prod([input.shape[d] for d in dims])) if dims else 1
    centered = input - _C.mean(input, dims, True)
    total = _C.sum(centered * centered, dims, keepdim) if dims else centered * centered
    return total * (1.0 / (n - ddof)) if n - ddof > 0 else total * np.nan


def std(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    return _C.sqrt(var(input, dim, unbiased, keepdim, correction=correction))


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """The 2-norm (p=2 or "fro", PyTorch's default) or 1-norm, over everything or dims."""
    if p not in ("fro", 2, 2.0, 1, 1.0):
        raise NotImplementedError(f"mixprec's norm: p=2 (or 'fro') and p=1 only, got p={p!r}")
    dims = None if dim is None else [_wrap_dim(d, input.ndim) for d in _dims(dim)]
    if p in (1, 1.0):
        a = abs(input)
        return _C.sum(a) if dims is None else _C.sum(a, dims, keepdim)
    sq = input * input
    return _C.sqrt(_C.sum(sq) if dims is None else _C.sum(sq, dims, keepdim))


def expand(input, *sizes):
    """input broadcast to sizes (-1 keeps a dim): a copy here (PyTorch gives a view), with the
    gradient summed back over the broadcast dims."""
    from ._tensor import _shape_args
    shape = list(_shape_args(sizes))
    lead = len(shape) - input.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes provided ({len(shape)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({input.ndim})")
    for i, s in enumerate(shape):
        if s == -1:
            if i < lead:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            shape[i] = input.shape[i - lead]
        elif i >= lead and input.shape[i - lead] not in (1, s):
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing size "
                               f"({input.shape[i - lead]}) at non-singleton dimension {i}.  Target sizes: {shape}."
                               f"  Tensor sizes: {list(input.shape)}")
    if list(input.shape) == shape:
        return input
    if not input.dtype.is_floating_point:
        return from_numpy(np.ascontiguousarray(np.broadcast_to(input.numpy(), shape)))
    return input * _C._full(shape, 1.0, input.dtype)


def repeat(input, *sizes):
    """input tiled sizes times along each dim (leading new dims allowed), with autograd."""
    from ._tensor import _shape_args
    reps = list(_shape_args(sizes))
    if len(reps) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    out = input.reshape(*([1] * (len(reps) - input.ndim) + list(input.shape)))
    from ._tensor import cat
    for d, r in enumerate(reps):
        if r != 1:
            out = cat([out] * r, d) if r > 0 else out.narrow(d, 0, 0)
    return out


# ---- elementwise -----------------------------------------------------------------------

def clamp(input, min=None, max=None):
    """Each element into [min, max] (max wins where min > max, NaN stays NaN); the gradient
    passes where min <= x <= max, as PyTorch's."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if not input.dtype.is_floating_point:
        lo = -np.inf if min is None else min
        hi = np.inf if max is None else max
        return from_numpy(np.ascontiguousarray(np.clip(input.numpy(), lo, hi).astype(input.numpy().dtype)))
    out = input
    if min is not None:
        out = where(out < min, min, out)
    if max is not None:
        out = where(out > max, max, out)
    return out


def abs(input):
    """|x|; its gradient is sign(x) (0 at 0), as PyTorch's."""
    if not input.dtype.is_floating_point:
        return from_numpy(np.ascontiguousarray(np.abs(input.numpy())))
    return where(input < 0, -input, where(input > 0, input, input - input))


def isnan(input):
    """A uint8 mask (mixprec has no bool dtype): 1 where input is NaN."""
    return from_numpy(np.ascontiguousarray(np.isnan(_values(input)), dtype=np.uint8))


def isfinite(input):
    return from_numpy(np.ascontiguousarray(np.isfinite(_values(input)), dtype=np.uint8))


def isinf(input):
    return from_numpy(np.ascontiguousarray(np.isinf(_values(input)), dtype=np.uint8))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return builtins.bool(np.allclose(_values(input), _values(other), rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input, other):
    return tuple(input.shape) == tuple(other.shape) and builtins.bool(np.array_equal(_values(input), _values(other)))


def _inplace(op):
    """x.add_(y) and the like: x := x op y, on a tensor that records no graph (a leaf that
    requires grad refuses, as in PyTorch: write under torch.no_grad(), or on .data)."""
    def apply(self, *args, **kwargs):
        if self.requires_grad and _C.is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        with no_grad():
            self.copy_(op(self, *args, **kwargs))
        return self
    return apply


def _add(a, b, alpha=1):
    return a + (b * alpha if alpha != 1 else b)


def _sub(a, b, alpha=1):
    return a - (b * alpha if alpha != 1 else b)


def prod(input, dim=None, keepdim=False, *, dtype=None):
    """torch.prod: the product of every element (a 0-dim tensor) or along dim. Integer and
    mask inputs give int64, through NumPy (no gradient), as PyTorch's; under autocast a 16-bit
    input is multiplied in float32, as PyTorch's autocast does for prod. The product is a tree
    of elementwise multiplications (log2(n) engine ops), so autograd gives each element the
    product of the others, exactly where there are zeros: with one zero, that element gets the
    product of the rest; with two, every gradient is zero (PyTorch's rule)."""
    if dim is not None and not isinstance(dim, (builtins.int, np.integer)):
        raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
    if dtype is not None:
        input = _to_dtype(input, dtype)
    if not input.dtype.is_floating_point:
        values = _values(input)
        axis = None if dim is None or input.ndim == 0 else _wrap_dim(dim, input.ndim)
        if dim is not None and input.ndim == 0:
            _wrap_dim(dim, 0)
        out = np.prod(values, axis=axis, keepdims=keepdim and axis is not None, dtype=np.int64)
        return from_numpy(np.array(out, dtype=np.int64))  # a 0-dim result stays 0-dim
    if _C.is_autocast_enabled() and input.dtype in (_C.dtype.bfloat16, _C.dtype.float16):
        input = _to_dtype(input, _C.dtype.float32)
    if dim is None:
        return _product_rows(input.reshape(-1, 1)).reshape()
    d = _wrap_dim(dim, input.ndim)
    if input.ndim == 0:
        return input
    # The reduced dim first (one copy at most), so each halving is a slice of whole rows.
    others = [k for k in range(input.ndim) if k != d]
    columns = builtins.int(np.prod([input.shape[k] for k in others]))
    rows = input.permute(d, *others).reshape(input.shape[d], columns)
    out = _product_rows(rows).reshape(*[1 if k == d else s for k, s in enumerate(input.shape)])
    return out if keepdim else out.squeeze(d)


def _product_rows(rows):
    """The product of the rows of a 2-d tensor, [1, columns]: halves multiplied pairwise."""
    n = rows.shape[0]
    if n == 0:  # the empty product is 1
        return _C.sum(rows, [0], True) * 0.0 + 1.0
    if n == 1:
        return rows
    half = n // 2
    paired = rows.narrow(0, 0, half) * rows.narrow(0, half, half)
    if n % 2:
        return _product_rows(paired) * rows.narrow(0, n - 1, 1)
    return _product_rows(paired)


def chunk(input, chunks, dim=0):
    """Up to `chunks` views along dim, each ceil(size / chunks) long (the last shorter)."""
    if chunks < 1:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    d = _wrap_dim(dim, input.ndim)
    step = -(-input.shape[d] // chunks) if input.shape[d] else 1
    return split(input, step, d)


def split(input, split_size_or_sections, dim=0):
    """Pieces along dim: of split_size each (the last shorter), or of the listed sizes."""
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(split_size_or_sections, int):
        if split_size_or_sections < 1 and size:
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        step = builtins.max(split_size_or_sections, 1)
        sizes = [builtins.min(step, size - s) for s in range(0, size, step)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != size:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size "
                               f"at dimension {d}), but got split_sizes={sizes}")
    out, start = [], 0
    for n in sizes:
        out.append(input.narrow(d, start, n))
        start += n
    return tuple(out)


def _numpy_op(op, result_dtype=None):
    """An op PyTorch computes without a gradient (floor, ceil, round, //, %): through NumPy,
    in the tensor's dtype (bf16 via float32, exact, rounded back)."""
    def apply(self, *args):
        args = [_values(a) if isinstance(a, Tensor) else a for a in args]
        out = np.ascontiguousarray(op(_values(self), *args))
        t = from_numpy(out.astype(out.dtype if result_dtype is None else result_dtype, copy=False))
        return _to_dtype(t, self.dtype) if self.dtype == dtype.bfloat16 else t
    return apply


floor = _numpy_op(np.floor)
ceil = _numpy_op(np.ceil)
round = _numpy_op(np.round)  # half to even, as torch.round
floor_divide = _numpy_op(np.floor_divide)
remainder = _numpy_op(np.remainder)  # the sign of the divisor, as torch.remainder


def rpow(self, base):
    """base ** x for a number base: e^(x ln base), with its gradient."""
    import math
    if base == 0:
        return where(self == 0, 1.0, self * 0.0)
    return _C.exp(self * math.log(base))


def rtruediv(self, other):
    """number / x: the number as a full tensor (oneDNN's division broadcasts only its second
    operand), one rounding as torch's."""
    return _C.div(_C._full(list(self.shape), builtins.float(other), self.dtype), self)


def log1p(input):
    """log(1 + x), accurate where x is tiny (the classic correction: log(w) x / (w - 1) with
    w = 1 + x rounded; x itself where w rounds to 1)."""
    w = input + 1.0
    exact = w == 1.0
    d = where(exact, 1.0, w - 1.0)  # never 0: the branch not taken keeps its gradient finite
    return where(exact, input, _C.log(where(exact, 2.0, w)) * input / d)


def logsumexp(input, dim, keepdim=False):
    """log(sum(e^x)) over dim, shifted by the max (taken without gradient) so that nothing
    overflows; a row of -inf gives -inf, as torch's."""
    d = _wrap_dim(dim, input.ndim)
    m = _values(input).max(axis=d, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0).astype(_values(input).dtype)
    shift = _to_dtype(from_numpy(np.ascontiguousarray(m)), input.dtype)
    out = _C.log(_C.sum(_C.exp(input - shift), [d], True)) + shift
    return out if keepdim else out.squeeze(d)


def _tri(upper):
    def tri(input, diagonal=0):
        """The matrix's elements on or above (triu) / below (tril) the diagonal, zeros elsewhere
        (inf and NaN there too)."""
        rows, cols = input.shape[-2], input.shape[-1]
        keep = (np.triu if upper else np.tril)(np.ones((rows, cols), np.uint8), diagonal)
        return where(from_numpy(keep), input, 0.0 if input.dtype.is_floating_point else 0)
    return tri


triu = _tri(True)
tril = _tri(False)


def unbind(input, dim=0):
    d = _wrap_dim(dim, input.ndim)
    return tuple(input.narrow(d, i, 1).squeeze(d) for i in range(input.shape[d]))


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-d tensors (no gradient here), indexing 'ij' or 'xy'."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but received: {indexing}")
    grids = np.meshgrid(*[_values(t) for t in tensors], indexing=indexing)
    return tuple(_to_dtype(from_numpy(np.ascontiguousarray(g)), t.dtype) for g, t in zip(grids, tensors))


# ---- new tensors -------------------------------------------------------------------------

def _default_dtype(*values):
    return dtype.float32 if any(isinstance(v, builtins.float) for v in values) else dtype.int64


def arange(start=0, end=None, step=1, *, dtype=None, requires_grad=False):
    """torch.arange: int64 from integer arguments, float32 when any is a float (or dtype)."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and larger bound inconsistent with step sign")
    target = dtype or _default_dtype(start, end, step)
    n = builtins.int(np.ceil((end - start) / step))
    values = start + step * np.arange(n, dtype=np.float64) if target.is_floating_point else \
        np.arange(start, end, step, dtype=np.int64)
    return tensor(values, dtype=target, requires_grad=requires_grad)


def linspace(start, end, steps, *, dtype=None, requires_grad=False):
    """steps values from start to end, both included (PyTorch's symmetric formula: the first
    half counted from start, the second from end)."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    i = np.arange(steps, dtype=np.float64)
    if steps == 1:
        values = np.array([start], np.float64)
    else:
        step = (end - start) / (steps - 1)
        values = np.where(i < steps // 2, start + step * i, end - step * (steps - 1 - i))
    return tensor(values, dtype=dtype or _C.dtype.float32, requires_grad=requires_grad)


def _uniform64(n):
    return _C._uniform([builtins.int(n)], 0.0, 1.0, _C.dtype.float64).numpy()


def randint(low=0, high=None, size=None, *, dtype=None, requires_grad=False):
    """Integers uniform in [low, high) from mixprec's generator (manual_seed), int64."""
    if high is None and size is None:
        raise TypeError("randint() missing required argument 'size'")
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if high <= low:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    shape = (size,) if isinstance(size, int) else tuple(size)
    n = builtins.int(np.prod(shape)) if shape else 1
    values = np.minimum(low + np.floor(_uniform64(n) * (high - low)), high - 1).astype(np.int64).reshape(shape)
    t = from_numpy(np.ascontiguousarray(values))
    return _to_dtype(t, dtype) if dtype is not None else t


def randperm(n, *, dtype=None, requires_grad=False):
    """A random permutation of 0..n-1 from mixprec's generator, int64."""
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    t = from_numpy(np.ascontiguousarray(np.argsort(_uniform64(n), kind="stable").astype(np.int64)))
    return _to_dtype(t, dtype) if dtype is not None else t


def eye(n, m=None, *, dtype=None, requires_grad=False):
    return tensor(np.eye(n, n if m is None else m), dtype=dtype or _C.dtype.float32, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, requires_grad=False):
    t = _C._full(list(input.shape), builtins.float(fill_value), dtype or input.dtype)
    return t.requires_grad_(True) if requires_grad else t


def rand_like(input, *, dtype=None, requires_grad=False):
    t = _C._uniform(list(input.shape), 0.0, 1.0, dtype or input.dtype)
    return t.requires_grad_(True) if requires_grad else t


def randn_like(input, *, dtype=None, requires_grad=False):
    t = _C._normal(list(input.shape), 0.0, 1.0, dtype or input.dtype)
    return t.requires_grad_(True) if requires_grad else t


def as_tensor(data, dtype=None, device=None):
    """data as a tensor without a copy where it can be (a tensor, or a NumPy array of a dtype
    mixprec has: memory shared, as torch.as_tensor), else a new tensor."""
    from ._tensor import _check_device
    _check_device(device)
    if isinstance(data, Tensor):
        return data if dtype is None else _to_dtype(data, dtype)
    if isinstance(data, np.ndarray) and data.dtype in (np.float32, np.float64, np.float16, np.int64, np.int32,
                                                       np.uint8):
        t = from_numpy(data)
        return t if dtype is None else _to_dtype(t, dtype)
    return tensor(data, dtype=dtype)


def is_tensor(obj):
    return isinstance(obj, Tensor)


def is_floating_point(input):
    return input.dtype.is_floating_point


def numel(input):
    return input.numel()


# ---- grad mode -------------------------------------------------------------------------

class enable_grad(_EngineScope):
    """Context manager and decorator: graphs are recorded inside, even within no_grad."""

    def _new_scope(self):
        return _C._GradModeScope(True)


class set_grad_enabled(_EngineScope):
    """set_grad_enabled(mode): called, sets this thread's grad mode from now on; as a context
    manager (or decorator), only inside, as torch.set_grad_enabled."""

    def __init__(self, mode):
        self.mode = builtins.bool(mode)
        self.previous = _C.is_grad_enabled()
        _C._set_grad_enabled(self.mode)
        super().__init__()

    def _new_scope(self):
        return _C._GradModeScope(self.mode)

    def __enter__(self):
        _C._set_grad_enabled(self.previous)  # the scope records the mode before the call
        return super().__enter__()


class inference_mode(_EngineScope):
    """torch.inference_mode(mode=True): no_grad here (mixprec has no separate inference tensors)."""

    def __init__(self, mode=True):
        self.mode = builtins.bool(mode)
        super().__init__()

    def _new_scope(self):
        return _C._GradModeScope(not self.mode)


# ---- saving ------------------------------------------------------------------------------

def save(obj, f, pickle_protocol=pickle.DEFAULT_PROTOCOL):
    """Pickles obj (a state_dict, a tensor, a dict of them, a model) to a path or a binary
    file, as torch.save does; tensors keep dtype, shape and values (bf16 exact). A path is
    written atomically (a temporary file renamed into place), so a crash never leaves half a
    file. Read it with mixprec.load(f). The format is Python's pickle, not torch's zip: a
    torch checkpoint goes through NumPy (docs/python.md)."""
    if hasattr(f, "write"):
        pickle.dump(obj, f, protocol=pickle_protocol)
        return
    path = os.fspath(f)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as out:
            pickle.dump(obj, out, protocol=pickle_protocol)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_pickle(f):
    """What save wrote (a path or a binary file). Like torch.load, this runs pickle: load only
    files you trust."""
    if hasattr(f, "read"):
        return pickle.load(f)
    with open(os.fspath(f), "rb") as inp:
        return pickle.load(inp)
