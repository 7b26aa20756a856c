"""torch functions and Tensor methods that ported scripts call, each composed from ops mixprec
already has, so that autograd works without a kernel of its own:

- arithmetic by name (x.mul(y), torch.add(x, y, alpha=2), x.sub_, x.addcmul_) on the engine's
  operators; integer tensors, which the engine's arithmetic refuses, through NumPy with
  PyTorch's result dtype (no gradient, as integers have none in PyTorch);
- rearrangements (flip, roll, diag, diagonal, rot90, movedim, tile, repeat_interleave,
  scatter, take_along_dim, ...) as index_select / gather / where, whose backward adds each
  gradient back to the element it came from (scatter_add: the writers of a position summed
  by a segmented scan, so every source element's gradient is the output's at its target, as
  PyTorch's);
- order statistics (median, kthvalue, quantile) on sort's values, which carry the gradient;
- results PyTorch gives without a gradient (indices, counts, masks, random draws) through
  NumPy and mixprec's own generator (manual_seed);
- settings scripts write (set_default_dtype, finfo, iinfo, use_deterministic_algorithms,
  backends.cudnn.*), accepted and, where mixprec has no choice to make, documented as such.

Importing this module attaches the methods to mixprec.Tensor (as _methods.py does).
docs/python.md lists what differs from PyTorch."""
import builtins
import collections
import math
import sys
import types

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor, dtype
from . import _methods  # first: the Tensor methods defined here override some of its (any, all)
from . import _functions as F
from ._masks import where, _mask_array
from ._methods import _numpy_values as _values
from ._tensor import _dims, _shape_args, _to_dtype, _wrap_dim, cat, from_numpy, no_grad

# ---- helpers ------------------------------------------------------------------------------


def _array_tensor(array, like=None):
    """A NumPy result as a new tensor (bool as mixprec's uint8 masks); `like`'s dtype where it
    is bfloat16 (NumPy computed it in float32, exactly)."""
    array = np.asarray(array)
    if array.dtype == np.bool_:
        array = array.astype(np.uint8)
    t = from_numpy(np.ascontiguousarray(array))
    return _to_dtype(t, like) if like == dtype.bfloat16 else t


def _is_float(x):
    return isinstance(x, Tensor) and x.dtype.is_floating_point


def _number_operand(input, other):
    """torch.mul(2, x) and the like: a Python number first, as a tensor of other's shape and
    floating dtype (the engine's arithmetic broadcasts its second operand only)."""
    if isinstance(input, Tensor) or not _is_float(other):
        return input
    return _C._full(list(other.shape), builtins.float(input), other.dtype)


_TORCH_NUMPY = {dtype.int64: np.int64, dtype.int32: np.int32, dtype.uint8: np.uint8}


def _integer_result(op, a, b, true_division=False):
    """a op b for integer tensors (and Python numbers): PyTorch's result dtype (a Python int
    keeps the tensor's dtype, a Python float gives float32; two tensors promote)."""
    va = _values(a) if isinstance(a, Tensor) else a
    vb = _values(b) if isinstance(b, Tensor) else b
    out = np.asarray(op(va, vb))
    if true_division or isinstance(a, builtins.float) or isinstance(b, builtins.float):
        return _array_tensor(out.astype(np.float32))
    tensors = [t.dtype for t in (a, b) if isinstance(t, Tensor)]
    kinds = [np.dtype(_TORCH_NUMPY[d]) for d in tensors]
    return _array_tensor(out.astype(np.result_type(*kinds)))


def _arith(name, engine, numpy_op):
    def apply(input, other):
        input = _number_operand(input, other)
        if _is_float(input) or _is_float(other):
            return engine(input, other)
        return _integer_result(numpy_op, input, other)
    apply.__name__ = name
    return apply


mul = _arith("mul", lambda a, b: a * b, np.multiply)
multiply = mul
_add = _arith("add", lambda a, b: a + b, np.add)
_sub = _arith("sub", lambda a, b: a - b, np.subtract)


def add(input, other, *, alpha=1):
    """input + alpha * other."""
    return _add(input, other if alpha == 1 else mul(other, alpha) if isinstance(other, Tensor) else other * alpha)


def sub(input, other, *, alpha=1):
    """input - alpha * other."""
    return _sub(input, other if alpha == 1 else mul(other, alpha) if isinstance(other, Tensor) else other * alpha)


subtract = sub


def div(input, other, *, rounding_mode=None):
    """input / other (true division; integers give float32), or rounded: 'trunc' / 'floor'
    (no gradient here; PyTorch's is zero)."""
    input = _number_operand(input, other)
    if rounding_mode is None:
        if _is_float(input) or _is_float(other):
            return input / other
        return _integer_result(np.true_divide, input, other, true_division=True)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                         f"'{rounding_mode}'")
    if not (_is_float(input) or _is_float(other)):
        op = np.floor_divide if rounding_mode == "floor" else (lambda a, b: np.trunc(np.true_divide(a, b)))
        return _integer_result(op, input, other)
    quotient = _values(input / other)
    like = (input / other).dtype
    rounded = np.floor(quotient) if rounding_mode == "floor" else np.trunc(quotient)
    return _to_dtype(_array_tensor(rounded), like)


divide = div
true_divide = div


def neg(input):
    if not input.dtype.is_floating_point:
        return _array_tensor(-_values(input))
    return _C.neg(input)


negative = neg


def square(input):
    return mul(input, input)


def reciprocal(input):
    """1 / x (integers give float32, as PyTorch's)."""
    if not input.dtype.is_floating_point:
        input = _to_dtype(input, dtype.float32)
    return F.rtruediv(input, 1.0)


def rsqrt(input):
    """1 / sqrt(x)."""
    if not input.dtype.is_floating_point:
        input = _to_dtype(input, dtype.float32)
    return F.rtruediv(_C.sqrt(input), 1.0)


def sign(input):
    """-1, 0 or 1 (0 for NaN, as PyTorch 1.13's CPU kernel); its gradient is zero, and the
    result records a graph as PyTorch's does (the zero comes from x - x at x == 0)."""
    if not input.dtype.is_floating_point:
        return _array_tensor(np.sign(_values(input)).astype(_values(input).dtype))
    zero = where(input == 0, input - input, 0.0)
    return where(input > 0, 1.0, where(input < 0, -1.0, zero))


trunc = F._numpy_op(np.trunc)  # no gradient, as floor and ceil here (PyTorch's is zero)
fix = trunc


def frac(input):
    """x - trunc(x), the gradient 1 as PyTorch's."""
    return input - trunc(input)


