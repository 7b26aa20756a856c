"""mixprec.Tensor's methods written in Python: argument handling in PyTorch's style (varargs
shapes, negative or tuple dims, indexing, dtype and device conversions, comparisons,
pickling) around the engine's ops, each of which runs without the GIL."""
import builtins

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor, dtype
from . import _masks, _views
from ._tensor import _check_device, _dims, _shape_args, _to_dtype, _wrap_dim, tensor

# ---- Tensor methods --------------------------------------------------------------------

def matmul(a, b):
    """a @ b with PyTorch's 1-D rules (a vector is a row on the left, a column on the right)."""
    if a.ndim == 1 and b.ndim == 1:
        return _C.sum(_C.mul(a, b))
    if a.ndim == 1:
        return _C.matmul(_C.reshape(a, [1, -1]), b).reshape(*b.shape[:-2], b.shape[-1])
    if b.ndim == 1:
        return _C.matmul(a, _C.reshape(b, [-1, 1])).reshape(*a.shape[:-1])
    return _C.matmul(a, b)


def _reduce(op):
    def reduce(self, dim=None, keepdim=False):
        # A dim named twice is the engine's error to raise (its message, as the C++ API's);
        # only the integer sums, which do not reach the engine, check it here.
        dims = None if dim is None else [_wrap_dim(d, self.ndim) for d in _dims(dim)]
        if not self.dtype.is_floating_point:
            return _integer_reduce(op, self, dims, keepdim)
        return op(self) if dims is None else op(self, dims, keepdim)
    return reduce


def _integer_reduce(op, t, dims, keepdim):
    """sum of integer (and comparison) tensors: int64, through NumPy, as PyTorch's; mean
    refuses them as PyTorch does. The engine reduces floating tensors only."""
    if op is not _C.sum:
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {t.dtype}")
    if dims is not None and len(set(dims)) != len(dims):
        twice = next(d for d in dims if dims.count(d) > 1)
        raise _C.InvalidArgumentError(f"sum: dim {twice} appears twice in the list of dims for "
                                      f"{t.dtype} {list(t.shape)}")
    axis = None if dims is None else tuple(dims)
    keep = keepdim and dims is not None
    return _C.from_numpy(np.array(t.detach().numpy().sum(axis=axis, keepdims=keep), dtype=np.int64))


def _numpy_values(t):
    t = t.detach()
    return (t._to_dtype(dtype.float32) if t.dtype == dtype.bfloat16 else t).numpy()


def _compare(op):
    """Elementwise comparison, through NumPy (no gradient, as in PyTorch). mixprec has no bool
    dtype: the result is uint8 0/1 (sum() gives an int64 count, .float() a mean-able one)."""
    def compare(self, other):
        if isinstance(other, Tensor):
            b = _numpy_values(other)
        elif self.dtype.is_floating_point:  # a Python number takes the tensor's dtype, as in PyTorch
            b = _numpy_values(_C._full([], other, self.dtype))
        else:
            b = other
        return _C.from_numpy(np.ascontiguousarray(op(_numpy_values(self), b), dtype=np.uint8))
    return compare


def _to(self, *args, **kwargs):
    """t.to(dtype), t.to("cpu"), t.to(other), t.to("cpu", dtype)."""
    target = kwargs.pop("dtype", None)
    _check_device(kwargs.pop("device", None))
    for a in args:
        if isinstance(a, dtype):
            target = a
        elif isinstance(a, Tensor):
            target = a.dtype
        else:
            _check_device(a)
    return self if target is None else _to_dtype(self, target)


def _repr(self):
    values = self.detach()
    if values.dtype == dtype.bfloat16:
        values = values._to_dtype(dtype.float32)
    body = np.array2string(values.numpy(), separator=", ", prefix="tensor(")
    extra = "" if self.dtype in (dtype.float32, dtype.int64) else f", dtype={self.dtype!r}"
    if self.requires_grad:
        extra += ", requires_grad=True"
    return f"tensor({body}{extra})"


def _ones(shape, dt):
    return _C._full(shape, 1.0, dt)


def _new(self, make, size, dt, requires_grad):
    t = make(list(_shape_args(size)), dt or self.dtype)
    return t.requires_grad_(True) if requires_grad else t


def _size(self, dim=None):
    return self.shape if dim is None else self.shape[_wrap_dim(dim, self.ndim)]


