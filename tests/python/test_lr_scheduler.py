"""mixprec.optim.lr_scheduler: PyTorch's formulas (checked bit for bit against torch in
test_torch_side_by_side.py; OneCycleLR's and ReduceLROnPlateau's here, in tests that skip without
torch, next to by-hand ones that need none) and the CLI's warm-up schedule against its
documented formula."""
import math
import pickle
import re

import pytest

import mixprec
from mixprec.optim import lr_scheduler


def make_optimizer(lr=1.0):
    return mixprec.optim.SGD([mixprec.nn.Parameter(mixprec.tensor([0.0]))], lr=lr)


def trajectory(scheduler, steps):
    out = []
    for _ in range(steps):
        out.append(scheduler.optimizer.param_groups[0]["lr"])
        scheduler.step()
    return out


def test_step_lr_by_hand():
    s = lr_scheduler.StepLR(make_optimizer(1.0), step_size=2, gamma=0.5)
    assert trajectory(s, 6) == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    assert s.get_last_lr() == [0.125]


def test_warmup_cosine_follows_the_documented_formula():
    lr, total, warm, min_lr = 0.1, 10, 3, 0.01
    s = lr_scheduler.WarmupSchedule(make_optimizer(lr), "cosine", total_steps=total,
                                    warmup_steps=warm, min_lr=min_lr)
    expected = []
    for step in range(1, total + 1):
        if step <= warm:
            expected.append(lr * step / warm)
        else:
            p = (step - warm - 1) / (total - warm - 1)
            expected.append(min_lr + (lr - min_lr) * (1 + math.cos(math.pi * p)) / 2)
    assert trajectory(s, total) == pytest.approx(expected, rel=1e-12)


def test_scheduler_changes_the_steps_taken():
    opt = make_optimizer(1.0)
    p = opt.param_groups[0]["params"][0]
    s = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        p.grad = mixprec.tensor([1.0])
        opt.step()
        s.step()
    assert p.item() == -(1.0 + 0.5 + 0.25)


def test_bad_schedule_name():
    with pytest.raises(ValueError, match="schedule"):
        lr_scheduler.WarmupSchedule(make_optimizer(), "exponential")


# OneCycleLR and ReduceLROnPlateau. By hand (no torch needed): sequences whose every value is
# exact in binary (pct 0, 0.5, 0.25, ...; lrs powers of two), so == is the check. Side by side
# (skipped, and shown as skipped, without torch): repr() of the lr floats, which is equal only
# for the same bits and the same type (an int min_lr stays an int in both).

def one_cycle(opt, **kwargs):
    return lr_scheduler.OneCycleLR(opt, **kwargs)


@pytest.mark.parametrize("kwargs, expected", [
    # two phases, total 5, pct_start 0.6: up over steps 0..2 (pct 0, .5, 1), down over 2..4;
    # cos and linear meet at the midpoints (cos(pi / 2) + 1 rounds to 1.0)
    (dict(total_steps=5, pct_start=0.6, anneal_strategy="linear"),
     [0.25, 0.625, 1.0, 0.5625, 0.125]),
    (dict(total_steps=5, pct_start=0.6), [0.25, 0.625, 1.0, 0.5625, 0.125]),
    (dict(epochs=1, steps_per_epoch=5, pct_start=0.6), [0.25, 0.625, 1.0, 0.5625, 0.125]),
    # three phases, total 9, pct_start 1/3: up 0..2, back down 2..4, to min_lr over 4..8
    (dict(total_steps=9, pct_start=1 / 3, anneal_strategy="linear", three_phase=True),
     [0.25, 0.625, 1.0, 0.625, 0.25, 0.21875, 0.1875, 0.15625, 0.125]),
])
def test_one_cycle_lr_by_hand(kwargs, expected):
    # max_lr 1: initial_lr = 1 / div_factor 4 = 0.25, min_lr = 0.25 / final_div_factor 2 = 0.125
    s = one_cycle(make_optimizer(0.5), max_lr=1.0, div_factor=4.0, final_div_factor=2.0,
                  cycle_momentum=False, **kwargs)
    assert trajectory(s, len(expected)) == expected
    group = s.optimizer.param_groups[0]
    assert (group["initial_lr"], group["max_lr"], group["min_lr"]) == (0.25, 1.0, 0.125)
    # PyTorch's: the total_steps-th step() sets an lr past the cycle's end; one more is refused
    assert s.last_epoch == len(expected) and s.get_last_lr() == [group["lr"]]
    with pytest.raises(ValueError, match=f"^Tried to step {len(expected) + 2} times. The specified "
                                         f"number of total steps is {len(expected)}$"):
        s.step()


