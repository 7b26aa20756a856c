"""mixprec.data: datasets over NumPy arrays, a DataLoader (torch.utils.data's arguments), and
the built-in datasets read by the engine's validated readers."""
import numpy as np

from . import _mixprec as _C
from ._mixprec import Tensor
from ._tensor import from_numpy

DEFAULT_FASHION_MNIST = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


class TensorDataset:
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
    generator mixprec.manual_seed() seeds. Each iteration is a new epoch."""

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None,
                 collate_fn=None, num_workers=0, pin_memory=False, generator=None):
        if batch_size is None or batch_size < 1:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if num_workers:
            raise NotImplementedError("mixprec's DataLoader loads in the calling thread (num_workers=0)")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.collate_fn = collate_fn or default_collate
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
        order = np.asarray(_C.shuffled_order(n, self.seed, self.epoch)) if self.shuffle else np.arange(n)
        self.epoch += 1
        arrays = getattr(self.dataset, "arrays", None)
        for b in range(len(self)):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size]
            if arrays is not None:  # gather rows straight into the batch (one copy)
                yield tuple(from_numpy(np.ascontiguousarray(a[idx])) for a in arrays)
            else:
                yield self.collate_fn([self.dataset[int(i)] for i in idx])


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
