"""Step time, throughput and MFU of one plan: compute at a calibrated fraction of dense peak plus
the communication that does not overlap with it.

Data-parallel traffic per GPU (ring collectives move (N-1)/N of the buffer per GPU per pass;
DeepSpeed semantics for when each collective runs):
- ZeRO-0: one gradient all-reduce per step, 2 (N-1)/N x gradients.
- ZeRO-1: one gradient reduce-scatter per step, (N-1)/N x gradients, and the updated parameters'
  all-gather, (N-1)/N x parameters, counted with the forward it precedes.
- ZeRO-2: a gradient reduce-scatter every micro-batch, one parameter all-gather per step.
- ZeRO-3: per micro-batch, parameter all-gathers in forward and in backward and a gradient
  reduce-scatter: 3 (N-1)/N, i.e. 1.5x the all-reduce volume of plain DP (ZeRO paper sec. 7.2.2).
Bandwidth is the GPU's intra-node bandwidth while the job fits one instance (a node), the
per-GPU network bandwidth beyond (eight 1-GPU instances talk over the network, not NVLink),
times COMMUNICATION_EFFICIENCY. Each phase hides only its own traffic (DpTraffic):
- ZeRO-3 (FSDP / DeepSpeed stage 3, one unit per decoder layer): the forward's parameter
  all-gathers are prefetched one layer ahead behind the forward compute; the backward's
  all-gathers and gradient reduce-scatters behind the backward (recompute included). Every one of
  these 3 x layers x micro-batches collectives also pays NCCL's ring latency
  (models/time/collectives.py): ~10 ms each over 2,048 ranks, which a layer's compute must cover.
- ZeRO-0/1/2: the gradient buckets reduce during the backward (bucketed, DDP / DeepSpeed
  overlap_comm); bucket counts are small and NCCL uses trees for large all-reduces, so no
  per-collective latency is charged. ZeRO-0/1 reduce in the last micro-batch's backward only
  (once_a_step_window_share): with gradient accumulation that is their window; ZeRO-1's parameter
  all-gather hides behind the first micro-batch's forward where the stack overlaps it
  (PARAM_GATHER_OVERLAP_STACKS: Megatron), nowhere elsewhere (dp_windows_s).
What exceeds a phase's window is exposed, and at least one layer's share of the traffic always is
(the last bucket, the first gather).
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.architecture.parallel import plan_split
from vramplan.models.architecture.params import count_params
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import PARAM_GATHER_OVERLAP_STACKS
from vramplan.models.core.units import BYTES_PER_GB
from vramplan.models.memory.activations import offload_transfer_bytes
from vramplan.models.memory.parallel_states import heaviest_rank, rank_params, rank_trainable_params
from vramplan.models.memory.precision import gradient_bytes_per_param, weight_bytes_per_param
from vramplan.models.time.attention_kernel import attention_saved_flops_per_token
from vramplan.models.time.calibration import (
    COMMUNICATION_EFFICIENCY,
    HOST_OPTIMIZER_BANDWIDTH_GB_PER_S,
    OPTIMIZER_STEP_BYTES_PER_PARAM,
    PCIE_BANDWIDTH_GB_PER_S,
    compute_efficiency,
    expert_efficiency,
    stack_efficiency,
)
from vramplan.models.time.collectives import group_nodes, ring_latency_s
from vramplan.models.time.compile_speed import eager_elementwise_s
from vramplan.models.time.dequantize import dequantize_s
from vramplan.models.time.flops import plan_flops_per_token
from vramplan.models.time.fp8 import fp8_cast_seconds, fp8_gemm_time_ratio
from vramplan.models.time.parallel_time import parallel_time
from vramplan.models.time.rates import peak_tflops, rate_precision

_TERA = 10**12


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
    model_parallel_time_s: float  # TP + PP (bubble, p2p) + CP + EP (all-to-all, expert GEMM kernel and shape): parallel_time.py
    pipeline_bubble_s: float
    pipeline_imbalance_s: float  # the slowest pipeline rank's work beyond the mean's (pipeline_schedule.stage_imbalance)
    offload_exposed_s: float  # activation-offload transfer the compute does not hide (offload_exposed_s)
    step_time_s: float
    tokens_per_step: int
    tokens_per_s: float
    mfu: float
    hfu: float
    dequantize_s: float = 0.0  # a quantised frozen base's dequantisation per step (models/time/dequantize.py)
    moe_host_wait_s: float = 0.0  # of model_parallel_time_s: MoE forwards waiting for the host (models/time/moe_host.py)


@dataclass(frozen=True)
class DpTraffic:
    """Data-parallel / ZeRO bytes one GPU sends per optimizer step, by the phase that hides them,
    and the ring collectives each phase issues (each pays models.collectives.ring_latency_s)."""

    forward_bytes: float
    backward_bytes: float
    forward_collectives: int = 0
    backward_collectives: int = 0

    @property
    def total_bytes(self) -> float:
        return self.forward_bytes + self.backward_bytes


def dp_traffic(arch: Architecture, job: Job, plan: Plan) -> DpTraffic:
    """Traffic over the DP x CP group of the parameters of the rank's TP/PP/EP shard: the pipeline
    rank holding the most (models/memory/parallel_states.py heaviest_rank), whose collectives the
    others wait for."""
    n = plan.zero_group
    if n == 1:
        return DpTraffic(0.0, 0.0)
    ring = (n - 1) / n
    split = plan_split(arch, plan)
    rank = heaviest_rank(arch, plan.tp, split, plan.ep)
    shard = rank_params(arch, plan.tp, split, plan.ep, rank).total
    trainable = rank_trainable_params(arch, job, plan.tp, split, plan.ep, rank)
    grads = trainable * float(gradient_bytes_per_param(plan.precision, job.accounting))
    params = shard * float(weight_bytes_per_param(plan.precision))
    if plan.zero == 0:
        return DpTraffic(0.0, 2 * ring * grads)
    if plan.zero == 1:  # reduce-scatter of the gradients; all-gather of the updated parameters, before the next forward
        return DpTraffic(ring * params, ring * grads)
    if plan.zero == 2:
        return DpTraffic(0.0, ring * (grads * plan.grad_accum + params))
    units = plan.grad_accum * split[rank]  # one FSDP unit per layer
    return DpTraffic(ring * plan.grad_accum * params, ring * plan.grad_accum * (params + grads), units, 2 * units)


def communication_bytes_per_step(arch: Architecture, job: Job, plan: Plan) -> float:
    """Bytes each GPU sends per optimizer step for data-parallel / ZeRO traffic (both phases)."""
    return dp_traffic(arch, job, plan).total_bytes


def crosses_nodes(num_gpus: int, gpus_per_node: int) -> bool:
    """Whether data-parallel traffic leaves the node (an instance is a node)."""
    return num_gpus > gpus_per_node


def dp_group_span(plan: Plan) -> int:
    """GPUs a data-parallel group spans: DP ranks are tp*cp apart (Megatron order tp-cp-ep-dp-pp)."""
    return plan.tp * plan.cp * plan.dp


def communication_bandwidth_gb_per_s(gpu: GpuSpec, crossing: bool, network_gb_per_s: float | None = None) -> float:
    """network_gb_per_s: the offering's per-GPU scale-out bandwidth (default: the GPU's usual fabric)."""
    network = gpu.network_bandwidth_gb_per_s if network_gb_per_s is None else network_gb_per_s
    link = network if crossing else gpu.intra_node_bandwidth_gb_per_s
    return link * COMMUNICATION_EFFICIENCY.value


@dataclass(frozen=True)
class OptimizerTraffic:
    """Bytes the optimizer step moves per GPU: through HBM (on-GPU step), through host memory
    (ZeRO-Offload CPU-Adam) and over PCIe (offload transfers)."""

    hbm_bytes: float
    host_bytes: float
    pcie_bytes: float


def optimizer_traffic(arch: Architecture, job: Job, plan: Plan) -> OptimizerTraffic:
    split = plan_split(arch, plan)
    trainable = rank_trainable_params(arch, job, plan.tp, split, plan.ep, heaviest_rank(arch, plan.tp, split, plan.ep))
    partition = -(-trainable // plan.zero_group) if plan.zero >= 1 else trainable
    if plan.offload == "none":
        return OptimizerTraffic(partition * OPTIMIZER_STEP_BYTES_PER_PARAM, 0.0, 0.0)
    pcie: float = partition * (2 + 2)  # 16-bit gradients down, updated 16-bit parameters up
    if plan.offload == "optimizer+params":  # parameters stream in for forward and backward per micro-batch
        pcie += plan.grad_accum * 2 * count_params(arch).total / plan.zero_group * 2
    return OptimizerTraffic(0.0, partition * OPTIMIZER_STEP_BYTES_PER_PARAM, pcie)


def optimizer_time_from_traffic(traffic: OptimizerTraffic, gpu: GpuSpec) -> float:
    return (
        traffic.hbm_bytes / (gpu.hbm_bandwidth_gb_per_s * BYTES_PER_GB)
        + traffic.host_bytes / (HOST_OPTIMIZER_BANDWIDTH_GB_PER_S * BYTES_PER_GB)
        + traffic.pcie_bytes / (PCIE_BANDWIDTH_GB_PER_S * BYTES_PER_GB)
    )


def optimizer_time_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> float:
    return optimizer_time_from_traffic(optimizer_traffic(arch, job, plan), gpu)


def offload_exposed_s(transfer_bytes: float, compute_s: float) -> float:
    """Activation offloading copies on a side stream (torchtune OffloadActivations use_streams=True;
    Unsloth's offloaded checkpoints are non_blocking copies), so the transfer hides behind the
    step's compute; what exceeds it stalls the step. The host link: PCIE_BANDWIDTH_GB_PER_S."""
    return max(0.0, transfer_bytes / (PCIE_BANDWIDTH_GB_PER_S * BYTES_PER_GB) - compute_s)


def compute_time_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec) -> float:
    """Seconds of matmul work per optimizer step on one GPU (hardware FLOPs, recompute included):
    a data-parallel replica's tokens, their work split over its tp * pp * cp GPUs, at the stack's
    efficiency on the GPU (calibration.compute_efficiency: the generation's, the GPU's own speed and
    the stack's dense-layer kernels), a MoE's routed experts at the generation's alone. The attention
    runs at the stack's kernel's speed (models/time/attention_kernel.py: cuDNN's saves about 38% of
    FlashAttention-2's time), the same on every layout of a count (the solver's compute tables)."""
    flops = plan_flops_per_token(arch, job, plan)
    tokens_per_gpu = plan.micro_batch * plan.grad_accum * job.seq_len / (plan.tp * plan.pp * plan.cp)
    efficiency = compute_efficiency(gpu, job.stack).value
    work: float = flops.hardware - attention_saved_flops_per_token(arch, job, plan, gpu)  # the stack's attention kernel
    fp8 = plan.precision == "fp8"
    # a linear FLOP's time in its layers' units: fp8 GEMMs at fp8_gemm_time_ratio (models/time/fp8.py)
    linear = fp8_gemm_time_ratio(gpu, stack_efficiency(gpu, job.stack)) if fp8 else 1.0
    casts_s = 0.0
    if fp8:  # the linears' GEMMs in fp8 plus the recipe's casts, the rest in bf16 (models/time/fp8.py)
        peak_tflops(gpu, "fp8")  # an unsupported fp8 is still the one-line error
        work -= flops.linear * (1 - linear)
        casts_s = fp8_cast_seconds(arch, job, plan, gpu)
    experts = expert_efficiency(gpu)
    if flops.expert and experts.value != efficiency:
        # the stack's kernel speed and the GPU's own are measured on dense layers; the routed experts'
        # grouped GEMMs run at their own efficiency (calibration.expert_efficiency), in the dense work's units
        expert_linear = fp8_gemm_time_ratio(gpu, experts) if fp8 else 1.0
        work += flops.expert * (expert_linear * efficiency / experts.value - linear)
    peak = peak_tflops(gpu, rate_precision(plan.precision))
    # a DeepSeek Sparse Attention indexer's fp32 score matmuls run at the GPU's fp32 rate (models/time/flops.py)
    work += flops.fp32 * (peak / gpu.fp32_dense_tflops - 1)
    matmul_s = tokens_per_gpu * work / (peak * _TERA * efficiency)
    return matmul_s + casts_s + eager_elementwise_s(arch, job, plan, gpu)  # uncompiled element-wise ops (compile_speed.py)


