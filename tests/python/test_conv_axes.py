"""Per-axis (int or (H, W) pair) arguments of Conv2d, ConvTranspose2d, MaxPool2d and AvgPool2d
and their functions: against float64 NumPy loops written here from PyTorch's definitions,
finite-difference gradients, PyTorch 1.13 side by side (skipped without torch), the
Sequential fusion kept to the square case, and the per-axis argument errors."""
import numpy as np
import pytest

import mixprec
import mixprec.nn as nn
import mixprec.nn.functional as F
from mixprec.nn import layers
from helpers import as_f64, check_grad, rng


# ---- float64 references -------------------------------------------------------------------

def conv2d_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """PyTorch's conv2d: out[n, o, i, j] = b[o] + sum over the group's channels c and taps
    (u, v) of xpad[n, c, i sh + u dh, j sw + v dw] w[o, c, u, v]."""
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                           j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, oc, i, j] = np.einsum("ncuv,cuv->n", patch, w[oc])
        if b is not None:
            out[:, oc] += b[oc]
    return out


def conv_transpose2d_ref(x, w, b=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), groups=1,
                         dilation=(1, 1)):
    """PyTorch's conv_transpose2d as a scatter: input pixel (i, j) of channel ci adds
    x w[ci, co, u, v] at output (i sh - ph + u dh, j sw - pw + v dw); the output has
    (in - 1) s - 2 p + d (k - 1) + output_padding + 1 rows (columns)."""
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = stride, padding, output_padding, dilation
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    out = np.zeros((n, cog * groups, oh, ow))
    cig = cin // groups
    for ci in range(cin):
        g = ci // cig
        for i in range(h):
            for j in range(wd):
                for u in range(kh):
                    for v in range(kw):
                        r, q = i * sh - ph + u * dh, j * sw - pw + v * dw
                        if 0 <= r < oh and 0 <= q < ow:
                            out[:, g * cog:(g + 1) * cog, r, q] += x[:, ci, i, j, None] * w[ci, :, u, v]
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def pool_ref(x, kernel, stride, padding, kind):
    """PyTorch's max / average pooling (the average's divisor counts the padding)."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.full((n, c, h + 2 * ph, w + 2 * pw), fill)
    xp[:, :, ph:ph + h, pw:pw + w] = x
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            out[:, :, i, j] = win.max(axis=(2, 3)) if kind == "max" else win.sum(axis=(2, 3)) / (kh * kw)
    return out


def f64(a, grad=False):
    return mixprec.tensor(np.asarray(a, dtype=np.float64), dtype=mixprec.float64, requires_grad=grad)


CONV_CASES = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 5, 7), (4, 3, 1, 3), (2, 1), (0, 1), (1, 1), 1),   # docs/python.md's Conv2d(3, 16, (1, 3), (2, 1), (0, 1))
    ((1, 4, 6, 5), (6, 2, 3, 2), (1, 2), (2, 0), (2, 1), 2),
    ((2, 2, 7, 4), (3, 2, 2, 3), 3, (1, 2), (1, 2), 1),        # an int stride with pairs
    ((1, 2, 4, 4), (2, 2, 3, 3), (1,), [1, 1], 1, 1),          # a 1-sequence and a list
]


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CONV_CASES)
def test_conv2d_per_axis_against_numpy(xs, ws, stride, padding, dilation, groups):
    g = rng(1)
    x, w, b = g.standard_normal(xs), g.standard_normal(ws), g.standard_normal(ws[0])
    pair = lambda v: F._pair(v, "v", "test")  # noqa: E731
    want = conv2d_ref(x, w, b, pair(stride), pair(padding), pair(dilation), groups)
    got = F.conv2d(f64(x), f64(w), f64(b), stride, padding, dilation, groups)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    # float32 (oneDNN's kernels) to float32 accuracy
    got32 = F.conv2d(mixprec.tensor(x.astype(np.float32)), mixprec.tensor(w.astype(np.float32)),
                     mixprec.tensor(b.astype(np.float32)), stride, padding, dilation, groups)
    np.testing.assert_allclose(got32.numpy(), want, rtol=1e-5, atol=1e-5)


def test_conv2d_per_axis_gradients_match_finite_differences():
    g = rng(2)
    x, w, b = g.standard_normal((1, 2, 4, 5)), g.standard_normal((2, 1, 2, 3)), g.standard_normal(2)
    args = dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    ref_args = dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)
    check_grad(lambda *t: F.conv2d(*t, **args), lambda *a: conv2d_ref(*a, **ref_args), x, w, b)


def test_conv2d_same_padding_per_axis_against_numpy():
    # 'same' with an even kernel and odd dilation: dilation (k - 1) = 1 along H (the extra row
    # at the bottom) and 2 * 2 = 4 along W (2 each side), as PyTorch 1.13 pads.
    g = rng(3)
    x, w = g.standard_normal((2, 2, 5, 6)), g.standard_normal((3, 2, 2, 3))
    xp = np.zeros((2, 2, 6, 6))
    xp[:, :, :5] = x
    want = conv2d_ref(xp, w, padding=(0, 2), dilation=(1, 2))
    got = F.conv2d(f64(x), f64(w), padding="same", dilation=(1, 2))
    assert tuple(got.shape) == (2, 3, 5, 6)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    check_grad(lambda a, b: F.conv2d(a, b, padding="same", dilation=(1, 2)),
               lambda a, b: conv2d_ref(np.pad(a, ((0, 0), (0, 0), (0, 1), (0, 0))), b, padding=(0, 2),
                                       dilation=(1, 2)), x[:1, :, :3, :4], w)
    valid = F.conv2d(f64(x), f64(w), padding="valid")
    np.testing.assert_allclose(valid.numpy(), conv2d_ref(x, w), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("stride, padding, output_padding, dilation, groups", [
    ((2, 1), (0, 1), (1, 0), (1, 1), 1),
    ((1, 3), (1, 0), (0, 2), (2, 1), 2),
    (2, (1, 0), (1, 0), (1, 2), 1),
])
def test_conv_transpose2d_per_axis_against_numpy(stride, padding, output_padding, dilation, groups):
    g = rng(4)
    x, w, b = g.standard_normal((2, 4, 3, 4)), g.standard_normal((4, 3, 2, 3)), g.standard_normal(3 * groups)
    pair = lambda v: F._pair(v, "v", "test")  # noqa: E731
    want = conv_transpose2d_ref(x, w, b, pair(stride), pair(padding), pair(output_padding), groups, pair(dilation))
    got = F.conv_transpose2d(f64(x), f64(w), f64(b), stride, padding, output_padding, groups, dilation)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    check_grad(lambda *t: F.conv_transpose2d(*t, stride, padding, output_padding, groups, dilation),
               lambda *a: conv_transpose2d_ref(*a, pair(stride), pair(padding), pair(output_padding), groups,
                                               pair(dilation)), x[:1, :, :2, :3], w, b)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("kernel, stride, padding", [
    ((1, 3), (2, 1), (0, 1)), ((3, 2), None, (1, 0)), ((2, 4), (3, 2), (1, 2)), (3, (1, 2), 1), ((2,), [], 0),
])
def test_pooling_per_axis_against_numpy(kind, kernel, stride, padding):
    x = rng(5).standard_normal((2, 3, 7, 9))  # distinct values: max's gradient is well defined
    pair = lambda v: F._pair(v, "v", "test")  # noqa: E731
    ref_stride = pair(kernel) if stride is None or stride == [] else pair(stride)
    want = pool_ref(x, pair(kernel), ref_stride, pair(padding), kind)
    fn = F.max_pool2d if kind == "max" else F.avg_pool2d
    got = fn(f64(x), kernel, stride, padding)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    module = (nn.MaxPool2d if kind == "max" else nn.AvgPool2d)(kernel, stride, padding)
    np.testing.assert_array_equal(module(f64(x)).numpy(), got.numpy())
    small = x[:1, :2, :5, :6]
    check_grad(lambda t: fn(t, kernel, stride, padding),
               lambda a: pool_ref(a, pair(kernel), ref_stride, pair(padding), kind), small)


def test_conv2d_layer_takes_pairs_like_torch():
    mixprec.manual_seed(0)
    conv = nn.Conv2d(3, 16, kernel_size=(1, 3), stride=(2, 1), padding=(0, 1))
    assert tuple(conv.weight.shape) == (16, 3, 1, 3) and tuple(conv.bias.shape) == (16,)
    assert (conv.kernel_size, conv.stride, conv.padding, conv.dilation) == ((1, 3), (2, 1), (0, 1), (1, 1))
    assert repr(conv) == "Conv2d(3, 16, kernel_size=(1, 3), stride=(2, 1), padding=(0, 1))"
    x = rng(6).standard_normal((2, 3, 5, 7)).astype(np.float32)
    y = conv(mixprec.tensor(x))
    want = conv2d_ref(x, as_f64(conv.weight), as_f64(conv.bias), (2, 1), (0, 1))
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-5, atol=1e-5)
    # PyTorch's default initialisation, fan_in = 3 * 1 * 3: U(-1/3, 1/3), weight then bias.
    assert np.abs(as_f64(conv.weight)).max() <= 1 / 3 and np.abs(as_f64(conv.weight)).max() > 0.25
    t = nn.ConvTranspose2d(4, 6, (2, 3), stride=(2, 1), padding=(0, 1), output_padding=(1, 0), groups=2)
    assert tuple(t.weight.shape) == (4, 3, 2, 3) and tuple(t.bias.shape) == (6,)
    assert repr(t) == ("ConvTranspose2d(4, 6, kernel_size=(2, 3), stride=(2, 1), padding=(0, 1), "
                       "output_padding=(1, 0), groups=2)")
    assert tuple(t(mixprec.randn(1, 4, 3, 3)).shape) == (1, 6, 7, 3)


def test_non_square_kernels_are_drawn_as_the_engine_draws_a_square_one():
    # A non-square kernel's parameters come from the same generator by the engine's rule: the
    # engine's square Conv2d gives exactly the values that rule draws.
    for seed in (0, 7):
        mixprec.manual_seed(seed)
        engine = nn.Conv2d(3, 4, (3, 3))
        mixprec.manual_seed(seed)
        bound = 1 / np.sqrt(27)
        w = mixprec._mixprec._uniform([4, 3, 3, 3], -bound, bound, mixprec.float32)
        b = mixprec._mixprec._uniform([4], -bound, bound, mixprec.float32)
        np.testing.assert_array_equal(engine.weight.detach().numpy(), w.numpy())
        np.testing.assert_array_equal(engine.bias.detach().numpy(), b.numpy())
    mixprec.manual_seed(5)
    rect = nn.Conv2d(3, 4, (3, 2), bias=False)
    mixprec.manual_seed(5)
    bound = 1 / np.sqrt(18)
    np.testing.assert_array_equal(rect.weight.detach().numpy(),
                                  mixprec._mixprec._uniform([4, 3, 3, 2], -bound, bound, mixprec.float32).numpy())
    assert rect.bias is None


class _Spy:
    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, *args):
        self.calls.append(args[3:])
        return self.fn(*args)


@pytest.mark.parametrize("conv_args, fused", [
    (dict(kernel_size=3, padding=1), True),
    (dict(kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)), True),
    (dict(kernel_size=(1, 3), padding=(0, 1)), False),      # padding differs per axis
    (dict(kernel_size=3, stride=(2, 1), padding=1), False),  # stride differs per axis
    (dict(kernel_size=(3, 1), stride=2, padding=(1, 1)), True),  # a non-square kernel, square stride and padding
])
def test_sequential_fuses_only_square_stride_and_padding(monkeypatch, conv_args, fused):
    spy = _Spy(layers._C.conv2d_relu_max_pool2d)
    monkeypatch.setattr(layers._C, "conv2d_relu_max_pool2d", spy)
    mixprec.manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 16, **conv_args), nn.ReLU(), nn.MaxPool2d(2))
    x = mixprec.tensor((rng(7).integers(-3, 4, (2, 3, 8, 8)) * 0.5).astype(np.float32))
    out = net(x)
    assert bool(spy.calls) == fused
    if fused:
        assert all(isinstance(v, int) for v in spy.calls[0])  # the fused op's int stride, padding, pool
    by_hand = x
    for m in net:
        by_hand = m.forward(by_hand)
    np.testing.assert_allclose(out.detach().numpy(), by_hand.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_maxpool_with_unequal_kernel_or_stride_is_not_fused(monkeypatch):
    spy = _Spy(layers._C.relu_max_pool2d)
    monkeypatch.setattr(layers._C, "relu_max_pool2d", lambda *a: spy.calls.append(a) or spy.fn(*a))
    x = mixprec.randn(1, 2, 6, 6)
    for pool, fused in ((nn.MaxPool2d((2, 2)), True), (nn.MaxPool2d((2, 3)), False),
                        (nn.MaxPool2d(2, stride=(2, 1)), False), (nn.MaxPool2d(2, padding=(0, 1)), False)):
        spy.calls.clear()
        out = nn.Sequential(nn.ReLU(), pool)(x)
        assert bool(spy.calls) == fused, pool
        np.testing.assert_array_equal(out.numpy(), pool(F.relu(x)).numpy())


@pytest.mark.parametrize("call, message", [
    (lambda x, w: F.conv2d(x, w, padding=(0, -1)), "padding -1 (expected >= 0) along W, padding (0, -1)"),
    (lambda x, w: F.conv2d(x, w, stride=(0, 1)), "stride 0 (expected >= 1) along H, stride (0, 1)"),
    (lambda x, w: F.conv2d(x, w, dilation=(1, 0)), "dilation 0 (expected >= 1) along W, dilation (1, 0)"),
    (lambda x, w: F.conv2d(x, mixprec.randn(3, 2, 2, 9), padding=(0, 1)),
     "it spans 9 along W, the input padded by (0, 1) has 8"),
    (lambda x, w: F.conv_transpose2d(x, mixprec.randn(2, 3, 2, 3), stride=(2, 1), output_padding=(1, 1)),
     "got 1 along W, output_padding (1, 1)"),
    (lambda x, w: F.conv_transpose2d(x, mixprec.randn(2, 3, 2, 3), padding=(0, -2)),
     "padding -2 (expected >= 0) along W"),
    (lambda x, w: F.max_pool2d(x, (3, 2), padding=(0, 2)), "padding 2 is more than half the kernel_size 2 along W"),
    (lambda x, w: F.max_pool2d(x, (3, 2), stride=(0, 1)), "stride 0 (expected >= 1) along H"),
    (lambda x, w: F.avg_pool2d(x, (3, 2), padding=(-1, 0)), "padding -1 (expected >= 0) along H"),
    (lambda x, w: F.avg_pool2d(x, (7, 2)), "kernel_size 7 is larger than the padded input's 5"),
])
def test_bad_per_axis_values_name_the_axis(call, message):
    x, w = mixprec.randn(1, 2, 5, 6), mixprec.randn(3, 2, 2, 3)
    with pytest.raises(ValueError) as info:  # the engine's invalid_argument
        call(x, w)
    assert message in str(info.value)


def test_bad_argument_forms_are_torch_like_errors():
    x, w = mixprec.randn(1, 2, 5, 6), mixprec.randn(3, 2, 2, 3)
    with pytest.raises(RuntimeError, match=r"stride must be a single int or a pair of ints \(H, W\), got stride=\(1, 2, 3\)"):
        F.conv2d(x, w, stride=(1, 2, 3))
    with pytest.raises(RuntimeError, match="kernel_size must be a single int or a pair"):
        F.max_pool2d(x, 1.5)
    with pytest.raises(RuntimeError, match="padding='same' is not supported for strided convolutions"):
        F.conv2d(x, w, stride=(1, 2), padding="same")
    with pytest.raises(RuntimeError, match="Invalid padding string: 'full'"):
        F.conv2d(x, w, padding="full")
    with pytest.raises(ValueError, match="padding='same' is not supported for strided convolutions"):
        nn.Conv2d(2, 3, (2, 3), stride=(2, 1), padding="same")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(2, 3, 3, padding="full")
    with pytest.raises(NotImplementedError, match="count_include_pad"):
        F.avg_pool2d(x, 2, count_include_pad=False)


# ---- PyTorch 1.13 side by side ------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _same_weights(ours, theirs, torch):
    with torch.no_grad():
        for name, p in ours.named_parameters():
            getattr(theirs, name).copy_(torch.from_numpy(p.detach().numpy().copy()))


@pytest.mark.parametrize("make, shape", [
    (lambda m: m.Conv2d(3, 16, kernel_size=(1, 3), stride=(2, 1), padding=(0, 1)), (2, 3, 9, 8)),
    (lambda m: m.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(2, 0), dilation=(2, 1), groups=2), (2, 4, 7, 9)),
    (lambda m: m.Conv2d(2, 4, (2, 3), padding="same", dilation=(1, 2)), (2, 2, 6, 7)),
    (lambda m: m.Conv2d(2, 4, (4, 3), padding="same"), (1, 2, 6, 5)),
    (lambda m: m.Conv2d(2, 4, (2, 5), padding="valid", bias=False), (1, 2, 6, 7)),
    (lambda m: m.ConvTranspose2d(4, 6, (2, 3), stride=(2, 1), padding=(0, 1), output_padding=(1, 0), groups=2),
     (2, 4, 5, 4)),
    (lambda m: m.ConvTranspose2d(3, 2, (3, 1), stride=(1, 3), padding=(1, 0), output_padding=(0, 2),
                                 dilation=(2, 1)), (1, 3, 4, 4)),
    (lambda m: m.MaxPool2d((2, 3), stride=(1, 2), padding=(1, 1)), (2, 3, 7, 8)),
    (lambda m: m.MaxPool2d((3, 1)), (2, 3, 7, 8)),
    (lambda m: m.AvgPool2d((1, 3), stride=(2, 1), padding=(0, 1)), (2, 3, 7, 8)),
    (lambda m: m.AvgPool2d((2, 4), padding=(1, 2)), (2, 3, 7, 8)),
])
def test_layers_match_torch(make, shape):
    torch = _torch()
    mixprec.manual_seed(0)
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    assert [tuple(p.shape) for p in ours.parameters()] == [tuple(p.shape) for p in theirs.parameters()]
    _same_weights(ours, theirs, torch)
    x = rng(8).standard_normal(shape).astype(np.float32)
    xm, xt = mixprec.tensor(x, requires_grad=True), torch.from_numpy(x.copy()).requires_grad_(True)
    ym, yt = ours(xm), theirs(xt)
    torch.testing.assert_close(torch.from_numpy(ym.detach().numpy().copy()), yt.detach())
    g = rng(9).standard_normal(tuple(yt.shape)).astype(np.float32)
    ym.backward(mixprec.tensor(g))
    yt.backward(torch.from_numpy(g))
    torch.testing.assert_close(torch.from_numpy(xm.grad.numpy().copy()), xt.grad)
    for (name, p) in ours.named_parameters():
        torch.testing.assert_close(torch.from_numpy(p.grad.numpy().copy()), getattr(theirs, name).grad)


def test_functions_match_torch_with_mixed_int_and_pair_arguments():
    torch = _torch()
    g = rng(10)
    x, w = g.standard_normal((2, 4, 8, 7)).astype(np.float32), g.standard_normal((6, 2, 3, 2)).astype(np.float32)
    xm, wm, xt, wt = mixprec.tensor(x), mixprec.tensor(w), torch.from_numpy(x), torch.from_numpy(w)
    tc = lambda t: torch.from_numpy(t.numpy().copy())  # noqa: E731
    for kw in (dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2), dict(stride=[3], padding=[0, 1], groups=2),
               dict(padding="same", dilation=2, groups=2)):
        torch.testing.assert_close(tc(F.conv2d(xm, wm, **kw)), torch.nn.functional.conv2d(xt, wt, **kw))
    for kw in (dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0)), dict(kernel_size=[2], stride=[])):
        torch.testing.assert_close(tc(F.max_pool2d(xm, **kw)), torch.nn.functional.max_pool2d(xt, **kw))
        torch.testing.assert_close(tc(F.avg_pool2d(xm, **kw)), torch.nn.functional.avg_pool2d(xt, **kw))


def test_autocast_dtypes_match_torch():
    torch = _torch()
    x, w = mixprec.randn(1, 2, 5, 6), mixprec.randn(3, 2, 1, 3)
    xt, wt = torch.from_numpy(x.numpy().copy()), torch.from_numpy(w.numpy().copy())
    for xin, xtin in ((x, xt), (x.bfloat16(), xt.bfloat16())):
        with mixprec.autocast(device_type="cpu", dtype=mixprec.bfloat16), \
                torch.autocast("cpu", dtype=torch.bfloat16):
            pairs = [
                (F.conv2d(xin, w, stride=(2, 1), padding=(0, 1)),
                 torch.nn.functional.conv2d(xtin, wt, stride=(2, 1), padding=(0, 1))),
                (F.max_pool2d(xin, (1, 2), stride=(1, 2)), torch.nn.functional.max_pool2d(xtin, (1, 2), stride=(1, 2))),
                (F.avg_pool2d(xin, (2, 1), padding=(1, 0)),
                 torch.nn.functional.avg_pool2d(xtin, (2, 1), padding=(1, 0))),
            ]
        for ours, theirs in pairs:
            assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
            torch.testing.assert_close(torch.from_numpy(ours.float().detach().numpy().copy()), theirs.float(),
                                       rtol=2e-2, atol=2e-2)
