"""mixprec.nn.init against PyTorch 1.13's formulas: gains and fans (hand-computed), the
distributions (fixed seeds, large tensors, tight statistical tolerances), in-place writes
without autograd, the errors, and the side by side with torch where it is installed."""
import math
import warnings

import numpy as np
import pytest

import mixprec
import mixprec.nn as nn
import mixprec.nn.init as init
from helpers import as_f64

SQRT2 = math.sqrt(2.0)

RANDOM_INITS = {
    "uniform_": lambda t: init.uniform_(t, -0.5, 1.5),
    "normal_": lambda t: init.normal_(t, 0.1, 0.3),
    "trunc_normal_": lambda t: init.trunc_normal_(t, std=0.5),
    "xavier_uniform_": init.xavier_uniform_,
    "xavier_normal_": init.xavier_normal_,
    "kaiming_uniform_": init.kaiming_uniform_,
    "kaiming_normal_": init.kaiming_normal_,
    "orthogonal_": init.orthogonal_,
}
FIXED_INITS = {
    "constant_": lambda t: init.constant_(t, 0.25),
    "ones_": init.ones_,
    "zeros_": init.zeros_,
    "eye_": init.eye_,
}


def values(t):
    return as_f64(t).reshape(-1)


def drawn(fn, shape, seed=0, dtype=mixprec.float32):
    mixprec.manual_seed(seed)
    t = mixprec.empty(*shape, dtype=dtype)
    assert fn(t) is t
    return t


# ---- gains and fans -----------------------------------------------------------------------

def test_calculate_gain_follows_pytorchs_table():
    for name in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid"):
        assert init.calculate_gain(name) == 1
    assert init.calculate_gain("tanh") == 5.0 / 3
    assert init.calculate_gain("relu") == SQRT2
    assert init.calculate_gain("selu") == 0.75
    assert init.calculate_gain("leaky_relu") == math.sqrt(2.0 / (1 + 0.01 ** 2))  # negative_slope 0.01
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2.0 / 1.04)
    assert init.calculate_gain("leaky_relu", 0) == SQRT2  # kaiming_*'s default a=0
    assert init.calculate_gain("leaky_relu", 1) == 1.0
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == math.sqrt(2.0 / 6.0)  # nn.Linear's a
    assert init.calculate_gain("relu", 123) == SQRT2  # param only used by leaky_relu


def test_calculate_gain_errors():
    with pytest.raises(ValueError, match="^Unsupported nonlinearity gelu$"):
        init.calculate_gain("gelu")
    with pytest.raises(ValueError, match="^Unsupported nonlinearity Tanh$"):
        init.calculate_gain("Tanh")
    for bad in (True, "0.2", [0.2]):
        with pytest.raises(ValueError, match=r"^negative_slope .* not a valid number$"):
            init.calculate_gain("leaky_relu", bad)


@pytest.mark.parametrize("shape, fans", [
    ((3, 5), (5, 3)),              # Linear(5, 3): (out, in)
    ((7, 1), (1, 7)),
    ((4, 2, 3), (6, 12)),          # Conv1d(2, 4, 3)
    ((16, 3, 5, 5), (75, 400)),    # Conv2d(3, 16, 5)
    ((8, 4, 3, 1), (12, 24)),
    ((2, 3, 4, 5, 6), (360, 240)),  # Conv3d(3, 2, (4, 5, 6))
    ((0, 3), (3, 0)),
    ((5, 0, 3), (0, 15)),
])
def test_fan_in_and_fan_out(shape, fans):
    assert init._calculate_fan_in_and_fan_out(mixprec.empty(*shape)) == fans
    assert init._calculate_correct_fan(mixprec.empty(*shape), "fan_in") == fans[0]
    assert init._calculate_correct_fan(mixprec.empty(*shape), "FAN_OUT") == fans[1]


