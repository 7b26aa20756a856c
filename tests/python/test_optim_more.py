"""RMSprop, Adagrad, Adadelta, Adamax, NAdam, RAdam: bit for bit as torch.optim's
single-tensor (foreach=False) steps on float32 parameters, with parameter groups and
state_dict(); and against float64 NumPy references of the documented formulas."""
import numpy as np
import pytest

import mixprec
from mixprec import nn
from mixprec.optim._composed import _fma32
from helpers import rng

SHAPES = [(5,), (3, 7), (33,)]  # 33: ATen's vector loop and its scalar tail


def grads_for(step):
    r = rng(300 + step)
    return [(10.0 ** r.uniform(-3, 2, size=s) * r.choice([-1.0, 1.0], size=s)).astype(np.float32)
            for s in SHAPES]


P0 = [rng(20 + i).standard_normal(s).astype(np.float32) for i, s in enumerate(SHAPES)]

CASES = [
    ("RMSprop", dict(lr=1e-2)),
    ("RMSprop", dict(lr=1e-3, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=1e-3, momentum=0.5, maximize=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01, weight_decay=0.2, initial_accumulator_value=0.1,
                     eps=1e-8, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.05, maximize=True)),
    ("Adamax", dict()),
    ("Adamax", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, maximize=True)),
    ("NAdam", dict()),
    ("NAdam", dict(lr=1e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1, momentum_decay=1e-2)),
    ("RAdam", dict()),
    ("RAdam", dict(lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)),
]


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.int32)


def make_pair(torch, name, kwargs, groups=True):
    ours = [nn.Parameter(mixprec.tensor(p)) for p in P0]
    theirs = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in P0]

    def arrange(ps):  # a second group with its own lr
        return [{"params": ps[:2]}, {"params": ps[2:], "lr": kwargs.get("lr", 1e-2) * 0.5}] if groups else ps
    return (ours, getattr(mixprec.optim, name)(arrange(ours), **kwargs),
            theirs, getattr(torch.optim, name)(arrange(theirs), foreach=False, **kwargs))


def step_both(torch, ours, opt, theirs, ref, step):
    for a, b, g in zip(ours, theirs, grads_for(step)):
        a.grad = mixprec.tensor(g)
        b.grad = torch.from_numpy(g.copy())
    opt.step()
    ref.step()


@pytest.mark.parametrize("name, kwargs", CASES)
def test_steps_bit_identical_to_torch(name, kwargs):
    torch = pytest.importorskip("torch")
    ours, opt, theirs, ref = make_pair(torch, name, kwargs)
    for step in range(8):  # RAdam's rectified branch starts at step 6 with the default betas
        step_both(torch, ours, opt, theirs, ref, step)
        for a, b in zip(ours, theirs):
            assert np.array_equal(bits(a.detach().numpy()), bits(b.detach().numpy())), (step, a.shape)


@pytest.mark.parametrize("name, kwargs", CASES[1::2])
def test_state_dict_moves_between_torch_and_mixprec(name, kwargs):
    torch = pytest.importorskip("torch")
    ours, opt, theirs, ref = make_pair(torch, name, kwargs)
    for step in range(3):
        step_both(torch, ours, opt, theirs, ref, step)
    # torch's state into a fresh mixprec optimizer (through NumPy), then on together
    fresh = [nn.Parameter(mixprec.tensor(a.detach().numpy().copy())) for a in ours]
    again = getattr(mixprec.optim, name)([{"params": fresh[:2]}, {"params": fresh[2:]}], **kwargs)
    saved = ref.state_dict()
    again.load_state_dict({"state": {i: {k: (v.numpy() if torch.is_tensor(v) else v) for k, v in e.items()}
                                     for i, e in saved["state"].items()},
                           "param_groups": saved["param_groups"]})
    assert again.param_groups[1]["lr"] == ref.param_groups[1]["lr"]
    for step in range(3, 6):
        for a, g in zip(fresh, grads_for(step)):
            a.grad = mixprec.tensor(g)
        again.step()
        step_both(torch, ours, opt, theirs, ref, step)
    for a, b in zip(fresh, theirs):
        assert np.array_equal(bits(a.detach().numpy()), bits(b.detach().numpy()))
    # ours, in torch's layout, loads into torch and matches its state
    mine = again.state_dict()
    theirs_state = ref.state_dict()["state"]
    assert sorted(mine["state"]) == sorted(theirs_state)
    for index, entry in theirs_state.items():
        assert sorted(entry) == sorted(mine["state"][index])
        for k, v in entry.items():
            got = mine["state"][index][k]
            got = got.numpy() if hasattr(got, "numpy") else got
            assert np.array_equal(np.asarray(got), np.asarray(v)), (index, k)
    back = getattr(torch.optim, name)([{"params": [torch.nn.Parameter(b.detach().clone()) for b in theirs[:2]]},
                                       {"params": [torch.nn.Parameter(theirs[2].detach().clone())]}],
                                      foreach=False, **kwargs)
    back.load_state_dict({"state": {i: {k: (torch.from_numpy(np.array(v.numpy())) if hasattr(v, "numpy") else v)
                                         for k, v in e.items()} for i, e in mine["state"].items()},
                          "param_groups": mine["param_groups"]})