def dp_phase_times_s(traffic: DpTraffic, gpu: GpuSpec, crossing: bool, network_gb_per_s: float | None,
                     latency_s: float) -> tuple[float, float]:
    """(forward, backward) seconds of the traffic: bytes at the link's rate plus each collective's latency."""
    return dp_phase_times_on_link_s(traffic, communication_bandwidth_gb_per_s(gpu, crossing, network_gb_per_s), latency_s)


def dp_phase_times_on_link_s(traffic: DpTraffic, link_gb_per_s: float, latency_s: float) -> tuple[float, float]:
    """dp_phase_times_s on a link of link_gb_per_s (communication_bandwidth_gb_per_s); the traffic's
    fields may be arrays (the solver's grids)."""
    rate = link_gb_per_s * BYTES_PER_GB
    return (traffic.forward_bytes / rate + traffic.forward_collectives * latency_s,
            traffic.backward_bytes / rate + traffic.backward_collectives * latency_s)


def dp_ring_latency_s(plan: Plan, gpus_per_node: int) -> float:
    """NCCL's latency of one all-gather / reduce-scatter over the plan's DP x CP group."""
    return ring_latency_s(plan.zero_group, group_nodes(plan.zero_group, plan.tp, gpus_per_node))


def communication_phases_s(
    arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, gpus_per_node: int, network_gb_per_s: float | None = None
) -> tuple[float, float]:
    """(forward, backward) seconds of the data-parallel traffic."""
    crossing = crosses_nodes(dp_group_span(plan), gpus_per_node)
    return dp_phase_times_s(dp_traffic(arch, job, plan), gpu, crossing, network_gb_per_s,
                            dp_ring_latency_s(plan, gpus_per_node))


