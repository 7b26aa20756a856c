"""Views from shape ops and indexing, as PyTorch's: transpose, t/T, permute, view, reshape,
flatten, unsqueeze, squeeze, narrow and basic indexing (integers, slices with any positive
step, None, ...) return a tensor over the same memory whenever the geometry allows it, so a
write through either is seen by the other and numpy() of the result shares it too.

Where autograd records a graph (the input requires grad and grad mode is on) the engine's
ops run instead: its reshape/view/flatten/unsqueeze/squeeze of a contiguous tensor is a view
with a backward, but its transpose, permute and narrow make a contiguous copy with a backward
(the engine records no graph for a strided view: Tensor::as_strided has no backward). The
values and gradients are PyTorch's either way; only the sharing differs, and PyTorch forbids
most in-place writes into such tensors anyway. docs/python.md says so.
"""
import builtins

import numpy as np

from . import _masks
from . import _mixprec as _C
from ._mixprec import Tensor
from ._tensor import _shape_args, _wrap_dim


def _tracks_grad(t):
    return t.requires_grad and _C.is_grad_enabled()


def _strided(t, shape, strides, offset):
    return _C._as_strided(t, [builtins.int(s) for s in shape], [builtins.int(s) for s in strides],
                          builtins.int(offset))


# ---- transpose and permute -------------------------------------------------------------

def transpose(t, dim0, dim1):
    a, b = _wrap_dim(dim0, t.ndim), _wrap_dim(dim1, t.ndim)
    if _tracks_grad(t):
        return _C.transpose(t, a, b)
    shape, strides = list(t.shape), list(t.stride())
    shape[a], shape[b] = shape[b], shape[a]
    strides[a], strides[b] = strides[b], strides[a]
    return _strided(t, shape, strides, t.storage_offset())


def permute(t, *dims):
    dims = [_wrap_dim(d, t.ndim) for d in _shape_args(dims)]
    if sorted(dims) != list(range(t.ndim)):
        raise RuntimeError(f"permute(): dims {dims} are not a permutation of {t.ndim} dims")
    if not _tracks_grad(t):
        shape, strides = t.shape, t.stride()
        return _strided(t, [shape[d] for d in dims], [strides[d] for d in dims], t.storage_offset())
    if t.ndim == 4:
        return _C.permute4(t, dims)
    # Any permutation is a product of transpositions: place each output dim in turn.
    out, order = t, list(range(t.ndim))
    for i, d in enumerate(dims):
        j = order.index(d)
        if j != i:
            out = _C.transpose(out, i, j)
            order[i], order[j] = order[j], order[i]
    return out


# ---- view, reshape and friends ---------------------------------------------------------

def _infer_shape(shape, numel):
    # InvalidArgumentError: a RuntimeError as PyTorch's, and a ValueError as the engine's
    # reshape raises for the same mistakes.
    shape = list(shape)
    if shape.count(-1) > 1:
        raise _C.InvalidArgumentError("only one dimension can be inferred")
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known == 0 or numel % known:
            raise _C.InvalidArgumentError(f"shape '{shape}' is invalid for input of size {numel}")
        shape[shape.index(-1)] = numel // known
    n = 1
    for s in shape:
        if s < 0:
            raise _C.InvalidArgumentError(f"invalid shape dimension {s}")
        n *= s
    if n != numel:
        raise _C.InvalidArgumentError(f"shape '{shape}' is invalid for input of size {numel}")
    return shape