def lerp(input, end, weight):
    """input + weight * (end - input), PyTorch's two-sided formula (exact at weight 0 and 1):
    end - (end - input) * (1 - weight) where weight >= 0.5."""
    diff = end - input
    if not isinstance(weight, Tensor):
        return input + diff * weight if builtins.abs(weight) < 0.5 else end - diff * (1.0 - weight)
    return where(F.abs(weight) < 0.5, input + weight * diff, end - diff * (1.0 - weight))


def addcmul(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 * tensor2."""
    product = tensor1 * tensor2
    return input + (product if value == 1 else product * value)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """input + value * tensor1 / tensor2."""
    quotient = tensor1 / tensor2
    return input + (quotient if value == 1 else quotient * value)


def _finite_limits(t):
    info = finfo(t.dtype)
    return info.max, info.min


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by default with 0 and the dtype's largest and smallest
    finite values); the gradient passes at finite elements only, as PyTorch's."""
    if not input.dtype.is_floating_point:
        return input.clone()
    big, small = _finite_limits(input)
    values = _values(input)
    out = where(np.isnan(values), nan, input)
    out = where(np.isposinf(values), big if posinf is None else posinf, out)
    return where(np.isneginf(values), small if neginf is None else neginf, out)


# ---- rearrangements --------------------------------------------------------------------------

def _select(input, d, idx):
    """input's slices at idx (int64 NumPy, in range) along dim d, with the gradient."""
    return F.index_select(input, d, np.ascontiguousarray(idx, dtype=np.int64))


def flip(input, dims):
    """The elements in reverse order along each of dims (a copy, as PyTorch's)."""
    dims = [_wrap_dim(d, builtins.max(input.ndim, 1)) for d in _dims(dims)]
    if len(set(dims)) != len(dims):
        twice = next(d for d in dims if dims.count(d) > 1)
        raise RuntimeError(f"dim {twice} appears multiple times in the list of dims")
    out = input
    for d in dims:
        if input.ndim:
            out = _select(out, d, np.arange(input.shape[d] - 1, -1, -1))
    return out if out is not input else input.clone()


def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, [1])


def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, [0])


def roll(input, shifts, dims=None):
    """Elements shifted along dims (wrapping around); no dims: the flattened tensor, shape kept."""
    shifts = [shifts] if isinstance(shifts, builtins.int) else list(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return roll(input.reshape(-1), shifts, 0).reshape(*input.shape)
    dims = _dims(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = input
    for shift, dim in zip(shifts, dims):
        d = _wrap_dim(dim, input.ndim)
        n = input.shape[d]
        if n:
            out = _select(out, d, (np.arange(n) - shift) % n)
    return out


def movedim(input, source, destination):
    """input's dims `source` moved to positions `destination`, the others in order."""
    src, dst = _dims(source), _dims(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain the "
                           f"same number of dims as destination ({dst} dims)")
    n = input.ndim
    src = [_wrap_dim(d, n) for d in src]
    dst = [_wrap_dim(d, n) for d in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(_dims(source))})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(_dims(destination))})")
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return input.permute(*order) if n else input


moveaxis = movedim


def swapaxes(input, axis0, axis1):
    return input.transpose(axis0, axis1)


swapdims = swapaxes


