"""The dense peak each precision's matmuls are timed against (performance.py, parallel_time.py), and the
rate memory-bound streaming kernels move bytes at (fp8.py's casts, moe_permute.py's token permutations)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union, overload

from vramplan.models.core.catalogue_schema import GpuSpec
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Precision
from vramplan.models.core.units import BYTES_PER_GB
from vramplan.models.time.calibration import FP8_CAST_HBM_EFFICIENCY

if TYPE_CHECKING:
    import numpy as np

Bytes = Union[float, "np.ndarray"]


def peak_tflops(gpu: GpuSpec, precision: Precision) -> float:
    """Dense peak of the precision's matmuls; an unsupported precision is an error."""
    peak = {
        "bf16": gpu.bf16_dense_tflops,
        "fp16": gpu.fp16_dense_tflops,
        "fp32": gpu.fp32_dense_tflops,
        "fp8": gpu.fp8_dense_tflops if gpu.fp8_supported else 0.0,
    }[precision]
    if peak <= 0:
        hint = "use bf16 or fp16" if precision == "fp8" else "use fp16"
        raise VramplanError("precision", precision, f"not supported by GPU {gpu.name}; {hint}")
    return peak


def rate_precision(precision: Precision) -> Precision:
    """The precision whose dense peak times the compute and is MFU's denominator: fp8 training
    runs its other work in bf16 and its linears' GEMMs in fp8 with the recipe's casts
    (models/time/fp8.py), so its MFU is against the bf16 peak (as torchtitan's benchmarks and Megatron report fp8 runs)."""
    return "bf16" if precision == "fp8" else precision


def gemm_element_bytes(precision: Precision) -> int:
    """Bytes of one GEMM operand element: fp8 GEMMs read 1-byte inputs (Transformer Engine, torchao)."""
    return {"fp8": 1, "fp32": 4}.get(precision, 2)


@overload
def hbm_stream_seconds(num_bytes: float, gpu: GpuSpec) -> float: ...
@overload
def hbm_stream_seconds(num_bytes: np.ndarray, gpu: GpuSpec) -> np.ndarray: ...
def hbm_stream_seconds(num_bytes: Bytes, gpu: GpuSpec) -> Bytes:
    """Bytes a memory-bound streaming kernel (an fp8 cast, a token permutation) reads and writes, at
    FP8_CAST_HBM_EFFICIENCY of the GPU's HBM bandwidth (an array: per cell)."""
    return num_bytes / (gpu.hbm_bandwidth_gb_per_s * BYTES_PER_GB * FP8_CAST_HBM_EFFICIENCY.value)
