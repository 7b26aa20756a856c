"""Parameter groups as PyTorch 1.13's: options per group, add_param_group, changes between
steps, state_dict() across groups, zero_grad, GradScaler; side by side with torch (bit for
bit) and against a float64 NumPy reference."""
import warnings

import numpy as np
import pytest

import mixprec
from mixprec import nn
from helpers import rng

SHAPES = [(5,), (3, 4), (17,), (2, 3)]


def grads_for(step):
    """Gradients spanning 1e-3..1e2 in magnitude, signs mixed."""
    r = rng(100 + step)
    out = []
    for shape in SHAPES:
        mag = 10.0 ** r.uniform(-3, 2, size=shape)
        out.append((mag * r.choice([-1.0, 1.0], size=shape)).astype(np.float32))
    return out


P0 = [rng(7 + i).standard_normal(s).astype(np.float32) for i, s in enumerate(SHAPES)]


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.int32)


def groups_of(params, options):
    return [dict(params=params[i:j], **opts) for (i, j), opts in options]


GROUPS = {
    "SGD": (dict(lr=0.1), [((0, 1), dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
                           ((1, 3), dict(momentum=0.5, dampening=0.1)),
                           ((3, 4), dict(lr=0.2, nesterov=True, momentum=0.8))]),
    "Adam": (dict(lr=1e-2), [((0, 2), dict(lr=3e-3, weight_decay=0.1)),
                             ((2, 3), dict(betas=(0.8, 0.99), amsgrad=True)),
                             ((3, 4), dict(eps=1e-6))]),
    "AdamW": (dict(lr=1e-2), [((0, 2), dict(weight_decay=0.0)),
                              ((2, 4), dict(lr=5e-3, weight_decay=0.3))]),
}


def changes(step, groups):
    """Option changes between steps, as fine-tuning scripts make them."""
    if step == 2:
        groups[0]["lr"] *= 0.5
    if step == 3:
        groups[-1]["weight_decay"] = 0.05
        if "momentum" in groups[0]:
            groups[0]["momentum"] = 0.7
        if "betas" in groups[0]:
            groups[0]["betas"] = (0.85, 0.995)


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_groups_bit_identical_to_torch(name):
    torch = pytest.importorskip("torch")
    defaults, options = GROUPS[name]
    ours = [nn.Parameter(mixprec.tensor(p)) for p in P0]
    theirs = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in P0]
    opt = getattr(mixprec.optim, name)(groups_of(ours, options), **defaults)
    ref = getattr(torch.optim, name)(groups_of(theirs, options), foreach=False, **defaults)
    for step in range(6):
        changes(step, opt.param_groups)
        changes(step, ref.param_groups)
        for a, b, g in zip(ours, theirs, grads_for(step)):
            a.grad = mixprec.tensor(g)
            b.grad = torch.from_numpy(g.copy())
        opt.step()
        ref.step()
        for a, b in zip(ours, theirs):
            assert np.array_equal(bits(a.detach().numpy()), bits(b.detach().numpy())), step
    assert len(opt.param_groups) == len(ref.param_groups)
    for g, h in zip(opt.param_groups, ref.param_groups):
        assert {k: v for k, v in g.items() if k not in ("params", "foreach")} == \
               {k: v for k, v in h.items() if k not in ("params", "foreach")}


def reference_sgd_groups(p0, grads, groups):
    """float64 SGD with momentum and weight decay, each group its own options."""
    ps = [p.astype(np.float64) for p in p0]
    bufs = [None] * len(ps)
    for step_grads in grads:
        for (i, j), o in groups:
            for k in range(i, j):
                g = step_grads[k] + o["weight_decay"] * ps[k]
                bufs[k] = g.copy() if bufs[k] is None else o["momentum"] * bufs[k] + g
                ps[k] = ps[k] - o["lr"] * bufs[k]
    return ps


def test_groups_against_float64_reference():
    groups = [((0, 2), dict(lr=0.05, momentum=0.9, weight_decay=0.0)),
              ((2, 4), dict(lr=0.01, momentum=0.5, weight_decay=0.1))]
    grads = [grads_for(s) for s in range(4)]
    ours = [nn.Parameter(mixprec.tensor(p)) for p in P0]
    opt = mixprec.optim.SGD(groups_of(ours, groups), lr=1.0)
    for step_grads in grads:
        for p, g in zip(ours, step_grads):
            p.grad = mixprec.tensor(g)
        opt.step()
    for got, want in zip(ours, reference_sgd_groups(P0, grads, groups)):
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-5, atol=1e-5)