_engine_backward = Tensor.backward
_engine_item = Tensor.item


def _bool(self):
    """`if t:` for a tensor of one element (its value is not 0), as PyTorch; refused for more or
    none (without this, Python would ask len() and call every 1-element tensor true)."""
    n = self.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(_item(self))


def _index(self):
    """An integer tensor of one element as a Python index (tuple[t], range(t)), as PyTorch."""
    if self.dtype.is_floating_point or self.numel() != 1:
        raise TypeError("only integer tensors of a single element can be converted to an index")
    return _item(self)


def _item(self):
    """A Python float, or an int for an integer tensor (exact for all of int64), as PyTorch."""
    value = _engine_item(self)  # its error for a tensor of more than one element
    if self.dtype.is_floating_point:
        return value
    return builtins.int(self.detach().numpy().reshape(-1)[0])


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    if retain_graph or create_graph or inputs is not None:
        raise NotImplementedError("mixprec frees the graph after backward(): retain_graph, "
                                  "create_graph and inputs are not supported")
    _engine_backward(self, gradient)


def _install():
    methods = {
        "float": lambda self: _to_dtype(self, dtype.float32),
        "half": lambda self: _to_dtype(self, dtype.float16),
        "bfloat16": lambda self: _to_dtype(self, dtype.bfloat16),
        "double": lambda self: _to_dtype(self, dtype.float64),
        "long": lambda self: _to_dtype(self, dtype.int64),
        "to": _to,
        "cpu": lambda self: self,
        "type_as": lambda self, other: _to_dtype(self, other.dtype),
        "size": _size,
        "reshape": _views.reshape,
        "view": _views.view,
        "flatten": _views.flatten,
        "transpose": _views.transpose,
        "t": lambda self: _views.transpose(self, 0, 1),
        "permute": _views.permute,
        "unsqueeze": _views.unsqueeze,
        "squeeze": _views.squeeze,
        "narrow": _views.narrow,
        "sum": _reduce(_C.sum),
        "mean": _reduce(_C.mean),
        "relu": lambda self: _C.relu(self),
        "gelu": lambda self: _C.gelu(self),
        "exp": lambda self: _C.exp(self),
        "log": lambda self: _C.log(self),
        "pow": lambda self, exponent: _C.pow(self, exponent),
        "softmax": lambda self, dim: _C.softmax(self, dim),
        "log_softmax": lambda self, dim: _C.log_softmax(self, dim),
        "argmax": _argmax,
        "matmul": matmul,
        "__matmul__": matmul,
        "__getitem__": _views.getitem,
        "__setitem__": _views.setitem,
        "__eq__": _compare(np.equal),
        "__ne__": _compare(np.not_equal),
        "__lt__": _compare(np.less),
        "__le__": _compare(np.less_equal),
        "__gt__": _compare(np.greater),
        "__ge__": _compare(np.greater_equal),
        "__repr__": _repr,
        "__float__": lambda self: builtins.float(self.item()),
        "__int__": lambda self: builtins.int(self.item()),
        "__index__": _index,
        "__bool__": _bool,
        "backward": _backward,
        "item": _item,
        "__reduce__": _pickle_reduce,
        "__deepcopy__": _deepcopy,
        "tolist": lambda self: self.detach().float().numpy().tolist()
        if self.dtype == dtype.bfloat16 else self.detach().numpy().tolist(),
    }
    _masks.install(methods)
    from . import _functions as F
    methods.update({
        "max": F.tensor_max, "min": F.tensor_min, "argmin": F._argmin,
        "eq": _compare(np.equal), "ne": _compare(np.not_equal), "lt": _compare(np.less),
        "le": _compare(np.less_equal), "gt": _compare(np.greater), "ge": _compare(np.greater_equal),
        "sigmoid": lambda self: _C.sigmoid(self), "tanh": lambda self: _C.tanh(self),
        "sqrt": lambda self: _C.sqrt(self), "abs": F.abs, "clamp": F.clamp, "clip": F.clamp,
        "clamp_": F._inplace(F.clamp), "isnan": F.isnan, "isfinite": F.isfinite, "isinf": F.isinf,
        "add_": F._inplace(F._add), "sub_": F._inplace(F._sub), "mul_": F._inplace(lambda a, b: a * b),
        "div_": F._inplace(lambda a, b: a / b), "chunk": F.chunk, "split": F.split,
        "mm": lambda self, other: _C.matmul(self, other), "bmm": lambda self, other: _C.matmul(self, other),
        "nelement": lambda self: self.numel(), "element_size": lambda self: self.dtype.itemsize,
        "int": lambda self: _to_dtype(self, dtype.int32),
        "new_zeros": lambda self, *size, dtype=None, requires_grad=False: _new(self, _C._zeros, size, dtype, requires_grad),
        "new_ones": lambda self, *size, dtype=None, requires_grad=False: _new(self, _ones, size, dtype, requires_grad),
        "new_full": lambda self, size, fill_value, dtype=None, requires_grad=False: F.full_like(
            _C._zeros(list(size), dtype or self.dtype), fill_value, requires_grad=requires_grad),
        "new_tensor": lambda self, data, dtype=None, requires_grad=False: tensor(data, dtype=dtype or self.dtype,
                                                                                requires_grad=requires_grad),
        "allclose": F.allclose, "equal": F.equal, "maximum": F.maximum, "minimum": F.minimum,
        "sort": F.sort, "argsort": F.argsort, "topk": F.topk, "var": F.var, "std": F.std, "norm": F.norm,
        "expand": F.expand, "expand_as": lambda self, other: F.expand(self, *other.shape), "repeat": F.repeat,
        "cuda": lambda self, *args, **kwargs: _check_device("cuda"),
        "__abs__": F.abs, "__rpow__": F.rpow, "__rtruediv__": F.rtruediv,
        "__floordiv__": F.floor_divide, "__mod__": F.remainder, "floor_divide": F.floor_divide,
        "remainder": F.remainder, "floor": F.floor, "ceil": F.ceil, "round": F.round, "log1p": F.log1p,
        "logsumexp": F.logsumexp, "index_select": F.index_select, "gather": F.gather, "cumsum": F.cumsum, "prod": F.prod, "triu": F.triu, "tril": F.tril, "unbind": F.unbind,
        "view_as": lambda self, other: _views.view(self, *other.shape),
        "mT": property(lambda self: _views.transpose(self, -2, -1)),
        "type": lambda self, dt=None: _to_dtype(self, dt) if dt is not None else
        "mixprec." + {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                      "int64": "Long", "int32": "Int", "uint8": "Byte"}[str(self.dtype).replace("mixprec.", "")]
        + "Tensor",
    })
    for name, fn in methods.items():
        setattr(Tensor, name, fn)
    Tensor.T = property(lambda self: _views.transpose(self, 0, 1) if self.ndim == 2 else self)
    Tensor.device = property(lambda self: "cpu")
    Tensor.data = property(Tensor.detach, doc="The tensor without autograd, sharing its memory")
    Tensor.is_cuda = False
    Tensor.__hash__ = object.__hash__