def test_one_cycle_lr_drives_the_optimizer():
    opt = make_optimizer(0.5)
    p = opt.param_groups[0]["params"][0]
    s = one_cycle(opt, max_lr=1.0, total_steps=5, pct_start=0.6, anneal_strategy="linear",
                  div_factor=4.0, final_div_factor=2.0, cycle_momentum=False)
    for _ in range(5):
        p.grad = mixprec.tensor([1.0])
        opt.step()
        s.step()
    assert p.item() == -(0.25 + 0.625 + 1.0 + 0.5625 + 0.125)


@pytest.mark.parametrize("make", [
    lambda: mixprec.optim.SGD([mixprec.nn.Parameter(mixprec.zeros(1))], lr=0.1, momentum=0.9),
    lambda: mixprec.optim.Adam([mixprec.nn.Parameter(mixprec.zeros(1))], lr=0.1, betas=(0.9, 0.99)),
])
def test_one_cycle_lr_takes_a_momentum_cycle_that_changes_nothing(make):
    # base_momentum == max_momentum == the optimizer's: PyTorch's schedule, and the optimizer's
    # fixed momentum, are the same thing
    opt, plain = make(), make()
    kwargs = dict(max_lr=1.0, total_steps=8, anneal_strategy="cos", three_phase=True)
    s = one_cycle(opt, cycle_momentum=True, base_momentum=0.9, max_momentum=0.9, **kwargs)
    t = one_cycle(plain, cycle_momentum=False, **kwargs)
    p = opt.param_groups[0]["params"][0]
    for _ in range(8):
        assert s.get_last_lr() == t.get_last_lr()
        p.grad = mixprec.tensor([1.0])
        opt.step()  # the optimizer's settings check passes: nothing but lr changed
        s.step()
        t.step()


ONE_CYCLE_BAD = [
    (dict(), "You must define either total_steps OR (epochs AND steps_per_epoch)"),
    (dict(total_steps=0), "Expected positive integer total_steps, but got 0"),
    (dict(total_steps=10.0), "Expected positive integer total_steps, but got 10.0"),
    (dict(epochs=0, steps_per_epoch=5), "Expected positive integer epochs, but got 0"),
    (dict(epochs=2, steps_per_epoch=1.5), "Expected positive integer steps_per_epoch, but got 1.5"),
    (dict(total_steps=10, pct_start=1), "Expected float between 0 and 1 pct_start, but got 1"),
    (dict(total_steps=10, pct_start=1.5), "Expected float between 0 and 1 pct_start, but got 1.5"),
    (dict(total_steps=10, anneal_strategy="exp"),
     "anneal_strategy must by one of 'cos' or 'linear', instead got exp"),
    (dict(total_steps=10, max_lr=[0.1, 0.2]), "expected 1 values for max_lr, got 2"),
    (dict(total_steps=10, cycle_momentum=True, max_momentum=[0.9, 0.8]),
     "expected 1 values for max_momentum, got 2"),
]
PLATEAU_BAD = [
    (dict(factor=1.0), "Factor should be < 1.0."),
    (dict(min_lr=[0.1, 0.2]), "expected 1 min_lrs, got 2"),
    (dict(mode="avg"), "mode avg is unknown!"),
    (dict(threshold_mode="pct"), "threshold mode pct is unknown!"),
]


