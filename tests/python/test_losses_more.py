"""mixprec.nn's KLDivLoss, HuberLoss, MarginRankingLoss, HingeEmbeddingLoss, SoftMarginLoss,
MultiLabelSoftMarginLoss, CosineEmbeddingLoss, TripletMarginLoss, PoissonNLLLoss,
GaussianNLLLoss and MultiMarginLoss (losses.py, _functional_more.py): each against a NumPy
float64 reference and finite-difference gradients, then side by side with PyTorch 1.13
(values, gradients, module arguments and buffers, errors, dtypes under bf16 autocast)."""
import math
import types
import warnings

import numpy as np
import pytest

import mixprec
from mixprec import nn
from mixprec.nn import functional as F

from helpers import check_grad, rng

R = rng(11)
A, B, C = R.standard_normal((6, 5)), R.standard_normal((6, 5)), R.standard_normal((6, 5))
SIGNS = np.where(R.standard_normal(6) > 0, 1.0, -1.0)
SIGNS_2D = np.where(R.standard_normal((6, 5)) > 0, 1.0, -1.0)
PROBS = np.abs(R.standard_normal((6, 5))) + 0.1
LABELS = (R.standard_normal((6, 5)) > 0).astype(np.float64)
CLASS_WEIGHT = np.array([0.5, 1.0, 2.0, 1.5, 0.25])
COUNTS = np.floor(np.abs(R.standard_normal((6, 5))) * 3)
INDEX = np.array([0, 4, 2, 2, 1, 3])


def _reduce(loss, reduction):
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]


def _logsigmoid(x):
    return -np.logaddexp(0, -x)


def _xlogy(t):
    return np.where(t > 0, t * np.log(np.where(t > 0, t, 1.0)), 0.0)


def _kl(x, t, reduction, log_target=False):
    loss = np.exp(t) * (t - x) if log_target else _xlogy(t) - t * x
    return loss.sum() / x.shape[0] if reduction == "batchmean" else _reduce(loss, reduction)


def _huber(x, t, reduction, delta):
    a = np.abs(x - t)
    return _reduce(np.where(a < delta, 0.5 * a * a, delta * (a - 0.5 * delta)), reduction)


