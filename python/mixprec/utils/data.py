"""mixprec.utils.data: torch.utils.data's names, which are mixprec.data's."""
from ..data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset, IterableDataset,  # noqa: F401
                    RandomSampler, Sampler, SequentialSampler, Subset, SubsetRandomSampler, TensorDataset,
                    WeightedRandomSampler, default_collate, default_convert, get_worker_info, random_split)
from .._loader_workers import WorkerInfo  # noqa: F401
