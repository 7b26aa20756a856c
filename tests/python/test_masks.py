"""Masks without a bool dtype (python/mixprec/_masks.py): comparisons give uint8 0/1 tensors
that index, select, combine and reduce as PyTorch's bool masks, with gradients reaching only
what was selected. References: NumPy (float64) and, for gradients, the selection's indicator."""
import numpy as np
import pytest

import mixprec
from helpers import rng

A = rng(21).standard_normal((4, 5)).astype(np.float32)
A[1, 2] = np.inf
A[3, 0] = np.nan


def test_comparisons_are_uint8_masks():
    t = mixprec.tensor(A)
    for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
        m = getattr(t, op)(0.0)
        assert m.dtype == mixprec.uint8
        np.testing.assert_array_equal(m.numpy(), getattr(A, op)(0.0).astype(np.uint8))
    m, n = t > 0, t < 0.5
    np.testing.assert_array_equal((~m).numpy(), (~(A > 0)).astype(np.uint8))
    np.testing.assert_array_equal((m & n).numpy(), ((A > 0) & (A < 0.5)).astype(np.uint8))
    np.testing.assert_array_equal((m | n).numpy(), ((A > 0) | (A < 0.5)).astype(np.uint8))
    np.testing.assert_array_equal((m ^ n).numpy(), ((A > 0) ^ (A < 0.5)).astype(np.uint8))
    assert m.sum().item() == int((A > 0).sum()) and m.sum().dtype == mixprec.int64
    assert m.any().item() == 1 and m.all().item() == 0
    np.testing.assert_array_equal(t.bool().numpy(), (A != 0).astype(np.uint8))


@pytest.mark.parametrize("dt", [mixprec.float32, mixprec.float64, mixprec.bfloat16])
def test_mask_indexing_selects_in_order_with_gradient(dt):
    x = mixprec.tensor(A, dtype=dt, requires_grad=True)
    mask = mixprec.tensor(A) > 0
    selected = x[mask]
    expected = mixprec.tensor(A, dtype=dt).float().numpy()[A > 0]
    np.testing.assert_array_equal(selected.detach().float().numpy(), expected)
    w = rng(22).standard_normal(selected.shape)
    (selected * mixprec.tensor(w, dtype=dt)).sum().backward()
    grad = np.zeros(A.shape)
    grad[A > 0] = mixprec.tensor(w, dtype=dt).float().numpy()
    np.testing.assert_array_equal(x.grad.float().numpy(), grad)


def test_row_masks_index_tensors_and_numpy_masks():
    t = mixprec.tensor(A)
    rows = np.array([True, False, True, False])
    np.testing.assert_array_equal(t[rows].numpy(), A[rows])
    np.testing.assert_array_equal(t[mixprec.tensor(rows.astype(np.uint8))].numpy(), A[rows])
    idx = mixprec.tensor([[3, 0], [-1, 1]])
    np.testing.assert_array_equal(t[idx].numpy(), A[np.array([[3, 0], [-1, 1]])])
    labels = mixprec.tensor([4, 1, 7, 2])
    np.testing.assert_array_equal(labels[labels > 1].numpy(), [4, 7, 2])
    with pytest.raises(IndexError, match="does not match"):
        t[np.ones((3, 5), bool)]
    with pytest.raises(IndexError, match="out of bounds"):
        t[mixprec.tensor([4])]


def test_where_and_masked_fill_keep_inf_and_nan_and_route_gradients():
    x = mixprec.tensor(A, requires_grad=True)
    y = mixprec.tensor(-A)
    out = mixprec.where(x.detach() > 0, x, y)
    np.testing.assert_array_equal(out.detach().numpy(), np.where(A > 0, A, -A))
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), (A > 0).astype(np.float32))
    # A number on either side and broadcasting, as torch.where.
    row = mixprec.tensor(A[0] > 0)
    np.testing.assert_array_equal(mixprec.where(row, mixprec.tensor(A), 0.0).numpy(),
                                  np.where(A[0] > 0, A, 0.0).astype(np.float32))
    filled = mixprec.tensor(A).masked_fill(mixprec.tensor(A) < 0, float("-inf"))
    np.testing.assert_array_equal(filled.numpy(), np.where(A < 0, -np.inf, A))
    assert mixprec.where(mixprec.tensor([1, 0], dtype=mixprec.uint8), 1.0, 2.0).tolist() == [1.0, 2.0]


def test_mask_assignment():
    t = mixprec.tensor(A)
    a = A.copy()
    t[t < 0] = 0.0
    a[a < 0] = 0.0
    np.testing.assert_array_equal(t.numpy(), a)
    t[t > 1] = mixprec.tensor([9.0])
    a[a > 1] = 9.0
    np.testing.assert_array_equal(t.numpy(), a)
    leaf = mixprec.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        leaf[leaf.detach() > 0] = 0.0