def bad_arguments():
    for kwargs, message in ONE_CYCLE_BAD:
        yield "OneCycleLR", dict(dict(max_lr=0.1, cycle_momentum=False), **kwargs), message
    for kwargs, message in PLATEAU_BAD:
        yield "ReduceLROnPlateau", kwargs, message


@pytest.mark.parametrize("name, kwargs, message", list(bad_arguments()))
def test_bad_arguments_give_pytorchs_messages(name, kwargs, message):
    with pytest.raises(ValueError) as error:
        getattr(lr_scheduler, name)(make_optimizer(0.1), **kwargs)
    assert str(error.value) == message


@pytest.mark.parametrize("name, kwargs, message", list(bad_arguments()))
def test_bad_arguments_give_torchs_errors(name, kwargs, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError) as theirs:
        getattr(torch.optim.lr_scheduler, name)(
            torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1), **kwargs)
    assert str(theirs.value) == message


def run_one_cycle(scheduler, steps):
    """repr()s of the lr each batch sees and get_last_lr() after each step(); optimizer.step()
    first, as a training loop (and so torch gives no out-of-order warning)."""
    out = []
    for _ in range(steps):
        out.append(repr(scheduler.optimizer.param_groups[0]["lr"]))
        scheduler.optimizer.step()
        scheduler.step()
        out.append(repr(scheduler.get_last_lr()))
    return out


@pytest.mark.parametrize("optimizer, kwargs", [
    ("SGD", dict(max_lr=0.1, total_steps=100)),
    ("SGD", dict(max_lr=0.1, total_steps=100, anneal_strategy="linear")),
    ("SGD", dict(max_lr=0.05, total_steps=37, three_phase=True)),
    ("SGD", dict(max_lr=0.05, total_steps=37, three_phase=True, anneal_strategy="linear",
                 pct_start=0.45)),
    ("SGD", dict(max_lr=0.3, epochs=7, steps_per_epoch=13, pct_start=0.25, div_factor=10.0,
                 final_div_factor=100.0)),
    ("SGD", dict(max_lr=[0.02], epochs=3, steps_per_epoch=11, anneal_strategy="linear",
                 three_phase=True)),
    ("SGD", dict(max_lr=0.1, total_steps=2)),
    ("Adam", dict(max_lr=3e-3, total_steps=50, pct_start=0.1, three_phase=True)),
    ("SGD-momentum", dict(max_lr=0.1, total_steps=30, cycle_momentum=True, base_momentum=0.9,
                          max_momentum=0.9)),
    ("Adam", dict(max_lr=0.01, total_steps=30, anneal_strategy="linear", cycle_momentum=True,
                  base_momentum=0.9, max_momentum=0.9)),
])
def test_one_cycle_lr_gives_torchs_floats(optimizer, kwargs):
    torch = pytest.importorskip("torch")
    kwargs = dict(dict(cycle_momentum=False), **kwargs)
    total = kwargs.get("total_steps") or kwargs["epochs"] * kwargs["steps_per_epoch"]

    def make(lib):
        params = [lib.nn.Parameter(lib.zeros(1))]
        if optimizer == "Adam":
            return lib.optim.Adam(params, lr=1e-3)
        return lib.optim.SGD(params, lr=0.05, momentum=0.9 if optimizer == "SGD-momentum" else 0)

    ours = lr_scheduler.OneCycleLR(make(mixprec), **kwargs)
    theirs = torch.optim.lr_scheduler.OneCycleLR(make(torch), **kwargs)
    assert run_one_cycle(ours, total) == run_one_cycle(theirs, total)
    ours_group, their_group = ours.optimizer.param_groups[0], theirs.optimizer.param_groups[0]
    for key in ("initial_lr", "max_lr", "min_lr", "momentum", "betas"):
        assert repr(ours_group.get(key)) == repr(their_group.get(key)), key
    with pytest.raises(ValueError) as ours_error:
        ours.step()
    with pytest.raises(ValueError) as their_error:
        theirs.step()
    assert str(ours_error.value) == str(their_error.value)


