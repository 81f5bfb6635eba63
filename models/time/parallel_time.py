"""Step time that model parallelism adds: TP collectives, the pipeline bubble and p2p, CP's ring
exchange, EP's all-to-all. Data-parallel traffic stays in models/time/performance.py.

Rank order is Megatron-Core's default "tp-cp-ep-dp-pp" (parallel_state.initialize_model_parallel,
`order`): TP innermost, so a TP group never leaves an instance (models/parallel.check_layout)
and runs at the GPU's NVLink bandwidth; CP and EP groups leave the instance when tp*cp (tp*cp*ep)
exceeds its GPUs; PP neighbours are tp*cp*dp ranks apart, so p2p crosses instances whenever the
job spans several. Cross-instance traffic runs at the offering's per-GPU network bandwidth.
Every link runs at COMMUNICATION_EFFICIENCY of its rate; ring collectives move (n-1)/n of the
buffer per rank per pass (all-reduce two passes).

- TP (Megatron tensor_parallel/mappings.py): per layer and micro-batch two all-reduces forward
  (after attention and after the MLP) and two backward, of one b x s/cp x h activation each;
  with SP each all-reduce becomes a reduce-scatter + all-gather of the same volume. Full
  recompute re-runs the two forward ones in the layers it checkpoints. The forward ones are
  exposed (Megatron-LM's default: model_parallel_config.py tp_comm_overlap = False); the backward
  ones run beside the backward GEMMs (tp_time_s), except on SERIAL_TP_BACKWARD_STACKS (torchtitan's
  DTensor TP: models/core/stack_behaviour.py), where they are exposed too. With the recipe option
  tp_overlap (overlaps_tp: Megatron's --tp-comm-overlap, Transformer Engine userbuffers pipelining
  each all-gather / reduce-scatter with its linear's GEMM, forward and backward; torchtitan's async
  TP, Inductor's micro-pipeline pass over the compiled forward and backward graphs; both with
  sequence parallelism only) every TP collective runs beside the GEMMs: the forward's exposed only
  beyond the forward compute, the backward's and the recomputed forward's beyond the backward's.
  On FLOAT8_TP_STACKS (torchtitan's tensorwise Float8 TP: torchao Float8ColwiseParallel /
  Float8RowwiseParallel / PrepareFloat8ModuleInput) with fp8 and SP on a dense model the all-gathers
  move float8 (1 byte; the reduce-scatters stay bf16): float8_tp.
- PP (Narayanan et al. 2021, sec. 2.2): the 1F1B bubble is (pp - 1) / (vpp * m) of a step's
  stage time: the slowest stage's compute and the TP, p2p, CP and EP time exposed in its
  micro-batches (each of the pp - 1 idle slots waits for a whole micro-batch of a stage, its
  waited-on collectives included); p2p sends each micro-batch's hidden states forward and their gradients backward at
  every one of the vpp chunk boundaries of a rank, 1/tp of them per TP rank (SP shard, or the
  scatter-gather optimisation of sec. 4.1 without SP). Exposed, except an interleaved schedule's on
  OVERLAPPED_P2P_STACKS (Megatron's --overlap-p2p-communication: overlaps_p2p), which runs beside
  the compute and is exposed only beyond it.
- CP (Megatron-Core / TE ring attention, AttnFuncWithCPAndKVP2P): cp - 1 ring steps per layer,
  each sending the rank's K/V chunk forward and K/V + dK/dV backward, overlapped with the
  attention blocks of the ring; only what exceeds the attention compute is exposed. On
  TORCH_RING_CP_STACKS (torchtitan) torch's all-gather ring instead (models/time/ring_attention.py):
  the K/V repeated to the query heads, gathered per forward and backward, dK/dV rotated in fp32,
  hidden only behind each pass's first block eager and not at all in compiled blocks.
- EP: the all-to-alls and the expert GEMMs' shape and kernel, models/time/ep_time.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from vramplan.models.architecture.parallel import kv_heads_per_rank, plan_split
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec
from vramplan.models.core.layout import Layout
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import FLOAT8_TP_STACKS, OVERLAPPED_P2P_STACKS, SERIAL_TP_BACKWARD_STACKS
from vramplan.models.memory.precision import FP8_BYTES, activation_bytes
from vramplan.models.memory.recompute import recomputed_fraction, stage_recomputed
from vramplan.models.time.collectives import link_seconds
from vramplan.models.time.ep_time import (
    EpTraffic,
    ep_seconds,
    ep_time_s,
    ep_traffic,
    ep_unhidden_s,
    expert_flops_over_recomputes,
)
from vramplan.models.time.flops import forward_flops_per_token, plan_flops_over_recomputes, plan_flops_per_token
from vramplan.models.time.moe_host import host_exposed_s, host_sync
from vramplan.models.time.moe_permute import permute_bytes_over_recomputes
from vramplan.models.time.pipeline_schedule import pp_bubble_s, pp_imbalance_s, stage_imbalance, stage_time_s
from vramplan.models.time.ring_attention import ring_bytes_per_layer, ring_window_flops, torch_ring


@dataclass(frozen=True)
class ParallelTime:
    tp_s: float
    pp_bubble_s: float
    pp_p2p_s: float
    cp_exposed_s: float
    ep_s: float  # the all-to-all and the expert GEMMs' shape and kernel (ep_time_s)
    pp_imbalance_s: float = 0.0  # the slowest pipeline rank's work beyond the mean rank's (pp_imbalance_s)
    ep_unhidden_s: float = 0.0  # the overlapped all-to-alls no other micro-batch hides (ep_time.ep_unhidden_s)
    moe_host_s: float = 0.0  # what the MoE forwards wait for the host (moe_host.host_exposed_s)

    @property
    def total_s(self) -> float:
        return (self.tp_s + self.pp_bubble_s + self.pp_p2p_s + self.cp_exposed_s + self.ep_s + self.pp_imbalance_s
                + self.ep_unhidden_s + self.moe_host_s)


def _layers_per_rank(arch: Architecture, plan: Plan) -> float:
    return arch.num_layers / plan.pp


@dataclass(frozen=True)
class ParallelTraffic:
    """What a plan's model parallelism moves per optimizer step, and what hides it: everything of
    the TP/PP/CP/EP terms that does not depend on the GPU or the offering (parallel_traffic).
    parallel_seconds turns it into seconds on a shape, with the same float operations as the
    *_time_s functions (which are built from the same two halves)."""

    layout: Layout
    tp_exposed_bytes: float  # the forward's collectives, recomputed layers' included (and the backward's: _tp_bytes)
    tp_overlapped_bytes: float  # the backward's: hidden behind the backward GEMMs (and the recomputed forward's: overlaps_tp)
    tp_forward_overlapped_bytes: float  # the forward's, hidden behind the forward GEMMs (overlaps_tp; else 0)
    forward_share: float  # of the executed FLOPs (models.flops): the rest is the backward's window
    pp_bytes: float  # p2p of hidden states forward and gradients backward: blocking
    pp_overlapped_bytes: float  # the same, beside the compute (overlaps_p2p: Megatron's interleaved schedule)
    cp_bytes: float  # the K/V ring
    attention_flops: int  # forward FLOPs per token: the attention the ring hides behind (CP's window: _cp_window) ...
    forward_flops: int  # ... of the whole forward (layers + attention + logits)
    ep: EpTraffic  # the all-to-alls and the expert GEMMs


def overlaps_tp(job: Job, plan: Plan) -> bool:
    """Whether the plan's TP collectives run beside the GEMMs: the job's tp_overlap with sequence
    parallelism. Megatron's --tp-comm-overlap (model_parallel_config.py tp_comm_overlap) gives each
    TE linear a userbuffer that pipelines its all-gather / reduce-scatter with its GEMM in chunks,
    forward and backward (tp_comm_overlap_ag / _rs; the backward's bulk overlaps, tp_comm_bulk_dgrad
    / _wgrad); arguments.py asserts sequence_parallel with it. torchtitan's async TP
    (enable_async_tensor_parallel) sets torch._inductor.config._micro_pipeline_tp, whose post-grad
    pass (torch/_inductor/fx_passes/micro_pipeline_tp.py) fuses all_gather -> mm and mm ->
    reduce_scatter into fused_all_gather_matmul / fused_matmul_reduce_scatter in every compiled
    graph, the backward's included: SP's collectives, none without them."""
    return job.tp_overlap and plan.tp > 1 and plan.sequence_parallel


def float8_tp(arch: Architecture, job: Job, plan: Plan) -> bool:
    """Whether the plan's TP all-gathers move float8 (FLOAT8_TP_STACKS: torchtitan's tensorwise
    Float8 TP plan, torchao Float8ColwiseParallel / Float8RowwiseParallel / PrepareFloat8ModuleInput):
    fp8 precision with sequence parallelism (without SP the collectives are all-reduces, which
    reduce bf16) on a dense architecture (torchtitan's MoE models keep bf16 TP)."""
    return (plan.precision == "fp8" and plan.tp > 1 and plan.sequence_parallel and job.stack in FLOAT8_TP_STACKS
            and not arch.is_moe)


def _tp_volume_share(arch: Architecture, job: Job, plan: Plan) -> float:
    """The TP collectives' bytes over their 16-bit volume. With SP each of the layer's all-reduce
    volumes is an all-gather and a reduce-scatter of one b x s/cp x h activation: forward, the
    attention / MLP input's all-gather and wo / w2's output reduce-scatter; backward, the reverse
    (the input gradient's reduce-scatter, the output gradient's all-gather). Under float8_tp both
    all-gathers move the 1-byte float8 data (torchao float8_ops.py allgather_fp8: e4m3 inputs
    forward, e5m2 output gradients backward), the reduce-scatters the bf16 sums: (1 + 2) / (2 + 2)."""
    if not float8_tp(arch, job, plan):
        return 1.0
    e = activation_bytes(plan.precision)
    return (FP8_BYTES + e) / (2 * e)


def _tp_bytes(arch: Architecture, job: Job, plan: Plan) -> tuple[float, float, float]:
    """(exposed, overlapped, forward-overlapped) bytes of the TP collectives: the forward's, and the
    backward's, which SERIAL_TP_BACKWARD_STACKS (torchtitan) run between the GEMMs and so expose too;
    under overlaps_tp the forward's hide behind the forward compute, and the backward's and the
    recomputed forward's (which runs inside the backward) behind the backward compute. Every
    collective at the activations' 16-bit width, but the all-gathers of float8_tp at 1 byte (the
    forward's, the recomputed forward's and the backward's alike: _tp_volume_share)."""
    if plan.tp == 1:
        return 0.0, 0.0, 0.0
    return _tp_recomputed_bytes(job, plan, _tp_collective_bytes(arch, job, plan), recomputed_fraction(arch, job, plan))


def _tp_collective_bytes(arch: Architecture, job: Job, plan: Plan) -> float:
    """The step's bytes of one of a layer's TP collectives (tp > 1), whatever the recompute: a
    ring's 2 (tp - 1) / tp of one b x s/cp x h activation, every layer of the rank and micro-batch."""
    e = activation_bytes(plan.precision)
    activation = e * plan.micro_batch * (job.seq_len // plan.cp) * arch.hidden_size
    return (2 * (plan.tp - 1) / plan.tp * activation * _layers_per_rank(arch, plan) * plan.grad_accum
            * _tp_volume_share(arch, job, plan))  # float8 all-gathers on FLOAT8_TP_STACKS


def _tp_recomputed_bytes(job: Job, plan: Plan, per_collective: float, fraction: float) -> tuple[float, float, float]:
    """_tp_bytes of the plan from its per-collective bytes (_tp_collective_bytes) and its
    recomputed share of the layers (models.recompute.recomputed_fraction)."""
    backward = 2 * per_collective
    if overlaps_tp(job, plan):  # the recomputed forward runs in the backward (torchtitan: its compiled graph)
        rerun_and_backward = 2 * fraction * per_collective + backward
        if job.stack in SERIAL_TP_BACKWARD_STACKS:
            return rerun_and_backward, 0.0, 2 * per_collective
        return 0.0, rerun_and_backward, 2 * per_collective
    forward = (2 + 2 * fraction) * per_collective  # recomputed layers re-run theirs
    if job.stack in SERIAL_TP_BACKWARD_STACKS:
        return forward + backward, 0.0, 0.0
    return forward, backward, 0.0


def _tp_seconds(exposed_bytes: float, overlapped_bytes: float, forward_overlapped_bytes: float, link_gb_per_s: float,
                backward_compute_s: float, forward_compute_s: float) -> float:
    """The exposed collectives in full; the overlapped ones beyond the backward compute, the
    forward-overlapped ones beyond the forward compute (each window the whole phase's compute)."""
    return (link_seconds(exposed_bytes, link_gb_per_s)
            + max(0.0, link_seconds(overlapped_bytes, link_gb_per_s) - backward_compute_s)
            + max(0.0, link_seconds(forward_overlapped_bytes, link_gb_per_s) - forward_compute_s))


def tp_time_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, compute_s: float = 0.0) -> float:
    """Exposed TP collectives: the forward's (and the recomputed forward's) in full; the backward's
    overlap the backward GEMMs (Megatron LinearWithGradAccumulationAndAsyncCommunication issues the
    input all-gather and the grad-input reduce-scatter / all-reduce async_op=True beside the
    grad-input and weight-gradient GEMMs), exposed only beyond the backward compute; on
    SERIAL_TP_BACKWARD_STACKS (torchtitan) in full as well. Under overlaps_tp (the job's tp_overlap)
    the forward's are exposed only beyond the forward compute, the rest beyond the backward's."""
    if plan.tp == 1:
        return 0.0
    exposed, overlapped, forward_overlapped = _tp_bytes(arch, job, plan)
    share = plan_flops_per_token(arch, job, plan).forward_share
    return _tp_seconds(exposed, overlapped, forward_overlapped, gpu.intra_node_bandwidth_gb_per_s,
                       compute_s * (1 - share), compute_s * share)


def _pp_bytes(arch: Architecture, job: Job, plan: Plan) -> float:
    if plan.pp == 1:
        return 0.0
    e = activation_bytes(plan.precision)
    # Each TP rank sends 1/tp of the hidden states: the SP shard, or without SP Megatron's
    # scatter-gather optimisation (Narayanan et al. 2021 sec. 4.1; p2p_communication scatter_gather_tensors).
    hidden = e * plan.micro_batch * (job.seq_len // plan.cp) * arch.hidden_size / plan.tp
    return 2 * hidden * plan.vpp * plan.grad_accum  # activations forward, gradients backward


def overlaps_p2p(job: Job, plan: Plan) -> bool:
    """Whether the plan's p2p runs beside the compute: an interleaved schedule on
    OVERLAPPED_P2P_STACKS (Megatron's --overlap-p2p-communication; without interleaving Megatron
    batches its p2p, blocking). Only the 1F1B steady state's transfers overlap there; the warmup's
    and cool-down's, a fixed number of chunks per step ((pp - 1) * 2 + (vpp - 1) * pp on the first
    rank: schedules.py get_pp_rank_microbatches), block: left out, as the share depends on the
    accumulation and the traffic here is a replica's whatever its micro-batches (the solver's)."""
    return plan.pp > 1 and plan.vpp > 1 and job.stack in OVERLAPPED_P2P_STACKS


def _pp_traffic(arch: Architecture, job: Job, plan: Plan) -> tuple[float, float]:
    """(blocking, overlapped) p2p bytes (overlaps_p2p)."""
    volume = _pp_bytes(arch, job, plan)
    return (0.0, volume) if overlaps_p2p(job, plan) else (volume, 0.0)


def _pp_seconds(blocking_bytes: float, overlapped_bytes: float, link_gb_per_s: float, compute_s: float) -> float:
    """The blocking transfers in full; the overlapped ones beyond the compute they run beside."""
    return link_seconds(blocking_bytes, link_gb_per_s) + max(0.0, link_seconds(overlapped_bytes, link_gb_per_s) - compute_s)


def pp_p2p_s(arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, spans_instances: bool, network_gb_per_s: float,
             compute_s: float = 0.0) -> float:
    if plan.pp == 1:
        return 0.0
    link = network_gb_per_s if spans_instances else gpu.intra_node_bandwidth_gb_per_s
    return _pp_seconds(*_pp_traffic(arch, job, plan), link, compute_s)


def _cp_bytes(arch: Architecture, job: Job, plan: Plan) -> float:
    if plan.cp == 1:
        return 0.0
    if torch_ring(job):  # torch's all-gather ring (models/time/ring_attention.py)
        per_layer = ring_bytes_per_layer(arch, job, plan)
    else:
        e = activation_bytes(plan.precision)
        kv_chunk = 2 * e * plan.micro_batch * (job.seq_len // plan.cp) * kv_heads_per_rank(arch.num_kv_heads, plan.tp) * arch.head_dim
        per_layer = (plan.cp - 1) * kv_chunk * (1 + 2)  # K/V forward; K/V + dK/dV backward
    return per_layer * _layers_per_rank(arch, plan) * plan.grad_accum


def _cp_window(arch: Architecture, job: Job, plan: Plan) -> tuple[int, int]:
    """(attention FLOPs the ring hides behind, forward FLOPs) per token: their ratio is the share of
    the compute that hides the ring. Megatron's hides behind the whole attention, torch's behind
    ring_window_flops of it (eager: each pass's first block; compiled: none)."""
    attention, forward = _forward_flops(arch, job)
    return (ring_window_flops(attention, job, plan) if torch_ring(job) else attention), forward


def _cp_seconds(volume: float, link_gb_per_s: float, compute_s: float, attention_flops: int, forward_flops: int) -> float:
    attention_s = compute_s * attention_flops / forward_flops  # the ring hides behind these attention blocks (_cp_window)
    return max(0.0, link_seconds(volume, link_gb_per_s) - attention_s)


def _forward_flops(arch: Architecture, job: Job) -> tuple[int, int]:
    layers, attention, logits = forward_flops_per_token(arch, job.seq_len)
    return attention, layers + attention + logits


def _cp_link(tp: int, cp: int, gpu: GpuSpec, gpus_per_instance: int, network_gb_per_s: float) -> float:
    return network_gb_per_s if tp * cp > gpus_per_instance else gpu.intra_node_bandwidth_gb_per_s


def cp_exposed_s(
    arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, gpus_per_instance: int, network_gb_per_s: float,
    compute_s: float,
) -> float:
    if plan.cp == 1:
        return 0.0
    link = _cp_link(plan.tp, plan.cp, gpu, gpus_per_instance, network_gb_per_s)
    return _cp_seconds(_cp_bytes(arch, job, plan), link, compute_s, *_cp_window(arch, job, plan))


def parallel_traffic(arch: Architecture, job: Job, plan: Plan, same_layout: ParallelTraffic | None = None) -> ParallelTraffic:
    """The GPU-independent half of the TP, PP p2p, CP and EP terms (not the bubble).

    `same_layout`: the traffic of a plan that differs from this one in its recompute alone (the
    solver tabulates every recompute of a layout): what the recompute changes is computed (the TP
    bytes and the forward's share, which the recomputed forward grows; torch's ring re-gathered in
    it; the expert FLOPs and the dispatcher's permutation bytes, moe_permute.py) and the rest read
    from it (the p2p, the CP window, the EP routing, expert shape and calls), the same values
    (tests/solver/test_traffic_recompute.py)."""
    return parallel_traffic_over_recomputes(arch, job, (plan,), same_layout)[0]


def parallel_traffic_over_recomputes(arch: Architecture, job: Job, plans: Sequence[Plan],
                                     same_layout: ParallelTraffic | None = None) -> list[ParallelTraffic]:
    """parallel_traffic of plans that differ in their recompute alone (the solver tabulates every
    recompute of a layout, count and precision): what the recompute does not change is computed
    once, from the first plan or read from `same_layout` (as parallel_traffic's), and per plan only
    what it changes: its recomputed share of the layers (models.recompute.recomputed_fraction), the
    TP bytes from one collective's (_tp_collective_bytes), the FLOPs per token (forward share and
    expert FLOPs: flops.plan_flops_over_recomputes), torch's ring bytes and the dispatcher's
    permutation bytes (moe_permute.permute_bytes_over_recomputes)."""
    first = plans[0]
    fractions = [recomputed_fraction(arch, job, plan) for plan in plans]
    flops = plan_flops_over_recomputes(arch, job, plans, fractions)
    if same_layout is None:
        attention, forward = _cp_window(arch, job, first) if first.cp > 1 else (0, 1)
        pp = _pp_traffic(arch, job, first)
        ep = ep_traffic(arch, job, first, flops[0])
    else:
        attention, forward = same_layout.attention_flops, same_layout.forward_flops
        pp = same_layout.pp_bytes, same_layout.pp_overlapped_bytes
        ep = same_layout.ep
    per_collective = _tp_collective_bytes(arch, job, first) if first.tp > 1 else 0.0
    experts = expert_flops_over_recomputes(arch, job, first, flops)
    permutes = permute_bytes_over_recomputes(arch, job, plans, fractions)
    layout = first.layout
    traffic = []
    for plan, fraction, per_token, expert, permute in zip(plans, fractions, flops, experts, permutes):
        tp = _tp_recomputed_bytes(job, plan, per_collective, fraction) if plan.tp > 1 else (0.0, 0.0, 0.0)
        share = per_token.forward_share if plan.tp > 1 else 0.0
        plan_ep = ep if (expert, permute) == (ep.expert_flops, ep.permute_bytes) else replace(
            ep, expert_flops=expert, permute_bytes=permute)
        traffic.append(ParallelTraffic(layout, *tp, share, *pp, _cp_bytes(arch, job, plan), attention, forward, plan_ep))
    return traffic


def parallel_seconds(traffic: ParallelTraffic, gpu: GpuSpec, spans_instances: bool, gpus_per_instance: int,
                     network_gb_per_s: float, compute_s: float) -> float:
    """TP + PP p2p + CP + EP seconds of a plan's traffic on a shape: the sum of tp_time_s, pp_p2p_s,
    cp_exposed_s and ep_time_s, float for float (tests/solver/test_step_grids.py)."""
    t, layout = traffic, traffic.layout
    intra = gpu.intra_node_bandwidth_gb_per_s
    tp = _tp_seconds(t.tp_exposed_bytes, t.tp_overlapped_bytes, t.tp_forward_overlapped_bytes, intra,
                     compute_s * (1 - t.forward_share), compute_s * t.forward_share) if layout.tp > 1 else 0.0
    pp = _pp_seconds(t.pp_bytes, t.pp_overlapped_bytes, network_gb_per_s if spans_instances else intra,
                     compute_s) if layout.pp > 1 else 0.0
    cp = _cp_seconds(t.cp_bytes, _cp_link(layout.tp, layout.cp, gpu, gpus_per_instance, network_gb_per_s), compute_s,
                     t.attention_flops, t.forward_flops) if layout.cp > 1 else 0.0
    ep = ep_seconds(t.ep, layout, gpu, gpus_per_instance, network_gb_per_s, compute_s) if t.ep.shape is not None else 0.0
    return tp + pp + cp + ep


def parallel_time(
    arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, gpus_per_instance: int, network_gb_per_s: float,
    compute_s: float,
) -> ParallelTime:
    spans = plan.num_gpus > gpus_per_instance
    imbalance = stage_imbalance(arch, job.seq_len, plan_split(arch, plan), stage_recomputed(arch, job, plan))
    tp = tp_time_s(arch, job, plan, gpu, compute_s)
    p2p = pp_p2p_s(arch, job, plan, gpu, spans, network_gb_per_s, compute_s)
    cp = cp_exposed_s(arch, job, plan, gpu, gpus_per_instance, network_gb_per_s, compute_s)
    ep = ep_time_s(arch, job, plan, gpu, gpus_per_instance, network_gb_per_s, compute_s)
    return ParallelTime(
        tp_s=tp,
        # The bubble idles for the slowest stage's time per micro-batch: its compute and the exposed
        # collectives and p2p each micro-batch waits on (pipeline_schedule.stage_time_s; the sum is
        # parallel_seconds', float for float, which the solver's step tables pass)
        pp_bubble_s=pp_bubble_s(plan, stage_time_s(compute_s, imbalance, tp + p2p + cp + ep)),
        pp_imbalance_s=pp_imbalance_s(imbalance, compute_s),
        pp_p2p_s=p2p,
        cp_exposed_s=cp,
        ep_s=ep,
        ep_unhidden_s=ep_unhidden_s(arch, job, plan, gpu, gpus_per_instance, network_gb_per_s, compute_s),
        # the GPU's step work the host's launches race: its compute and exposed model-parallel time
        # (the sum the solver's step tables pass as compute_s + parallel_s)
        moe_host_s=host_exposed_s(host_sync(arch, job, plan), plan.grad_accum, compute_s + (tp + p2p + cp + ep)),
    )
