"""Engine modules from Python: model files, built-in models, TransformerEncoderLayer."""
import os
import pathlib

import numpy as np
import pytest

import mixprec
import mixprec.nn as nn
import mixprec.nn.functional as F

MODELS = pathlib.Path(os.environ.get("MIXPREC_SOURCE_DIR", pathlib.Path(__file__).parents[2])) / "models"


def test_model_file_trains_through_its_python_parameters():
    mixprec.manual_seed(0)
    model = nn.from_file(MODELS / "cnn.yaml", (1, 28, 28), 10)
    names = [n for n, _ in model.named_parameters()]
    assert names[:2] == ["conv1.weight", "conv1.bias"] and len(names) == 8
    opt = mixprec.optim.Adam(model.parameters(), lr=1e-3)
    x, y = mixprec.randn(8, 1, 28, 28), mixprec.tensor(np.arange(8) % 10)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        assert all(p.grad is not None for p in model.parameters())  # the engine's grads
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_freezing_and_loading_reach_the_engine():
    model = nn.from_file(MODELS / "cnn.yaml", (1, 28, 28), 10)
    first = model.state_dict()["conv1.weight"]
    next(model.parameters()).requires_grad = False  # conv1.weight frozen
    model(mixprec.randn(2, 1, 28, 28)).sum().backward()
    assert dict(model.named_parameters())["conv1.weight"].grad is None
    assert dict(model.named_parameters())["conv1.bias"].grad is not None
    zeros = {k: np.zeros(tuple(v.shape), np.float32) for k, v in model.state_dict().items()}
    model.load_state_dict(zeros)
    with mixprec.no_grad():
        np.testing.assert_array_equal(model(mixprec.randn(2, 1, 28, 28)).numpy(), np.zeros((2, 10)))
    assert not first.numpy().any()  # state_dict tensors share the engine's memory


def test_assigning_an_engine_parameter_says_what_to_do():
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    with pytest.raises(AttributeError, match="load_state_dict"):
        setattr(layer, "linear1.weight", nn.Parameter(mixprec.zeros(16, 8)))


def test_built_in_model_and_its_geometry():
    model = nn.model("cnn")
    assert model.input_shape == (1, 28, 28) and model.num_classes == 10
    assert model(mixprec.randn(3, *model.input_shape)).shape == (3, 10)
    assert "resnet20" in nn.model_names()
    with pytest.raises(ValueError):
        nn.model("no-such-model")


def test_encoder_layer_eval_is_deterministic_and_train_drops_out():
    mixprec.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.5, batch_first=True)
    x = mixprec.randn(2, 5, 16)
    a, b = layer(x).detach().numpy(), layer(x).detach().numpy()
    assert not np.array_equal(a, b)  # dropout in training mode
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())


def test_engine_module_to_bfloat16():
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0).bfloat16()
    dtypes = {n: p.dtype for n, p in layer.named_parameters()}
    assert dtypes["linear1.weight"] == mixprec.bfloat16
    assert layer(mixprec.randn(5, 2, 16).bfloat16()).shape == (5, 2, 16)


def test_missing_model_file_is_a_file_not_found_error():
    with pytest.raises(FileNotFoundError, match="no-such.yaml"):
        nn.from_file(MODELS / "no-such.yaml", (1, 28, 28), 10)


@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_layer_key_padding_equals_the_unpadded_sequence(batch_first):
    # A sequence padded to S with src_key_padding_mask gives, at its own positions, what the
    # same sequence alone (unpadded) gives: a padded key's weight is exactly 0.
    mixprec.manual_seed(1)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    g = np.random.default_rng(5)
    x = g.standard_normal((3, 7, 16)).astype(np.float32)
    lengths = [7, 4, 2]
    mask = np.array([[p >= n for p in range(7)] for n in lengths])
    padded_in = x if batch_first else x.transpose(1, 0, 2).copy()
    layer.batch_first = batch_first
    out = layer(mixprec.tensor(padded_in), src_key_padding_mask=mask).detach().numpy()
    if not batch_first:
        out = out.transpose(1, 0, 2)
    layer.batch_first = True
    for b, n in enumerate(lengths):
        alone = layer(mixprec.tensor(x[b:b + 1, :n].copy())).detach().numpy()[0]
        np.testing.assert_allclose(out[b, :n], alone, rtol=1e-5, atol=1e-6)
    # And the mask changes what the padded sequences' own positions see.
    unmasked = layer(mixprec.tensor(x)).detach().numpy()
    assert not np.allclose(unmasked[1, :4], out[1, :4], atol=1e-4)


