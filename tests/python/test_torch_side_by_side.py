"""Side by side with PyTorch 1.13 in the same process (skipped where torch is not installed):
optimizer steps bit for bit, layers within torch's own assert_close tolerances, autocast dtypes."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mixprec  # noqa: E402
import mixprec.nn as nn  # noqa: E402
import mixprec.nn.functional as F  # noqa: E402
from helpers import rng  # noqa: E402


def to_torch(t):
    return torch.from_numpy(t.detach().float().numpy().copy() if t.dtype == mixprec.bfloat16
                            else t.detach().numpy().copy())


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


@pytest.mark.parametrize("name, kwargs", [
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.05, momentum=0.9, weight_decay=1e-3)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)), ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.2, maximize=True)),
    ("Adam", dict()), ("Adam", dict(lr=3e-3, weight_decay=0.01, amsgrad=True)),
    ("Adam", dict(lr=1e-2, betas=(0.8, 0.95), eps=1e-6)),
    ("AdamW", dict()), ("AdamW", dict(lr=3e-3, weight_decay=0.1, amsgrad=True)),
])
def test_optimizer_steps_are_bit_identical(name, kwargs):
    g = rng(5)
    p0 = g.standard_normal((7, 33)).astype(np.float32)
    grads = [g.standard_normal((7, 33)).astype(np.float32) * 10 ** k for k in range(-2, 3)]
    ours = nn.Parameter(mixprec.tensor(p0))
    theirs = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = getattr(mixprec.optim, name)([ours], **kwargs)
    ref = getattr(torch.optim, name)([theirs], foreach=False, **kwargs)
    for step, grad in enumerate(grads):
        ours.grad = mixprec.tensor(grad)
        theirs.grad = torch.from_numpy(grad.copy())
        opt.step()
        ref.step()
        mismatch = np.flatnonzero(bits(ours.detach().numpy()) != bits(theirs.detach().numpy()))
        assert mismatch.size == 0, f"step {step}: {mismatch.size} elements differ"


def compare_forward_backward(ours, theirs, xo, xt):
    """Outputs, then the input's and every parameter's gradient of sum(y * w) for a random w,
    within torch's assert_close tolerances."""
    yo, yt = ours(xo), theirs(xt)
    torch.testing.assert_close(to_torch(yo), yt.detach())
    w = rng(7).standard_normal(tuple(yt.shape)).astype(np.float32)
    (yo * mixprec.tensor(w)).sum().backward()
    (yt * torch.from_numpy(w)).sum().backward()
    torch.testing.assert_close(to_torch(xo.grad), xt.grad)
    their_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(to_torch(p.grad), their_params[name].grad, msg=name)


def copy_parameters(ours, theirs):
    state = {k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()}
    theirs.load_state_dict(state)


class CalledWith:
    """A module called with fixed keyword arguments (masks), for compare_forward_backward."""

    def __init__(self, module, **kwargs):
        self.module, self.kwargs = module, kwargs

    def __call__(self, x):
        return self.module(x, **self.kwargs)

    def named_parameters(self):
        return self.module.named_parameters()


@pytest.mark.parametrize("make, shape", [
    (lambda m: m.Linear(12, 5), (4, 12)),
    (lambda m: m.Linear(12, 5, bias=False), (2, 3, 12)),
    (lambda m: m.Conv2d(3, 4, 3, padding=1), (2, 3, 8, 8)),
    (lambda m: m.Conv2d(3, 4, 5, stride=2), (2, 3, 11, 11)),
    (lambda m: m.Conv2d(4, 4, 3, padding=1, groups=4), (2, 4, 7, 7)),   # depthwise
    (lambda m: m.Conv2d(4, 6, 3, padding=2, dilation=2, groups=2), (2, 4, 9, 9)),
    (lambda m: m.LayerNorm(10), (3, 4, 10)),
    (lambda m: m.BatchNorm2d(3), (4, 3, 5, 5)),
    (lambda m: m.GELU(), (5, 6)),
    (lambda m: m.ReLU(), (5, 6)),
    (lambda m: m.Sigmoid(), (5, 6)),
    (lambda m: m.Tanh(), (5, 6)),
    (lambda m: m.MaxPool2d(2), (2, 3, 6, 6)),
    (lambda m: m.Flatten(), (2, 3, 4)),
    (lambda m: m.Sequential(m.Conv2d(1, 2, 3), m.ReLU(), m.MaxPool2d(2), m.Flatten(), m.Linear(18, 3)), (2, 1, 8, 8)),
])
def test_layer_forward_and_backward_match_torch(make, shape):
    ours, theirs = make(nn), make(torch.nn)
    copy_parameters(ours, theirs)
    x = rng(6).standard_normal(shape).astype(np.float32)
    xo = mixprec.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    compare_forward_backward(ours, theirs, xo, xt)
    for name, b in ours.named_buffers():
        torch.testing.assert_close(to_torch(b), dict(theirs.named_buffers())[name], msg=name)


