"""The DataLoader's worker processes (num_workers > 0, as torch.utils.data's): each worker is a
process that builds whole batches from the indices the loader sends it and sends them back;
the loader hands them out in order. Also what every kind of worker shares: WorkerInfo,
get_worker_info() and the per-worker seeds.

Why processes: a dataset's __getitem__ written in Python (decoding, augmenting) holds the GIL,
so threads take turns at it; processes run it side by side, as PyTorch's workers do. What a
worker sends is pickled once, in the worker (so an object that cannot be pickled is an error
raised at its batch, not a lost batch and a hang), tensors as NumPy arrays (bf16 as float32,
exact), rebuilt in the loader without another copy. The loader checks its workers while it
waits: a worker that dies (killed, out of memory, a crash in native code) is an error naming
its pid, and a worker whose loader is gone stops by itself."""
import itertools
import multiprocessing
import os
import pickle
import queue
import random
import threading
import time
import traceback

import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor
from ._methods import _numpy_values
from ._tensor import _to_dtype, from_numpy

# How often a waiting loader checks that its workers live, and a waiting worker that its
# loader does (seconds): the longest a dead peer goes unnoticed.
_POLL_S = 0.2
# How long shutting down waits for a worker to finish what it is building before ending it.
_JOIN_S = 2.0


class WorkerInfo:
    """torch.utils.data.get_worker_info()'s answer inside a loading worker: id, num_workers,
    seed (this worker's, see worker_seed) and dataset (in a process worker: its own copy)."""

    def __init__(self, id, num_workers, seed, dataset):
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


_worker = threading.local()


def get_worker_info():
    """The calling loading worker's WorkerInfo, or None outside one (torch.utils.data's)."""
    return getattr(_worker, "info", None)


def worker_seed(seed, epoch, worker_id):
    """A worker's seed: a new one for every epoch and worker, from the loader's seed (PyTorch
    draws a new base seed per epoch too, so that random augmentations in workers do not repeat
    epoch after epoch). 63 bits, reproducible from (seed, epoch, worker_id)."""
    state = np.random.SeedSequence([int(seed) & 0xFFFFFFFFFFFFFFFF, int(epoch), int(worker_id)]).generate_state(2)
    return int((int(state[0]) << 31) ^ int(state[1])) & 0x7FFFFFFFFFFFFFFF


def seed_this_worker(seed):
    """What PyTorch's worker loop seeds: Python's random, the framework's generator, NumPy's."""
    random.seed(seed)
    _C.manual_seed(seed)
    np.random.seed(seed % 2 ** 32)


def default_collate(samples):
    """torch.utils.data.default_collate: a list of samples -> one batch, by the samples'
    structure: tensors, NumPy arrays and NumPy or Python numbers stacked into one tensor (a new
    first dimension; Python floats as float64, ints as int64), strings kept as a list, and
    tuples, named tuples, lists and dicts collated field by field. A tuple of samples gives a
    tuple (torch gives a list there)."""
    first = samples[0]
    if isinstance(first, (Tensor, np.ndarray, np.number, np.bool_, bool, int, float)):
        arrays = [s.detach().numpy() if isinstance(s, Tensor) else np.asarray(s) for s in samples]
        if any(a.shape != arrays[0].shape for a in arrays):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(arrays[0].shape)} at "
                               f"entry 0 and {list(next(a.shape for a in arrays if a.shape != arrays[0].shape))} "
                               f"at another entry")
        return from_numpy(np.ascontiguousarray(np.stack(arrays)))
    if isinstance(first, (str, bytes)):
        return list(samples)
    if isinstance(first, dict):
        return {key: default_collate([s[key] for s in samples]) for key in first}
    if isinstance(first, (tuple, list)):
        if any(len(s) != len(first) for s in samples):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(column)) for column in zip(*samples)]
        if isinstance(first, tuple) and hasattr(first, "_fields"):
            return type(first)(*columns)
        return tuple(columns) if isinstance(first, tuple) else columns
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                    f"found {type(first)}")