def test_add_param_group_checks_and_messages():
    a, b = nn.Parameter(mixprec.zeros(2)), nn.Parameter(mixprec.zeros(3))
    opt = mixprec.optim.SGD([a], lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match="^some parameters appear in more than one parameter group$"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(TypeError, match="ordered collections"):
        opt.add_param_group({"params": {b}})
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors"):
        opt.add_param_group({"params": [1.0]})
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        opt.add_param_group({"params": [a * 2]})
    with pytest.raises(ValueError, match="^some parameters appear in more than one parameter group$"):
        mixprec.optim.Adam([{"params": [a]}, {"params": [b, a]}])
    with pytest.raises(ValueError, match="didn't specify a value of required optimization parameter lr"):
        mixprec.optim.SGD([{"params": [a]}])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mixprec.optim.SGD([a, a], lr=0.1)
    assert any("duplicate parameters" in str(w.message) for w in caught)
    opt.add_param_group({"params": b, "lr": 0.5})  # a tensor alone, defaults filled in
    assert opt.param_groups[1]["params"][0] is b
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["lr"] == 0.5


def test_add_param_group_later_steps_as_torch():
    torch = pytest.importorskip("torch")
    ours = [nn.Parameter(mixprec.tensor(p)) for p in P0]
    theirs = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in P0]
    opt = mixprec.optim.AdamW(ours[:2], lr=1e-2)
    ref = torch.optim.AdamW(theirs[:2], lr=1e-2, foreach=False)
    for step in range(5):
        if step == 2:  # unfreeze the backbone with a smaller lr
            opt.add_param_group({"params": ours[2:], "lr": 1e-3})
            ref.add_param_group({"params": theirs[2:], "lr": 1e-3})
        n = 2 if step < 2 else 4
        for a, b, g in list(zip(ours, theirs, grads_for(step)))[:n]:
            a.grad = mixprec.tensor(g)
            b.grad = torch.from_numpy(g.copy())
        opt.step()
        ref.step()
    for a, b in zip(ours, theirs):
        assert np.array_equal(bits(a.detach().numpy()), bits(b.detach().numpy()))


def _to_torch_state(state, torch):
    return {"state": {i: {k: torch.from_numpy(np.array(v.numpy() if hasattr(v, "numpy") else v))
                          for k, v in entry.items()} for i, entry in state["state"].items()},
            "param_groups": state["param_groups"]}


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_state_dict_moves_between_torch_and_mixprec_with_groups(name):
    torch = pytest.importorskip("torch")
    defaults, options = GROUPS[name]
    theirs = [torch.nn.Parameter(torch.from_numpy(p.copy())) for p in P0]
    ref = getattr(torch.optim, name)(groups_of(theirs, options), foreach=False, **defaults)
    for step in range(2):
        for b, g in zip(theirs, grads_for(step)):
            b.grad = torch.from_numpy(g.copy())
        ref.step()
    ref.param_groups[1]["lr"] = 0.0123  # saved options win on load, as in torch
    # torch's state converted through NumPy, into a fresh optimizer made with the defaults
    ours = [nn.Parameter(mixprec.tensor(b.detach().numpy().copy())) for b in theirs]
    opt = getattr(mixprec.optim, name)(groups_of(ours, [(r, {}) for r, _ in options]), **defaults)
    saved = ref.state_dict()
    opt.load_state_dict({"state": {i: {k: v.numpy() for k, v in e.items()} for i, e in saved["state"].items()},
                         "param_groups": saved["param_groups"]})
    assert opt.param_groups[1]["lr"] == 0.0123
    for step in range(2, 5):
        for a, b, g in zip(ours, theirs, grads_for(step)):
            a.grad = mixprec.tensor(g)
            b.grad = torch.from_numpy(g.copy())
        opt.step()
        ref.step()
    for a, b in zip(ours, theirs):
        assert np.array_equal(bits(a.detach().numpy()), bits(b.detach().numpy()))
    # and back: ours (torch's layout) into a fresh torch optimizer gives torch's state
    mine = opt.state_dict()
    assert [g["params"] for g in mine["param_groups"]] == [g["params"] for g in ref.state_dict()["param_groups"]]
    assert sorted(mine["state"]) == sorted(ref.state_dict()["state"])
    back = getattr(torch.optim, name)(groups_of([torch.nn.Parameter(b.detach().clone()) for b in theirs],
                                                [(r, {}) for r, _ in options]), foreach=False, **defaults)
    back.load_state_dict(_to_torch_state(mine, torch))
    for index, entry in ref.state_dict()["state"].items():
        for k, v in entry.items():
            assert torch.equal(back.state_dict()["state"][index][k], v), (index, k)


