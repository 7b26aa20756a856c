"""mixprec.utils: PyTorch's torch.utils namespace, for `from torch.utils.data import ...` ported
by changing `torch` to `mixprec`."""
from . import data  # noqa: F401
