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
from ._loader_workers import (WorkerInfo, WorkerProcesses, _worker, build_batch, get_worker_info, start_method,
                              worker_seed)
from ._functions import randperm
from ._tensor import from_numpy

DEFAULT_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


class Dataset:
    """torch.utils.data.Dataset: the base of a map-style dataset (subclasses define
    __getitem__ and __len__); `a + b` concatenates two."""

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


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
    remainder one by one to the first ones) over a random permutation from mixprec's
    generator (manual_seed), as torch.utils.data.random_split."""
    n = len(dataset)
    if all(0 <= f <= 1 for f in lengths) and abs(sum(lengths) - 1) < 1e-9 and sum(lengths) <= 1:
        counts = [int(np.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = randperm(n).numpy().tolist()
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
        return tuple(from_numpy(np.ascontiguousarray(a[index])) for a in self.arrays)


def default_collate(samples):
    """A list of samples (tuples of arrays, tensors or numbers) -> a tuple of batch tensors."""
    columns = zip(*samples)
    return tuple(from_numpy(np.stack([s.detach().numpy() if isinstance(s, Tensor) else np.asarray(s)
                                      for s in column])) for column in columns)


class DataLoader:
    """Batches of a dataset, in order or shuffled. The shuffle is the engine's (the order
    `mixprec train` uses for the same seed and epoch); without a seed, one is drawn from the
    generator mixprec.manual_seed() seeds. Each iteration is a new epoch.

    num_workers > 0 builds the batches in that many worker processes, as PyTorch's DataLoader
    does (multiprocessing_context: None for Python's default start method, "fork" on Linux,
    or "spawn"/"forkserver", whose workers need a dataset and functions that pickle): up to
    prefetch_factor batches per worker ahead, handed out in order, the same batches in the
    same order as with num_workers=0. Each worker seeds Python's random, NumPy's global
    generator and mixprec's (get_worker_info().seed, new every epoch), runs
    worker_init_fn(worker_id), and uses one mixprec thread. An exception in a worker is raised
    by the iteration at its batch, with the worker's traceback; a worker that dies is an error
    naming its pid; timeout > 0 bounds the wait for each batch. persistent_workers keeps the
    processes from one completed epoch to the next (an early break or an error ends them).
    worker_threads=True (mixprec's own) runs the workers as threads of this process instead:
    no pickling and no copies of the dataset, but a pure-Python __getitem__ takes turns under
    the GIL (NumPy indexing and mixprec's ops release it)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None,
                 collate_fn=None, num_workers=0, pin_memory=False, generator=None, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, prefetch_factor=2,
                 persistent_workers=False, worker_threads=False):
        if batch_size is None or batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if num_workers == 0 and prefetch_factor != 2:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                             "let num_workers > 0 to enable multiprocessing.")
        if not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ValueError(f"prefetch_factor should be a positive integer, but got {prefetch_factor}")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None:
            if num_workers == 0:
                raise ValueError("multiprocessing_context can only be used with multi-process loading "
                                 "(num_workers > 0), but got num_workers=0")
            if worker_threads:
                raise ValueError("multiprocessing_context is for worker processes; worker_threads=True "
                                 "runs the workers as threads")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.collate_fn = collate_fn or default_collate
        self.num_workers, self.prefetch_factor = num_workers, prefetch_factor
        self.worker_init_fn, self.timeout = worker_init_fn, timeout or None
        self.multiprocessing_context = start_method(multiprocessing_context)
        self.worker_threads = bool(worker_threads)
        self.persistent_workers = bool(persistent_workers)
        self._processes = None  # persistent_workers' WorkerProcesses
        if seed is None:
            seed = int(_C._uniform([1], 0.0, 2.0 ** 31, _C.dtype.float64).item())
        self.seed, self.epoch = int(seed), 0

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __iter__(self):
        n = len(self.dataset)
        epoch = self.epoch
        order = np.asarray(_C.shuffled_order(n, self.seed, epoch)) if self.shuffle else np.arange(n)
        self.epoch += 1
        batches = (order[b * self.batch_size:(b + 1) * self.batch_size] for b in range(len(self)))
        if self.num_workers == 0:
            for idx in batches:
                yield self._batch(idx)
        elif self.worker_threads:
            yield from self._prefetched(batches, epoch)
        else:
            yield from self._from_processes(batches, epoch)

    def _batch(self, idx):
        return build_batch(self.dataset, self.collate_fn, idx)

    def _from_processes(self, batches, epoch):
        workers = self._processes
        if workers is None or not workers.alive:
            seeds = [worker_seed(self.seed, epoch, w) for w in range(self.num_workers)]
            workers = WorkerProcesses(self.dataset, self.collate_fn, self.num_workers, seeds, self.worker_init_fn,
                                      self.multiprocessing_context, self.prefetch_factor, self.timeout)
            self._processes = workers if self.persistent_workers else None
        try:
            yield from workers.iterate(batches)
        finally:
            if not self.persistent_workers:
                workers.shutdown()

    def _prefetched(self, batches, epoch):
        """The batches built on num_workers threads, up to prefetch_factor each ahead, handed
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
                pending.append(pool.submit(self._batch, idx))
            while pending:
                batch = pending.popleft().result(timeout=self.timeout)
                for idx in itertools.islice(batches, 1):
                    pending.append(pool.submit(self._batch, idx))
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