def overlap_windows_s(compute_s: float, forward_share: float) -> tuple[float, float]:
    """(forward, backward) compute that each phase's traffic can hide behind; recompute runs in
    the backward (models.flops.FlopsPerToken.forward_share)."""
    forward = compute_s * forward_share
    return forward, compute_s - forward


def dp_windows_s(compute_s: float, forward_share: float, zero: int, pp: int, vpp: int, grad_accum: int,
                 stack: str) -> tuple[float, float]:
    """overlap_windows_s of the plan's data-parallel traffic: the whole phases where the gradients
    reduce every micro-batch (ZeRO-2/3); where they reduce once a step (ZeRO-0/1) the last
    micro-batch's backward (once_a_step_window_share), and ZeRO-1's parameter all-gather the first
    micro-batch's forward where the stack overlaps it (PARAM_GATHER_OVERLAP_STACKS), else nothing:
    it runs after the optimizer step."""
    if reduces_each_micro_batch(zero):
        return overlap_windows_s(compute_s, forward_share)
    return once_a_step_windows_s(compute_s, forward_share, pp, vpp, grad_accum, stack)


def once_a_step_windows_s(compute_s: float, forward_share: float, pp: int, vpp: int, grad_accum: int,
                          stack: str) -> tuple[float, float]:
    """dp_windows_s of ZeRO-0/1 (the solver tabulates them per accumulation)."""
    forward, backward = overlap_windows_s(compute_s, forward_share)
    share = once_a_step_window_share(pp, vpp, grad_accum)
    return (forward * share if stack in PARAM_GATHER_OVERLAP_STACKS else 0.0), backward * share


