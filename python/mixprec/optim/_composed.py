"""RMSprop, Adagrad, Adadelta, Adamax, NAdam and RAdam: PyTorch 1.13's single-tensor
(foreach=False) updates, operation by operation, with ATen's float32 rounding points.

mixprec has no fused multiply-add op, and ATen's CPU kernels fuse: add_(t, alpha=a) is
fma(t, a, self), addcmul_(t1, t2, value=v) is fma(v * t1, t2, self) (measured on the AVX2
build, vector and scalar-tail paths alike), while addcdiv_ is self + (v * t1) / t2 and a
division by a Python number is a true division. So the updates run in NumPy on the tensors'
own memory, each fma exactly rounded (_fma32), which makes a float32 step bit-identical to
torch's. Python numbers enter each op rounded to float32 first, as ATen's scalar arguments.
float64 parameters use the same order with unfused a * b + c (within an ulp per fused op);
16-bit parameters are refused (keep float32 master weights, as mixed precision does).
"""
import math

import numpy as np

from .. import _mixprec as _C
from .._mixprec import Tensor
from .optimizer import Optimizer, _as_mixprec, _check, _step_tensor


def _fma32(a, b, c):
    """round_to_float32(a * b + c) with one rounding, a, b, c float32 (arrays or scalars).
    The product is exact in float64; the sum is rounded to odd (TwoSum gives its error,
    an inexact even result moves one ulp towards it), and a round-to-odd float64 rounds to
    the nearest float32 exactly as the infinitely precise sum would."""
    p = np.multiply(np.float64(a) if np.isscalar(a) else np.asarray(a, np.float64),
                    np.asarray(b, np.float64))
    c = np.asarray(c, np.float64)
    s = p + c
    bv = s - p
    err = (p - (s - bv)) + (c - bv)
    inexact_even = (err != 0) & np.isfinite(err) & ((s.view(np.int64) & 1) == 0)
    if inexact_even.any():
        s = np.where(inexact_even, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def _fma(a, b, c):
    """a * b + c as ATen's fused kernels give it, in c's dtype."""
    if c.dtype == np.float32:
        return _fma32(a, b, c)
    return a * b + c


class _Ops:
    """ATen's ops on NumPy arrays of one dtype, Python numbers cast to it first."""

    def __init__(self, dt):
        self.dt = dt

    def s(self, x):
        return self.dt.type(x)

    def add_alpha(self, a, b, alpha):  # a.add(b, alpha=alpha)
        return _fma(b, self.s(alpha), a)

    def addcmul(self, a, t1, t2, value=1.0):  # a.addcmul(t1, t2, value=value)
        return _fma(self.s(value) * t1, t2, a)

    def addcdiv(self, a, t1, t2, value=1.0):  # a.addcdiv(t1, t2, value=value)
        return a + (self.s(value) * t1) / t2


def _array(t):
    return t.detach().numpy()


class _ComposedOptimizer(Optimizer):
    """State per parameter in self.state (PyTorch's names, mixprec tensors); step() runs
    _update(group, param, grad, state, ops) on NumPy views of the tensors' memory."""

    _tensor_state = ()  # state entries that are tensors the shape of the parameter
    _scalar_tensor_state = ()  # 0-dim float32 tensors (PyTorch's 'step', NAdam's mu_product)

    def _init_state(self, group, p):
        raise NotImplementedError

    def _update(self, group, param, grad, state, arrays, ops):
        """One parameter's update: param, grad and arrays (the tensor state) are NumPy
        views, written in place; state holds the rest ('step', ...)."""
        raise NotImplementedError

    def _step_groups(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.dtype not in (_C.dtype.float32, _C.dtype.float64):
                    raise NotImplementedError(
                        f"mixprec's {type(self).__name__} updates float32 or float64 parameters, "
                        f"got {p.dtype}: keep float32 master weights")
                state = self._state.get(p)
                if state is None:
                    state = self._state[p] = self._init_state(group, p)
                param = _array(p)
                grad = _array(p.grad)
                if grad.dtype != param.dtype:
                    grad = grad.astype(param.dtype)
                arrays = {k: _array(state[k]) for k in self._tensor_state if k in state}
                self._update(group, param, grad, state, arrays, _Ops(param.dtype))
                p.mark_modified_()  # written through NumPy: invalidate the engine's caches

    def _load_state(self, new_groups, per_param):
        state = {}
        for p, entry in per_param.values():
            converted = {}
            for name, value in entry.items():
                if name in self._scalar_tensor_state:
                    converted[name] = _step_tensor(float(value))
                elif name == "step":  # RMSprop's and Adadelta's plain count
                    converted[name] = int(float(value))
                elif isinstance(value, (Tensor, np.ndarray)) or hasattr(value, "__array__"):
                    converted[name] = _as_mixprec(value, p)
                else:
                    converted[name] = value
            state[p] = converted
        self.param_groups[:] = new_groups
        self._state = state


def _zeros_like(p):
    return _C._zeros(list(p.shape), p.dtype)


def _increment(t):
    """step_t += 1 on a float32 0-dim tensor; returns step_t.item()."""
    a = _array(t)
    a[...] = a + np.float32(1)
    return float(a)


def _adam_like_checks(lr, betas, eps, weight_decay):
    _check(0.0 <= lr, "Invalid learning rate: {}".format(lr))
    _check(0.0 <= eps, "Invalid epsilon value: {}".format(eps))
    _check(0.0 <= betas[0] < 1.0, "Invalid beta parameter at index 0: {}".format(betas[0]))
    _check(0.0 <= betas[1] < 1.0, "Invalid beta parameter at index 1: {}".format(betas[1]))
    _check(0.0 <= weight_decay, "Invalid weight_decay value: {}".format(weight_decay))


def _decayed(grad, param, group, ops, maximize):
    grad = -grad if maximize else grad
    if group["weight_decay"] != 0:
        grad = ops.add_alpha(grad, param, group["weight_decay"])
    return grad


class RMSprop(_ComposedOptimizer):
    _tensor_state = ("square_avg", "momentum_buffer", "grad_avg")

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, foreach=None, maximize=False, differentiable=False):
        _check(0.0 <= lr, "Invalid learning rate: {}".format(lr))
        _check(0.0 <= eps, "Invalid epsilon value: {}".format(eps))
        _check(0.0 <= momentum, "Invalid momentum value: {}".format(momentum))
        _check(0.0 <= weight_decay, "Invalid weight_decay value: {}".format(weight_decay))
        _check(0.0 <= alpha, "Invalid alpha value: {}".format(alpha))
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _init_state(self, group, p):
        state = {"step": 0, "square_avg": _zeros_like(p)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = _zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = _zeros_like(p)
        return state

    def _update(self, group, param, grad, state, arrays, ops):
        state["step"] += 1
        alpha, lr = group["alpha"], group["lr"]
        grad = _decayed(grad, param, group, ops, group["maximize"])
        square_avg = arrays["square_avg"]
        square_avg[...] = ops.addcmul(square_avg * ops.s(alpha), grad, grad, 1 - alpha)
        if group["centered"]:
            grad_avg = arrays["grad_avg"]
            grad_avg[...] = ops.add_alpha(grad_avg * ops.s(alpha), grad, 1 - alpha)
            avg = np.sqrt(ops.addcmul(square_avg, grad_avg, grad_avg, -1))
        else:
            avg = np.sqrt(square_avg)
        avg = avg + ops.s(group["eps"])
        if group["momentum"] > 0:
            buf = arrays["momentum_buffer"]
            buf[...] = ops.addcdiv(buf * ops.s(group["momentum"]), grad, avg)
            param[...] = ops.add_alpha(param, buf, -lr)
        else:
            param[...] = ops.addcdiv(param, grad, avg, -lr)


class Adagrad(_ComposedOptimizer):
    _tensor_state = ("sum",)
    _scalar_tensor_state = ("step",)

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False):
        _check(0.0 <= lr, "Invalid learning rate: {}".format(lr))
        _check(0.0 <= lr_decay, "Invalid lr_decay value: {}".format(lr_decay))
        _check(0.0 <= weight_decay, "Invalid weight_decay value: {}".format(weight_decay))
        _check(0.0 <= initial_accumulator_value,
               "Invalid initial_accumulator_value value: {}".format(initial_accumulator_value))
        _check(0.0 <= eps, "Invalid epsilon value: {}".format(eps))
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)
        # PyTorch's Adagrad makes its state at construction, for every parameter
        for group in self.param_groups:
            for p in group["params"]:
                self._state[p] = self._init_state(group, p)

    def _init_state(self, group, p):
        return {"step": _step_tensor(0.0),
                "sum": _C._full(list(p.shape), float(group["initial_accumulator_value"]), p.dtype)}

    def _update(self, group, param, grad, state, arrays, ops):
        step = _increment(state["step"])
        grad = _decayed(grad, param, group, ops, group["maximize"])
        clr = group["lr"] / (1 + (step - 1) * group["lr_decay"])
        state_sum = arrays["sum"]
        state_sum[...] = ops.addcmul(state_sum, grad, grad, 1)
        std = np.sqrt(state_sum) + ops.s(group["eps"])
        param[...] = ops.addcdiv(param, grad, std, -clr)


