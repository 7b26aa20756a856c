"""mixprec.utils.data: torch.utils.data's names, which are mixprec.data's."""
from ..data import (ConcatDataset, DataLoader, Dataset, Subset, TensorDataset, default_collate,  # noqa: F401
                    get_worker_info, random_split)
from .._loader_workers import WorkerInfo  # noqa: F401
