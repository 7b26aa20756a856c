"""mixprec.cpu.amp.autocast: PyTorch 1.13's torch.cpu.amp.autocast(enabled=True,
dtype=torch.bfloat16, cache_enabled=True), which is mixprec.amp.autocast on the CPU."""
from .. import _mixprec as _C
from ..amp import autocast as _autocast


class autocast(_autocast):
    def __init__(self, enabled=True, dtype=_C.dtype.bfloat16, cache_enabled=True):
        super().__init__(device_type="cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
