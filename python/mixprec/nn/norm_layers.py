"""Instance and local response normalisation layers (torch.nn's names, arguments, defaults,
parameter and buffer names)."""
from .. import _mixprec as _C
from . import functional as F
from .modules import Module, Parameter


class _InstanceNorm(Module):
    """Per-sample, per-channel normalisation over the positions. affine: weight (ones) and bias
    (zeros); track_running_stats: running_mean (zeros), running_var (ones) and
    num_batches_tracked, which normalise in eval mode (PyTorch's defaults: neither)."""

    _batched_ndim = None

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        floating = dtype or _C.dtype.float32
        if affine:
            self.weight = Parameter(_C._full([num_features], 1.0, floating))
            self.bias = Parameter(_C._zeros([num_features], floating))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _C._zeros([num_features], floating))
            self.register_buffer("running_var", _C._full([num_features], 1.0, floating))
            self.register_buffer("num_batches_tracked", _C._zeros([], _C.dtype.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def forward(self, input):
        batched = self._batched_ndim
        if input.ndim not in (batched - 1, batched):
            raise ValueError(f"expected {batched - 1}D or {batched}D input (got {input.ndim}D input)")
        unbatched = input.ndim == batched - 1
        x = input.unsqueeze(0) if unbatched else input
        out = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats, self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class InstanceNorm1d(_InstanceNorm):
    _batched_ndim = 3


class InstanceNorm2d(_InstanceNorm):
    _batched_ndim = 4


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


__all__ = ["InstanceNorm1d", "InstanceNorm2d", "LocalResponseNorm"]
