"""torch.utils.data's samplers (Sampler, SequentialSampler, RandomSampler, SubsetRandomSampler,
WeightedRandomSampler, BatchSampler) and mixprec.Generator, the seedable generator they and
random_split take.

The samplers follow torch 1.13's arguments, checks, error messages, lengths and draws (how
many indices, with or without replacement, which ranges), not its random streams: the same
seed gives the same order here, but not torch's order.

Random orders come from a Generator: one the caller passes (generator=...), or, as torch does
with generator=None, a new one per iteration seeded by a draw from mixprec's global generator,
so mixprec.manual_seed() makes them reproducible."""
import numpy as np

from . import _mixprec as _C

# torch.Generator()'s seed before manual_seed (torch's default_rng_seed_val), so that
# initial_seed() answers as torch's does.
_DEFAULT_SEED = 67280421310721


class Generator:
    """torch.Generator for the samplers, random_split and DataLoader: manual_seed(seed) (returns
    the generator), initial_seed(), seed() (a fresh non-deterministic seed, returned), and
    get_state()/set_state() (an opaque state object, not torch's ByteTensor). CPU only. Its
    stream is NumPy's PCG64 seeded with the seed: the same seed gives the same draws."""

    def __init__(self, device="cpu"):
        if str(device) != "cpu":
            raise RuntimeError(f"mixprec runs on CPUs only: got device {device!r}; write 'cpu'")
        self.device = "cpu"
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed):
        seed = int(seed)
        # torch takes negative seeds as their 64-bit two's complement, and so does this.
        self._seed = seed & 0xFFFFFFFFFFFFFFFF
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def initial_seed(self):
        return self._seed

    def seed(self):
        seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
        self.manual_seed(seed)
        return seed

    def get_state(self):
        return dict(seed=self._seed, state=self._rng.bit_generator.state)

    def set_state(self, new_state):
        if not isinstance(new_state, dict) or "state" not in new_state:
            raise TypeError("set_state expects a state returned by Generator.get_state()")
        self._seed = new_state["seed"]
        self._rng.bit_generator.state = new_state["state"]
        return self

    def __repr__(self):
        return f"<mixprec.Generator seed={self._seed}>"

    # ---- the draws the samplers need ----
    def _randperm(self, n):
        return self._rng.permutation(int(n))

    def _randint(self, high, size):
        return self._rng.integers(0, int(high), size=int(size), dtype=np.int64)

    def _multinomial(self, weights, num_samples, replacement):
        """torch.multinomial(weights, num_samples, replacement) for a 1-d float64 array, with
        torch's checks and messages."""
        # torch's order: a NaN fails its `>= 0` check first, and is reported as < 0.
        if not np.all(weights >= 0):
            raise RuntimeError("invalid multinomial distribution (encountering probability entry < 0)")
        if not np.all(np.isfinite(weights)):
            raise RuntimeError("invalid multinomial distribution (encountering probability entry = infinity or NaN)")
        if not replacement and num_samples > len(weights):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        total = weights.sum()
        if not total > 0:
            raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
        if replacement:
            return self._rng.choice(len(weights), size=num_samples, replace=True, p=weights / total)
        # Without replacement: the exponential race torch's CPU kernel runs (key w / E with
        # E ~ Exp(1), the largest keys first), which draws one index after the other with
        # probability proportional to the weights left. Zero weights come last, as in torch.
        keys = weights / self._rng.exponential(size=len(weights))
        return np.argsort(-keys, kind="stable")[:num_samples]


def _check_generator(generator):
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"generator must be a mixprec.Generator or None, but got generator={generator!r}")
    return generator


def _fresh_generator():
    """What torch's samplers do without a generator: a new one seeded from the global generator
    (mixprec.manual_seed), 62 bits from two draws."""
    high, low = _C._uniform([2], 0.0, 2.0 ** 31, _C.dtype.float64).numpy()
    return Generator().manual_seed((int(high) << 31) | int(low))


def _draws_from(generator):
    return generator if generator is not None else _fresh_generator()


class Sampler:
    """torch.utils.data.Sampler: the base of every sampler (subclasses define __iter__, and
    __len__ for len(DataLoader))."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


def _is_positive_int(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0


class RandomSampler(Sampler):
    """Indices of data_source in a random order: without replacement, whole permutations (and
    the start of one more when num_samples is not a multiple of the length); with replacement,
    num_samples independent uniform draws."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = _check_generator(generator)
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not _is_positive_int(self.num_samples):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = _draws_from(self.generator)
        if self.replacement:
            yield from generator._randint(n, self.num_samples).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from generator._randperm(n).tolist()
            yield from generator._randperm(n)[:self.num_samples % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order (no replacement)."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = _check_generator(generator)

    def __iter__(self):
        for i in _draws_from(self.generator)._randperm(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices of 0..len(weights)-1 drawn with probabilities proportional to
    weights (which need not sum to one), with or without replacement (torch.multinomial's
    rules: bad weights are an error when the sampler is iterated)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not _is_positive_int(num_samples):
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        values = weights.detach().numpy() if isinstance(weights, _C.Tensor) else weights
        weights_array = np.asarray(values, dtype=np.float64)
        if weights_array.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_array.shape)}")
        self.weights = _C.from_numpy(np.ascontiguousarray(weights_array))  # float64, as torch's
        self._weights = weights_array
        self.num_samples = int(num_samples)
        self.replacement = replacement
        self.generator = _check_generator(generator)

    def __iter__(self):
        draws = _draws_from(self.generator)._multinomial(self._weights, self.num_samples, self.replacement)
        yield from draws.tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of batch_size indices from sampler (any iterable of indices); the last one shorter
    unless drop_last."""

    def __init__(self, sampler, batch_size, drop_last):
        if not _is_positive_int(batch_size):
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, int(batch_size), drop_last

    def __iter__(self):
        order = _whole_order(self.sampler)
        if order is not None:  # slices of the whole order: the same batches, without a loop per index
            stop = len(order) - len(order) % self.batch_size if self.drop_last else len(order)
            for start in range(0, stop, self.batch_size):
                yield order[start:start + self.batch_size]
            return
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


class _InfiniteConstantSampler(Sampler):
    """An IterableDataset's sampler in a DataLoader (torch's): None forever; the dataset's own
    iterator decides when the epoch ends."""

    def __iter__(self):
        while True:
            yield None


class _SeededShuffleSampler(Sampler):
    """DataLoader(shuffle=True) without a sampler or generator: the engine's shuffle, the order
    `mixprec train` uses for the same seed and epoch (the loader sets the epoch)."""

    def __init__(self, data_source, seed):
        self.data_source, self.seed, self.epoch = data_source, int(seed), 0

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def __iter__(self):
        return iter(_C.shuffled_order(len(self.data_source), self.seed, self.epoch))  # a list of ints

    def __len__(self):
        return len(self.data_source)


def _whole_order(sampler):
    """The whole epoch's indices as a list when sampler is one of the ordered built-ins here
    (not a subclass that iterates otherwise), else None."""
    if type(sampler).__iter__ in (SequentialSampler.__iter__, _SeededShuffleSampler.__iter__):
        return list(sampler.__iter__())
    return None
