"""Step time, throughput and MFU of one plan: compute at a calibrated fraction of dense peak plus
the communication that does not overlap with it.

Data-parallel traffic per GPU (ring collectives move (N-1)/N of the buffer per GPU per pass;
DeepSpeed semantics for when each collective runs):
- ZeRO-0/1: one gradient all-reduce per step, 2 (N-1)/N x gradients.
- ZeRO-2: a gradient reduce-scatter every micro-batch, one parameter all-gather per step.
- ZeRO-3: per micro-batch, parameter all-gathers in forward and in backward and a gradient
  reduce-scatter: 3 (N-1)/N, i.e. 1.5x the all-reduce volume of plain DP (ZeRO paper sec. 7.2.2).
Bandwidth is the GPU's intra-node bandwidth while the job fits one node, the per-GPU network
bandwidth beyond, times COMMUNICATION_EFFICIENCY. Gradient traffic overlaps with backward compute
(bucketed), ZeRO-3 gathers with forward and backward (prefetch); what exceeds the window is
exposed, and at least one layer's share always is (the last bucket cannot overlap).
"""

from __future__ import annotations

from dataclasses import dataclass

from models.calibration import (
    COMMUNICATION_EFFICIENCY,
    HOST_OPTIMIZER_BANDWIDTH_GB_PER_S,
    OPTIMIZER_STEP_BYTES_PER_PARAM,
    PCIE_BANDWIDTH_GB_PER_S,
    compute_efficiency,
)
from models.catalogue_schema import Architecture, GpuSpec
from models.errors import VramplanError
from models.flops import training_flops_per_token
from models.lora import trainable_params
from models.params import count_params
from models.precision import gradient_bytes_per_param, weight_bytes_per_param
from models.setup import Job, Plan, Precision

_TERA = 10**12
_GIGA = 10**9


@dataclass(frozen=True)
class Performance:
    model_flops_per_token: int
    hardware_flops_per_token: int
    peak_tflops: float
    compute_efficiency: float
    compute_time_s: float
    communication_time_s: float
    exposed_communication_s: float
    optimizer_time_s: float
    step_time_s: float
    tokens_per_step: int
    tokens_per_s: float
    mfu: float
    hfu: float


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


def communication_bytes_per_step(arch: Architecture, job: Job, plan: Plan) -> float:
    """Bytes each GPU sends per optimizer step for data-parallel / ZeRO traffic."""
    n = plan.dp
    if n == 1:
        return 0.0
    ring = (n - 1) / n
    grads = trainable_params(arch, job) * float(gradient_bytes_per_param(plan.precision, job.accounting))
    params = count_params(arch).total * float(weight_bytes_per_param(plan.precision))
    if plan.zero <= 1:
        return 2 * ring * grads
    if plan.zero == 2:
        return ring * (grads * plan.grad_accum + params)
    return ring * plan.grad_accum * (2 * params + grads)


def communication_bandwidth_gb_per_s(gpu: GpuSpec, num_gpus: int) -> float:
    link = gpu.intra_node_bandwidth_gb_per_s if num_gpus <= gpu.gpus_per_node else gpu.network_bandwidth_gb_per_s
    return link * COMMUNICATION_EFFICIENCY.value


def optimizer_time_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> float:
    trainable = trainable_params(arch, job)
    partition = -(-trainable // plan.dp) if plan.zero >= 1 else trainable
    if plan.offload == "none":
        return partition * OPTIMIZER_STEP_BYTES_PER_PARAM / (gpu.hbm_bandwidth_gb_per_s * _GIGA)
    host_step = partition * OPTIMIZER_STEP_BYTES_PER_PARAM / (HOST_OPTIMIZER_BANDWIDTH_GB_PER_S * _GIGA)
    transfers = partition * (2 + 2) / (PCIE_BANDWIDTH_GB_PER_S * _GIGA)  # grads down, params up
    if plan.offload == "optimizer+params":
        transfers += plan.grad_accum * 2 * count_params(arch).total / plan.dp * 2 / (PCIE_BANDWIDTH_GB_PER_S * _GIGA)
    return host_step + transfers


def performance(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> Performance:
    flops = training_flops_per_token(arch, job.seq_len, plan.recompute, job.method)
    peak = peak_tflops(gpu, plan.precision)
    efficiency = compute_efficiency(gpu.architecture).value
    tokens_per_gpu = plan.micro_batch * plan.grad_accum * job.seq_len
    compute_s = tokens_per_gpu * flops.hardware / (peak * _TERA * efficiency)

    comm_s = communication_bytes_per_step(arch, job, plan) / (
        communication_bandwidth_gb_per_s(gpu, plan.num_gpus) * _GIGA
    )
    window_s = compute_s if plan.zero == 3 else compute_s * 2 / 3  # backward is 2/3 of the work
    exposed_s = max(comm_s - window_s, comm_s / arch.num_layers) if comm_s > 0 else 0.0
    optimizer_s = optimizer_time_s(arch, job, plan, gpu)
    step_s = compute_s + exposed_s + optimizer_s

    tokens_per_step = tokens_per_gpu * plan.num_gpus
    tokens_per_s = tokens_per_step / step_s
    denominator = plan.num_gpus * peak * _TERA
    return Performance(
        model_flops_per_token=flops.model,
        hardware_flops_per_token=flops.hardware,
        peak_tflops=peak,
        compute_efficiency=efficiency,
        compute_time_s=compute_s,
        communication_time_s=comm_s,
        exposed_communication_s=exposed_s,
        optimizer_time_s=optimizer_s,
        step_time_s=step_s,
        tokens_per_step=tokens_per_step,
        tokens_per_s=tokens_per_s,
        mfu=flops.model * tokens_per_s / denominator,
        hfu=flops.hardware * tokens_per_s / denominator,
    )
