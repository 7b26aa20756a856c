"""mixprec.prod / Tensor.prod against np.prod in float64, gradients against finite differences
and PyTorch's rule at zeros (one zero: that element gets the product of the others, the rest
zero; two zeros: all zero), and torch 1.13 side by side (values, gradients, autocast dtypes)."""
import numpy as np
import pytest

import mixprec
from helpers import as_f64, check_grad, rng

A = rng(2).uniform(0.5, 1.5, (3, 4, 5)) * np.where(rng(3).random((3, 4, 5)) < 0.5, -1.0, 1.0)


def _product_of_others(v, axis):
    """d prod(v, axis) / dv by explicit loops: the product of the other elements of the slice."""
    moved = np.moveaxis(v, axis, -1)
    grad = np.empty_like(moved)
    for idx in np.ndindex(moved.shape[:-1]):
        row = moved[idx]
        for k in range(row.size):
            grad[idx + (k,)] = np.prod(np.delete(row, k))
    return np.moveaxis(grad, -1, axis)


@pytest.mark.parametrize("dim", [None, 0, 1, 2, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_values_match_numpy_float64(dim, keepdim):
    x = mixprec.tensor(A)
    out = mixprec.prod(x) if dim is None else mixprec.prod(x, dim, keepdim)
    expected = np.prod(A) if dim is None else np.prod(A, axis=dim, keepdims=keepdim)
    assert out.dtype == mixprec.float64 and tuple(out.shape) == np.shape(expected)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-13)
    method = x.prod() if dim is None else x.prod(dim, keepdim=keepdim)
    np.testing.assert_array_equal(method.numpy(), out.numpy())


def test_float32_odd_lengths_dtype_argument_and_integers():
    for n in (1, 2, 3, 5, 7, 8, 13):  # the pairwise tree with an odd element left at each level
        v = rng(n).uniform(0.5, 2.0, (2, n))
        np.testing.assert_allclose(mixprec.tensor(v.astype(np.float32)).prod(1).numpy(), v.prod(1), rtol=1e-5)
    out = mixprec.prod(mixprec.tensor(A.astype(np.float32)), 1, dtype=mixprec.float64)
    assert out.dtype == mixprec.float64
    np.testing.assert_allclose(out.numpy(), A.astype(np.float32).astype(np.float64).prod(1), rtol=1e-13)
    ints = np.array([[1, -2, 3], [4, 5, -6]])
    for t in (mixprec.tensor(ints), mixprec.tensor(ints, dtype=mixprec.int32)):
        assert t.prod().dtype == mixprec.int64 and t.prod().shape == () and t.prod().item() == 720
        np.testing.assert_array_equal(t.prod(0).numpy(), [4, -10, -18])
        np.testing.assert_array_equal(t.prod(1, keepdim=True).numpy(), [[-6], [-120]])
    assert (mixprec.tensor([1.0, 2.0]) > 0).prod().dtype == mixprec.int64
    assert mixprec.prod(mixprec.tensor([[2, 3]]), 1, dtype=mixprec.float32).dtype == mixprec.float32


def test_empty_and_zero_dim():
    np.testing.assert_array_equal(mixprec.ones(0, 3).prod(0).numpy(), [1.0, 1.0, 1.0])
    assert mixprec.ones(3, 0).prod(0).shape == (0,)
    assert mixprec.ones(0).prod().item() == 1.0
    assert mixprec.tensor(3.0).prod(0).item() == 3.0 and mixprec.tensor(3.0).prod().item() == 3.0


def test_bad_dims_raise():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)"):
        mixprec.ones(2, 3, 4).prod(3)
    with pytest.raises(TypeError, match="argument 'dim' must be int, not tuple"):
        mixprec.ones(2, 3).prod((0, 1))


@pytest.mark.parametrize("dim", [None, 0, 1, 2])
def test_gradients_match_finite_differences(dim):
    fn = (lambda t: t.prod()) if dim is None else (lambda t: t.prod(dim))
    ref = (lambda v: np.prod(v)) if dim is None else (lambda v: np.prod(v, axis=dim))
    check_grad(fn, ref, A, rtol=1e-6, atol=1e-9)


def test_gradient_at_zeros_is_the_product_of_the_others():
    v = np.array([[2.0, 0.0, 3.0, 4.0],      # one zero: it gets 2*3*4, the others 0
                  [0.0, 5.0, 0.0, 7.0],      # two zeros: everything 0
                  [1.5, -2.0, 0.5, 3.0],     # none
                  [0.0, 0.0, 0.0, 0.0]])
    x = mixprec.tensor(v, requires_grad=True)
    x.prod(1).backward(mixprec.ones(4, dtype=mixprec.float64))
    expected = _product_of_others(v, 1)
    np.testing.assert_array_equal(expected[0], [0.0, 24.0, 0.0, 0.0])
    np.testing.assert_array_equal(expected[1], [0.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-15)
    check_grad(lambda t: t.prod(1), lambda u: np.prod(u, axis=1), v)  # finite differences agree there too
    y = mixprec.tensor(v[0], requires_grad=True)
    y.prod().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, 24.0, 0.0, 0.0])


# ---- torch 1.13 side by side ----------------------------------------------------------------

@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_matches_torch_values_gradients_and_autocast_dtype(dim):
    torch = pytest.importorskip("torch")
    v = A.astype(np.float32).copy()
    v[0, 1, 2] = 0.0
    v[1, 2, :2] = 0.0                                   # one zero, two zeros in a row
    x, xt = mixprec.tensor(v, requires_grad=True), torch.tensor(v, requires_grad=True)
    out = x.prod() if dim is None else x.prod(dim)
    ref = xt.prod() if dim is None else xt.prod(dim)
    assert tuple(out.shape) == tuple(ref.shape) and out.dtype == mixprec.float32
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-7)
    w = rng(4).standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(mixprec.tensor(w))
    ref.backward(torch.tensor(w))
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-7)

    for source in (v, v.astype(np.float32)):
        xb = mixprec.tensor(source, dtype=mixprec.bfloat16, requires_grad=True)
        tb = torch.tensor(source, dtype=torch.bfloat16, requires_grad=True)
        with mixprec.autocast():  # PyTorch's CPU autocast runs prod in float32
            out = xb.prod() if dim is None else xb.prod(dim)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ref = tb.prod() if dim is None else tb.prod(dim)
        assert out.dtype == mixprec.float32 and ref.dtype == torch.float32
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-7)
        out.backward(mixprec.tensor(w))
        ref.backward(torch.tensor(w))
        np.testing.assert_allclose(as_f64(xb.grad), tb.grad.double().numpy(), rtol=1e-2, atol=1e-3)
    # Outside autocast PyTorch 1.13 has no bf16 prod on CPU ("prod_cpu" not implemented);
    # mixprec multiplies in bf16 (docs/python.md lists it).
    with pytest.raises(RuntimeError, match="not implemented for 'BFloat16'"):
        torch.tensor(v, dtype=torch.bfloat16).prod(0)
    assert mixprec.tensor(v, dtype=mixprec.bfloat16).prod(0).dtype == mixprec.bfloat16
    for ints in (torch.tensor([[1, 2], [3, 4]]), torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)):
        ours = mixprec.tensor(ints.numpy()).prod(1)
        assert str(ours.dtype).split(".")[-1] == str(ints.prod(1).dtype).split(".")[-1]
        np.testing.assert_array_equal(ours.numpy(), ints.prod(1).numpy())