class Adadelta(_ComposedOptimizer):
    _tensor_state = ("square_avg", "acc_delta")

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 maximize=False):
        _check(0.0 <= lr, "Invalid learning rate: {}".format(lr))
        _check(0.0 <= rho <= 1.0, "Invalid rho value: {}".format(rho))
        _check(0.0 <= eps, "Invalid epsilon value: {}".format(eps))
        _check(0.0 <= weight_decay, "Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        foreach=foreach)
        super().__init__(params, defaults)

    def _init_state(self, group, p):
        return {"step": 0, "square_avg": _zeros_like(p), "acc_delta": _zeros_like(p)}

    def _update(self, group, param, grad, state, arrays, ops):
        state["step"] += 1
        rho, eps = group["rho"], ops.s(group["eps"])
        grad = _decayed(grad, param, group, ops, group["maximize"])
        square_avg, acc_delta = arrays["square_avg"], arrays["acc_delta"]
        square_avg[...] = ops.addcmul(square_avg * ops.s(rho), grad, grad, 1 - rho)
        std = np.sqrt(square_avg + eps)
        delta = np.sqrt(acc_delta + eps) / std * grad
        acc_delta[...] = ops.addcmul(acc_delta * ops.s(rho), delta, delta, 1 - rho)
        param[...] = ops.add_alpha(param, delta, -group["lr"])


class Adamax(_ComposedOptimizer):
    _tensor_state = ("exp_avg", "exp_inf")
    _scalar_tensor_state = ("step",)

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False):
        _adam_like_checks(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def _init_state(self, group, p):
        return {"step": _step_tensor(0.0), "exp_avg": _zeros_like(p), "exp_inf": _zeros_like(p)}

    def _update(self, group, param, grad, state, arrays, ops):
        beta1, beta2 = group["betas"]
        step = _increment(state["step"])
        grad = _decayed(grad, param, group, ops, group["maximize"])
        exp_avg, exp_inf = arrays["exp_avg"], arrays["exp_inf"]
        exp_avg[...] = ops.add_alpha(exp_avg * ops.s(beta1), grad, 1 - beta1)
        # torch.amax over cat([exp_inf * beta2, |grad| + eps]): NaN-propagating, as np.maximum
        exp_inf[...] = np.maximum(exp_inf * ops.s(beta2), np.abs(grad) + ops.s(group["eps"]))
        clr = group["lr"] / (1 - beta1 ** step)
        param[...] = ops.addcdiv(param, exp_avg, exp_inf, -clr)


class NAdam(_ComposedOptimizer):
    _tensor_state = ("exp_avg", "exp_avg_sq")
    _scalar_tensor_state = ("step", "mu_product")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, foreach=None):
        _adam_like_checks(lr, betas, eps, weight_decay)
        _check(0.0 <= momentum_decay, "Invalid momentum_decay value: {}".format(momentum_decay))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay, foreach=foreach)
        super().__init__(params, defaults)

    def _init_state(self, group, p):
        return {"step": _step_tensor(0.0), "mu_product": _step_tensor(1.0),
                "exp_avg": _zeros_like(p), "exp_avg_sq": _zeros_like(p)}

    def _update(self, group, param, grad, state, arrays, ops):
        beta1, beta2 = group["betas"]
        lr, momentum_decay = group["lr"], group["momentum_decay"]
        step = _increment(state["step"])
        bias_correction2 = 1 - beta2 ** step
        grad = _decayed(grad, param, group, ops, False)
        mu = beta1 * (1. - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1. - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        # mu_product is a float32 tensor: each product rounds to float32
        mu_product = _array(state["mu_product"])
        mu_product[...] = mu_product * np.float32(mu)
        mu_product_next = mu_product * np.float32(mu) * np.float32(mu_next)
        exp_avg, exp_avg_sq = arrays["exp_avg"], arrays["exp_avg_sq"]
        exp_avg[...] = ops.add_alpha(exp_avg * ops.s(beta1), grad, 1 - beta1)
        exp_avg_sq[...] = ops.addcmul(exp_avg_sq * ops.s(beta2), grad, grad, 1 - beta2)
        denom = np.sqrt(exp_avg_sq / ops.s(bias_correction2)) + ops.s(group["eps"])
        param[...] = ops.addcdiv(param, grad, denom, -lr * (1. - mu) / (1. - float(mu_product)))
        param[...] = ops.addcdiv(param, exp_avg, denom,
                                 -lr * mu_next / (1. - float(mu_product_next)))


class RAdam(_ComposedOptimizer):
    _tensor_state = ("exp_avg", "exp_avg_sq")
    _scalar_tensor_state = ("step",)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None):
        _adam_like_checks(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach)
        super().__init__(params, defaults)

    def _init_state(self, group, p):
        return {"step": _step_tensor(0.0), "exp_avg": _zeros_like(p), "exp_avg_sq": _zeros_like(p)}

    def _update(self, group, param, grad, state, arrays, ops):
        beta1, beta2 = group["betas"]
        lr = group["lr"]
        step = _increment(state["step"])
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        grad = _decayed(grad, param, group, ops, False)
        exp_avg, exp_avg_sq = arrays["exp_avg"], arrays["exp_avg_sq"]
        exp_avg[...] = ops.add_alpha(exp_avg * ops.s(beta1), grad, 1 - beta1)
        exp_avg_sq[...] = ops.addcmul(exp_avg_sq * ops.s(beta2), grad, grad, 1 - beta2)
        bias_corrected_exp_avg = exp_avg / ops.s(bias_correction1)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        if rho_t > 5.:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            # a Python number divided by a tensor is PyTorch's reciprocal() * number
            adaptive_lr = (ops.s(1) / (np.sqrt(exp_avg_sq) + ops.s(group["eps"]))) * \
                ops.s(math.sqrt(bias_correction2))
            update = bias_corrected_exp_avg * ops.s(lr) * adaptive_lr * ops.s(rect)
        else:
            update = bias_corrected_exp_avg * ops.s(lr)
        param[...] = ops.add_alpha(param, update, -1.0)