@pytest.mark.parametrize("name, kwargs, message", [
    ("RMSprop", dict(lr=-1), "Invalid learning rate: -1"),
    ("RMSprop", dict(alpha=-0.5), "Invalid alpha value: -0.5"),
    ("RMSprop", dict(momentum=-1), "Invalid momentum value: -1"),
    ("Adagrad", dict(lr_decay=-1), "Invalid lr_decay value: -1"),
    ("Adagrad", dict(initial_accumulator_value=-1), "Invalid initial_accumulator_value value: -1"),
    ("Adadelta", dict(rho=1.5), "Invalid rho value: 1.5"),
    ("Adamax", dict(betas=(1.0, 0.9)), "Invalid beta parameter at index 0: 1.0"),
    ("NAdam", dict(momentum_decay=-1), "Invalid momentum_decay value: -1"),
    ("RAdam", dict(eps=-1), "Invalid epsilon value: -1"),
    ("RAdam", dict(weight_decay=-1), "Invalid weight_decay value: -1"),
])
def test_argument_checks_are_torchs(name, kwargs, message):
    with pytest.raises(ValueError) as ours:
        getattr(mixprec.optim, name)([nn.Parameter(mixprec.zeros(1))], **kwargs)
    assert str(ours.value) == message
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim, name)([torch.nn.Parameter(torch.zeros(1))], **kwargs)
    assert str(theirs.value) == message


def test_defaults_are_torchs():
    torch = pytest.importorskip("torch")
    for name in ("RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam"):
        ours = getattr(mixprec.optim, name)([nn.Parameter(mixprec.zeros(1))]).defaults
        theirs = getattr(torch.optim, name)([torch.nn.Parameter(torch.zeros(1))]).defaults
        assert ours == theirs, name


def _run(name, kwargs, steps=4):
    p = nn.Parameter(mixprec.tensor(P0[2]))
    opt = getattr(mixprec.optim, name)([p], **kwargs)
    for s in range(steps):
        p.grad = mixprec.tensor(grads_for(s)[2])
        opt.step()
    return p.detach().numpy().astype(np.float64)


def test_rmsprop_centered_momentum_against_float64():
    lr, alpha, eps, mom, wd = 1e-2, 0.9, 1e-6, 0.5, 0.1
    p = P0[2].astype(np.float64)
    sq = ga = buf = np.zeros_like(p)
    for s in range(4):
        g = grads_for(s)[2].astype(np.float64) + wd * p
        sq = alpha * sq + (1 - alpha) * g * g
        ga = alpha * ga + (1 - alpha) * g
        avg = np.sqrt(sq - ga * ga) + eps
        buf = mom * buf + g / avg
        p = p - lr * buf
    got = _run("RMSprop", dict(lr=lr, alpha=alpha, eps=eps, momentum=mom, weight_decay=wd, centered=True))
    np.testing.assert_allclose(got, p, rtol=1e-5, atol=1e-6)


