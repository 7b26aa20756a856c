"""Every scheduler over two parameter groups, its learning rates (and cycled momenta) the
same floats as torch.optim.lr_scheduler's over 120 steps; the schedulers PyTorch 1.13 added
(MultiplicativeLR, ConstantLR, SequentialLR, ChainedScheduler, CosineAnnealingWarmRestarts,
CyclicLR, PolynomialLR); state_dict(); and hand-computed schedules without torch."""
import math
import pickle

import numpy as np
import pytest

import mixprec
from mixprec import nn


class Halve:
    """A callable object: its __dict__ is what LambdaLR's state_dict() keeps."""

    def __init__(self):
        self.factor = 0.97

    def __call__(self, epoch):
        return self.factor ** epoch


def two_groups(lib, optimizer="SGD", **kwargs):
    make = (lambda: lib.nn.Parameter(lib.zeros(2))) if lib is not mixprec else (lambda: nn.Parameter(mixprec.zeros(2)))
    groups = [{"params": [make()]}, {"params": [make()], "lr": 0.02}]
    if optimizer == "SGD":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9, **kwargs)
    return getattr(lib.optim, optimizer)(groups, lr=0.1, **kwargs)


def build(lib, name, kwargs, optimizer="SGD"):
    sched = lib.optim.lr_scheduler
    opt = two_groups(lib, optimizer)
    if name == "SequentialLR":
        return sched.SequentialLR(opt, [sched.LinearLR(opt, start_factor=0.1, total_iters=10),
                                        sched.ExponentialLR(opt, gamma=0.97),
                                        sched.CosineAnnealingLR(opt, T_max=30)], milestones=[10, 50])
    if name == "ChainedScheduler":
        return sched.ChainedScheduler([sched.ConstantLR(opt, factor=0.5, total_iters=7),
                                       sched.ExponentialLR(opt, gamma=0.98)])
    return getattr(sched, name)(opt, **kwargs)


SCHEDULES = [
    ("LambdaLR", dict(lr_lambda=[lambda e: 0.95 ** e, lambda e: 1.0 / (1 + e)])),
    ("MultiplicativeLR", dict(lr_lambda=lambda e: 0.97)),
    ("MultiplicativeLR", dict(lr_lambda=[lambda e: 0.97, lambda e: 0.99])),
    ("StepLR", dict(step_size=7, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[5, 30, 30, 80], gamma=0.3)),
    ("ConstantLR", dict(factor=0.25, total_iters=9)),
    ("LinearLR", dict(start_factor=0.2, end_factor=0.9, total_iters=40)),
    ("ExponentialLR", dict(gamma=0.96)),
    ("PolynomialLR", dict(total_iters=90, power=2.0)),
    ("CosineAnnealingLR", dict(T_max=25, eta_min=0.001)),
    ("CosineAnnealingWarmRestarts", dict(T_0=10, T_mult=2, eta_min=1e-4)),
    ("CosineAnnealingWarmRestarts", dict(T_0=13)),
    ("CyclicLR", dict(base_lr=[0.01, 0.002], max_lr=0.1, step_size_up=9, step_size_down=14)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=[0.1, 0.05], step_size_up=10, mode="triangular2",
                      base_momentum=[0.8, 0.7], max_momentum=0.95)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=6, mode="exp_range", gamma=0.99)),
    ("CyclicLR", dict(base_lr=0.01, max_lr=0.1, step_size_up=6, scale_fn=lambda x: 0.9 ** x,
                      scale_mode="iterations", cycle_momentum=False)),
    ("OneCycleLR", dict(max_lr=[0.3, 0.1], total_steps=121, three_phase=True)),
    ("OneCycleLR", dict(max_lr=0.3, total_steps=121, anneal_strategy="linear",
                        base_momentum=[0.8, 0.85], max_momentum=0.9)),
    ("SequentialLR", {}),
    ("ChainedScheduler", {}),
]


