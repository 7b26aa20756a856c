"""The torch functions and Tensor methods composed from mixprec's ops (mixprec/_composites.py):
values against NumPy in float64, gradients against finite differences (helpers.check_grad),
PyTorch's edge cases (NaN, duplicates in scatter_add, zeros in cumprod) and errors; side by
side with torch 1.13 (values, gradients, error messages, dtypes under autocast) where it is
installed."""
import numpy as np
import pytest

import mixprec
from helpers import as_f64, check_grad, rng

A = rng(1).standard_normal((3, 4))
B = rng(2).standard_normal((3, 4))
V = rng(3).standard_normal(5)
SCATTER_INDEX = np.array([[0, 1, 2, 0], [2, 2, 1, 0]])       # repeats a target in dim 0
MASK = (rng(4).standard_normal((3, 4)) > 0)


def f32(a):
    return mixprec.tensor(np.asarray(a, dtype=np.float32))


def _np_scatter_add(base, index, src, dim):
    out = np.array(base, dtype=np.float64, copy=True)
    for pos in np.ndindex(*index.shape):
        target = list(pos)
        target[dim] = index[pos]
        out[tuple(target)] += src[pos]
    return out


def _np_lower_median(a, axis):
    return np.take_along_axis(np.sort(a, axis), np.full_like(np.sort(a, axis)[:1], (a.shape[axis] - 1) // 2)
                              if axis == 0 else
                              np.full(a.shape[:axis] + (1,) + a.shape[axis + 1:], (a.shape[axis] - 1) // 2),
                              axis).squeeze(axis)


def _np_cdist(x, y):
    return np.sqrt(((x[:, None, :] - y[None, :, :]) ** 2).sum(-1))


# (name, mixprec function of float64 leaves, NumPy float64 reference, inputs): every one is
# checked for values and for its gradient by finite differences.
GRAD_CASES = [
    ("mul", lambda a, b: a.mul(b), np.multiply, (A, B)),
    ("add_alpha", lambda a, b: a.add(b, alpha=2.5), lambda a, b: a + 2.5 * b, (A, B)),
    ("sub_alpha", lambda a, b: mixprec.sub(a, b, alpha=-3), lambda a, b: a + 3 * b, (A, B)),
    ("div", lambda a, b: a.div(b), np.divide, (A, B + 3)),
    ("neg", lambda a: a.neg(), np.negative, (A,)),
    ("square", lambda a: a.square(), np.square, (A,)),
    ("rsqrt", lambda a: a.rsqrt(), lambda a: 1 / np.sqrt(a), (np.abs(A) + 0.5,)),
    ("reciprocal", lambda a: mixprec.reciprocal(a), lambda a: 1 / a, (A + 3,)),
    ("frac", lambda a: a.frac(), lambda a: a - np.trunc(a), (A * 3 + 0.01,)),
    ("lerp", lambda a, b, w: a.lerp(b, w), lambda a, b, w: a + w * (b - a), (A, B, rng(5).uniform(0, 1, (3, 4)))),
    ("lerp_scalar", lambda a, b: mixprec.lerp(a, b, 0.75), lambda a, b: a + 0.75 * (b - a), (A, B)),
    ("addcmul", lambda a, b, c: a.addcmul(b, c, value=0.5), lambda a, b, c: a + 0.5 * b * c, (A, B, A * B)),
    ("addcdiv", lambda a, b, c: a.addcdiv(b, c, value=2), lambda a, b, c: a + 2 * b / c, (A, B, B * B + 1)),
    ("nan_to_num", lambda a: a.nan_to_num(), lambda a: a, (A,)),
    ("flip", lambda a: a.flip([0, 1]), lambda a: a[::-1, ::-1], (A,)),
    ("roll", lambda a: a.roll((1, -2), (0, 1)), lambda a: np.roll(a, (1, -2), (0, 1)), (A,)),
    ("roll_flat", lambda a: mixprec.roll(a, 5), lambda a: np.roll(a, 5), (A,)),
    ("diag_1d", lambda v: mixprec.diag(v, -1), lambda v: np.diag(v, -1), (V,)),
    ("diag_2d", lambda a: a.diag(1), lambda a: np.diag(a, 1), (A,)),
    ("diagonal_3d", lambda a: mixprec.diagonal(a, -1, 2, 0), lambda a: np.diagonal(a, -1, 2, 0),
     (rng(6).standard_normal((3, 2, 4)),)),
    ("trace", lambda a: mixprec.trace(a), np.trace, (A,)),
    ("rot90", lambda a: mixprec.rot90(a, 1, (0, 1)), lambda a: np.rot90(a, 1, (0, 1)), (A,)),
    ("rot90_k3", lambda a: mixprec.rot90(a, -1, (1, 0)), lambda a: np.rot90(a, -1, (1, 0)), (A,)),
    ("outer", lambda a, b: mixprec.outer(a, b), np.outer, (V, V[:3])),
    ("movedim", lambda a: mixprec.movedim(a, (0, 2), (2, 0)), lambda a: np.moveaxis(a, (0, 2), (2, 0)),
     (rng(7).standard_normal((2, 3, 4)),)),
    ("swapaxes", lambda a: mixprec.swapaxes(a, 0, 1), lambda a: a.swapaxes(0, 1), (A,)),
    ("unflatten", lambda a: a.unflatten(1, (2, -1)), lambda a: a.reshape(3, 2, 2), (A,)),
    ("reshape_as", lambda a: a.reshape_as(mixprec.zeros(4, 3)), lambda a: a.reshape(4, 3), (A,)),
    ("tile", lambda a: a.tile((2, 1, 2)), lambda a: np.tile(a, (2, 1, 2)), (A,)),
    ("repeat_interleave", lambda a: a.repeat_interleave(mixprec.tensor([1, 0, 3]), dim=0),
     lambda a: np.repeat(a, [1, 0, 3], 0), (A,)),
    ("repeat_interleave_flat", lambda a: mixprec.repeat_interleave(a, 2), lambda a: np.repeat(a, 2), (A,)),
    ("take_along_dim", lambda a: mixprec.take_along_dim(a, mixprec.tensor(np.argsort(A, 1)), 1),
     lambda a: np.take_along_axis(a, np.argsort(A, 1), 1), (A,)),
    ("take_along_flat", lambda a: mixprec.take_along_dim(a, mixprec.tensor([[3, 0], [11, 3]])),
     lambda a: a.reshape(-1)[[[3, 0], [11, 3]]], (A,)),
    ("hstack", lambda a, b: mixprec.hstack([a, b]), lambda a, b: np.hstack([a, b]), (A, B)),
    ("vstack", lambda a, v: mixprec.vstack([a, v]), lambda a, v: np.vstack([a, v]), (A, V[:4])),
    ("dstack", lambda a, b: mixprec.dstack([a, b]), lambda a, b: np.dstack([a, b]), (A, B)),
    ("column_stack", lambda v, a: mixprec.column_stack([v, a]), lambda v, a: np.column_stack([v, a]), (V[:3], A)),
    ("broadcast_to", lambda v: mixprec.broadcast_to(v[:4], (3, 4)), lambda v: np.broadcast_to(v[:4], (3, 4)),
     (V,)),
    ("scatter_add", lambda x, s: x.scatter_add(0, mixprec.tensor(SCATTER_INDEX), s),
     lambda x, s: _np_scatter_add(x, SCATTER_INDEX, s, 0), (A, B)),
    ("scatter_add_dim1", lambda x, s: mixprec.scatter_add(x, 1, mixprec.tensor(SCATTER_INDEX[:, :3]), s),
     lambda x, s: _np_scatter_add(x, SCATTER_INDEX[:, :3], s, 1), (A, B[:2])),
    ("scatter_unique", lambda x, s: x.scatter(1, mixprec.tensor([[2, 0], [1, 3], [0, 1]]), s),
     lambda x, s: _np_scatter_set(x, np.array([[2, 0], [1, 3], [0, 1]]), s), (A, B[:, :2])),
    ("index_add", lambda x, s: x.index_add(1, mixprec.tensor([3, 0, 3]), s, alpha=2),
     lambda x, s: _np_index_add(x, [3, 0, 3], 2 * s), (A, B[:, :3])),
    ("index_fill", lambda x: x.index_fill(1, mixprec.tensor([2, 0]), -1.5),
     lambda x: np.where(np.isin(np.arange(4), [2, 0]), -1.5, x), (A,)),
    ("masked_select", lambda x: x.masked_select(mixprec.tensor(MASK[0].astype(np.uint8))),
     lambda x: x[np.broadcast_to(MASK[0], x.shape)], (A,)),
    ("masked_fill", lambda x: mixprec.masked_fill(x, mixprec.tensor(MASK.astype(np.uint8)), 2.0),
     lambda x: np.where(MASK, 2.0, x), (A,)),
    ("median_dim", lambda x: x.median(1).values, lambda x: _np_lower_median(x, 1), (A,)),
    ("median_all", lambda x: mixprec.median(x), lambda x: np.sort(x.reshape(-1))[(x.size - 1) // 2], (A,)),
    ("kthvalue", lambda x: x.kthvalue(3, 0, keepdim=True).values, lambda x: np.sort(x, 0)[2:3], (A,)),
    ("quantile", lambda x: mixprec.quantile(x, 0.3, dim=1), lambda x: np.quantile(x, 0.3, axis=1), (A,)),
    ("quantile_all_q", lambda x: x.quantile(mixprec.tensor(np.array([0.0, 0.25, 0.9]))),
     lambda x: np.quantile(x, [0.0, 0.25, 0.9]), (A,)),
    ("cumprod", lambda x: x.cumprod(1), lambda x: np.cumprod(x, 1), (np.where(np.abs(A) < 0.3, 0.0, A),)),
    ("cdist", lambda x, y: mixprec.cdist(x, y), _np_cdist, (A, B[:2])),
    ("dist", lambda x, y: mixprec.dist(x, y), lambda x, y: np.sqrt(((x - y) ** 2).sum()), (A, B)),
    ("var_mean", lambda x: mixprec.var_mean(x, 1)[0] + 3 * mixprec.var_mean(x, 1)[1],
     lambda x: x.var(1, ddof=1) + 3 * x.mean(1), (A,)),
    ("std_mean", lambda x: mixprec.std_mean(x, 0, unbiased=False)[0], lambda x: x.std(0), (A,)),
    ("addmm", lambda c, a, b: mixprec.addmm(c, a, b, beta=0.5, alpha=2), lambda c, a, b: 0.5 * c + 2 * a @ b,
     (A[:, :3], A, B.T[:, :3])),
    ("baddbmm", lambda c, a, b: mixprec.baddbmm(c, a, b, alpha=-1), lambda c, a, b: c - a @ b,
     (rng(8).standard_normal((2, 3, 2)), rng(9).standard_normal((2, 3, 4)), rng(10).standard_normal((2, 4, 2)))),
    ("sign_has_zero_grad", lambda a: a.sign() + a, lambda a: np.sign(a) + a, (A,)),
]


def _np_scatter_set(base, index, src):
    out = np.array(base, copy=True)
    for pos in np.ndindex(*index.shape):
        out[pos[0], index[pos]] = src[pos]
    return out


def _np_index_add(base, index, src):
    out = np.array(base, copy=True)
    for j, i in enumerate(index):
        out[:, i] += src[:, j]
    return out


@pytest.mark.parametrize("name, fn, ref, inputs", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_values_and_gradients_against_numpy_float64(name, fn, ref, inputs):
    inputs = [np.ascontiguousarray(x) for x in inputs]  # finite differences perturb x.reshape(-1) in place
    leaves = [mixprec.tensor(x, dtype=mixprec.float64) for x in inputs]
    np.testing.assert_allclose(as_f64(fn(*leaves)), ref(*inputs), rtol=1e-12, atol=1e-12)
    check_grad(fn, ref, *inputs, rtol=1e-5, atol=1e-7)


def test_elementwise_values_in_float32_and_integers():
    x, y = f32(A), f32(B + 3)
    np.testing.assert_array_equal(x.mul(y).numpy(), (x * y).numpy())
    np.testing.assert_array_equal(mixprec.div(x, y).numpy(), (x / y).numpy())
    np.testing.assert_array_equal(x.div(y, rounding_mode="floor").numpy(),
                                  np.floor(A.astype(np.float32) / (B + 3).astype(np.float32)))
    np.testing.assert_array_equal(x.div(y, rounding_mode="trunc").numpy(),
                                  np.trunc(A.astype(np.float32) / (B + 3).astype(np.float32)))
    i = mixprec.tensor([-3, 0, 7])
    assert i.mul(2).dtype == mixprec.int64 and i.mul(2).tolist() == [-6, 0, 14]
    assert i.add(i, alpha=2).tolist() == [-9, 0, 21] and i.sub(1).tolist() == [-4, -1, 6]
    assert i.mul(0.5).dtype == mixprec.float32 and i.mul(0.5).tolist() == [-1.5, 0.0, 3.5]
    assert i.div(2).dtype == mixprec.float32 and i.div(2).tolist() == [-1.5, 0.0, 3.5]
    assert i.div(2, rounding_mode="floor").tolist() == [-2, 0, 3]
    assert i.div(2, rounding_mode="trunc").tolist() == [-1, 0, 3]
    assert i.neg().tolist() == [3, 0, -7] and mixprec.square(i).tolist() == [9, 0, 49]
    assert i.sign().tolist() == [-1, 0, 1] and i.reciprocal().dtype == mixprec.float32
    s = mixprec.tensor([-2.5, -0.0, 0.0, 3.0, float("nan"), float("inf"), -float("inf")])
    np.testing.assert_array_equal(s.sign().numpy(), [-1, 0, 0, 1, 0, 1, -1])  # 0 for NaN, as torch 1.13
    np.testing.assert_array_equal(s.trunc().numpy()[:4], [-2, 0, 0, 3])
    n = mixprec.nan_to_num(s, posinf=7.0)
    np.testing.assert_array_equal(n.numpy(), [-2.5, 0, 0, 3, 0, 7, np.finfo(np.float32).min])
    assert mixprec.nan_to_num(s.bfloat16()).float().numpy()[-1] == -mixprec.finfo(mixprec.bfloat16).max


def test_gradients_stop_at_non_finite_and_rounding():
    x = mixprec.tensor([1.0, float("nan"), float("inf"), -2.0], requires_grad=True)
    x.nan_to_num(nan=1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 0, 0, 1])
    y = mixprec.tensor([1.5, -0.5, 0.0], requires_grad=True)
    out = y.sign()
    assert out.requires_grad
    (out * 3).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0, 0, 0])


def test_cumprod_is_exact_with_zeros_and_negatives_and_routes_gradients():
    a = np.array([[2.0, -3.0, 0.0, 5.0, -1.5], [0.0, 0.0, 4.0, -2.0, 7.0]])
    x = mixprec.tensor(a, dtype=mixprec.float32, requires_grad=True)
    out = x.cumprod(1)
    np.testing.assert_array_equal(out.detach().numpy(), np.cumprod(a, 1).astype(np.float32))
    out.sum().backward()
    expect = np.zeros_like(a)  # d/dx_i sum_k prod_{j<=k} x_j, by brute force
    for r in range(2):
        for i in range(5):
            for k in range(i, 5):
                expect[r, i] += np.prod([a[r, j] for j in range(k + 1) if j != i])
    np.testing.assert_array_equal(x.grad.numpy(), expect.astype(np.float32))
    assert mixprec.cumprod(mixprec.tensor([2, -3, 4]), 0).tolist() == [2, -6, -24]


def test_scatter_add_adds_every_duplicate_and_gives_each_writer_the_gradient():
    base = mixprec.zeros(3, requires_grad=True)
    src = mixprec.tensor([1.0, 2.0, 3.0, 4.0, 5.0], requires_grad=True)
    index = mixprec.tensor([0, 2, 0, 0, 1])
    out = base.scatter_add(0, index, src)
    np.testing.assert_array_equal(out.detach().numpy(), [8, 5, 2])
    (out * mixprec.tensor([10.0, 20.0, 30.0])).sum().backward()
    np.testing.assert_array_equal(src.grad.numpy(), [10, 30, 10, 10, 20])   # grad.gather(0, index)
    np.testing.assert_array_equal(base.grad.numpy(), [10, 20, 30])
    ints = mixprec.tensor([1, 1, 1]).scatter_add(0, index[:3], mixprec.tensor([5, 6, 7]))
    assert ints.dtype == mixprec.int64 and ints.tolist() == [13, 1, 7]


def test_in_place_forms_write_into_the_tensor():
    x = f32(A)
    storage = x.data_ptr()
    x.addcmul_(f32(B), f32(B), value=0.5).addcdiv_(f32(A), f32(B * B + 1)).exp_().sqrt_().neg_()
    expect = -np.sqrt(np.exp(A + 0.5 * B * B + A / (B * B + 1)))
    np.testing.assert_allclose(x.numpy(), expect, rtol=1e-5)
    assert x.data_ptr() == storage
    y = f32(A)
    y.lerp_(f32(B), 0.25).masked_fill_(mixprec.tensor(MASK.astype(np.uint8)), 0.0)
    np.testing.assert_allclose(y.numpy(), np.where(MASK, 0, A + 0.25 * (B - A)), rtol=1e-6, atol=1e-7)
    z = mixprec.zeros(3, 4)
    z.scatter_(0, mixprec.tensor(SCATTER_INDEX[:, :1]), 1.0).index_add_(0, mixprec.tensor([2]), mixprec.ones(1, 4))
    np.testing.assert_array_equal(z.numpy(), [[1, 0, 0, 0], [0, 0, 0, 0], [2, 1, 1, 1]])
    z.index_fill_(1, mixprec.tensor([3]), -1).scatter_add_(1, mixprec.tensor([[0, 0]]), mixprec.ones(1, 2))
    np.testing.assert_array_equal(z.numpy()[:, 0], [3, 0, 2])
    leaf = mixprec.ones(2, requires_grad=True)
    for method, args in (("exp_", ()), ("addcmul_", (leaf, leaf)), ("uniform_", ()), ("normal_", ()),
                         ("mul_", (2.0,)), ("masked_fill_", (mixprec.tensor([1, 0], dtype=mixprec.uint8), 0.0))):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            getattr(leaf, method)(*args)
    with mixprec.no_grad():
        leaf.uniform_(-1, 1).normal_(3.0, 0.0)
    np.testing.assert_array_equal(leaf.detach().numpy(), [3, 3])


def test_random_fills_and_draws_follow_manual_seed_and_their_distribution():
    mixprec.manual_seed(5)
    u = mixprec.empty(20000).uniform_(-2, 6)
    assert -2 <= u.min().item() and u.max().item() < 6 and abs(u.mean().item() - 2) < 0.05
    n = mixprec.empty(20000, dtype=mixprec.float64).normal_(1.5, 2.0)
    assert abs(n.mean().item() - 1.5) < 0.05 and abs(n.std().item() - 2) < 0.05
    mixprec.manual_seed(5)
    np.testing.assert_array_equal(mixprec.empty(20000).uniform_(-2, 6).numpy(), u.numpy())
    b = mixprec.bernoulli(mixprec.full((20000,), 0.3))
    assert set(np.unique(b.numpy())) <= {0.0, 1.0} and abs(b.mean().item() - 0.3) < 0.02
    p = np.array([0.1, 0.0, 0.6, 0.3])
    draws = mixprec.multinomial(f32(p), 20000, replacement=True).numpy()
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / 20000, p, atol=0.015)
    rows = mixprec.multinomial(f32([[1, 1, 1, 0], [0, 5, 1, 1]]), 3).numpy()
    for row in rows:
        assert len(set(row.tolist())) == 3
    assert 3 not in rows[0] and 0 not in rows[1]
    first = np.array([mixprec.multinomial(f32(p), 1).item() for _ in range(4000)])
    np.testing.assert_allclose(np.bincount(first, minlength=4) / 4000, p, atol=0.03)
    m = mixprec.normal(mixprec.full((3, 10000), 2.0), 0.5)
    assert m.shape == (3, 10000) and abs(m.mean().item() - 2) < 0.02 and abs(m.std().item() - 0.5) < 0.02
    assert mixprec.normal(0.0, 1.0, size=(2, 3)).shape == (2, 3)


def test_order_statistics_edge_cases():
    x = mixprec.tensor([[3.0, float("nan"), 1.0, 2.0], [4.0, 1.0, 3.0, 2.0]])
    values, indices = x.median(1)
    assert np.isnan(values.numpy()[0]) and indices.tolist() == [1, 3] and values.numpy()[1] == 2
    assert np.isnan(mixprec.median(x).item())
    assert mixprec.nanmedian(x[0]).item() == 2.0
    v, i = mixprec.kthvalue(x, 4, 1)
    assert np.isnan(v.numpy()[0]) and v.numpy()[1] == 4 and i.tolist() == [1, 0]
    assert mixprec.tensor([5, 1, 3]).median().item() == 3
    q = mixprec.quantile(x, mixprec.tensor([0.5, 1.0]), dim=1, keepdim=True)
    assert q.shape == (2, 2, 1) and np.isnan(q.numpy()[:, 0]).all() and q.numpy()[:, 1, 0].tolist() == [2.5, 4.0]
    for how in ("lower", "higher", "nearest", "midpoint"):
        np.testing.assert_allclose(mixprec.quantile(f32(A), 0.4, 0, interpolation=how).numpy(),
                                   np.quantile(A.astype(np.float32), 0.4, axis=0, method=how), rtol=1e-6)
    mo = mixprec.mode(mixprec.tensor([[1, 2, 2, 3, 3], [4, 4, 0, 0, 9]]))
    assert mo.values.tolist() == [2, 0] and mo.indices.tolist() == [2, 3]


def test_index_results_without_gradient():
    x = mixprec.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, -1.0]])
    np.testing.assert_array_equal(x.nonzero().numpy(), np.argwhere(x.numpy()))
    assert [t.tolist() for t in mixprec.nonzero(x, as_tuple=True)] == [[0, 1, 1], [1, 0, 2]]
    u, inverse, counts = mixprec.unique(mixprec.tensor([3, 1, 3, 2, 1]), return_inverse=True, return_counts=True)
    assert u.tolist() == [1, 2, 3] and inverse.tolist() == [2, 0, 2, 1, 0] and counts.tolist() == [2, 1, 2]
    assert mixprec.unique(mixprec.tensor([[1, 2], [1, 2], [0, 5]]), dim=0).tolist() == [[0, 5], [1, 2]]
    assert mixprec.bincount(mixprec.tensor([0, 3, 3]), minlength=5).tolist() == [1, 0, 0, 2, 0]
    w = mixprec.bincount(mixprec.tensor([0, 3, 3]), weights=f32([0.5, 1, 2]))
    assert w.dtype == mixprec.float32 and w.tolist() == [0.5, 0, 0, 3]
    assert mixprec.count_nonzero(x).item() == 3 and mixprec.count_nonzero(x, 0).tolist() == [1, 1, 1]
    assert mixprec.any(x, 1).tolist() == [1, 1] and mixprec.all(x).item() == 0
    assert x.all(1, keepdim=True).shape == (2, 1) and x.any().item() == 1
    seq = f32([1, 3, 5, 7])
    assert mixprec.searchsorted(seq, f32([0, 3, 6, 9])).tolist() == [0, 1, 3, 4]
    assert mixprec.searchsorted(seq, f32([3, 7]), right=True).tolist() == [2, 4]
    assert mixprec.searchsorted(f32([[1, 3], [2, 4]]), f32([[3], [3]]), side="right").tolist() == [[2], [1]]
    b = mixprec.bucketize(f32([1, 2, 5]), f32([1, 3, 5]), out_int32=True)
    assert b.dtype == mixprec.int32 and b.tolist() == [0, 1, 2]
    assert mixprec.repeat_interleave(mixprec.tensor([2, 0, 1])).tolist() == [0, 0, 2]
    assert mixprec.logical_xor(f32([0, 1, 2]), f32([1, 1, 0])).tolist() == [1, 0, 1]
    assert mixprec.logical_not(f32([0, 2])).tolist() == [1, 0]
    assert mixprec.isclose(f32([1, 1.1, float("nan")]), f32([1, 1, float("nan")]), equal_nan=True).tolist() == [1, 0, 1]