def test_fans_of_fewer_than_2_dims_are_an_error():
    message = "^Fan in and fan out can not be computed for tensor with fewer than 2 dimensions$"
    for t in (mixprec.empty(5), mixprec.tensor(1.0)):
        for fn in (init._calculate_fan_in_and_fan_out, init.xavier_uniform_, init.xavier_normal_,
                   init.kaiming_uniform_, init.kaiming_normal_):
            with pytest.raises(ValueError, match=message):
                fn(t)


def test_kaiming_mode_errors():
    w = mixprec.empty(3, 4)
    with pytest.raises(ValueError, match=r"^Mode fan_avg not supported, please use one of \['fan_in', 'fan_out'\]$"):
        init.kaiming_uniform_(w, mode="FAN_AVG")  # reported lowercased, as PyTorch does
    with pytest.raises(ValueError, match="^Mode fan not supported"):
        init.kaiming_normal_(w, mode="fan")
    with pytest.raises(ValueError, match="^Unsupported nonlinearity softmax$"):
        init.kaiming_normal_(w, nonlinearity="softmax")


# ---- distributions --------------------------------------------------------------------------

def test_uniform_and_normal_distributions():
    v = values(drawn(lambda t: init.uniform_(t, -3.0, 5.0), (400, 500)))
    assert v.min() >= -3.0 and v.max() <= 5.0 and v.max() > 4.999 and v.min() < -2.999
    assert abs(v.mean() - 1.0) < 0.02 and abs(v.std() / (8 / math.sqrt(12)) - 1) < 0.01
    v = values(drawn(init.uniform_, (200, 500)))  # defaults: U(0, 1)
    assert v.min() >= 0.0 and v.max() <= 1.0 and abs(v.mean() - 0.5) < 0.005
    v = values(drawn(lambda t: init.normal_(t, 2.0, 0.5), (400, 500)))
    assert abs(v.mean() - 2.0) < 0.005 and abs(v.std() / 0.5 - 1) < 0.01
    v = values(drawn(init.normal_, (200, 500)))  # defaults: N(0, 1)
    assert abs(v.mean()) < 0.01 and abs(v.std() - 1) < 0.01
    assert np.all(values(drawn(lambda t: init.normal_(t, 0.75, 0.0), (3, 4))) == 0.75)


def test_xavier_uniform_bound_is_exact_and_holds():
    gain = init.calculate_gain("tanh")
    bound = gain * math.sqrt(6.0 / (256 + 512))
    v = values(drawn(lambda t: init.xavier_uniform_(t, gain=gain), (256, 512)))  # 131072 values
    assert np.all(np.abs(v) <= np.float32(bound))
    assert np.abs(v).max() > 0.9999 * bound and v.min() < -0.9999 * bound  # the bound is reached
    assert abs(v.mean()) < 0.01 * bound and abs(v.std() / (bound / math.sqrt(3)) - 1) < 0.01
    # a convolution's fans count its receptive field
    bound = math.sqrt(6.0 / (32 * 9 + 64 * 9))
    v = values(drawn(init.xavier_uniform_, (64, 32, 3, 3)))
    assert np.all(np.abs(v) <= np.float32(bound)) and np.abs(v).max() > 0.999 * bound


def test_xavier_normal_std():
    std = 2.0 * math.sqrt(2.0 / (300 + 400))
    v = values(drawn(lambda t: init.xavier_normal_(t, gain=2.0), (300, 400)))
    assert abs(v.std() / std - 1) < 0.02 and abs(v.mean()) < 0.01 * std


@pytest.mark.parametrize("kwargs, gain", [
    ({}, SQRT2),  # leaky_relu with a=0
    ({"nonlinearity": "relu"}, SQRT2),
    ({"a": 0.2}, math.sqrt(2.0 / 1.04)),
    ({"nonlinearity": "tanh"}, 5.0 / 3),
    ({"nonlinearity": "linear"}, 1.0),
])
@pytest.mark.parametrize("mode, fan", [("fan_in", 32 * 49), ("fan_out", 64 * 49)])
def test_kaiming_normal_std(kwargs, gain, mode, fan):
    v = values(drawn(lambda t: init.kaiming_normal_(t, mode=mode, **kwargs), (64, 32, 7, 7)))  # 100352 values
    std = gain / math.sqrt(fan)
    assert abs(v.std() / std - 1) < 0.02 and abs(v.mean()) < 0.02 * std


