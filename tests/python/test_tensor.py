"""mixprec.Tensor: creation, NumPy sharing, dtypes, operators and shape ops against NumPy."""
import numpy as np
import pytest

import mixprec
from helpers import as_f64, rng


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = mixprec.from_numpy(a)
    assert t.shape == (2, 3) and t.dtype == mixprec.float32
    a[0, 1] = 42.0
    assert t[0, 1].item() == 42.0
    view = t.numpy()
    view[1, 2] = -7.0
    assert a[1, 2] == -7.0
    assert np.shares_memory(view, a)


def test_from_numpy_keeps_strides_without_copy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1:3]  # not contiguous
    t = mixprec.from_numpy(a)
    assert t.stride() == (4, 1)
    np.testing.assert_array_equal(t.numpy(), a)
    assert np.shares_memory(t.numpy(), a)


def test_from_numpy_refuses_what_it_cannot_share():
    with pytest.raises(ValueError, match="negative"):
        mixprec.from_numpy(np.arange(4, dtype=np.float32)[::-1])
    with pytest.raises(TypeError, match="complex128"):
        mixprec.from_numpy(np.zeros(3, dtype=np.complex128))
    with pytest.raises(TypeError, match="expected np.ndarray"):
        mixprec.from_numpy([1.0, 2.0])


def test_tensor_copies_and_infers_dtypes_as_pytorch():
    data = np.ones(3, dtype=np.float32)
    t = mixprec.tensor(data)
    data[0] = 5.0
    assert t[0].item() == 1.0  # a copy
    assert mixprec.tensor([1.5, 2.0]).dtype == mixprec.float32
    assert mixprec.tensor([1, 2]).dtype == mixprec.int64
    assert mixprec.tensor(np.zeros(2)).dtype == mixprec.float64
    t = mixprec.tensor([[1.0, 2.0]], dtype=mixprec.bfloat16, requires_grad=True)
    assert t.dtype == mixprec.bfloat16 and t.requires_grad and t.is_leaf


def test_bfloat16_numpy_needs_an_explicit_conversion():
    t = mixprec.tensor([1.0, 3.140625], dtype=mixprec.bfloat16)
    with pytest.raises(TypeError, match=r"t\.float\(\)\.numpy\(\)"):
        t.numpy()
    np.testing.assert_array_equal(t.float().numpy(), [1.0, 3.140625])
    # float16 has a NumPy type: shared as PyTorch does
    h = mixprec.tensor([0.5, 65504.0], dtype=mixprec.float16)
    assert h.numpy().dtype == np.float16


def test_bfloat16_rounds_to_nearest_even():
    # 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even gives 1.
    values = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, -2.0], dtype=np.float32)
    t = mixprec.tensor(values, dtype=mixprec.bfloat16)
    np.testing.assert_array_equal(t.float().numpy(), [1.0, 1 + 2 ** -6, -2.0])


def test_numpy_of_tensor_that_requires_grad_raises():
    t = mixprec.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match="detach"):
        t.numpy()
    assert t.detach().numpy().tolist() == [1.0, 1.0]


def test_metadata():
    t = mixprec.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(-1) == 4
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 24 and len(t) == 2
    assert mixprec.full((2,), 7.0)[1].item() == 7.0
    assert repr(mixprec.float32) == "mixprec.float32"


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_binary_operators_against_numpy(op):
    g = rng(1)
    a, b = g.standard_normal((3, 4)).astype(np.float32), g.standard_normal((4,)).astype(np.float32) + 3
    ta, tb = mixprec.tensor(a), mixprec.tensor(b)
    expected = eval(f"a.astype(np.float64) {op} b.astype(np.float64)")
    np.testing.assert_allclose(as_f64(eval(f"ta {op} tb")), expected, rtol=1e-6)
    # with Python scalars on either side
    np.testing.assert_allclose(as_f64(eval(f"ta {op} 2.5")), eval(f"a.astype(np.float64) {op} 2.5"), rtol=1e-6)
    np.testing.assert_allclose(as_f64(eval(f"2.5 {op} tb")), eval(f"2.5 {op} b.astype(np.float64)"), rtol=1e-6)


def test_scalar_division_is_correctly_rounded_as_pytorch():
    # x / 3 in float32 is the correctly rounded quotient (not x * (1/3)).
    a = np.array([1.0, 2.0, 10.0, 7.0], dtype=np.float32)
    np.testing.assert_array_equal((mixprec.tensor(a) / 3).numpy(), a / np.float32(3))
    assert (mixprec.tensor(a, dtype=mixprec.bfloat16) / 3).dtype == mixprec.bfloat16


def test_unary_and_matmul():
    g = rng(2)
    a, b = g.standard_normal((2, 3, 4)), g.standard_normal((2, 4, 5))
    np.testing.assert_allclose(as_f64(-mixprec.tensor(a)), -a, rtol=1e-6)
    np.testing.assert_allclose(as_f64(mixprec.tensor(a) @ mixprec.tensor(b)), a @ b, rtol=1e-5)
    v = g.standard_normal(4)
    m = g.standard_normal((4, 3))
    np.testing.assert_allclose(as_f64(mixprec.tensor(v) @ mixprec.tensor(m)), v @ m, rtol=1e-5)
    np.testing.assert_allclose(as_f64(mixprec.tensor(m.T) @ mixprec.tensor(v)), m.T @ v, rtol=1e-5)