def test_settings_and_dtype_information():
    assert mixprec.get_default_dtype() == mixprec.float32
    mixprec.set_default_dtype(mixprec.float32)
    with pytest.raises(NotImplementedError, match="float32 only"):
        mixprec.set_default_dtype(mixprec.float64)
    with pytest.raises(TypeError, match="floating-point"):
        mixprec.set_default_dtype(mixprec.int64)
    f = mixprec.finfo(mixprec.float32)
    assert (f.bits, f.eps, f.max, f.tiny, f.resolution, f.dtype) == (32, 2.0 ** -23, float(np.finfo(np.float32).max),
                                                                     2.0 ** -126, 1e-6, "float32")
    bf = mixprec.finfo(mixprec.bfloat16)
    assert bf.eps == 2.0 ** -7 and bf.max == (2 - 2.0 ** -7) * 2.0 ** 127 and bf.min == -bf.max
    assert mixprec.iinfo(mixprec.int64).max == 2 ** 63 - 1 and mixprec.iinfo(mixprec.uint8).min == 0
    mixprec.use_deterministic_algorithms(True)
    assert mixprec.are_deterministic_algorithms_enabled()
    mixprec.use_deterministic_algorithms(False)
    import mixprec.backends.cudnn as cudnn
    cudnn.benchmark = True
    mixprec.backends.cudnn.deterministic = True
    assert mixprec.backends.cudnn is cudnn and not cudnn.is_available() and mixprec.backends.mkldnn.enabled
    cudnn.benchmark = False


