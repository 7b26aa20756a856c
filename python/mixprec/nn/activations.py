"""Activation layers beyond layers.py's (torch.nn's names, arguments, defaults and parameter
names); each calls its mixprec.nn.functional form."""
from .. import _mixprec as _C
from . import functional as F
from .modules import Module, Parameter


class PReLU(Module):
    """x where x > 0, else weight * x: num_parameters learned slopes (1, or one per channel),
    each initialised to `init` (0.25), as torch.nn.PReLU."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(_C._full([num_parameters], float(init), dtype or _C.dtype.float32))

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class _Elementwise(Module):
    """An activation without arguments: forward is its functional form."""

    _function = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._function(input)


class Hardswish(_Elementwise):
    _function = staticmethod(F.hardswish)


class Hardsigmoid(_Elementwise):
    _function = staticmethod(F.hardsigmoid)


class SELU(_Elementwise):
    _function = staticmethod(F.selu)


class Softsign(_Elementwise):
    _function = staticmethod(F.softsign)


class Tanhshrink(_Elementwise):
    _function = staticmethod(F.tanhshrink)


class LogSigmoid(_Elementwise):
    _function = staticmethod(F.logsigmoid)


class CELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}"


__all__ = ["PReLU", "Hardswish", "Hardsigmoid", "SELU", "CELU", "GLU", "Softsign", "Softmin", "Tanhshrink",
           "Threshold", "LogSigmoid"]