def _view_strides(old_shape, old_strides, new_shape):
    """The strides that show memory of old_shape/old_strides as new_shape without a copy, or
    None when there are none (PyTorch's computeStride, aten/src/ATen/TensorUtils.cpp)."""
    if not old_shape:
        return [1] * len(new_shape)
    numel = 1
    for s in old_shape:
        numel *= s
    if numel == 0 and list(old_shape) == list(new_shape):
        return list(old_strides)
    new_strides = [0] * len(new_shape)
    if numel == 0:
        for d in reversed(range(len(new_shape))):
            new_strides[d] = 1 if d == len(new_shape) - 1 else max(new_shape[d + 1], 1) * new_strides[d + 1]
        return new_strides
    view_d = len(new_shape) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in reversed(range(len(old_shape))):
        tensor_numel *= old_shape[tensor_d]
        if tensor_d == 0 or (old_shape[tensor_d - 1] != 1 and
                             old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = old_strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    return new_strides if view_d == -1 else None


def view(t, *shape):
    shape = _infer_shape(_shape_args(shape), t.numel())
    strides = _view_strides(t.shape, t.stride(), shape)
    if strides is None:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.")
    if _tracks_grad(t):
        return _C.reshape(t, shape)  # a view with a backward when contiguous, else a copy
    return _strided(t, shape, strides, t.storage_offset())


def reshape(t, *shape):
    shape = _infer_shape(_shape_args(shape), t.numel())
    strides = None if _tracks_grad(t) else _view_strides(t.shape, t.stride(), shape)
    if strides is None:
        return _C.reshape(t, shape)  # engine: a view of a contiguous tensor, else a copy
    return _strided(t, shape, strides, t.storage_offset())


def flatten(t, start_dim=0, end_dim=-1):
    if t.ndim == 0:
        return reshape(t, 1)
    s, e = _wrap_dim(start_dim, t.ndim), _wrap_dim(end_dim, t.ndim)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    merged = 1
    for d in t.shape[s:e + 1]:
        merged *= d
    return reshape(t, list(t.shape[:s]) + [merged] + list(t.shape[e + 1:]))


def unsqueeze(t, dim):
    dim = _wrap_dim(dim, t.ndim + 1)
    shape = list(t.shape)
    shape.insert(dim, 1)
    return reshape(t, shape)


def squeeze(t, dim=None):
    if dim is None:
        shape = [s for s in t.shape if s != 1]
    else:
        dim = _wrap_dim(dim, t.ndim)
        shape = [s for i, s in enumerate(t.shape) if i != dim or s != 1]
    return reshape(t, shape)


# ---- narrow and indexing ---------------------------------------------------------------

def _narrow_copy(t, dim, start, length):
    if dim == 0:
        return _C.narrow(t, start, length)
    return _C.transpose(_C.narrow(_C.transpose(t, 0, dim), start, length), 0, dim)


def narrow(t, dim, start, length):
    dim = _wrap_dim(dim, t.ndim)
    size = t.shape[dim]
    if start < 0:
        start += size
    if not 0 <= start <= size or length < 0 or start + length > size:
        raise IndexError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    if _tracks_grad(t):
        return _narrow_copy(t, dim, start, length)
    shape = list(t.shape)
    shape[dim] = length
    return _strided(t, shape, t.stride(), t.storage_offset() + start * t.stride()[dim])


def _parse_index(t, index):
    """Basic indexing as (shape, strides, offset) of the view, plus the steps the graph-
    recording path takes: ("narrow", dim, start, length) / ("drop", dim) / ("new", dim)."""
    if not isinstance(index, tuple):
        index = (index,)
    for item in index:
        if not (item is Ellipsis or item is None or isinstance(item, (builtins.int, slice))):
            raise TypeError(f"mixprec tensors support integer, slice, None and ... indexing only, "
                            f"got {type(item).__name__}")
    if sum(item is Ellipsis for item in index) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for item in index if item is not None and item is not Ellipsis)
    if used > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (t.ndim - used) + index[at + 1:]
    shape, strides, offset = [], [], t.storage_offset()
    steps, dim, out_dim = [], 0, 0
    for item in index:
        if item is None:
            shape.append(1)
            strides.append(1)
            steps.append(("new", out_dim))
            out_dim += 1
            continue
        size, stride = t.shape[dim], t.stride()[dim]
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            length = max(0, (stop - start + step - 1) // step)
            if length:
                offset += start * stride
            shape.append(length)
            strides.append(stride * step)
            if step != 1:
                steps.append(("step", dim))
            elif (start, length) != (0, size):
                steps.append(("narrow", out_dim, start, length))
            out_dim += 1
        else:
            if not -size <= item < size:
                raise IndexError(f"index {item} is out of bounds for dimension {dim} with size {size}")
            offset += (item % size) * stride
            steps.append(("narrow", out_dim, item % size, 1))
            steps.append(("drop", out_dim))
        dim += 1
    shape += list(t.shape[dim:])
    strides += list(t.stride()[dim:])
    return shape, strides, offset, steps


# ---- advanced indexing: lists, integer tensors and masks --------------------------------
#
# PyTorch's rules (torch/csrc/autograd/python_variable_indexing.cpp and aten's index): the
# integers, slices, None and ... of an index apply first, as a view; integers are not advanced
# indices (x[1, :, [3, 0]] is [rows, 2], where NumPy gives [2, rows]). The lists, integer
# tensors and masks (a mask of k dims is k index arrays: its nonzero positions) then broadcast
# together; when the dims they index are adjacent in that view their result dims replace them
# in place, otherwise they go first. All of them run as one index_select over the indexed dims
# merged into one (a copy with autograd: repeated indices add their gradients).

def _as_index_tuple(index):
    """The index as a tuple, as PyTorch reads it: a list that holds a sequence, a slice, a
    tensor, None or ... is a tuple (x[[[0, 1], [2, 3]]] is x[[0, 1], [2, 3]], NumPy's legacy
    rule that PyTorch keeps); any other list is one index."""
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and len(index) < 32 and any(
            isinstance(e, (list, tuple, slice, Tensor, np.ndarray)) or e is None or e is Ellipsis for e in index):
        return tuple(index)
    return (index,)


_INDEX_DTYPE_ERROR = "tensors used as indices must be long, byte or bool tensors"


def _classify(entry):
    """("basic", entry) for integers, slices, None and ...; ("mask", bool array); ("array",
    int64 array); a 0-dim integer tensor is an integer, as PyTorch's."""
    if entry is None or entry is Ellipsis or isinstance(entry, slice):
        return "basic", entry
    if isinstance(entry, (builtins.int, np.integer)) and not isinstance(entry, (builtins.bool, np.bool_)):
        return "basic", builtins.int(entry)
    if isinstance(entry, Tensor):
        if _masks.is_mask(entry):
            return "mask", _masks._mask_array(entry)
        if not _masks.is_index_tensor(entry):
            raise IndexError(_INDEX_DTYPE_ERROR)
        values = entry.detach().numpy().astype(np.int64)
        return ("basic", builtins.int(values)) if values.ndim == 0 else ("array", values)
    if isinstance(entry, (list, np.ndarray)):
        values = np.asarray(entry)
        if values.dtype == np.bool_:
            return "mask", values
        if values.dtype.kind not in "iu" and values.size:
            raise IndexError(_INDEX_DTYPE_ERROR)
        return "array", values.astype(np.int64)
    return "basic", entry  # anything else: _parse_index's TypeError


def _advanced_parts(t, kinds):
    """The basic view of t that an index (classified entries, at least one a list, integer
    tensor or mask) leaves, the dims of that view the index arrays index, and the arrays:
    broadcast together, int64, wrapped into range; PyTorch's IndexErrors otherwise."""
    if sum(e is Ellipsis for _, e in kinds) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(e.ndim if kind == "mask" else (0 if e is None or e is Ellipsis else 1) for kind, e in kinds)
    if used > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    basic, indexed, out_dim = [], [], 0  # indexed: (dim of the view, "array"/"mask", values)
    for kind, entry in kinds:
        if entry is Ellipsis:
            basic += [slice(None)] * (t.ndim - used)
            out_dim += t.ndim - used
        elif kind == "basic":
            basic.append(entry)
            out_dim += 0 if isinstance(entry, builtins.int) else 1
        else:
            span = entry.ndim if kind == "mask" else 1
            if kind == "mask" and span == 0:
                raise NotImplementedError("a 0-dim mask index (x[True]) is not supported")
            basic += [slice(None)] * span
            indexed.append((out_dim, kind, entry))
            out_dim += span
    base = _basic_getitem(t, tuple(basic))
    dims, arrays = [], []
    for d, kind, values in indexed:
        if kind == "mask":
            for j, size in enumerate(values.shape):
                if size != base.shape[d + j]:
                    raise IndexError(f"The shape of the mask {list(values.shape)} at index {j} does not match the "
                                     f"shape of the indexed tensor {list(base.shape)} at index {d + j}")
            dims += list(range(d, d + values.ndim))
            arrays += [p.astype(np.int64) for p in np.nonzero(values)]
        else:
            dims.append(d)
            arrays.append(values)
    try:
        arrays = np.broadcast_arrays(*arrays) if len(arrays) > 1 else arrays
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                         + ", ".join(str(list(a.shape)) for a in arrays)) from None
    sizes = [base.shape[d] for d in dims]
    if any(a.size and (a.min() < -s or a.max() >= s) for a, s in zip(arrays, sizes)):
        # the first element out of range, and the first array at it (aten's order)
        bad = np.stack([((a < -s) | (a >= s)).reshape(-1) for a, s in zip(arrays, sizes)])
        element = builtins.int(np.argmax(bad.any(axis=0)))
        k = builtins.int(np.argmax(bad[:, element]))
        # PyTorch names the array by its rank among the index arrays, not by the tensor's dim
        raise IndexError(f"index {arrays[k].reshape(-1)[element]} is out of bounds for dimension {k} with size "
                         f"{sizes[k]}")
    return base, dims, [a + s * (a < 0) if a.size and a.min() < 0 else a for a, s in zip(arrays, sizes)]


