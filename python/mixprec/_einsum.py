"""torch.einsum: PyTorch 1.13's algorithm (aten/src/ATen/native/Linear.cpp) over mixprec's
differentiable ops, so its results, dtypes under autocast and errors are PyTorch's and
autograd needs nothing new.

Each operand's labels are aligned to one order (output labels first, then the contracted
ones), a repeated label on one operand takes the diagonal (a gather whose backward adds back),
and the operands are contracted left to right, as PyTorch 1.13 without opt_einsum: a label no
later operand has is summed at once; two operands that share contracted labels become one
batched matmul (permute, reshape, matmul), so under autocast that product runs in the
autocast dtype as PyTorch's bmm; labels summed by neither are multiplied elementwise."""
import builtins

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor, dtype
from ._views import permute, reshape

_LETTERS = 26
_ELLIPSIS = 2 * _LETTERS  # label codes: A-Z are 0..25, a-z are 26..51, as PyTorch's


def _code(label):
    return ord(label) - ord("A") if label.isupper() else ord(label) - ord("a") + _LETTERS


def _label(code):
    return chr(ord("A") + code) if code < _LETTERS else chr(ord("a") + code - _LETTERS)


def _is_label(char):
    return ("a" <= char <= "z") or ("A" <= char <= "Z")


def _fail(message):
    raise RuntimeError("einsum(): " + message)


def _parse_inputs(lhs, num_ops):
    """The label codes of each operand (_ELLIPSIS for '...')."""
    labels, seen_ellipsis, op, i = [[] for _ in range(num_ops)], False, 0, 0
    while i < len(lhs):
        char = lhs[i]
        if char == ".":
            if seen_ellipsis:
                _fail(f"found '.' for operand {op} for which an ellipsis was already found")
            if not (i + 2 < len(lhs) and lhs[i + 1] == "." and lhs[i + 2] == "."):
                _fail(f"found '.' for operand {op} that is not part of any ellipsis")
            i += 2
            labels[op].append(_ELLIPSIS)
            seen_ellipsis = True
        elif char == ",":
            op += 1
            if op >= num_ops:
                _fail("fewer operands were provided than specified in the equation")
            seen_ellipsis = False
        elif char != " ":
            if not _is_label(char):
                _fail(f"invalid subscript given at index {i} in the equation string, subscripts must be in [a-zA-Z]")
            labels[op].append(_code(char))
        i += 1
    if op != num_ops - 1:
        _fail("more operands were provided than specified in the equation")
    return labels


def _diagonal(op, first, second):
    """op's diagonal over dims first < second, in first's place (PyTorch's diagonal(0, first,
    second).movedim(-1, first)): a gather, so the gradient goes back to the diagonal."""
    from ._functions import _take
    shape = list(op.shape)
    out_shape = shape[:second] + shape[second + 1:]
    position = list(np.indices(out_shape, sparse=True)) if out_shape else []
    position.insert(second, position[first])
    flat = np.ravel_multi_index(tuple(np.broadcast_arrays(*position)), shape) if out_shape else np.zeros((), np.int64)
    return _take(op, flat, out_shape)


def _sum(t, dims, keepdim):
    return _C.sum(t, [builtins.int(d) for d in dims], keepdim) if dims else t


def _unsqueeze_end(t, count):
    return reshape(t, list(t.shape) + [1] * count) if count else t


def _sumproduct_pair(left, right, sum_dims):
    """(left * right).sum(sum_dims, keepdim=True) as one batched matmul (PyTorch's
    sumproduct_pair): dims in both and the output are the batch, dims of one side only are the
    rows or columns, the summed dims the inner product."""
    if not sum_dims:
        return _C.mul(left, right)
    lro, lo, ro, lro_size, lo_size, ro_size, sum_size = [], [], [], 1, 1, 1, 1
    for i in range(left.ndim):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in sum_dims:
            if sl and sr:
                if left.shape[i] != right.shape[i]:
                    raise RuntimeError("non-broadcast dimensions must match")
                sum_size *= left.shape[i]
            elif sl:
                left = _sum(left, [i], True)
            elif sr:
                right = _sum(right, [i], True)
        elif sl and sr:
            if left.shape[i] != right.shape[i]:
                raise RuntimeError("non-broadcast dimensions must match")
            lro.append(i)
            lro_size *= left.shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left.shape[i]
        else:
            ro.append(i)
            ro_size *= right.shape[i]
    out_size = [left.shape[d] for d in lro + lo] + [1] * len(sum_dims) + [right.shape[d] for d in ro]
    left = reshape(permute(left, *(lro + lo + sum_dims + ro)), lro_size, lo_size, sum_size)
    right = reshape(permute(right, *(lro + sum_dims + ro + lo)), lro_size, sum_size, ro_size)
    order = lro + lo + sum_dims + ro
    result = reshape(_C.matmul(left, right), out_size)
    return permute(result, *[order.index(d) for d in range(len(order))])


