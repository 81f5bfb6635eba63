"""The memory of one rank as a sum of terms, each over a few decisions: what the solver tabulates.

sum(memory_terms(...).values()) == models.memory.stage_memory(...).total_bytes exactly
(tests/models/memory/test_parallel_terms.py checks it on random layouts). Each term and the decisions it depends on:

| term | depends on |
|---|---|
| weights, gradients, optimizer_states | tp, pp, ep, stage, zero, zero group (dp*cp), expert-DP, precision, offload |
| activations.layers | micro-batch terms (tp, cp, sp, recompute, b, precision) x stage layers x in-flight chunks |
| | (pp, accumulation, vpp, stage) / vpp |
| activations.shared | in-flight chunks x RoPE tables (cp, b) |
| activations.embedding | first rank: micro-batches in flight on the first stage (pp, accumulation, vpp) x embedding terms (tp, sp, cp, b) |
| activations.output_layer | last rank: one micro-batch's logits and loss (tp, sp, cp, b) |
| activations.backward_peak | max(last rank's loss temporaries, one layer's backward) |
| activations.fragmentation | the job's fragmentation fraction x the largest transient block / tp (models/memory/fragmentation.py) |
| activations.pipeline_buffers | torch pipelining's receive buffers and kept stage outputs (pp, accumulation, vpp, stage, tp, sp, cp, b) |
| step.grad_copy_excess | Megatron's fp32 grad copies, DeepSpeed's fp32 cast, beyond the freed activations (zero, precision, accounting) |
| overhead.* | fixed reserve; NCCL per communicator; DP buckets (zero, dp*cp > 1); ZeRO-3 working set (tp, pp > 1) and bucket |
| | (one rank: the working set only with the parameters offloaded); SP, p2p, CP buffers |
"""

from __future__ import annotations

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Offload, Plan, Precision, Recompute, ZeroStage
from vramplan.models.memory.activations import MicrobatchActivations, microbatch_activations, rank_activations, rank_chunks
from vramplan.models.memory.model_states import ModelStates, model_states
from vramplan.models.memory.overhead import overhead


def model_states_for(
    arch: Architecture, job: Job, precision: Precision, zero: ZeroStage, offload: Offload,
    tp: int, pp: int, ep: int, stage: int, zero_group: int, stage_layers: tuple[int, ...] | None = None,
    grad_accum: int = 1,
) -> ModelStates:
    """Model states from the decisions they depend on (cp only through zero_group = dp * cp; the
    pipeline's split, None = the default; the accumulation, for stacks that keep unsharded gradients
    while accumulating)."""
    plan = Plan(gpu="-", num_gpus=tp * pp * zero_group, tp=tp, pp=pp, ep=ep, zero=zero, offload=offload,
                precision=precision, stage_layers=stage_layers, grad_accum=grad_accum)
    return model_states(arch, job, plan, stage)


def activation_bytes_per_microbatch(
    arch: Architecture, job: Job, precision: Precision, tp: int, cp: int, sequence_parallel: bool,
    recompute: Recompute, micro_batch: int,
) -> MicrobatchActivations:
    """One micro-batch on one rank from the decisions it depends on."""
    plan = Plan(gpu="-", num_gpus=tp * cp, tp=tp, cp=cp, sequence_parallel=sequence_parallel, recompute=recompute,
                precision=precision, micro_batch=micro_batch)
    return microbatch_activations(arch, job, plan)


def memory_terms(arch: Architecture, job: Job, plan: Plan, stage: int = 0) -> dict[str, int]:
    """Rank `stage`'s bytes by term (GPU and offering only set the capacity side, not these)."""
    states = model_states_for(arch, job, plan.precision, plan.zero, plan.offload, plan.tp, plan.pp, plan.ep, stage,
                              plan.zero_group, plan.stage_layers, plan.grad_accum)
    micro = activation_bytes_per_microbatch(arch, job, plan.precision, plan.tp, plan.cp, plan.sequence_parallel,
                                            plan.recompute, plan.micro_batch)
    chunks = rank_chunks(job, plan, stage)  # what the shared terms are kept for
    acts = rank_activations(arch, job, plan, micro, stage)
    over = overhead(arch, job, plan)
    terms = {
        "weights": states.weights_bytes,
        "gradients": states.gradients_bytes,
        "optimizer_states": states.optimizer_states_bytes,
        "activations.layers": acts.layers_bytes - chunks * micro.shared_bytes,
        "activations.shared": chunks * micro.shared_bytes,
        "activations.embedding": acts.embedding_bytes,
        "activations.output_layer": acts.output_layer_bytes,
        "activations.backward_peak": acts.backward_peak_extra_bytes,
        "activations.fragmentation": acts.fragmentation_reserve_bytes,
        "activations.pipeline_buffers": acts.pipeline_buffers_bytes,
        # the optimizer step's copies where they outweigh the freed activations (MemoryBreakdown.total_bytes)
        "step.grad_copy_excess": max(0, states.step_grad_copy_bytes - acts.total_bytes),
    }
    for name in ("cuda_context_bytes", "cublas_workspace_bytes", "nccl_bytes", "comm_buckets_bytes",
                 "zero3_live_params_bytes", "tp_buffers_bytes", "pp_p2p_bytes", "cp_buffers_bytes",
                 "dispatcher_buffers_bytes"):
        terms["overhead." + name.removesuffix("_bytes")] = getattr(over, name)
    return terms
