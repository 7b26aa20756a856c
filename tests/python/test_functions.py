"""The torch.* functions and Tensor methods training scripts call (mixprec/_functions.py):
values against NumPy in float64, gradients against finite differences, PyTorch's edge cases
(NaN, ties, empty dims) and errors; side by side with torch 1.13 where it is installed."""
import io
import os

import numpy as np
import pytest

import mixprec
from helpers import as_f64, check_grad, rng


def test_module_functions_are_the_methods():
    x = mixprec.tensor(rng(1).standard_normal((2, 3, 4)).astype(np.float32))
    np.testing.assert_array_equal(mixprec.flatten(x, 1).numpy(), x.numpy().reshape(2, 12))
    np.testing.assert_array_equal(mixprec.flatten(x).numpy(), x.numpy().reshape(-1))
    np.testing.assert_array_equal(mixprec.transpose(x, 0, 2).numpy(), x.numpy().transpose(2, 1, 0))
    np.testing.assert_array_equal(mixprec.sum(x, 1).numpy(), x.numpy().sum(1, dtype=np.float32))
    np.testing.assert_allclose(mixprec.mean(x).item(), x.numpy().astype(np.float64).mean(), rtol=1e-6)
    np.testing.assert_array_equal(mixprec.argmax(x, -1).numpy(), x.numpy().argmax(-1))
    np.testing.assert_array_equal(mixprec.argmin(x, -1).numpy(), x.numpy().argmin(-1))
    np.testing.assert_array_equal(mixprec.argmax(x, 1).numpy(), x.numpy().argmax(1))       # any dim
    assert x.argmax(0, keepdim=True).shape == (1, 3, 4)
    np.testing.assert_array_equal(mixprec.unsqueeze(x, 0).shape, (1, 2, 3, 4))
    assert mixprec.numel(x) == 24 and mixprec.is_tensor(x) and not mixprec.is_tensor(x.numpy())
    assert mixprec.is_floating_point(x) and not mixprec.is_floating_point(mixprec.tensor([1]))


@pytest.mark.parametrize("dim, keepdim", [(0, False), (1, False), (2, True), (-1, False), (-3, True)])
def test_max_min_over_a_dim_give_values_indices_and_the_gradient_at_the_index(dim, keepdim):
    a = rng(2).standard_normal((3, 4, 5))
    x = mixprec.tensor(a.astype(np.float32), requires_grad=True)
    for name, arg in (("max", np.argmax), ("min", np.argmin)):
        out = getattr(mixprec, name)(x, dim, keepdim)
        values, indices = out                        # unpacks as a pair
        assert out.values is values and out.indices is indices and type(out).__name__ == name
        ref_idx = arg(a, axis=dim)
        ref_val = np.take_along_axis(a, np.expand_dims(ref_idx, dim), dim)
        if not keepdim:
            ref_val = ref_val.squeeze(dim)
        else:
            ref_idx = np.expand_dims(ref_idx, dim)
        np.testing.assert_array_equal(indices.numpy(), ref_idx)
        assert indices.dtype == mixprec.int64
        np.testing.assert_array_equal(values.detach().numpy(), ref_val.astype(np.float32))
        w = rng(3).standard_normal(ref_val.shape).astype(np.float32)
        x.grad = None
        (values * mixprec.tensor(w)).sum().backward()
        expect = np.zeros_like(a, dtype=np.float32)
        np.put_along_axis(expect, np.expand_dims(arg(a, axis=dim), dim),
                          w if keepdim else np.expand_dims(w, dim), dim)
        np.testing.assert_array_equal(x.grad.numpy(), expect)


def test_max_min_edge_cases():
    x = mixprec.tensor([[1.0, 3.0, 3.0], [float("nan"), 2.0, 5.0]])
    v, i = x.max(1)
    np.testing.assert_array_equal(i.numpy(), [1, 0])            # first of a tie; NaN wins
    assert v.numpy()[0] == 3.0 and np.isnan(v.numpy()[1])
    assert np.isnan(x.max().item()) and np.isnan(x.min().item())  # over everything: NaN wins both
    assert x.max().shape == () and x[0].min().item() == 1.0 and x[0].max().item() == 3.0
    np.testing.assert_array_equal(mixprec.max(x[0], mixprec.tensor([2.0, 4.0, 1.0])).numpy(), [2.0, 4.0, 3.0])
    np.testing.assert_array_equal(mixprec.minimum(mixprec.tensor([float("nan"), 1.0]),
                                                  mixprec.tensor([0.0, 0.0])).numpy()[1], 0.0)
    assert np.isnan(mixprec.maximum(mixprec.tensor([float("nan")]), mixprec.tensor([0.0])).item())
    with pytest.raises(RuntimeError, match="Expected reduction dim to be specified for input.numel\\(\\) == 0"):
        mixprec.zeros(0).max()
    with pytest.raises(IndexError, match="Expected reduction dim 1 to have non-zero size"):
        mixprec.zeros(2, 0).max(1)
    ints = mixprec.tensor([[3, 9, 1], [4, 4, 0]])
    v, i = mixprec.max(ints, 1)
    np.testing.assert_array_equal(v.numpy(), [9, 4])
    np.testing.assert_array_equal(i.numpy(), [1, 0])
    bf = mixprec.tensor([[0.5, -2.0, 7.0]]).bfloat16()
    assert mixprec.max(bf, 1).values.dtype == mixprec.bfloat16 and mixprec.max(bf, 1).values.float().item() == 7.0