def _einsum(equation, operands):
    if not operands:
        _fail("must provide at least one operand")
    for op in operands:
        if not isinstance(op, Tensor):
            raise TypeError(f"einsum(): expected Tensor operands, got {type(op).__name__}")
    num_ops = len(operands)
    arrow = equation.find("->")
    lhs = equation if arrow < 0 else equation[:arrow]
    op_labels = _parse_inputs(lhs, num_ops)

    label_count, ell_num_dim = [0] * _ELLIPSIS, 0
    for i, (op, labels) in enumerate(zip(operands, op_labels)):
        nlabels = len(labels) - labels.count(_ELLIPSIS)
        has_ellipsis = _ELLIPSIS in labels
        if has_ellipsis:
            ell_num_dim = builtins.max(ell_num_dim, op.ndim - nlabels)
        for code in labels:
            if code != _ELLIPSIS:
                label_count[code] += 1
        if (nlabels > op.ndim) if has_ellipsis else (nlabels != op.ndim):
            _fail(f"the number of subscripts in the equation ({nlabels}) "
                  + ("is more than the number of dimensions (" if has_ellipsis else
                     "does not match the number of dimensions (")
                  + f"{op.ndim}) for operand {i}" + ("" if has_ellipsis else " and no ellipsis was given"))

    # Each label's place in the aligned order: the output's dims, then the contracted ones.
    perm_index_of, perm_index, ell_index, ell_in_output = [-1] * _ELLIPSIS, 0, 0, False
    if arrow < 0:  # implicit output: the ellipsis dims, then the labels seen once, A-Z then a-z
        perm_index, ell_in_output = ell_num_dim, True
        for code in range(_ELLIPSIS):
            if label_count[code] == 1:
                perm_index_of[code] = perm_index
                perm_index += 1
    else:
        rhs, i = equation[arrow + 2:], 0
        while i < len(rhs):
            char = rhs[i]
            if char == ".":
                if ell_in_output:
                    _fail("found '.' for output but an ellipsis (...) was already found")
                if not (i + 2 < len(rhs) and rhs[i + 1] == "." and rhs[i + 2] == "."):
                    _fail("found '.' for output that is not part of any ellipsis (...)")
                i += 2
                ell_index, ell_in_output = perm_index, True
                perm_index += ell_num_dim
            elif char != " ":
                if not _is_label(char):
                    _fail(f"invalid subscript given at index {len(lhs) + 2 + i} in the equation string, "
                          "subscripts must be in [a-zA-Z]")
                code = _code(char)
                if label_count[code] == 0 or perm_index_of[code] != -1:
                    _fail(f"output subscript {char}" + (" appears more than once in the output"
                                                        if perm_index_of[code] != -1 else
                                                        " does not appear in the equation for any input operand"))
                perm_index_of[code] = perm_index
                perm_index += 1
            i += 1
    out_num_dim = perm_index
    if not ell_in_output:
        ell_index = perm_index
        perm_index += ell_num_dim
    for code in range(_ELLIPSIS):
        if label_count[code] > 0 and perm_index_of[code] == -1:
            perm_index_of[code] = perm_index
            perm_index += 1

    # Check sizes, take diagonals of repeated labels, add the missing dims and align.
    label_size, ell_sizes, dim_counts, ops = [1] * _ELLIPSIS, [1] * ell_num_dim, [0] * perm_index, []
    for i, (op, labels) in enumerate(zip(operands, op_labels)):
        permutation, dim = [-1] * perm_index, 0
        for code in labels:
            if code == _ELLIPSIS:
                ndim = operands[i].ndim - (len(labels) - 1)
                for j in range(ell_num_dim - ndim, ell_num_dim):
                    if op.shape[dim] != 1:
                        if ell_sizes[j] not in (1, op.shape[dim]):
                            _fail(f"dimension {dim} covered by ellipsis in operand {i}has size {op.shape[dim]} which "
                                  f"does not broadcast with previously seen ellipsis with size {ell_sizes[j]} for "
                                  "the respective dimension")
                        ell_sizes[j] = op.shape[dim]
                        dim_counts[ell_index + j] += 1
                    permutation[ell_index + j] = dim
                    dim += 1
            elif permutation[perm_index_of[code]] == -1:
                if op.shape[dim] != 1:
                    if label_size[code] not in (1, op.shape[dim]):
                        _fail(f"subscript {_label(code)} has size {op.shape[dim]} for operand {i} which does not "
                              f"broadcast with previously seen size {label_size[code]}")
                    label_size[code] = op.shape[dim]
                    dim_counts[perm_index_of[code]] += 1
                permutation[perm_index_of[code]] = dim
                dim += 1
            else:  # a repeated label: the diagonal
                previous = permutation[perm_index_of[code]]
                if op.shape[dim] != op.shape[previous]:
                    _fail(f"subscript {_label(code)} is repeated for operand {i} but the sizes don't match, "
                          f"{op.shape[dim]} != {op.shape[previous]}")
                op = _diagonal(op, previous, dim)
        missing = permutation.count(-1)
        for k, p in enumerate(permutation):
            if p == -1:
                permutation[k] = dim
                dim += 1
        ops.append(permute(_unsqueeze_end(op, missing), *permutation))

    # Contract left to right; a dim is summed as soon as no later operand has it.
    while len(ops) > 1:
        a, b = ops.pop(0), ops.pop(0)
        sum_dims, a_dims, b_dims = [], [], []
        for dim in range(out_num_dim, perm_index):
            if a.shape[dim] != 1 and b.shape[dim] != 1:
                dim_counts[dim] -= 1
                if dim_counts[dim] == 1:
                    sum_dims.append(dim)
                    dim_counts[dim] = 0
            elif dim_counts[dim] == 1:
                if a.shape[dim] != 1:
                    a_dims.append(dim)
                    dim_counts[dim] = 0
                elif b.shape[dim] != 1:
                    b_dims.append(dim)
                    dim_counts[dim] = 0
        ops.insert(0, _sumproduct_pair(_sum(a, a_dims, True), _sum(b, b_dims, True), sum_dims))

    result = ops[0]
    if perm_index > out_num_dim:
        if num_ops > 1:  # every contracted dim is 1 by now
            return reshape(result, list(result.shape[:out_num_dim]))
        return _sum(result, range(out_num_dim, perm_index), False)
    return result


