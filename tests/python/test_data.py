"""mixprec.data: the DataLoader's batches, and Fashion-MNIST against a NumPy IDX parse."""
import gzip
import pathlib

import numpy as np
import pytest

import mixprec
from mixprec.data import DataLoader, TensorDataset, fashion_mnist

FASHION = pathlib.Path(mixprec.data.DEFAULT_FASHION_MNIST)


def epoch_rows(loader):
    return np.concatenate([x.numpy()[:, 0] for x, _ in loader])


def test_loader_batches_every_sample_once_per_epoch():
    x = np.arange(10, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    y = np.arange(10)
    loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, seed=7)
    assert len(loader) == 3
    first = list(loader)
    assert [b[0].shape for b in first] == [(4, 3), (4, 3), (2, 3)]
    rows = np.concatenate([b[0].numpy()[:, 0] for b in first])
    labels = np.concatenate([b[1].numpy() for b in first])
    assert sorted(rows) == list(range(10)) and np.array_equal(rows, labels)
    assert not np.array_equal(rows, np.arange(10))           # shuffled
    second = epoch_rows(loader)
    assert not np.array_equal(rows, second)                  # a new order each epoch
    again = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, seed=7)
    np.testing.assert_array_equal(epoch_rows(again), rows)   # same seed, same epoch: same order
    plain = DataLoader(TensorDataset(x, y), batch_size=4, drop_last=True)
    assert len(plain) == 2
    np.testing.assert_array_equal(epoch_rows(plain), np.arange(8))


def test_loader_seed_follows_manual_seed():
    ds = TensorDataset(np.arange(50, dtype=np.float32)[:, None], np.arange(50))
    mixprec.manual_seed(1)
    a = epoch_rows(DataLoader(ds, batch_size=8, shuffle=True))
    mixprec.manual_seed(1)
    np.testing.assert_array_equal(epoch_rows(DataLoader(ds, batch_size=8, shuffle=True)), a)


def test_loader_collates_a_map_style_dataset():
    class Squares:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.float32(i), i * i

    (x, y), = list(DataLoader(Squares(), batch_size=5))
    np.testing.assert_array_equal(x.numpy(), np.arange(5, dtype=np.float32))
    np.testing.assert_array_equal(y.numpy(), np.arange(5) ** 2)


def read_idx(path):
    data = gzip.open(path, "rb").read()
    rank = data[3]
    shape = np.frombuffer(data, dtype=">u4", count=rank, offset=4)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(shape)


def test_fashion_mnist_matches_the_idx_files():
    if not (FASHION / "t10k-images-idx3-ubyte.gz").exists():
        pytest.fail(f"{FASHION} is missing: scripts/setup installs dataset-fashion-mnist")
    ds = fashion_mnist("test")
    pixels = read_idx(FASHION / "t10k-images-idx3-ubyte.gz")
    labels = read_idx(FASHION / "t10k-labels-idx1-ubyte.gz")
    assert len(ds) == len(labels) == 10000
    x, y = ds[:100]
    assert x.shape == (100, 1, 28, 28) and y.dtype == mixprec.int64
    np.testing.assert_array_equal(y.numpy(), labels[:100])
    expected = (pixels[:100, None].astype(np.float32) / 255 - 0.2860) / 0.3530
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-6, atol=1e-6)
    raw, _ = fashion_mnist("test", normalize=False)[:1]
    np.testing.assert_allclose(raw.numpy()[0, 0], pixels[0] / 255.0, rtol=1e-6)


def test_fashion_mnist_errors():
    with pytest.raises(RuntimeError, match="no-such-dir"):
        fashion_mnist("train", root="/no-such-dir")
    with pytest.raises(ValueError, match="split"):
        fashion_mnist("validation")