def _advanced_getitem(t, kinds):
    base, dims, arrays = _advanced_parts(t, kinds)
    k, shape = len(dims), list(arrays[0].shape)
    if dims != list(range(dims[0], dims[0] + k)):  # separated: the result's dims go first
        base = permute(base, *(dims + [d for d in range(base.ndim) if d not in dims]))
        dims = list(range(k))
    first, sizes = dims[0], [base.shape[d] for d in dims]
    flat, stride = arrays[-1], sizes[-1]
    for a, size in zip(reversed(arrays[:-1]), reversed(sizes[:-1])):  # row-major position in the merged dim
        flat = flat + a * stride
        stride *= size
    if k > 1:
        rest = list(base.shape)
        base = reshape(base, rest[:first] + [stride] + rest[first + k:])
    from ._functions import index_select
    out = index_select(base, first, flat.reshape(-1))
    if len(shape) != 1:
        rest = list(out.shape)
        out = reshape(out, rest[:first] + shape + rest[first + 1:])
    return out


def getitem(t, index):
    kinds = [_classify(e) for e in _as_index_tuple(index)]
    if any(kind != "basic" for kind, _ in kinds):
        return _advanced_getitem(t, kinds)
    return _basic_getitem(t, tuple(e for _, e in kinds))


def _basic_getitem(t, index):
    shape, strides, offset, steps = _parse_index(t, index)
    if not _tracks_grad(t):
        return _strided(t, shape, strides, offset)
    # Recording a graph: the engine's narrow (a copy) and reshape, each with its backward.
    out = t
    for step in steps:
        if step[0] == "step":
            raise NotImplementedError("slices with a step other than 1 of a tensor that requires "
                                      "grad are not supported yet (index under no_grad(), or "
                                      "detach() first)")
        if step[0] == "narrow":
            _, d, start, length = step
            if (start, length) != (0, out.shape[d]):
                out = _narrow_copy(out, d, start, length)
        elif step[0] == "drop":
            out = _C.reshape(out, [s for i, s in enumerate(out.shape) if i != step[1]])
        else:
            new = list(out.shape)
            new.insert(step[1], 1)
            out = _C.reshape(out, new)
    return out