def default_convert(sample):
    """torch.utils.data.default_convert, the collate_fn of DataLoader(batch_size=None): NumPy
    arrays and NumPy numbers as tensors, through tuples, named tuples, lists and dicts; anything
    else as it is."""
    if isinstance(sample, (np.ndarray, np.number)) and sample.dtype.kind not in "SUO":
        return from_numpy(np.asarray(sample, order="C"))  # a NumPy number stays 0-d
    if isinstance(sample, dict):
        return {key: default_convert(value) for key, value in sample.items()}
    if isinstance(sample, tuple) and hasattr(sample, "_fields"):
        return type(sample)(*(default_convert(v) for v in sample))
    if isinstance(sample, (tuple, list)):
        return type(sample)(default_convert(v) for v in sample)
    return sample


def build_batch(dataset, collate_fn, idx):
    """One batch of the samples idx: a TensorDataset's rows gathered straight into the batch
    (one copy) when collate_fn is the default one, any other dataset's samples through
    collate_fn."""
    arrays = getattr(dataset, "arrays", None)
    if arrays is not None and collate_fn is default_collate:
        return tuple(from_numpy(np.ascontiguousarray(a[idx])) for a in arrays)
    return collate_fn([dataset[int(i)] for i in idx])


class Fetcher:
    """Builds one batch per request, in the loader (num_workers=0) or in a worker (torch's
    dataset fetchers). A map-style dataset's request is a list of indices (auto-collation) or
    one index (batch_size=None). An IterableDataset's request is a batch size (or None: one
    sample, batch_size=None), filled from this fetcher's own iterator over the dataset, made at
    the first request of each epoch; StopIteration when the iterator has nothing more (or, with
    drop_last, only a partial batch)."""

    def __init__(self, dataset, collate_fn, auto_collation, iterable, drop_last):
        self.dataset, self.collate_fn = dataset, collate_fn
        self.auto_collation, self.iterable, self.drop_last = auto_collation, iterable, drop_last
        self.iterator = None  # made in the process that uses it (not pickled to a worker)
        self.ended = False

    def __getstate__(self):
        return dict(self.__dict__, iterator=None, ended=False)

    def reset(self):
        """A new epoch: a new iterator over an IterableDataset."""
        self.iterator, self.ended = None, False

    def __call__(self, request):
        if not self.iterable:
            if self.auto_collation:
                return build_batch(self.dataset, self.collate_fn, request)
            return self.collate_fn(self.dataset[request])
        if self.ended:
            raise StopIteration
        if self.iterator is None:
            self.iterator = iter(self.dataset)
        if not self.auto_collation:
            try:
                return self.collate_fn(next(self.iterator))
            except StopIteration:
                self.ended = True
                raise
        samples = []
        for _ in range(request):
            try:
                samples.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not samples or (self.drop_last and len(samples) < request):
            raise StopIteration
        return self.collate_fn(samples)


_END = object()  # no more requests


class _Exhausted:
    """A worker's answer when its IterableDataset's iterator has ended (torch's
    _IterableDatasetStopIteration)."""

    def __init__(self, worker_id):
        self.worker_id = worker_id


class _Shipped:
    """A tensor on its way from a worker: its values as a NumPy array (bf16 as float32: exact)."""

    __slots__ = ("array", "dtype", "requires_grad")

    def __init__(self, array, dtype_name, requires_grad):
        self.array, self.dtype, self.requires_grad = array, dtype_name, requires_grad

    def __reduce__(self):
        return (_Shipped, (self.array, self.dtype, self.requires_grad))


def _tree_map(x, leaf, fn):
    """fn on every `leaf` instance in x, through tuples, named tuples, lists and dicts."""
    if isinstance(x, leaf):
        return fn(x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*(_tree_map(v, leaf, fn) for v in x))
    if isinstance(x, (tuple, list)):
        return type(x)(_tree_map(v, leaf, fn) for v in x)
    if isinstance(x, dict):
        return {k: _tree_map(v, leaf, fn) for k, v in x.items()}
    return x


def _shipped(x):
    name = str(x.dtype).replace("mixprec.", "")
    return _Shipped(np.ascontiguousarray(_numpy_values(x)), name, bool(x.requires_grad))


def _landed(x):
    t = _to_dtype(from_numpy(x.array), getattr(_C.dtype, x.dtype))
    return t.requires_grad_(True) if x.requires_grad else t


