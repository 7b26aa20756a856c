"""Views from shape ops and indexing (python/mixprec/_views.py): they share memory as
PyTorch's do (writes through either side are seen by the other, numpy() of a view shares it
too), the engine's ops give the values of the same data made contiguous, and gradients through
a view are the float64 reference's."""
import numpy as np
import pytest

import mixprec
import mixprec.nn.functional as F
from helpers import rng

A = rng(11).standard_normal((4, 6, 5)).astype(np.float32)

# name -> (mixprec view of t, the same view of a NumPy array)
VIEWS = {
    "transpose": (lambda t: t.transpose(0, 2), lambda a: a.transpose(2, 1, 0)),
    "t": (lambda t: t[0].t(), lambda a: a[0].T),
    "T": (lambda t: t[1].T, lambda a: a[1].T),
    "permute": (lambda t: t.permute(1, 2, 0), lambda a: a.transpose(1, 2, 0)),
    "view": (lambda t: t.view(24, 5), lambda a: a.reshape(24, 5)),
    "view -1": (lambda t: t.view(-1), lambda a: a.reshape(-1)),
    "reshape": (lambda t: t.reshape(2, 2, 30), lambda a: a.reshape(2, 2, 30)),
    "flatten": (lambda t: t.flatten(1), lambda a: a.reshape(4, 30)),
    "unsqueeze": (lambda t: t.unsqueeze(1), lambda a: a[:, None]),
    "squeeze": (lambda t: t[:, :1].squeeze(1), lambda a: a[:, 0]),
    "narrow": (lambda t: t.narrow(1, 2, 3), lambda a: a[:, 2:5]),
    "int": (lambda t: t[2], lambda a: a[2]),
    "int, int": (lambda t: t[1, 3], lambda a: a[1, 3]),
    "slice": (lambda t: t[1:3], lambda a: a[1:3]),
    "inner slice": (lambda t: t[:, 1:4, 2], lambda a: a[:, 1:4, 2]),
    "step": (lambda t: t[::2, :, 1::2], lambda a: a[::2, :, 1::2]),
    "ellipsis, None": (lambda t: t[..., None, 3], lambda a: a[..., None, 3]),
    "negative index": (lambda t: t[-1, -2], lambda a: a[-1, -2]),
    "transpose of a slice": (lambda t: t[1:, ::2].transpose(1, 2), lambda a: a[1:, ::2].transpose(0, 2, 1)),
    "view of a transpose": (lambda t: t.transpose(0, 1).view(6, 20), None),  # not viewable: raises
    "reshape of a transpose": (lambda t: t.transpose(1, 2)[0].reshape(-1), lambda a: a.transpose(0, 2, 1)[0].reshape(-1)),
}
SHARING = [k for k in VIEWS if k not in ("view of a transpose", "reshape of a transpose")]


@pytest.mark.parametrize("name", SHARING)
def test_a_view_shares_memory_both_ways(name):
    make, reference = VIEWS[name]
    base = mixprec.tensor(A)
    view = make(base)
    expected = reference(A)
    assert view.shape == expected.shape
    np.testing.assert_array_equal(view.numpy(), expected)
    assert base._shares_storage(view)
    # A write through the view reaches the base ...
    view.fill_(7.0)
    changed = A.copy()
    reference(changed)[...] = 7.0
    np.testing.assert_array_equal(base.numpy(), changed)
    # ... and a write into the base reaches the view and the view's NumPy array.
    as_numpy = view.numpy()
    assert np.shares_memory(as_numpy, base.numpy())
    base.copy_(mixprec.tensor(A))
    np.testing.assert_array_equal(view.numpy(), expected)
    np.testing.assert_array_equal(as_numpy, expected)


def test_view_refuses_what_reshape_copies():
    t = mixprec.tensor(A)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        VIEWS["view of a transpose"][0](t)
    r = VIEWS["reshape of a transpose"][0](t)
    np.testing.assert_array_equal(r.numpy(), VIEWS["reshape of a transpose"][1](A))
    assert not t._shares_storage(r)  # as PyTorch: a copy where no strides fit


def test_index_assignment_writes_into_the_tensor():
    t = mixprec.tensor(A)
    a = A.copy()
    t[1, 2:4] = 3.5
    a[1, 2:4] = 3.5
    t[:, 0, ::2] = mixprec.tensor([1.0, 2.0, 3.0])  # broadcast over the leading dim
    a[:, 0, ::2] = [1.0, 2.0, 3.0]
    t[2] = mixprec.tensor(A[0] * 2)
    a[2] = A[0] * 2
    np.testing.assert_array_equal(t.numpy(), a)
    leaf = mixprec.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf[0] = 1.0
    with mixprec.no_grad():
        leaf[0] = 1.0  # allowed without grad, as in PyTorch
    assert leaf[0].sum().item() == 30.0