def test_small_methods():
    x = f32(A)
    assert x.ndimension() == 2 and x.new_empty(2, 5).shape == (2, 5)
    assert x.new_empty((3,), dtype=mixprec.float64).dtype == mixprec.float64
    e = mixprec.empty_like(x, dtype=mixprec.bfloat16)
    assert e.shape == x.shape and e.dtype == mixprec.bfloat16
    leaf = mixprec.ones(2, requires_grad=True)
    assert leaf.detach_() is leaf and not leaf.requires_grad
    with pytest.raises(NotImplementedError, match="x = x.detach()"):
        (mixprec.ones(2, requires_grad=True) * 2).detach_()
    assert mixprec.atleast_3d(mixprec.tensor(1.0)).shape == (1, 1, 1)
    assert [t.shape for t in mixprec.broadcast_tensors(f32(V[:4]), f32(A))] == [(3, 4), (3, 4)]


# ---- side by side with torch 1.13 ----------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


TORCH_CASES = [
    # (name, function of the library module and its tensors; called with mixprec and with torch)
    ("mul", lambda L, a, b: a.mul(b)), ("add", lambda L, a, b: L.add(a, b, alpha=-0.5)),
    ("sub", lambda L, a, b: a.sub(b, alpha=2)), ("div", lambda L, a, b: a.div(b.abs() + 1)),
    ("square", lambda L, a, b: L.square(a)), ("rsqrt", lambda L, a, b: (a.abs() + 0.1).rsqrt()),
    ("reciprocal", lambda L, a, b: (a + 4).reciprocal()), ("frac", lambda L, a, b: (a * 3).frac()),
    ("lerp", lambda L, a, b: L.lerp(a, b, 0.7)), ("lerp_t", lambda L, a, b: a.lerp(b, b.sigmoid())),
    ("addcmul", lambda L, a, b: L.addcmul(a, a, b, value=2)), ("addcdiv", lambda L, a, b: a.addcdiv(a, b.abs() + 1)),
    ("flip", lambda L, a, b: L.flip(a, [1])), ("roll", lambda L, a, b: a.roll(-1, 0)),
    ("roll_flat", lambda L, a, b: L.roll(a, 7)), ("diag", lambda L, a, b: L.diag(a[0], 2)),
    ("diag2", lambda L, a, b: a.diag(-1)), ("diagonal", lambda L, a, b: L.diagonal(a, 1)),
    ("trace", lambda L, a, b: L.trace(a)), ("rot90", lambda L, a, b: L.rot90(a, 3, [0, 1])),
    ("outer", lambda L, a, b: L.outer(a[0], b[1])), ("movedim", lambda L, a, b: L.movedim(a, 0, 1)),
    ("tile", lambda L, a, b: L.tile(a, (2,))), ("tile_m", lambda L, a, b: a.tile(2, 1, 1)),
    ("repeat_interleave", lambda L, a, b: a.repeat_interleave(2, dim=1)),
    ("take_along_dim", lambda L, a, b: L.take_along_dim(a, L.argsort(b, 1), 1)),
    ("column_stack", lambda L, a, b: L.column_stack([a[0], b[0]])), ("hstack", lambda L, a, b: L.hstack([a, b])),
    ("vstack", lambda L, a, b: L.vstack([a[0], b])), ("dstack", lambda L, a, b: L.dstack([a, b])),
    ("scatter_add", lambda L, a, b: a.scatter_add(0, L.tensor(SCATTER_INDEX), b[:2])),
    # src of index's shape: torch 1.13's backward fails for a larger src
    ("scatter", lambda L, a, b: L.scatter(a, 1, L.tensor([[3, 1], [0, 2], [2, 3]]), b[:, :2])),
    ("scatter_value", lambda L, a, b: a.scatter(0, L.tensor([[2, 0, 1, 1]]), -4.0)),
    ("index_add", lambda L, a, b: a.index_add(0, L.tensor([2, 2, 0]), b, alpha=3)),
    ("index_fill", lambda L, a, b: a.index_fill(0, L.tensor([1]), 9.0)),
    ("masked_select", lambda L, a, b: L.masked_select(a, b > 0)),
    ("median", lambda L, a, b: a.median(0).values), ("median_all", lambda L, a, b: L.median(a)),
    ("kthvalue", lambda L, a, b: L.kthvalue(a, 2, 1).values),
    ("quantile", lambda L, a, b: L.quantile(a, L.tensor([0.1, 0.5]), dim=0, keepdim=True)),
    ("quantile_all", lambda L, a, b: a.quantile(0.65)),
    ("cumprod", lambda L, a, b: a.cumprod(1)), ("cdist", lambda L, a, b: L.cdist(a, b)),
    ("cdist_p1", lambda L, a, b: L.cdist(a, b, p=1)), ("dist", lambda L, a, b: L.dist(a, b)),
    ("var_mean", lambda L, a, b: L.var_mean(a, 1)[0] * L.var_mean(a, 1)[1]),
    ("std_mean", lambda L, a, b: L.std_mean(a)[0] + L.std_mean(a)[1]),
    ("addmm", lambda L, a, b: L.addmm(a[:, :3], a, b.t()[:, :3], beta=2, alpha=0.5)),
    ("baddbmm", lambda L, a, b: L.baddbmm(a[None, :, :3], a[None], b.t()[None, :, :3])),
    ("nan_to_num", lambda L, a, b: L.nan_to_num(a / 0.0, nan=1.0)),
    ("broadcast_to", lambda L, a, b: L.broadcast_to(a[0], (2, 4))),
    ("sign", lambda L, a, b: L.sign(a) + a), ("unflatten", lambda L, a, b: a.unflatten(1, (2, 2))),
    ("number_first", lambda L, a, b: L.mul(2, a) + L.sub(1, b) + L.div(3, b)),
]