def unflatten(input, dim, sizes):
    """Dim `dim` split into `sizes` (one of them may be -1)."""
    d = _wrap_dim(dim, input.ndim)
    sizes = list(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    known = builtins.int(np.prod([s for s in sizes if s != -1])) if sizes else 1
    if sizes.count(-1) == 1 and known:
        sizes[sizes.index(-1)] = input.shape[d] // known
    if builtins.int(np.prod(sizes)) != input.shape[d]:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({input.shape[d]}) in the input tensor")
    return input.reshape(*(list(input.shape[:d]) + sizes + list(input.shape[d + 1:])))


def reshape_as(self, other):
    return self.reshape(*other.shape)


def tile(input, dims):
    """input repeated dims times along each dim (dims shorter than ndim: leading 1s)."""
    dims = list(_shape_args((dims,)))
    dims = [1] * (input.ndim - len(dims)) + dims
    return F.repeat(input, *dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along dim) repeated `repeats` times in place; torch's one-argument
    form repeat_interleave(counts) gives the indices 0, 0, 1, ... (int64)."""
    if repeats is None:  # torch.repeat_interleave(repeats)
        counts = _values(input).astype(np.int64)
        return _array_tensor(np.repeat(np.arange(counts.size, dtype=np.int64), counts))
    if dim is None:
        input, d = input.reshape(-1), 0
    else:
        d = _wrap_dim(dim, input.ndim)
    n = input.shape[d] if input.ndim else 1
    counts = _values(repeats).astype(np.int64).reshape(-1) if isinstance(repeats, Tensor) else \
        np.full(n, builtins.int(repeats), dtype=np.int64)
    if counts.size == 1 and n != 1:
        counts = np.full(n, counts[0], dtype=np.int64)
    if counts.size != n:
        raise RuntimeError("repeats must have the same size as input along dim")
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    return _select(input, d, np.repeat(np.arange(n, dtype=np.int64), counts))


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of the matrices in dims (dim1, dim2), appended as the last dim (a copy
    here; PyTorch gives a view)."""
    a, b = _wrap_dim(dim1, input.ndim), _wrap_dim(dim2, input.ndim)
    if a == b:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    moved = movedim(input, [a, b], [-2, -1])
    rows, cols = moved.shape[-2], moved.shape[-1]
    start_row, start_col = (0, offset) if offset >= 0 else (-offset, 0)
    length = builtins.max(0, builtins.min(rows - start_row, cols - start_col))
    flat = moved.reshape(*(list(moved.shape[:-2]) + [rows * cols]))
    i = np.arange(length)
    return _select(flat, flat.ndim - 1, (start_row + i) * cols + start_col + i)


def diag(input, diagonal=0):
    """A 1-d input: a square matrix with it on the given diagonal; a 2-d input: that diagonal."""
    if input.ndim == 2:
        return globals()["diagonal"](input, diagonal)
    if input.ndim != 1:
        raise RuntimeError("matrix or a vector expected")
    n = input.shape[0]
    size = n + builtins.abs(diagonal)
    row, col = (np.arange(n), np.arange(n) + diagonal) if diagonal >= 0 else (np.arange(n) - diagonal, np.arange(n))
    pick = np.full(size * size, n, dtype=np.int64)  # n: the zero appended below
    pick[row * size + col] = np.arange(n)
    padded = cat([input, _C._zeros([1], input.dtype)])
    return _select(padded, 0, pick).reshape(size, size)


def trace(input):
    """The sum of a matrix's main diagonal."""
    if input.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " + str(input.ndim))
    return diagonal(input).sum()


def rot90(input, k=1, dims=(0, 1)):
    """Rotated by 90 degrees k times, from dims[0] towards dims[1]."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    a, b = _wrap_dim(dims[0], input.ndim), _wrap_dim(dims[1], input.ndim)
    if a == b:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} and dim1 = {b}")
    k %= 4
    if k == 1:
        return flip(input, [b]).transpose(a, b)
    if k == 2:
        return flip(input, [a, b])
    if k == 3:
        return flip(input, [a]).transpose(a, b)
    return input.clone()


def outer(input, vec2):
    """input[i] * vec2[j] (elementwise products, not a matmul: float32 under autocast, as
    PyTorch's)."""
    for arg, t in (("self", input), ("vec2", vec2)):
        if t.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {arg}, but got {t.ndim}-D")
    column = F.expand(input.reshape(-1, 1), input.shape[0], vec2.shape[0])
    return mul(column, vec2.reshape(1, -1))


ger = outer


def broadcast_to(input, size):
    return F.expand(input, *_shape_args((size,)))


def broadcast_tensors(*tensors):
    shape = np.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(F.expand(t, *shape) for t in tensors)


def _atleast(n):
    def atleast(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            return tuple(atleast(t) for t in tensors[0])
        if len(tensors) > 1:
            return tuple(atleast(t) for t in tensors)
        t = tensors[0]
        if t.ndim >= n:
            return t
        if n == 3 and t.ndim == 2:
            return t.unsqueeze(-1)
        if n == 3 and t.ndim == 1:
            return t.reshape(1, -1, 1)
        return t.reshape(*([1] * (n - t.ndim) + list(t.shape)))
    atleast.__name__ = f"atleast_{n}d"
    return atleast


atleast_1d, atleast_2d, atleast_3d = _atleast(1), _atleast(2), _atleast(3)


def hstack(tensors):
    tensors = atleast_1d(list(tensors))
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    return cat(atleast_2d(list(tensors)), 0)


row_stack = vstack


def dstack(tensors):
    return cat(atleast_3d(list(tensors)), 2)


def column_stack(tensors):
    return hstack([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors])


def take_along_dim(input, indices, dim=None):
    """input's elements at indices along dim (input and indices broadcast but for dim); no dim:
    of the flattened input."""
    if dim is None:
        return F.gather(input.reshape(-1), 0, indices.reshape(-1)).reshape(*indices.shape)
    d = _wrap_dim(dim, input.ndim)
    if input.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    shape = list(np.broadcast_shapes(tuple(s for i, s in enumerate(input.shape) if i != d),
                                     tuple(s for i, s in enumerate(indices.shape) if i != d)))
    in_shape, idx_shape = list(shape), list(shape)
    in_shape.insert(d, input.shape[d])
    idx_shape.insert(d, indices.shape[d])
    idx = np.ascontiguousarray(np.broadcast_to(_values(indices), idx_shape))
    return F.gather(F.expand(input, *in_shape), d, idx)


# ---- scatter and index_add ----------------------------------------------------------------

def _scatter_positions(name, input, dim, index, src_shape):
    """The flat positions in input that index writes (PyTorch's scatter geometry: out[...,
    index[i][j], ...] for dim's position) and the flat source positions they come from; PyTorch's
    errors for a bad index."""
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    if not isinstance(index, Tensor) or index.dtype != dtype.int64:
        raise RuntimeError(f"{name}(): Expected dtype int64 for index")
    idx = index.numpy().astype(np.int64)
    if idx.ndim != input.ndim and not (idx.ndim <= 1 and input.ndim <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    shape_in = tuple(input.shape) or (1,)
    idx = idx.reshape(idx.shape or (1,))
    src_shape = tuple(src_shape) or (1,)
    for k in range(idx.ndim):
        if (k != d and idx.shape[k] > shape_in[k]) or (src_shape is not None and idx.shape[k] > src_shape[k]):
            raise RuntimeError(f"Expected index {list(idx.shape)} to be smaller than self {list(input.shape)} apart "
                               f"from dimension {d} and to be smaller size than src {list(src_shape)}")
    bad = (idx < 0) | (idx >= shape_in[d])
    if bad.any():
        raise RuntimeError(f"index {idx[bad].flat[0]} is out of bounds for dimension {d} with size {shape_in[d]}")
    pos = list(np.indices(idx.shape))
    source = np.ravel_multi_index(tuple(pos), src_shape).reshape(-1)
    pos[d] = idx
    target = np.ravel_multi_index(tuple(pos), shape_in).reshape(-1)
    return target, source


def _check_same_dtype(input, src):
    if isinstance(src, Tensor) and src.dtype != input.dtype:  # "scatter()" for scatter_add too, as PyTorch's
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """input with out[index[i][j]][j] = src[i][j] (dim 0; and so on), or = value. Where index
    repeats a position, the last writer (row-major) wins, and only it gets the gradient
    (PyTorch leaves which writer wins undefined and gives every writer the gradient)."""
    if reduce is not None:
        if reduce == "add":
            return scatter_add(input, dim, index, src)
        raise NotImplementedError(f"mixprec's scatter: reduce='add' only, got reduce={reduce!r}")
    if src is None:
        src = value
    if not isinstance(src, Tensor):
        target, _ = _scatter_positions("scatter", input, dim, index, index.shape)
        written = np.zeros(input.numel(), dtype=bool)
        written[target] = True
        return where(written.reshape(input.shape), src, input)
    _check_same_dtype(input, src)
    target, source = _scatter_positions("scatter", input, dim, index, src.shape)
    winner = np.full(input.numel(), -1, dtype=np.int64)
    order = np.argsort(target, kind="stable")
    last = np.r_[target[order][1:] != target[order][:-1], True]  # the last of each run of equal targets
    winner[target[order][last]] = source[order][last]
    written = winner >= 0
    picked = F._take(src, np.where(written, winner, 0), tuple(input.shape))
    return where(written.reshape(input.shape), picked, input)


def _segmented_scan(values, segment_start, combine, identity):
    """The inclusive scan (running sums or products) of a 1-d tensor within segments, element i's
    segment starting at segment_start[i]: Hillis-Steele's log2(longest segment) steps, each one
    gather (of the element `step` back, or of the identity) and one combine, so the gradient
    follows every partial result; O(n log n) work instead of a loop of n ops."""
    n = values.shape[0]
    positions = np.arange(n, dtype=np.int64)
    longest = builtins.int((positions - segment_start).max()) + 1 if n else 0
    step = 1
    while step < longest:
        back = positions - step
        padded = cat([values, _C._full([1], identity, values.dtype)])
        values = combine(values, F._take(padded, np.where(back >= segment_start, back, n), (n,)))
        step *= 2
    return values


def scatter_add(input, dim, index, src):
    """input with src[i][j] added at out[index[i][j]][j] (dim 0; and so on), repeated targets
    adding up; the gradient of each src element is the output's at its target, and input's
    passes unchanged, as PyTorch's."""
    _check_same_dtype(input, src)
    target, source = _scatter_positions("scatter_add", input, dim, index, src.shape)
    if not input.dtype.is_floating_point:
        out = np.array(_values(input), copy=True).reshape(-1)
        np.add.at(out, target, _values(src).reshape(-1)[source])
        return _array_tensor(out.reshape(input.shape))
    if target.size == 0:
        return input.clone()
    # The engine's index_add over input's elements as rows of one: the writers' values added
    # at their targets in the order of the writers (f32 sums), each writer's gradient the
    # output's at its target.
    writers = F._take(src, source, (builtins.int(source.size),)).reshape(-1, 1)
    rows = input.reshape(-1, 1)
    return _C.index_add(rows, from_numpy(np.ascontiguousarray(target, dtype=np.int64)), writers).reshape(input.shape)


def index_add(input, dim, index, source, *, alpha=1):
    """input with alpha * source's slices added at the positions index names along dim."""
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    idx = F._index_array(index, input.shape[d] if input.ndim else 1, d).reshape(-1)
    if source.ndim and idx.size != source.shape[d]:
        raise RuntimeError(f"index_add_(): Number of indices ({idx.size}) should be equal to source.size(dim): "
                           f"({source.shape[d]}), for dim: {d}")
    source = source if alpha == 1 else mul(source, alpha)
    if _is_float(input) and input.ndim and source.ndim == input.ndim:
        # The engine's index_add adds whole rows along dim 0: dim d is moved there and back.
        _check_same_dtype(input, source)
        rows = from_numpy(np.ascontiguousarray(idx, dtype=np.int64))
        if d == 0:
            return _C.index_add(input, rows, source)
        out = _C.index_add(movedim(input, d, 0).contiguous(), rows, movedim(source, d, 0).contiguous())
        return movedim(out, 0, d).contiguous()
    shape = [1] * source.ndim
    if source.ndim:
        shape[d] = idx.size
    full = np.ascontiguousarray(np.broadcast_to(idx.reshape(shape), tuple(source.shape)))
    return scatter_add(input, d, from_numpy(full), source)


def index_fill(input, dim, index, value):
    """input with value at the positions index names along dim."""
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    idx = F._index_array(index, input.shape[d] if input.ndim else 1, d).reshape(-1)
    mask = np.zeros(input.shape[d] if input.ndim else 1, dtype=bool)
    mask[idx] = True
    shape = [1] * input.ndim
    if input.ndim:
        shape[d] = mask.size
    if isinstance(value, Tensor):
        value = value.item()
    return where(np.broadcast_to(mask.reshape(shape), tuple(input.shape)), value, input)


def masked_select(input, mask):
    """The elements of input where mask (broadcast with it) is nonzero, as a 1-d tensor."""
    m = _mask_array(mask)
    shape = np.broadcast_shapes(m.shape, tuple(input.shape))
    full = F.expand(input, *shape) if tuple(input.shape) != shape else input
    positions = np.flatnonzero(np.broadcast_to(m, shape))
    return F._take(full, positions, (positions.size,))


def masked_fill(input, mask, value):
    return input.masked_fill(mask, value)


# ---- order statistics --------------------------------------------------------------------

kthvalue_result = collections.namedtuple("kthvalue", ["values", "indices"])
median_result = collections.namedtuple("median", ["values", "indices"])
mode_result = collections.namedtuple("mode", ["values", "indices"])


def _pick_along(input, d, positions, keepdim, result):
    """(values, indices) of input at per-slice positions of its ascending sort along d."""
    order = F.sort(input, d).indices.numpy()
    idx = np.take_along_axis(order, np.expand_dims(positions, d), d)
    values = F._gather_along(input, idx, d)
    if not keepdim:
        values, idx = values.squeeze(d), idx.squeeze(d)
    return result(values, _array_tensor(idx.astype(np.int64)))


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element along dim (NaN counts as the largest) and its index."""
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    if input.ndim == 0:
        if k != 1:
            raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
        return kthvalue_result(input.clone(), _array_tensor(np.array(0, dtype=np.int64)))
    n = input.shape[d]
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    positions = np.full(tuple(s for i, s in enumerate(input.shape) if i != d), k - 1, dtype=np.int64)
    return _pick_along(input, d, positions, keepdim, kthvalue_result)


def median(input, dim=None, keepdim=False):
    """The lower median (the ((n - 1) // 2)-th smallest; NaN where a slice has a NaN, the
    first one's index), as PyTorch's; no dim: of all elements, the value only."""
    if dim is None:
        if input.numel() == 0:
            return _C._full([], np.nan, input.dtype) if input.dtype.is_floating_point else input.reshape(-1).sum()
        return median(input.reshape(-1), 0).values.reshape()
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    if input.ndim == 0:
        return median_result(input, _array_tensor(np.array(0, dtype=np.int64)))
    n = input.shape[d]
    if n == 0:
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    values = _values(input)
    nans = np.isnan(values).sum(axis=d) if values.dtype.kind == "f" else \
        np.zeros(values.shape[:d] + values.shape[d + 1:], np.int64)
    # sort puts NaN last (stably): the first NaN of a slice is at n - nans there.
    positions = np.where(nans > 0, n - nans, (n - 1) // 2).astype(np.int64)
    return _pick_along(input, d, positions, keepdim, median_result)


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaN (NaN only where a slice is all NaN)."""
    if dim is None:
        return nanmedian(input.reshape(-1), 0).values.reshape()
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    values = _values(input)
    nans = np.isnan(values).sum(axis=d) if values.dtype.kind == "f" else 0
    valid = input.shape[d] - nans
    positions = np.where(valid > 0, (valid - 1) // 2, 0).astype(np.int64)
    return _pick_along(input, d, np.broadcast_to(positions, values.shape[:d] + values.shape[d + 1:]), keepdim,
                       median_result)


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest among ties) and the index of its last
    occurrence, as PyTorch's CPU kernel; no gradient is routed here beyond the gather."""
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    if input.ndim == 0:
        return mode_result(input, _array_tensor(np.array(0, dtype=np.int64)))
    values = np.moveaxis(_values(input), d, -1)
    rows = values.reshape(-1, values.shape[-1])
    idx = np.empty(rows.shape[0], dtype=np.int64)
    for r, row in enumerate(rows):
        uniq, counts = np.unique(row, return_counts=True)
        best = uniq[np.argmax(counts)]
        idx[r] = np.flatnonzero(row == best)[-1]
    idx = np.expand_dims(idx.reshape(values.shape[:-1]), d)
    out = F._gather_along(input, idx, d)
    if not keepdim:
        out, idx = out.squeeze(d), idx.squeeze(d)
    return mode_result(out, _array_tensor(idx))


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along dim (all elements without dim) by PyTorch's rule: the sorted
    values at rank q * (n - 1), interpolated (linear, lower, higher, nearest, midpoint); NaN
    where a slice has one. A tensor q adds its dim in front. The gradient reaches the (one or
    two) sorted elements each quantile interpolates."""
    if not input.dtype.is_floating_point or input.dtype in (dtype.float16, dtype.bfloat16):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if interpolation not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    qs = np.asarray(_values(q) if isinstance(q, Tensor) else q, dtype=np.float64)
    if qs.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if ((qs < 0) | (qs > 1)).any():
        if qs.ndim == 0:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {builtins.float(qs)}")
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if dim is None:
        x, d = input.reshape(-1), 0
    else:
        x, d = input, _wrap_dim(dim, builtins.max(input.ndim, 1))
        if x.ndim == 0:
            x = x.reshape(1)
    moved = movedim(x, d, -1) if x.ndim > 1 else x
    n = moved.shape[-1]
    ordered = F.sort(moved, -1).values
    ranks = qs.reshape(-1) * (n - 1)
    lower = np.floor(ranks).astype(np.int64)
    upper = np.ceil(ranks).astype(np.int64)
    if interpolation == "nearest":
        lower = upper = np.round(ranks).astype(np.int64)  # half to even, as PyTorch's round
    elif interpolation == "lower":
        upper = lower
    elif interpolation == "higher":
        lower = upper
    lo = _select(ordered, ordered.ndim - 1, lower)
    hi = _select(ordered, ordered.ndim - 1, upper)
    if interpolation == "linear":
        weight = _to_dtype(_array_tensor(ranks - lower), input.dtype)
        out = lerp(lo, hi, weight)
    elif interpolation == "midpoint":
        out = lo + (hi - lo) * 0.5
    else:
        out = lo
    has_nan = np.isnan(_values(moved)).any(axis=-1, keepdims=True)
    out = where(np.broadcast_to(has_nan, tuple(out.shape)), np.nan, out) if has_nan.any() else out
    out = movedim(out, -1, 0)  # [len(q), ...]
    if keepdim:
        if dim is None:
            out = out.reshape(*([out.shape[0]] + [1] * input.ndim))
        elif input.ndim:
            out = out.unsqueeze(d + 1)
    return out.squeeze(0) if qs.ndim == 0 else out


def cumprod(input, dim, *, dtype=None):
    """Running products along dim, in float64 rounded once at each output as PyTorch's CPU
    kernel (which accumulates in double); zeros and negatives are plain factors (no log/exp),
    so values and gradients are exact there; a segmented scan (log2(n) products)."""
    d = _wrap_dim(dim, builtins.max(input.ndim, 1))
    if dtype is not None:
        input = _to_dtype(input, dtype)
    if not input.dtype.is_floating_point:
        return _array_tensor(np.cumprod(_values(input), axis=d).astype(_values(input).dtype))
    if input.ndim == 0 or input.shape[d] == 0:
        return input.clone()
    moved = movedim(_to_dtype(input, _C.dtype.float64), d, -1)
    n = moved.shape[-1]
    flat = moved.reshape(-1)
    segment_start = np.arange(flat.shape[0], dtype=np.int64) // n * n
    out = _segmented_scan(flat, segment_start, lambda a, b: a * b, 1.0).reshape(*moved.shape)
    return _to_dtype(movedim(out, -1, d), input.dtype)


# ---- reductions --------------------------------------------------------------------------

def _reduce_mask(name, numpy_reduce):
    def reduce(input, dim=None, keepdim=False):
        nonzero = _values(input) != 0
        if dim is None:
            return _array_tensor(np.array(numpy_reduce(nonzero), dtype=np.uint8))
        d = _wrap_dim(dim, builtins.max(input.ndim, 1))
        return _array_tensor(np.asarray(numpy_reduce(nonzero, axis=d, keepdims=keepdim), dtype=np.uint8))
    reduce.__name__ = name
    reduce.__doc__ = f"torch.{name}: a uint8 0/1 result (mixprec has no bool dtype)."
    return reduce


any = _reduce_mask("any", np.any)
all = _reduce_mask("all", np.all)


def count_nonzero(input, dim=None):
    nonzero = _values(input) != 0
    axis = None if dim is None else tuple(_wrap_dim(d, builtins.max(input.ndim, 1)) for d in _dims(dim))
    return _array_tensor(np.asarray(np.count_nonzero(nonzero, axis=axis), dtype=np.int64))


def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """(var, mean) as torch.var_mean."""
    mean = input.mean(dim, keepdim) if dim is not None else (input.mean().reshape(*([1] * input.ndim))
                                                             if keepdim else input.mean())
    return F.var(input, dim, unbiased, keepdim, correction=correction), mean


def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    variance, mean = var_mean(input, dim, unbiased, keepdim, correction=correction)
    return _C.sqrt(variance), mean


def dist(input, other, p=2):
    """The p-norm (p = 1 or 2) of input - other."""
    return F.norm(input - other, p)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Pairwise distances between the rows of x1 [..., P, M] and x2 [..., R, M]: p = 2 (the
    square root of the summed squared differences, computed directly rather than PyTorch's
    |a|^2 + |b|^2 - 2ab, so more accurate), 1, or inf; the gradient at a zero distance is 0,
    as PyTorch's."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if p not in (1, 2, math.inf):
        raise NotImplementedError(f"mixprec's cdist: p=2, 1 or inf only, got p={p!r}")
    batch = np.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    P, R, M = x1.shape[-2], x2.shape[-2], x1.shape[-1]
    a = F.expand(x1.unsqueeze(-2), *(list(batch) + [P, R, M]))
    diff = a - x2.unsqueeze(-3)
    if p == 2:
        squared = (diff * diff).sum(-1)
        positive = squared > 0
        return where(positive, _C.sqrt(where(positive, squared, 1.0)), 0.0)
    magnitude = F.abs(diff)
    return magnitude.sum(-1) if p == 1 else F.tensor_max(magnitude, -1).values


# ---- masks and comparisons ---------------------------------------------------------------

def _logical(name, op):
    def apply(input, other):
        return _array_tensor(op(_values(input) != 0, _values(other) != 0))
    apply.__name__ = name
    return apply


logical_and = _logical("logical_and", np.logical_and)
logical_or = _logical("logical_or", np.logical_or)
logical_xor = _logical("logical_xor", np.logical_xor)


def logical_not(input):
    return _array_tensor(_values(input) == 0)


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    other = _values(other) if isinstance(other, Tensor) else other
    return _array_tensor(np.isclose(_values(input), other, rtol=rtol, atol=atol, equal_nan=equal_nan))


def isposinf(input):
    return _array_tensor(np.isposinf(_values(input)))


def isneginf(input):
    return _array_tensor(np.isneginf(_values(input)))


def nonzero(input, *, as_tuple=False):
    """The indices of nonzero elements: [n, ndim] int64, or (as_tuple) one 1-d tensor a dim."""
    positions = np.argwhere(_values(input) != 0).astype(np.int64)
    if as_tuple:
        if input.ndim == 0:
            return (_array_tensor(np.zeros(positions.shape[0], dtype=np.int64)),)
        return tuple(_array_tensor(positions[:, k]) for k in range(input.ndim))
    return _array_tensor(positions)


def argwhere(input):
    return nonzero(input)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted; PyTorch's CPU order is sorted too), optionally the inverse
    indices and counts; along dim: the distinct slices. No gradient, as PyTorch's."""
    values = _values(input)
    result = np.unique(values, return_inverse=True, return_counts=True, axis=dim)
    distinct, inverse, counts = result
    out = _to_dtype(_array_tensor(distinct), input.dtype)
    extra = []
    if return_inverse:
        extra.append(_array_tensor(inverse.reshape(values.shape if dim is None else -1).astype(np.int64)))
    if return_counts:
        extra.append(_array_tensor(counts.astype(np.int64)))
    return (out, *extra) if extra else out


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        raise NotImplementedError("mixprec's unique_consecutive: dim=None only")
    values = _values(input).reshape(-1)
    starts = np.r_[True, values[1:] != values[:-1]] if values.size else np.zeros(0, bool)
    out = _to_dtype(_array_tensor(values[starts]), input.dtype)
    extra = []
    if return_inverse:
        extra.append(_array_tensor((np.cumsum(starts) - 1).reshape(input.shape).astype(np.int64)))
    if return_counts:
        extra.append(_array_tensor(np.diff(np.r_[np.flatnonzero(starts), values.size]).astype(np.int64)))
    return (out, *extra) if extra else out


def bincount(input, weights=None, minlength=0):
    """Counts of each value of a 1-d non-negative integer tensor (int64), or sums of weights
    (float64 for float64 weights, else float32, as PyTorch's)."""
    if input.dtype.is_floating_point:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    values = _values(input)
    if values.ndim != 1 or (values.size and values.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is None:
        return _array_tensor(np.bincount(values, minlength=minlength).astype(np.int64))
    w = _values(weights)
    if w.shape != values.shape:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out = np.bincount(values, weights=w.astype(np.float64), minlength=minlength)
    return _array_tensor(out.astype(np.float64 if weights.dtype == dtype.float64 else np.float32))


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, the index in sorted_sequence's (last-dim) rows where it would be
    inserted to keep them sorted (first such with right=False, last with right=True)."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    seq = _values(sorted_sequence)
    if sorter is not None:
        seq = np.take_along_axis(seq, _values(sorter).astype(np.int64), -1)
    scalar = not isinstance(input, Tensor)
    values = np.asarray(input, dtype=np.float64) if scalar else _values(input)
    how = "right" if right else "left"
    if seq.ndim == 1:
        out = np.searchsorted(seq, values, side=how)
    else:
        if scalar or seq.shape[:-1] != values.shape[:-1]:
            raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                               "dimensions of boundaries tensor and input value tensor must match, but we got "
                               f"boundaries tensor {list(seq.shape)} and input value tensor "
                               f"{list(np.shape(values))}")
        rows_seq = seq.reshape(-1, seq.shape[-1])
        rows_val = values.reshape(-1, values.shape[-1])
        out = np.stack([np.searchsorted(s, v, side=how) for s, v in zip(rows_seq, rows_val)]).reshape(values.shape)
    return _array_tensor(np.asarray(out, dtype=np.int32 if out_int32 else np.int64))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value among 1-d boundaries: boundaries[i-1] < x <= boundaries[i]
    (right=False), boundaries[i-1] <= x < boundaries[i] (right=True)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ---- new and random tensors --------------------------------------------------------------

def empty_like(input, *, dtype=None, requires_grad=False, **kwargs):
    from ._tensor import _check_device
    _check_device(kwargs.pop("device", None))
    t = _C._empty(list(input.shape), dtype or input.dtype)
    return t.requires_grad_(True) if requires_grad else t


def _uniform_like(shape):
    return _C._uniform([builtins.int(s) for s in shape], 0.0, 1.0, _C.dtype.float64).numpy()


def bernoulli(input, p=None, *, generator=None):
    """0/1 draws (input's dtype) with probabilities input (or p), from mixprec's generator."""
    probability = _values(input).astype(np.float64) if p is None else np.full(tuple(input.shape), builtins.float(p))
    if ((probability < 0) | (probability > 1)).any() or np.isnan(probability).any():
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message "
                           "be improved?  If so, please report an enhancement request to PyTorch.)")
    draws = (_uniform_like(input.shape).reshape(probability.shape) < probability)
    return _to_dtype(_array_tensor(draws.astype(np.float32)), input.dtype)


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """num_samples category indices per row (int64) drawn with probabilities proportional to
    input's (1-d or 2-d) rows, from mixprec's generator; without replacement by the
    exponential-race method (as PyTorch's), so every sample is distinct."""
    probs = _values(input).astype(np.float64)
    if probs.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    rows = probs.reshape(-1, probs.shape[-1])
    categories = rows.shape[1]
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and num_samples > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if not np.isfinite(rows).all():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (rows < 0).any():
        raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
    if (rows.sum(axis=1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement:
        cdf = np.cumsum(rows, axis=1)
        cdf /= cdf[:, -1:]
        u = _uniform_like((rows.shape[0], num_samples))
        out = np.stack([np.minimum(np.searchsorted(c, v, side="right"), categories - 1) for c, v in zip(cdf, u)])
    else:
        # Races: category i finishes at E_i / p_i (E exponential); the first num_samples to
        # finish are a draw without replacement. Zero-probability categories finish last, in
        # index order (PyTorch 1.13 returns them too once the others are drawn).
        exponential = -np.log1p(-_uniform_like(rows.shape))
        with np.errstate(divide="ignore"):
            finish = np.where(rows > 0, exponential / rows, np.inf)
        out = np.argsort(finish, axis=1, kind="stable")[:, :num_samples]
    out = out.astype(np.int64)
    return _array_tensor(out.reshape(num_samples) if probs.ndim == 1 else out)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False):
    """Normal draws: tensor mean and/or std (broadcast), or float mean, std and a size. No
    gradient reaches mean or std (as PyTorch's: its normal is not reparametrised)."""
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal() missing required argument 'size' for float mean and std")
        out = _C._normal(list(_shape_args((size,))), builtins.float(mean), builtins.float(std),
                         dtype or _C.dtype.float32)
        return out.requires_grad_(True) if requires_grad else out
    values_std = _values(std) if isinstance(std, Tensor) else np.float64(std)
    if (np.asarray(values_std) < 0).any():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    shape = np.broadcast_shapes(*[tuple(t.shape) for t in tensors])
    out_dtype = tensors[0].dtype
    with no_grad():
        noise = _C._normal(list(shape), 0.0, 1.0, out_dtype)
        m = mean.detach() if isinstance(mean, Tensor) else mean
        s = std.detach() if isinstance(std, Tensor) else std
        return noise * s + m if isinstance(s, Tensor) or isinstance(m, Tensor) else noise


def _random_fill(name, draw):
    """x.uniform_(a, b) / x.normal_(mean, std): fills x in place (under no_grad; a leaf that
    requires grad refuses with grad mode on, as PyTorch)."""
    def fill(self, *args, **kwargs):
        if self.requires_grad and _C.is_grad_enabled():
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if not self.dtype.is_floating_point:
            raise NotImplementedError(f"\"{name}\" not implemented for '{str(self.dtype).split('.')[-1]}'")
        with no_grad():
            self.copy_(draw(list(self.shape), self.dtype, *args, **kwargs))
        return self
    fill.__name__ = name
    return fill


def _uniform_draw(shape, dt, a=0.0, b=1.0, **kwargs):
    a, b = kwargs.pop("from", a), kwargs.pop("to", b)
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    return _C._uniform(shape, builtins.float(a), builtins.float(b), dt)


def _normal_draw(shape, dt, mean=0.0, std=1.0):
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    return _C._normal(shape, builtins.float(mean), builtins.float(std), dt)


def _bernoulli_draw(shape, dt, p=0.5):
    probability = _values(p).astype(np.float64) if isinstance(p, Tensor) else np.float64(p)
    if ((probability < 0) | (probability > 1)).any():
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    draws = _uniform_like(shape).reshape(shape) < probability
    return _to_dtype(_array_tensor(draws.astype(np.float32)), dt)


uniform_ = _random_fill("uniform_", _uniform_draw)
normal_ = _random_fill("normal_", _normal_draw)
bernoulli_ = _random_fill("bernoulli_", _bernoulli_draw)


def detach_(self):
    """Stops self from recording a graph: a leaf's requires_grad is turned off; a tensor made
    by ops cannot be cut from its graph in place here (x = x.detach() does it)."""
    if self.is_leaf:
        self.requires_grad_(False)
        return self
    raise NotImplementedError("mixprec cannot detach a tensor made by ops in place: write x = x.detach()")


# ---- dtypes and settings -----------------------------------------------------------------

def get_default_dtype():
    """float32: mixprec's only default floating dtype."""
    return dtype.float32


def set_default_dtype(d):
    """Accepted for float32 (mixprec's default); any other dtype is refused (mixprec's factories
    and layers are float32 unless told otherwise: pass dtype= or use autocast)."""
    if not isinstance(d, dtype):
        raise TypeError(f"set_default_dtype(): argument 'd' must be mixprec.dtype, not {type(d).__name__}")
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    if d != dtype.float32:
        raise NotImplementedError(f"mixprec's default dtype is float32 only, got {d}: create tensors with "
                                  "dtype= or train under mixprec.autocast(dtype=mixprec.bfloat16)")


class finfo:
    """torch.finfo(dtype): bits, eps, max, min, tiny (= smallest_normal), resolution and dtype
    (its name) of a floating dtype (float32 without an argument)."""

    _FIELDS = {"bfloat16": (16, 2.0 ** -7, 3.3895313892515355e38, 2.0 ** -126, 0.01)}

    def __init__(self, type=None):
        type = dtype.float32 if type is None else type
        name = str(type).split(".")[-1]
        if not type.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            "'torch.finfo'")
        if name in self._FIELDS:
            self.bits, self.eps, self.max, self.tiny, self.resolution = self._FIELDS[name]
        else:
            info = np.finfo(name)
            self.bits, self.eps, self.max = builtins.int(info.bits), builtins.float(info.eps), builtins.float(info.max)
            self.tiny = builtins.float(info.tiny)
            self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))  # a Python float, as PyTorch's
        self.min = -self.max
        self.smallest_normal = self.tiny
        self.dtype = name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """torch.iinfo(dtype): bits, min, max and dtype (its name) of an integer dtype."""

    def __init__(self, type):
        if type.is_floating_point:
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'")
        name = str(type).split(".")[-1]
        info = np.iinfo(name)
        self.bits, self.min, self.max, self.dtype = builtins.int(info.bits), builtins.int(info.min), \
            builtins.int(info.max), name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


_deterministic = {"mode": False, "warn_only": False}


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Accepted and remembered: mixprec's kernels are deterministic whatever the setting (the
    same inputs and thread count give the same bits)."""
    _deterministic.update(mode=builtins.bool(mode), warn_only=builtins.bool(warn_only))


def are_deterministic_algorithms_enabled():
    return _deterministic["mode"]


def is_deterministic_algorithms_warn_only_enabled():
    return _deterministic["warn_only"]


def _make_backends():
    """mixprec.backends: the flags scripts set (cudnn.benchmark, cudnn.deterministic,
    mkldnn.enabled, cuda.matmul.allow_tf32, ...), plain attributes that change nothing (mixprec
    has no cuDNN; its oneDNN use is fixed). Importable as modules (import mixprec.backends.cudnn
    as cudnn)."""
    def module(name, doc, **attrs):
        m = types.ModuleType(f"{__package__}.backends{'.' + name if name else ''}", doc)
        m.__dict__.update(attrs)
        sys.modules[m.__name__] = m
        return m

    not_available = lambda: False  # noqa: E731
    cudnn = module("cudnn", "No cuDNN here: the flags are accepted and ignored.", enabled=True, benchmark=False,
                   deterministic=False, allow_tf32=True, is_available=not_available, version=lambda: None)
    mkldnn = module("mkldnn", "oneDNN (MKL-DNN) is always used where mixprec's kernels call it.", enabled=True,
                    is_available=lambda: True)
    cuda = module("cuda", "No CUDA here.", matmul=types.SimpleNamespace(allow_tf32=False,
                                                                       allow_fp16_reduced_precision_reduction=True),
                  is_built=not_available)
    mps = module("mps", "No MPS here.", is_available=not_available, is_built=not_available)
    openmp = module("openmp", "mixprec uses OpenMP.", is_available=lambda: True)
    return module("", _make_backends.__doc__, cudnn=cudnn, mkldnn=mkldnn, cuda=cuda, mps=mps, openmp=openmp)


backends = _make_backends()


# ---- Tensor methods ----------------------------------------------------------------------

_inplace = F._inplace

_METHODS = {
    "mul": mul, "multiply": mul, "add": add, "sub": sub, "subtract": sub, "div": div, "divide": div,
    "true_divide": div, "neg": neg, "negative": neg, "sign": sign, "square": square, "rsqrt": rsqrt,
    "reciprocal": reciprocal, "trunc": trunc, "fix": trunc, "frac": frac, "lerp": lerp, "addcmul": addcmul,
    "addcdiv": addcdiv, "nan_to_num": nan_to_num, "flip": flip, "fliplr": fliplr, "flipud": flipud, "roll": roll,
    "diag": diag, "diagonal": diagonal, "trace": trace, "rot90": rot90, "outer": outer, "ger": outer,
    "reshape_as": reshape_as, "masked_select": masked_select, "movedim": movedim, "moveaxis": movedim,
    "swapaxes": swapaxes, "swapdims": swapaxes, "unflatten": unflatten, "repeat_interleave": repeat_interleave,
    "tile": lambda self, *dims: tile(self, dims[0] if len(dims) == 1 and not isinstance(dims[0], builtins.int)
                                     else dims),
    "broadcast_to": lambda self, *size: broadcast_to(self, size[0] if len(size) == 1 and
                                                     not isinstance(size[0], builtins.int) else size),
    "take_along_dim": take_along_dim, "median": median, "nanmedian": nanmedian, "kthvalue": kthvalue, "mode": mode,
    "quantile": quantile, "cumprod": cumprod, "scatter": scatter, "scatter_add": scatter_add,
    "index_add": index_add, "index_fill": index_fill, "nonzero": nonzero, "argwhere": argwhere, "unique": unique,
    "unique_consecutive": unique_consecutive, "bincount": bincount, "count_nonzero": count_nonzero,
    "any": any, "all": all, "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "isclose": isclose, "isposinf": isposinf, "isneginf": isneginf, "dist": dist,
    "bernoulli": bernoulli, "ndimension": lambda self: self.ndim,
    "new_empty": lambda self, *size, dtype=None, requires_grad=False: _methods._new(
        self, _C._empty, size, dtype, requires_grad),
    "uniform_": uniform_, "normal_": normal_, "bernoulli_": bernoulli_, "detach_": detach_,
    # in-place forms (refused for a tensor that records a graph: see _functions._inplace)
    "neg_": _inplace(neg), "sign_": _inplace(sign), "square_": _inplace(square), "rsqrt_": _inplace(rsqrt),
    "reciprocal_": _inplace(reciprocal), "trunc_": _inplace(trunc), "frac_": _inplace(frac),
    "lerp_": _inplace(lerp), "addcmul_": _inplace(addcmul), "addcdiv_": _inplace(addcdiv),
    "nan_to_num_": _inplace(nan_to_num), "exp_": _inplace(_C.exp), "log_": _inplace(_C.log),
    "sqrt_": _inplace(_C.sqrt), "sigmoid_": _inplace(_C.sigmoid), "tanh_": _inplace(_C.tanh),
    "relu_": _inplace(_C.relu), "pow_": _inplace(_C.pow), "abs_": _inplace(F.abs), "floor_": _inplace(F.floor),
    "ceil_": _inplace(F.ceil), "round_": _inplace(F.round), "log1p_": _inplace(F.log1p),
    "clamp_min": lambda self, min: F.clamp(self, min=min), "clamp_max": lambda self, max: F.clamp(self, max=max),
    "clamp_min_": _inplace(lambda self, min: F.clamp(self, min=min)),
    "clamp_max_": _inplace(lambda self, max: F.clamp(self, max=max)),
    "masked_fill_": _inplace(masked_fill), "scatter_": _inplace(scatter), "scatter_add_": _inplace(scatter_add),
    "index_add_": _inplace(index_add), "index_fill_": _inplace(index_fill),
}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)


# ---- torch-level functions that take several tensors -------------------------------------

def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2); under autocast the result is the autocast dtype
    (input cast too), as PyTorch's; beta = 0 ignores input (NaN too)."""
    return _add_product(input, _C.matmul(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    return _add_product(input, _C.matmul(batch1, batch2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    return _add_product(input, _methods.matmul(mat, vec), beta, alpha)


def _add_product(input, product, beta, alpha):
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    if product.dtype != input.dtype and product.dtype.is_floating_point and _C.is_autocast_enabled():
        input = _to_dtype(input, product.dtype)
    shape = np.broadcast_shapes(tuple(input.shape), tuple(product.shape))
    if tuple(product.shape) != shape:
        product = F.expand(product, *shape)
    return product + (input if beta == 1 else input * beta)


__all__ = [
    "mul", "multiply", "add", "sub", "subtract", "div", "divide", "true_divide", "negative", "square",
    "reciprocal", "rsqrt", "sign", "trunc", "fix", "frac", "lerp", "addcmul", "addcdiv", "nan_to_num", "flip",
    "fliplr", "flipud", "roll", "movedim", "moveaxis", "swapaxes", "swapdims", "unflatten", "tile",
    "repeat_interleave", "diagonal", "diag", "trace", "rot90", "outer", "ger", "broadcast_to", "broadcast_tensors",
    "atleast_1d", "atleast_2d", "atleast_3d", "hstack", "vstack", "row_stack", "dstack", "column_stack",
    "take_along_dim", "scatter", "scatter_add", "index_add", "index_fill", "masked_select", "masked_fill",
    "kthvalue", "median", "nanmedian", "mode", "quantile", "cumprod", "any", "all", "count_nonzero", "var_mean",
    "std_mean", "dist", "cdist", "logical_and", "logical_or", "logical_xor", "logical_not", "isclose", "isposinf",
    "isneginf", "nonzero", "argwhere", "unique", "unique_consecutive", "bincount", "searchsorted", "bucketize",
    "empty_like", "bernoulli", "multinomial", "normal", "get_default_dtype", "set_default_dtype", "finfo", "iinfo",
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "backends", "addmm", "baddbmm", "addmv",
]
