"""mixprec.nn: Module in Python, the layers against NumPy float64 references."""
from math import erf

import numpy as np
import pytest

import mixprec
import mixprec.nn as nn
import mixprec.nn.functional as F
from helpers import as_f64, rng


class ResidualMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 8)
        self.blocks = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.LayerNorm(8))
        self.scale = nn.Parameter(mixprec.ones(1))
        self.head = nn.Linear(8, 3, bias=False)
        self.register_buffer("calls", mixprec.zeros(1))
        self.not_a_param = mixprec.ones(2)

    def forward(self, x):
        h = self.inp(x).relu()
        return self.head(h + self.blocks(h) * self.scale)


def test_python_module_registers_parameters_with_pytorchs_names():
    model = ResidualMLP()
    names = [n for n, _ in model.named_parameters()]
    assert names == ["scale", "inp.weight", "inp.bias", "blocks.0.weight", "blocks.0.bias",
                     "blocks.2.weight", "blocks.2.bias", "head.weight"]
    assert [n for n, _ in model.named_buffers()] == ["calls"]
    assert model.inp.weight.shape == (8, 4) and isinstance(model.inp.weight, nn.Parameter)
    assert len(list(model.parameters())) == 8
    assert "not_a_param" not in dict(model.named_parameters())
    assert [n for n, _ in model.named_modules()][:3] == ["", "inp", "blocks"]


def test_python_module_trains():
    mixprec.manual_seed(0)
    model = ResidualMLP()
    opt = mixprec.optim.Adam(model.parameters(), lr=0.02)
    g = rng(0)
    x = mixprec.tensor(g.standard_normal((32, 4)).astype(np.float32))
    y = mixprec.tensor(g.integers(0, 3, 32))
    losses = []
    for _ in range(100):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_state_dict_round_trip_through_numpy():
    a, b = ResidualMLP(), ResidualMLP()
    state = {k: v.numpy().copy() for k, v in a.state_dict().items()}
    assert list(state) == ["scale", "calls", "inp.weight", "inp.bias", "blocks.0.weight",
                           "blocks.0.bias", "blocks.2.weight", "blocks.2.bias", "head.weight"]
    b.load_state_dict(state)
    x = mixprec.randn(2, 4)
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    del state["head.weight"]
    state["extra"] = np.zeros(1)
    with pytest.raises(RuntimeError, match='Missing key.*"head.weight"'):
        b.load_state_dict(state)
    result = b.load_state_dict(state, strict=False)
    assert result.missing_keys == ["head.weight"] and result.unexpected_keys == ["extra"]
    with pytest.raises(RuntimeError, match="size mismatch for inp.bias"):
        b.load_state_dict({**a.state_dict(), "inp.bias": np.zeros(3, np.float32)})


def test_train_eval_switches_dropout():
    model = nn.Sequential(nn.Dropout(0.5))
    x = mixprec.ones(1000)
    assert model.training
    y = model(x).numpy()
    assert set(np.unique(y)) == {0.0, 2.0}
    model.eval()
    assert not model[0].training
    np.testing.assert_array_equal(model(x).numpy(), x.numpy())


def test_linear_and_its_default_init():
    mixprec.manual_seed(1)
    layer = nn.Linear(50, 20)
    w, b = as_f64(layer.weight), as_f64(layer.bias)
    bound = 1 / np.sqrt(50)  # kaiming_uniform(a=sqrt(5)) and the bias: U(-1/sqrt(fan_in), ..)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound and w.std() > bound / 3
    x = rng(1).standard_normal((3, 7, 50)).astype(np.float32)
    np.testing.assert_allclose(as_f64(layer(mixprec.tensor(x))), x @ w.T + b, rtol=1e-5, atol=1e-5)


def test_conv2d_and_max_pool_against_numpy():
    conv = nn.Conv2d(2, 3, kernel_size=3, padding=1)
    x = rng(2).standard_normal((2, 2, 6, 6)).astype(np.float32)
    w, b = as_f64(conv.weight), as_f64(conv.bias)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = np.zeros((2, 3, 6, 6))
    for i in range(6):
        for j in range(6):
            expected[:, :, i, j] = np.einsum("ncij,ocij->no", xp[:, :, i:i + 3, j:j + 3], w) + b
    y = conv(mixprec.tensor(x))
    np.testing.assert_allclose(as_f64(y), expected, rtol=1e-4, atol=1e-5)
    pooled = nn.MaxPool2d(2)(y)
    np.testing.assert_array_equal(as_f64(pooled), as_f64(y).reshape(2, 3, 3, 2, 3, 2).max(axis=(3, 5)))