@pytest.mark.parametrize("name, kwargs", SCHEDULES)
def test_learning_rates_and_momenta_are_torchs(name, kwargs):
    torch = pytest.importorskip("torch")
    ours, theirs = build(mixprec, name, kwargs), build(torch, name, kwargs)
    for step in range(120):
        ours.optimizer.step()
        theirs.optimizer.step()
        ours.step()
        theirs.step()
        assert ours.get_last_lr() == theirs.get_last_lr(), step
        for g, h in zip(ours.optimizer.param_groups, theirs.optimizer.param_groups):
            assert g["lr"] == h["lr"] and g["momentum"] == h["momentum"], step


@pytest.mark.parametrize("name, kwargs", [
    ("OneCycleLR", dict(max_lr=0.01, total_steps=40)),
    ("CosineAnnealingLR", dict(T_max=10)),
])
def test_adam_groups_follow_torch_including_cycled_betas(name, kwargs):
    """OneCycleLR cycles Adam's betas[0] per group; the parameters follow torch's bit for bit."""
    torch = pytest.importorskip("torch")
    rs = np.random.RandomState(0)
    p0 = [rs.standard_normal(4).astype(np.float32) for _ in range(2)]
    ours = [nn.Parameter(mixprec.tensor(p)) for p in p0]
    theirs = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in p0]
    opt = mixprec.optim.Adam([{"params": ours[:1]}, {"params": ours[1:], "lr": 0.002}], lr=0.01)
    ref = torch.optim.Adam([{"params": theirs[:1]}, {"params": theirs[1:], "lr": 0.002}], lr=0.01, foreach=False)
    s = getattr(mixprec.optim.lr_scheduler, name)(opt, **kwargs)
    t = getattr(torch.optim.lr_scheduler, name)(ref, **kwargs)
    for step in range(30):
        g = [rs.standard_normal(4).astype(np.float32) for _ in range(2)]
        for a, b, x in zip(ours, theirs, g):
            a.grad = mixprec.tensor(x)
            b.grad = torch.from_numpy(x.copy())
        opt.step()
        ref.step()
        s.step()
        t.step()
        assert [g["betas"] for g in opt.param_groups] == [g["betas"] for g in ref.param_groups]
        for a, b in zip(ours, theirs):
            assert np.array_equal(a.detach().numpy().view(np.int32), b.detach().numpy().view(np.int32)), step


@pytest.mark.parametrize("name, kwargs", [s for s in SCHEDULES if s[0] not in ("LambdaLR", "MultiplicativeLR")]
                         + [("LambdaLR", dict(lr_lambda=[Halve(), Halve()]))])
def test_state_dict_resumes_the_schedule(name, kwargs):
    first = build(mixprec, name, kwargs)
    for _ in range(37):
        first.optimizer.step()
        first.step()
    saved = first.state_dict()
    if name != "CyclicLR" or "scale_fn" not in kwargs:
        pickle.dumps(saved)  # picklable, for checkpoints
    second = build(mixprec, name, kwargs)
    second.optimizer.load_state_dict(first.optimizer.state_dict())
    second.load_state_dict(saved)
    for _ in range(40):
        for s in (first, second):
            s.optimizer.step()
            s.step()
        assert first.get_last_lr() == second.get_last_lr()


def test_constant_polynomial_and_warm_restarts_by_hand():
    sched = mixprec.optim.lr_scheduler
    c = sched.ConstantLR(two_groups(mixprec), factor=0.5, total_iters=3)
    lrs = [c.get_last_lr()]
    for _ in range(4):
        c.step()
        lrs.append(c.get_last_lr())
    assert lrs == [[0.05, 0.01]] * 3 + [[0.1, 0.02]] * 2
    p = sched.PolynomialLR(two_groups(mixprec), total_iters=4, power=1.0)
    got = [p.get_last_lr()[0]]
    for _ in range(5):
        p.step()
        got.append(p.get_last_lr()[0])
    np.testing.assert_allclose(got, [0.1, 0.075, 0.05, 0.025, 0.0, 0.0], atol=1e-15)
    w = sched.CosineAnnealingWarmRestarts(two_groups(mixprec), T_0=4, T_mult=2)
    got = [w.get_last_lr()[1]]
    for _ in range(12):
        w.step()
        got.append(w.get_last_lr()[1])
    t_cur = [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 0]
    t_i = [4] * 4 + [8] * 8 + [16]
    np.testing.assert_allclose(got, [0.02 * (1 + math.cos(math.pi * c / t)) / 2 for c, t in zip(t_cur, t_i)])


