"""The dense peak each precision's matmuls are timed against (performance.py, parallel_time.py)."""

from __future__ import annotations

from vramplan.models.core.catalogue_schema import GpuSpec
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.setup import Precision


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
