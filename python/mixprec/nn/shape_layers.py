"""Layers that reshape, pad or pool (torch.nn's names, arguments and defaults); each calls its
mixprec.nn.functional form."""
from . import functional as F
from .modules import Module


class Unflatten(Module):
    """Dim `dim` split into unflattened_size (one entry may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, str):
            raise NotImplementedError("mixprec's Unflatten: named dims are not supported")
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be tuple of ints, but found type {}".format(
                type(unflattened_size).__name__))
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        d = self.dim % input.ndim
        sizes = list(self.unflattened_size)
        known = 1
        for s in sizes:
            known *= 1 if s == -1 else s
        fits = (known and input.shape[d] % known == 0) if -1 in sizes else known == input.shape[d]
        if not fits:
            raise RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of dim {self.dim} "
                               f"({input.shape[d]}) in the input tensor")
        return input.reshape(*(list(input.shape[:d]) + sizes + list(input.shape[d + 1:])))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


# ---- padding -------------------------------------------------------------------------------

class _Pad(Module):
    """padding: an int (every side) or a tuple (left, right[, top, bottom]), as torch's."""

    _mode, _sides = "constant", 2

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = (padding,) * self._sides if isinstance(padding, int) else tuple(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, self._mode, self.value if self._mode == "constant" else None)

    def extra_repr(self):
        return f"padding={self.padding}" + (f", value={self.value}" if self._mode == "constant" else "")


class ConstantPad1d(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad2d(_Pad):
    _sides = 4

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad2d(_Pad):
    _sides = 4

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_Pad):
    _mode = "reflect"

    def __init__(self, padding):
        super().__init__(padding)


class ReflectionPad2d(ReflectionPad1d):
    _sides = 4


class ReplicationPad1d(_Pad):
    _mode = "replicate"

    def __init__(self, padding):
        super().__init__(padding)


class ReplicationPad2d(ReplicationPad1d):
    _sides = 4


# ---- pooling -------------------------------------------------------------------------------

class MaxPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        single = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,)  # noqa: E731 (torch's _single)
        self.kernel_size = single(kernel_size)
        self.stride = single(stride if stride is not None else kernel_size)
        self.padding, self.ceil_mode, self.count_include_pad = single(padding), ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):
        return F.adaptive_avg_pool1d(input, self.output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    def forward(self, input):
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptivePool):
    def forward(self, input):
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


__all__ = ["Unflatten", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "ConstantPad1d", "ConstantPad2d",
           "ZeroPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad1d", "ReplicationPad2d", "MaxPool1d",
           "AvgPool1d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d"]