def test_one_cycle_lr_state_dict_round_trip():
    kwargs = dict(max_lr=0.1, total_steps=40, three_phase=True, cycle_momentum=False)
    a = one_cycle(make_optimizer(0.1), **kwargs)
    trajectory(a, 15)
    state = pickle.loads(pickle.dumps(a.state_dict()))  # picklable: no bound method in it
    assert "optimizer" not in state and state["last_epoch"] == 15
    # made with other settings: the state's take over
    b = one_cycle(make_optimizer(0.1), **dict(kwargs, anneal_strategy="linear", three_phase=False))
    b.load_state_dict(state)
    assert (b.anneal_strategy, b.last_epoch, b.get_last_lr()) == ("cos", 15, a.get_last_lr())
    assert trajectory(b, 25)[1:] == trajectory(a, 25)[1:]  # [0]: b's lr until its first step()


def test_one_cycle_lr_resumes_from_the_optimizers_state():
    kwargs = dict(max_lr=0.1, epochs=4, steps_per_epoch=10, cycle_momentum=False)
    a = one_cycle(make_optimizer(0.1), **kwargs)
    trajectory(a, 17)
    opt = make_optimizer(0.7)
    opt.load_state_dict(a.optimizer.state_dict())  # brings initial_lr, max_lr, min_lr
    # PyTorch's convention: last_epoch is the last batch done; construction steps once more
    b = one_cycle(opt, **dict(kwargs, max_lr=0.5), last_epoch=a.last_epoch - 1)
    assert b.get_last_lr() == a.get_last_lr()
    assert trajectory(b, 23) == trajectory(a, 23)
    with pytest.raises(KeyError, match="initial_lr"):
        one_cycle(make_optimizer(0.1), **kwargs, last_epoch=5)


def test_one_cycle_lr_loads_torchs_state_dict():
    torch = pytest.importorskip("torch")
    kwargs = dict(max_lr=0.1, total_steps=30, anneal_strategy="linear", cycle_momentum=False)
    theirs = torch.optim.lr_scheduler.OneCycleLR(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1), **kwargs)
    run_one_cycle(theirs, 12)
    ours = one_cycle(make_optimizer(0.1), **dict(kwargs, anneal_strategy="cos"))
    ours.load_state_dict(theirs.state_dict())  # its anneal_func, a bound method, read as 'linear'
    assert ours.anneal_strategy == "linear" and "anneal_func" not in ours.__dict__
    assert run_one_cycle(ours, 18)[1:] == run_one_cycle(theirs, 18)[1:]


@pytest.mark.parametrize("kwargs, metrics, expected", [
    # min, rel 0.1: better means below best * 0.9. After two bad epochs (patience 1) the lr
    # halves, a cooldown epoch counts nothing, min_lr 0.2 stops 0.25 -> 0.125 at 0.2, and the
    # last reduction (0.2 -> 0.2) is not made (not more than eps lower) though the cooldown is.
    (dict(mode="min", factor=0.5, patience=1, threshold=0.1, cooldown=1, min_lr=0.2),
     [10, 9.5, 9.5, 9.4, 9.3, 9.2, 5, 5, 5, 5, 5, 5],
     [1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2]),
    # max, abs 1: better means above best + 1 (so 3 after 2 is not). 1 -> 0.5 is made; 0.5 ->
    # 0.25 is not, as 0.25 is not more than eps 0.25.
    (dict(mode="max", threshold_mode="abs", threshold=1.0, patience=0, factor=0.5, eps=0.25),
     [1, 1.5, 2.0, 3.0, 3.5], [1.0, 0.5, 0.5, 0.5, 0.5]),
    # min, rel 0.5: better means below best * 0.5; exactly half (4 after 8, 1 after 2) is not
    (dict(threshold=0.5, patience=1, factor=0.5), [8, 4, 4, 2, 1, 1],
     [1.0, 1.0, 0.5, 0.5, 0.5, 0.25]),
])
def test_reduce_lr_on_plateau_by_hand(kwargs, metrics, expected):
    s = lr_scheduler.ReduceLROnPlateau(make_optimizer(1.0), **kwargs)
    assert s.get_last_lr() == [1.0]
    lrs = []
    for i, m in enumerate(metrics):
        s.step(mixprec.tensor(float(m)) if i % 2 else m)  # a number or a one-element tensor
        lrs.append(s.optimizer.param_groups[0]["lr"])
        assert s.get_last_lr() == [lrs[-1]]
    assert lrs == expected and s.last_epoch == len(metrics)


