"""mixprec.cpu: PyTorch 1.13's torch.cpu namespace (its amp.autocast)."""
from . import amp  # noqa: F401
