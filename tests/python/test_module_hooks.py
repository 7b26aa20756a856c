"""nn.Module's forward hooks, submodule look-ups, register_module, type(), and
nn.ParameterList / nn.ParameterDict: against NumPy, and against torch 1.13 side by side (call
logs, return-value rules, names, error messages)."""
import copy
import pickle

import numpy as np
import pytest

import mixprec
from mixprec import nn
from mixprec.nn import modules as mixprec_modules
from mixprec.nn.layers import _as_built


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (compared with torch's)
        return type(e).__name__, str(e)
    return None


def tree(lib):
    """The same module tree in mixprec or torch: a fused-able conv run in a Sequential, a
    flatten and a linear, inside a parent with its own forward."""
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.features = lib.nn.Sequential(lib.nn.Conv2d(1, 2, 3, padding=1), lib.nn.ReLU(), lib.nn.MaxPool2d(2))
            self.head = lib.nn.Linear(8, 3)

        def forward(self, x, scale=1.0):
            return self.head(self.features(x).flatten(1)) * scale
    return Net()


def copy_weights(src, dst):
    """src (mixprec) values into dst (torch)."""
    import torch
    with torch.no_grad():
        for name, t in dst.state_dict().items():
            t.copy_(torch.from_numpy(src.state_dict()[name].numpy()))


def record_calls(lib, net, x, global_hooks):
    log = []
    handles = []
    for name, m in net.named_modules():
        handles.append(m.register_forward_pre_hook(
            lambda m, inp, name=name: log.append(("pre", name, len(inp), tuple(inp[0].shape)))))
        handles.append(m.register_forward_hook(
            lambda m, inp, out, name=name: log.append(("post", name, len(inp), tuple(out.shape)))))
    if global_hooks:
        module_file = lib.nn.modules.module if lib is not mixprec else mixprec_modules
        handles.append(module_file.register_module_forward_pre_hook(
            lambda m, inp: log.append(("global-pre", type(m).__name__))))
        handles.append(module_file.register_module_forward_hook(
            lambda m, inp, out: log.append(("global-post", type(m).__name__))))
    try:
        net(x, scale=2.0)                     # keyword arguments reach forward, not the hooks
        handles[2].remove()                   # the Sequential's pre-hook
        handles[2].remove()                   # a second remove is a no-op
        with handles[5]:                      # a handle removes its hook at the end of a with
            pass
        net(x)
    finally:
        for h in handles:
            h.remove()
    net(x)                                    # no hook left: nothing logged
    return log


@pytest.mark.parametrize("global_hooks", [False, True], ids=["module-hooks", "with-global-hooks"])
def test_hook_call_log_is_torchs(global_hooks):
    torch = pytest.importorskip("torch")
    ours = record_calls(mixprec, tree(mixprec), mixprec.zeros(2, 1, 4, 4), global_hooks)
    theirs = record_calls(torch, tree(torch), torch.zeros(2, 1, 4, 4), global_hooks)
    assert ours == theirs
    assert ("pre", "features.1", 1, (2, 2, 4, 4)) in ours    # inside the fused Conv-ReLU-MaxPool run


def replacements(lib, net, x):
    """What hooks that return values do, on the same weights: a pre-hook's tuple and non-tuple
    results, a forward hook's result, and their order."""
    out = {}
    h1 = net.head.register_forward_pre_hook(lambda m, inp: inp[0] * 0)             # non-tuple: wrapped
    h2 = net.head.register_forward_pre_hook(lambda m, inp: (inp[0] + 1,))          # sees the first's result
    out["pre"] = net(x).detach().numpy().copy()
    h1.remove()
    h2.remove()
    h3 = net.features[1].register_forward_hook(lambda m, inp, o: o * 0 + 0.5)     # replaces ReLU's output
    h4 = net.features[1].register_forward_hook(lambda m, inp, o: None)            # None keeps it
    seen = []
    h5 = net.features[1].register_forward_hook(lambda m, inp, o: seen.append(float(o.sum())))
    out["post"] = net(x).detach().numpy().copy()
    out["seen"] = seen
    for h in (h3, h4, h5):
        h.remove()
    out["plain"] = net(x).detach().numpy().copy()
    return out


def test_hook_return_values_are_torchs():
    torch = pytest.importorskip("torch")
    ours_net, theirs_net = tree(mixprec), tree(torch)
    copy_weights(ours_net, theirs_net)
    x = np.random.default_rng(0).standard_normal((2, 1, 4, 4)).astype(np.float32)
    ours = replacements(mixprec, ours_net, mixprec.tensor(x))
    theirs = replacements(torch, theirs_net, torch.from_numpy(x))
    for key in ("pre", "post", "plain"):
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-5, atol=1e-6)
    assert ours["seen"] == theirs["seen"] == [2 * 2 * 4 * 4 * 0.5]