def _ship(x):
    """Tensors in x as _Shipped (in the worker)."""
    return _tree_map(x, Tensor, _shipped)


def _land(x):
    """_ship's inverse, in the loader: each tensor over its unpickled array (no copy)."""
    return _tree_map(x, _Shipped, _landed)


class _WorkerError:
    """An exception raised in a worker, re-raised in the loader as PyTorch does: the same type
    (RuntimeError when that type cannot be rebuilt there) with the worker's id and traceback."""

    def __init__(self, exc, worker_id, where="in DataLoader worker process"):
        self.type = type(exc)
        try:
            pickle.dumps(self.type)
        except Exception:  # a class the loader cannot import (defined in a function)
            self.type = None
        self.type_name = type(exc).__name__
        self.text = (f"Caught {self.type_name} {where} {worker_id}.\nOriginal "
                     + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))

    def reraise(self):
        try:
            error = self.type(self.text) if self.type is not None else None
        except Exception:
            error = None
        if not isinstance(error, BaseException):
            raise RuntimeError(self.text)
        raise error


def _worker_loop(fetcher, worker_id, num_workers, seed, init_fn, index_queue, result_queue):
    """A worker process: seeds, runs worker_init_fn, then builds each batch it is sent until
    it gets None or its loader is gone."""
    # The process that started this one (the loader, or forkserver's server, which ends with
    # the loader): when it is gone, this worker is orphaned and stops (PyTorch's watchdog).
    parent = os.getppid()
    try:
        # One thread of mixprec's own per worker (PyTorch's workers set one too): N workers
        # beside the training step already fill the cores, and OpenMP's thread pool does not
        # survive fork.
        _C.set_num_threads(1)
        seed_this_worker(seed)
        _worker.info = WorkerInfo(worker_id, num_workers, seed, fetcher.dataset)
        init_error = None
        if init_fn is not None:
            try:
                init_fn(worker_id)
            except Exception as e:  # raised by the loader at every batch sent here
                init_error = _WorkerError(e, worker_id)
        epoch = None
        while True:
            try:
                job = index_queue.get(timeout=_POLL_S)
            except queue.Empty:
                if os.getppid() != parent:
                    break
                continue
            if job is None:
                break
            number, job_epoch, request = job
            if job_epoch != epoch:  # persistent workers: an IterableDataset starts over
                epoch = job_epoch
                fetcher.reset()
            out = init_error
            if out is None:
                try:
                    out = _ship(fetcher(request))
                except StopIteration:
                    out = _Exhausted(worker_id)
                except Exception as e:
                    out = _WorkerError(e, worker_id)
            try:
                payload = pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as e:  # e.g. a sample holding an open file or a lambda
                payload = pickle.dumps(_WorkerError(e, worker_id, "while sending a batch from DataLoader worker"))
            result_queue.put((number, payload))
    except KeyboardInterrupt:  # the terminal's Ctrl-C reaches the workers too: the loader decides
        pass
    finally:
        # Do not wait at exit to flush batches the loader no longer reads.
        result_queue.cancel_join_thread()


def start_method(context):
    """DataLoader's multiprocessing_context as a context: None (Python's default start method),
    a start method's name, or a multiprocessing context; torch's error for anything else."""
    if context is None or isinstance(context, multiprocessing.context.BaseContext):
        return context
    if isinstance(context, str):
        if context in multiprocessing.get_all_start_methods():
            return multiprocessing.get_context(context)
        raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                         f"{multiprocessing.get_all_start_methods()!r}, but got multiprocessing_context={context!r}")
    raise TypeError(f"multiprocessing_context option should be a valid context object or a string specifying "
                    f"the start method, but got multiprocessing_context={context!r}")