def _sublist_equation(args):
    """einsum(op1, sublist1, op2, sublist2, ..., [out_sublist]): the equation string."""
    def subscript(n):
        if n is Ellipsis:
            return "..."
        if 0 <= n < 2 * _LETTERS:
            return _label(n)
        raise ValueError("einsum(): subscript in subscript list is not within the valid range [0, 52)")
    equation = ",".join("".join(subscript(s) for s in sub) for sub in args[1::2])
    if len(args) % 2 == 1:
        return equation + "->" + "".join(subscript(s) for s in args[-1]), list(args[:-1:2])
    return equation, list(args[::2])


def einsum(*args):
    """torch.einsum(equation, *operands), einsum(equation, [operands]) and the sublist form
    einsum(op1, [0, 1], op2, [1, 2], [0, 2]). Integer operands are computed in float64 and
    rounded back to int64 (exact while every partial sum stays below 2^53)."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], Tensor):
        equation, operands = _sublist_equation(args)
    else:
        equation, operands = args[0], list(args[1:])
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = list(operands[0])
    if operands and all(isinstance(op, Tensor) for op in operands) and \
            not any(op.dtype.is_floating_point for op in operands):
        # The engine's matmul is for floating tensors; integers (no gradient) go through f64.
        out = _einsum(equation, [op._to_dtype(dtype.float64) for op in operands])
        return _C.from_numpy(np.ascontiguousarray(np.rint(out.numpy()).astype(np.int64)))
    return _einsum(equation, operands)