@pytest.mark.parametrize("mode", ["min", "max"])
@pytest.mark.parametrize("threshold_mode", ["rel", "abs"])
def test_reduce_lr_on_plateau_threshold_is_torchs_float_comparison(mode, threshold_mode):
    # metrics at the threshold, computed other ways (best - best * t for best * (1 - t), ...)
    # and one ulp either side: each is better or not as in torch
    torch = pytest.importorskip("torch")
    t = 1e-4
    ours = lr_scheduler.ReduceLROnPlateau(make_optimizer(), mode, threshold=t,
                                          threshold_mode=threshold_mode)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), mode, threshold=t,
        threshold_mode=threshold_mode)
    decisions = []
    for best in [0.01 * k for k in range(1, 400)] + [-0.37, 1e-7, 123.456]:
        for edge in (best * (1 - t), best - best * t, best * (1 + t), best + best * t,
                     best - t, best + t):
            for a in (math.nextafter(edge, -math.inf), edge, math.nextafter(edge, math.inf)):
                decisions.append(ours.is_better(a, best))
                assert decisions[-1] == theirs.is_better(a, best), (a, best)
    assert True in decisions and False in decisions


def test_reduce_lr_on_plateau_epoch_argument_warns_as_pytorch():
    s = lr_scheduler.ReduceLROnPlateau(make_optimizer(1.0))
    with pytest.warns(UserWarning, match=r"^The epoch parameter in `scheduler.step\(\)` was not"):
        s.step(1.0, epoch=7)
    assert s.last_epoch == 7


# loss-like: drops, plateaus, tiny improvements (under a rel 1e-4 threshold, over an abs one)
PLATEAU_METRICS = [1.0, 0.8, 0.8, 0.8, 0.79995, 0.8, 0.6, 0.6, 0.59, 0.59, 0.59, 0.59, 0.5, 0.5,
                   0.5, 0.5, 0.5, 0.5, 0.4999, 0.45, 0.45, 0.45, 0.45, 0.45, 0.45, 0.45, 0.45]