def once_a_step_window_share(pp: int, vpp: int, grad_accum: int) -> float:
    """The share of a step's backward (and, for the parameter all-gather, forward) compute that
    the data-parallel traffic of ZeRO-0/1 can hide behind. ZeRO-2/3 reduce-scatter every
    micro-batch's gradients during its backward (DpTraffic): the whole backward. ZeRO-0/1 reduce
    once a step, in the last micro-batch's backward only: the others run without gradient sync (Megatron-LM core_v0.19.0
    megatron/core/pipeline_parallel/schedules.py forward_backward_no_pipelining: the first m - 1
    micro-batches under `no_sync_func`, the last outside it; torch DDP `no_sync` under
    accelerate's `accumulate`; DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py
    reduce_ready_partitions_and_remove_grads: `if self.partition_gradients or
    self.is_gradient_accumulation_boundary`, ZeRO-1 partitions no gradients), so
    1 of the m micro-batches' backwards. With a pipeline the first stage, which ends the step,
    enables the sync only for its last backward (forward_backward_pipelining_without_interleaving:
    "only enable async grad reduction in first pipeline stage. Other pipeline stages do grad
    reduction during pipeline bubble"); interleaved, each model chunk's reduction starts after
    that chunk's last micro-batch backward (forward_backward_pipelining_with_interleaving,
    grad_sync_func), the first chunk to finish (vpp - 1) x pp chunk-steps before the end, so
    (vpp - 1) x pp + 1 of the m x vpp chunk-steps' backward. Megatron's parameter all-gather
    mirrors it in the next step's first forwards (the warm-up's chunks)."""
    return min(1.0, ((vpp - 1) * pp + 1) / (grad_accum * vpp))