def _cosine_embedding(a, b, y, margin, reduction):
    cos = (a * b).sum(1) / np.sqrt(((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12))
    return _reduce(np.where(y == 1, 1 - cos, np.maximum(cos - margin, 0)), reduction)


def _dist(a, b, p, eps=1e-6):
    return (np.abs(a - b + eps) ** p).sum(-1) ** (1 / p)


def _triplet(a, p_, n, margin, p, swap, reduction):
    d_neg = _dist(a, n, p)
    if swap:
        d_neg = np.minimum(d_neg, _dist(p_, n, p))
    return _reduce(np.maximum(margin + _dist(a, p_, p) - d_neg, 0), reduction)


def _poisson(x, t, log_input, full, reduction, eps=1e-8):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        safe = np.where(t > 1, t, 2.0)
        loss = loss + np.where(t > 1, safe * np.log(safe) - safe + 0.5 * np.log(2 * math.pi * safe), 0.0)
    return _reduce(loss, reduction)


def _gaussian(x, t, var, full, reduction, eps=1e-6):
    if var.shape != x.shape and var.shape == x.shape[:-1]:
        var = var[..., None]
    var = np.maximum(var, eps)
    loss = 0.5 * (np.log(var) + (x - t) ** 2 / var) + (0.5 * math.log(2 * math.pi) if full else 0.0)
    return _reduce(loss, reduction)


def _multi_margin(x, y, p, margin, weight, reduction):
    n, c = x.shape
    z = np.maximum(margin - x[np.arange(n), y][:, None] + x, 0) ** p
    z[np.arange(n), y] = 0
    if weight is not None:
        z = z * weight[y][:, None]
    return _reduce(z.sum(1) / c, reduction)


# name: (fn(lib, *differentiable inputs) where lib.F is mixprec's or torch's functional and
# lib.const(array) / lib.index(array) make a constant float / int64 tensor, NumPy reference,
# differentiable inputs). The same fn runs mixprec and torch in the side-by-side tests.
CASES = {}
for red in ("none", "sum", "mean"):
    CASES[f"kl_div_{red}"] = (lambda L, x, t, r=red: L.F.kl_div(x, t, reduction=r), lambda x, t, r=red: _kl(x, t, r),
                              (A, PROBS))
    CASES[f"huber_{red}"] = (lambda L, x, t, r=red: L.F.huber_loss(x, t, r, delta=0.7),
                             lambda x, t, r=red: _huber(x, t, r, 0.7), (A, B))
    CASES[f"margin_ranking_{red}"] = (
        lambda L, a, b, r=red: L.F.margin_ranking_loss(a, b, L.const(SIGNS_2D), 0.3, reduction=r),
        lambda a, b, r=red: _reduce(np.maximum(-SIGNS_2D * (a - b) + 0.3, 0), r), (A, B))
    CASES[f"cosine_embedding_{red}"] = (
        lambda L, a, b, r=red: L.F.cosine_embedding_loss(a, b, L.const(SIGNS), 0.2, reduction=r),
        lambda a, b, r=red: _cosine_embedding(a, b, SIGNS, 0.2, r), (A, B))
    CASES[f"multi_margin_{red}"] = (
        lambda L, x, r=red: L.F.multi_margin_loss(x, L.index(INDEX), reduction=r),
        lambda x, r=red: _multi_margin(x, INDEX, 1, 1.0, None, r), (A,))
CASES.update({
    "kl_div_batchmean": (lambda L, x, t: L.F.kl_div(x, t, reduction="batchmean"), lambda x, t: _kl(x, t, "batchmean"),
                         (A, PROBS)),
    "kl_div_log_target": (lambda L, x, t: L.F.kl_div(x, t, reduction="sum", log_target=True),
                          lambda x, t: _kl(x, t, "sum", True), (A, B)),
    "kl_div_zero_target": (lambda L, x: L.F.kl_div(x, L.const(PROBS * (LABELS > 0)), reduction="sum"),
                           lambda x: _kl(x, PROBS * (LABELS > 0), "sum"), (A,)),
    "hinge_embedding": (lambda L, x: L.F.hinge_embedding_loss(x, L.const(SIGNS_2D), margin=0.5),
                        lambda x: np.where(SIGNS_2D == 1, x, np.maximum(0.5 - x, 0)).mean(), (A,)),
    "hinge_embedding_none": (lambda L, x: L.F.hinge_embedding_loss(x, L.const(SIGNS_2D), reduction="none"),
                             lambda x: np.where(SIGNS_2D == 1, x, np.maximum(1 - x, 0)), (A,)),
    "soft_margin": (lambda L, x: L.F.soft_margin_loss(x, L.const(SIGNS_2D)),
                    lambda x: np.logaddexp(0, -SIGNS_2D * x).mean(), (A,)),
    "soft_margin_none": (lambda L, x: L.F.soft_margin_loss(x * 40, L.const(SIGNS_2D), reduction="none"),
                         lambda x: np.logaddexp(0, -SIGNS_2D * x * 40), (A,)),
    "multilabel_soft_margin": (lambda L, x: L.F.multilabel_soft_margin_loss(x, L.const(LABELS)),
                               lambda x: (-(LABELS * _logsigmoid(x) + (1 - LABELS) * _logsigmoid(-x))).mean(1).mean(),
                               (A,)),
    "multilabel_soft_margin_weight_none": (
        lambda L, x: L.F.multilabel_soft_margin_loss(x, L.const(LABELS), L.const(CLASS_WEIGHT), reduction="none"),
        lambda x: (-(LABELS * _logsigmoid(x) + (1 - LABELS) * _logsigmoid(-x)) * CLASS_WEIGHT).mean(1), (A,)),
    "cosine_embedding_1d": (lambda L, a, b: L.F.cosine_embedding_loss(a, b, L.const(np.array(-1.0)), -0.5),
                            lambda a, b: _cosine_embedding(a[None], b[None], np.array([-1.0]), -0.5, "mean"),
                            (A[0], B[0])),
    "triplet": (lambda L, a, p, n: L.F.triplet_margin_loss(a, p, n, margin=2.0),
                lambda a, p, n: _triplet(a, p, n, 2.0, 2, False, "mean"), (A, B, C)),
    "triplet_p1_swap_none": (lambda L, a, p, n: L.F.triplet_margin_loss(a, p, n, 3.0, p=1, swap=True, reduction="none"),
                             lambda a, p, n: _triplet(a, p, n, 3.0, 1, True, "none"), (A, B, C)),
    "triplet_p3_sum": (lambda L, a, p, n: L.F.triplet_margin_loss(a, p, n, 2.5, p=3, reduction="sum"),
                       lambda a, p, n: _triplet(a, p, n, 2.5, 3, False, "sum"), (A, B, C)),
    "poisson_log_input": (lambda L, x: L.F.poisson_nll_loss(x, L.const(COUNTS)),
                          lambda x: _poisson(x, COUNTS, True, False, "mean"), (A,)),
    "poisson_full_none": (lambda L, x: L.F.poisson_nll_loss(x, L.const(COUNTS), full=True, reduction="none"),
                          lambda x: _poisson(x, COUNTS, True, True, "none"), (A,)),
    "poisson_rates_sum": (lambda L, x: L.F.poisson_nll_loss(x, L.const(COUNTS), log_input=False, reduction="sum"),
                          lambda x: _poisson(x, COUNTS, False, False, "sum"), (PROBS,)),
    "gaussian": (lambda L, x, t, v: L.F.gaussian_nll_loss(x, t, v), lambda x, t, v: _gaussian(x, t, v, False, "mean"),
                 (A, B, PROBS)),
    "gaussian_full_sum": (lambda L, x, t, v: L.F.gaussian_nll_loss(x, t, v, full=True, reduction="sum"),
                          lambda x, t, v: _gaussian(x, t, v, True, "sum"), (A, B, PROBS)),
    "gaussian_per_sample_var": (lambda L, x, t, v: L.F.gaussian_nll_loss(x, t, v, reduction="none"),
                                lambda x, t, v: _gaussian(x, t, v, False, "none"), (A, B, PROBS[:, 0])),
    "gaussian_var_last_dim_1": (lambda L, x, t, v: L.F.gaussian_nll_loss(x, t, v),
                                lambda x, t, v: _gaussian(x, t, v, False, "mean"), (A, B, PROBS[:, :1])),
    "multi_margin_p2_weight": (
        lambda L, x: L.F.multi_margin_loss(x, L.index(INDEX), p=2, margin=0.6, weight=L.const(CLASS_WEIGHT)),
        lambda x: _multi_margin(x, INDEX, 2, 0.6, CLASS_WEIGHT, "mean"), (A,)),
})


def _mixprec_lib(const_dtype=mixprec.float64):
    return types.SimpleNamespace(F=F, const=lambda a: mixprec.tensor(a, dtype=const_dtype),
                                 index=lambda a: mixprec.tensor(a, dtype=mixprec.int64))


def _torch_lib(torch, const_dtype=None):
    return types.SimpleNamespace(F=torch.nn.functional,
                                 const=lambda a: torch.tensor(a, dtype=const_dtype or torch.float64),
                                 index=lambda a: torch.tensor(a, dtype=torch.int64))


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_matches_numpy_float64(name):
    fn, reference, arrays = CASES[name]
    out = _quiet(fn, _mixprec_lib(), *[mixprec.tensor(a, dtype=mixprec.float64) for a in arrays])
    expected = reference(*arrays)
    assert tuple(out.shape) == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_float32(name):
    fn, reference, arrays = CASES[name]
    out = _quiet(fn, _mixprec_lib(mixprec.float32), *[mixprec.tensor(a, dtype=mixprec.float32) for a in arrays])
    assert out.dtype == mixprec.float32
    np.testing.assert_allclose(out.numpy(), reference(*arrays), rtol=3e-5, atol=3e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_gradient_matches_finite_differences(name):
    fn, reference, arrays = CASES[name]
    lib = _mixprec_lib()
    _quiet(check_grad, lambda *t: fn(lib, *t), reference, *arrays)


def test_gaussian_nll_clamps_var_in_value_only():
    """var below eps counts as eps in the loss, but its gradient is the unclamped formula's
    (PyTorch clamps under no_grad)."""
    x, t = mixprec.tensor([1.0], dtype=mixprec.float64), mixprec.tensor([0.0], dtype=mixprec.float64)
    var = mixprec.tensor([1e-9], dtype=mixprec.float64, requires_grad=True)
    loss = F.gaussian_nll_loss(x, t, var, eps=1e-6)
    np.testing.assert_allclose(loss.item(), 0.5 * (math.log(1e-6) + 1e6))
    loss.backward()
    np.testing.assert_allclose(var.grad.numpy(), [0.5 * (1 / 1e-6 - 1 / 1e-12)])


def test_kl_div_mean_warns_and_legacy_arguments_map_to_reduction():
    x, t = mixprec.tensor(A), mixprec.tensor(PROBS)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        F.kl_div(x, t)
    with pytest.warns(UserWarning):
        assert F.kl_div(x, t, reduce=False).shape == (6, 5)
    with pytest.warns(UserWarning):
        assert nn.HingeEmbeddingLoss(size_average=False).reduction == "sum"
    assert nn.MarginRankingLoss().reduction == "mean"


def test_modules_call_their_functional_forms():
    a, b, c = (mixprec.tensor(v, dtype=mixprec.float64) for v in (A, B, C))
    s, s2 = mixprec.tensor(SIGNS, dtype=mixprec.float64), mixprec.tensor(SIGNS_2D, dtype=mixprec.float64)
    probs, labels = mixprec.tensor(PROBS, dtype=mixprec.float64), mixprec.tensor(LABELS, dtype=mixprec.float64)
    w, idx = mixprec.tensor(CLASS_WEIGHT, dtype=mixprec.float64), mixprec.tensor(INDEX)
    pairs = [
        (nn.KLDivLoss(reduction="batchmean")(a, probs), F.kl_div(a, probs, reduction="batchmean")),
        (nn.KLDivLoss(reduction="sum", log_target=True)(a, b), F.kl_div(a, b, reduction="sum", log_target=True)),
        (nn.HuberLoss(delta=0.3)(a, b), F.huber_loss(a, b, delta=0.3)),
        (nn.MarginRankingLoss(0.5, reduction="sum")(a, b, s2), F.margin_ranking_loss(a, b, s2, 0.5, reduction="sum")),
        (nn.HingeEmbeddingLoss(0.4)(a, s2), F.hinge_embedding_loss(a, s2, 0.4)),
        (nn.SoftMarginLoss(reduction="none")(a, s2), F.soft_margin_loss(a, s2, reduction="none")),
        (nn.MultiLabelSoftMarginLoss(w)(a, labels), F.multilabel_soft_margin_loss(a, labels, w)),
        (nn.CosineEmbeddingLoss(0.1)(a, b, s), F.cosine_embedding_loss(a, b, s, 0.1)),
        (nn.TripletMarginLoss(0.5, p=1.0, swap=True)(a, b, c), F.triplet_margin_loss(a, b, c, 0.5, 1.0, swap=True)),
        (nn.PoissonNLLLoss(log_input=False, full=True)(probs, b * b), F.poisson_nll_loss(probs, b * b, False, True)),
        (nn.GaussianNLLLoss(full=True)(a, b, probs), F.gaussian_nll_loss(a, b, probs, full=True)),
        (nn.MultiMarginLoss(2, 0.5, w)(a, idx), F.multi_margin_loss(a, idx, 2, 0.5, w)),
    ]
    for ours, expected in pairs:
        np.testing.assert_array_equal(ours.numpy(), expected.numpy())


# ---- against PyTorch 1.13 --------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_and_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    fn, _, arrays = CASES[name]
    leaves = [mixprec.tensor(a, dtype=mixprec.float64, requires_grad=True) for a in arrays]
    t_leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out = _quiet(fn, _mixprec_lib(), *leaves)
    t_out = _quiet(fn, _torch_lib(torch), *t_leaves)
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = rng(5).standard_normal(tuple(t_out.shape))
    out.backward(mixprec.tensor(w, dtype=mixprec.float64))
    t_out.backward(torch.tensor(w))
    for k, (leaf, t_leaf) in enumerate(zip(leaves, t_leaves)):
        np.testing.assert_allclose(leaf.grad.numpy(), t_leaf.grad.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"gradient of input {k}")


# (case, input dtype) -> (mixprec, torch) where the output dtype under autocast(bfloat16)
# differs; constants (targets, class weights) are float32 in both. Under autocast the losses
# run 16-bit inputs in f32, as PyTorch 1.13's CPU autocast list does, but gaussian_nll_loss,
# a Python composition in PyTorch (bf16 there); mixprec's reductions (sum, mean) are f32 ops of
# its autocast, so its gaussian_nll_loss of bf16 inputs is f32. docs/python.md lists this.
AUTOCAST_DIFFERENCES = {
    ("gaussian", "bfloat16"): ("float32", "bfloat16"),
    ("gaussian_full_sum", "bfloat16"): ("float32", "bfloat16"),
    ("gaussian_var_last_dim_1", "bfloat16"): ("float32", "bfloat16"),
}


def _autocast_dtype(torch, name, input_dtype):
    fn, _, arrays = CASES[name]
    m_dtype, t_dtype = {"float32": (mixprec.float32, torch.float32),
                        "bfloat16": (mixprec.bfloat16, torch.bfloat16)}[input_dtype]
    with mixprec.autocast(dtype=mixprec.bfloat16):
        out = _quiet(fn, _mixprec_lib(mixprec.float32), *[mixprec.tensor(a, dtype=m_dtype) for a in arrays])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        try:
            t_out = _quiet(fn, _torch_lib(torch, torch.float32), *[torch.tensor(a, dtype=t_dtype) for a in arrays])
            theirs = str(t_out.dtype).replace("torch.", "")
        except RuntimeError:
            theirs = "error"
    return str(out.dtype).replace("mixprec.", ""), theirs


def test_autocast_output_dtypes_match_torch_or_are_listed():
    torch = pytest.importorskip("torch")
    found = {}
    for name in sorted(CASES):
        for input_dtype in ("float32", "bfloat16"):
            ours, theirs = _autocast_dtype(torch, name, input_dtype)
            if ours != theirs:
                found[(name, input_dtype)] = (ours, theirs)
    assert found == AUTOCAST_DIFFERENCES


def test_module_arguments_and_buffers_match_torch():
    torch = pytest.importorskip("torch")
    w = CLASS_WEIGHT.astype(np.float32)
    pairs = [("KLDivLoss", (), {"log_target": True}), ("HuberLoss", (), {"delta": 0.5}),
             ("MarginRankingLoss", (0.2,), {}), ("HingeEmbeddingLoss", (), {}), ("SoftMarginLoss", (), {}),
             ("CosineEmbeddingLoss", (), {"margin": 0.1}), ("TripletMarginLoss", (), {"swap": True}),
             ("PoissonNLLLoss", (), {"full": True}), ("GaussianNLLLoss", (), {"full": True, "eps": 1e-3}),
             ("MultiLabelSoftMarginLoss", (), {}), ("MultiMarginLoss", (2,), {}),
             ("MultiLabelSoftMarginLoss", (w,), {}), ("MultiMarginLoss", (1, 0.5, w), {}),
             ("HingeEmbeddingLoss", (), {"size_average": False}), ("KLDivLoss", (), {"reduce": False}),
             ("SoftMarginLoss", (True, True), {})]
    attributes = ("reduction", "log_target", "delta", "margin", "p", "eps", "swap", "log_input", "full")
    for cls, args, kwargs in pairs:
        wrap = lambda a: [(mixprec.tensor(x) if isinstance(x, np.ndarray) else x) for x in a]  # noqa: E731
        twrap = lambda a: [(torch.tensor(x) if isinstance(x, np.ndarray) else x) for x in a]  # noqa: E731
        ours = _quiet(lambda: getattr(nn, cls)(*wrap(args), **kwargs))
        theirs = _quiet(lambda: getattr(torch.nn, cls)(*twrap(args), **kwargs))
        for attr in attributes:
            if hasattr(theirs, attr):
                assert getattr(ours, attr) == getattr(theirs, attr), f"{cls}.{attr}"
        assert list(ours.state_dict()) == list(theirs.state_dict()), cls


# (call on a functional and tensors, inputs; all compare the exception's type and message)
ERRORS = [
    (lambda F, x: F.kl_div(x, x, reduction="foo"), (A,)),
    (lambda F, x, v: F.gaussian_nll_loss(x, x, v), (A, np.ones(4))),
    (lambda F, x, v: F.gaussian_nll_loss(x, x, v), (A, -np.ones((6, 5)))),
    (lambda F, x, v: F.gaussian_nll_loss(x, x, v, reduction="x"), (A, np.ones((6, 5)))),
    (lambda F, x, y: F.margin_ranking_loss(x, x, y), (A, SIGNS)),
    (lambda F, x, y: F.cosine_embedding_loss(x, x, y), (A[None], SIGNS)),
    (lambda F, x, y: F.triplet_margin_loss(x, x, y), (A, SIGNS)),
    (lambda F, x: F.poisson_nll_loss(x, x, reduction="x"), (A,)),
    (lambda F, x: F.huber_loss(x, x, reduction="x"), (A,)),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_errors_match_torch(index):
    torch = pytest.importorskip("torch")
    fn, arrays = ERRORS[index]
    with pytest.raises(Exception) as theirs:
        fn(torch.nn.functional, *[torch.tensor(a) for a in arrays])
    with pytest.raises(type(theirs.value)) as ours:
        fn(F, *[mixprec.tensor(a) for a in arrays])
    torch_message = str(theirs.value).splitlines()[0].replace("torch.Size(", "").replace("])", "]")
    assert str(ours.value).rstrip() == torch_message.rstrip()


def test_multi_margin_errors_match_torch():
    torch = pytest.importorskip("torch")
    for call in [lambda functional, lib: functional.multi_margin_loss(lib.tensor(A), lib.tensor(INDEX), p=3),
                 lambda functional, lib: functional.multi_margin_loss(lib.tensor(A), lib.tensor(INDEX + 1))]:
        with pytest.raises(Exception) as theirs:
            call(torch.nn.functional, torch)
        with pytest.raises(type(theirs.value)) as ours:
            call(F, mixprec)
        assert str(ours.value) == str(theirs.value).splitlines()[0]
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)


def test_shape_mismatch_raises_like_torch():
    """Where PyTorch broadcasts and fails, mixprec checks the shapes first: the same type,
    a message naming both shapes."""
    torch = pytest.importorskip("torch")
    for name in ("huber_loss", "soft_margin_loss", "multilabel_soft_margin_loss"):
        with pytest.raises(RuntimeError):
            _quiet(getattr(torch.nn.functional, name), torch.zeros(3, 4), torch.zeros(3, 5))
        with pytest.raises(RuntimeError, match=r"\[3, 4\].*\[3, 5\]"):
            getattr(F, name)(mixprec.zeros(3, 4), mixprec.zeros(3, 5))