def _run_both(fn, arrays, grad=True):
    torch = _torch()
    results = []
    for lib, make in ((mixprec, lambda a: mixprec.tensor(a, requires_grad=grad)),
                      (torch, lambda a: torch.tensor(a, requires_grad=grad))):
        leaves = [make(a) for a in arrays]
        out = fn(lib, *leaves)
        grads = None
        if grad:
            w = rng(11).standard_normal(tuple(out.shape)).astype(np.float32)
            (out * lib.tensor(w)).sum().backward()
            grads = [leaf.grad.numpy() if leaf.grad is not None else np.zeros(leaf.shape, np.float32)
                     for leaf in leaves]
        results.append((out.detach().numpy(), out.dtype, grads))
    return results


@pytest.mark.parametrize("name, fn", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_values_and_gradients_match_torch(name, fn):
    arrays = [A.astype(np.float32), B.astype(np.float32)]
    (mv, md, mg), (tv, td, tg) = _run_both(fn, arrays)
    assert str(md).split(".")[-1] == str(td).split(".")[-1]
    assert mv.shape == tv.shape
    np.testing.assert_allclose(mv, tv, rtol=2e-6, atol=2e-6)
    if name == "scatter":  # torch gives every writer of a position the gradient; no duplicates here
        pass
    for g_mine, g_torch in zip(mg, tg):
        np.testing.assert_allclose(g_mine, g_torch, rtol=2e-5, atol=2e-6)


def test_cumprod_bits_equal_torch():
    torch = _torch()
    a = rng(12).uniform(-1.5, 1.5, (4, 300)).astype(np.float32)
    a[1, 10] = 0.0
    np.testing.assert_array_equal(mixprec.tensor(a).cumprod(1).numpy(), torch.tensor(a).cumprod(1).numpy())


INDEX_CASES = [
    ("nonzero", lambda L, a: L.nonzero(a > 0.3)), ("unique", lambda L, a: L.unique((a * 2).round().long())),
    ("unique_inv", lambda L, a: L.unique((a * 2).round().long(), return_inverse=True, return_counts=True)[1]),
    ("bincount", lambda L, a: L.bincount((a.abs() * 3).long().reshape(-1))),
    ("count_nonzero", lambda L, a: L.count_nonzero(a > 0, dim=1)),
    ("any", lambda L, a: L.any(a > 1, 0).long()), ("all", lambda L, a: L.all(a > -1).long()),
    ("searchsorted", lambda L, a: L.searchsorted(L.sort(a, 1).values, a[:, :2].contiguous(), right=True)),
    ("bucketize", lambda L, a: L.bucketize(a, L.tensor([-1.0, 0.0, 0.5]))),
    ("kthvalue_idx", lambda L, a: a.kthvalue(3, 0).indices), ("median_idx", lambda L, a: a.median(1).indices),
    ("logical_and", lambda L, a: L.logical_and(a > 0, a < 1).long()),
    ("logical_or", lambda L, a: L.logical_or(a > 1, a < -1).long()),
    ("isclose", lambda L, a: L.isclose(a, a + 1e-6).long()),
    ("repeat_interleave_counts", lambda L, a: L.repeat_interleave(L.tensor([1, 0, 2]))),
]


@pytest.mark.parametrize("name, fn", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_index_and_mask_results_match_torch(name, fn):
    (mv, md, _), (tv, td, _) = _run_both(lambda L, a: fn(L, a), [A.astype(np.float32)], grad=False)
    np.testing.assert_array_equal(mv, tv)
    assert str(md).split(".")[-1] == str(td).split(".")[-1]


BAD_CALLS = [
    ("flip_dup", lambda L, a: L.flip(a, [0, 0])),
    ("roll_align", lambda L, a: L.roll(a, (1, 2), 0)),
    ("movedim_count", lambda L, a: L.movedim(a, (0, 1), (0,))),
    ("diag_3d", lambda L, a: L.diag(a[None])),
    ("diagonal_same", lambda L, a: L.diagonal(a, 0, 1, 1)),
    ("rot90_dims", lambda L, a: L.rot90(a, 1, [0])),
    ("rot90_same", lambda L, a: L.rot90(a, 1, [1, 1])),
    ("scatter_oob", lambda L, a: a.scatter_add(0, L.tensor([[3, 0, 0, 0]]), a)),
    ("scatter_neg", lambda L, a: a.scatter(0, L.tensor([[-1, 0, 0, 0]]), a)),
    ("scatter_ndim", lambda L, a: a.scatter_add(0, L.tensor([0, 1]), a)),
    ("scatter_dtype", lambda L, a: a.scatter_add(0, L.tensor([[0, 1]]), a.double())),
    ("kthvalue_k", lambda L, a: a.kthvalue(5, 0)),
    ("quantile_q", lambda L, a: L.quantile(a, 1.5)),
    ("quantile_interp", lambda L, a: L.quantile(a, 0.5, interpolation="cubic")),
    ("quantile_int", lambda L, a: L.quantile(a.long(), 0.5)),
    ("div_mode", lambda L, a: a.div(a, rounding_mode="round")),
    ("trace_1d", lambda L, a: L.trace(a[0])),
    ("cdist_cols", lambda L, a: L.cdist(a, a[:, :2])),
    ("multinomial_many", lambda L, a: L.multinomial(a.abs()[0], 5)),
    ("multinomial_neg", lambda L, a: L.multinomial(a[0], 2, True)),
    ("bincount_neg", lambda L, a: L.bincount(L.tensor([-1, 2]))),
    ("searchsorted_side", lambda L, a: L.searchsorted(a[0], a[0], right=True, side="left")),
    ("take_along_ndim", lambda L, a: L.take_along_dim(a, L.tensor([0]), 1)),
    ("bernoulli_p", lambda L, a: L.bernoulli(a)),
    ("finfo_int", lambda L, a: L.finfo(L.int64)),
    ("iinfo_float", lambda L, a: L.iinfo(L.float32)),
    ("outer_2d", lambda L, a: L.outer(a, a[0])),
    ("index_add_count", lambda L, a: L.index_add(a, 0, L.tensor([0]), a)),
    ("uniform_range", lambda L, a: a.uniform_(2, 1)),
    ("normal_std", lambda L, a: a.normal_(0, -1)),
    ("unflatten_sizes", lambda L, a: L.unflatten(a, 1, (3, 2))),
    ("repeat_interleave_neg", lambda L, a: a.repeat_interleave(-1)),
    ("multinomial_nan", lambda L, a: L.multinomial(L.tensor([1.0, float("nan")]), 1)),
    ("multinomial_zero", lambda L, a: L.multinomial(L.tensor([0.0, 0.0]), 1)),
    ("bucketize_2d", lambda L, a: L.bucketize(a, a)),
]


@pytest.mark.parametrize("name, call", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_arguments_raise_torchs_errors(name, call):
    torch = _torch()
    a = A.astype(np.float32)
    with pytest.raises(Exception) as theirs:
        call(torch, torch.tensor(a))
    with pytest.raises(Exception) as ours:
        call(mixprec, mixprec.tensor(a))
    assert isinstance(ours.value, type(theirs.value)) or type(ours.value).__name__ == type(theirs.value).__name__, \
        (ours.value, theirs.value)
    first_line = str(theirs.value).splitlines()[0]
    if name != "bernoulli_p":  # torch's message names its internal argument p_in
        assert first_line.split(" (")[0] in str(ours.value) or str(ours.value) in first_line, \
            (str(ours.value), first_line)


def test_finfo_iinfo_fields_equal_torchs():
    torch = _torch()
    for name in ("float32", "float64", "float16", "bfloat16"):
        ours, theirs = mixprec.finfo(getattr(mixprec, name)), torch.finfo(getattr(torch, name))
        for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
            assert getattr(ours, field) == getattr(theirs, field), (name, field)
    for name in ("int64", "int32", "uint8"):
        ours, theirs = mixprec.iinfo(getattr(mixprec, name)), torch.iinfo(getattr(torch, name))
        for field in ("bits", "max", "min", "dtype"):
            assert getattr(ours, field) == getattr(theirs, field), (name, field)
    assert mixprec.finfo().eps == torch.finfo().eps


AUTOCAST_CASES = [
    ("addmm", lambda L, a, b: L.addmm(a[:, :3], a, b.t()[:, :3])),
    ("baddbmm", lambda L, a, b: L.baddbmm(a[None, :, :3], a[None], b.t()[None, :, :3])),
    ("outer", lambda L, a, b: L.outer(a[0], b[0])), ("cdist", lambda L, a, b: L.cdist(a, b)),
    ("lerp", lambda L, a, b: L.lerp(a, b, 0.3)), ("addcmul", lambda L, a, b: L.addcmul(a, a, b)),
    ("scatter_add", lambda L, a, b: a.scatter_add(0, L.tensor(SCATTER_INDEX), b)),
    ("median", lambda L, a, b: a.median()), ("quantile", lambda L, a, b: L.quantile(a, 0.5)),
    ("cumprod", lambda L, a, b: a.cumprod(0)), ("diag", lambda L, a, b: L.diag(a[0])),
    ("rsqrt", lambda L, a, b: (a.abs() + 1).rsqrt()), ("var_mean", lambda L, a, b: L.var_mean(a)[0]),
    ("dist", lambda L, a, b: L.dist(a, b)), ("nan_to_num", lambda L, a, b: a.nan_to_num()),
    ("flip", lambda L, a, b: a.flip(0)), ("mul", lambda L, a, b: a.mul(b)),
]


@pytest.mark.parametrize("name, fn", AUTOCAST_CASES, ids=[c[0] for c in AUTOCAST_CASES])
def test_dtypes_under_autocast_bfloat16_equal_torchs(name, fn):
    torch = _torch()
    a, b = A.astype(np.float32), B.astype(np.float32)
    with mixprec.autocast("cpu", dtype=mixprec.bfloat16):
        ours = fn(mixprec, mixprec.tensor(a), mixprec.tensor(b))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        theirs = fn(torch, torch.tensor(a), torch.tensor(b))
    assert str(ours.dtype).split(".")[-1] == str(theirs.dtype).split(".")[-1]
    np.testing.assert_allclose(as_f64(ours), theirs.double().numpy(), rtol=2e-2, atol=2e-2)