def test_cyclic_lr_triangular_by_hand_and_momentum():
    opt = two_groups(mixprec)
    s = mixprec.optim.lr_scheduler.CyclicLR(opt, base_lr=0.0, max_lr=1.0, step_size_up=4,
                                            base_momentum=0.5, max_momentum=0.9)
    lrs, moms = [], []
    for _ in range(9):
        lrs.append(opt.param_groups[0]["lr"])
        moms.append(opt.param_groups[0]["momentum"])
        s.step()
    np.testing.assert_allclose(lrs, [0, .25, .5, .75, 1, .75, .5, .25, 0])
    np.testing.assert_allclose(moms, [.9, .8, .7, .6, .5, .6, .7, .8, .9])


def test_errors_are_torchs():
    sched = mixprec.optim.lr_scheduler
    opt = two_groups(mixprec)
    cases = [
        (lambda: sched.LambdaLR(opt, lr_lambda=[lambda e: 1.0]), "Expected 2 lr_lambdas, but got 1"),
        (lambda: sched.ConstantLR(opt, factor=2.0), "Constant multiplicative factor expected to be between 0 and 1."),
        (lambda: sched.CyclicLR(opt, base_lr=[0.1], max_lr=1.0), "expected 2 values for base_lr, got 1"),
        (lambda: sched.CyclicLR(two_groups(mixprec, "Adam"), base_lr=0.1, max_lr=1.0),
         "optimizer must support momentum with `cycle_momentum` option enabled"),
        (lambda: sched.CyclicLR(opt, base_lr=0.1, max_lr=1.0, mode="nope"), "mode is invalid and scale_fn is None"),
        (lambda: sched.CosineAnnealingWarmRestarts(opt, T_0=0), "Expected positive integer T_0, but got 0"),
        (lambda: sched.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0), "Expected integer T_mult >= 1, but got 0"),
        (lambda: sched.SequentialLR(opt, [sched.StepLR(opt, 2)], milestones=[3]),
         "Sequential Schedulers expects number of schedulers provided to be one more than the number of "
         "milestone points, but got number of schedulers 1 and the number of milestones to be equal to 1"),
        (lambda: sched.ChainedScheduler([sched.StepLR(opt, 2), sched.StepLR(two_groups(mixprec), 2)]),
         "ChainedScheduler expects all schedulers to belong to the same optimizer, but got schedulers at "
         "index 0 and 1 to be different"),
        (lambda: sched.ReduceLROnPlateau(opt, min_lr=[0.1]), "expected 2 min_lrs, got 1"),
    ]
    for make, message in cases:
        with pytest.raises(ValueError) as error:
            make()
        assert str(error.value) == message
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        sched.StepLR([], 2)


def test_reduce_lr_on_plateau_over_groups_is_torchs():
    torch = pytest.importorskip("torch")
    metrics = [1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.99, 0.8, 0.81, 0.82, 0.83, 0.84, 0.85] * 3
    s = mixprec.optim.lr_scheduler.ReduceLROnPlateau(two_groups(mixprec), patience=2, min_lr=[0.01, 0.005])
    t = torch.optim.lr_scheduler.ReduceLROnPlateau(two_groups(torch), patience=2, min_lr=[0.01, 0.005])
    for m in metrics:
        s.step(m)
        t.step(m)
        assert [g["lr"] for g in s.optimizer.param_groups] == [g["lr"] for g in t.optimizer.param_groups]