def _rebuild(values, dtype_name, requires_grad, cls_name):
    """Unpickles a tensor: NumPy values (bf16 as float32, exact) converted back."""
    t = _to_dtype(_C.from_numpy(np.array(values, copy=True)).clone(), getattr(dtype, dtype_name))
    if cls_name == "Parameter":
        from .nn import Parameter
        return Parameter(t, requires_grad)
    return t.requires_grad_(True) if requires_grad else t


def _pickle_reduce(self):
    values = self.detach()
    if values.dtype == dtype.bfloat16:
        values = values._to_dtype(dtype.float32)
    name = str(self.dtype).replace("mixprec.", "")
    return (_rebuild, (values.numpy().copy(), name, self.requires_grad and self.is_leaf,
                       type(self).__name__))


def _deepcopy(self, memo):
    """A new leaf with a copy of the values (copy.deepcopy of a model, an EMA copy)."""
    if id(self) in memo:
        return memo[id(self)]
    rebuild, args = _pickle_reduce(self)
    copied = rebuild(*args)
    memo[id(self)] = copied
    return copied


def _argmax(self, dim=None, keepdim=False):
    if dim is None:
        return _C.argmax(_C.reshape(self, [1, -1])).reshape()
    if _wrap_dim(dim, self.ndim) != self.ndim - 1:  # the engine's argmax is over the last dim
        from ._functions import tensor_max
        return tensor_max(self, dim, keepdim).indices
    out = _C.argmax(_C.reshape(self, [-1, self.shape[-1]])).reshape(*self.shape[:-1])
    return _views.unsqueeze(out, -1) if keepdim else out


_install()