class WorkerProcesses:
    """num_workers processes building batches for one loader; iterate(requests) yields them in
    order. Persistent across epochs when the loader keeps it (persistent_workers)."""

    def __init__(self, fetcher, num_workers, seeds, init_fn, context, prefetch_factor, timeout):
        context = context or multiprocessing.get_context()
        self.num_workers, self.prefetch_factor, self.timeout = num_workers, prefetch_factor, timeout
        self.index_queues, self.processes = [], []
        self.alive = True
        self.epochs = 0  # iterate() calls: a worker starts its IterableDataset over at each
        self.result_queue = context.Queue()
        try:
            for wid in range(num_workers):
                index_queue = context.Queue()
                p = context.Process(target=_worker_loop, name=f"mixprec-loader-{wid}",
                                    args=(fetcher, wid, num_workers, seeds[wid], init_fn,
                                          index_queue, self.result_queue),
                                    daemon=True)
                p.start()
                self.index_queues.append(index_queue)
                self.processes.append(p)
        except BaseException:
            self.shutdown()
            raise

    def iterate(self, requests):
        """The batches for requests (Fetcher's: index lists, or batch sizes for an
        IterableDataset) built by the workers, sent round robin to the workers whose dataset
        has not ended, up to prefetch_factor per worker ahead, yielded in order. A worker whose
        IterableDataset has ended gets no more requests, and its answers to those already sent
        are skipped (torch's rule; the epoch ends when every worker's has). An error ends the
        iteration and the workers."""
        self.epochs += 1
        requests = iter(requests)
        active = [True] * self.num_workers
        turn = itertools.cycle(range(self.num_workers))
        owner = {}  # request number -> worker
        sent = received = 0
        held = {}
        ok = False

        def send(count):
            nonlocal sent
            for _ in range(count):
                if not any(active):
                    return
                worker = next(turn)
                while not active[worker]:
                    worker = next(turn)
                request = next(requests, _END)
                if request is _END:
                    return
                self.index_queues[worker].put((sent, self.epochs, request))
                owner[sent] = worker
                sent += 1

        try:
            send(self.num_workers * self.prefetch_factor)
            while received < sent:
                while received not in held:
                    number, payload = self._next_result()
                    held[number] = payload
                payload = held.pop(received)
                worker = owner.pop(received)
                received += 1
                data = pickle.loads(payload)
                if isinstance(data, _Exhausted):
                    active[worker] = False
                send(1)  # one more in flight for the one handed out (or skipped)
                if isinstance(data, _Exhausted):
                    continue
                if isinstance(data, _WorkerError):
                    data.reraise()
                yield _land(data)
            ok = True
        finally:
            if not ok:  # an error or an early break: batches may still be in flight
                self.shutdown()

    def _next_result(self):
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            wait = _POLL_S if deadline is None else min(_POLL_S, max(deadline - time.monotonic(), 0.0))
            try:
                return self.result_queue.get(timeout=wait)
            except queue.Empty:
                pass
            dead = [p for p in self.processes if not p.is_alive()]
            if dead:
                pids = ", ".join(f"{p.pid} (exit code {p.exitcode})" for p in dead)
                self.shutdown()
                raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly")
            if deadline is not None and time.monotonic() >= deadline:
                self.shutdown(wait=False)
                raise RuntimeError(f"DataLoader timed out after {self.timeout} seconds")

    def shutdown(self, wait=True):
        """Stops the workers: each is asked to stop and waited for (a batch in progress
        finishes) up to _JOIN_S, then ended; wait=False ends them at once."""
        if not self.alive:
            return
        self.alive = False
        for q in self.index_queues:
            try:
                q.put(None)
            except (OSError, ValueError):
                pass
        end = time.monotonic() + (_JOIN_S if wait else 0.0)
        for p in self.processes:
            p.join(max(end - time.monotonic(), 0.0))
        for p in self.processes:
            if p.is_alive():
                p.terminate()
                p.join(_JOIN_S)
        # A worker that stopped by itself read its queue to the end: that queue's feeder thread
        # has flushed and is joined, so no thread outlives the loader. One that was ended may
        # have left indices unread: its feeder is not waited for (it ends when close() shuts
        # the pipe).
        for q, p in zip(self.index_queues, self.processes):
            q.close()
            if p.exitcode == 0:
                q.join_thread()
            else:
                q.cancel_join_thread()
        self.result_queue.cancel_join_thread()
        self.result_queue.close()

    def __del__(self):  # a loader dropped mid-epoch, or persistent workers outliving their loop
        try:
            if getattr(self, "processes", None) is not None:
                self.shutdown(wait=False)
        except Exception:  # at interpreter exit multiprocessing may be gone: its own clean-up ends them
            pass