def test_embedding_and_losses_match_torch():
    ours, theirs = nn.Embedding(10, 4), torch.nn.Embedding(10, 4)
    copy_parameters(ours, theirs)
    idx = np.array([[1, 9, 1], [0, 2, 3]])
    yo, yt = ours(mixprec.tensor(idx)), theirs(torch.from_numpy(idx))
    torch.testing.assert_close(to_torch(yo), yt.detach())
    yo.sum().backward()
    yt.sum().backward()
    torch.testing.assert_close(to_torch(ours.weight.grad), theirs.weight.grad)

    logits = rng(8).standard_normal((6, 5)).astype(np.float32)
    target = np.array([0, 4, 2, 2, 1, 3])
    for reduction in ("mean", "sum", "none"):
        lo = nn.CrossEntropyLoss(reduction=reduction)(mixprec.tensor(logits), mixprec.tensor(target))
        lt = torch.nn.CrossEntropyLoss(reduction=reduction)(torch.from_numpy(logits), torch.from_numpy(target))
        torch.testing.assert_close(to_torch(lo), lt)
        mo = nn.MSELoss(reduction=reduction)(mixprec.tensor(logits), mixprec.tensor(logits[::-1].copy()))
        mt = torch.nn.MSELoss(reduction=reduction)(torch.from_numpy(logits), torch.from_numpy(logits[::-1].copy()))
        torch.testing.assert_close(to_torch(mo), mt)


def test_bf16_linear_matches_torch_within_bf16_tolerance():
    ours, theirs = nn.Linear(64, 16).bfloat16(), torch.nn.Linear(64, 16).bfloat16()
    theirs.load_state_dict({k: to_torch(v).bfloat16() for k, v in ours.state_dict().items()})
    x = rng(9).standard_normal((8, 64)).astype(np.float32)
    yo = ours(mixprec.tensor(x, dtype=mixprec.bfloat16))
    yt = theirs(torch.from_numpy(x).bfloat16())
    assert yo.dtype == mixprec.bfloat16 and yt.dtype == torch.bfloat16
    torch.testing.assert_close(to_torch(yo).bfloat16(), yt.detach())


AUTOCAST_OPS = {
    "linear": (lambda M, x, w, img, k: M.linear(x, w), None),
    "matmul": (lambda M, x, w, img, k: x @ w.t() if hasattr(w, "t") else x @ w, None),
    "conv2d": (lambda M, x, w, img, k: M.conv2d(img, k), None),
    "relu": (lambda M, x, w, img, k: M.relu(x), None),
    "gelu": (lambda M, x, w, img, k: M.gelu(x), None),
    "softmax": (lambda M, x, w, img, k: M.softmax(x, dim=1), None),
    "log_softmax": (lambda M, x, w, img, k: M.log_softmax(x, dim=1), None),
    "layer_norm": (lambda M, x, w, img, k: M.layer_norm(x, (8,)), None),
    "max_pool2d": (lambda M, x, w, img, k: M.max_pool2d(img, 2), None),
    "mse_loss": (lambda M, x, w, img, k: M.mse_loss(x, x), None),
    "add": (lambda M, x, w, img, k: x + x, None),
    "mul": (lambda M, x, w, img, k: x * x, None),
}


def dtype_name(t):
    return {"torch.float32": "f32", "torch.bfloat16": "bf16", "mixprec.float32": "f32",
            "mixprec.bfloat16": "bf16"}[str(t.dtype)]