def test_hooks_against_numpy():
    lin = nn.Linear(3, 2)
    w, b = lin.weight.detach().numpy(), lin.bias.detach().numpy()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    captured = {}
    lin.register_forward_hook(lambda m, inp, out: captured.update(inp=inp[0].detach().numpy().copy(),
                                                                  out=out.detach().numpy().copy()))
    lin.register_forward_pre_hook(lambda m, inp: inp[0] * 2)
    y = lin(mixprec.tensor(x)).detach().numpy()
    np.testing.assert_allclose(captured["inp"], 2 * x)
    np.testing.assert_allclose(captured["out"], (2 * x) @ w.T + b, rtol=1e-6)
    np.testing.assert_allclose(y, captured["out"])


def test_hooks_keep_fused_sequential_values_and_gradients():
    seq = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
    x = mixprec.tensor(np.random.default_rng(1).standard_normal((2, 1, 6, 6)).astype(np.float32))
    plain = seq(x).detach().numpy().copy()
    calls = []
    handles = [m.register_forward_hook(lambda m, i, o: calls.append(type(m).__name__)) for m in seq]
    assert not any(_as_built(m, type(m)) for m in seq)   # runs as itself: not inside a fused op
    y = seq(x)
    assert calls == ["Conv2d", "ReLU", "MaxPool2d"]
    np.testing.assert_allclose(y.detach().numpy(), plain, rtol=1e-6, atol=1e-6)
    y.sum().backward()
    assert seq[0].weight.grad is not None
    for h in handles:
        h.remove()
    assert all(_as_built(m, type(m)) for m in seq)        # fused again


def test_hooked_modules_copy_and_pickle():
    relu = nn.ReLU()
    relu.register_forward_hook(lambda m, i, o: o * 0 + 3)
    clone = copy.deepcopy(relu)
    assert float(clone(mixprec.zeros(2)).sum()) == 6.0        # the hook came along, as torch's deepcopy
    plain = nn.Linear(2, 2)
    h = plain.register_forward_pre_hook(print)                 # a picklable hook
    restored = pickle.loads(pickle.dumps(plain))
    assert len(restored._forward_pre_hooks) == 1
    h.remove()
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(plain)).weight.detach().numpy(),
                                  plain.weight.detach().numpy())


def test_backward_hooks_say_why_they_are_missing():
    m = nn.Linear(2, 2)
    with pytest.raises(NotImplementedError, match="register_full_backward_hook is not supported by mixprec"):
        m.register_full_backward_hook(lambda *a: None)
    with pytest.raises(NotImplementedError, match="register_backward_hook is not supported by mixprec"):
        m.register_backward_hook(lambda *a: None)


# ---------------------------------------------------------------- registration and look-ups
def lookups(lib):
    net = tree(lib)
    net.register_buffer("steps", lib.zeros(1))
    net.features.register_module("extra", lib.nn.Identity())
    results = [type(net.get_submodule("features.0")).__name__, type(net.get_submodule("")).__name__,
               tuple(net.get_parameter("features.0.weight").shape), tuple(net.get_parameter("head.bias").shape),
               tuple(net.get_buffer("steps").shape), list(dict(net.named_modules()))]
    for fn in [lambda: net.get_submodule("features.9"), lambda: net.get_submodule("head.weight"),
               lambda: net.get_parameter("head.nope"), lambda: net.get_parameter("steps"),
               lambda: net.get_buffer("head.weight"), lambda: net.get_buffer("nope"),
               lambda: net.add_module("a.b", lib.nn.ReLU()), lambda: net.add_module("", lib.nn.ReLU()),
               lambda: net.add_module(3, lib.nn.ReLU()), lambda: net.add_module("x", 3),
               lambda: net.add_module("steps", lib.nn.ReLU()), lambda: net.register_module("head", None)]:
        results.append(error_of(fn))
    results.append([n for n, _ in net.named_children()])
    return results


def test_lookups_and_registration_are_torchs():
    torch = pytest.importorskip("torch")
    assert lookups(mixprec) == lookups(torch)


def test_module_type_converts_every_tensor_as_torch():
    torch = pytest.importorskip("torch")

    def make(lib, dst):
        m = lib.nn.Linear(2, 3)
        m.register_buffer("count", lib.zeros(1, dtype=lib.int64))
        m.register_buffer("scale", lib.ones(2))
        out = m.type(dst)
        assert out is m
        return {k: str(v.dtype).split(".")[-1] for k, v in m.state_dict().items()}

    assert make(mixprec, mixprec.float64) == make(torch, torch.float64)
    assert make(mixprec, "torch.DoubleTensor") == make(torch, "torch.DoubleTensor")
    assert make(mixprec, mixprec.float32) == make(torch, torch.float32)
    ours = error_of(lambda: make(mixprec, mixprec.int64))
    theirs = error_of(lambda: make(torch, torch.int64))
    assert ours == theirs
    with pytest.raises(ValueError, match="invalid type"):
        nn.Linear(2, 2).type("torch.NoSuchTensor")
    assert nn.Linear(2, 2).double().weight.dtype == mixprec.float64
    assert nn.Linear(2, 2).double().float().weight.dtype == mixprec.float32


