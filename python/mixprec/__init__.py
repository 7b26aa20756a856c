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
from . import nn, optim, amp, data, debug
from ._train import train
from ._load import load

__all__ = [
    "Tensor", "dtype", "float32", "float16", "bfloat16", "float64", "int64", "int32", "uint8",
    "tensor", "from_numpy", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "rand",
    "randn", "cat", "stack", "matmul", "where", "no_grad", "is_grad_enabled", "manual_seed",
    "set_num_threads", "get_num_threads", "cpu_summary", "MixprecError", "InvalidArgumentError",
    "UnimplementedError", "NotFoundError", "nn", "optim", "amp", "data", "debug", "train",
    "load",
]
