"""Layers of two inputs: Bilinear, PairwiseDistance, CosineSimilarity (torch.nn's names,
arguments, defaults, parameter names and initialisation)."""
import math

from .. import _mixprec as _C
from . import functional as F
from . import init
from .modules import Module, Parameter


class Bilinear(Module):
    """out = x1^T W x2 + b; weight [out, in1, in2] and bias [out] uniform in +-1/sqrt(in1),
    as torch.nn.Bilinear (drawn from mixprec's generator)."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        floating = dtype or _C.dtype.float32
        self.weight = Parameter(_C._empty([out_features, in1_features, in2_features], floating))
        if bias:
            self.bias = Parameter(_C._empty([out_features], floating))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


__all__ = ["Bilinear", "PairwiseDistance", "CosineSimilarity"]
