"""mixprec.data: the DataLoader's batches, and Fashion-MNIST against a NumPy IDX parse."""
import gzip
import os
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


@pytest.mark.parametrize("worker_threads", [False, True], ids=["processes", "threads"])
@pytest.mark.parametrize("shuffle,drop_last", [(False, False), (True, False), (True, True)])
def test_loader_workers_give_the_same_batches_in_the_same_order(shuffle, drop_last, worker_threads):
    x = np.arange(37, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)
    for ds in (TensorDataset(x, np.arange(37)), Rows(37)):
        plain = batches(DataLoader(ds, batch_size=5, shuffle=shuffle, drop_last=drop_last, seed=3))
        loader = DataLoader(ds, batch_size=5, shuffle=shuffle, drop_last=drop_last, seed=3, num_workers=3,
                            prefetch_factor=2, worker_threads=worker_threads)
        from_workers = batches(loader)
        assert len(from_workers) == len(plain) == (7 if drop_last else 8)
        for a, b in zip(plain, from_workers):
            for u, v in zip(a, b):
                assert u.dtype == v.dtype
                np.testing.assert_array_equal(u, v)
    rows = Rows(40)
    list(DataLoader(rows, batch_size=4, num_workers=2, worker_threads=True))
    assert rows.threads and all(t.startswith("mixprec-loader") for t in rows.threads)


class WhoBuilds:
    """Samples that say which process built them, with that worker's info and what its
    worker_init_fn recorded there."""

    init_seen = None  # set by init() in the worker process

    def __len__(self):
        return 24

    def __getitem__(self, i):
        from mixprec.data import get_worker_info
        info = get_worker_info()
        return np.array([i, os.getpid(), info.id, info.num_workers, WhoBuilds.init_seen or -1], np.int64), info.seed


def record_init(worker_id):
    from mixprec.data import get_worker_info
    assert get_worker_info().id == worker_id
    WhoBuilds.init_seen = 100 + worker_id


def test_loader_workers_are_processes_with_their_info_init_and_seeds():
    from mixprec.data import get_worker_info
    from mixprec._loader_workers import worker_seed
    loader = DataLoader(WhoBuilds(), batch_size=4, num_workers=2, worker_init_fn=record_init, seed=10)
    epochs = []
    for _ in range(2):
        rows, seeds = zip(*[(r.numpy(), s.numpy()) for r, s in loader])
        epochs.append((np.concatenate(rows), np.concatenate(seeds)))
    for epoch, (rows, seeds) in enumerate(epochs):
        np.testing.assert_array_equal(rows[:, 0], np.arange(24))
        batch_of = np.arange(24) // 4
        np.testing.assert_array_equal(rows[:, 2], batch_of % 2)       # round robin over the workers
        np.testing.assert_array_equal(rows[:, 3], 2)
        np.testing.assert_array_equal(rows[:, 4], 100 + rows[:, 2])   # init ran in that worker
        assert set(rows[:, 1]) == {rows[0, 1], rows[4, 1]} and os.getpid() not in set(rows[:, 1])
        assert rows[0, 1] != rows[4, 1]                                # two processes
        for w in (0, 1):                                               # a new seed each epoch
            np.testing.assert_array_equal(seeds[rows[:, 2] == w], worker_seed(10, epoch, w))
    assert set(epochs[0][0][:, 1]).isdisjoint(epochs[1][0][:, 1])      # new processes each epoch
    assert get_worker_info() is None  # not in a worker


def test_loader_persistent_workers_keep_their_processes_between_epochs():
    import multiprocessing
    loader = DataLoader(WhoBuilds(), batch_size=4, num_workers=2, persistent_workers=True, seed=4)
    pids = [set(np.concatenate([r.numpy()[:, 1] for r, _ in loader])) for _ in range(2)]
    assert len(pids[0]) == 2 and pids[0] == pids[1]
    # An early break ends them; the next epoch starts new ones.
    for _ in loader:
        break
    assert not multiprocessing.active_children()
    assert set(np.concatenate([r.numpy()[:, 1] for r, _ in loader])).isdisjoint(pids[0])
    del loader
    import gc
    gc.collect()
    assert not multiprocessing.active_children()


