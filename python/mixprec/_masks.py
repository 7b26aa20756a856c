"""Masks without a bool dtype. The engine has no bool tensors, so comparisons give uint8 0/1
tensors (what PyTorch returned before 1.2, and what 1.13 still takes as a mask): they index
(x[mask], x[mask] = v, with lists and other masks too: _views.py's advanced indexing), select
(mixprec.where, masked_fill), combine (~, &, |, ^) and reduce (any, all, sum) as PyTorch's
bool masks do.

Selections with autograd are the engine's embedding lookup (a gather whose backward adds each
gradient back to the row it came from): values are copied exactly (inf and NaN included) and
gradients reach only what was selected, as PyTorch's. docs/python.md lists the differences."""
import builtins

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor, dtype


def is_mask(index):
    return (isinstance(index, Tensor) and index.dtype == dtype.uint8) or \
        (isinstance(index, np.ndarray) and index.dtype == np.bool_)


def is_index_tensor(index):
    return isinstance(index, Tensor) and index.dtype in (dtype.int64, dtype.int32)


def _mask_array(mask):
    m = mask.numpy() if isinstance(mask, Tensor) else mask
    return np.asarray(m) != 0


def _rows(x, leading):
    """x as [prod(x.shape[:leading]), rest] (a view where strides allow)."""
    n = 1
    for s in x.shape[:leading]:
        n *= s
    rest = 1
    for s in x.shape[leading:]:
        rest *= s
    return x.reshape(n, rest)


def _gather_rows(x, leading, flat_rows):
    """Rows flat_rows (int64) of x seen as [prod(leading dims), rest]: a float tensor through
    the engine's embedding (autograd), any other through NumPy (a copy, no gradient)."""
    tail = list(x.shape[leading:])
    idx = np.ascontiguousarray(flat_rows, dtype=np.int64)
    if x.dtype.is_floating_point:
        out = _C.embedding(_C.from_numpy(idx), _rows(x, leading))
    else:
        out = _C.from_numpy(np.ascontiguousarray(_rows(x, leading).detach().numpy()[idx]))
    return out.reshape(*([idx.size] + tail))


def _as_tensor(v, like_dtype):
    if isinstance(v, Tensor):
        return v
    t = _C.from_numpy(np.ascontiguousarray(np.asarray(v, dtype=np.float64))).clone()
    return t if like_dtype == dtype.float64 else t._to_dtype(like_dtype)


def where(condition, input, other):
    """torch.where(condition, input, other): input where condition is nonzero, else other,
    broadcast together; gradients flow to the side each element came from."""
    c = _mask_array(condition)
    tensors = [t for t in (input, other) if isinstance(t, Tensor)]
    if tensors:
        out_dtype = tensors[0].dtype
        for t in tensors[1:]:
            if t.dtype.is_floating_point and (not out_dtype.is_floating_point or t.dtype.itemsize > out_dtype.itemsize):
                out_dtype = t.dtype
    else:
        out_dtype = dtype.float32
    a, b = _as_tensor(input, out_dtype), _as_tensor(other, out_dtype)
    if a.dtype != out_dtype:
        a = a._to_dtype(out_dtype)
    if b.dtype != out_dtype:
        b = b._to_dtype(out_dtype)
    shape = list(np.broadcast_shapes(c.shape, tuple(a.shape), tuple(b.shape)))
    if not out_dtype.is_floating_point:  # integers: no gradient, NumPy's where
        return _C.from_numpy(np.ascontiguousarray(np.where(c, a.numpy(), b.numpy())))
    ones = _C._full(shape, 1.0, out_dtype)
    # Broadcast by multiplying by ones: exact for every value (inf and NaN too), and its
    # backward sums the gradient back over the broadcast dims.
    a = a if list(a.shape) == shape else a * ones
    b = b if list(b.shape) == shape else b * ones
    n = builtins.int(np.prod(shape)) if shape else 1
    table = _C.cat([b.reshape(n, 1), a.reshape(n, 1)], 0)  # rows 0..n-1: other, n..2n-1: input
    pick = np.arange(n, dtype=np.int64) + n * np.broadcast_to(c, shape).reshape(-1).astype(np.int64)
    return _C.embedding(_C.from_numpy(pick), table).reshape(*shape)


def masked_fill(x, mask, value):
    return where(mask, value, x)


def _logical(op):
    def apply(self, other):
        b = _mask_array(other) if isinstance(other, Tensor) else np.asarray(other) != 0
        return _C.from_numpy(np.ascontiguousarray(op(_mask_array(self), b), dtype=np.uint8))
    return apply


def install(methods):
    methods.update({
        "__invert__": lambda self: _C.from_numpy(np.ascontiguousarray(~_mask_array(self), dtype=np.uint8))
        if self.dtype == dtype.uint8 else _invert_int(self),
        "__and__": _logical(np.logical_and),
        "__or__": _logical(np.logical_or),
        "__xor__": _logical(np.logical_xor),
        "logical_not": lambda self: _C.from_numpy(np.ascontiguousarray(~_values_nonzero(self), dtype=np.uint8)),
        "bool": lambda self: _C.from_numpy(np.ascontiguousarray(_values_nonzero(self), dtype=np.uint8)),
        "any": lambda self: _C.from_numpy(np.array(_values_nonzero(self).any(), dtype=np.uint8)),
        "all": lambda self: _C.from_numpy(np.array(_values_nonzero(self).all(), dtype=np.uint8)),
        "masked_fill": masked_fill,
        "where": lambda self, condition, other: where(condition, self, other),
    })


def _values_nonzero(t):
    t = t.detach()
    if t.dtype == dtype.bfloat16:
        t = t.float()
    return t.numpy() != 0


def _invert_int(t):
    if t.dtype.is_floating_point:
        raise TypeError("~ (bitwise_not) is only supported for integer and mask tensors")
    return _C.from_numpy(np.ascontiguousarray(~t.numpy()))
