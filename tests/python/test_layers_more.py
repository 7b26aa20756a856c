"""The activations, shape/pad/pool layers, instance and local response norms, Bilinear, channel
dropouts and distances of mixprec.nn (activations.py, shape_layers.py, norm_layers.py,
pair_layers.py, dropout_layers.py, _functional_more.py): each forward against a NumPy float64
reference, each gradient against finite differences, then side by side with PyTorch 1.13
(outputs, gradients, state_dict names, errors, dtypes under bf16 autocast)."""
import math
import warnings

import numpy as np
import pytest

import mixprec
from mixprec import nn
from mixprec.nn import functional as F

from helpers import check_grad, rng

SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _softmin(x, dim):
    e = np.exp(-x - np.max(-x, axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _pixel_shuffle(x, r):
    n, c, h, w = x.shape
    return x.reshape(n, c // r // r, r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(n, c // r // r, h * r, w * r)


def _pixel_unshuffle(x, r):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // r, r, w // r, r).transpose(0, 1, 3, 5, 2, 4).reshape(n, c * r * r, h // r, w // r)


def _channel_shuffle(x, g):
    out = np.empty_like(x)
    c = x.shape[1]
    for j in range(c):  # output channel j = input channel (j % g) * (c / g) + j // g
        out[:, j] = x[:, (j % g) * (c // g) + j // g]
    return out


def _np_pad(x, pads, mode):
    widths = [(0, 0)] * x.ndim
    for i in range(len(pads) // 2):
        widths[x.ndim - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    return np.pad(x, widths, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])


def _max_pool1d(x, k, s, p, d=1, ceil=False):
    length = x.shape[-1]
    span = d * (k - 1) + 1
    num = length + 2 * p - span
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= length + p:
        out -= 1
    xp = np.concatenate([np.full(x.shape[:-1] + (p,), -np.inf), x, np.full(x.shape[:-1] + (span + s,), -np.inf)], -1)
    return np.stack([xp[..., i * s:i * s + span:d].max(-1) for i in range(out)], -1)


def _avg_pool1d(x, k, s, p, ceil=False, include_pad=True):
    length = x.shape[-1]
    num = length + 2 * p - k
    out = (-(-num // s) if ceil else num // s) + 1
    if ceil and (out - 1) * s >= length + p:
        out -= 1
    res = []
    for i in range(out):
        lo, hi = i * s - p, i * s - p + k
        inside = x[..., max(lo, 0):min(hi, length)].sum(-1)
        div = (min(hi, length + p) - max(lo, -p)) if include_pad else (min(hi, length) - max(lo, 0))
        res.append(inside / div)
    return np.stack(res, -1)


def _adaptive(x, out, op):
    length = x.shape[-1]
    return np.stack([op(x[..., (i * length) // out:-((-(i + 1) * length) // out)], -1) for i in range(out)], -1)


def _adaptive_max2d(x, oh, ow):
    return np.swapaxes(_adaptive(np.swapaxes(_adaptive(x, ow, np.max), -1, -2), oh, np.max), -1, -2)


def _instance_norm(x, w=None, b=None, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    out = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if w is not None:
        out = out * w.reshape(shape) + b.reshape(shape)
    return out


def _lrn(x, size, alpha=1e-4, beta=0.75, k=1.0):
    c = x.shape[1]
    sq = x * x
    div = np.zeros_like(x)
    for j in range(c):  # channels j - size // 2 .. j + (size - 1) // 2, zero outside
        lo, hi = max(j - size // 2, 0), min(j + (size - 1) // 2, c - 1)
        div[:, j] = sq[:, lo:hi + 1].sum(1)
    return x / (k + alpha * div / size) ** beta


def _pairwise(a, b, p, eps=1e-6):
    d = np.abs(a - b + eps)
    return d.max(-1) if p == math.inf else (d ** p).sum(-1) ** (1.0 / p)


R = rng(3)
X4 = R.standard_normal((2, 4, 3, 5))
X3 = R.standard_normal((2, 3, 7))
W3 = np.array([0.25, -0.5, 1.5])

# name: (mixprec-or-torch call fn(F, *tensors), NumPy float64 reference, inputs); the same
# call runs mixprec.nn.functional and torch.nn.functional in the side-by-side tests.
CASES = {
    "prelu_channels": (lambda F, x, w: F.prelu(x, w), lambda x, w: np.where(x > 0, x, w[None, :, None] * x), (X3, W3)),
    "prelu_one": (lambda F, x, w: F.prelu(x, w), lambda x, w: np.where(x > 0, x, w * x), (X4, np.array([0.3]))),
    "hardswish": (lambda F, x: F.hardswish(x * 3), lambda x: 3 * x * np.clip(3 * x + 3, 0, 6) / 6, (X4,)),
    "hardsigmoid": (lambda F, x: F.hardsigmoid(x * 3), lambda x: np.clip(x / 2 + 0.5, 0, 1), (X4,)),
    "selu": (lambda F, x: F.selu(x), lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)), (X4,)),
    "celu": (lambda F, x: F.celu(x, 0.7), lambda x: np.where(x > 0, x, 0.7 * np.expm1(x / 0.7)), (X4,)),
    "glu": (lambda F, x: F.glu(x, 1), lambda x: x[:, :2] * _sigmoid(x[:, 2:]), (X4,)),
    "glu_last": (lambda F, x: F.glu(x[..., :4]), lambda x: x[..., :2] * _sigmoid(x[..., 2:4]), (X4,)),
    "softsign": (lambda F, x: F.softsign(x), lambda x: x / (1 + np.abs(x)), (X4,)),
    "softmin": (lambda F, x: F.softmin(x, 1), lambda x: _softmin(x, 1), (X4,)),
    "tanhshrink": (lambda F, x: F.tanhshrink(x), lambda x: x - np.tanh(x), (X4,)),
    "threshold": (lambda F, x: F.threshold(x, 0.1, 20.0), lambda x: np.where(x > 0.1, x, 20.0), (X4,)),
    "logsigmoid": (lambda F, x: F.logsigmoid(x * 30), lambda x: -np.logaddexp(0, -30 * x), (X4,)),
    "pixel_shuffle": (lambda F, x: F.pixel_shuffle(x, 2), lambda x: _pixel_shuffle(x, 2), (X4,)),
    "pixel_unshuffle": (lambda F, x: F.pixel_unshuffle(x[..., :2, :4], 2), lambda x: _pixel_unshuffle(x[..., :2, :4], 2),
                        (X4,)),
    "channel_shuffle": (lambda F, x: F.channel_shuffle(x, 2), lambda x: _channel_shuffle(x, 2), (X4,)),
    "pad_reflect2d": (lambda F, x: F.pad(x, (2, 4, 1, 2), mode="reflect"), lambda x: _np_pad(x, (2, 4, 1, 2), "reflect"),
                      (X4,)),
    "pad_replicate2d": (lambda F, x: F.pad(x, (3, 1, 0, 2), mode="replicate"),
                        lambda x: _np_pad(x, (3, 1, 0, 2), "replicate"), (X4,)),
    "pad_circular1d": (lambda F, x: F.pad(x, (2, 3), mode="circular"), lambda x: _np_pad(x, (2, 3), "circular"), (X3,)),
    "pad_reflect1d": (lambda F, x: F.pad(x, (6, 1), mode="reflect"), lambda x: _np_pad(x, (6, 1), "reflect"), (X3,)),
    "pad_constant": (lambda F, x: F.pad(x, (1, 2, 2, 0), value=1.5),
                     lambda x: np.pad(x, [(0, 0), (0, 0), (2, 0), (1, 2)], constant_values=1.5), (X4,)),
    "max_pool1d": (lambda F, x: F.max_pool1d(x, 3, 2, 1), lambda x: _max_pool1d(x, 3, 2, 1), (X3,)),
    "max_pool1d_dilated_ceil": (lambda F, x: F.max_pool1d(x, 2, 2, 1, dilation=2, ceil_mode=True),
                                lambda x: _max_pool1d(x, 2, 2, 1, 2, True), (X3,)),
    "avg_pool1d": (lambda F, x: F.avg_pool1d(x, 3, 2, 1), lambda x: _avg_pool1d(x, 3, 2, 1), (X3,)),
    "avg_pool1d_exclude_ceil": (lambda F, x: F.avg_pool1d(x, 4, 3, 2, ceil_mode=True, count_include_pad=False),
                                lambda x: _avg_pool1d(x, 4, 3, 2, True, False), (X3,)),
    "avg_pool1d_ceil": (lambda F, x: F.avg_pool1d(x, 4, 3, 2, ceil_mode=True),
                        lambda x: _avg_pool1d(x, 4, 3, 2, True, True), (X3,)),
    "adaptive_avg_pool1d": (lambda F, x: F.adaptive_avg_pool1d(x, 3), lambda x: _adaptive(x, 3, np.mean), (X3,)),
    "adaptive_avg_pool1d_uneven": (lambda F, x: F.adaptive_avg_pool1d(x, 4), lambda x: _adaptive(x, 4, np.mean), (X3,)),
    "adaptive_max_pool1d": (lambda F, x: F.adaptive_max_pool1d(x, 4), lambda x: _adaptive(x, 4, np.max), (X3,)),
    "adaptive_max_pool2d": (lambda F, x: F.adaptive_max_pool2d(x, (2, 3)), lambda x: _adaptive_max2d(x, 2, 3), (X4,)),
    "adaptive_max_pool2d_none": (lambda F, x: F.adaptive_max_pool2d(x, (None, 2)), lambda x: _adaptive_max2d(x, 3, 2),
                                 (X4,)),
    "instance_norm": (lambda F, x: F.instance_norm(x), lambda x: _instance_norm(x), (X4,)),
    "instance_norm_affine": (lambda F, x, w, b: F.instance_norm(x, weight=w, bias=b),
                             lambda x, w, b: _instance_norm(x, w, b), (X3, W3, np.array([0.1, 0.2, -0.3]))),
    "local_response_norm": (lambda F, x: F.local_response_norm(x, 3, alpha=0.5, beta=0.6, k=1.5),
                            lambda x: _lrn(x, 3, 0.5, 0.6, 1.5), (X4,)),
    "local_response_norm_even": (lambda F, x: F.local_response_norm(x, 2, alpha=0.3), lambda x: _lrn(x, 2, 0.3), (X3,)),
    "bilinear": (lambda F, a, b, w, c: F.bilinear(a, b, w, c), lambda a, b, w, c: np.einsum("ni,oij,nj->no", a, w, b) + c,
                 (R.standard_normal((4, 3)), R.standard_normal((4, 2)), R.standard_normal((5, 3, 2)),
                  R.standard_normal(5))),
    "bilinear_3d": (lambda F, a, b, w: F.bilinear(a, b, w), lambda a, b, w: np.einsum("mni,oij,mnj->mno", a, w, b),
                    (R.standard_normal((2, 4, 3)), R.standard_normal((2, 4, 2)), R.standard_normal((5, 3, 2)))),
    "pairwise_distance": (lambda F, a, b: F.pairwise_distance(a, b), lambda a, b: _pairwise(a, b, 2), (X4, X4[::-1].copy())),
    "pairwise_distance_p1": (lambda F, a, b: F.pairwise_distance(a, b, 1.0), lambda a, b: _pairwise(a, b, 1),
                             (X3, X3[::-1].copy())),
    "pairwise_distance_p3": (lambda F, a, b: F.pairwise_distance(a, b, 3.0, keepdim=True),
                             lambda a, b: _pairwise(a, b, 3)[..., None], (X3, X3[::-1].copy())),
    "pairwise_distance_inf": (lambda F, a, b: F.pairwise_distance(a, b, math.inf), lambda a, b: _pairwise(a, b, math.inf),
                              (X3, X3[::-1].copy())),
}


def _mixprec(fn, arrays, dtype=mixprec.float64, requires_grad=False):
    leaves = [mixprec.tensor(a, dtype=dtype, requires_grad=requires_grad) for a in arrays]
    return fn(F, *leaves), leaves


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_numpy_float64(name):
    fn, reference, arrays = CASES[name]
    out, _ = _mixprec(fn, arrays)
    expected = reference(*arrays)
    assert tuple(out.shape) == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_float32_within_float32_accuracy(name):
    fn, reference, arrays = CASES[name]
    out, _ = _mixprec(fn, arrays, mixprec.float32)
    assert out.dtype == mixprec.float32
    np.testing.assert_allclose(out.numpy(), reference(*arrays), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_matches_finite_differences(name):
    fn, reference, arrays = CASES[name]
    check_grad(lambda *t: fn(F, *t), reference, *arrays, rtol=1e-5, atol=1e-7)


def test_gradients_at_the_kinks_are_pytorchs():
    """At the ends of hardswish/hardsigmoid's ramps and at 0 for logsigmoid and the others, the
    one-sided choice PyTorch makes (finite differences cannot check these points)."""
    x = mixprec.tensor([-3.0, 3.0, 0.0], dtype=mixprec.float64, requires_grad=True)
    F.hardswish(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-0.5, 1.5, 0.5])
    x = mixprec.tensor([-3.0, 3.0, 0.0], dtype=mixprec.float64, requires_grad=True)
    F.hardsigmoid(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0, 1 / 6])
    x = mixprec.tensor([0.0, -800.0, 800.0], dtype=mixprec.float64, requires_grad=True)
    out = F.logsigmoid(x)
    np.testing.assert_allclose(out.detach().numpy(), [-math.log(2), -800.0, 0.0])
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.5, 1.0, 0.0])
    x = mixprec.tensor([0.0, 1.0], dtype=mixprec.float64, requires_grad=True)
    F.prelu(x, mixprec.tensor([0.25], dtype=mixprec.float64)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.25, 1.0])


# ---- modules -------------------------------------------------------------------------------

def test_modules_call_their_functional_forms():
    x = mixprec.tensor(X4, dtype=mixprec.float64)
    pairs = [(nn.Hardswish(), F.hardswish), (nn.Hardsigmoid(), F.hardsigmoid), (nn.SELU(), F.selu),
             (nn.CELU(0.5), lambda t: F.celu(t, 0.5)), (nn.GLU(1), lambda t: F.glu(t, 1)), (nn.Softsign(), F.softsign),
             (nn.Softmin(2), lambda t: F.softmin(t, 2)), (nn.Tanhshrink(), F.tanhshrink), (nn.LogSigmoid(), F.logsigmoid),
             (nn.Threshold(0.2, -1.0), lambda t: F.threshold(t, 0.2, -1.0)),
             (nn.PixelShuffle(2), lambda t: F.pixel_shuffle(t, 2)), (nn.ChannelShuffle(2), lambda t: F.channel_shuffle(t, 2)),
             (nn.ZeroPad2d(1), lambda t: F.pad(t, (1, 1, 1, 1))), (nn.ConstantPad2d((1, 0, 2, 1), 3.0),
                                                                   lambda t: F.pad(t, (1, 0, 2, 1), value=3.0)),
             (nn.ConstantPad1d(2, -1.0), lambda t: F.pad(t, (2, 2), value=-1.0)),
             (nn.ReflectionPad2d(2), lambda t: F.pad(t, (2, 2, 2, 2), mode="reflect")),
             (nn.ReplicationPad2d((1, 2, 3, 0)), lambda t: F.pad(t, (1, 2, 3, 0), mode="replicate")),
             (nn.AdaptiveMaxPool2d(2), lambda t: F.adaptive_max_pool2d(t, 2)),
             (nn.InstanceNorm2d(4), F.instance_norm), (nn.LocalResponseNorm(2), lambda t: F.local_response_norm(t, 2))]
    for module, function in pairs:
        np.testing.assert_array_equal(module(x).detach().numpy(), function(x).numpy(), err_msg=type(module).__name__)
    y = mixprec.tensor(X3, dtype=mixprec.float64)
    for module, function in [(nn.MaxPool1d(3, 1, 1), lambda t: F.max_pool1d(t, 3, 1, 1)),
                             (nn.AvgPool1d(2), lambda t: F.avg_pool1d(t, 2)),
                             (nn.AdaptiveAvgPool1d(2), lambda t: F.adaptive_avg_pool1d(t, 2)),
                             (nn.AdaptiveMaxPool1d(5), lambda t: F.adaptive_max_pool1d(t, 5)),
                             (nn.ReflectionPad1d((2, 1)), lambda t: F.pad(t, (2, 1), mode="reflect")),
                             (nn.ReplicationPad1d(3), lambda t: F.pad(t, (3, 3), mode="replicate")),
                             (nn.InstanceNorm1d(3), F.instance_norm),
                             (nn.PReLU(3), lambda t: F.prelu(t, mixprec.tensor([0.25] * 3, dtype=mixprec.float64)))]:
        np.testing.assert_array_equal(module(y).detach().numpy(), function(y).numpy(), err_msg=type(module).__name__)


def test_unflatten_and_unbatched_inputs():
    x = mixprec.tensor(X4, dtype=mixprec.float64)
    assert nn.Unflatten(1, (2, 2))(x).shape == (2, 2, 2, 3, 5)
    assert nn.Unflatten(-1, (5, -1))(x).shape == (2, 4, 3, 5, 1)
    with pytest.raises(RuntimeError, match=r"unflatten: Provided sizes \[3, 2\] don't multiply up to the size of dim 1"):
        nn.Unflatten(1, (3, 2))(x)
    # InstanceNorm of an unbatched [C, H, W] input: as the batch of one.
    np.testing.assert_allclose(nn.InstanceNorm2d(4)(x[0]).numpy(), _instance_norm(X4[:1])[0], atol=1e-12)


def test_prelu_parameter_and_instance_norm_buffers():
    prelu = nn.PReLU(3, init=0.1)
    assert list(prelu.state_dict()) == ["weight"] and prelu.weight.shape == (3,)
    np.testing.assert_allclose(nn.PReLU().weight.detach().numpy(), [0.25])
    assert list(nn.InstanceNorm2d(3).state_dict()) == []
    norm = nn.InstanceNorm1d(3, affine=True, track_running_stats=True, momentum=0.2)
    assert list(norm.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    x = mixprec.tensor(X3, dtype=mixprec.float32)
    norm(x)
    instance_mean, instance_var = X3.mean(2), X3.var(2, ddof=1)
    np.testing.assert_allclose(norm.running_mean.numpy(), 0.2 * instance_mean.mean(0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(norm.running_var.numpy(), 0.8 + 0.2 * instance_var.mean(0), rtol=1e-5)
    norm.eval()  # the running stats normalise now
    expected = (X3 - norm.running_mean.numpy()[None, :, None]) / np.sqrt(norm.running_var.numpy()[None, :, None] + 1e-5)
    np.testing.assert_allclose(norm(x).detach().numpy(), expected, rtol=1e-5, atol=1e-6)


def test_bilinear_shapes_and_init():
    mixprec.manual_seed(0)
    layer = nn.Bilinear(16, 3, 5)
    assert list(layer.state_dict()) == ["weight", "bias"]
    assert layer.weight.shape == (5, 16, 3) and layer.bias.shape == (5,)
    w = layer.weight.detach().numpy()
    assert np.abs(w).max() <= 0.25 and np.abs(w).max() > 0.2 and abs(w.mean()) < 0.05
    assert nn.Bilinear(2, 3, 4, bias=False).bias is None
    a, b = mixprec.randn(7, 16), mixprec.randn(7, 3)
    assert layer(a, b).shape == (7, 5)


def test_distance_modules():
    a, b = mixprec.tensor(X3), mixprec.tensor(X3[::-1].copy())
    np.testing.assert_array_equal(nn.PairwiseDistance(p=1.0)(a, b).numpy(), F.pairwise_distance(a, b, 1.0).numpy())
    np.testing.assert_array_equal(nn.CosineSimilarity(dim=2)(a, b).numpy(), F.cosine_similarity(a, b, 2).numpy())


def test_dropout1d_and_alpha_dropout_statistics():
    mixprec.manual_seed(1)
    x = mixprec.ones(200, 50, 8)
    out = F.dropout1d(x, 0.3).numpy()
    per_channel = out[:, :, 0]
    assert np.all(out == per_channel[:, :, None])  # whole channels
    assert set(np.unique(per_channel)) <= {0.0, np.float32(1 / 0.7)}
    assert abs((per_channel == 0).mean() - 0.3) < 0.02
    assert np.array_equal(nn.Dropout1d(0.3).eval()(x).numpy(), x.numpy())
    assert F.dropout1d(mixprec.ones(5, 9), 0.5).shape == (5, 9)
    z = mixprec.randn(400, 500)
    out = F.alpha_dropout(z, 0.2, training=True).numpy()
    assert abs(out.mean()) < 0.01 and abs(out.std() - 1.0) < 0.01  # SELU's fixed point kept
    alpha_prime = -SELU_ALPHA * SELU_SCALE
    a = ((1 - 0.2) * (1 + 0.2 * alpha_prime ** 2)) ** -0.5
    dropped = np.isclose(out, a * alpha_prime - a * alpha_prime * 0.2, atol=1e-6)
    assert abs(dropped.mean() - 0.2) < 0.01
    assert F.alpha_dropout(z, 0.2) is z  # training=False is functional's default
    assert nn.AlphaDropout(0.2).eval()(z) is z


# ---- against PyTorch 1.13 --------------------------------------------------------------------

def _torch_case(torch, fn, arrays, dtype, requires_grad):
    leaves = [torch.tensor(a, dtype=dtype, requires_grad=requires_grad) for a in arrays]
    return fn(torch.nn.functional, *leaves), leaves


# PyTorch's float64 gradients of these round a constant to float32 (celu's 1 / alpha,
# hardsigmoid's 1 / 6): they agree with mixprec's to that constant's rounding only.
TORCH_GRAD_RTOL = {"celu": 1e-7, "hardsigmoid": 1e-7}


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_and_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    fn, _, arrays = CASES[name]
    out, leaves = _mixprec(fn, arrays, requires_grad=True)
    t_out, t_leaves = _torch_case(torch, fn, arrays, torch.float64, True)
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = rng(5).standard_normal(tuple(t_out.shape))
    out.backward(mixprec.tensor(w, dtype=mixprec.float64))
    if name == "channel_shuffle":  # torch 1.13: "derivative for channel_shuffle is not implemented"
        return
    t_out.backward(torch.tensor(w))
    for k, (leaf, t_leaf) in enumerate(zip(leaves, t_leaves)):
        np.testing.assert_allclose(leaf.grad.numpy(), t_leaf.grad.numpy(), rtol=TORCH_GRAD_RTOL.get(name, 1e-10),
                                   atol=1e-12, err_msg=f"gradient of input {k}")


# Where mixprec's output dtype under autocast(bfloat16) differs from torch.autocast('cpu')'s:
# (case, input dtype) -> (mixprec, torch). softmin is mixprec's softmax of -x, which mixprec's
# autocast runs in f32 (its documented softmax row); torch's local_response_norm of a 4-d
# input goes through avg_pool3d, an f32 op of its autocast (of a 3-d input, avg_pool2d: bf16),
# while mixprec's keeps the input's dtype for every rank. docs/python.md lists both.
AUTOCAST_DIFFERENCES = {
    ("softmin", "bfloat16"): ("float32", "bfloat16"),
    ("local_response_norm", "bfloat16"): ("bfloat16", "float32"),
}


def _autocast_dtypes(torch, name, input_dtype):
    fn, _, arrays = CASES[name]
    m_dtype = {"float32": mixprec.float32, "bfloat16": mixprec.bfloat16}[input_dtype]
    t_dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[input_dtype]
    with mixprec.autocast(dtype=mixprec.bfloat16):
        out, _ = _mixprec(fn, arrays, m_dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        try:
            t_out, _ = _torch_case(torch, fn, arrays, t_dtype, False)
            t_name = str(t_out.dtype).replace("torch.", "")
        except RuntimeError:
            t_name = "error"
    return str(out.dtype).replace("mixprec.", ""), t_name


def test_autocast_output_dtypes_match_torch_or_are_listed():
    torch = pytest.importorskip("torch")
    found = {}
    for name in sorted(CASES):
        for input_dtype in ("float32", "bfloat16"):
            ours, theirs = _autocast_dtypes(torch, name, input_dtype)
            if ours != theirs:
                found[(name, input_dtype)] = (ours, theirs)
    assert found == AUTOCAST_DIFFERENCES


def test_state_dict_names_and_defaults_match_torch():
    torch = pytest.importorskip("torch")
    pairs = [
        (nn.PReLU(), torch.nn.PReLU()), (nn.PReLU(4, 0.5), torch.nn.PReLU(4, 0.5)),
        (nn.InstanceNorm2d(3), torch.nn.InstanceNorm2d(3)),
        (nn.InstanceNorm1d(3, affine=True), torch.nn.InstanceNorm1d(3, affine=True)),
        (nn.InstanceNorm2d(3, track_running_stats=True), torch.nn.InstanceNorm2d(3, track_running_stats=True)),
        (nn.InstanceNorm2d(3, affine=True, track_running_stats=True),
         torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True)),
        (nn.Bilinear(2, 3, 4), torch.nn.Bilinear(2, 3, 4)), (nn.Bilinear(2, 3, 4, False), torch.nn.Bilinear(2, 3, 4, False)),
    ]
    for ours, theirs in pairs:
        ours_sd, theirs_sd = ours.state_dict(), theirs.state_dict()
        assert list(ours_sd) == list(theirs_sd), type(ours).__name__
        for key in ours_sd:
            assert tuple(ours_sd[key].shape) == tuple(theirs_sd[key].shape), key
            if "Bilinear" not in type(ours).__name__:  # the rest are constants
                np.testing.assert_array_equal(ours_sd[key].numpy(), theirs_sd[key].numpy(), err_msg=key)
    attributes = {"InstanceNorm2d": ("eps", "momentum", "affine", "track_running_stats"), "PReLU": ("num_parameters",),
                  "MaxPool1d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode"),
                  "AvgPool1d": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"),
                  "LocalResponseNorm": ("size", "alpha", "beta", "k"), "CELU": ("alpha",), "GLU": ("dim",),
                  "PairwiseDistance": ("norm", "eps", "keepdim"), "CosineSimilarity": ("dim", "eps"),
                  "Threshold": ("threshold", "value"), "PixelShuffle": ("upscale_factor",),
                  "ReflectionPad2d": ("padding",), "ZeroPad2d": ("padding",), "ConstantPad1d": ("padding", "value"),
                  "AlphaDropout": ("p",), "Dropout1d": ("p",)}
    args = {"InstanceNorm2d": (3,), "PReLU": (), "MaxPool1d": (3,), "AvgPool1d": (3,), "LocalResponseNorm": (2,),
            "CELU": (), "GLU": (), "PairwiseDistance": (), "CosineSimilarity": (), "Threshold": (0.5, 2.0),
            "PixelShuffle": (2,), "ReflectionPad2d": (2,), "ZeroPad2d": (1,), "ConstantPad1d": (2, 1.5),
            "AlphaDropout": (), "Dropout1d": ()}
    for cls, names in attributes.items():
        ours, theirs = getattr(nn, cls)(*args[cls]), getattr(torch.nn, cls)(*args[cls])
        for attr in names:
            assert getattr(ours, attr) == getattr(theirs, attr), f"{cls}.{attr}"


def test_instance_norm_running_stats_match_torch():
    torch = pytest.importorskip("torch")
    ours = nn.InstanceNorm2d(4, affine=True, track_running_stats=True, momentum=0.3).double()
    theirs = torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True, momentum=0.3).double()
    for step in range(2):
        x = rng(step).standard_normal((3, 4, 2, 5))
        ours(mixprec.tensor(x, dtype=mixprec.float64))
        theirs(torch.tensor(x))
    for key in ("running_mean", "running_var", "num_batches_tracked"):
        np.testing.assert_allclose(ours.state_dict()[key].numpy(), theirs.state_dict()[key].numpy(), rtol=1e-12)
    ours.eval(), theirs.eval()
    x = rng(7).standard_normal((3, 4, 2, 5))
    np.testing.assert_allclose(ours(mixprec.tensor(x, dtype=mixprec.float64)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-12, atol=1e-12)


# (call on F and tensors, inputs, exact message or None for the type only)
ERRORS = [
    (lambda F, x, w: F.prelu(x, w), (X4, np.ones(3)), True),
    (lambda F, x, w: F.prelu(x, w), (X4, np.ones((4, 1))), True),
    (lambda F, x: F.glu(x[:, :3], 1), (X4,), True),
    (lambda F, x: F.celu(x, 0.0), (X4,), True),
    (lambda F, x: F.pixel_shuffle(x, 2), (X4[:, :3],), True),
    (lambda F, x: F.pixel_shuffle(x, 0), (X4,), True),
    (lambda F, x: F.pixel_shuffle(x, 2), (X4[0, 0],), True),
    (lambda F, x: F.pixel_unshuffle(x, 2), (X4,), True),
    (lambda F, x: F.channel_shuffle(x, 3), (X4,), True),
    (lambda F, x: F.pad(x, (4, 4, 1, 1), mode="reflect"), (X4[..., :4],), True),
    (lambda F, x: F.pad(x, (1, 1, 1, 1), mode="reflect"), (X4[0, 0],), True),
    (lambda F, x: F.pad(x, (1, 1), mode="replicate"), (X4,), True),
    (lambda F, x: F.pad(x, (1, 1), mode="foo"), (X4,), True),
    (lambda F, x: F.pad(x, (1, 1, 1)), (X4,), True),
    (lambda F, x: F.max_pool1d(x, 3, padding=2), (X3,), True),
    (lambda F, x: F.max_pool1d(x, 2), (X4,), True),
    (lambda F, x: F.avg_pool1d(x, 3, padding=2), (X3,), True),
    (lambda F, x: F.avg_pool1d(x, 2), (X4,), True),
    (lambda F, x: F.adaptive_max_pool2d(x, 2), (X4[0, 0],), True),
    (lambda F, x: F.adaptive_avg_pool1d(x, 2), (X4,), True),
    (lambda F, a, b, w: F.bilinear(a, b, w), (np.ones((2, 3)), np.ones((2, 5)), np.ones((4, 3, 4))), True),
    (lambda F, a, b, w: F.bilinear(a, b, w), (np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 3, 4))), True),
    (lambda F, x: F.dropout1d(x), (X4,), True),
    (lambda F, x: F.alpha_dropout(x, 1.5, True), (X4,), True),
    (lambda F, x: F.local_response_norm(x, 2), (X4[0, 0],), False),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_errors_match_torch(index):
    torch = pytest.importorskip("torch")
    fn, arrays, same_message = ERRORS[index]
    with pytest.raises(Exception) as theirs:
        fn(torch.nn.functional, *[torch.tensor(a) for a in arrays])
    with pytest.raises(type(theirs.value)) as ours:
        fn(F, *[mixprec.tensor(a) for a in arrays])
    if same_message:
        assert str(ours.value) == str(theirs.value).splitlines()[0]


def test_module_errors_match_torch():
    torch = pytest.importorskip("torch")
    for make, x in [(lambda m: m.InstanceNorm2d(3), np.ones((2, 3))), (lambda m: m.InstanceNorm1d(3), X4),
                    (lambda m: m.InstanceNorm2d(4, affine=True), X4[:, :3]),
                    (lambda m: m.InstanceNorm1d(3), np.ones((2, 3, 1))), (lambda m: m.AlphaDropout(1.5), None),
                    (lambda m: m.Dropout1d(-0.1), None), (lambda m: m.Unflatten(1, (2, 2)), np.ones((2, 3)))]:
        with pytest.raises(Exception) as theirs:
            module = make(torch.nn)
            module(torch.tensor(x))
        with pytest.raises(type(theirs.value)) as ours:
            module = make(nn)
            module(mixprec.tensor(x))
        assert str(ours.value) == str(theirs.value).splitlines()[0].replace("torch.Size(", "").replace("])", "]")


def test_softmin_without_dim_warns_and_picks_torchs_dim():
    torch = pytest.importorskip("torch")
    for shape in [(5,), (2, 5), (2, 3, 4), (2, 3, 4, 5)]:
        x = rng(1).standard_normal(shape)
        with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
            ours = F.softmin(mixprec.tensor(x, dtype=mixprec.float64))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = torch.nn.functional.softmin(torch.tensor(x))
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)
