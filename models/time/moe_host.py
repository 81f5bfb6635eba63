"""The host time a dropless MoE layer exposes when it waits for the CPU (HOST_SYNCED_MOE_STACKS:
Megatron-Core; the mechanism and its code are cited where the behaviour is defined,
models/core/time_behaviours.py).

Every MoE layer's forward synchronizes the host with the GPU: the dispatcher needs the routed token
counts on the CPU. From then until the next sync the GPU runs only what the host has launched since:
the rest of the layer (the dispatch and combine, each local expert's GEMMs, which Transformer Engine
launches one by one, their quantization) and the next layer up to its router. When launching an
interval takes the host longer than the GPU takes to run it, the GPU waits the difference:

    exposed = syncs x max(0, host_s - gpu_s x interval_share)

It depends on how the step's sequences are split into micro-batches (more, smaller ones wait more
often, each with less GPU work to hide behind): the solver adds it with the bubble, per
accumulation (solver/tables.py bubble_us), as it does the all-to-alls the overlap leaves unhidden.

- syncs: the rank's MoE layer forwards per step: its MoE layers (moe_layers / pp, the average
  stage) x its micro-batches, and again for each fully recomputed one (a recomputed forward runs the
  dispatcher again: models/memory/recompute.py recomputed_fraction).
- host_s: the host's time to launch one interval, a fixed part (MOE_HOST_SYNC_S; MOE_HOST_SYNC_GRAPHED_S
  where Transformer Engine's per-layer graphs replay the attention, MoE router and preprocess,
  Job.cuda_graphs "attn") + MOE_HOST_EXPERT_S x the rank's local experts (num_experts / ep),
  calibrated on Megatron-Bridge's published MoE runs without full-iteration CUDA graphs
  (models/time/calibration.py).
- gpu_s x interval_share: the GPU's work of one interval, the rank's step (its compute and exposed
  model-parallel time: TP, PP p2p, CP and the EP term, expert GEMM shape, permutations and
  all-to-alls) times the share one interval holds: a layer's forward, the forward share of the work
  (FlopsPerToken.forward_share) over the rank's layers (num_layers / pp) and micro-batches. Under
  Megatron's MoE all-to-all overlap (Job.moe_a2a_overlap) each forward layer runs beside another
  micro-batch's backward layer (Megatron-LM@d98e8a64 megatron/core/pipeline_parallel/combined_1f1b.py:
  forward layer i with backward layer n - 1 - i), both launched after the sync: an interval holds
  a layer's forward and backward, 1 / (layers x micro-batches) of the work, and the host launches
  the backward's input-gradient GEMMs too, as many as the forward's (BACKWARD_LAUNCHES: the
  weight gradients deferred), 2 x host_s.

A full-iteration CUDA graph (Job.cuda_graphs "full-iteration": `--cuda-graph-impl full_iteration`)
replays the step with no host launch: nothing is exposed. Per-layer graphs leave the sync and the
experts' launches; graphs of the router and preprocess alone (without the attention) read as none
in the published runs. Outside the all-to-all overlap the backward needs no sync (the split
sizes are on the host by then) and runs ahead of the GPU: not charged.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import HOST_SYNCED_MOE_STACKS
from vramplan.models.memory.recompute import recomputed_fraction
from vramplan.models.time.calibration import MOE_HOST_EXPERT_S, MOE_HOST_SYNC_GRAPHED_S, MOE_HOST_SYNC_S
from vramplan.models.time.flops import plan_flops_per_token
from vramplan.models.time.moe_gemm import moe_layers


@dataclass(frozen=True)
class HostSync:
    """A plan's host-synchronized MoE forwards per micro-batch (0: none), the host's seconds per
    interval and the share of one micro-batch's GPU work an interval holds: what does not depend on
    how the step's sequences are split into micro-batches."""

    syncs: float = 0.0
    host_s: float = 0.0
    interval_share: float = 0.0


NO_HOST_SYNC = HostSync()
# Under the all-to-all overlap the backward layer of an interval launches what its forward does:
# one input-gradient GEMM per forward GEMM, its weight-gradient GEMMs deferred past the interval
# (Megatron's delay_wgrad_compute, model_parallel_config.py L348 @ d98e8a64, which needs the overlap,
# transformer_config.py L3074-3077; Megatron-Bridge 5776a6d9 scripts/performance/utils/overrides.py
# L139 sets both, and vramplan's launch configuration writes both).
BACKWARD_LAUNCHES = 1


def host_sync_s(num_experts: int, ep: int, graphs: str) -> float:
    """The host's seconds to launch one interval: a fixed part (less under per-layer graphs) and one
    per local expert."""
    fixed = MOE_HOST_SYNC_GRAPHED_S.value if graphs == "attn" else MOE_HOST_SYNC_S.value
    return fixed + MOE_HOST_EXPERT_S.value * (num_experts // ep)


def host_synced(arch: Architecture, job: Job) -> bool:
    """Whether the job's MoE layers wait for the host: its stack syncs a dropless MoE layer and it
    runs without a full-iteration CUDA graph."""
    return arch.is_moe and job.stack in HOST_SYNCED_MOE_STACKS and job.cuda_graphs != "full-iteration"


def host_sync(arch: Architecture, job: Job, plan: Plan) -> HostSync:
    """The plan's HostSync; NO_HOST_SYNC unless host_synced. Its micro-batch size and count do not enter."""
    if not host_synced(arch, job):
        return NO_HOST_SYNC
    layers = arch.num_layers / plan.pp
    syncs = moe_layers(arch) / plan.pp * (1 + recomputed_fraction(arch, job, plan))
    host_s = host_sync_s(arch.num_experts, plan.ep, job.cuda_graphs)
    if job.moe_a2a_overlap and plan.ep > 1:  # a forward and a backward layer per interval, both launched after the sync
        return HostSync(syncs, host_s * (1 + BACKWARD_LAUNCHES), 1.0 / layers)
    return HostSync(syncs, host_s, plan_flops_per_token(arch, job, plan).forward_share / layers)


def host_exposed_s(sync: HostSync, grad_accum: int, gpu_step_s: float) -> float:
    """What the GPU waits for the host over a step of grad_accum micro-batches whose rank's GPU work
    (compute and exposed model-parallel time) is gpu_step_s seconds."""
    if not sync.syncs:
        return 0.0
    return grad_accum * sync.syncs * max(0.0, sync.host_s - gpu_step_s / grad_accum * sync.interval_share)


def cuda_graphs_note(arch: Architecture, job: Job) -> str | None:
    """What the estimate leaves out of a plan with CUDA graphs (None without): Job.cuda_graphs
    changes the step time, not the memory."""
    if job.cuda_graphs == "none":
        return None
    padding = (" and the MoE layers' capacity padding (Megatron captures a dropless MoE layer only with token drop "
               "and padding, or Megatron-Bridge's paged stashing)" if arch.is_moe and job.cuda_graphs == "full-iteration"
               else "")
    return f"--cuda-graphs {job.cuda_graphs}: this memory estimate leaves out the graphs' memory pool{padding}"
