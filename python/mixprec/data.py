"""mixprec.data: datasets over NumPy arrays, a DataLoader (torch.utils.data's arguments), and
the built-in datasets read by the engine's validated readers."""
import bisect
import collections
import concurrent.futures
import itertools
import threading

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor
from ._loader_workers import (Fetcher, WorkerInfo, WorkerProcesses, _worker, default_collate,  # noqa: F401
                              default_convert, get_worker_info, start_method, worker_seed)
from ._functions import randperm
from ._samplers import (BatchSampler, Generator, RandomSampler, Sampler, SequentialSampler,  # noqa: F401 (torch's names)
                        SubsetRandomSampler, WeightedRandomSampler, _check_generator, _InfiniteConstantSampler,
                        _SeededShuffleSampler)
from ._tensor import from_numpy

DEFAULT_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


class Dataset:
    """torch.utils.data.Dataset: the base of a map-style dataset (subclasses define
    __getitem__ and __len__); `a + b` concatenates two."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """torch.utils.data.IterableDataset: a stream of samples (subclasses define __iter__). A
    DataLoader reads it in order, without a sampler; with num_workers > 0 every worker iterates
    its own copy of the whole dataset unless __iter__ splits the work by get_worker_info()."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """IterableDatasets one after the other (torch.utils.data.ChainDataset)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class ConcatDataset(Dataset):
    """Datasets one after the other (torch.utils.data.ConcatDataset)."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        k = bisect.bisect_right(self.cumulative_sizes, index)
        return self.datasets[k][index - (self.cumulative_sizes[k - 1] if k else 0)]


class Subset(Dataset):
    """The samples of `dataset` at `indices`, in that order (torch.utils.data.Subset)."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Subsets of the given lengths (or fractions summing to 1, PyTorch's rounding: the
    remainder one by one to the first ones) over a random permutation from `generator` (a
    mixprec.Generator) or else mixprec's global generator (manual_seed), as
    torch.utils.data.random_split."""
    _check_generator(generator)
    n = len(dataset)
    if all(0 <= f <= 1 for f in lengths) and abs(sum(lengths) - 1) < 1e-9 and sum(lengths) <= 1:
        counts = [int(np.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = (generator._randperm(n) if generator is not None else randperm(n).numpy()).tolist()
    starts = itertools.accumulate([0] + list(lengths[:-1]))
    return [Subset(dataset, order[s:s + k]) for s, k in zip(starts, lengths)]


class TensorDataset(Dataset):
    """Samples are the i-th rows of equally long arrays (NumPy arrays or tensors)."""

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("TensorDataset needs at least one array")
        self.arrays = [a.detach().numpy() if isinstance(a, Tensor) else np.asarray(a) for a in arrays]
        if any(len(a) != len(self.arrays[0]) for a in self.arrays):
            raise ValueError("Size mismatch between tensors: " + ", ".join(str(len(a)) for a in self.arrays))

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, index):
        # asarray, not ascontiguousarray: a 0-d row stays 0-d (torch gives tensor(5), not [5])
        return tuple(from_numpy(np.asarray(a[index], order="C")) for a in self.arrays)


class DataLoader:
    """Batches of a dataset (torch.utils.data.DataLoader's arguments and rules): a map-style
    dataset's samples in the order of `sampler` (default: in order, or shuffled with
    shuffle=True), grouped by `batch_sampler` (default: BatchSampler(sampler, batch_size,
    drop_last)); batch_size=None hands out single samples through collate_fn (default:
    default_convert). An IterableDataset is read in its own order (no sampler, no shuffle).

    shuffle=True without a sampler or generator is the engine's shuffle (the order
    `mixprec train` uses for the same seed and epoch; without a seed, one is drawn from the
    generator mixprec.manual_seed() seeds); with generator= (a mixprec.Generator) it is
    RandomSampler(dataset, generator=generator). Each iteration is a new epoch.

    num_workers > 0 builds the batches in that many worker processes, as PyTorch's DataLoader
    does (multiprocessing_context: None for Python's default start method, "fork" on Linux,
    or "spawn"/"forkserver", whose workers need a dataset and functions that pickle): up to
    prefetch_factor batches per worker ahead, handed out in order, the same batches in the
    same order as with num_workers=0 for a map-style dataset (the sampler runs in this
    process; the workers get index lists). With an IterableDataset each worker iterates its
    own copy (split it with get_worker_info()), its batches handed out in turn, one worker
    after the other, until every worker's iterator has ended. Each worker seeds Python's
    random, NumPy's global generator and mixprec's (get_worker_info().seed, new every epoch),
    runs worker_init_fn(worker_id), and uses one mixprec thread. An exception in a worker is
    raised by the iteration at its batch, with the worker's traceback; a worker that dies is an
    error naming its pid; timeout > 0 bounds the wait for each batch. persistent_workers keeps
    the processes from one completed epoch to the next (an early break or an error ends them).
    worker_threads=True (mixprec's own, map-style datasets only) runs the workers as threads
    of this process instead: no pickling and no copies of the dataset, but a pure-Python
    __getitem__ takes turns under the GIL (NumPy indexing and mixprec's ops release it)."""

    _initialized = False
    # What torch refuses to change once the loader is made (its samplers are made from them).
    _frozen = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=2, persistent_workers=False,
                 pin_memory_device="", seed=None, worker_threads=False):
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor != 2:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing.")
        if not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ValueError(f"prefetch_factor should be a positive integer, but got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None:
            if num_workers == 0:
                raise ValueError("multiprocessing_context can only be used with multi-process loading "
                                 "(num_workers > 0), but got num_workers=0")
            if worker_threads:
                raise ValueError("multiprocessing_context is for worker processes; worker_threads=True "
                                 "runs the workers as threads")
        _check_generator(generator)
        iterable = isinstance(dataset, IterableDataset)
        # torch's checks, in torch's order: the dataset's kind first.
        if iterable:
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, "
                                 f"but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
            if worker_threads and num_workers > 0:
                raise ValueError("worker_threads=True is for map-style datasets: an IterableDataset needs "
                                 "worker processes (worker_threads=False) or num_workers=0")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if seed is None:
            # The seed of the engine's shuffle and of the workers' seeds: from the loader's
            # generator when it has one (torch draws its workers' base seed from it), else
            # from mixprec's global one.
            seed = (int(generator._randint(2 ** 62, 1)[0]) if generator is not None
                    else int(_C._uniform([1], 0.0, 2.0 ** 31, _C.dtype.float64).item()))
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle and generator is None:
                sampler = _SeededShuffleSampler(dataset, seed)
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)  # checks both, as torch's
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, bool(drop_last)
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.shuffle = shuffle
        self._iterable = iterable
        self.collate_fn = collate_fn or (default_collate if self._auto_collation else default_convert)
        self.pin_memory, self.pin_memory_device = pin_memory, pin_memory_device  # no pinned memory on CPUs
        self.num_workers, self.prefetch_factor = num_workers, prefetch_factor
        self.worker_init_fn, self.timeout = worker_init_fn, timeout or None
        self.multiprocessing_context = start_method(multiprocessing_context)
        self.worker_threads = bool(worker_threads)
        self.persistent_workers = bool(persistent_workers)
        self._processes = None  # persistent_workers' WorkerProcesses
        self.seed, self.epoch = int(seed), 0
        self._initialized = True

    def __setattr__(self, name, value):
        if self._initialized and name in self._frozen:
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        object.__setattr__(self, name, value)

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        """What each request comes from: index lists (batch_sampler), else single indices."""
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._iterable:  # torch's estimate from the dataset's own length
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self._index_sampler)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def _requests(self):
        """What the Fetcher is asked for, one per batch: index lists or indices (map-style), a
        batch size or None (IterableDataset)."""
        if self._iterable:
            return itertools.repeat(self.batch_size)
        return iter(self._index_sampler)

    def __iter__(self):
        epoch = self.epoch
        self.epoch += 1
        if isinstance(self.sampler, _SeededShuffleSampler):
            self.sampler.set_epoch(epoch)
        requests = self._requests()
        fetcher = Fetcher(self.dataset, self.collate_fn, self._auto_collation, self._iterable, self.drop_last)
        if self.num_workers == 0:
            for request in requests:
                try:
                    batch = fetcher(request)
                except StopIteration:  # the IterableDataset has ended
                    return
                yield batch
        elif self.worker_threads:
            yield from self._prefetched(fetcher, requests, epoch)
        else:
            yield from self._from_processes(fetcher, requests, epoch)

    def _from_processes(self, fetcher, requests, epoch):
        workers = self._processes
        if workers is None or not workers.alive:
            seeds = [worker_seed(self.seed, epoch, w) for w in range(self.num_workers)]
            workers = WorkerProcesses(fetcher, self.num_workers, seeds, self.worker_init_fn,
                                      self.multiprocessing_context, self.prefetch_factor, self.timeout)
            self._processes = workers if self.persistent_workers else None
        try:
            yield from workers.iterate(requests)
        finally:
            if not self.persistent_workers:
                workers.shutdown()

    def _prefetched(self, fetcher, batches, epoch):
        """The batches (of a map-style dataset) built on num_workers threads, up to prefetch_factor each ahead, handed
        out in order."""
        started = itertools.count()
        # Every worker is started and initialised before the first batch, as PyTorch's: N
        # tasks that wait for each other at `ready` can only run on N threads. A worker whose
        # worker_init_fn fails breaks the barrier (the others do not wait for it) and keeps
        # its error for the caller; the initializer itself must not raise: the executor's
        # clean-up after a failed initializer can swallow shutdown's wake-up and leave the
        # other threads waiting forever (seen here, Python 3.11).
        ready = threading.Barrier(self.num_workers)
        init_errors = []

        def init():
            wid = next(started)  # itertools.count is safe across threads under the GIL
            _worker.info = WorkerInfo(wid, self.num_workers, worker_seed(self.seed, epoch, wid), self.dataset)
            if self.worker_init_fn is not None:
                try:
                    self.worker_init_fn(wid)
                except BaseException as e:  # noqa: B036 (handed to the caller below)
                    init_errors.append(e)
                    ready.abort()

        pool = concurrent.futures.ThreadPoolExecutor(self.num_workers, thread_name_prefix="mixprec-loader",
                                                     initializer=init)
        pending = collections.deque()
        timed_out = False
        try:
            try:
                for f in [pool.submit(ready.wait) for _ in range(self.num_workers)]:
                    f.result()
            except threading.BrokenBarrierError:
                raise init_errors[0] if init_errors else RuntimeError("DataLoader: a worker failed to start")
            for idx in itertools.islice(batches, self.num_workers * self.prefetch_factor):
                pending.append(pool.submit(fetcher, idx))
            while pending:
                batch = pending.popleft().result(timeout=self.timeout)
                for idx in itertools.islice(batches, 1):
                    pending.append(pool.submit(fetcher, idx))
                yield batch
        except concurrent.futures.TimeoutError:
            timed_out = True
            raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds") from None
        finally:  # an early break or an error: drop what is queued, wait for what runs
            for f in pending:
                f.cancel()
            pool.shutdown(wait=not timed_out)  # a batch that timed out may never finish


def fashion_mnist(split="train", root=DEFAULT_FASHION_MNIST, normalize=True):
    """Fashion-MNIST as a TensorDataset of images [N, 1, 28, 28] (float32, normalised with the
    CLI's mean 0.2860 and std 0.3530 unless normalize=False: then pixel / 255) and labels
    (int64). Read by the engine's IDX reader (checked headers and sizes)."""
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    d = _C.load_mnist_like(str(root), split, "fashion-mnist")
    images = d["images"].astype(np.float32) / np.float32(255.0)
    if normalize:
        images = (images - np.float32(d["mean"][0])) / np.float32(d["std"][0])
    return TensorDataset(images, d["labels"].astype(np.int64))