def test_comparisons_and_masks():
    a = mixprec.tensor([1.0, 2.0, float("nan"), float("inf")])
    b = mixprec.tensor([1.0, 3.0, float("nan"), 0.0])
    for name, op in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                     ("gt", np.greater), ("ge", np.greater_equal)]:
        np.testing.assert_array_equal(getattr(a, name)(b).numpy(), op(a.numpy(), b.numpy()).astype(np.uint8))
        np.testing.assert_array_equal(getattr(mixprec, name)(a, 1.0).numpy(), op(a.numpy(), 1.0).astype(np.uint8))
    np.testing.assert_array_equal(mixprec.isnan(a).numpy(), [0, 0, 1, 0])
    np.testing.assert_array_equal(a.isfinite().numpy(), [1, 1, 0, 0])
    np.testing.assert_array_equal(mixprec.isinf(a).numpy(), [0, 0, 0, 1])
    predicted, labels = mixprec.tensor([1, 2, 3]), mixprec.tensor([1, 0, 3])
    correct = (predicted == labels).sum().item()          # the accuracy idiom
    assert correct == 2 and type(correct) is int          # an int, as torch's item() of an int64
    assert mixprec.tensor([2 ** 62 + 1]).item() == 2 ** 62 + 1
    assert mixprec.allclose(mixprec.tensor([1.0, 2.0]), mixprec.tensor([1.0, 2.0 + 1e-6]))
    assert not mixprec.allclose(mixprec.tensor([1.0]), mixprec.tensor([1.1]))
    assert mixprec.equal(mixprec.tensor([1.0, 2.0]), mixprec.tensor([1.0, 2.0]))
    assert not mixprec.equal(mixprec.tensor([1.0, 2.0]), mixprec.tensor([[1.0, 2.0]]))


