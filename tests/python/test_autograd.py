"""Gradients through the binding against NumPy finite differences (float64), grad mode."""
import threading

import numpy as np
import pytest

import mixprec
import mixprec.nn.functional as F
from helpers import check_grad, rng


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


@pytest.mark.parametrize("name, mixprec_fn, numpy_fn, shapes", [
    ("add", lambda a, b: a + b, lambda a, b: a + b, [(3, 4), (4,)]),
    ("sub", lambda a, b: a - b, lambda a, b: a - b, [(3, 4), (3, 4)]),
    ("mul", lambda a, b: a * b, lambda a, b: a * b, [(3, 4), (3, 1)]),
    ("div", lambda a, b: a / (b * b + 1), lambda a, b: a / (b * b + 1), [(3, 4), (3, 4)]),
    ("scalar ops", lambda a: 2.0 - a * 3.0 + 1.5 / (a * a + 1), lambda a: 2.0 - a * 3.0 + 1.5 / (a * a + 1), [(5,)]),
    ("matmul", lambda a, b: a @ b, lambda a, b: a @ b, [(2, 3, 4), (2, 4, 2)]),
    ("sum dim", lambda a: a.sum(1, keepdim=True), lambda a: a.sum(1, keepdims=True), [(3, 4)]),
    ("mean", lambda a: a.mean(), lambda a: a.mean(), [(3, 4)]),
    ("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), [(4, 5)]),
    ("softmax", lambda a: a.softmax(-1), lambda a: softmax(a, -1), [(3, 5)]),
    ("log_softmax", lambda a: F.log_softmax(a, 1), lambda a: np.log(softmax(a, 1)), [(3, 5)]),
    ("permute", lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), [(2, 3, 4)]),
    ("index", lambda a: a[1:3, 2] * 2, lambda a: a[1:3, 2] * 2, [(4, 5)]),
    ("reshape", lambda a: a.reshape(2, -1) * a.reshape(2, -1), lambda a: a.reshape(2, -1) ** 2, [(4, 3)]),
    ("linear 3-D", lambda x, w, b: F.linear(x, w, b), lambda x, w, b: x @ w.T + b, [(2, 3, 4), (5, 4), (5,)]),
])
def test_gradient_matches_finite_differences(name, mixprec_fn, numpy_fn, shapes):
    g = rng(len(name))
    inputs = [g.standard_normal(s) + (0.1 if name == "relu" else 0) for s in shapes]
    check_grad(mixprec_fn, numpy_fn, *inputs)


def test_conv2d_gradient():
    def conv(x, w):  # [N, C, H, W] * [O, C, 3, 3], padding 1
        n, c, h, wd = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((n, w.shape[0], h, wd))
        for i in range(h):
            for j in range(wd):
                out[:, :, i, j] = np.einsum("ncij,ocij->no", xp[:, :, i:i + 3, j:j + 3], w)
        return out
    g = rng(7)
    check_grad(lambda x, w: F.conv2d(x, w, padding=1), conv, g.standard_normal((2, 2, 4, 4)),
               g.standard_normal((3, 2, 3, 3)))


def test_gradients_accumulate_and_detach_stops_them():
    x = mixprec.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3 + 2, 3 + 4])
    y = x.detach()
    assert not y.requires_grad and y.is_leaf
    x.grad = None
    assert x.grad is None


def test_no_grad_records_nothing_and_nests():
    x = mixprec.ones(2, requires_grad=True)
    with mixprec.no_grad():
        assert not mixprec.is_grad_enabled()
        with mixprec.no_grad():
            y = x * 2
        z = x * 2
    assert mixprec.is_grad_enabled()
    assert not y.requires_grad and not z.requires_grad

    @mixprec.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad
    assert (x * 2).requires_grad


def test_no_grad_is_thread_local():
    seen = []
    with mixprec.no_grad():
        t = threading.Thread(target=lambda: seen.append(mixprec.is_grad_enabled()))
        t.start()
        t.join()
    assert seen == [True]


def test_backward_of_a_non_scalar_needs_a_gradient():
    x = mixprec.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError):
        (x * 2).backward()
    with pytest.raises(NotImplementedError, match="retain_graph"):
        (x * 2).sum().backward(retain_graph=True)


def test_manual_seed_makes_random_tensors_repeat():
    mixprec.manual_seed(3)
    a = mixprec.randn(5).numpy()
    mixprec.manual_seed(3)
    np.testing.assert_array_equal(mixprec.randn(5).numpy(), a)
    assert not np.array_equal(mixprec.randn(5).numpy(), a)


def test_set_num_threads():
    before = mixprec.get_num_threads()
    mixprec.set_num_threads(1)
    assert mixprec.get_num_threads() == 1
    mixprec.set_num_threads(before)
    with pytest.raises(ValueError):
        mixprec.set_num_threads(0)
