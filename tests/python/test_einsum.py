"""mixprec.einsum against np.einsum in float64 (values), finite differences (gradients),
PyTorch 1.13's error messages, and torch itself side by side (values, gradients, and dtypes
under autocast: a contraction is a batched matmul, bf16 under autocast as torch's bmm)."""
import numpy as np
import pytest

import mixprec
from helpers import as_f64, check_grad, rng

# (equation, operand shapes): implicit and explicit outputs, diagonals, traces, ellipses,
# sums, outer and batched products, broadcast size-1 labels, several operands.
CASES = [
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk->ki", [(2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->ji", [(3, 3, 2)]),
    ("iji->j", [(3, 2, 3)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(3,), (3,)]),
    ("i,i", [(3,), (3,)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ijk->j", [(2, 3, 4)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
    ("...ij,jk", [(5, 2, 3), (3, 4)]),
    ("a...,...b", [(2, 3, 4), (3, 4, 5)]),
    ("i...->...", [(2, 3, 4)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("bn,anm,bm->ba", [(2, 5), (3, 5, 4), (2, 4)]),
    ("i,i,i->i", [(3,), (3,), (3,)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
    ("Ab,bc", [(2, 3), (3, 4)]),
    ("ij,kl->ijkl", [(2, 3), (4, 2)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),
    ("iij,jkk->ik", [(2, 2, 3), (3, 4, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
]


def _numpy_einsum(equation, *arrays):
    return np.einsum(equation.replace(" ", ""), *arrays)


@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0] for c in CASES])
def test_values_match_numpy_float64(equation, shapes):
    arrays = [rng(len(shapes) + k).standard_normal(s) for k, s in enumerate(shapes)]
    out = mixprec.einsum(equation, *[mixprec.tensor(a) for a in arrays])
    expected = _numpy_einsum(equation, *arrays)
    assert out.dtype == mixprec.float64
    assert tuple(out.shape) == expected.shape
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_float32_values_and_broadcast_size_one_labels():
    r = rng(3)
    a, b = r.standard_normal((4, 1, 3)).astype(np.float32), r.standard_normal((1, 5, 3)).astype(np.float32)
    # a label of size 1 broadcasts against the same label of another size (PyTorch's rule)
    out = mixprec.einsum("bij,bjk->bik", mixprec.tensor(a), mixprec.tensor(b.transpose(0, 2, 1).copy()))
    expected = np.einsum("bij,bjk->bik", np.broadcast_to(a, (4, 1, 3)).astype(np.float64),
                         np.broadcast_to(b.transpose(0, 2, 1), (4, 3, 5)).astype(np.float64))
    assert out.dtype == mixprec.float32
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
    v = mixprec.einsum("ij,j->i", mixprec.tensor(a[:, 0]), mixprec.tensor(np.ones(1, np.float32)))
    np.testing.assert_allclose(v.numpy(), a[:, 0].sum(1), rtol=1e-6)


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->ji", [(3, 3, 2)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("...ij,jk", [(2, 2, 3), (3, 2)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
    ("bn,anm,bm->ba", [(2, 3), (2, 3, 2), (2, 2)]),
    ("ijk,jil->kl", [(2, 3, 2), (3, 2, 2)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("iij,jkk->ik", [(2, 2, 3), (3, 2, 2)]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_gradients_match_finite_differences(equation, shapes):
    arrays = [rng(7 + k).standard_normal(s) for k, s in enumerate(shapes)]
    check_grad(lambda *ts: mixprec.einsum(equation, *ts), lambda *vs: np.einsum(equation, *vs), *arrays)


def test_repeated_label_gradient_reaches_only_the_diagonal():
    x = mixprec.tensor(np.arange(9.0).reshape(3, 3), requires_grad=True)
    mixprec.einsum("ii", x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.eye(3))


def test_list_and_sublist_forms_and_integers():
    r = rng(5)
    a, b = r.standard_normal((2, 3)), r.standard_normal((3, 4))
    ta, tb = mixprec.tensor(a), mixprec.tensor(b)
    expected = a @ b
    np.testing.assert_allclose(mixprec.einsum("ij,jk", [ta, tb]).numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(mixprec.einsum("ij,jk", (ta, tb)).numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(mixprec.einsum(ta, [0, 1], tb, [1, 2]).numpy(), expected, rtol=1e-12)
    np.testing.assert_allclose(mixprec.einsum(ta, [0, 1], tb, [1, 2], [2, 0]).numpy(), expected.T, rtol=1e-12)
    np.testing.assert_allclose(mixprec.einsum(ta, [Ellipsis, 1], tb, [1, 2]).numpy(), expected, rtol=1e-12)
    ia, ib = np.arange(6).reshape(2, 3) - 2, np.arange(12).reshape(3, 4)
    out = mixprec.einsum("ij,jk->ik", mixprec.tensor(ia), mixprec.tensor(ib))
    assert out.dtype == mixprec.int64
    np.testing.assert_array_equal(out.numpy(), ia @ ib)
    np.testing.assert_array_equal(mixprec.einsum("ii", mixprec.tensor(ib[:, :3])).numpy(), np.trace(ib[:, :3]))


def test_empty_dims_give_zeros_and_ones_shapes():
    out = mixprec.einsum("ij,jk->ik", mixprec.ones(2, 0), mixprec.ones(0, 3))
    np.testing.assert_array_equal(out.numpy(), np.zeros((2, 3)))
    assert mixprec.einsum("i,j,k->", mixprec.ones(0), mixprec.ones(2), mixprec.ones(3)).item() == 0.0


ERRORS = [
    ("ij,jk", [(2, 3)], "einsum(): fewer operands were provided than specified in the equation"),
    ("ij", [(2, 3), (3, 4)], "einsum(): more operands were provided than specified in the equation"),
    ("ijk", [(2, 3)], "einsum(): the number of subscripts in the equation (3) does not match the number of "
                      "dimensions (2) for operand 0 and no ellipsis was given"),
    ("i...jkl", [(2, 3)], "einsum(): the number of subscripts in the equation (4) is more than the number of "
                          "dimensions (2) for operand 0"),
    ("ii", [(2, 3)], "einsum(): subscript i is repeated for operand 0 but the sizes don't match, 3 != 2"),
    ("ij,jk", [(2, 3), (2, 3)], "einsum(): subscript j has size 2 for operand 1 which does not broadcast with "
                                "previously seen size 3"),
    ("i1", [(2, 3)], "einsum(): invalid subscript given at index 1 in the equation string, subscripts must be "
                     "in [a-zA-Z]"),
    ("ij->k", [(2, 3)], "einsum(): output subscript k does not appear in the equation for any input operand"),
    ("ij->ii", [(2, 3)], "einsum(): output subscript i appears more than once in the output"),
    ("i.j", [(2, 3)], "einsum(): found '.' for operand 0 that is not part of any ellipsis"),
    ("...i...", [(2, 3)], "einsum(): found '.' for operand 0 for which an ellipsis was already found"),
    ("ij->..", [(2, 3)], "einsum(): found '.' for output that is not part of any ellipsis (...)"),
    ("...,...", [(2, 3), (4, 3)], "einsum(): dimension 0 covered by ellipsis in operand 1has size 4 which does not "
                                  "broadcast with previously seen ellipsis with size 2 for the respective dimension"),
]


@pytest.mark.parametrize("equation,shapes,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_malformed_equations_raise_pytorchs_errors(equation, shapes, message):
    with pytest.raises(RuntimeError) as info:
        mixprec.einsum(equation, *[mixprec.ones(*s) for s in shapes])
    assert str(info.value) == message


def test_missing_operands_raise_value_error():
    with pytest.raises(ValueError, match="must specify the equation string and at least one operand"):
        mixprec.einsum("ij")


# ---- torch 1.13 side by side ----------------------------------------------------------------

@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0] for c in CASES])
def test_matches_torch_values_gradients_and_autocast_dtypes(equation, shapes):
    torch = pytest.importorskip("torch")
    arrays = [rng(11 + k).standard_normal(s).astype(np.float32) for k, s in enumerate(shapes)]
    ours = [mixprec.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = mixprec.einsum(equation, *ours), torch.einsum(equation, *theirs)
    assert tuple(out.shape) == tuple(ref.shape) and out.dtype == mixprec.float32
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    w = rng(1).standard_normal(tuple(ref.shape)).astype(np.float32)
    out.backward(mixprec.tensor(w))
    ref.backward(torch.tensor(w))
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)

    # Under autocast: bf16 exactly where torch's einsum reaches bmm/dot; its values and gradients
    # within bf16 rounding.
    ours = [mixprec.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    with mixprec.autocast():
        out = mixprec.einsum(equation, *ours)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = torch.einsum(equation, *theirs)
    assert str(out.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(as_f64(out), ref.detach().double().numpy(), rtol=3e-2, atol=3e-2)
    out.float().backward(mixprec.tensor(w))
    ref.float().backward(torch.tensor(w))
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("equation,shapes,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_error_messages_are_torchs(equation, shapes, message):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as info:
        torch.einsum(equation, *[torch.ones(*s) for s in shapes])
    assert str(info.value).split("\n")[0] == message
