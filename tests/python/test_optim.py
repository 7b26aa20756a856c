"""mixprec.optim against the update formulas of PyTorch's documentation, in float64 NumPy."""
import numpy as np
import pytest

import mixprec
from helpers import rng


def run(make_optimizer, grads, p0):
    p = mixprec.nn.Parameter(mixprec.tensor(p0))
    opt = make_optimizer([p])
    for g in grads:
        p.grad = mixprec.tensor(g)
        opt.step()
    return p.detach().numpy().astype(np.float64)


def reference_adam(p, grads, lr, betas, eps, wd, decoupled, amsgrad=False):
    m = v = vmax = np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        if decoupled:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        vmax = np.maximum(vmax, v)
        denom = np.sqrt((vmax if amsgrad else v) / (1 - betas[1] ** t)) + eps
        p = p - lr / (1 - betas[0] ** t) * m / denom
    return p


def reference_sgd(p, grads, lr, momentum, dampening, wd, nesterov):
    buf = None
    for g in grads:
        g = g + wd * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


GRADS = [rng(s).standard_normal(6) for s in range(5)]
P0 = rng(10).standard_normal(6).astype(np.float32)


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    dict(lr=0.1, momentum=0.5, dampening=0.3),
])
def test_sgd(kwargs):
    got = run(lambda ps: mixprec.optim.SGD(ps, **kwargs), GRADS, P0)
    full = dict(momentum=0, dampening=0, weight_decay=0, nesterov=False)
    full.update(kwargs)
    expected = reference_sgd(P0.astype(np.float64), GRADS, full["lr"], full["momentum"],
                             full["dampening"], full["weight_decay"], full["nesterov"])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls, kwargs", [
    ("Adam", {}), ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", {}), ("AdamW", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.5)),
])
def test_adam_and_adamw(cls, kwargs):
    got = run(lambda ps: getattr(mixprec.optim, cls)(ps, **kwargs), GRADS, P0)
    full = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, amsgrad=False,
                weight_decay=1e-2 if cls == "AdamW" else 0.0)
    full.update(kwargs)
    expected = reference_adam(P0.astype(np.float64), GRADS, full["lr"], full["betas"], full["eps"],
                              full["weight_decay"], cls == "AdamW", full["amsgrad"])
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_learning_rate_changes_through_param_groups():
    p = mixprec.nn.Parameter(mixprec.tensor([1.0]))
    opt = mixprec.optim.SGD([p], lr=0.5)
    p.grad = mixprec.tensor([1.0])
    opt.step()
    for group in opt.param_groups:
        group["lr"] = 0.25
    opt.step()
    assert p.item() == 1.0 - 0.5 - 0.25
    # Any option may change between steps, as PyTorch's (the group's engine is rebuilt)
    opt.param_groups[0]["momentum"] = 0.9
    opt.step()  # the first step with momentum: its buffer is the gradient itself
    assert p.item() == 1.0 - 0.5 - 0.25 - 0.25


def test_zero_grad_in_place_or_to_none():
    p = mixprec.nn.Parameter(mixprec.tensor([1.0, 2.0]))
    opt = mixprec.optim.Adam([p])
    (p * p).sum().backward()
    opt.zero_grad()  # PyTorch 1.13's default: zeros, kept
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])
    opt.zero_grad(set_to_none=True)
    assert p.grad is None


def test_pytorch_argument_checks():
    p = [mixprec.nn.Parameter(mixprec.tensor([1.0]))]
    with pytest.raises(ValueError, match="Invalid learning rate"):
        mixprec.optim.Adam(p, lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        mixprec.optim.AdamW(p, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Nesterov"):
        mixprec.optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="lr is required"):
        mixprec.optim.SGD(p)
    with pytest.raises(ValueError, match="empty parameter list"):
        mixprec.optim.SGD([], lr=0.1)
    assert mixprec.optim.AdamW(p).param_groups[0]["weight_decay"] == 1e-2


def test_state_dict_resumes_identically():
    def make(ps):
        return mixprec.optim.Adam(ps, lr=0.01)
    p = mixprec.nn.Parameter(mixprec.tensor(P0))
    opt = make([p])
    for g in GRADS[:2]:
        p.grad = mixprec.tensor(g)
        opt.step()
    q = mixprec.nn.Parameter(mixprec.tensor(p.detach().numpy()))
    resumed = make([q])
    resumed.load_state_dict(opt.state_dict())
    for g in GRADS[2:]:
        p.grad = mixprec.tensor(g)
        q.grad = mixprec.tensor(g)
        opt.step()
        resumed.step()
    np.testing.assert_array_equal(q.detach().numpy(), p.detach().numpy())
    state = opt.state_dict()  # PyTorch's layout
    assert sorted(state["state"][0]) == ["exp_avg", "exp_avg_sq", "step"]
    assert state["state"][0]["step"].item() == 5


def test_clip_grad_norm():
    a = mixprec.nn.Parameter(mixprec.tensor([3.0, 0.0]))
    b = mixprec.nn.Parameter(mixprec.tensor([4.0]))
    a.grad, b.grad = mixprec.tensor([3.0, 0.0]), mixprec.tensor([4.0])
    norm = mixprec.nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert abs(norm.item() - 5.0) < 1e-6
    np.testing.assert_allclose(a.grad.numpy(), [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), [0.8], rtol=1e-5)
