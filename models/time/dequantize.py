"""The time a quantised frozen base spends dequantising its matrices: QLoRA's extra work over LoRA.

A bitsandbytes or NF4 base multiplies 16-bit copies of its weights, made again for every GEMM
(models/architecture/quantization.py dequantised_weight_bytes cites the code: bitsandbytes
MatMul4Bit.forward `F.dequantize_4bit(B, quant_state).to(A.dtype)` and its backward again for the
input gradient; torchao's LinearNF4 `weight.to(input.dtype)`): a kernel that reads the stored
matrix (matrix_bytes: the packed values and their scales) and writes the whole matrix in the
activation dtype, streaming through HBM. A frozen base has no weight gradient, so each micro-batch
dequantises every matrix of the rank once in the forward, once in the backward, and once more in a
recomputed forward (its share of the layers; per-op SAC re-runs every second matmul). LLM.int8
(MatMul8bitLt) multiplies int8 in the forward and dequantises only in the backward, where it casts
CB to the gradient's dtype and scales it in place (a write, then a read and a write).

GPTQ and AWQ kernels multiply the packed weights: nothing is dequantised. The bytes run at the
fraction of HBM bandwidth pointwise kernels reach (calibration.FP8_CAST_HBM_EFFICIENCY, torchao's
roofline). Per micro-batch, so a step pays it `grad_accum` times: in the solver it rides with the
other accumulation-dependent stalls (solver/tables.py bubble_us).

Published check (tests/models/time/test_dequantize.py): torchtune's README optimization table,
Llama 3.2 3B on one A100, packed 4096 x 2, compiled, activation checkpointing and offloading: LoRA
8,210 and QLoRA 8,035 tokens/s (0.979); this term alone makes QLoRA 0.990 of LoRA.
"""

from __future__ import annotations

from vramplan.models.architecture.parallel import plan_split
from vramplan.models.architecture.quantization import frozen_base_format, quantised_weight_bytes
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import BYTES_PER_GB
from vramplan.models.memory.parallel_states import heaviest_rank, rank_params
from vramplan.models.memory.precision import activation_bytes
from vramplan.models.memory.recompute import effective_mode, recomputed_fraction
from vramplan.models.time.calibration import FP8_CAST_HBM_EFFICIENCY

OP_SAC_RECOMPUTED_MATMULS = 0.5  # torchtitan's per-op SAC re-runs every second matmul (models/memory/recompute.py)


def dequantize_bytes_per_micro_batch(arch: Architecture, job: Job, plan: Plan) -> float:
    """HBM bytes the most loaded pipeline rank moves dequantising its frozen base for one micro-batch."""
    fmt = frozen_base_format(arch, job)
    if fmt is None or fmt.method not in ("nf4", "fp4", "int8"):
        return 0.0
    split = plan_split(arch, plan)
    shard = rank_params(arch, plan.tp, split, plan.ep, heaviest_rank(arch, plan.tp, split, plan.ep))
    stored, held = quantised_weight_bytes(arch, fmt, shard.fp8_matmul_dense, shard.fp8_matmul_expert)
    e = activation_bytes(plan.precision)
    if fmt.method == "int8":  # the backward's CB.to(dtype).mul_(scales): read int8, write, read and write again
        return float(stored + 3 * e * held)
    mode = effective_mode(job, plan)
    recomputed = recomputed_fraction(arch, job, plan) if mode == "full" else OP_SAC_RECOMPUTED_MATMULS if mode == "op" else 0.0
    return (2 + recomputed) * float(stored + e * held)


def dequantize_s_per_micro_batch(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> float:
    """Seconds of those bytes at pointwise kernels' share of the GPU's HBM bandwidth."""
    return dequantize_bytes_per_micro_batch(arch, job, plan) / (
        gpu.hbm_bandwidth_gb_per_s * BYTES_PER_GB * FP8_CAST_HBM_EFFICIENCY.value)


def dequantize_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> float:
    """Seconds per optimizer step: every micro-batch of the step dequantises again."""
    return plan.grad_accum * dequantize_s_per_micro_batch(arch, job, plan, gpu)
