"""mixprec.amp: autocast and GradScaler with torch.amp's arguments, defaults and errors."""
import math

from . import _mixprec as _C
from ._mixprec import Tensor, dtype
from ._tensor import _EngineScope


def _check_device_type(device_type):
    if device_type == "cuda":
        raise RuntimeError('mixprec runs on CPUs: there is no CUDA device. Write '
                           'autocast(device_type="cpu", dtype=mixprec.bfloat16) (the CPU default '
                           'dtype) or dtype=mixprec.float16.')
    if device_type != "cpu":
        raise RuntimeError(f"User specified autocast device_type must be 'cpu' in mixprec, "
                           f"but got {device_type!r}")


class autocast(_EngineScope):
    """Context manager and decorator: ops inside run in `dtype` where the policy table says
    so (matmul, conv) and in float32 where precision needs it (softmax, losses). Nestable;
    thread-local; enabled=False switches autocast off inside an enabled region."""

    def __init__(self, device_type="cpu", dtype=dtype.bfloat16, enabled=True, cache_enabled=True):
        _check_device_type(device_type)
        self.device_type, self.fast_dtype = device_type, dtype
        self._enabled, self._cache_enabled = bool(enabled), bool(cache_enabled)
        self._new_scope()  # checks the dtype now, not at the first `with`

    def _new_scope(self):
        return _C._AutocastScope(self.fast_dtype, self._enabled, self._cache_enabled)


is_autocast_enabled = _C.is_autocast_enabled
get_autocast_dtype = _C.get_autocast_dtype

_READY, _UNSCALED, _STEPPED = "ready", "unscaled", "stepped"


class GradScaler:
    """Dynamic loss scaling: PyTorch's defaults, update rule and errors. The engine's scaler
    holds the scale (float32, as PyTorch's) and checks every gradient in one pass;
    last_nonfinite() names the parameters whose gradients overflowed."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._engine = _C.GradScaler(float(init_scale), float(growth_factor),
                                     float(backoff_factor), int(growth_interval), bool(enabled))
        self._stage = {}      # id(optimizer) -> stage since the last update()
        self._had_grads = {}  # id(optimizer) -> whether an inf check saw any gradient

    def is_enabled(self):
        return self._engine.is_enabled()

    def scale(self, outputs):
        """outputs * scale, for a tensor or any nesting of lists and tuples of tensors."""
        if not self.is_enabled():
            return outputs
        if isinstance(outputs, Tensor):
            return self._engine.scale(outputs)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    @staticmethod
    def _has_grads(optimizer):
        return any(p.grad is not None for group in optimizer.param_groups for p in group["params"])

    def unscale_(self, optimizer):
        if not self.is_enabled():
            return
        stage = self._stage.get(id(optimizer), _READY)
        if stage == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if stage == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        self._had_grads[id(optimizer)] = self._has_grads(optimizer)
        self._engine.unscale(optimizer._sync())
        self._stage[id(optimizer)] = _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscales (unless unscale_ ran) and steps unless a gradient is inf/NaN."""
        if not self.is_enabled():
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs or args:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        stage = self._stage.get(id(optimizer), _READY)
        if stage == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if stage == _READY:
            self._had_grads[id(optimizer)] = self._has_grads(optimizer)
        if not self._had_grads[id(optimizer)]:
            # PyTorch asserts this; a RuntimeError here, as every other misuse.
            raise RuntimeError("No inf checks were recorded for this optimizer.")
        optimizer._scaled_step(self._engine)  # every parameter group, one inf/NaN check
        self._stage[id(optimizer)] = _STEPPED
        return None

    def update(self, new_scale=None):
        if not self.is_enabled():
            return
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise ValueError("new_scale should be a float or a 1-element Tensor with "
                                     "requires_grad=False.")
                new_scale = new_scale.item()
            if not (isinstance(new_scale, (float, int)) and math.isfinite(new_scale) and new_scale > 0):
                raise ValueError(f"new_scale must be a positive finite number, got {new_scale!r}")
            self._engine.update(float(new_scale))
        else:
            if not any(self._had_grads.values()):
                raise RuntimeError("No inf checks were recorded prior to update.")
            self._engine.update()
        self._stage.clear()
        self._had_grads.clear()

    def get_scale(self):
        return self._engine.get_scale()

    def get_growth_factor(self):
        return self._engine.get_growth_factor()

    def set_growth_factor(self, new_factor):
        self._engine.set_growth_factor(float(new_factor))

    def get_backoff_factor(self):
        return self._engine.get_backoff_factor()

    def set_backoff_factor(self, new_factor):
        self._engine.set_backoff_factor(float(new_factor))

    def get_growth_interval(self):
        return self._engine.get_growth_interval()

    def set_growth_interval(self, new_interval):
        self._engine.set_growth_interval(int(new_interval))

    def state_dict(self):
        """PyTorch's keys (scale, growth_factor, backoff_factor, growth_interval,
        _growth_tracker) and the engine's counters; empty when disabled, as PyTorch's."""
        state = self._engine.state_dict()
        for key in ("growth_interval", "_growth_tracker", "_hysteresis_tracker",
                    "applied_steps", "skipped_steps"):
            if key in state:
                state[key] = int(state[key])
        return state

    def load_state_dict(self, state_dict):
        if not self.is_enabled():
            raise RuntimeError("load_state_dict() should only be called if GradScaler is enabled.")
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._engine.load_state_dict({k: float(v) for k, v in state_dict.items()})

    # Beyond PyTorch: which parameters overflowed on the last skipped step.
    def name_parameters(self, named_parameters):
        self._engine.name_parameters(list(named_parameters))

    def last_nonfinite(self):
        return self._engine.last_nonfinite()

    def skipped_steps(self):
        return self._engine.skipped_steps()