def test_state_dict_round_trip_and_checks():
    ps = [nn.Parameter(mixprec.tensor(p)) for p in P0]
    opt = mixprec.optim.SGD([{"params": ps[:1]}, {"params": ps[1:], "momentum": 0.9}], lr=0.1, momentum=0.5)
    for p, g in zip(ps, grads_for(0)):
        p.grad = mixprec.tensor(g)
    opt.step()
    state = opt.state_dict()
    assert [g["params"] for g in state["param_groups"]] == [[0], [1, 2, 3]]
    assert sorted(state["state"]) == [0, 1, 2, 3]
    assert state["param_groups"][1]["momentum"] == 0.9
    assert set(opt.state[ps[2]]) == {"momentum_buffer"}
    other = mixprec.optim.SGD([{"params": ps}], lr=0.1)
    with pytest.raises(ValueError, match="^loaded state dict has a different number of parameter groups$"):
        other.load_state_dict(state)
    other = mixprec.optim.SGD([{"params": ps[:2]}, {"params": ps[2:]}], lr=0.1)
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        other.load_state_dict(state)


def test_zero_grad_over_all_groups():
    ps = [nn.Parameter(mixprec.tensor(p)) for p in P0]
    opt = mixprec.optim.Adam([{"params": ps[:2]}, {"params": ps[2:], "lr": 0.1}])
    for p, g in zip(ps, grads_for(0)):
        p.grad = mixprec.tensor(g)
    opt.zero_grad()
    assert all(not p.grad.numpy().any() for p in ps)
    opt.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in ps)


def test_option_changes_take_effect_with_state_kept():
    """momentum changed mid-run: the group's engine is made anew with its momentum buffer."""
    p = nn.Parameter(mixprec.tensor([1.0]))
    opt = mixprec.optim.SGD([p], lr=0.5, momentum=0.5)
    p.grad = mixprec.tensor([1.0])
    opt.step()  # buf = 1, p = 0.5
    opt.param_groups[0]["momentum"] = 0.25
    opt.step()  # buf = 0.25 * 1 + 1 = 1.25, p = 0.5 - 0.625
    assert p.item() == 0.5 - 0.625


@pytest.mark.parametrize("overflow", [False, True])
def test_grad_scaler_steps_every_group(overflow):
    """GradScaler over two groups: one inf/NaN check for all gradients, every group stepped
    (or none), the same bits as the unscaled gradients stepped directly."""
    ps = [nn.Parameter(mixprec.tensor(p)) for p in P0]
    qs = [nn.Parameter(mixprec.tensor(p)) for p in P0]
    options = [((0, 2), dict(lr=0.05, momentum=0.9)), ((2, 4), dict(lr=0.01))]
    opt, plain = (mixprec.optim.SGD(groups_of(x, options), lr=1.0) for x in (ps, qs))
    scaler = mixprec.amp.GradScaler(init_scale=1024.0)
    for step in range(3):
        grads = grads_for(step)
        for p, q, g in zip(ps, qs, grads):
            p.grad = mixprec.tensor(g * 1024.0)
            q.grad = mixprec.tensor(g)
        if overflow and step == 1:
            ps[3].grad = mixprec.tensor(np.full(SHAPES[3], np.inf, np.float32))
        scaler.unscale_(opt) if step == 0 else None
        scaler.step(opt)
        scaler.update()
        if not (overflow and step == 1):
            plain.step()
        else:
            assert scaler.get_scale() == 512.0
            scaler.update(1024.0)
        for p, q in zip(ps, qs):
            assert np.array_equal(bits(p.detach().numpy()), bits(q.detach().numpy())), step