def test_layer_norm_batch_norm_embedding_gelu():
    x = rng(3).standard_normal((4, 3, 5, 5)).astype(np.float32)
    t = mixprec.tensor(x)
    ln = nn.LayerNorm([5, 5])
    mu, var = x.mean((2, 3), keepdims=True), x.var((2, 3), keepdims=True)
    np.testing.assert_allclose(as_f64(ln(t)), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)

    bn = nn.BatchNorm2d(3, momentum=0.1)
    mu, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    expected = (x - mu[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(as_f64(bn(t)), expected, rtol=1e-4, atol=1e-5)
    n = x.size / 3
    np.testing.assert_allclose(as_f64(bn.running_mean), 0.1 * mu, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(as_f64(bn.running_var), 0.9 + 0.1 * var * n / (n - 1), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 1
    assert [k for k in bn.state_dict()] == ["weight", "bias", "running_mean", "running_var",
                                            "num_batches_tracked"]
    bn.eval()
    rm, rv = as_f64(bn.running_mean), as_f64(bn.running_var)
    np.testing.assert_allclose(as_f64(bn(t)), (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5),
                               rtol=1e-4, atol=1e-5)

    emb = nn.Embedding(10, 4)
    idx = np.array([[1, 9], [0, 1]])
    np.testing.assert_array_equal(emb(mixprec.tensor(idx)).detach().numpy(), emb.weight.detach().numpy()[idx])

    g = nn.GELU()(t)
    np.testing.assert_allclose(as_f64(g), 0.5 * x * (1 + np.vectorize(erf)(x / np.sqrt(2))), rtol=1e-5, atol=1e-6)


def test_losses_against_numpy():
    logits = rng(4).standard_normal((6, 5)).astype(np.float32)
    target = np.array([0, 4, 2, 2, 1, 3])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    loss = nn.CrossEntropyLoss()(mixprec.tensor(logits), mixprec.tensor(target))
    np.testing.assert_allclose(loss.item(), -logp[np.arange(6), target].mean(), rtol=1e-5)
    per_sample = nn.CrossEntropyLoss(reduction="none")(mixprec.tensor(logits), mixprec.tensor(target))
    np.testing.assert_allclose(as_f64(per_sample), -logp[np.arange(6), target], rtol=1e-5)
    a, b = logits, logits[::-1].copy()
    np.testing.assert_allclose(nn.MSELoss()(mixprec.tensor(a), mixprec.tensor(b)).item(),
                               ((a - b) ** 2).mean(), rtol=1e-5)
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(mixprec.tensor(a), mixprec.tensor(b), reduction="avg")


def test_module_to_bfloat16_converts_parameters():
    model = ResidualMLP().bfloat16()
    assert {p.dtype for p in model.parameters()} == {mixprec.bfloat16}
    assert all(p.requires_grad for p in model.parameters())
    assert model(mixprec.randn(2, 4).bfloat16()).dtype == mixprec.bfloat16


def test_layers_refuse_what_they_cannot_do():
    with pytest.raises(NotImplementedError, match="padding_mode"):
        nn.Conv2d(4, 4, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="groups"):
        nn.Conv2d(4, 6, 3, groups=4)  # 6 output channels do not split into 4 groups
    with pytest.raises(ValueError, match="Linear|linear"):
        nn.Linear(3, 2)(mixprec.zeros(4, 5))
    with pytest.raises(AttributeError):
        ResidualMLP().missing
    with pytest.raises(TypeError, match="parameter"):
        ResidualMLP().scale = mixprec.ones(1)


def _ints(shape, seed, scale=1.0):
    """Small integers times a power of two: every sum exact, so fused and unfused agree bitwise."""
    return mixprec.tensor((rng(seed).integers(-3, 4, shape) * scale).astype(np.float32))


def _conv_net(dilation=1, groups=1):
    mixprec.manual_seed(3)
    net = nn.Sequential(nn.Conv2d(4, 16, 3, padding=dilation, dilation=dilation, groups=groups), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(16 * 2 * 2, 3))
    for i, p in enumerate(net.parameters()):
        p.data.copy_(_ints(tuple(p.shape), 10 + i, 0.125))
    return net


def _by_hand(net, x):
    """The same network module by module, nothing fused."""
    for m in net:
        x = m.forward(x)
    return x


@pytest.mark.parametrize("dilation,groups", [(1, 1), (2, 1), (1, 2)])
def test_sequential_fuses_conv_relu_pool_without_changing_a_value(dilation, groups):
    # The fused ops (conv2d_relu_max_pool2d, relu_max_pool2d) where they apply, the layers
    # themselves where not (dilated, grouped): values and gradients bit for bit either way.
    x = _ints((2, 4, 8, 8), 1)
    grads = []
    outs = []
    for run in (lambda n, v: n(v), _by_hand):
        net = _conv_net(dilation, groups)
        out = run(net, x)
        out.sum().backward()
        outs.append(out.detach().numpy().copy())
        grads.append([p.grad.numpy().copy() for p in net.parameters()])
    np.testing.assert_array_equal(outs[0], outs[1])
    assert np.count_nonzero(outs[0]) > 0
    for a, b in zip(grads[0], grads[1]):
        np.testing.assert_array_equal(a, b)


def test_sequential_runs_a_module_with_its_own_forward_as_itself():
    # A ReLU given another forward on the instance (or a subclass) is not fused away.
    net = _conv_net()
    x = _ints((2, 4, 8, 8), 2)
    plain = net(x).detach().numpy().copy()
    net[1].forward = lambda v: v * 2.0  # no longer a ReLU: the first block must see it
    changed = net(x).detach().numpy()
    assert not np.array_equal(plain, changed)
    np.testing.assert_array_equal(changed, _by_hand(net, x).detach().numpy())

    class Doubled(nn.ReLU):
        def forward(self, v):
            return F.relu(v) * 2.0

    y = _ints((1, 2, 4, 4), 3)
    relu_pool = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2))(y).numpy()
    doubled_pool = nn.Sequential(Doubled(), nn.MaxPool2d(2))(y).numpy()
    assert np.count_nonzero(relu_pool) > 0
    np.testing.assert_array_equal(doubled_pool, 2.0 * relu_pool)


def test_sequential_fuses_under_autocast_as_the_layers_compute():
    # bf16 under autocast: the fused blocks give the layers' dtypes and values (integer inputs
    # and weights: exact in bf16, sums exact in f32).
    x = _ints((2, 4, 8, 8), 4)
    outs = []
    for run in (lambda n, v: n(v), _by_hand):
        net = _conv_net()
        with mixprec.amp.autocast(device_type="cpu", dtype=mixprec.bfloat16):
            out = run(net, x)
        outs.append(out)
    assert outs[0].dtype == outs[1].dtype == mixprec.bfloat16
    np.testing.assert_array_equal(outs[0].float().detach().numpy(), outs[1].float().detach().numpy())


def test_sequential_takes_the_fused_ops():
    # What the engine dispatches (MIXPREC_VERBOSE=dispatch, in a child process): the conv block
    # and the ReLU + pool pair go through the fused ops, never through max_pool2d.
    import os
    import subprocess
    import sys
    code = ("import mixprec, mixprec.nn as nn\n"
            "net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),\n"
            "                    nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))\n"
            "net(mixprec.randn(2, 3, 8, 8)).sum().backward()\n")
    env = dict(os.environ, MIXPREC_VERBOSE="dispatch")
    log = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stderr
    assert "dispatch relu_max_pool2d " in log or "dispatch conv2d_relu_max_pool2d " in log, log
    assert "dispatch max_pool2d " not in log, log
    # The same layers called one by one do take max_pool2d: the check above can fail.
    code_unfused = code.replace("net(mixprec.randn(2, 3, 8, 8))", "x = mixprec.randn(2, 3, 8, 8)\n"
                                "for m in net: x = m.forward(x)\nx")
    log = subprocess.run([sys.executable, "-c", code_unfused], env=env, capture_output=True, text=True,
                         check=True).stderr
    assert "dispatch max_pool2d " in log, log


def test_module_dict_apply_and_clip_grad_value():
    heads = mixprec.nn.ModuleDict({"a": mixprec.nn.Linear(3, 2)})
    heads["b"] = mixprec.nn.Linear(3, 4)
    assert list(heads) == ["a", "b"] and len(heads) == 2 and "b" in heads
    assert [name for name, _ in heads.named_parameters()] == ["a.weight", "a.bias", "b.weight", "b.bias"]
    order = []
    model = mixprec.nn.Sequential(mixprec.nn.Linear(3, 3), mixprec.nn.Sequential(mixprec.nn.ReLU()))
    assert model.apply(lambda m: order.append(type(m).__name__)) is model
    assert order == ["Linear", "ReLU", "Sequential", "Sequential"]           # children first, as torch
    p = mixprec.nn.Parameter(mixprec.zeros(3))
    p.grad = mixprec.tensor([-5.0, 0.5, 7.0])
    mixprec.nn.utils.clip_grad_value_([p], 1.0)
    np.testing.assert_array_equal(p.grad.numpy(), [-1.0, 0.5, 1.0])
    with pytest.raises(RuntimeError, match="mixprec runs on CPUs only"):
        model.cuda()


def test_transformer_encoder_stacks_copies_of_its_layer():
    mixprec.manual_seed(0)
    layer = mixprec.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
    encoder = mixprec.nn.TransformerEncoder(layer, 2, norm=mixprec.nn.LayerNorm(16))
    names = [n for n, _ in encoder.named_parameters()]
    assert "layers.0.self_attn.in_proj_weight" in names and "layers.1.linear2.bias" in names and "norm.weight" in names
    for i in range(2):  # each a copy of the layer's weights, not the layer itself
        sub = encoder.layers[i]
        assert sub is not layer
        for (n, a), (_, b) in zip(layer.state_dict().items(), sub.state_dict().items()):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=n)
    x = mixprec.randn(3, 5, 16)
    expect = encoder.norm(encoder.layers[1](encoder.layers[0](x)))
    np.testing.assert_array_equal(encoder(x).detach().numpy(), expect.detach().numpy())
    with mixprec.no_grad():
        dict(encoder.layers[0].named_parameters())["linear1.weight"].mul_(0.0)
    assert np.abs(dict(layer.named_parameters())["linear1.weight"].detach().numpy()).sum() > 0  # untouched