def test_elementwise_values_and_gradients_against_float64():
    a = rng(4).uniform(-3, 3, (3, 5))
    check_grad(lambda t: mixprec.tanh(t), np.tanh, a)
    check_grad(lambda t: t.sigmoid(), lambda v: 1 / (1 + np.exp(-v)), a)
    check_grad(lambda t: mixprec.sqrt(t), np.sqrt, np.abs(a) + 0.5)
    check_grad(lambda t: mixprec.abs(t), np.abs, a)
    check_grad(lambda t: mixprec.clamp(t, -1.0, 0.5), lambda v: np.clip(v, -1.0, 0.5), a)
    check_grad(lambda t: t.clamp(min=0.2), lambda v: np.maximum(v, 0.2), a)
    check_grad(lambda t: mixprec.maximum(t, t * 0.5), lambda v: np.maximum(v, v * 0.5), a)
    x = mixprec.tensor(a.astype(np.float32))
    np.testing.assert_allclose(mixprec.tanh(x).numpy(), np.tanh(a), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(x.sqrt().numpy()[x.numpy() > 0], np.sqrt(a[a > 0]), rtol=2e-7)


def test_elementwise_edge_cases_as_pytorch():
    x = mixprec.tensor([-2.0, -0.0, 0.0, 3.0, float("nan")], requires_grad=True)
    y = mixprec.abs(x)
    np.testing.assert_array_equal(y.detach().numpy()[:4], [2.0, 0.0, 0.0, 3.0])
    assert not np.signbit(y.detach().numpy()[1]) and np.isnan(y.detach().numpy()[4])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[:4], [-1.0, 0.0, 0.0, 1.0])   # sign(x), 0 at 0
    x.grad = None
    c = mixprec.clamp(x, -1.0, 0.0)
    np.testing.assert_array_equal(c.detach().numpy()[:4], [-1.0, -0.0, 0.0, 0.0])
    assert np.isnan(c.detach().numpy()[4])
    c.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[:4], [0.0, 1.0, 1.0, 0.0])    # inclusive bounds
    np.testing.assert_array_equal(mixprec.clamp(mixprec.tensor([1.0, 5.0]), 3.0, 2.0).numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(mixprec.clamp(mixprec.tensor([1, 5, 9]), 2, 6).numpy(), [2, 5, 6])
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
        mixprec.clamp(x)
    z = mixprec.tensor([0.0], requires_grad=True)
    mixprec.sqrt(z).sum().backward()
    assert np.isinf(z.grad.numpy()[0])                                          # d sqrt at 0, as torch


def test_in_place_arithmetic_and_its_refusal_on_leaves():
    p = mixprec.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        p.add_(1.0)
    with mixprec.no_grad():
        p.mul_(0.5).add_(mixprec.tensor([1.0, 1.0]), alpha=2.0)       # an EMA or manual SGD step
    np.testing.assert_array_equal(p.detach().numpy(), [2.5, 3.0])
    q = mixprec.tensor([4.0, 6.0])
    assert q.sub_(1.0) is q and q.div_(mixprec.tensor([3.0, 5.0])) is q
    np.testing.assert_array_equal(q.numpy(), [1.0, 1.0])
    q.clamp_(max=0.5)
    np.testing.assert_array_equal(q.numpy(), [0.5, 0.5])


def test_truth_and_index_of_one_element_tensors():
    assert not mixprec.tensor(0.0) and not mixprec.tensor([0.0]) and mixprec.tensor([[2]])
    assert mixprec.tensor(float("nan"))                       # as bool(float("nan"))
    a, b = mixprec.tensor([1, 2, 3]), mixprec.tensor([1, 0, 3])
    assert [bool(x == y) for x, y in zip(a, b)] == [True, False, True]
    classes = ("a", "b", "c", "d")
    assert [classes[x] for x in a] == ["b", "c", "d"] and list(range(mixprec.tensor(3))) == [0, 1, 2]
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with more than one value is ambiguous"):
        bool(a == b)
    with pytest.raises(RuntimeError, match="Boolean value of Tensor with no values is ambiguous"):
        bool(mixprec.zeros(0))
    with pytest.raises(TypeError, match="only integer tensors of a single element can be converted to an index"):
        classes[mixprec.tensor(1.0)]


def test_chunk_and_split():
    x = mixprec.arange(10.0).reshape(5, 2)
    parts = mixprec.chunk(x, 2)
    assert [tuple(p.shape) for p in parts] == [(3, 2), (2, 2)]
    np.testing.assert_array_equal(np.concatenate([p.numpy() for p in parts]), x.numpy())
    assert [tuple(p.shape) for p in x.split([1, 4])] == [(1, 2), (4, 2)]
    assert [tuple(p.shape) for p in mixprec.split(x, 1, dim=1)] == [(5, 1), (5, 1)]
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 5"):
        x.split([1, 1])


def test_new_tensors():
    assert mixprec.arange(5).dtype == mixprec.int64
    np.testing.assert_array_equal(mixprec.arange(5).numpy(), np.arange(5))
    np.testing.assert_array_equal(mixprec.arange(1, 2, 0.25).numpy(), np.array([1, 1.25, 1.5, 1.75], np.float32))
    assert mixprec.arange(0, 1, 0.1).shape == (10,)
    with pytest.raises(RuntimeError, match="upper bound and larger bound inconsistent with step sign"):
        mixprec.arange(0, 5, -1)
    np.testing.assert_allclose(mixprec.linspace(0, 1, 5).numpy(), [0, 0.25, 0.5, 0.75, 1.0])
    assert mixprec.linspace(-1, 1, 1).numpy().tolist() == [-1.0]
    mixprec.manual_seed(3)
    r = mixprec.randint(2, 7, (1000,))
    assert r.dtype == mixprec.int64 and r.numpy().min() == 2 and r.numpy().max() == 6
    mixprec.manual_seed(3)
    np.testing.assert_array_equal(mixprec.randint(2, 7, (1000,)).numpy(), r.numpy())   # seeded
    assert mixprec.randint(5, (2, 3)).shape == (2, 3)
    p = mixprec.randperm(50)
    assert sorted(p.numpy().tolist()) == list(range(50)) and p.numpy().tolist() != list(range(50))
    np.testing.assert_array_equal(mixprec.eye(3, 2).numpy(), np.eye(3, 2, dtype=np.float32))
    x = mixprec.zeros(2, 3, dtype=mixprec.bfloat16)
    assert mixprec.full_like(x, 7).dtype == mixprec.bfloat16 and mixprec.full_like(x, 7).float().numpy().max() == 7
    assert mixprec.randn_like(x).shape == (2, 3) and mixprec.rand_like(x).dtype == mixprec.bfloat16
    a = np.arange(4, dtype=np.float32)
    t = mixprec.as_tensor(a)
    a[0] = 9
    assert t.numpy()[0] == 9                     # shares the array's memory, as torch.as_tensor
    assert mixprec.as_tensor([1, 2]).dtype == mixprec.int64
    assert x.new_zeros(4).dtype == mixprec.bfloat16 and x.new_ones((2, 2)).float().numpy().sum() == 4
    assert x.new_tensor([1.5]).dtype == mixprec.bfloat16 and x.new_full((2,), 3.0).float().numpy().tolist() == [3, 3]


def test_grad_modes():
    w = mixprec.tensor([2.0], requires_grad=True)
    with mixprec.no_grad():
        with mixprec.enable_grad():
            assert (w * 3).requires_grad
        assert not (w * 3).requires_grad
    with mixprec.set_grad_enabled(False):
        assert not mixprec.is_grad_enabled()
    assert mixprec.is_grad_enabled()
    with mixprec.inference_mode():
        assert not (w * 3).requires_grad
    with mixprec.inference_mode(False):
        assert (w * 3).requires_grad
    mixprec.set_grad_enabled(False)              # called: from now on, as torch
    try:
        assert not mixprec.is_grad_enabled()
    finally:
        mixprec.set_grad_enabled(True)
    assert mixprec.is_grad_enabled()

    @mixprec.enable_grad()
    def graph():
        return (w * 3).requires_grad
    with mixprec.no_grad():
        assert graph()


def test_devices_name_the_cpu():
    d = mixprec.device("cuda" if mixprec.cuda.is_available() else "cpu")
    assert d == mixprec.device("cpu") and str(d) == "cpu" and repr(d) == "device(type='cpu')"
    assert mixprec.cuda.device_count() == 0
    assert str(mixprec.device("cpu:0")) == "cpu:0" and mixprec.device("cpu", 0).index == 0
    x = mixprec.ones(2).to(d)
    model = mixprec.nn.Linear(2, 1).to(d)
    assert model(x.to(mixprec.device("cpu:0"))).shape == (1,)
    with pytest.raises(RuntimeError, match="mixprec runs on CPUs only"):
        x.to(mixprec.device("cuda"))
    with pytest.raises(RuntimeError, match="device type at start of device string: gpu"):
        mixprec.device("gpu")
    with mixprec.cpu.amp.autocast():
        assert mixprec.nn.functional.linear(x, mixprec.ones(3, 2)).dtype == mixprec.bfloat16


def test_save_and_load_round_trip(tmp_path):
    model = mixprec.nn.Sequential(mixprec.nn.Linear(3, 4), mixprec.nn.Tanh(), mixprec.nn.Linear(4, 2))
    extra = {"step": 7, "bf16": mixprec.tensor([1.5, -2.25]).bfloat16(), "grad": mixprec.tensor([1.0], requires_grad=True)}
    path = tmp_path / "model.pth"
    mixprec.save({"model": model.state_dict(), "extra": extra}, path)
    assert os.listdir(tmp_path) == ["model.pth"]          # written whole, no temporary left
    back = mixprec.load(path, map_location="cpu")
    other = mixprec.nn.Sequential(mixprec.nn.Linear(3, 4), mixprec.nn.Tanh(), mixprec.nn.Linear(4, 2))
    other.load_state_dict(back["model"])
    for (k, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    assert back["extra"]["step"] == 7 and back["extra"]["bf16"].dtype == mixprec.bfloat16
    np.testing.assert_array_equal(back["extra"]["bf16"].float().numpy(), [1.5, -2.25])
    assert back["extra"]["grad"].requires_grad
    buffer = io.BytesIO()
    mixprec.save(mixprec.tensor([3.0]), buffer)
    buffer.seek(0)
    assert mixprec.load(buffer).item() == 3.0
    with pytest.raises(RuntimeError, match="mixprec runs on CPUs only"):
        mixprec.load(path, map_location="cuda:0")
    with pytest.raises(ValueError, match="holds a pickled object .* precision applies to checkpoints only"):
        mixprec.load(path, precision="bf16")
    with pytest.raises(FileNotFoundError):
        mixprec.save({}, tmp_path / "missing" / "x.pth")
    assert sorted(os.listdir(tmp_path)) == ["model.pth"]


def test_log_is_within_an_ulp_in_float32():
    x = np.concatenate([np.float32([1.0, 0.5, 2.0, 1e-40, 3.4e38]),
                        (np.float32(1.0).view(np.uint32) + np.arange(-50, 50)).astype(np.uint32).view(np.float32)])
    got = mixprec.log(mixprec.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, np.log(x.astype(np.float64)), rtol=1.2e-7, atol=0)
    assert got[0] == 0.0
    edges = mixprec.log(mixprec.tensor([0.0, -1.0, float("inf")])).numpy()
    assert edges[0] == -np.inf and np.isnan(edges[1]) and edges[2] == np.inf


def test_new_layers_and_l1_loss():
    x = mixprec.tensor(rng(5).standard_normal((4, 3)).astype(np.float32))
    np.testing.assert_allclose(mixprec.nn.Tanh()(x).numpy(), np.tanh(as_f64(x)), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(mixprec.nn.Sigmoid()(x).numpy(), 1 / (1 + np.exp(-as_f64(x))), rtol=2e-6)
    y = mixprec.tensor(rng(6).standard_normal((4, 3)).astype(np.float32))
    check_grad(lambda a, b: mixprec.nn.functional.l1_loss(a, b), lambda a, b: np.abs(a - b).mean(),
               as_f64(x), as_f64(y))
    assert mixprec.nn.L1Loss(reduction="sum")(x, y).item() == pytest.approx(np.abs(as_f64(x) - as_f64(y)).sum(), rel=1e-6)
    assert mixprec.nn.L1Loss(reduction="none")(x, y).shape == (4, 3)


# ---- side by side with torch 1.13 ----------------------------------------------------------

def test_functions_match_torch():
    torch = pytest.importorskip("torch")
    a = rng(9).standard_normal((4, 6)).astype(np.float32)
    a[1, 2] = a[1, 4]  # a tie
    for name, args in [("tanh", ()), ("sigmoid", ()), ("abs", ()), ("clamp", (-0.5, 0.5)), ("exp", ())]:
        xo = mixprec.tensor(a, requires_grad=True)
        xt = torch.from_numpy(a.copy()).requires_grad_()
        yo, yt = getattr(mixprec, name)(xo, *args), getattr(torch, name)(xt, *args)
        torch.testing.assert_close(torch.from_numpy(yo.detach().numpy()), yt.detach(), msg=name)
        yo.sum().backward()
        yt.sum().backward()
        torch.testing.assert_close(torch.from_numpy(xo.grad.numpy()), xt.grad, msg=name)
    for dim in (0, 1):
        vo, io_ = mixprec.max(mixprec.tensor(a), dim)
        vt, it = torch.max(torch.from_numpy(a), dim)
        np.testing.assert_array_equal(vo.numpy(), vt.numpy())
        np.testing.assert_array_equal(io_.numpy(), it.numpy())
    torch.testing.assert_close(torch.from_numpy(mixprec.linspace(-3, 7, 11).numpy()), torch.linspace(-3, 7, 11))
    torch.testing.assert_close(torch.from_numpy(mixprec.arange(0, 3, 0.3).numpy()), torch.arange(0, 3, 0.3))


def test_sort_topk_argsort():
    a = np.array([[3.0, 1.0, 2.0, 1.0], [np.nan, -1.0, 5.0, np.inf]], np.float32)
    x = mixprec.tensor(a, requires_grad=True)
    v, i = mixprec.sort(x)
    np.testing.assert_array_equal(i.numpy(), [[1, 3, 2, 0], [1, 2, 3, 0]])       # stable; NaN last
    v, i = x.sort(dim=1, descending=True)
    np.testing.assert_array_equal(i.numpy(), [[0, 2, 1, 3], [0, 3, 2, 1]])       # NaN first
    w = np.arange(8, dtype=np.float32).reshape(2, 4)
    (v * mixprec.tensor(w)).sum().backward()
    expect = np.zeros_like(a)
    np.put_along_axis(expect, i.numpy(), w, 1)
    np.testing.assert_array_equal(x.grad.numpy(), expect)                         # gradient to its source
    tv, ti = mixprec.tensor(a[:1]).topk(2)
    np.testing.assert_array_equal(tv.numpy(), [[3.0, 2.0]])
    np.testing.assert_array_equal(ti.numpy(), [[0, 2]])
    np.testing.assert_array_equal(mixprec.topk(mixprec.tensor(a[:1]), 2, largest=False).indices.numpy(), [[1, 3]])
    np.testing.assert_array_equal(mixprec.tensor([2, 0, 1]).argsort().numpy(), [1, 2, 0])
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        mixprec.tensor(a).topk(5)


def test_var_std_norm_against_float64():
    a = rng(11).standard_normal((3, 4, 5))
    x = mixprec.tensor(a, dtype=mixprec.float64)
    np.testing.assert_allclose(x.var().item(), a.var(ddof=1), rtol=1e-12)
    np.testing.assert_allclose(mixprec.std(x, 1).numpy(), a.std(1, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(x.var((0, 2), unbiased=False, keepdim=True).numpy(), a.var((0, 2), keepdims=True),
                               rtol=1e-12)
    np.testing.assert_allclose(x.norm().item(), np.linalg.norm(a.ravel()), rtol=1e-12)
    np.testing.assert_allclose(mixprec.norm(x, p=1, dim=2).numpy(), np.abs(a).sum(2), rtol=1e-12)
    check_grad(lambda t: t.std(1), lambda v: v.std(1, ddof=1), a)
    check_grad(lambda t: t.norm(dim=0), lambda v: np.sqrt((v * v).sum(0)), a)
    assert np.isnan(mixprec.tensor([1.0]).var().item())                           # one value, n - 1 = 0


def test_expand_and_repeat():
    a = np.array([[1.0], [2.0]], np.float32)
    x = mixprec.tensor(a, requires_grad=True)
    e = x.expand(2, 3)
    np.testing.assert_array_equal(e.detach().numpy(), np.broadcast_to(a, (2, 3)))
    assert x.expand(4, -1, 3).shape == (4, 2, 3) and mixprec.ones(1, 3).expand_as(mixprec.zeros(5, 3)).shape == (5, 3)
    e.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[3.0], [3.0]])
    with pytest.raises(RuntimeError, match="The expanded size of the tensor \\(3\\) must match the existing size \\(2\\)"):
        x.expand(3, 1)
    r = mixprec.tensor([[1.0, 2.0]]).repeat(2, 3)
    np.testing.assert_array_equal(r.numpy(), np.tile([[1.0, 2.0]], (2, 3)))
    assert mixprec.tensor([1.0, 2.0]).repeat(3, 1, 2).shape == (3, 1, 4)
    check_grad(lambda t: t.repeat(2, 2), lambda v: np.tile(v, (2, 2)), rng(12).standard_normal((2, 3)))
    with pytest.raises(RuntimeError, match="mixprec runs on CPUs only"):
        x.cuda()


def test_losses_at_the_edges_stay_finite():
    F = mixprec.nn.functional
    p = mixprec.tensor([0.0, 1.0, 0.5, 1e-30], requires_grad=True)
    y = mixprec.tensor([1.0, 0.0, 1.0, 0.0])
    loss = F.binary_cross_entropy(p, y, reduction="none")
    # log(1 - 1e-30) = log(1) = 0 exactly (backend/cpu/log.h; oneDNN's log gave -1.4e-6 there)
    np.testing.assert_allclose(loss.detach().numpy(), [100.0, 100.0, np.log(2), 0.0], rtol=1e-6, atol=0)
    loss.sum().backward()
    assert np.isfinite(p.grad.numpy()).all()
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(mixprec.tensor([1.5]), mixprec.tensor([1.0]))
    x = mixprec.tensor([0.0, 100.0, -100.0, 2.0], requires_grad=True)
    t = mixprec.tensor([1.0, 0.0, 1.0, 0.5])
    loss = F.binary_cross_entropy_with_logits(x, t, reduction="none")
    ref = np.maximum(as_f64(x), 0) - as_f64(x) * as_f64(t) + np.log1p(np.exp(-np.abs(as_f64(x))))
    np.testing.assert_allclose(loss.detach().numpy(), ref, rtol=1e-6, atol=1e-7)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 1 / (1 + np.exp(-as_f64(x))) - as_f64(t), rtol=1e-6, atol=1e-7)
    e = mixprec.tensor([200.0, -1.0], requires_grad=True)
    mixprec.nn.functional.elu(e).sum().backward()                       # the branch not taken never overflows
    np.testing.assert_allclose(e.grad.numpy(), [1.0, np.exp(-1.0)], rtol=1e-6)
    np.testing.assert_array_equal(F.one_hot(mixprec.tensor([0, 2]), 3).numpy(), [[1, 0, 0], [0, 0, 1]])
    with pytest.raises(RuntimeError, match="Class values must be smaller than num_classes"):
        F.one_hot(mixprec.tensor([3]), 3)


def test_group_norm_and_upsample_against_float64():
    a = rng(15).standard_normal((2, 6, 3, 4))
    w, b = rng(16).standard_normal(6), rng(17).standard_normal(6)

    def ref(v, weight, bias):
        g = v.reshape(2, 3, -1)
        out = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(v.shape)
        return out * weight.reshape(1, 6, 1, 1) + bias.reshape(1, 6, 1, 1)

    F = mixprec.nn.functional
    check_grad(lambda x, weight, bias: F.group_norm(x, 3, weight, bias), ref, a, w, b, rtol=1e-4, atol=1e-6)
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        F.group_norm(mixprec.zeros(1, 5, 2), 2)
    up = F.interpolate(mixprec.tensor(a, dtype=mixprec.float64), scale_factor=2)
    np.testing.assert_array_equal(up.numpy(), a.repeat(2, axis=2).repeat(2, axis=3))
    check_grad(lambda x: F.interpolate(x, size=(6, 12)), lambda v: v.repeat(2, axis=2).repeat(3, axis=3), a)
    with pytest.raises(NotImplementedError, match="mode 'nearest' or 'bilinear'"):
        F.interpolate(mixprec.zeros(1, 1, 2, 2), scale_factor=2, mode="bicubic")


def test_rounding_and_integer_arithmetic_as_pytorch():
    x = mixprec.tensor([-2.5, -1.5, -0.4, 0.5, 1.5, 2.7])
    np.testing.assert_array_equal(x.round().numpy(), [-2.0, -2.0, -0.0, 0.0, 2.0, 3.0])   # half to even
    np.testing.assert_array_equal(mixprec.floor(x).numpy(), np.floor(x.numpy()))
    np.testing.assert_array_equal(x.ceil().numpy(), np.ceil(x.numpy()))
    i = mixprec.tensor([7, -7, 6])
    np.testing.assert_array_equal((i // 2).numpy(), [3, -4, 3])                          # floor division
    np.testing.assert_array_equal((i % 3).numpy(), [1, 2, 0])                            # divisor's sign
    assert (i // 2).dtype == mixprec.int64
    np.testing.assert_allclose((2 ** mixprec.tensor([0.0, 1.0, 3.0])).numpy(), [1.0, 2.0, 8.0], rtol=1e-6)
    np.testing.assert_array_equal(abs(mixprec.tensor([-1.0, 2.0])).numpy(), [1.0, 2.0])
    np.testing.assert_array_equal((1 / mixprec.tensor([2.0, 4.0])).numpy(), [0.5, 0.25])
    np.testing.assert_array_equal((3 / mixprec.tensor([3.0])).numpy(), [1.0])
    assert x.type() == "mixprec.FloatTensor" and x.type(mixprec.float64).dtype == mixprec.float64
    assert mixprec.FloatTensor([1, 2]).dtype == mixprec.float32 and mixprec.LongTensor([1]).dtype == mixprec.int64


def test_log1p_logsumexp_triangles_unbind_meshgrid():
    a = np.array([1e-10, -1e-7, 0.5, 3.0, -0.9])
    got = mixprec.log1p(mixprec.tensor(a.astype(np.float32))).numpy()
    np.testing.assert_allclose(got, np.log1p(a.astype(np.float32).astype(np.float64)), rtol=3e-7)
    check_grad(lambda t: mixprec.log1p(t), np.log1p, np.array([1e-12, 0.3, 2.0, -0.5]))
    b = rng(18).standard_normal((3, 4)) * 30
    check_grad(lambda t: mixprec.logsumexp(t, 1), lambda v: np.log(np.exp(v - v.max(1, keepdims=True)).sum(1))
               + v.max(1), b, rtol=1e-6, atol=1e-8)
    big = mixprec.tensor([[1000.0, 1000.0], [-np.inf, -np.inf]])
    np.testing.assert_allclose(mixprec.logsumexp(big, 1).numpy(), [1000.0 + np.log(2), -np.inf])
    m = mixprec.tensor(np.full((3, 3), -np.inf, np.float32))
    np.testing.assert_array_equal(mixprec.triu(m, 1).numpy(), np.triu(m.numpy(), 1) + np.tril(np.zeros((3, 3)), 0))
    np.testing.assert_array_equal(mixprec.ones(3, 3).tril().numpy(), np.tril(np.ones((3, 3))))
    rows = mixprec.tensor([[1.0, 2.0], [3.0, 4.0]]).unbind(1)
    assert [r.numpy().tolist() for r in rows] == [[1.0, 3.0], [2.0, 4.0]]
    gy, gx = mixprec.meshgrid(mixprec.arange(3), mixprec.arange(2), indexing="ij")
    np.testing.assert_array_equal(gy.numpy(), [[0, 0], [1, 1], [2, 2]])
    np.testing.assert_array_equal(gx.numpy(), [[0, 1], [0, 1], [0, 1]])
    assert mixprec.zeros(2, 3, 4).mT.shape == (2, 4, 3) and mixprec.zeros(6).view_as(mixprec.zeros(2, 3)).shape == (2, 3)


def test_normalize_cosine_pad_dropout2d_padding_idx():
    F = mixprec.nn.functional
    a, b = rng(19).standard_normal((4, 5)), rng(20).standard_normal((4, 5))
    check_grad(lambda t: F.normalize(t, dim=1), lambda v: v / np.linalg.norm(v, axis=1, keepdims=True), a)
    check_grad(lambda s, t: F.cosine_similarity(s, t), lambda s, t: (s * t).sum(1) / np.sqrt((s * s).sum(1) * (t * t).sum(1)),
               a, b)
    p = F.pad(mixprec.tensor(a), (1, 2, 0, 1), value=7.0)
    np.testing.assert_array_equal(p.numpy(), np.pad(a, ((0, 1), (1, 2)), constant_values=7.0))
    np.testing.assert_array_equal(F.pad(mixprec.tensor(a), (-1, -2)).numpy(), a[:, 1:3])
    check_grad(lambda t: F.pad(t, (2, 0, 1, 1)), lambda v: np.pad(v, ((1, 1), (2, 0))), a)
    mixprec.manual_seed(4)
    y = F.dropout2d(mixprec.ones(8, 16, 3, 3), 0.5)
    per_channel = y.numpy().reshape(8, 16, 9)
    assert set(np.unique(per_channel)) <= {0.0, 2.0} and (per_channel.min(2) == per_channel.max(2)).all()
    assert 0 < (per_channel[:, :, 0] == 0).mean() < 1
    assert F.dropout2d(mixprec.ones(2, 2, 2, 2), 0.5, training=False).numpy().min() == 1.0
    emb = mixprec.nn.Embedding(5, 3, padding_idx=0)
    assert np.abs(emb.weight.detach().numpy()[0]).sum() == 0 and np.abs(emb.weight.detach().numpy()[1:]).sum() > 0
    out = emb(mixprec.tensor([[0, 2, 0]]))
    out.sum().backward()
    np.testing.assert_array_equal(emb.weight.grad.numpy()[0], [0.0, 0.0, 0.0])      # no gradient to padding
    np.testing.assert_array_equal(emb.weight.grad.numpy()[2], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(out.detach().numpy()[0, 0], [0.0, 0.0, 0.0])


def test_list_and_tensor_indexing_on_any_dim_gather_index_select_cumsum():
    a = np.arange(24.0).reshape(2, 3, 4)
    x = mixprec.tensor(a)
    np.testing.assert_array_equal(x[:, [0, 2]].numpy(), a[:, [0, 2]])
    np.testing.assert_array_equal(x[[1, 0]].numpy(), a[[1, 0]])
    np.testing.assert_array_equal(x[1, :, [3, -1, 0]].numpy(), a[1][:, [3, -1, 0]])  # PyTorch: the integer first
    np.testing.assert_array_equal(x[:, mixprec.tensor([[2], [0]]), 1].numpy(), a[:, np.array([[2], [0]]), 1])
    np.testing.assert_array_equal(x[None, 0, [1]].numpy(), a[None, 0, [1]])
    # PyTorch's placement rule: integers are basic indices, applied first (NumPy counts them as
    # advanced: its a[1, :, [3, 0]] is the transpose of PyTorch's); lists separated by a slice or
    # None put their dims first. tests/python/test_advanced_indexing.py has the full set.
    assert x[1, :, [3, 0]].shape == (3, 2) and x[0, None, [1, 2]].shape == (1, 2, 4)
    np.testing.assert_array_equal(x[1, :, [3, 0]].numpy(), a[1][:, [3, 0]])
    np.testing.assert_array_equal(x[0, None, [1, 2]].numpy(), a[0][None][:, [1, 2]])
    for index in [(slice(None), [2, 1], 0), ([1], slice(1, 3), 2),
                  (1, [0, 2], slice(None)), (slice(None), slice(None), [[1, 2], [3, 0]])]:
        np.testing.assert_array_equal(x[index].numpy(), a[index], err_msg=str(index))
    # PyTorch names the index array's rank among the index arrays, not the tensor's dim
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[:, [3]]
    check_grad(lambda t: t[:, [2, 0, 2]], lambda v: v[:, [2, 0, 2]], a)      # repeated rows sum back
    idx = np.array([[[0, 3], [1, 1], [2, 0]], [[3, 3], [0, 1], [2, 2]]])
    np.testing.assert_array_equal(mixprec.gather(x, 2, mixprec.tensor(idx)).numpy(), np.take_along_axis(a, idx, 2))
    check_grad(lambda t: t.gather(2, mixprec.tensor(idx)), lambda v: np.take_along_axis(v, idx, 2), a)
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        x.gather(1, mixprec.tensor([0]))
    np.testing.assert_array_equal(mixprec.index_select(x, 1, mixprec.tensor([2, 0])).numpy(), a[:, [2, 0]])
    np.testing.assert_array_equal(x.cumsum(1).numpy(), np.cumsum(a, 1))
    check_grad(lambda t: t.cumsum(0), lambda v: np.cumsum(v, 0), a)
    np.testing.assert_array_equal(mixprec.tensor([1, 2, 3]).cumsum(0).numpy(), [1, 3, 6])


def test_softplus_mish_relu6_hardtanh():
    F = mixprec.nn.functional
    v = np.array([-40.0, -20.0, -1.0, 0.0, 1.0, 19.0, 21.0, 50.0])
    ref = np.where(v > 20, v, np.log1p(np.exp(np.minimum(v, 20))))
    np.testing.assert_allclose(F.softplus(mixprec.tensor(v)).numpy(), ref, rtol=1e-13)
    np.testing.assert_allclose(F.softplus(mixprec.tensor(v.astype(np.float32))).numpy(), ref, rtol=3e-7)
    check_grad(lambda t: F.softplus(t, beta=2), lambda u: np.where(2 * u > 20, u, np.log1p(np.exp(2 * u)) / 2),
               np.array([-3.0, 0.2, 4.0]))
    check_grad(lambda t: F.mish(t), lambda u: u * np.tanh(np.log1p(np.exp(u))), np.array([-2.0, 0.3, 1.5]))
    np.testing.assert_array_equal(mixprec.nn.ReLU6()(mixprec.tensor([-1.0, 3.0, 7.0])).numpy(), [0.0, 3.0, 6.0])
    np.testing.assert_array_equal(mixprec.nn.Hardtanh()(mixprec.tensor([-2.0, 0.5, 2.0])).numpy(), [-1.0, 0.5, 1.0])