def test_kaiming_uniform_bound():
    # nn.Linear's own init (a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    v = values(drawn(lambda t: init.kaiming_uniform_(t, a=math.sqrt(5)), (400, 300)))
    bound = 1 / math.sqrt(300)
    assert np.all(np.abs(v) <= np.float32(bound)) and np.abs(v).max() > 0.9999 * bound
    assert abs(v.std() / (bound / math.sqrt(3)) - 1) < 0.01
    bound = SQRT2 * math.sqrt(3.0 / (128 * 9))
    v = values(drawn(lambda t: init.kaiming_uniform_(t, mode="fan_out", nonlinearity="relu"), (128, 96, 3, 3)))
    assert np.all(np.abs(v) <= np.float32(bound)) and np.abs(v).max() > 0.9999 * bound


def _truncated_normal_moments(mean, std, a, b):
    """Mean and std of N(mean, std^2) truncated to [a, b] (closed form)."""
    alpha, beta = (a - mean) / std, (b - mean) / std
    pdf = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: 0.5 * math.erfc(-x / SQRT2)  # noqa: E731
    z = cdf(beta) - cdf(alpha)
    m = (pdf(alpha) - pdf(beta)) / z
    var = 1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - m * m
    return mean + std * m, std * math.sqrt(var)


@pytest.mark.parametrize("mean, std, a, b", [
    (0.0, 1.0, -2.0, 2.0),   # the defaults
    (0.0, 0.02, -2.0, 2.0),  # trunc_normal_(w, std=.02): ViT-style, the bounds 100 std away
    (0.5, 1.0, -1.0, 1.0),
    (1.0, 2.0, 0.0, 10.0),
])
def test_trunc_normal_inside_bounds_with_the_truncated_moments(mean, std, a, b):
    v = values(drawn(lambda t: init.trunc_normal_(t, mean, std, a, b), (400, 500)))
    assert v.min() >= a and v.max() <= b
    want_mean, want_std = _truncated_normal_moments(mean, std, a, b)
    assert abs(v.mean() - want_mean) < 0.01 * want_std and abs(v.std() / want_std - 1) < 0.01


def test_trunc_normal_defaults_and_warning():
    v = values(drawn(init.trunc_normal_, (400, 300)))
    assert v.min() >= -2.0 and v.max() <= 2.0 and v.max() > 1.99 and v.min() < -1.99
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        v = values(drawn(lambda t: init.trunc_normal_(t, mean=5.0, std=1.0, a=-1.0, b=1.0), (100, 100)))
    assert v.min() >= -1.0 and v.max() <= 1.0 and not np.isnan(v).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        init.trunc_normal_(mixprec.empty(10, 10), mean=0.5, a=0.0, b=1.0)


def test_normal_quantile_inverts_the_normal_cdf():
    p = np.concatenate([np.linspace(1e-9, 1 - 1e-9, 20001), np.logspace(-300, -2, 200), 1 - np.logspace(-12, -2, 200)])
    x = init._normal_quantile(p)
    lower = np.array([0.5 * math.erfc(-t / SQRT2) for t in x])   # P(X <= x)
    upper = np.array([0.5 * math.erfc(t / SQRT2) for t in x])    # P(X > x), precise in the upper tail
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    error_in_x = np.where(p < 0.5, np.abs(lower - p), np.abs(upper - (1 - p))) / pdf
    assert np.all(error_in_x <= 2e-9 * np.maximum(np.abs(x), 1.0))
    assert list(init._normal_quantile(np.array([0.0, 0.5, 1.0]))) == [-np.inf, 0.0, np.inf]


