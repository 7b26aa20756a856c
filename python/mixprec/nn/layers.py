"""The built-in layers (torch.nn's names, arguments and parameter names)."""
import math
from collections import OrderedDict

from .. import _mixprec as _C
from . import functional as F
from .modules import Module, Parameter, _adopt


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        _adopt(self, _C.nn.Linear(in_features, out_features, bias), ["weight", "bias"])
        _cast_parameters(self, dtype)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _conv_parameters(module, engine_layer, weight_shape, fan_in, bias):
    """A convolution's weight and bias: the engine layer's (`engine_layer()`, PyTorch's default
    initialisation as the C++ API and the CLI draw it) where it builds this kernel (a square
    one), else drawn by the same rule from the same generator (U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) in float32, weight then bias), the values the engine would draw."""
    if weight_shape[-1] == weight_shape[-2]:
        _adopt(module, engine_layer(), ["weight", "bias"])
        return
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    module.weight = Parameter(_C._uniform(list(weight_shape), -bound, bound, _C.dtype.float32))
    if bias:
        module.bias = Parameter(_C._uniform([module.out_channels],
                                            -bound, bound, _C.dtype.float32))
    else:
        module.register_parameter("bias", None)


def _conv_repr(module):
    """torch's _ConvNd.extra_repr: the arguments that differ from their defaults."""
    s = (f"{module.in_channels}, {module.out_channels}, kernel_size={module.kernel_size}, "
         f"stride={module.stride}")
    if module.padding != (0,) * len(module.padding):
        s += f", padding={module.padding}"
    if module.dilation != (1,) * len(module.dilation):
        s += f", dilation={module.dilation}"
    if module.output_padding != (0,) * len(module.output_padding):
        s += f", output_padding={module.output_padding}"
    if module.groups != 1:
        s += f", groups={module.groups}"
    if module.bias is None:
        s += ", bias=False"
    return s


class Conv2d(Module):
    """kernel_size, stride, padding and dilation each an int or an (H, W) pair, stored as
    pairs (padding may be 'valid' or 'same'), as torch.nn.Conv2d."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError("mixprec's Conv2d: padding_mode='zeros' only")
        kernel = F._pair(kernel_size, "kernel_size", "Conv2d")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel
        self.stride, self.dilation = F._pair(stride, "stride", "Conv2d"), F._pair(dilation, "dilation", "Conv2d")
        self.groups, self.transposed, self.output_padding = int(groups), False, (0, 0)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and self.stride != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = F._pair(padding, "padding", "Conv2d")
        if in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % self.groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        # The engine layer's stride and padding are never used: forward() runs F.conv2d.
        _conv_parameters(self, lambda: _C.nn.Conv2d(in_channels, out_channels, kernel[0], 1, 0, bias,
                                                    self.dilation[0], self.groups),
                         (out_channels, in_channels // self.groups) + kernel,
                         in_channels // self.groups * kernel[0] * kernel[1], bias)
        _cast_parameters(self, dtype)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

    def extra_repr(self):
        return _conv_repr(self)


class Conv1d(Module):
    """[N, C, L] -> [N, O, OL]: the engine's conv1d (a conv2d of unit height)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros" or isinstance(padding, str):
            raise NotImplementedError("mixprec's Conv1d: padding_mode='zeros' and a numeric padding only")
        k = F._single(kernel_size, "kernel_size")
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k,)
        self.stride, self.padding = F._single(stride, "stride"), F._single(padding, "padding")
        self.dilation, self.groups = F._single(dilation, "dilation"), int(groups)
        _adopt(self, _C.nn.Conv1d(in_channels, out_channels, k, self.stride, self.padding, self.dilation,
                                  self.groups, bias), ["weight", "bias"])
        _cast_parameters(self, dtype)

    def forward(self, input):
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class ConvTranspose2d(Module):
    """[N, C_in, H, W] -> [N, C_out, OH, OW]; weight [C_in, C_out / groups, KH, KW] (PyTorch's);
    kernel_size, stride, padding, output_padding and dilation each an int or an (H, W) pair."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise NotImplementedError("mixprec's ConvTranspose2d: padding_mode='zeros' only")
        op = "ConvTranspose2d"
        kernel = F._pair(kernel_size, "kernel_size", op)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, kernel
        self.stride, self.padding = F._pair(stride, "stride", op), F._pair(padding, "padding", op)
        self.output_padding = F._pair(output_padding, "output_padding", op)
        self.dilation, self.groups, self.transposed = F._pair(dilation, "dilation", op), int(groups), True
        if in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % self.groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        # PyTorch's fan_in of a transposed weight: its dim 1 times the kernel's area.
        _conv_parameters(self, lambda: _C.nn.ConvTranspose2d(in_channels, out_channels, kernel[0], 1, 0, 0,
                                                             self.groups, bias, self.dilation[0]),
                         (in_channels, out_channels // self.groups) + kernel,
                         out_channels // self.groups * kernel[0] * kernel[1], bias)
        _cast_parameters(self, dtype)

    def forward(self, input):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)

    def extra_repr(self):
        return _conv_repr(self)


class MaxPool2d(Module):
    """kernel_size, stride (None: the kernel's), padding and dilation each an int or an (H, W)
    pair, kept as given (torch's)."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        return F.relu(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha

    def forward(self, input):
        return F.elu(input, self.alpha)


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        return F.silu(input)


class Softplus(Module):
    def __init__(self, beta=1, threshold=20):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)


class Mish(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        return F.mish(input)


class ReLU6(Module):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        return F.relu6(input)


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val = min_val, max_val

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, self.approximate)


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, input):
        return F.dropout(input, self.p, self.training)


