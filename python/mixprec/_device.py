"""torch.device for scripts written with devices in mind: mixprec computes on the CPU, so a
device names the CPU (`device("cpu")`, `"cpu:0"`) or is refused where a tensor or module would
be moved to it, with what to write instead (_tensor._check_device). `device("cuda" if
torch.cuda.is_available() else "cpu")` gives the CPU, as on a machine without a GPU."""

_TYPES = ("cpu", "cuda", "mps", "xpu", "meta", "hip", "xla", "vulkan", "ipu", "hpu", "ort", "mkldnn", "opengl",
          "opencl", "ideep", "ve", "fpga", "lazy")


class device:
    """A device's type and optional index (torch.device's constructor forms)."""

    def __init__(self, type, index=None):
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, int) and index is None:  # torch.device(0): the first CUDA device
            type, index = "cuda", type
        text = str(type)
        if ":" in text:
            if index is not None:
                raise RuntimeError("type (string) must not include an index because index was passed explicitly: "
                                   + text)
            text, _, number = text.partition(":")
            if not number.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = int(number)
        if text not in _TYPES:
            raise RuntimeError(f"Expected one of {', '.join(_TYPES)} device type at start of device string: {text}")
        self.type, self.index = text, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}')" if self.index is None else \
            f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other):
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))


def is_cpu(d):
    """Whether d (a device, a string, None) names the CPU."""
    if d is None:
        return True
    try:
        return device(d).type == "cpu"
    except RuntimeError:
        return False
