"""Misuse raises a Python exception carrying the engine's message; nothing ends the
interpreter (a crash here fails the whole file)."""
import numpy as np
import pytest

import mixprec
import mixprec.nn.functional as F

x4 = mixprec.randn(2, 3, 8, 8)
x2 = mixprec.randn(4, 5)
labels = mixprec.tensor([0, 1, 2, 3])

CASES = {
    "conv2d on 2-D input": lambda: F.conv2d(x2, mixprec.randn(2, 5, 3, 3)),
    "conv2d channel mismatch": lambda: F.conv2d(x4, mixprec.randn(2, 4, 3, 3)),
    "conv2d kernel larger than input": lambda: F.conv2d(x4, mixprec.randn(2, 3, 9, 9)),
    "max_pool2d kernel 0": lambda: F.max_pool2d(x4, 0),
    "max_pool2d kernel too large": lambda: F.max_pool2d(x4, 9),
    "softmax dim out of range": lambda: F.softmax(x2, dim=5),
    "sum dim out of range": lambda: x2.sum(7),
    "mean dims repeated": lambda: x2.mean((0, 0)),
    "cross_entropy float targets": lambda: F.cross_entropy(x2, mixprec.zeros(4)),
    "cross_entropy target out of range": lambda: F.cross_entropy(x2, mixprec.tensor([0, 1, 2, 9])),
    "cross_entropy batch mismatch": lambda: F.cross_entropy(x2, mixprec.tensor([0, 1])),
    "nll_loss on 3-D": lambda: F.nll_loss(x4, labels),
    "mse_loss shape mismatch": lambda: F.mse_loss(x2, mixprec.randn(5, 4)),
    "layer_norm shape mismatch": lambda: F.layer_norm(x2, (4,)),
    "batch_norm channel mismatch": lambda: F.batch_norm(x4, mixprec.zeros(2), mixprec.ones(2), training=True),
    "embedding index out of range": lambda: F.embedding(mixprec.tensor([0, 10]), mixprec.randn(10, 3)),
    "embedding float indices": lambda: F.embedding(mixprec.tensor([0.0]), mixprec.randn(10, 3)),
    "reshape wrong size": lambda: x2.reshape(3, 3),
    "reshape two -1": lambda: x2.reshape(-1, -1),
    "transpose out of range": lambda: x2.transpose(0, 2),
    "permute not a permutation": lambda: x4.permute(0, 0, 1, 2),
    "flatten bad dims": lambda: x2.flatten(1, 0),
    "cat empty": lambda: mixprec.cat([]),
    "cat shape mismatch": lambda: mixprec.cat([x2, x4]),
    "stack shape mismatch": lambda: mixprec.stack([x2, mixprec.randn(5, 4)]),
    "dropout p=1": lambda: F.dropout(x2, 1.0),
    "negative shape": lambda: mixprec.zeros(-1, 2),
    "item of many": lambda: x2.item(),
    "item of none": lambda: mixprec.zeros(0).item(),
    "matmul mismatch": lambda: x2 @ x2,
    "add no broadcast": lambda: x2 + mixprec.randn(3),
    "int tensor requires grad": lambda: mixprec.tensor([1, 2]).requires_grad_(),
    "backward of int": lambda: mixprec.tensor([1]).sum().backward(),
    "backward without grad": lambda: x2.sum().backward(),
    "backward gradient shape": lambda: (mixprec.ones(3, requires_grad=True) * 2).backward(mixprec.ones(4)),
    "grad of wrong shape": lambda: setattr(mixprec.ones(3, requires_grad=True), "grad", mixprec.ones(2)),
    "linear dtype mismatch": lambda: F.linear(x2.bfloat16(), mixprec.randn(3, 5)),
    "relu of int": lambda: F.relu(labels),
    "softmax of int": lambda: F.softmax(labels, 0),
    "bf16 buffer": lambda: np.asarray(x2.bfloat16()),
    "optimizer on int tensor": lambda: mixprec.optim.SGD([labels], lr=0.1),
    "scaler with bad factor": lambda: mixprec.amp.GradScaler(backoff_factor=2.0),
    "narrow out of range": lambda: mixprec._mixprec.narrow(x2, 3, 5),
    "numpy of requires_grad": lambda: np.asarray(mixprec.ones(2, requires_grad=True)),
    "index out of range": lambda: x2[4],
    "from_numpy object array": lambda: mixprec.from_numpy(np.array([object()])),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_misuse_raises_a_python_error(case):
    with pytest.raises((ValueError, TypeError, RuntimeError, IndexError)) as info:
        CASES[case]()
    assert str(info.value), "the message must say what was wrong"


def test_a_repeated_dim_is_the_engines_error():
    # The engine refuses it (src/ops/reduce.cpp), as PyTorch does; the binding adds no check
    # of its own for floating tensors, so Python sees the C++ message.
    for call in (lambda: x2.mean((0, 0)), lambda: x2.sum((1, -1)), lambda: x2.mean((0, -2), True)):
        with pytest.raises(mixprec.InvalidArgumentError, match=r"dim \d appears twice") as info:
            call()
        assert isinstance(info.value, RuntimeError)  # what PyTorch raises
    with pytest.raises(mixprec.InvalidArgumentError, match="sum: dim 0 appears twice"):
        mixprec.tensor([[1, 2], [3, 4]]).sum((0, 0))  # int64: summed outside the engine
    np.testing.assert_allclose(x2.mean((1, 0)).item(), x2.numpy().astype(np.float64).mean(), rtol=1e-6)