class Dropout2d(Dropout):
    def forward(self, input):
        return F.dropout2d(input, self.p, self.training)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return F.flatten(input, self.start_dim, self.end_dim)


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
        self.normalized_shape, self.eps = tuple(shape), eps
        self.elementwise_affine = elementwise_affine
        _adopt(self, _C.nn.LayerNorm(shape, eps, elementwise_affine), ["weight", "bias"])
        _cast_parameters(self, dtype)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class BatchNorm2d(Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        if momentum is None:
            raise NotImplementedError("mixprec's BatchNorm2d needs a momentum (no cumulative average)")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        engine = _C.nn.BatchNorm2d(num_features, eps, momentum)
        _adopt(self, engine, ["weight", "bias"] if affine else [])
        if not affine:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        buffers = dict(engine.named_buffers())
        if track_running_stats:
            self.register_buffer("running_mean", buffers["running_mean"])
            self.register_buffer("running_var", buffers["running_var"])
            # PyTorch's state_dict has it; with a momentum it only counts.
            self.register_buffer("num_batches_tracked", _C._zeros([], _C.dtype.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        _cast_parameters(self, dtype)

    def forward(self, input):
        if input.ndim != 4:
            raise ValueError(f"expected 4D input (got {input.ndim}D input)")
        use_batch_stats = self.training or self.running_mean is None
        if self.training and self.num_batches_tracked is not None:
            self.num_batches_tracked.fill_(self.num_batches_tracked.item() + 1)
        return F.batch_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                            use_batch_stats, self.momentum, self.eps)


class BatchNorm1d(BatchNorm2d):
    """BatchNorm over [N, C] or [N, C, L]: BatchNorm2d's statistics over N (and L), the input
    seen as [N, C, L, 1]."""

    def forward(self, input):
        if input.ndim not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.ndim}D input)")
        shape = list(input.shape)
        out = super().forward(input.reshape(shape[0], shape[1], shape[2] if input.ndim == 3 else 1, 1))
        return out.reshape(*shape)


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = Parameter(_C._full([num_channels], 1.0, dtype or _C.dtype.float32))
            self.bias = Parameter(_C._zeros([num_channels], dtype or _C.dtype.float32))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)


class Upsample(Module):
    """F.interpolate with the layer's arguments (torch's: a scale_factor is kept as float)."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode}"


class Embedding(Module):
    """padding_idx: that row starts at zero, gets no gradient and gives zeros (the weight is
    read through a mask that zeroes the row, one multiply of the table per forward)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 device=None, dtype=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("mixprec's Embedding: no max_norm, scale_grad_by_freq or sparse")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
        if _weight is not None:
            self.weight = Parameter(_weight)
        else:
            _adopt(self, _C.nn.Embedding(num_embeddings, embedding_dim), ["weight"])
            if padding_idx is not None:
                from .._tensor import no_grad
                with no_grad():
                    self.weight[padding_idx] = 0.0
        _cast_parameters(self, dtype)

    def forward(self, input):
        if self.padding_idx is None:
            return F.embedding(input, self.weight)
        import numpy as np
        keep = np.ones((self.num_embeddings, 1), np.float32)
        keep[self.padding_idx] = 0.0
        return F.embedding(input, self.weight * _C.cast(_C.from_numpy(keep), self.weight.dtype))


