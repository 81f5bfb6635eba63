"""The step time expert parallelism adds (models/time/parallel_time.py sums it with TP, PP and CP):

- EP (Megatron MoE all-to-all dispatcher): per MoE layer and micro-batch, dispatch and combine
  all-to-alls of the routed tokens (T*K x h) forward and backward, (ep-1)/ep of them leave the
  rank (with the job's moe_dispatcher deepep / hybridep, Megatron's flex dispatcher, a token
  crosses the network once per remote node and NVLink once per rank: models/time/moe_dispatch.py);
  exposed, unless the job's moe_a2a_overlap (Megatron's --overlap-moe-expert-parallel-comm,
  a2a_overlapped) runs them beside another micro-batch's compute: then only beyond the step's
  compute (ep_seconds). The peers of an EP group inside the rank's
  instance are reached over NVLink and the others over the network, at once: the slower share
  sets the time. The EP term also holds what the layout's expert shape and the stack's MoE kernel
  add to the expert GEMMs (models/time/moe_gemm.py): few tokens per expert (small ep) and narrow
  expert slices (expert TP = tp) slow them, with or without EP. And the dispatcher's permutation
  passes around the expert GEMMs (models/time/moe_permute.py: Megatron's alltoall and DeepEP paths),
  memory-bound passes of the routed rows through HBM.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vramplan.models.catalogue.catalogue import load_stacks
from vramplan.models.catalogue.stack import MoeKernel
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan, Precision
from vramplan.models.memory.precision import activation_bytes
from vramplan.models.time.calibration import expert_efficiency
from vramplan.models.time.collectives import link_seconds
from vramplan.models.time.flops import FlopsPerToken, plan_flops_per_token
from vramplan.models.time.fp8 import fp8_gemm_speedup
from vramplan.models.time.moe_dispatch import Dispatch, dispatch_shares, routed_tokens
from vramplan.models.time.moe_gemm import (
    ExpertShape,
    expert_invocations,
    expert_shape,
    expert_slowdown,
    loop_overhead_s,
    moe_layers,
)
from vramplan.models.time.moe_permute import permute_bytes
from vramplan.models.time.rates import gemm_element_bytes, hbm_stream_seconds, peak_tflops, rate_precision

_TERA = 10**12


@dataclass(frozen=True)
class EpTraffic:
    """What routing tokens to experts costs one GPU per step, GPU-independent: the all-to-all
    bytes, and the expert GEMMs (their FLOPs, shape, number of expert calls and the stack's kernel)."""

    routed_bytes: float  # dispatch + combine, forward + backward, before the share that leaves the rank
    expert_flops: float  # expert GEMM FLOPs of the GPU's step (hardware, recompute included)
    shape: ExpertShape | None  # None: a dense model
    calls: float  # local expert calls per step, one sequence per micro-batch
    kernel: MoeKernel
    precision: Precision
    dispatch: Dispatch | None = None  # the job's dispatcher, experts and top-k (None: alltoall)
    permute_bytes: float = 0.0  # the dispatcher's permutation passes through HBM (moe_permute.py), recompute included
    overlapped: bool = False  # the all-to-alls run beside another micro-batch's compute (a2a_overlapped)


def moe_kernel(job: Job) -> MoeKernel:
    """The MoE kernel the job's stack runs (catalogues/stacks.csv `moe_kernel`)."""
    return load_stacks()[job.stack].moe_kernel


def expert_flops(arch: Architecture, job: Job, plan: Plan, flops: FlopsPerToken | None = None) -> float:
    """Expert GEMM FLOPs of the GPU's step, recompute included (`flops`: the plan's
    plan_flops_per_token, when the caller has it); 0 for a dense model."""
    if not arch.is_moe:
        return 0.0
    return expert_flops_over_recomputes(arch, job, plan, [plan_flops_per_token(arch, job, plan) if flops is None else flops])[0]


def expert_flops_over_recomputes(arch: Architecture, job: Job, plan: Plan, flops: Sequence[FlopsPerToken]) -> list[float]:
    """expert_flops of the plan under each recompute's plan_flops_per_token (`flops`): the tokens
    the GPU runs do not change with the recompute."""
    if not arch.is_moe:
        return [0.0] * len(flops)
    tokens_per_gpu = plan.micro_batch * plan.grad_accum * job.seq_len / (plan.tp * plan.pp * plan.cp)
    return [per_token.expert * tokens_per_gpu for per_token in flops]


def a2a_overlapped(job: Job, ep: int) -> bool:
    """Whether a plan's EP all-to-alls (EP degree `ep`) run beside the compute: the job's moe_a2a_overlap with EP.
    Megatron's --overlap-moe-expert-parallel-comm (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/pipeline_parallel/combined_1f1b.py: "EP A2A in forward step is hidden by the
    attention/mlp computation in the backward step, and vice versa") runs one micro-batch's forward
    beside another's backward, layer by layer (models/common/model_chunk_schedule_plan.py run:
    forward layer i with backward layer n - 1 - i; each layer's dispatch and combine issued on their
    own stream while the other micro-batch's attention and MLP compute): the all-to-alls are exposed
    only beyond the compute (ep_seconds), and the share no other micro-batch runs beside
    (a2a_unhidden_share) in full (a2a_unhidden_s, which depends on the micro-batch count: the
    solver's step tables add it with the bubble)."""
    return job.moe_a2a_overlap and ep > 1


def a2a_unhidden_share(pp: int, vpp: int, grad_accum: int) -> float:
    """The share of the all-to-alls that no other micro-batch's compute can hide under the overlap:
    without a pipeline the first micro-batch's forward and the last one's backward run alone
    (combined_1f1b.py combined_1f1b_schedule_for_no_pipelining: "The forward step for the first
    microbatch is executed alone", "The backward step for the last microbatch is executed alone"),
    1 of m; interleaved, the first rank's warm-up forwards and cool-down backwards, (pp - 1) x 2 +
    (vpp - 1) x pp + 1 of its m x vpp model chunks (schedules.py L955-969, the overlap's extra
    warm-up micro-batch included)."""
    if pp == 1:
        return 1.0 / grad_accum
    return min(1.0, (2 * (pp - 1) + (vpp - 1) * pp + 1) / (grad_accum * vpp))


def a2a_unhidden_s(all_to_all_s: float, compute_s: float, share: float) -> float:
    """What of the all-to-alls the overlap leaves exposed in the steps no other micro-batch runs
    beside: that share of the part the compute would hide (the part beyond it is ep_seconds')."""
    return share * min(all_to_all_s, compute_s)


def ep_traffic(arch: Architecture, job: Job, plan: Plan, flops: FlopsPerToken | None = None) -> EpTraffic:
    """The all-to-all bytes and the expert GEMMs of the plan (`flops` as in expert_flops)."""
    sequences = plan.micro_batch * plan.grad_accum  # a replica's, what the solver's replica plan keeps
    layout = plan.layout
    routed = 0.0
    if plan.ep > 1:
        e = activation_bytes(plan.precision)
        per_layer = e * routed_tokens(job, plan) * arch.experts_per_token * arch.hidden_size
        routed = 4 * per_layer * moe_layers(arch) / plan.pp * plan.grad_accum  # dispatch + combine, fwd + bwd
    shape = expert_shape(arch, job.seq_len, layout, gemm_element_bytes(plan.precision), job.method == "full")
    dispatch = Dispatch(job.moe_dispatcher, arch.num_experts, arch.experts_per_token)
    return EpTraffic(routed, expert_flops(arch, job, plan, flops), shape, expert_invocations(arch, layout, sequences),
                     moe_kernel(job), plan.precision, dispatch, permute_bytes(arch, job, plan), a2a_overlapped(job, plan.ep))


def _ep_members_inside(layout: Layout, gpus_per_instance: int) -> int:
    """EP ranks of a group inside one instance: they are tp x cp ranks apart (Megatron's order)."""
    return max(1, min(layout.ep, gpus_per_instance // (layout.tp * layout.cp)))


def all_to_all_seconds(routed_bytes: float, layout: Layout, gpu: GpuSpec, gpus_per_instance: int,
                        network_gb_per_s: float, dispatch: Dispatch | None = None) -> float:
    """The NVLink share and the network share at once, the slower one: the alltoall dispatcher's
    (inside - 1) / ep and (ep - inside) / ep of the routed bytes, a node-deduplicating one's
    moe_dispatch.dispatch_shares."""
    if layout.ep == 1:
        return 0.0
    inside = _ep_members_inside(layout, gpus_per_instance)
    if dispatch is not None and dispatch.deduplicates:
        nvlink_share, network_share = dispatch_shares(dispatch, layout.tp, layout.ep, inside)
        nvlink = link_seconds(routed_bytes * nvlink_share, gpu.intra_node_bandwidth_gb_per_s)
        if inside == layout.ep:
            return nvlink
        return max(nvlink, link_seconds(routed_bytes * network_share, network_gb_per_s))
    nvlink = link_seconds(routed_bytes * (inside - 1) / layout.ep, gpu.intra_node_bandwidth_gb_per_s)
    if inside == layout.ep:
        return nvlink
    return max(nvlink, link_seconds(routed_bytes * (layout.ep - inside) / layout.ep, network_gb_per_s))


def _expert_gemm_seconds(ep: EpTraffic, gpu: GpuSpec) -> float:
    """What the expert GEMMs take beyond the compute time's dense-shaped FLOPs (models/time/moe_gemm.py)."""
    if ep.shape is None:
        return 0.0
    # the experts' GEMMs at their own efficiency, not the dense layers' (calibration.expert_efficiency)
    efficiency = expert_efficiency(gpu)
    work = ep.expert_flops / fp8_gemm_speedup(gpu, efficiency) if ep.precision == "fp8" else ep.expert_flops  # models/time/fp8.py
    dense_s = work / (peak_tflops(gpu, rate_precision(ep.precision)) * _TERA * efficiency.value)
    slowdown = expert_slowdown(ep.shape, peak_tflops(gpu, ep.precision), gpu.hbm_bandwidth_gb_per_s)
    return dense_s * (slowdown - 1) + loop_overhead_s(ep.kernel, ep.calls)


def traffic_all_to_all_s(ep: EpTraffic, layout: Layout, gpu: GpuSpec, gpus_per_instance: int,
                         network_gb_per_s: float) -> float:
    """all_to_all_seconds of a plan's EP traffic on a shape."""
    return all_to_all_seconds(ep.routed_bytes, layout, gpu, gpus_per_instance, network_gb_per_s, ep.dispatch)


def ep_seconds(ep: EpTraffic, layout: Layout, gpu: GpuSpec, gpus_per_instance: int, network_gb_per_s: float,
               compute_s: float = 0.0) -> float:
    """The all-to-alls (overlapped ones only beyond the step's compute, compute_s: a2a_overlapped),
    the expert GEMMs' shape and kernel, and the dispatcher's permutation passes."""
    all_to_all = traffic_all_to_all_s(ep, layout, gpu, gpus_per_instance, network_gb_per_s)
    if ep.overlapped:
        all_to_all = max(0.0, all_to_all - compute_s)
    return all_to_all + _expert_gemm_seconds(ep, gpu) + hbm_stream_seconds(ep.permute_bytes, gpu)


def ep_unhidden_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, gpus_per_instance: int,
                  network_gb_per_s: float, compute_s: float) -> float:
    """a2a_unhidden_s of the plan: 0 unless its all-to-alls overlap (a2a_overlapped)."""
    if not arch.is_moe or not a2a_overlapped(job, plan.ep):
        return 0.0
    all_to_all = traffic_all_to_all_s(ep_traffic(arch, job, plan), plan.layout, gpu, gpus_per_instance, network_gb_per_s)
    return a2a_unhidden_s(all_to_all, compute_s, a2a_unhidden_share(plan.pp, plan.vpp, plan.grad_accum))


def ep_time_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, gpus_per_instance: int, network_gb_per_s: float,
              compute_s: float = 0.0) -> float:
    """The all-to-alls (exposed, or beyond the step's compute compute_s under a2a_overlapped), the
    expert GEMMs' shape and kernel and the dispatcher's permutation passes; 0 for a dense model."""
    if not arch.is_moe:
        return 0.0
    return ep_seconds(ep_traffic(arch, job, plan), plan.layout, gpu, gpus_per_instance, network_gb_per_s, compute_s)