def test_a_numpy_view_of_a_view_outlives_both():
    t = mixprec.tensor(A)
    arr = t.permute(2, 0, 1)[1:].numpy()
    del t
    import gc
    gc.collect()
    np.testing.assert_array_equal(arr, A.transpose(2, 0, 1)[1:])


OPS = {
    "add": lambda x: x + x * 2.0,
    "matmul": lambda x: x @ x.transpose(-1, -2),
    "relu": lambda x: F.relu(x - 0.1),
    "softmax": lambda x: F.softmax(x, dim=-1),
    "log_softmax": lambda x: F.log_softmax(x, dim=1),
    "sum dims": lambda x: x.sum((0, 2)),
    "mean": lambda x: x.mean(-1),
    "exp": lambda x: x.exp(),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "cast bf16": lambda x: x.bfloat16(),
    "cast f16": lambda x: x.half(),
    "contiguous": lambda x: x.contiguous(),
    "cat": lambda x: mixprec.cat([x, x], 1),
}


@pytest.mark.parametrize("view_name", ["transpose", "permute", "step", "transpose of a slice"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_ops_on_a_strided_view_equal_ops_on_its_copy(view_name, op):
    make, reference = VIEWS[view_name]
    view = make(mixprec.tensor(A))
    dense = mixprec.tensor(np.ascontiguousarray(reference(A)))
    got, want = OPS[op](view), OPS[op](dense)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


def test_conv_and_pool_on_a_permuted_stepped_view():
    nhwc = rng(12).standard_normal((2, 7, 6, 3)).astype(np.float32)
    view = mixprec.tensor(nhwc).permute(0, 3, 1, 2)[:, :, 1:, ::2]  # no memory format oneDNN takes
    dense = mixprec.tensor(np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2)[:, :, 1:, ::2]))
    w = mixprec.tensor(rng(13).standard_normal((4, 3, 3, 3)).astype(np.float32))
    np.testing.assert_array_equal(F.conv2d(view, w, padding=1).numpy(), F.conv2d(dense, w, padding=1).numpy())
    np.testing.assert_array_equal(F.max_pool2d(view, 2).numpy(), F.max_pool2d(dense, 2).numpy())


GRAD_VIEWS = ["transpose", "permute", "view", "reshape", "flatten", "unsqueeze", "squeeze",
              "narrow", "int", "int, int", "slice", "inner slice", "ellipsis, None",
              "negative index", "reshape of a transpose"]


@pytest.mark.parametrize("name", GRAD_VIEWS)
def test_gradients_through_a_view(name):
    make, reference = VIEWS[name]
    x = mixprec.tensor(A.astype(np.float64), requires_grad=True)
    out = make(x)
    w = rng(14).standard_normal(out.shape)
    (out * mixprec.tensor(w, dtype=mixprec.float64)).sum().backward()
    # d sum(view(x) * w) / dx: w added back where each view element reads x (the same view of
    # the elements' flat positions says where).
    expected = np.zeros(A.size)
    np.add.at(expected, reference(np.arange(A.size).reshape(A.shape)).ravel(), w.ravel())
    expected = expected.reshape(A.shape)
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_a_stepped_slice_with_grad_says_what_to_do():
    x = mixprec.tensor(A, requires_grad=True)
    with pytest.raises(NotImplementedError, match="step"):
        x[::2]
    with mixprec.no_grad():
        assert x[::2].shape == (2, 6, 5) and not x[::2].requires_grad


def test_a_leaf_made_from_a_view_gets_its_gradient():
    base = mixprec.tensor(A[0])
    leaf = base.t().requires_grad_()  # a strided leaf: the ops copy it with a backward
    w = rng(15).standard_normal((5, 6)).astype(np.float32)
    (F.relu(leaf) * mixprec.tensor(w)).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), w * (A[0].T > 0))


def test_a_parameter_from_a_strided_view_is_dense_and_trains():
    p = mixprec.nn.Parameter(mixprec.tensor(A[0]).t())
    assert p.is_contiguous() and p.shape == (5, 6)
    opt = mixprec.optim.SGD([p], lr=0.5)
    (p * 2.0).sum().backward()
    opt.step()
    np.testing.assert_array_equal(p.detach().numpy(), A[0].T - np.float32(0.5) * 2)