def test_orthogonal_rows_or_columns_are_orthonormal():
    w = as_f64(drawn(init.orthogonal_, (6, 10)))
    np.testing.assert_allclose(w @ w.T, np.eye(6), atol=1e-6)
    w = as_f64(drawn(init.orthogonal_, (10, 6)))
    np.testing.assert_allclose(w.T @ w, np.eye(6), atol=1e-6)
    w = as_f64(drawn(lambda t: init.orthogonal_(t, gain=2.0), (8, 2, 3, 3))).reshape(8, 18)  # trailing dims flattened
    np.testing.assert_allclose(w @ w.T, 4 * np.eye(8), atol=1e-5)
    w = as_f64(drawn(init.orthogonal_, (64, 64), dtype=mixprec.bfloat16))
    np.testing.assert_allclose(w @ w.T, np.eye(64), atol=0.03)
    assert init.orthogonal_(mixprec.empty(0, 3)).shape == (0, 3)
    with pytest.raises(ValueError, match="^Only tensors with 2 or more dimensions are supported$"):
        init.orthogonal_(mixprec.empty(4))


def test_orthogonal_draws_are_uniform_over_signs():
    # Without R's sign fix the QR's diagonal convention would bias Q's diagonal; with it, its mean is ~0.
    diagonals = [np.diag(as_f64(drawn(init.orthogonal_, (4, 4), seed=s))) for s in range(400)]
    assert np.all(np.abs(np.mean(diagonals, axis=0)) < 0.1)


# ---- fills ---------------------------------------------------------------------------------

def test_constant_ones_zeros_eye():
    for dt in (mixprec.float32, mixprec.bfloat16, mixprec.float16, mixprec.float64):
        t = mixprec.empty(3, 4, dtype=dt)
        assert init.constant_(t, 0.25) is t and t.dtype == dt and np.all(values(t) == 0.25)
        assert init.ones_(t) is t and np.all(values(t) == 1.0)
        assert init.zeros_(t) is t and np.all(values(t) == 0.0)
        assert init.eye_(t) is t and np.array_equal(as_f64(t), np.eye(3, 4))
    assert np.array_equal(as_f64(init.eye_(mixprec.empty(5, 2))), np.eye(5, 2))
    t = init.constant_(mixprec.zeros(2, 3, dtype=mixprec.int64), 7)
    assert t.dtype == mixprec.int64 and t.tolist() == [[7] * 3] * 2
    assert init.constant_(mixprec.empty(2, 2, 2), -1.5).tolist() == [[[-1.5] * 2] * 2] * 2
    with pytest.raises(ValueError, match="^Only tensors with 2 dimensions are supported$"):
        init.eye_(mixprec.empty(2, 2, 2))
    with pytest.raises(ValueError, match="^Only tensors with 2 dimensions are supported$"):
        init.eye_(mixprec.empty(4))


def test_writes_through_views_reach_the_base_tensor():
    base = mixprec.zeros(4, 6)
    init.eye_(base.t())
    np.testing.assert_array_equal(base.numpy(), np.eye(6, 4).T)
    init.constant_(base[1:3], 2.5)
    init.uniform_(base[:, ::2], 5.0, 6.0)
    v = base.numpy()
    assert np.all((v[:, ::2] >= 5.0) & (v[:, ::2] <= 6.0))
    np.testing.assert_array_equal(v[1:3, 1::2], 2.5)
    np.testing.assert_array_equal(v[[0, 3]][:, 1::2], np.eye(6, 4).T[[0, 3]][:, 1::2])


# ---- dtypes, seeds, autograd, errors --------------------------------------------------------

@pytest.mark.parametrize("dt, ulp", [(mixprec.bfloat16, 2.0 ** -8), (mixprec.float16, 2.0 ** -11),
                                     (mixprec.float64, 0.0)])