def reduces_each_micro_batch(zero: int) -> bool:
    """Whether the ZeRO stage reduces (reduce-scatters) the gradients in every micro-batch's
    backward (ZeRO-2/3: dp_traffic) rather than once a step (ZeRO-0/1)."""
    return zero >= 2


def exposed_communication_s(phases_s: tuple[float, float], windows_s: tuple[float, float], num_layers: int) -> float:
    """Traffic that does not hide behind its phase's compute; at least one layer's share (the last bucket)."""
    forward, backward = phases_s
    if forward + backward <= 0:
        return 0.0
    return max(0.0, forward - windows_s[0]) + max(backward - windows_s[1], (forward + backward) / num_layers)


def performance(
    arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, gpus_per_node: int | None = None,
    network_gb_per_s: float | None = None,
) -> Performance:
    """gpus_per_node: GPUs of one instance of the offering (default: the GPU's usual node size);
    network_gb_per_s: the offering's per-GPU bandwidth between instances (default: the GPU's)."""
    flops = plan_flops_per_token(arch, job, plan)
    peak = peak_tflops(gpu, rate_precision(plan.precision))
    per_node = gpus_per_node or gpu.gpus_per_node
    network = gpu.network_bandwidth_gb_per_s if network_gb_per_s is None else network_gb_per_s
    compute_s = compute_time_s(arch, job, plan, gpu)
    phases_s = communication_phases_s(arch, job, plan, gpu, per_node, network)
    comm_s = sum(phases_s)
    windows_s = dp_windows_s(compute_s, flops.forward_share, plan.zero, plan.pp, plan.vpp, plan.grad_accum, job.stack)
    exposed_s = exposed_communication_s(phases_s, windows_s, arch.num_layers)
    optimizer_s = optimizer_time_s(arch, job, plan, gpu)
    model_parallel = parallel_time(arch, job, plan, gpu, per_node, network, compute_s)
    offload_s = offload_exposed_s(offload_transfer_bytes(arch, job, plan), compute_s)
    dequant_s = dequantize_s(arch, job, plan, gpu)  # a 4/8-bit frozen base's 16-bit copies (models/time/dequantize.py)
    step_s = compute_s + exposed_s + optimizer_s + model_parallel.total_s + offload_s + dequant_s

    tokens_per_step = plan.micro_batch * plan.grad_accum * job.seq_len * plan.dp
    tokens_per_s = tokens_per_step / step_s
    denominator = plan.num_gpus * peak * _TERA
    return Performance(
        model_flops_per_token=flops.model,
        hardware_flops_per_token=flops.hardware,
        peak_tflops=peak,
        compute_efficiency=compute_efficiency(gpu, job.stack).value,
        compute_time_s=compute_s,
        communication_time_s=comm_s,
        exposed_communication_s=exposed_s,
        optimizer_time_s=optimizer_s,
        model_parallel_time_s=model_parallel.total_s,
        pipeline_bubble_s=model_parallel.pp_bubble_s,
        pipeline_imbalance_s=model_parallel.pp_imbalance_s,
        moe_host_wait_s=model_parallel.moe_host_s,
        offload_exposed_s=offload_s,
        dequantize_s=dequant_s,
        step_time_s=step_s,
        tokens_per_step=tokens_per_step,
        tokens_per_s=tokens_per_s,
        mfu=flops.model * tokens_per_s / denominator,
        hfu=flops.hardware * tokens_per_s / denominator,
    )