def _numpy_of(value):
    value = value.detach()
    return (value.float() if value.dtype == _C.dtype.bfloat16 else value).numpy()


def setitem(t, index, value):
    """t[index] = value: writes into t's memory (a view's write reaches its base)."""
    if t.requires_grad and _C.is_grad_enabled():
        if t.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        raise NotImplementedError("index assignment into a tensor that is part of a graph is not "
                                  "supported (mixprec has no in-place autograd)")
    kinds = [_classify(e) for e in _as_index_tuple(index)]
    if any(kind != "basic" for kind, _ in kinds):
        return _advanced_setitem(t, kinds, value)
    target = _basic_getitem(t, tuple(e for _, e in kinds))
    if isinstance(value, Tensor):
        value = value.detach()
        if value.shape != target.shape:
            value = _C.from_numpy(np.ascontiguousarray(np.broadcast_to(_numpy_of(value), target.shape)))
    else:
        value = _C.from_numpy(np.ascontiguousarray(np.broadcast_to(np.asarray(value, dtype=np.float64),
                                                                   target.shape)))
    target.copy_(value)


def _advanced_setitem(t, kinds, value):
    """t[lists, masks, ...] = value: the positions the same index reads (so the same rules
    and errors), written through NumPy (a repeated position takes the last value)."""
    positions = _advanced_getitem(_C.from_numpy(np.arange(t.numel(), dtype=np.int64).reshape(tuple(t.shape))),
                                  kinds).numpy()
    values = _numpy_of(value) if isinstance(value, Tensor) else np.asarray(value, dtype=np.float64)
    try:
        values = np.broadcast_to(values, positions.shape)
    except ValueError:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to "
                           f"indexing result of shape {list(positions.shape)}") from None
    current = np.array(_numpy_of(t), copy=True)
    current.reshape(-1)[positions.reshape(-1)] = values.reshape(-1)
    t.copy_(_C.from_numpy(current))
