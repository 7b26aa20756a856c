"""mixprec.optim: PyTorch 1.13's optimizers with its arguments, defaults, checks, parameter
groups and state_dict() layout.

SGD, Adam and AdamW run the engine's update (one engine object per parameter group): for
float32 parameters one step() gives the same bits as torch.optim.SGD/Adam/AdamW(foreach=False),
PyTorch 1.13's default on the CPU. RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam
(_composed.py) repeat PyTorch 1.13's single-tensor implementation, with ATen's float32
rounding points, on the tensors' memory.
"""
from .. import _mixprec as _C
from .optimizer import Optimizer, required, _EngineOptimizer, _check, _step_tensor


class SGD(_EngineOptimizer):
    _engine_options = ("momentum", "dampening", "weight_decay", "nesterov", "maximize")

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False):
        _check(lr is required or lr >= 0.0, f"Invalid learning rate: {lr}")
        _check(momentum >= 0.0, f"Invalid momentum value: {momentum}")
        _check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        _check(not nesterov or (momentum > 0 and dampening == 0),
               "Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def add_param_group(self, param_group):
        if "lr" not in param_group and self.defaults["lr"] is required:
            # PyTorch's message, and what it means for SGD
            raise ValueError("parameter group didn't specify a value of required optimization "
                             "parameter lr (SGD: lr is required, torch.optim.SGD has no default)")
        super().add_param_group(param_group)

    def _make_engine(self, params, g):
        return _C.optim.SGD(params, float(g["lr"]), float(g["momentum"]), float(g["dampening"]),
                            float(g["weight_decay"]), bool(g["nesterov"]), bool(g["maximize"]))


class _AdamBase(_EngineOptimizer):
    _engine_options = ("betas", "eps", "weight_decay", "amsgrad", "maximize")
    _decoupled = False

    def _make_engine(self, params, g):
        beta1, beta2 = g["betas"]
        return _C.optim.Adam(params, float(g["lr"]), float(beta1), float(beta2), float(g["eps"]),
                             float(g["weight_decay"]), bool(g["amsgrad"]), bool(g["maximize"]),
                             self._decoupled)

    def _step_entry(self, engine):
        # PyTorch's Adam keeps a step per parameter; the engine one per group
        return {"step": _step_tensor(engine.step_count)}


def _adam_checks(lr, betas, eps, weight_decay):
    _check(0.0 <= lr, f"Invalid learning rate: {lr}")
    _check(0.0 <= eps, f"Invalid epsilon value: {eps}")
    _check(0.0 <= betas[0] < 1.0, f"Invalid beta parameter at index 0: {betas[0]}")
    _check(0.0 <= betas[1] < 1.0, f"Invalid beta parameter at index 1: {betas[1]}")
    _check(0.0 <= weight_decay, f"Invalid weight_decay value: {weight_decay}")


class Adam(_AdamBase):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=False):
        _adam_checks(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)


class AdamW(_AdamBase):
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False):
        _adam_checks(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable)
        super().__init__(params, defaults)


from ._composed import RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam  # noqa: E402
from . import lr_scheduler  # noqa: E402  (mixprec.optim.lr_scheduler, as torch.optim's)