@pytest.mark.parametrize("op", sorted(AUTOCAST_OPS))
@pytest.mark.parametrize("inputs", ["f32", "bf16"])
def test_autocast_output_dtype_is_torchs_or_a_listed_difference(op, inputs):
    fn, _ = AUTOCAST_OPS[op]
    g = rng(10)
    arrays = [g.standard_normal(s).astype(np.float32) for s in [(4, 8), (6, 8), (2, 3, 6, 6), (5, 3, 3, 3)]]
    mx = [mixprec.tensor(a) for a in arrays]
    th = [torch.from_numpy(a.copy()) for a in arrays]
    if inputs == "bf16":
        mx = [t.bfloat16() for t in mx]
        th = [t.bfloat16() for t in th]
    with mixprec.amp.autocast(dtype=mixprec.bfloat16):
        ours = dtype_name(fn(F, *mx))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = dtype_name(fn(torch.nn.functional, *th))
    listed = {(d[0], d[2]): d[4] for d in mixprec._mixprec.autocast_differences_from_pytorch()
              if d[1] == "bf16_autocast"}
    if ours != theirs:
        assert listed.get((op, inputs)) == ours, f"{op}({inputs}): ours {ours}, torch {theirs}, not listed"


@pytest.mark.parametrize("name, kwargs", [
    ("StepLR", dict(step_size=3, gamma=0.3)), ("MultiStepLR", dict(milestones=[2, 5, 5, 9], gamma=0.7)),
    ("ExponentialLR", dict(gamma=0.93)), ("LinearLR", dict(start_factor=0.1, total_iters=7)),
    ("CosineAnnealingLR", dict(T_max=6, eta_min=0.001)), ("LambdaLR", dict(lr_lambda=lambda e: 1 / (e + 1))),
])
def test_lr_schedulers_give_torchs_floats(name, kwargs):
    ours = getattr(mixprec.optim.lr_scheduler, name)(
        mixprec.optim.SGD([nn.Parameter(mixprec.zeros(1))], lr=0.05), **kwargs)
    theirs = getattr(torch.optim.lr_scheduler, name)(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.05), **kwargs)
    for epoch in range(20):
        assert ours.get_last_lr() == theirs.get_last_lr(), f"epoch {epoch}"
        ours.optimizer.step()
        theirs.optimizer.step()
        ours.step()
        theirs.step()


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_encoder_layer_matches_torch(activation, batch_first):
    ours = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, activation=activation, batch_first=batch_first)
    theirs = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, activation=activation, batch_first=batch_first)
    copy_parameters(ours, theirs)
    x = rng(11).standard_normal((5, 3, 16)).astype(np.float32)
    xo = mixprec.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    compare_forward_backward(ours, theirs, xo, xt)


@pytest.mark.parametrize("name, kwargs", [("Adam", dict(lr=1e-2, amsgrad=True)), ("AdamW", {}),
                                          ("SGD", dict(lr=0.1, momentum=0.9))])
def test_optimizer_state_moves_between_torch_and_mixprec(name, kwargs):
    """torch's state_dict loads into mixprec's optimizer and the reverse; the steps after it
    stay bit-identical."""
    g = rng(13)
    p0 = g.standard_normal((4, 9)).astype(np.float32)
    grads = [g.standard_normal((4, 9)).astype(np.float32) for _ in range(5)]
    theirs = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    ref = getattr(torch.optim, name)([theirs], foreach=False, **kwargs)
    for grad in grads[:2]:
        theirs.grad = torch.from_numpy(grad.copy())
        ref.step()
    ours = nn.Parameter(mixprec.tensor(theirs.detach().numpy()))
    opt = getattr(mixprec.optim, name)([ours], **kwargs)
    opt.load_state_dict(ref.state_dict())
    back = getattr(torch.optim, name)([torch.nn.Parameter(theirs.detach().clone())], foreach=False, **kwargs)
    for grad in grads[2:]:
        ours.grad = mixprec.tensor(grad)
        theirs.grad = torch.from_numpy(grad.copy())
        opt.step()
        ref.step()
    assert np.array_equal(bits(ours.detach().numpy()), bits(theirs.detach().numpy()))
    # and back: mixprec's state (torch's layout, NumPy values) into a fresh torch optimizer
    state = opt.state_dict()
    state["state"] = {i: {k: torch.from_numpy(v.numpy().copy()) for k, v in entry.items()}
                      for i, entry in state["state"].items()}
    back.load_state_dict(state)
    for k, v in ref.state_dict()["state"][0].items():
        assert torch.equal(back.state_dict()["state"][0][k], v), k