def test_low_and_double_precision(dt, ulp):
    bound = math.sqrt(6.0 / 600)
    t = drawn(init.xavier_uniform_, (200, 400), dtype=dt)
    v = values(t)
    assert t.dtype == dt and np.all(np.abs(v) <= bound * (1 + ulp))  # one rounding from the double draw
    assert abs(v.std() / (bound / math.sqrt(3)) - 1) < 0.01
    std = SQRT2 / math.sqrt(400)
    v = values(drawn(lambda w: init.kaiming_normal_(w, nonlinearity="relu"), (300, 400), dtype=dt))
    assert abs(v.std() / std - 1) < 0.02
    v = values(drawn(lambda w: init.trunc_normal_(w, std=0.02), (300, 400), dtype=dt))
    assert v.min() >= -2.0 and v.max() <= 2.0 and abs(v.std() / 0.02 - 1) < 0.02
    v = values(drawn(lambda w: init.uniform_(w, -1.0, 1.0), (300, 400), dtype=dt))
    assert v.min() >= -1.0 and v.max() <= 1.0 and abs(v.mean()) < 0.01


@pytest.mark.parametrize("name", sorted(RANDOM_INITS))
def test_reproducible_under_manual_seed(name):
    fn = RANDOM_INITS[name]
    first = values(drawn(fn, (20, 30), seed=1234))
    again = values(drawn(fn, (20, 30), seed=1234))
    other = values(drawn(fn, (20, 30), seed=1235))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    # the stream moves on: a second draw after the same seed differs from the first
    mixprec.manual_seed(1234)
    a, b = mixprec.empty(20, 30), mixprec.empty(20, 30)
    fn(a)
    fn(b)
    np.testing.assert_array_equal(values(a), first)
    assert not np.array_equal(values(b), first)


@pytest.mark.parametrize("name", sorted({**RANDOM_INITS, **FIXED_INITS}))
def test_in_place_on_a_parameter_without_autograd(name):
    fn = {**RANDOM_INITS, **FIXED_INITS}[name]
    p = nn.Parameter(mixprec.full((6, 5), 9.0))
    assert mixprec.is_grad_enabled()
    out = fn(p)
    assert out is p and isinstance(p, nn.Parameter)
    assert p.requires_grad and p.is_leaf and p.grad is None
    assert mixprec.is_grad_enabled()  # the no_grad scope is left
    assert not np.any(values(p) == 9.0)
    # still a trainable leaf: a backward reaches it
    (p * mixprec.full((6, 5), 2.0)).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.full((6, 5), 2.0, np.float32))


def test_errors_of_the_draws():
    with pytest.raises(RuntimeError,
                       match=r"^uniform_ expects to return a \[from, to\) range, but found from=1 > to=0$"):
        init.uniform_(mixprec.empty(3), 1.0, 0.0)
    # trunc_normal_ checks its uniform range, 2 cdf(a) - 1 > 2 cdf(b) - 1 here
    with pytest.raises(RuntimeError, match=r"found from=0.682689 > to=0$"):
        init.trunc_normal_(mixprec.empty(3), a=1.0, b=0.0)
    with pytest.raises(RuntimeError, match=r"^normal expects std >= 0.0, but found std -1$"):
        init.normal_(mixprec.empty(3), 0.0, -1.0)
    with pytest.raises(RuntimeError, match="^\"check_uniform_bounds\" not implemented for 'Long'$"):
        init.uniform_(mixprec.zeros(3, dtype=mixprec.int64))
    with pytest.raises(RuntimeError, match="^\"check_uniform_bounds\" not implemented for 'Long'$"):
        init.kaiming_uniform_(mixprec.zeros(3, 3, dtype=mixprec.int64))
    with pytest.raises(RuntimeError, match="^\"normal_kernel_cpu\" not implemented for 'Int'$"):
        init.xavier_normal_(mixprec.zeros(3, 3, dtype=mixprec.int32))


def test_zero_element_tensors():
    for fn in (init.kaiming_uniform_, init.kaiming_normal_):
        t = mixprec.empty(0, 3)
        with pytest.warns(UserWarning, match="^Initializing zero-element tensors is a no-op$"):
            assert fn(t, mode="not even checked") is t
    t = mixprec.empty(0, 4)
    for fn in (init.uniform_, init.normal_, init.trunc_normal_, init.xavier_uniform_, init.zeros_, init.eye_):
        assert fn(t) is t and t.shape == (0, 4)


