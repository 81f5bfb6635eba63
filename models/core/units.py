"""Units. GB = 1e9 bytes (the ZeRO paper, datasheets); GiB/MiB = 2^30/2^20 (nvidia-smi, allocators);
the solver's integer time unit, the microsecond."""

from __future__ import annotations

import math

import numpy as np

BYTES_PER_GB = 10**9
BYTES_PER_GIB = 2**30
BYTES_PER_MIB = 2**20


def ceil_div(numerator: int, denominator: int) -> int:
    """Integer ceiling of numerator / denominator for non-negative integers."""
    return -(-numerator // denominator)


def bytes_to_gib(num_bytes: int | float) -> float:
    return num_bytes / BYTES_PER_GIB


def bytes_to_gb(num_bytes: int | float) -> float:
    return num_bytes / BYTES_PER_GB


def bytes_to_mib_ceil(num_bytes: int) -> int:
    """Round a demand up to whole MiB (the solver's unit), so rounding never hides bytes."""
    return ceil_div(num_bytes, BYTES_PER_MIB)


def bytes_to_mib_floor(num_bytes: int) -> int:
    """Round a capacity down to whole MiB."""
    return num_bytes // BYTES_PER_MIB


US_PER_S = 1_000_000


def to_us(seconds: float) -> int:
    """Seconds as whole microseconds, rounded up."""
    return math.ceil(seconds * US_PER_S)


def to_us_array(seconds: np.ndarray) -> np.ndarray:
    """to_us of every element (the same float product, rounded up), as int64."""
    return np.ceil(seconds * US_PER_S).astype(np.int64)
