"""Dropout1d and AlphaDropout (torch.nn's names, arguments and defaults)."""
from . import functional as F
from .modules import Module


class _Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_Dropout):
    def forward(self, input):
        return F.dropout1d(input, self.p, self.training)


class AlphaDropout(_Dropout):
    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


__all__ = ["Dropout1d", "AlphaDropout"]