class Typed:
    """Samples of every dtype a tensor has, and a nested batch (dict of tuple and list)."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        return i

    @staticmethod
    def collate(idx):
        v = np.array(idx, np.float32) / 3.0
        return {"f32": mixprec.from_numpy(v), "pair": (mixprec.tensor(v).bfloat16(), mixprec.tensor(v).half()),
                "list": [mixprec.from_numpy(np.array(idx, np.int64)), "text"],
                "grad": mixprec.tensor(v, requires_grad=True)}


def test_loader_process_batches_keep_dtypes_bits_and_structure():
    for plain, shipped in zip(DataLoader(Typed(), batch_size=3, collate_fn=Typed.collate),
                              DataLoader(Typed(), batch_size=3, collate_fn=Typed.collate, num_workers=2)):
        assert set(shipped) == set(plain) and isinstance(shipped["pair"], tuple)
        assert isinstance(shipped["list"], list) and shipped["list"][1] == "text"
        for a, b in [(plain["f32"], shipped["f32"]), (plain["pair"][0], shipped["pair"][0]),
                     (plain["pair"][1], shipped["pair"][1]), (plain["list"][0], shipped["list"][0]),
                     (plain["grad"], shipped["grad"])]:
            assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
            np.testing.assert_array_equal(a.detach().float().numpy(), b.detach().float().numpy())
        assert shipped["pair"][0].dtype == mixprec.bfloat16


class EngineOps:
    """Samples computed by mixprec's own ops (a matmul and a reduction) in the worker."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        mixprec.manual_seed(i)
        a = mixprec.randn(96, 96)
        return (a @ a).sum().detach(), mixprec.get_num_threads()


def test_loader_process_workers_run_mixprec_ops_after_the_loader_used_its_threads():
    # The loader's process has run OpenMP parallel regions before the workers fork (a
    # training step would have): the workers' own ops must not wait for that thread pool.
    x = mixprec.randn(512, 512)
    (x @ x).sum().item()
    plain = [(s.numpy().copy(), t.numpy().copy()) for s, t in DataLoader(EngineOps(), batch_size=2)]
    forked = [(s.numpy().copy(), t.numpy().copy()) for s, t in DataLoader(EngineOps(), batch_size=2, num_workers=2)]
    assert len(forked) == len(plain) == 4
    for (a, _), (b, threads) in zip(plain, forked):
        np.testing.assert_allclose(b, a, rtol=1e-5)  # 1 thread there, the caller's count here
        np.testing.assert_array_equal(threads, 1)  # one thread per worker


class Failing(Rows):
    """Rows whose sample `kill_at` ends its worker process, or `lambda_at` returns what cannot
    be pickled."""

    def __init__(self, n, kill_at=None, **kw):
        super().__init__(n, **kw)
        self.kill_at = kill_at

    def __getitem__(self, i):
        if i == self.kill_at:
            os._exit(3)  # as a crash in native code or the OOM killer would end it
        return super().__getitem__(i)


@pytest.mark.parametrize("worker_threads", [False, True], ids=["processes", "threads"])
def test_loader_worker_error_is_raised_at_its_batch_and_nothing_hangs(worker_threads):
    import multiprocessing
    loader = DataLoader(Rows(20, fail_at=13), batch_size=4, num_workers=2, worker_threads=worker_threads)
    got = []
    with pytest.raises(KeyError, match="sample 13 is damaged") as error:
        for b in loader:
            got.append(b)
    assert len(got) == 3  # batches 0-2 (samples 0-11) came before the damaged one
    if not worker_threads:  # the worker's traceback, as PyTorch gives it
        assert "in DataLoader worker process 1" in str(error.value) and "__getitem__" in str(error.value)
    # An early break stops the workers (the generator's close waits for them).
    import threading
    before = threading.active_count()
    for i, _ in enumerate(DataLoader(Rows(200), batch_size=2, num_workers=3, worker_threads=worker_threads)):
        if i == 2:
            break
    import gc
    gc.collect()
    assert threading.active_count() <= before
    assert not multiprocessing.active_children()


def test_loader_worker_that_dies_is_an_error_naming_it():
    import multiprocessing
    with pytest.raises(RuntimeError, match=r"DataLoader worker \(pid\(s\) \d+ \(exit code 3\)\) exited unexpectedly"):
        list(DataLoader(Failing(16, kill_at=9), batch_size=4, num_workers=2))
    assert not multiprocessing.active_children()