def test_reductions():
    a = rng(3).standard_normal((2, 3, 4))
    t = mixprec.tensor(a, dtype=mixprec.float64)
    np.testing.assert_allclose(t.sum().item(), a.sum())
    np.testing.assert_allclose(as_f64(t.sum(1)), a.sum(1))
    np.testing.assert_allclose(as_f64(t.sum(dim=(0, 2), keepdim=True)), a.sum((0, 2), keepdims=True))
    np.testing.assert_allclose(as_f64(t.mean(-1)), a.mean(-1))
    np.testing.assert_allclose(t.mean().item(), a.mean())


def test_shape_ops():
    a = rng(4).standard_normal((2, 3, 4, 5)).astype(np.float32)
    t = mixprec.tensor(a)
    np.testing.assert_array_equal(t.reshape(6, -1).numpy(), a.reshape(6, -1))
    np.testing.assert_array_equal(t.view((2, 60)).numpy(), a.reshape(2, 60))
    np.testing.assert_array_equal(t.transpose(1, 3).numpy(), a.transpose(0, 3, 2, 1))
    np.testing.assert_array_equal(t.permute(0, 2, 3, 1).numpy(), a.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(t[0].permute(2, 0, 1).numpy(), a[0].transpose(2, 0, 1))
    np.testing.assert_array_equal(t.flatten(1).numpy(), a.reshape(2, -1))
    np.testing.assert_array_equal(t.flatten().numpy(), a.reshape(-1))
    np.testing.assert_array_equal(t.unsqueeze(0).squeeze(0).numpy(), a)
    with pytest.raises(ValueError, match="invalid for input of size 120"):
        t.reshape(7, -1)


def test_indexing():
    a = rng(5).standard_normal((5, 4, 3)).astype(np.float32)
    t = mixprec.tensor(a)
    for index in [2, -1, slice(1, 4), (slice(None), 1), (1, slice(0, 2), 2), slice(3, 100)]:
        np.testing.assert_array_equal(t[index].numpy(), a[index], err_msg=str(index))
    with pytest.raises(IndexError):
        t[5]
    np.testing.assert_array_equal(t[::2, 1:, ::2].numpy(), a[::2, 1:, ::2])
    np.testing.assert_array_equal(t[..., None, 1].numpy(), a[..., None, 1])
    with pytest.raises(NotImplementedError, match="step"):
        t.clone().requires_grad_()[::2]


def test_activations_against_numpy():
    from math import erf
    a = rng(6).standard_normal((3, 5)) * 3
    t = mixprec.tensor(a, dtype=mixprec.float64)
    np.testing.assert_allclose(as_f64(t.relu()), np.maximum(a, 0))
    gelu = 0.5 * a * (1 + np.vectorize(erf)(a / np.sqrt(2)))
    np.testing.assert_allclose(as_f64(t.gelu()), gelu, rtol=1e-12, atol=1e-15)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(as_f64(t.softmax(1)), e / e.sum(1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(as_f64(mixprec.nn.functional.log_softmax(t, dim=-1)),
                               np.log(e / e.sum(1, keepdims=True)), rtol=1e-12)


def test_bad_inputs_raise_python_errors_with_the_engine_message():
    a, b = mixprec.zeros(2, 3), mixprec.zeros(4, 5)
    with pytest.raises(ValueError, match=r"\[2, 3\]") as info:
        a @ b
    assert isinstance(info.value, RuntimeError)  # what a PyTorch user catches
    assert isinstance(info.value, mixprec.MixprecError)
    with pytest.raises(RuntimeError):
        a + b
    with pytest.raises(ValueError, match="item"):
        a.item()
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(ValueError, match="leaf"):
        (mixprec.ones(2, requires_grad=True) * 2).requires_grad = False


def test_repr_shows_values_and_dtype():
    assert repr(mixprec.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert "bfloat16" in repr(mixprec.tensor([1.0], dtype=mixprec.bfloat16))


def test_comparisons_and_integer_sums_count_as_in_pytorch():
    logits = mixprec.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]])
    labels = mixprec.tensor([1, 0, 0])
    correct = logits.argmax(-1) == labels
    assert correct.dtype == mixprec.uint8 and correct.tolist() == [1, 1, 0]
    total = correct.sum()
    assert total.dtype == mixprec.int64 and total.item() == 2
    assert correct.float().mean().item() == pytest.approx(2 / 3)
    assert (logits > 0.5).sum(1).tolist() == [1, 1, 1]
    # the number is rounded to the tensor's dtype first: bf16(0.3) <= 0.3 holds, as in PyTorch
    assert (logits.bfloat16() <= 0.3).tolist() == [[1, 0], [0, 1], [1, 0]]
    with pytest.raises(RuntimeError, match="mean"):
        labels.mean()
    t = mixprec.ones(2)
    assert t in [t] and len({t, t}) == 1  # identity hashing is kept
