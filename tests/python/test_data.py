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


class Rows:
    """A map-style dataset with its own __getitem__ (the collate path), recording which threads
    read it."""

    def __init__(self, n, fail_at=None):
        self.n, self.fail_at, self.threads = n, fail_at, set()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        import threading
        self.threads.add(threading.current_thread().name)
        if i == self.fail_at:
            raise KeyError(f"sample {i} is damaged")
        return np.full(3, i, np.float32), i


def batches(loader):
    return [tuple(t.numpy().copy() for t in b) for b in loader]


@pytest.mark.parametrize("shuffle,drop_last", [(False, False), (True, False), (True, True)])
def test_loader_workers_give_the_same_batches_in_the_same_order(shuffle, drop_last):
    x = np.arange(37, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
    for ds in (TensorDataset(x, np.arange(37)), Rows(37)):
        plain = batches(DataLoader(ds, batch_size=5, shuffle=shuffle, drop_last=drop_last, seed=3))
        loader = DataLoader(ds, batch_size=5, shuffle=shuffle, drop_last=drop_last, seed=3, num_workers=3,
                            prefetch_factor=2)
        threaded = batches(loader)
        assert len(threaded) == len(plain) == (7 if drop_last else 8)
        for a, b in zip(plain, threaded):
            for u, v in zip(a, b):
                np.testing.assert_array_equal(u, v)
    rows = Rows(40)
    list(DataLoader(rows, batch_size=4, num_workers=2))
    assert rows.threads and all(t.startswith("mixprec-loader") for t in rows.threads)


def test_loader_workers_init_and_worker_info():
    from mixprec.data import get_worker_info
    seen = []

    def init(worker_id):
        info = get_worker_info()
        seen.append((worker_id, info.id, info.num_workers, info.seed))

    class Probe(Rows):
        def __getitem__(self, i):
            assert get_worker_info() is not None
            return super().__getitem__(i)

    list(DataLoader(Probe(64), batch_size=4, num_workers=2, worker_init_fn=init, seed=10))
    assert sorted(seen) == [(0, 0, 2, 10), (1, 1, 2, 11)]
    assert get_worker_info() is None  # not in a worker


def test_loader_worker_error_is_raised_at_its_batch_and_nothing_hangs():
    loader = DataLoader(Rows(20, fail_at=13), batch_size=4, num_workers=2)
    got = []
    with pytest.raises(KeyError, match="sample 13 is damaged"):
        for b in loader:
            got.append(b)
    assert len(got) == 3  # batches 0-2 (samples 0-11) came before the damaged one
    # An early break stops the workers (the generator's close waits for them).
    import threading
    before = threading.active_count()
    for i, _ in enumerate(DataLoader(Rows(200), batch_size=2, num_workers=3)):
        if i == 2:
            break
    import gc
    gc.collect()
    assert threading.active_count() <= before


def test_loader_worker_init_error_is_raised_and_nothing_hangs():
    def init(worker_id):
        if worker_id == 1:
            raise OSError("worker 1 cannot open its file")

    with pytest.raises(OSError, match="worker 1 cannot open its file"):
        list(DataLoader(Rows(16), batch_size=4, num_workers=3, worker_init_fn=init))


def test_loader_timeout_is_an_error_not_a_hang():
    import threading
    release = threading.Event()

    class Stuck(Rows):
        def __getitem__(self, i):
            if i == 4:
                release.wait()  # a sample that never comes (until the test lets it go)
            return super().__getitem__(i)

    loader = DataLoader(Stuck(12), batch_size=4, num_workers=2, timeout=0.2)
    got = []
    try:
        with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
            for b in loader:
                got.append(b)
        assert len(got) == 1
    finally:
        release.set()


def test_loader_rejects_what_torch_rejects():
    ds = TensorDataset(np.zeros((4, 1), np.float32))
    with pytest.raises(ValueError, match="num_workers option should be non-negative"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified"):
        DataLoader(ds, prefetch_factor=4)
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="timeout option should be non-negative"):
        DataLoader(ds, timeout=-1)


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