@pytest.mark.parametrize("kwargs", [
    dict(),
    dict(mode="max", patience=2, factor=0.5),
    dict(patience=1, threshold_mode="abs", threshold=0.01, cooldown=2),
    dict(mode="max", threshold_mode="abs", threshold=0.05, patience=0, factor=0.3, min_lr=0.004),
    dict(patience=0, factor=0.5, min_lr=[0.01], eps=0.004),
    dict(patience=1, cooldown=3, factor=0.7, threshold=0.05),
    dict(patience=2, factor=0.25, min_lr=1e-3, cooldown=1, threshold_mode="abs", threshold=0.0),
])
def test_reduce_lr_on_plateau_gives_torchs_floats(kwargs):
    torch = pytest.importorskip("torch")
    ours = lr_scheduler.ReduceLROnPlateau(make_optimizer(0.1), **kwargs)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1), **kwargs)
    metrics = PLATEAU_METRICS * 2
    if kwargs.get("mode") == "max":
        metrics = [2.0 - m for m in metrics]  # accuracy-like
    lrs = set()
    for epoch, m in enumerate(metrics):
        ours.step(m)
        theirs.step(torch.tensor(m, dtype=torch.float64))
        lr = ours.optimizer.param_groups[0]["lr"]
        assert repr(lr) == repr(theirs.optimizer.param_groups[0]["lr"]), f"epoch {epoch}"
        assert repr(ours.get_last_lr()) == repr(theirs._last_lr)
        assert (ours.best, ours.num_bad_epochs, ours.cooldown_counter, ours.last_epoch) == \
            (theirs.best, theirs.num_bad_epochs, theirs.cooldown_counter, theirs.last_epoch)
        lrs.add(lr)
    assert len(lrs) >= 2  # the sequence did reduce the lr


def test_reduce_lr_on_plateau_state_dict_round_trip():
    kwargs = dict(patience=3, factor=0.5, cooldown=1, threshold_mode="abs", threshold=0.01)
    a = lr_scheduler.ReduceLROnPlateau(make_optimizer(0.1), **kwargs)
    for m in PLATEAU_METRICS[:15]:  # mid-plateau: 2 bad epochs counted, a best to beat
        a.step(m)
    state = pickle.loads(pickle.dumps(a.state_dict()))
    assert "optimizer" not in state and state["num_bad_epochs"] == 2
    opt = make_optimizer(0.1)
    opt.load_state_dict(a.optimizer.state_dict())  # the lr is the optimizer's
    b = lr_scheduler.ReduceLROnPlateau(opt, mode="max")  # the state's mode takes over
    b.load_state_dict(state)
    assert (b.mode, b.mode_worse, b.best, b.num_bad_epochs) == \
        ("min", math.inf, a.best, a.num_bad_epochs)
    lr = b.get_last_lr()[0]
    for m in PLATEAU_METRICS[15:] * 2:
        a.step(m)
        b.step(m)
        assert b.get_last_lr() == a.get_last_lr()
        assert b.optimizer.param_groups[0]["lr"] == a.optimizer.param_groups[0]["lr"]
    assert b.get_last_lr()[0] < lr / 8  # reductions after the resume, the first two steps in


def test_reduce_lr_on_plateau_loads_torchs_state_dict():
    torch = pytest.importorskip("torch")
    kwargs = dict(mode="max", patience=1, factor=0.5, cooldown=2)
    theirs = torch.optim.lr_scheduler.ReduceLROnPlateau(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1), **kwargs)
    metrics = [2.0 - m for m in PLATEAU_METRICS]
    for m in metrics[:10]:
        theirs.step(m)
    ours = lr_scheduler.ReduceLROnPlateau(make_optimizer(theirs.optimizer.param_groups[0]["lr"]))
    ours.load_state_dict(theirs.state_dict())
    for m in metrics[10:]:
        ours.step(m)
        theirs.step(m)
        assert repr(ours.get_last_lr()) == repr(theirs._last_lr)


def test_verbose_prints_torchs_lines(capsys):
    torch = pytest.importorskip("torch")
    lines = []
    for lib, sched in ((mixprec, lr_scheduler), (torch, torch.optim.lr_scheduler)):
        def sgd():
            return lib.optim.SGD([lib.nn.Parameter(lib.zeros(1))], lr=0.1)
        one = sched.OneCycleLR(sgd(), max_lr=0.1, total_steps=4, cycle_momentum=False, verbose=True)
        plateau = sched.ReduceLROnPlateau(sgd(), patience=0, verbose=True)
        for m in (1.0, 1.0, 2.0):
            one.optimizer.step()
            one.step()
            plateau.step(m)
        lines.append(capsys.readouterr().out)
    assert lines[0] == lines[1] and lines[0].count("\n") == 6
