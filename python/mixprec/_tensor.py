"""The tensor factories (tensor, from_numpy, zeros, ...), grad mode, and the argument helpers
the Tensor's Python methods (_methods.py) share."""
import builtins
import functools
import threading

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor, dtype

_DEFAULT_FLOAT = dtype.float32


def _shape_args(args):
    """PyTorch accepts t.reshape(2, 3) and t.reshape((2, 3))."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return [builtins.int(d) for d in args[0]]
    return [builtins.int(d) for d in args]


def _dims(dim):
    return [dim] if isinstance(dim, builtins.int) else [builtins.int(d) for d in dim]


def _wrap_dim(dim, ndim):
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {dim})")
    return dim + ndim if dim < 0 else dim


# ---- factories -------------------------------------------------------------------------

def from_numpy(array):
    """A tensor sharing the array's memory (no copy). The array stays alive while the tensor
    (or a view of it) does; writes through either are seen by the other."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    return _C.from_numpy(array)


def _to_dtype(t, target):
    return t if t.dtype == target else t._to_dtype(target)


def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of data (a list, a number, an array or a tensor)."""
    if isinstance(data, Tensor):
        data = data.detach().float().numpy() if data.dtype == _C.dtype.bfloat16 else data.detach().numpy()
    array = np.array(data)
    if not isinstance(data, np.ndarray) and not isinstance(data, np.generic):
        # Python numbers: floats become float32 and integers int64, as in PyTorch.
        if array.dtype.kind == "f":
            array = array.astype(np.float32)
        elif array.dtype.kind in "iub":
            array = array.astype(np.int64)
    if array.dtype.kind == "b":
        array = array.astype(np.uint8)
    if dtype is not None and dtype != _C.dtype.bfloat16:
        array = array.astype(_numpy_dtype(dtype))
    elif dtype == _C.dtype.bfloat16:
        array = array.astype(np.float32)
    # clone(): the engine's own (aligned, tracked) buffer rather than NumPy's copy.
    t = _C.from_numpy(array if array.flags.c_contiguous else array.copy()).clone()
    if dtype is not None:
        t = _to_dtype(t, dtype)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _numpy_dtype(d):
    return {dtype.float32: np.float32, dtype.float64: np.float64, dtype.float16: np.float16,
            dtype.int64: np.int64, dtype.int32: np.int32, dtype.uint8: np.uint8}[d]


def _factory(make):
    @functools.wraps(make)
    def factory(*size, dtype=None, requires_grad=False, **kwargs):
        _check_device(kwargs.pop("device", None))
        if kwargs:
            raise TypeError(f"{make.__name__}() got unexpected keyword arguments {sorted(kwargs)}")
        t = make(_shape_args(size), dtype or _DEFAULT_FLOAT)
        return t.requires_grad_(True) if requires_grad else t
    return factory


zeros = _factory(lambda shape, d: _C._zeros(shape, d))
zeros.__name__ = "zeros"
ones = _factory(lambda shape, d: _C._full(shape, 1.0, d))
ones.__name__ = "ones"
empty = _factory(lambda shape, d: _C._empty(shape, d))
empty.__name__ = "empty"
rand = _factory(lambda shape, d: _C._uniform(shape, 0.0, 1.0, d))
rand.__name__ = "rand"
randn = _factory(lambda shape, d: _C._normal(shape, 0.0, 1.0, d))
randn.__name__ = "randn"


def full(size, fill_value, dtype=None, requires_grad=False):
    t = _C._full(_shape_args((size,)), fill_value, dtype or _DEFAULT_FLOAT)
    return t.requires_grad_(True) if requires_grad else t


def zeros_like(t, dtype=None):
    return _C._zeros(list(t.shape), dtype or t.dtype)


def ones_like(t, dtype=None):
    return _C._full(list(t.shape), 1.0, dtype or t.dtype)


def cat(tensors, dim=0):
    return _C.cat(list(tensors), dim)


def stack(tensors, dim=0):
    return _C.stack(list(tensors), dim)


def _check_device(device):
    from ._device import is_cpu
    if is_cpu(device):
        return
    raise RuntimeError(f"mixprec runs on CPUs only: got device {device!r}; write device=\"cpu\" "
                       f"(or leave it out)")


# ---- grad mode -------------------------------------------------------------------------

class _EngineScope:
    """A context manager and decorator around one of the engine's thread-local scopes (grad
    mode, autocast). Each `with` makes a new engine scope and leaving ends the latest one
    entered on this thread: one object nests, serves several threads, and decorates (a scope
    per call)."""

    def _new_scope(self):
        raise NotImplementedError

    def _stack(self):
        local = self.__dict__.setdefault("_local", threading.local())
        if not hasattr(local, "scopes"):
            local.scopes = []
        return local.scopes

    def __enter__(self):
        scope = self._new_scope()
        scope.enter()
        self._stack().append(scope)
        return self

    def __exit__(self, *exc):
        self._stack().pop().exit()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_EngineScope):
    """Context manager and decorator: no autograd graph is recorded inside (thread-local)."""

    def _new_scope(self):
        return _C._GradModeScope(False)


is_grad_enabled = _C.is_grad_enabled


def _zero_grads(params, set_to_none):
    """Module.zero_grad and Optimizer.zero_grad: 1.13's default zeroes in place."""
    for p in params:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
        else:
            p.grad.zero_()