# ---------------------------------------------------------------- ParameterList / ParameterDict
def containers(lib):
    class Holder(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.plist = lib.nn.ParameterList([lib.nn.Parameter(lib.ones(2)), lib.zeros(3)])
            self.plist.append(lib.nn.Parameter(lib.ones(1)))
            self.plist.extend([lib.ones(2, 2)])
            self.plist += [lib.ones(4)]
            self.pdict = lib.nn.ParameterDict({"zeta": lib.nn.Parameter(lib.ones(1)), "alpha": lib.zeros(2)})
            self.pdict["mid"] = lib.ones(3)
            self.pdict.update([("last", lib.ones(1)), ("alpha", lib.ones(5))])
    h = Holder()
    info = {"state": [(k, tuple(v.shape)) for k, v in h.state_dict().items()],
            "named": [(k, type(v).__name__) for k, v in h.named_parameters()],
            "len": (len(h.plist), len(h.pdict)), "keys": list(h.pdict.keys()), "iter": list(h.pdict),
            "slice": [tuple(p.shape) for p in h.plist[1:4:2]], "neg": tuple(h.plist[-1].shape),
            "types": [type(p).__name__ for p in h.plist],
            "requires_grad": [p.requires_grad for p in h.parameters()],
            "contains": ("mid" in h.pdict, "nope" in h.pdict), "get": h.pdict.get("nope", 7)}
    popped = h.pdict.pop("mid")
    info["pop"] = (tuple(popped.shape), list(h.pdict.keys()), [k for k, _ in h.named_parameters()])
    info["popitem"] = h.pdict.popitem()[0]
    info["copy"] = list(h.pdict.copy().keys())
    h.plist[0] = lib.zeros(6)
    info["set"] = (tuple(h.plist[0].shape), type(h.plist[0]).__name__)
    info["plain_object"] = (lib.nn.ParameterList([3, "a"])[1], list(lib.nn.ParameterList([3]).state_dict()))
    info["repr"] = repr(h.plist).replace("torch.", "").replace("mixprec.", "")
    info["empty_repr"] = repr(lib.nn.ParameterList())
    info["errors"] = [error_of(fn) for fn in [
        lambda: h.plist[10], lambda: h.plist.extend(lib.ones(2)), lambda: h.plist(1),
        lambda: h.pdict[3], lambda: h.pdict(1), lambda: h.pdict.update(3),
        lambda: h.pdict.update([("a", 1, 2)]), lambda: h.pdict["nope"]]]
    return info


def test_parameter_containers_are_torchs():
    torch = pytest.importorskip("torch")
    ours, theirs = containers(mixprec), containers(torch)
    assert ours.keys() == theirs.keys()
    for key in ours:
        if key == "errors":   # the class names in an AttributeError differ by package
            assert [e and e[0] for e in ours[key]] == [e and e[0] for e in theirs[key]]
            assert [e and e[1] for e in ours[key][:-1]] == [e and e[1] for e in theirs[key][:-1]]
        else:
            assert ours[key] == theirs[key], key


def test_parameter_containers_train_with_an_optimizer():
    """The registered parameters are the ones an optimizer updates: one SGD step against NumPy."""
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.ws = nn.ParameterList([mixprec.ones(3), mixprec.full((3,), 2.0)])
            self.bs = nn.ParameterDict({"b": mixprec.zeros(1)})

        def forward(self, x):
            return (x * self.ws[0] * self.ws[1]).sum() + self.bs["b"].sum()

    model = Model()
    assert [n for n, _ in model.named_parameters()] == ["ws.0", "ws.1", "bs.b"]
    opt = mixprec.optim.SGD(model.parameters(), lr=0.1)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    model(mixprec.tensor(x)).backward()
    opt.step()
    np.testing.assert_allclose(model.ws[0].detach().numpy(), 1 - 0.1 * 2 * x, rtol=1e-6)
    np.testing.assert_allclose(model.ws[1].detach().numpy(), 2 - 0.1 * 1 * x, rtol=1e-6)
    np.testing.assert_allclose(model.bs["b"].detach().numpy(), [-0.1], rtol=1e-6)
    state = model.state_dict()
    fresh = Model()
    fresh.load_state_dict(state)
    np.testing.assert_array_equal(fresh.ws[1].detach().numpy(), model.ws[1].detach().numpy())