@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_comparisons_match_torch(op, dtype):
    a = np.round(rng(14).standard_normal((4, 5)), 1).astype(np.float32)
    b = np.round(rng(15).standard_normal((5,)), 1).astype(np.float32)
    ma, mb = mixprec.tensor(a).to(getattr(mixprec, dtype)), mixprec.tensor(b).to(getattr(mixprec, dtype))
    ta, tb = torch.from_numpy(a).to(getattr(torch, dtype)), torch.from_numpy(b).to(getattr(torch, dtype))
    for ours, theirs in [(eval(f"ma {op} mb"), eval(f"ta {op} tb")), (eval(f"ma {op} 0.3"), eval(f"ta {op} 0.3"))]:
        np.testing.assert_array_equal(ours.numpy().astype(bool), theirs.numpy())
        assert ours.sum().item() == theirs.sum().item()


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer_encoder_layer_key_padding_matches_torch(batch_first):
    # src_key_padding_mask (bool, True = padding) in training mode (torch's fast path, which
    # zeroes padded outputs in eval, is not taken): outputs and every gradient.
    ours = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=batch_first)
    theirs = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=batch_first)
    copy_parameters(ours, theirs)
    x = rng(12).standard_normal((3, 6, 16) if batch_first else (6, 3, 16)).astype(np.float32)
    mask = np.array([[p >= n for p in range(6)] for n in (6, 4, 1)])
    xo = mixprec.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    compare_forward_backward(CalledWith(ours, src_key_padding_mask=mask),
                             CalledWith(theirs, src_key_padding_mask=torch.from_numpy(mask)), xo, xt)


def test_transformer_encoder_layer_causal_mask_matches_torch():
    # src_mask = torch.nn.Transformer.generate_square_subsequent_mask(S), with key padding too.
    ours = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    theirs = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    copy_parameters(ours, theirs)
    x = rng(14).standard_normal((2, 6, 16)).astype(np.float32)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(6)
    pad = np.array([[False] * 6, [False] * 4 + [True] * 2])
    xo = mixprec.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    compare_forward_backward(CalledWith(ours, src_mask=causal.numpy(), src_key_padding_mask=pad),
                             CalledWith(theirs, src_mask=causal, src_key_padding_mask=torch.from_numpy(pad)), xo, xt)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_transformer_encoder_layer_attention_mask_matches_torch(kind):
    # A src_mask that is not the causal one (every query keeps some keys): added to the scores.
    ours = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    theirs = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    copy_parameters(ours, theirs)
    g = rng(15)
    x = g.standard_normal((2, 6, 16)).astype(np.float32)
    hide = g.random((6, 6)) < 0.4
    np.fill_diagonal(hide, False)  # every query sees itself
    mask = hide if kind == "bool" else (g.standard_normal((6, 6)) - np.where(hide, np.inf, 0)).astype(np.float32)
    xo = mixprec.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    compare_forward_backward(CalledWith(ours, src_mask=mask), CalledWith(theirs, src_mask=torch.from_numpy(mask)),
                             xo, xt)


def test_transformer_encoder_layer_per_head_mask_matches_torch():
    # PyTorch's 3-d src_mask [batch * nhead, S, S]: each batch row and head its own mask.
    ours = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    theirs = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    copy_parameters(ours, theirs)
    g = rng(16)
    x = g.standard_normal((2, 5, 16)).astype(np.float32)
    mask = g.standard_normal((8, 5, 5)).astype(np.float32)
    mask[g.random((8, 5, 5)) < 0.3] = -np.inf
    for m in mask:
        np.fill_diagonal(m, 0.0)  # every query sees itself
    xo = mixprec.tensor(x, requires_grad=True)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    compare_forward_backward(CalledWith(ours, src_mask=mask), CalledWith(theirs, src_mask=torch.from_numpy(mask)),
                             xo, xt)