def test_loader_batch_that_cannot_be_sent_is_an_error_not_a_hang():
    def collate(samples):
        return lambda: samples  # a local function: pickle cannot send it

    with pytest.raises((AttributeError, TypeError, __import__("pickle").PicklingError),
                       match="(?i)pickle") as error:
        list(DataLoader(Rows(8), batch_size=4, num_workers=2, collate_fn=collate))
    assert "while sending a batch from DataLoader worker" in str(error.value)


def test_loader_spawned_workers_give_the_same_batches():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    ds = TensorDataset(x, np.arange(10))
    plain = batches(DataLoader(ds, batch_size=3, shuffle=True, seed=5))
    spawned = batches(DataLoader(ds, batch_size=3, shuffle=True, seed=5, num_workers=2,
                                 multiprocessing_context="spawn"))
    assert len(spawned) == len(plain) == 4
    for a, b in zip(plain, spawned):
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("worker_threads", [False, True], ids=["processes", "threads"])
def test_loader_worker_init_error_is_raised_and_nothing_hangs(worker_threads):
    def init(worker_id):
        if worker_id == 1:
            raise OSError("worker 1 cannot open its file")

    with pytest.raises(OSError, match="worker 1 cannot open its file"):
        list(DataLoader(Rows(16), batch_size=4, num_workers=3, worker_init_fn=init, worker_threads=worker_threads))


def test_loader_timeout_is_an_error_not_a_hang():
    import threading
    release = threading.Event()

    class Stuck(Rows):
        def __getitem__(self, i):
            if i == 4:
                release.wait()  # a sample that never comes (until the test lets it go)
            return super().__getitem__(i)

    loader = DataLoader(Stuck(12), batch_size=4, num_workers=2, timeout=0.2, worker_threads=True)
    got = []
    try:
        with pytest.raises(RuntimeError, match="timed out after 0.2 seconds"):
            for b in loader:
                got.append(b)
        assert len(got) <= 1  # batch 1 never came (batch 0 did, unless the host was slower than 0.2 s)
    finally:
        release.set()


class Sleeping(Rows):
    def __getitem__(self, i):
        if i == 4:
            import time
            time.sleep(3600)  # a sample that never comes: the loader ends this worker
        return super().__getitem__(i)


def test_loader_timeout_ends_process_workers():
    import multiprocessing
    with pytest.raises(RuntimeError, match="timed out after 0.5 seconds"):
        list(DataLoader(Sleeping(12), batch_size=4, num_workers=2, timeout=0.5))
    assert not multiprocessing.active_children()


def test_dataset_classes_and_random_split():
    from mixprec.utils.data import ConcatDataset, Dataset, Subset, random_split
    from mixprec.utils.data import DataLoader as UtilsLoader
    assert UtilsLoader is DataLoader                      # torch.utils.data's path

    class Squares(Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return np.float32(i * i), i

    both = Squares(3) + Squares(2)
    assert isinstance(both, ConcatDataset) and len(both) == 5
    assert [both[i][1] for i in range(5)] == [0, 1, 2, 0, 1] and both[-1][1] == 1
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        Dataset()[0]
    sub = Subset(Squares(10), [7, 2])
    assert len(sub) == 2 and sub[0][1] == 7
    mixprec.manual_seed(5)
    a, b = random_split(Squares(10), [7, 3])
    assert (len(a), len(b)) == (7, 3)
    assert sorted([a[i][1] for i in range(7)] + [b[i][1] for i in range(3)]) == list(range(10))
    mixprec.manual_seed(5)
    assert [s[1] for s in random_split(Squares(10), [7, 3])[0]] == [a[i][1] for i in range(7)]  # seeded
    assert [len(s) for s in random_split(Squares(10), [0.5, 0.3, 0.2])] == [5, 3, 2]
    assert [len(s) for s in random_split(Squares(11), [0.5, 0.5])] == [6, 5]   # remainder to the first
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length"):
        random_split(Squares(10), [3, 3])
    (x, y), = list(DataLoader(sub, batch_size=2))
    np.testing.assert_array_equal(y.numpy(), [7, 2])


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
    with pytest.raises(ValueError, match="multiprocessing_context can only be used with multi-process"):
        DataLoader(ds, multiprocessing_context="spawn")
    with pytest.raises(ValueError, match="should specify a valid start method in .*'spawn'.*but got "
                                         "multiprocessing_context='sapwn'"):
        DataLoader(ds, num_workers=2, multiprocessing_context="sapwn")
    with pytest.raises(TypeError, match="should be a valid context object"):
        DataLoader(ds, num_workers=2, multiprocessing_context=3)


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
