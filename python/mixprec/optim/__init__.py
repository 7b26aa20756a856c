"""mixprec.optim: SGD, Adam and AdamW with PyTorch 1.13's arguments, defaults and checks.

The update is the engine's: for float32 parameters one step() gives the same bits as
torch.optim.SGD/Adam/AdamW(foreach=False), PyTorch 1.13's default on the CPU.
"""
import numpy as np

from .. import _mixprec as _C
from .._mixprec import Tensor
from .._tensor import _zero_grads, no_grad


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """One parameter group (param_groups[0]); its 'lr' may be changed between steps."""

    def __init__(self, params, defaults, engine_factory):
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        params = list(params)
        if not params:
            raise ValueError("optimizer got an empty parameter list")
        group = dict(defaults)
        if isinstance(params[0], dict):
            if len(params) != 1:
                raise NotImplementedError("mixprec optimizers take one parameter group")
            group.update(params[0])
            params = list(group.pop("params"))
        self.defaults = dict(defaults)
        self.param_groups = [dict(group, params=params)]
        self._settings = {k: v for k, v in group.items() if k != "lr"}
        self._engine = engine_factory(params, group)
        self.state = {}

    def _sync(self):
        """Passes the group's lr to the engine; other settings are fixed at construction."""
        group = self.param_groups[0]
        for key, value in self._settings.items():
            if group.get(key) != value:
                raise ValueError(f"mixprec optimizers take changes to 'lr' only; '{key}' changed "
                                 f"from {value!r} to {group.get(key)!r}: make a new optimizer")
        self._engine.lr = float(group["lr"])
        return self._engine

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        self._sync().step()
        return loss

    def zero_grad(self, set_to_none=False):
        """PyTorch 1.13's default zeroes the gradients in place; set_to_none drops them."""
        _zero_grads(self.param_groups[0]["params"], set_to_none)

    def state_dict(self):
        """PyTorch's layout: {"state": {index: {"exp_avg": ..., "step": ...}}, "param_groups":
        [{settings..., "params": [indices]}]}, the tensors sharing the optimizer's memory."""
        state = {}
        for key, t in self._engine.state_tensors().items():
            name, index = key.rsplit(".", 1)
            state.setdefault(int(index), {})[name] = t
        if isinstance(self._engine, _C.optim.Adam):  # PyTorch's Adam keeps a step per parameter
            for entry in state.values():
                entry["step"] = _C._full([], float(self._engine.step_count), _C.dtype.float32)
        group = {k: v for k, v in self.param_groups[0].items() if k != "params"}
        group["params"] = list(range(len(self.param_groups[0]["params"])))
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict):
        """A state_dict() of this optimizer or of PyTorch's (its tensors may be torch tensors
        or NumPy arrays); the values are copied."""
        flat, steps = {}, set()
        for index, entry in state_dict["state"].items():
            for name, value in entry.items():
                if name == "step":
                    steps.add(int(float(value)))
                elif value is not None:
                    flat[f"{name}.{int(index)}"] = value if isinstance(value, Tensor) else \
                        _C.from_numpy(np.array(value, dtype=np.float32, copy=True, order="C"))
        if len(steps) > 1:
            raise ValueError(f"mixprec optimizers count steps once for all parameters; the state "
                             f"has several step counts {sorted(steps)}")
        with no_grad():
            self._engine.load_state_tensors(flat)
        self._engine.step_count = steps.pop() if steps else 0
        # The update's settings are fixed at construction: a state of other settings does not
        # fit (PyTorch's implementation switches foreach & co. do not change the numbers).
        ours = self.param_groups[0]
        for key, value in state_dict["param_groups"][0].items():
            if key == "params" or key in _IMPLEMENTATION_SWITCHES:
                continue
            if key in self._settings and not _same_setting(value, self._settings[key]):
                raise ValueError(f"the state's {key}={value!r} differs from this optimizer's "
                                 f"{self._settings[key]!r}: make the optimizer with the state's settings")
            ours[key] = value

    def __repr__(self):
        settings = "\n".join(f"    {k}: {v}" for k, v in self.param_groups[0].items() if k != "params")
        return f"{type(self).__name__} (\nParameter Group 0\n{settings}\n)"


_IMPLEMENTATION_SWITCHES = ("foreach", "capturable", "differentiable", "fused")


def _same_setting(a, b):
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return tuple(a) == tuple(b)
    return a == b


def _check(condition, message):
    if not condition:
        raise ValueError(message)


class SGD(Optimizer):
    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False):
        _check(lr is not required, "SGD: lr is required (torch.optim.SGD has no default)")
        _check(lr >= 0.0, f"Invalid learning rate: {lr}")
        _check(momentum >= 0.0, f"Invalid momentum value: {momentum}")
        _check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        _check(not nesterov or (momentum > 0 and dampening == 0),
               "Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults, lambda ps, g: _C.optim.SGD(
            ps, float(g["lr"]), float(g["momentum"]), float(g["dampening"]),
            float(g["weight_decay"]), bool(g["nesterov"]), bool(g["maximize"])))


def _adam_factory(decoupled):
    def make(ps, g):
        beta1, beta2 = g["betas"]
        return _C.optim.Adam(ps, float(g["lr"]), float(beta1), float(beta2), float(g["eps"]),
                             float(g["weight_decay"]), bool(g["amsgrad"]), bool(g["maximize"]),
                             decoupled)
    return make


def _adam_checks(lr, betas, eps, weight_decay):
    _check(0.0 <= lr, f"Invalid learning rate: {lr}")
    _check(0.0 <= eps, f"Invalid epsilon value: {eps}")
    _check(0.0 <= betas[0] < 1.0, f"Invalid beta parameter at index 0: {betas[0]}")
    _check(0.0 <= betas[1] < 1.0, f"Invalid beta parameter at index 1: {betas[1]}")
    _check(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=False):
        _adam_checks(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults, _adam_factory(False))


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False):
        _adam_checks(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable)
        super().__init__(params, defaults, _adam_factory(True))


from . import lr_scheduler  # noqa: E402  (mixprec.optim.lr_scheduler, as torch.optim's)