def test_adagrad_adamax_nadam_radam_adadelta_against_float64():
    g_all = [grads_for(s)[2].astype(np.float64) for s in range(8)]
    p0 = P0[2].astype(np.float64)

    p, acc = p0.copy(), np.full_like(p0, 0.1)
    for t, g in enumerate(g_all[:4], 1):
        acc += g * g
        p -= 0.1 / (1 + (t - 1) * 0.01) * g / (np.sqrt(acc) + 1e-10)
    np.testing.assert_allclose(_run("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
                               p, rtol=1e-5, atol=1e-6)

    p, m, u = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for t, g in enumerate(g_all[:4], 1):
        m = 0.9 * m + 0.1 * g
        u = np.maximum(0.999 * u, np.abs(g) + 1e-8)
        p -= 2e-3 / (1 - 0.9 ** t) * m / u
    np.testing.assert_allclose(_run("Adamax", {}), p, rtol=1e-5, atol=1e-6)

    p, m, v, prod = p0.copy(), np.zeros_like(p0), np.zeros_like(p0), 1.0
    for t, g in enumerate(g_all[:4], 1):
        mu = 0.9 * (1 - 0.5 * 0.96 ** (t * 4e-3))
        mu_next = 0.9 * (1 - 0.5 * 0.96 ** ((t + 1) * 4e-3))
        prod *= mu
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        denom = np.sqrt(v / (1 - 0.999 ** t)) + 1e-8
        # PyTorch 1.13 multiplies mu in twice: mu_product_next = mu_product * mu * mu_next
        p -= 2e-3 * (1 - mu) / (1 - prod) * g / denom + 2e-3 * mu_next / (1 - prod * mu * mu_next) * m / denom
    np.testing.assert_allclose(_run("NAdam", {}), p, rtol=1e-5, atol=1e-6)

    p, m, v = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    rho_inf = 2 / (1 - 0.999) - 1
    for t, g in enumerate(g_all, 1):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        mhat = m / (1 - 0.9 ** t)
        rho_t = rho_inf - 2 * t * 0.999 ** t / (1 - 0.999 ** t)
        if rho_t > 5:
            r = np.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p -= 1e-3 * mhat * r * np.sqrt(1 - 0.999 ** t) / (np.sqrt(v) + 1e-8)
        else:
            p -= 1e-3 * mhat
    np.testing.assert_allclose(_run("RAdam", {}, steps=8), p, rtol=1e-5, atol=1e-6)

    p, sq, acc = p0.copy(), np.zeros_like(p0), np.zeros_like(p0)
    for g in g_all[:4]:
        sq = 0.9 * sq + 0.1 * g * g
        delta = np.sqrt(acc + 1e-6) / np.sqrt(sq + 1e-6) * g
        acc = 0.9 * acc + 0.1 * delta * delta
        p -= delta
    np.testing.assert_allclose(_run("Adadelta", {}), p, rtol=1e-5, atol=1e-6)


def test_fma32_is_one_rounding():
    """_fma32 against exact rational arithmetic, including halfway cases where a float64
    sum rounded twice would be wrong."""
    from fractions import Fraction
    r = rng(5)
    a = (r.standard_normal(2000) * 10.0 ** r.uniform(-3, 3, 2000)).astype(np.float32)
    b = (r.standard_normal(2000)).astype(np.float32)
    c = (r.standard_normal(2000) * 10.0 ** r.uniform(-3, 3, 2000)).astype(np.float32)
    # c = -a*b + a tiny tail: the exact sum sits just off an f32 halfway point
    a = np.append(a, np.float32(1 + 2 ** -23))
    b = np.append(b, np.float32(1 + 2 ** -23))
    c = np.append(c, np.float32(-1.0))
    got = _fma32(a, b, c)
    for x, y, z, out in zip(a, b, c, got):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        below = np.float32(float(exact))  # near; then pick the nearest of its neighbours
        cands = [np.nextafter(below, np.float32(-np.inf)), below, np.nextafter(below, np.float32(np.inf))]
        dist = [abs(Fraction(float(v)) - exact) for v in cands]
        best = min(dist)
        ties = [v for v, d in zip(cands, dist) if d == best]
        want = ties[0] if len(ties) == 1 else next(v for v in ties if not (v.view(np.int32) & 1))
        assert out == want, (x, y, z)


def test_sixteen_bit_parameters_are_refused_clearly():
    p = nn.Parameter(mixprec.zeros(3).bfloat16())
    opt = mixprec.optim.RMSprop([p])
    p.grad = mixprec.zeros(3).bfloat16()
    with pytest.raises(NotImplementedError, match="float32 or float64 parameters"):
        opt.step()


def test_parameters_without_grad_are_skipped_and_caches_see_the_write():
    a, b = nn.Parameter(mixprec.ones(2)), nn.Parameter(mixprec.ones(2))
    opt = mixprec.optim.NAdam([a, b], lr=0.1)
    a.grad = mixprec.ones(2)
    opt.step()
    assert b not in opt.state and opt.state[a]["step"].item() == 1.0
    assert (b.detach().numpy() == 1).all() and (a.detach().numpy() < 1).all()
