"""The engine's names as the package exports them (dtypes under PyTorch's names)."""
from ._mixprec import (Tensor, dtype, MixprecError, InvalidArgumentError, UnimplementedError,
                       NotFoundError, manual_seed, set_num_threads, get_num_threads, cpu_summary)

float32 = dtype.float32
float16 = dtype.float16
bfloat16 = dtype.bfloat16
float64 = dtype.float64
int64 = dtype.int64
int32 = dtype.int32
uint8 = dtype.uint8
# PyTorch's aliases (torch.half, torch.float, ...).
half = float16
float = float32
double = float64
long = int64
int = int32
