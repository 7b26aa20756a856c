"""mixprec: mixed-precision training on CPUs, with PyTorch 1.13's names and semantics.

    import mixprec
    from mixprec import nn, optim
    from mixprec.amp import autocast, GradScaler

A thin layer over the C++ engine (mixprec._mixprec); docs/python.md lists the API and what
differs from PyTorch.
"""
from . import _mixprec as _C
from ._C_names import (Tensor, dtype, float32, float16, bfloat16, float64, int64, int32, uint8,
                       half, float, double, long, int)
from ._tensor import (tensor, from_numpy, zeros, ones, full, empty, zeros_like, ones_like, rand,
                      randn, cat, stack, no_grad, is_grad_enabled)
from ._methods import matmul  # also gives mixprec.Tensor its Python methods
from ._masks import where
from ._C_names import (MixprecError, InvalidArgumentError, UnimplementedError, NotFoundError,
                       manual_seed, set_num_threads, get_num_threads, cpu_summary)
from . import nn, optim, amp, data, debug, cuda, cpu, utils
from ._samplers import Generator  # torch.Generator, for the samplers and random_split
from ._train import train
from ._load import load
from ._device import device
from .amp import autocast  # torch.autocast
from ._functions import (maximum, minimum, clamp, abs, isnan, isfinite, isinf, allclose, equal, chunk, split,
                         arange, linspace, randint, randperm, eye, full_like, rand_like, randn_like, as_tensor,
                         is_tensor, is_floating_point, numel, enable_grad, set_grad_enabled, inference_mode, save,
                         sort, argsort, topk, var, std, norm, floor, ceil, round, floor_divide, remainder,
                         log1p, logsumexp, triu, tril, unbind, meshgrid, index_select, gather, cumsum)
from ._functions import tensor_max as _tensor_max, tensor_min as _tensor_min
from ._composites import *  # noqa: F401,F403 (torch.diag, torch.scatter_add, ...; also gives Tensor x.mul(y), ...)
from ._composites import __all__ as _composites_all
from ._functions import prod
from ._einsum import einsum


def _method_alias(name, doc):
    def function(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    return function


# torch.NAME(input, ...) is input.NAME(...) for these (the same arguments and defaults).
for _name in ("flatten", "reshape", "transpose", "permute", "squeeze", "unsqueeze", "narrow", "clone", "t",
              "sum", "mean", "argmax", "argmin", "exp", "log", "sigmoid", "tanh", "sqrt", "relu", "softmax",
              "log_softmax", "neg", "pow", "mm", "bmm", "eq", "ne", "lt", "le", "gt", "ge", "clip", "detach"):
    globals()[_name] = _method_alias(_name, f"torch.{_name}(input, ...): input.{_name}(...)")
def FloatTensor(data):
    """The legacy constructor torch.FloatTensor(data): tensor(data, dtype=float32)."""
    return tensor(data, dtype=float32)


def LongTensor(data):
    return tensor(data, dtype=int64)


max = _method_alias("max", "torch.max(input), torch.max(input, dim, keepdim=False) -> (values, indices), "
                           "torch.max(input, other): elementwise")
min = _method_alias("min", "torch.min: as torch.max")
del _name

__all__ = [
    "Tensor", "dtype", "float32", "float16", "bfloat16", "float64", "int64", "int32", "uint8",
    "tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "rand",
    "randn", "cat", "stack", "matmul", "where", "no_grad", "is_grad_enabled", "manual_seed",
    "set_num_threads", "get_num_threads", "cpu_summary", "MixprecError", "InvalidArgumentError",
    "UnimplementedError", "NotFoundError", "nn", "optim", "amp", "data", "debug", "train",
    "load", "save", "device", "cuda", "cpu", "utils", "autocast", "maximum", "minimum", "clamp", "clip", "isnan", "isfinite",
    "isinf", "allclose", "equal", "chunk", "split", "arange", "linspace", "randint", "randperm", "eye",
    "full_like", "rand_like", "randn_like", "as_tensor", "is_tensor", "is_floating_point", "numel",
    "enable_grad", "set_grad_enabled", "inference_mode", "floor", "ceil", "floor_divide", "remainder",
    "log1p", "logsumexp", "triu", "tril", "unbind", "meshgrid", "index_select", "gather", "cumsum", "prod", "einsum", "FloatTensor", "LongTensor", "sort", "argsort", "topk", "var", "std", "norm", "flatten", "reshape", "transpose", "permute",
    "squeeze", "unsqueeze", "narrow", "clone", "t", "mean", "argmax", "argmin", "exp", "log",
    "sigmoid", "tanh", "sqrt", "relu", "softmax", "log_softmax", "neg", "mm", "bmm", "eq", "ne", "lt",
    "le", "gt", "ge", "detach",  # max, min, abs, sum, pow: not by *, which would hide the builtins
    "Generator",
] + [name for name in _composites_all if name not in ("any", "all")]  # builtins again