def _as_built(module, cls):
    """module is a cls exactly as the library builds it (not a subclass, no forward set on the
    instance, no forward hooks, which a fused op would not call): Sequential may run it
    inside a fused op."""
    return (type(module) is cls and "forward" not in module.__dict__
            and not module.__dict__.get("_forward_hooks") and not module.__dict__.get("_forward_pre_hooks"))


def _fusable_pool(module):
    """The kernel of a MaxPool2d that relu_max_pool2d computes (a square kernel k, stride k, no
    padding, dilation, ceil_mode or indices), else None."""
    if not _as_built(module, MaxPool2d) or module.return_indices or module.ceil_mode:
        return None
    try:
        kernel = F._pair(module.kernel_size, "kernel_size", "MaxPool2d")
        plain = (F._pair(module.stride, "stride", "MaxPool2d") == kernel
                 and F._pair(module.padding, "padding", "MaxPool2d") == (0, 0)
                 and F._pair(module.dilation, "dilation", "MaxPool2d") == (1, 1))
    except (RuntimeError, TypeError, ValueError):
        return None
    return kernel[0] if plain and kernel[0] == kernel[1] and kernel[0] >= 1 else None


def _fusable_conv(module):
    """A Conv2d that conv2d_relu_max_pool2d computes: the same numeric stride and padding on
    both axes (its int arguments), no dilation or groups."""
    return (_as_built(module, Conv2d) and not isinstance(module.padding, str)
            and module.stride[0] == module.stride[1] and module.padding[0] == module.padding[1]
            and module.dilation == (1, 1) and module.groups == 1)


class Sequential(Module):
    """torch.nn.Sequential. Runs of Conv2d, ReLU, MaxPool2d(k) and of ReLU, MaxPool2d(k) on a
    4-d input go through the engine's fused ops, as its own Sequential does
    (mixprec/ops/ops_fused.h): the same values and gradients, without the full-resolution
    intermediates, and for a network's first layer the fused first-layer kernel. A module
    subclassed or given its own forward runs as itself."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def __getitem__(self, index):
        modules = list(self._modules.values())
        if isinstance(index, slice):
            return Sequential(*modules[index])
        return modules[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def forward(self, input):
        modules = list(self._modules.values())
        i = 0
        while i < len(modules):
            module = modules[i]
            if getattr(input, "ndim", 0) == 4:
                k = _fusable_pool(modules[i + 2]) if i + 2 < len(modules) else None
                if k and _fusable_conv(module) and _as_built(modules[i + 1], ReLU):
                    input = _C.conv2d_relu_max_pool2d(input, module.weight, module.bias, module.stride[0],
                                                      module.padding[0], k)
                    i += 3
                    continue
                k = _fusable_pool(modules[i + 1]) if i + 1 < len(modules) else None
                if k and _as_built(module, ReLU):
                    input = _C.relu_max_pool2d(input, k)
                    i += 2
                    continue
            input = module(input)
            i += 1
        return input


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        for module in modules or []:
            self.append(module)

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def __getitem__(self, index):
        return list(self._modules.values())[index]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    """Modules by name, registered in insertion order (torch.nn.ModuleDict)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        for key, module in (modules.items() if hasattr(modules, "items") else modules):
            self[key] = module


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.weight, self.ignore_index, self.label_smoothing = weight, ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)


class NLLLoss(_Loss):
    def forward(self, input, target):
        return F.nll_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, self.reduction, self.beta)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class BCELoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction)
        self.weight = weight

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class L1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction)

    def forward(self, input, target):
        return F.l1_loss(input, target, self.reduction)


class MSELoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction)

    def forward(self, input, target):
        return F.mse_loss(input, target, self.reduction)


def _cast_parameters(module, target):
    if target is not None:
        module.to(target)


__all__ = ["Linear", "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "ReLU", "ReLU6", "LeakyReLU", "ELU", "SiLU", "Softplus", "Mish", "Hardtanh",
           "Sigmoid", "Tanh", "GELU", "Dropout", "Dropout2d", "Flatten", "Identity", "Softmax", "LogSoftmax", "LayerNorm",
           "BatchNorm1d", "BatchNorm2d", "GroupNorm", "Upsample", "Embedding", "Sequential", "ModuleList", "ModuleDict", "CrossEntropyLoss",
           "NLLLoss", "L1Loss", "SmoothL1Loss", "MSELoss", "BCELoss", "BCEWithLogitsLoss"]
