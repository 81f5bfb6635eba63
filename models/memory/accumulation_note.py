"""What a stack's default would hold where its launch configuration syncs every micro-batch
(SYNC_EACH_BATCH_STACKS: the hf Trainer under FSDP, citations there). The estimate is the run that
vramplan's launch configuration writes: FSDP reduce-scatters each micro-batch's gradients into the
rank's shard. The Trainer's default skips that sync on all but the last micro-batch and holds every
trainable gradient whole in the compute dtype until then; a plan that would not fit that way says so."""

from __future__ import annotations

from fractions import Fraction

from vramplan.models.architecture.lora import trainable_params
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.hf_engine import hf_engine
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import SYNC_EACH_BATCH_STACKS
from vramplan.models.core.units import BYTES_PER_GIB
from vramplan.models.memory.memory import MemoryBreakdown
from vramplan.models.memory.precision import FP32_BYTES, HALF_BYTES, params_bytes


def syncs_each_batch(job: Job, plan: Plan) -> bool:
    """Whether the launch configuration sets sync_each_batch: the stack runs the plan on FSDP
    (models/core/hf_engine.py: ZeRO-2/3 on several GPUs without TP or EP, nothing offloaded to the
    optimizer on the host) with more than one micro-batch a step."""
    return job.stack in SYNC_EACH_BATCH_STACKS and plan.grad_accum > 1 and hf_engine(plan) == "fsdp"


def default_sync_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    """The whole trainable gradient in the compute dtype that the Trainer's default would hold per GPU
    (0 where the launch does not set sync_each_batch)."""
    if not syncs_each_batch(job, plan):
        return 0
    dtype = FP32_BYTES if plan.precision == "fp32" else HALF_BYTES
    return params_bytes(trainable_params(arch, job), Fraction(dtype))  # the hf stack has no pipeline


def accumulation_note(arch: Architecture, job: Job, plan: Plan, memory: MemoryBreakdown) -> str | None:
    """The plan's warning line where only the launch's sync_each_batch makes it fit: on the Trainer's
    default the whole gradient would stand where the estimate holds its shard (memory's gradients)."""
    held = default_sync_bytes(arch, job, plan)
    default_total = memory.total_bytes + held - memory.states.gradients_bytes
    if not held or default_total <= memory.limit_bytes:
        return None
    return (f"fits only with sync_each_batch, which the launch configuration sets (accelerator_config "
            f"gradient_accumulation_kwargs): on the Trainer's default FSDP holds every gradient whole while it accumulates "
            f"{plan.grad_accum} micro-batches, {held / BYTES_PER_GIB:,.1f} GiB a GPU, "
            f"{default_total / BYTES_PER_GIB:,.1f} GiB in all against the {memory.limit_bytes / BYTES_PER_GIB:,.1f} GiB limit")