def test_encoder_layer_float_and_tensor_masks_and_bad_masks():
    mixprec.manual_seed(2)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    x = mixprec.randn(2, 5, 8)
    as_bool = np.zeros((2, 5), bool)
    as_bool[0, 3:] = True
    ref = layer(x, src_key_padding_mask=as_bool).detach().numpy()
    as_float = np.where(as_bool, -np.inf, 0.0).astype(np.float32)  # PyTorch's float form
    for m in (as_float, mixprec.tensor(as_float), as_bool.astype(np.uint8)):
        np.testing.assert_array_equal(layer(x, src_key_padding_mask=m).detach().numpy(), ref)
    with pytest.raises(ValueError, match=r"expected shape \(2, 5\)"):
        layer(x, src_key_padding_mask=np.zeros((5, 2), bool))
    with pytest.raises(ValueError, match="0 and 1"):
        layer(x, src_key_padding_mask=np.full((2, 5), 3))
    with pytest.raises(ValueError, match="NaN"):
        layer(x, src_key_padding_mask=np.full((2, 5), np.nan, np.float32))
    with pytest.raises(ValueError, match=r"expected shape \(5, 5\)"):
        layer(x, src_mask=np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"expected shape \(4, 5, 5\) \(batch \* nhead"):
        layer(x, src_mask=np.zeros((2, 5, 5), np.float32))  # 2 rows x 2 heads = 4 masks
    # Any other src_mask is added to the scores: all zeros changes nothing, a mask that hides
    # key 0 from every query changes every position.
    plain = layer(x).detach().numpy()
    np.testing.assert_allclose(layer(x, src_mask=np.zeros((5, 5), np.float32)).detach().numpy(), plain,
                               rtol=1e-6, atol=1e-6)
    hide0 = np.zeros((5, 5), bool)
    hide0[:, 0] = True
    hidden = layer(x, src_mask=hide0).detach().numpy()
    assert not np.allclose(hidden, plain, atol=1e-4)
    np.testing.assert_array_equal(layer(x, src_mask=np.where(hide0, -np.inf, 0).astype(np.float32)).detach().numpy(),
                                  hidden)
    # A per-head mask that is the same for every head is the 2-d one.
    np.testing.assert_array_equal(layer(x, src_mask=np.broadcast_to(hide0, (4, 5, 5))).detach().numpy(),
                                  layer(x, src_mask=hide0).detach().numpy())


def test_encoder_layer_causal_mask_hides_later_positions():
    # PyTorch's square subsequent mask (float -inf or bool above the diagonal): position i's
    # output does not depend on positions after i, and the layer's own mode is back after it.
    mixprec.manual_seed(3)
    layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    g = np.random.default_rng(6)
    x = g.standard_normal((2, 6, 16)).astype(np.float32)
    later = x.copy()
    later[:, 3:] = g.standard_normal((2, 3, 16))
    as_float = np.triu(np.full((6, 6), -np.inf, np.float32), k=1)
    as_bool = np.triu(np.ones((6, 6), bool), k=1)
    a = layer(mixprec.tensor(x), src_mask=as_float).detach().numpy()
    b = layer(mixprec.tensor(later), src_mask=as_bool).detach().numpy()
    np.testing.assert_array_equal(a[:, :3], b[:, :3])
    assert not np.allclose(a[:, 3:], b[:, 3:])
    c = layer(mixprec.tensor(x), is_causal=True).detach().numpy()
    np.testing.assert_array_equal(a, c)
    # Unmasked again: the first positions now see the later ones.
    d = layer(mixprec.tensor(x)).detach().numpy()
    assert not np.allclose(d[:, :3], a[:, :3])
    # With key padding as well.
    pad = np.zeros((2, 6), bool)
    pad[1, 4:] = True
    e = layer(mixprec.tensor(x), src_mask=as_float, src_key_padding_mask=pad).detach().numpy()
    np.testing.assert_array_equal(e[0], a[0])
    np.testing.assert_allclose(e[1, :4], a[1, :4], rtol=1e-5, atol=1e-6)