# ---- the way scripts use it ----------------------------------------------------------------

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc1 = nn.Linear(8 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, 32)
        self.head = nn.Linear(32, 5)

    def forward(self, x):
        h = self.conv(x).relu().flatten(1)
        return self.head(self.fc2(self.fc1(h).relu()))


def test_initialising_a_model_through_its_modules():
    mixprec.manual_seed(0)
    model = Net()
    x = mixprec.randn(4, 3, 4, 4)
    model(x)  # a forward first: whatever the engine derives from the weights is now cached
    for m in model.modules():  # what model.apply(fn) does, module by module
        if isinstance(m, nn.Conv2d):
            init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            init.xavier_uniform_(m.weight)
            init.constant_(m.bias, 0.01)
    init.eye_(model.fc2.weight)
    init.zeros_(model.fc2.bias)
    w = as_f64(model.conv.weight)
    assert abs(w.std() / (SQRT2 / math.sqrt(8 * 9)) - 1) < 0.3 and np.all(as_f64(model.conv.bias) == 0)
    bound = math.sqrt(6.0 / (128 + 32))
    assert np.all(np.abs(as_f64(model.fc1.weight)) <= np.float32(bound))
    assert np.all(as_f64(model.head.bias) == np.float32(0.01))
    for p in model.parameters():
        assert p.is_leaf and p.requires_grad and p.grad is None

    # the forward sees the new values: fc2 is now the identity
    h = model.fc1(model.conv(x).relu().flatten(1)).relu()
    np.testing.assert_allclose(model.fc2(h).detach().numpy(), h.detach().numpy(), rtol=1e-6, atol=1e-6)
    with mixprec.autocast("cpu", dtype=mixprec.bfloat16):
        np.testing.assert_allclose(as_f64(model.fc2(h)), as_f64(h), rtol=2 ** -7, atol=1e-6)
    out = model(x)
    want = as_f64(h) @ as_f64(model.head.weight).T + 0.01
    np.testing.assert_allclose(as_f64(out), want, rtol=1e-5, atol=1e-5)

    # and trains
    out.sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape, name


def test_reinitialising_an_engine_linear_changes_its_output():
    mixprec.manual_seed(3)
    layer = nn.Linear(16, 8)
    x = mixprec.randn(5, 16)
    before = as_f64(layer(x))
    init.kaiming_uniform_(layer.weight, a=math.sqrt(5))  # nn.Linear's own scheme, fresh values
    init.uniform_(layer.bias, -0.25, 0.25)
    after = as_f64(layer(x))
    assert not np.allclose(before, after)
    np.testing.assert_allclose(after, as_f64(x) @ as_f64(layer.weight).T + as_f64(layer.bias), rtol=1e-5, atol=1e-6)


# ---- side by side with torch ----------------------------------------------------------------

