"""torch.utils.data's samplers, IterableDataset and DataLoader(sampler=, batch_sampler=) in
mixprec.data: their contracts (coverage, replacement, weights, batching, lengths), seeded
reproducibility, and torch 1.13's argument rules and messages side by side. Random orders are
not torch's (another generator), so tests compare structure, not orders."""
import collections
import multiprocessing

import numpy as np
import pytest

import mixprec
from mixprec.utils.data import (BatchSampler, DataLoader, Dataset, IterableDataset, RandomSampler, Sampler,
                                SequentialSampler, SubsetRandomSampler, TensorDataset, WeightedRandomSampler,
                                get_worker_info, random_split)


def seeded(seed):
    return mixprec.Generator().manual_seed(seed)


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (compared with torch's)
        return type(e).__name__, str(e)
    return None


# ---------------------------------------------------------------- Generator
def test_generator_seeds_as_torch_and_replays():
    g = mixprec.Generator()
    assert g.initial_seed() == 67280421310721          # torch.Generator()'s default seed
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    state = g.get_state()
    first = list(RandomSampler(range(20), generator=g))
    g.set_state(state)
    assert list(RandomSampler(range(20), generator=g)) == first
    assert list(RandomSampler(range(20), generator=g)) != first       # the stream moves on
    s = mixprec.Generator().seed()
    assert isinstance(s, int) and s >= 0
    with pytest.raises(TypeError, match="generator must be a mixprec.Generator or None"):
        RandomSampler(range(3), generator=np.random.default_rng(0))


def test_generator_initial_seed_matches_torch():
    torch = pytest.importorskip("torch")
    assert mixprec.Generator().initial_seed() == torch.Generator().initial_seed()
    assert mixprec.Generator().manual_seed(-1).initial_seed() == torch.Generator().manual_seed(-1).initial_seed()


# ---------------------------------------------------------------- samplers
def test_sequential_and_random_sampler_cover_every_index_once():
    assert list(SequentialSampler(range(5))) == [0, 1, 2, 3, 4] and len(SequentialSampler(range(5))) == 5
    order = list(RandomSampler(range(50), generator=seeded(1)))
    assert sorted(order) == list(range(50)) and order != list(range(50))
    assert list(RandomSampler(range(50), generator=seeded(1))) == order       # same seed, same order
    assert list(RandomSampler(range(50), generator=seeded(2))) != order
    mixprec.manual_seed(3)
    a = list(RandomSampler(range(50)))
    b = list(RandomSampler(range(50)))
    mixprec.manual_seed(3)
    assert list(RandomSampler(range(50))) == a and a != b                     # global generator, new each time


def test_random_sampler_num_samples_and_replacement():
    # Without replacement and num_samples > n: whole permutations, then part of one more.
    draws = list(RandomSampler(range(4), num_samples=10, generator=seeded(0)))
    assert len(draws) == 10
    assert sorted(draws[0:4]) == sorted(draws[4:8]) == [0, 1, 2, 3] and len(set(draws[8:])) == 2
    s = RandomSampler(range(4), replacement=True, num_samples=1000, generator=seeded(0))
    draws = list(s)
    assert len(s) == len(draws) == 1000 and set(draws) == {0, 1, 2, 3}
    counts = np.bincount(draws, minlength=4)
    assert np.all(np.abs(counts - 250) < 4 * np.sqrt(1000 * 0.25 * 0.75))     # uniform, 4 sigma
    assert len(RandomSampler(range(7))) == 7


def test_subset_random_sampler_permutes_its_indices():
    s = SubsetRandomSampler([10, 20, 30, 40], generator=seeded(4))
    got = list(s)
    assert sorted(got) == [10, 20, 30, 40] and len(s) == 4
    assert list(SubsetRandomSampler([10, 20, 30, 40], generator=seeded(4))) == got


def test_weighted_sampler_follows_the_weights():
    weights = np.array([0.0, 1.0, 2.0, 0.0, 5.0])
    p = weights / weights.sum()
    n = 40000
    draws = np.array(list(WeightedRandomSampler(weights.tolist(), n, generator=seeded(11))))
    counts = np.bincount(draws, minlength=5)
    assert counts[0] == counts[3] == 0                                        # weight 0: never drawn
    sigma = np.sqrt(n * p * (1 - p))
    assert np.all(np.abs(counts - n * p) <= 4 * sigma + 1e-9), (counts, n * p)
    # The same seed gives the same draws; another a different one.
    again = list(WeightedRandomSampler(weights.tolist(), 50, generator=seeded(11)))
    assert again == draws[:50].tolist()
    assert list(WeightedRandomSampler(weights, 50, generator=seeded(12))) != again
    # Without replacement: distinct indices, the heavy ones first more often than not.
    firsts = collections.Counter()
    g = seeded(3)
    for _ in range(2000):
        d = list(WeightedRandomSampler([1.0, 1.0, 8.0], 3, replacement=False, generator=g))
        assert sorted(d) == [0, 1, 2]
        firsts[d[0]] += 1
    assert abs(firsts[2] / 2000 - 0.8) < 4 * np.sqrt(0.8 * 0.2 / 2000)    # P(first = 2) = 8/10
    # Zero weights come last without replacement (torch draws them after the others).
    assert sorted(list(WeightedRandomSampler([0.0, 1.0, 1.0], 3, replacement=False, generator=g))[:2]) == [1, 2]
    assert len(WeightedRandomSampler([1, 2], 9)) == 9
    assert WeightedRandomSampler([1, 2], 9).weights.dtype == mixprec.float64


def test_batch_sampler_groups_in_order():
    assert list(BatchSampler(SequentialSampler(range(10)), 3, False)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert list(BatchSampler(SequentialSampler(range(10)), 3, True)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert len(BatchSampler(range(10), 3, False)) == 4 and len(BatchSampler(range(10), 3, True)) == 3
    assert len(BatchSampler(range(9), 3, False)) == len(BatchSampler(range(9), 3, True)) == 3
    for n, bs, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (9, 3, False), (2, 5, True), (0, 2, False)]:
        # the built-in samplers' sliced path and the generic loop over any iterable agree
        assert list(BatchSampler(SequentialSampler(range(n)), bs, drop)) == list(BatchSampler(range(n), bs, drop))
    batches = list(BatchSampler(RandomSampler(range(23), generator=seeded(0)), 5, False))
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
    assert sorted(i for b in batches for i in b) == list(range(23))


def test_samplers_match_torch_where_torch_is_deterministic():
    torch = pytest.importorskip("torch")
    tdata = torch.utils.data
    for n, bs, drop in [(10, 3, False), (10, 3, True), (9, 3, True), (1, 4, False), (1, 4, True)]:
        ours = BatchSampler(SequentialSampler(range(n)), bs, drop)
        theirs = tdata.BatchSampler(tdata.SequentialSampler(range(n)), bs, drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
    for kw in [dict(), dict(num_samples=11), dict(replacement=True, num_samples=13)]:
        assert len(RandomSampler(range(5), **kw)) == len(tdata.RandomSampler(range(5), **kw))
    # Torch draws zero-weight indices last without replacement, as this does.
    t = tdata.WeightedRandomSampler([0.0, 1.0, 0.0], 3, replacement=False)
    assert list(t)[0] == 1 and list(WeightedRandomSampler([0.0, 1.0, 0.0], 3, replacement=False))[0] == 1


SAMPLER_ERRORS = [
    ("RandomSampler", lambda d: d.RandomSampler(range(3), replacement=1)),
    ("RandomSampler", lambda d: d.RandomSampler(range(3), num_samples=0)),
    ("RandomSampler", lambda d: d.RandomSampler([])),
    ("RandomSampler", lambda d: d.RandomSampler(range(3), num_samples=2.5)),
    ("Weighted", lambda d: d.WeightedRandomSampler([1, 2], 0)),
    ("Weighted", lambda d: d.WeightedRandomSampler([1, 2], True)),
    ("Weighted", lambda d: d.WeightedRandomSampler([1, 2], 2, replacement=1)),
    ("Weighted", lambda d: d.WeightedRandomSampler([[1, 2]], 2)),
    ("Weighted", lambda d: list(d.WeightedRandomSampler([1.0, -1.0], 2))),
    ("Weighted", lambda d: list(d.WeightedRandomSampler([0.0, 0.0], 2))),
    ("Weighted", lambda d: list(d.WeightedRandomSampler([1.0, float("nan")], 2))),
    ("Weighted", lambda d: list(d.WeightedRandomSampler([1.0, float("inf")], 2))),
    ("Weighted", lambda d: list(d.WeightedRandomSampler([1.0, 1.0], 3, replacement=False))),
    ("BatchSampler", lambda d: d.BatchSampler(range(3), 0, False)),
    ("BatchSampler", lambda d: d.BatchSampler(range(3), -2, False)),
    ("BatchSampler", lambda d: d.BatchSampler(range(3), 2, 1)),
    ("Sampler", lambda d: list(d.Sampler(None))),
    ("Sampler", lambda d: len(d.Sampler(None))),
]


@pytest.mark.parametrize("make", [m for _, m in SAMPLER_ERRORS], ids=[f"{n}{i}" for i, (n, _) in
                                                                      enumerate(SAMPLER_ERRORS)])
def test_sampler_errors_are_torchs(make):
    torch = pytest.importorskip("torch")
    ours, theirs = error_of(lambda: make(mixprec.utils.data)), error_of(lambda: make(torch.utils.data))
    assert theirs is not None and ours is not None
    assert ours[0] == theirs[0]
    if ours[0] != "TypeError":    # a missing len(): the class name differs
        assert ours[1] == theirs[1]


# ---------------------------------------------------------------- DataLoader with samplers
def rows(n):
    return TensorDataset(np.arange(n, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32), np.arange(n))


def labels(loader):
    return [b[1].numpy().tolist() for b in loader]


def test_loader_takes_a_sampler_and_a_batch_sampler():
    ds = rows(10)
    assert labels(DataLoader(ds, batch_size=4, sampler=SequentialSampler(ds))) == [[0, 1, 2, 3], [4, 5, 6, 7],
                                                                                   [8, 9]]
    assert labels(DataLoader(ds, batch_sampler=[[3, 1], [7]])) == [[3, 1], [7]]       # any iterable of lists
    picked = DataLoader(ds, batch_size=3, sampler=WeightedRandomSampler([0] * 9 + [1], 7, generator=seeded(0)))
    assert labels(picked) == [[9, 9, 9], [9, 9, 9], [9]] and len(picked) == 3
    by_sampler = labels(DataLoader(ds, batch_size=3, sampler=RandomSampler(ds, generator=seeded(5))))
    assert by_sampler == [list(b) for b in BatchSampler(RandomSampler(ds, generator=seeded(5)), 3, False)]
    loader = DataLoader(ds, batch_sampler=BatchSampler(SubsetRandomSampler([1, 3, 5, 7, 9], seeded(2)), 2, True))
    got = labels(loader)
    assert len(loader) == len(got) == 2 and all(len(b) == 2 for b in got)
    assert set(i for b in got for i in b) <= {1, 3, 5, 7, 9}
    # A sampler's indices reach a custom dataset's __getitem__ one by one.

    class Squares(Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return np.float32(i * i), i

    (x, y), = list(DataLoader(Squares(), batch_size=3, sampler=[5, 0, 2]))
    assert y.numpy().tolist() == [5, 0, 2] and x.numpy().tolist() == [25, 0, 4]


def test_loader_shuffle_with_a_generator_is_seeded():
    ds = rows(30)
    a = labels(DataLoader(ds, batch_size=7, shuffle=True, generator=seeded(9)))
    assert sorted(i for b in a for i in b) == list(range(30)) and [len(b) for b in a] == [7, 7, 7, 7, 2]
    assert labels(DataLoader(ds, batch_size=7, shuffle=True, generator=seeded(9))) == a
    loader = DataLoader(ds, batch_size=7, shuffle=True, generator=seeded(9))
    assert isinstance(loader.sampler, RandomSampler) and loader.generator is not None
    first, second = labels(loader), labels(loader)
    assert first == a and second != first                               # a new order each epoch


def test_loader_batch_size_none_gives_single_samples():
    ds = rows(3)
    out = list(DataLoader(ds, batch_size=None))
    assert len(out) == 3 and len(DataLoader(ds, batch_size=None)) == 3
    x, y = out[1]
    assert tuple(x.shape) == (2,) and y.shape == () and int(y.item()) == 1
    assert list(DataLoader(ds, batch_size=None, sampler=[2, 0]))[0][1].item() == 2


def test_loader_batch_size_none_matches_torch_structure():
    torch = pytest.importorskip("torch")
    ours = list(DataLoader(rows(3), batch_size=None))
    theirs = list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(
        torch.arange(3.0)[:, None] * torch.ones(1, 2), torch.arange(3)), batch_size=None))
    assert len(ours) == len(theirs)
    for (ox, oy), (tx, ty) in zip(ours, theirs):
        assert tuple(ox.shape) == tuple(tx.shape) and tuple(oy.shape) == tuple(ty.shape)
        np.testing.assert_array_equal(ox.numpy(), tx.numpy())


def test_default_collate_structures_match_torch():
    torch = pytest.importorskip("torch")
    from mixprec.utils.data import default_collate
    samples = [{"x": np.full(2, i, np.float32), "label": i, "name": f"s{i}", "pair": [i, float(i)]} for i in range(3)]
    ours = default_collate(samples)
    theirs = torch.utils.data.default_collate(samples)
    assert ours.keys() == theirs.keys() and ours["name"] == theirs["name"]
    for key in ("x", "label"):
        np.testing.assert_array_equal(ours[key].numpy(), theirs[key].numpy())
        assert str(ours[key].dtype).split(".")[-1] == str(theirs[key].dtype).split(".")[-1]
    assert len(ours["pair"]) == 2 and str(ours["pair"][1].dtype).endswith("float64")
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        default_collate([[1, 2], [1]])


class Dummy:
    """A map-style dataset (not a Dataset subclass, as torch allows)."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return np.float32(i)


class Counting(IterableDataset):
    """0..n-1, split among workers by get_worker_info() when split is set."""

    def __init__(self, n, split=False, sized=True):
        self.n, self.split, self.sized = n, split, sized

    def __iter__(self):
        info = get_worker_info()
        if not self.split or info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        if not self.sized:
            raise TypeError(f"object of type '{type(self).__name__}' has no len()")
        return self.n


LOADER_ERRORS = [
    dict(sampler="seq", shuffle=True),
    dict(batch_sampler="batches", batch_size=2),
    dict(batch_sampler="batches", shuffle=True),
    dict(batch_sampler="batches", sampler="seq"),
    dict(batch_sampler="batches", drop_last=True),
    dict(batch_size=None, drop_last=True),
    dict(batch_size=0),
    dict(batch_size=-1),
    dict(batch_size=2, drop_last=1),
    dict(iterable=True, shuffle=True),
    dict(iterable=True, sampler=[0, 1]),
    dict(iterable=True, batch_sampler=[[0]]),
    dict(iterable=True, batch_size=0),
]


@pytest.mark.parametrize("kw", LOADER_ERRORS, ids=lambda kw: "-".join(sorted(kw)))
def test_loader_sampler_argument_errors_are_torchs(kw):
    torch = pytest.importorskip("torch")
    kw = dict(kw)
    iterable = kw.pop("iterable", False)

    class TorchCounting(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    def make(data, counting):
        ds = counting if iterable else Dummy()
        args = {k: v for k, v in kw.items()}
        if args.get("sampler") == "seq":
            args["sampler"] = data.SequentialSampler(ds)
        if args.get("batch_sampler") == "batches":
            args["batch_sampler"] = [[0, 1], [2]]
        data.DataLoader(ds, **args)

    ours = error_of(lambda: make(mixprec.utils.data, Counting(3)))
    theirs = error_of(lambda: make(torch.utils.data, TorchCounting()))
    assert theirs is not None
    assert ours is not None and ours[0] == theirs[0]
    assert ours[1].split(" object at ")[0].split(", but got sampler=<")[0] == \
        theirs[1].split(" object at ")[0].split(", but got sampler=<")[0]


def test_loader_attributes_are_frozen_as_torchs():
    loader = DataLoader(rows(4))
    for name in ("batch_size", "sampler", "batch_sampler", "drop_last", "dataset", "persistent_workers"):
        with pytest.raises(ValueError, match=f"{name} attribute should not be set after DataLoader is initialized"):
            setattr(loader, name, None)
    loader.num_workers = 0  # not frozen


@pytest.mark.parametrize("case", range(8))
def test_loader_len_is_torchs(case):
    torch = pytest.importorskip("torch")

    def make(data, counting):
        return [lambda: data.DataLoader(Dummy(), batch_size=3),
                lambda: data.DataLoader(Dummy(), batch_size=3, drop_last=True),
                lambda: data.DataLoader(Dummy(), batch_size=None),
                lambda: data.DataLoader(Dummy(), batch_size=4, sampler=data.RandomSampler(
                    Dummy(), replacement=True, num_samples=9)),
                lambda: data.DataLoader(Dummy(), batch_sampler=data.BatchSampler(range(10), 3, True)),
                lambda: data.DataLoader(counting(7), batch_size=2),
                lambda: data.DataLoader(counting(7), batch_size=2, drop_last=True),
                lambda: data.DataLoader(counting(7), batch_size=None)][case]()

    class TorchCounting(torch.utils.data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

    assert len(make(mixprec.utils.data, Counting)) == len(make(torch.utils.data, TorchCounting))


def test_loader_len_of_an_unsized_iterable_dataset_is_a_type_error():
    with pytest.raises(TypeError, match="has no len"):
        len(DataLoader(Counting(3, sized=False)))


# ---------------------------------------------------------------- IterableDataset
def flat(loader):
    return [b.numpy().tolist() if hasattr(b, "numpy") else b for b in loader]


def test_iterable_dataset_in_this_process():
    assert flat(DataLoader(Counting(7), batch_size=3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert flat(DataLoader(Counting(7), batch_size=3, drop_last=True)) == [[0, 1, 2], [3, 4, 5]]
    assert flat(DataLoader(Counting(3), batch_size=None)) == [0, 1, 2]
    loader = DataLoader(Counting(4), batch_size=2)
    assert flat(loader) == flat(loader) == [[0, 1], [2, 3]]                   # every epoch anew
    both = Counting(2) + Counting(3)
    assert flat(DataLoader(both, batch_size=None)) == [0, 1, 0, 1, 2] and len(both) == 5
    with pytest.raises(NotImplementedError, match="should implement __iter__"):
        iter(IterableDataset())


@pytest.mark.parametrize("split", [False, True], ids=["whole-copy", "split-by-worker-info"])
@pytest.mark.parametrize("num_workers,batch_size,drop_last", [(2, 2, False), (3, 2, True), (2, None, False)])
def test_iterable_dataset_with_worker_processes(split, num_workers, batch_size, drop_last):
    loader = DataLoader(Counting(11, split=split), batch_size=batch_size, drop_last=drop_last,
                        num_workers=num_workers)
    got = flat(loader)
    # Each worker's own stream, batched, handed out one worker after the other (torch's order).
    streams = [list(range(w, 11, num_workers)) if split else list(range(11)) for w in range(num_workers)]
    if batch_size is None:
        per_worker = [s for s in streams]
    else:
        per_worker = [[s[i:i + batch_size] for i in range(0, len(s), batch_size)
                       if not (drop_last and len(s[i:i + batch_size]) < batch_size)] for s in streams]
    expected = []
    for k in range(max(len(p) for p in per_worker)):
        expected += [p[k] for p in per_worker if k < len(p)]
    assert got == expected
    assert not multiprocessing.active_children()


def test_iterable_dataset_with_workers_matches_torch():
    torch = pytest.importorskip("torch")

    class TorchCounting(torch.utils.data.IterableDataset):
        def __init__(self, n, split):
            self.n, self.split = n, split

        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            if not self.split or info is None:
                return iter(range(self.n))
            return iter(range(info.id, self.n, info.num_workers))

    for split in (False, True):
        for kw in [dict(batch_size=2), dict(batch_size=3, drop_last=True), dict(batch_size=None)]:
            ours = flat(DataLoader(Counting(11, split), num_workers=2, **kw))
            theirs = flat(torch.utils.data.DataLoader(TorchCounting(11, split), num_workers=2, **kw))
            assert ours == theirs, (split, kw)
        assert flat(DataLoader(Counting(5, split), batch_size=2)) == \
            flat(torch.utils.data.DataLoader(TorchCounting(5, split), batch_size=2))


def test_iterable_dataset_with_persistent_workers_restarts_each_epoch():
    loader = DataLoader(Counting(5, split=True), batch_size=2, num_workers=2, persistent_workers=True)
    first = flat(loader)
    pids = [p.pid for p in loader._processes.processes]
    assert first == [[0, 2], [1, 3], [4]]
    assert flat(loader) == first and [p.pid for p in loader._processes.processes] == pids
    loader._processes.shutdown()


def test_iterable_dataset_rejects_worker_threads():
    with pytest.raises(ValueError, match="worker_threads=True is for map-style datasets"):
        DataLoader(Counting(3), num_workers=2, worker_threads=True)


# ---------------------------------------------------------------- workers with samplers
@pytest.mark.parametrize("worker_threads", [False, True], ids=["processes", "threads"])
def test_workers_get_the_samplers_index_lists(worker_threads):
    ds = rows(37)

    def make(**kw):
        return DataLoader(ds, batch_sampler=BatchSampler(
            WeightedRandomSampler(np.arange(37.0), 50, generator=seeded(8)), 4, False), **kw)

    plain = labels(make())
    assert labels(make(num_workers=2, worker_threads=worker_threads)) == plain
    assert [len(b) for b in plain] == [4] * 12 + [2] and 0 not in {i for b in plain for i in b}
    sampled = DataLoader(ds, batch_size=5, sampler=RandomSampler(ds, generator=seeded(1)), num_workers=2,
                         worker_threads=worker_threads)
    assert labels(sampled) == labels(DataLoader(ds, batch_size=5, sampler=RandomSampler(ds, generator=seeded(1))))


def test_random_split_with_a_generator():
    ds = rows(20)
    a = [s.indices for s in random_split(ds, [5, 15], generator=seeded(3))]
    assert [s.indices for s in random_split(ds, [5, 15], generator=seeded(3))] == a
    assert sorted(a[0] + a[1]) == list(range(20))
    assert [s.indices for s in random_split(ds, [5, 15], generator=seeded(4))] != a
    with pytest.raises(TypeError, match="generator must be a mixprec.Generator"):
        random_split(ds, [5, 15], generator=3)


def test_custom_sampler_subclass():
    class Evens(Sampler):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(0, self.n, 2))

        def __len__(self):
            return (self.n + 1) // 2

    ds = rows(9)
    loader = DataLoader(ds, batch_size=2, sampler=Evens(9))
    assert labels(loader) == [[0, 2], [4, 6], [8]] and len(loader) == 3
