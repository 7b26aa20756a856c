"""Lifetimes across the NumPy boundary: views outliving tensors and the reverse, no leaks."""
import gc
import sys

import numpy as np

import mixprec


def test_numpy_view_outlives_its_tensor():
    t = mixprec.tensor(np.arange(1000, dtype=np.float32)) * 2.0
    view = t.numpy()
    del t
    gc.collect()
    mixprec.zeros(1000).fill_(-1.0)  # would reuse a freed block
    np.testing.assert_array_equal(view, np.arange(1000, dtype=np.float32) * 2)


def test_tensor_outlives_its_numpy_array():
    a = np.arange(1000, dtype=np.float32)
    t = mixprec.from_numpy(a)
    del a
    gc.collect()
    np.zeros(1000, dtype=np.float32)  # would reuse a freed block
    assert (t * 1.0).sum().item() == sum(range(1000))
    np.testing.assert_array_equal(t.numpy(), np.arange(1000, dtype=np.float32))


def test_create_free_cycles_leave_nothing_behind():
    a = np.ones((64, 64), dtype=np.float32)
    refs_before = sys.getrefcount(a)
    bytes_before = mixprec._mixprec._allocated_bytes()
    for _ in range(10_000):
        t = mixprec.from_numpy(a)
        v = (t + 1.0).numpy()
        assert v[0, 0] == 2.0
        del t, v
    gc.collect()
    assert sys.getrefcount(a) == refs_before  # every from_numpy released its array
    assert mixprec._mixprec._allocated_bytes() == bytes_before  # every result buffer freed


def test_gradient_of_a_from_numpy_leaf_is_the_engines():
    a = np.array([1.0, 2.0], dtype=np.float32)
    t = mixprec.from_numpy(a).requires_grad_()
    (t * t).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [2.0, 4.0])
    assert not np.shares_memory(t.grad.numpy(), a)