def test_side_by_side_with_torch():
    torch = pytest.importorskip("torch")
    tinit = torch.nn.init
    for name in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                 "conv_transpose3d", "sigmoid", "tanh", "relu", "leaky_relu", "selu"):
        ours, theirs = init.calculate_gain(name), tinit.calculate_gain(name)
        assert ours == theirs and type(ours) is type(theirs), name
    for param in (None, 0, 1, 3, 0.2, 0.01, math.sqrt(5), np.float64(0.3)):
        assert init.calculate_gain("leaky_relu", param) == tinit.calculate_gain("leaky_relu", param), param
    for name, param in (("gelu", None), ("leaky_relu", True), ("leaky_relu", "0.1"), ("leaky_relu", np.float32(0.1))):
        with pytest.raises(ValueError) as ours:
            init.calculate_gain(name, param)
        with pytest.raises(ValueError) as theirs:
            tinit.calculate_gain(name, param)
        assert str(ours.value) == str(theirs.value)

    for shape in ((3, 5), (7, 1), (4, 2, 3), (16, 3, 5, 5), (2, 3, 4, 5, 6), (0, 3), (5, 0, 3)):
        assert (init._calculate_fan_in_and_fan_out(mixprec.empty(*shape))
                == tinit._calculate_fan_in_and_fan_out(torch.empty(*shape))), shape
        for mode in ("fan_in", "fan_out", "Fan_Out"):
            assert (init._calculate_correct_fan(mixprec.empty(*shape), mode)
                    == tinit._calculate_correct_fan(torch.empty(*shape), mode))

    def same_error(ours, theirs, error):
        with pytest.raises(error) as a:
            ours()
        with pytest.raises(error) as b:
            theirs()
        assert str(a.value) == str(b.value)

    same_error(lambda: init.xavier_uniform_(mixprec.empty(4)), lambda: tinit.xavier_uniform_(torch.empty(4)),
               ValueError)
    same_error(lambda: init.kaiming_normal_(mixprec.empty(2, 3), mode="avg"),
               lambda: tinit.kaiming_normal_(torch.empty(2, 3), mode="avg"), ValueError)
    same_error(lambda: init.eye_(mixprec.empty(2, 3, 4)), lambda: tinit.eye_(torch.empty(2, 3, 4)), ValueError)
    same_error(lambda: init.orthogonal_(mixprec.empty(3)), lambda: tinit.orthogonal_(torch.empty(3)), ValueError)
    same_error(lambda: init.uniform_(mixprec.empty(3), 2.5, -1), lambda: tinit.uniform_(torch.empty(3), 2.5, -1),
               RuntimeError)
    same_error(lambda: init.trunc_normal_(mixprec.empty(3), a=1.5, b=-0.5),
               lambda: tinit.trunc_normal_(torch.empty(3), a=1.5, b=-0.5), RuntimeError)
    same_error(lambda: init.normal_(mixprec.empty(3), 0, -0.5), lambda: tinit.normal_(torch.empty(3), 0, -0.5),
               RuntimeError)
    same_error(lambda: init.uniform_(mixprec.zeros(3, dtype=mixprec.int64)),
               lambda: tinit.uniform_(torch.zeros(3, dtype=torch.int64)), RuntimeError)

    # the deterministic fills give torch's values
    for shape in ((3, 5), (5, 3), (4, 4)):
        assert as_f64(init.eye_(mixprec.empty(*shape))).tolist() == tinit.eye_(torch.empty(*shape)).double().tolist()
    assert init.constant_(mixprec.empty(2, 3), 0.3).tolist() == tinit.constant_(torch.empty(2, 3), 0.3).tolist()

    # the random ones: the same bounds and spreads (not the same numbers: another generator)
    torch.manual_seed(0)
    for fn, kwargs in (("xavier_uniform_", {"gain": 1.5}), ("kaiming_uniform_", {"a": math.sqrt(5)}),
                       ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"})):
        ours = values(drawn(lambda t: getattr(init, fn)(t, **kwargs), (64, 32, 3, 3)))
        theirs = getattr(tinit, fn)(torch.empty(64, 32, 3, 3), **kwargs).double().numpy().reshape(-1)
        assert abs(np.abs(ours).max() / np.abs(theirs).max() - 1) < 1e-3, (fn, kwargs)
    for fn, kwargs in (("xavier_normal_", {}), ("kaiming_normal_", {"nonlinearity": "relu"}),
                       ("trunc_normal_", {"std": 0.5, "a": -0.6, "b": 1.0})):
        ours = values(drawn(lambda t: getattr(init, fn)(t, **kwargs), (64, 32, 7, 7)))
        theirs = getattr(tinit, fn)(torch.empty(64, 32, 7, 7), **kwargs).double().numpy().reshape(-1)
        assert abs(ours.std() / theirs.std() - 1) < 0.02 and abs(ours.mean() - theirs.mean()) < 0.02 * theirs.std()
        if fn == "trunc_normal_":
            assert ours.min() >= -0.6 and ours.max() <= 1.0 and theirs.min() >= -0.6 and theirs.max() <= 1.0