@pytest.mark.parametrize("make, shape", [
    (lambda m: m.LeakyReLU(0.2), (5, 6)),
    (lambda m: m.ELU(), (5, 6)),
    (lambda m: m.SiLU(), (5, 6)),
    (lambda m: m.BatchNorm1d(6), (5, 6)),
    (lambda m: m.BatchNorm1d(3), (4, 3, 7)),
    (lambda m: m.AdaptiveAvgPool2d((1, 1)), (2, 3, 6, 6)),
    (lambda m: m.AdaptiveAvgPool2d(3), (2, 3, 6, 6)),
    (lambda m: m.Conv1d(3, 4, 3, padding=1), (2, 3, 9)),
    (lambda m: m.Conv1d(4, 6, 3, stride=2, dilation=2, groups=2), (2, 4, 11)),
    (lambda m: m.ConvTranspose2d(3, 4, 2, stride=2), (2, 3, 5, 5)),
    (lambda m: m.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1), (1, 4, 4, 4)),
    (lambda m: m.GroupNorm(2, 6), (3, 6, 4, 5)),
    (lambda m: m.GroupNorm(3, 3, affine=False), (2, 3, 7)),
    (lambda m: m.Upsample(scale_factor=2), (2, 3, 4, 5)),
    (lambda m: m.Upsample(size=(6, 9)), (1, 2, 2, 3)),
])
def test_more_layers_match_torch(make, shape):
    test_layer_forward_and_backward_match_torch(make, shape)


@pytest.mark.parametrize("name, kwargs, probabilities", [
    ("BCEWithLogitsLoss", {}, False), ("BCEWithLogitsLoss", {"reduction": "sum"}, False),
    ("BCELoss", {}, True), ("BCELoss", {"reduction": "none"}, True),
    ("SmoothL1Loss", {}, False), ("SmoothL1Loss", {"beta": 0.5, "reduction": "sum"}, False),
    ("L1Loss", {}, False),
])
def test_more_losses_match_torch(name, kwargs, probabilities):
    g = rng(13)
    x = g.standard_normal((6, 4)).astype(np.float32) * 3
    x[0, :3] = [0.0, 40.0, -40.0]  # a logit at 0 and large ones (no overflow either way)
    if probabilities:  # within 1e-6 of 0 and 1 at most: there PyTorch's gradient divides by max(p (1 - p), 1e-12)
        x = np.clip(1 / (1 + np.exp(-x)), 1e-6, 1 - 1e-6).astype(np.float32)
    y = (g.uniform(size=(6, 4)) > 0.5).astype(np.float32)
    xo, xt = mixprec.tensor(x, requires_grad=True), torch.from_numpy(x.copy()).requires_grad_()
    lo = getattr(nn, name)(**kwargs)(xo, mixprec.tensor(y))
    lt = getattr(torch.nn, name)(**kwargs)(xt, torch.from_numpy(y))
    torch.testing.assert_close(to_torch(lo), lt.detach())
    lo.sum().backward()
    lt.sum().backward()
    torch.testing.assert_close(to_torch(xo.grad), xt.grad)


def test_cross_entropy_label_smoothing_matches_torch():
    logits = rng(14).standard_normal((5, 7)).astype(np.float32)
    target = np.array([0, 6, 3, 3, 1])
    for reduction in ("mean", "sum", "none"):
        xo, xt = mixprec.tensor(logits, requires_grad=True), torch.from_numpy(logits.copy()).requires_grad_()
        lo = nn.CrossEntropyLoss(label_smoothing=0.1, reduction=reduction)(xo, mixprec.tensor(target))
        lt = torch.nn.CrossEntropyLoss(label_smoothing=0.1, reduction=reduction)(xt, torch.from_numpy(target))
        torch.testing.assert_close(to_torch(lo), lt.detach())
        lo.sum().backward()
        lt.sum().backward()
        torch.testing.assert_close(to_torch(xo.grad), xt.grad)
