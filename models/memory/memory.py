"""The five pillars per GPU, and the bound: a plan fits when its peak, their sum (or, where the
optimizer step holds more than the activations, the step's: MemoryBreakdown.total_bytes), is at most
capacity x capacity_fraction, evaluated in exact integer bytes (per-mille arithmetic)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from vramplan.models.architecture.parallel import (
    candidate_stages,
    check_layout,
    dense_moe_option_refusal,
    dispatcher_refusal,
    linear_attention_refusal,
    plan_split,
)
from vramplan.models.core.catalogue_schema import Architecture, GpuSpec, Offering
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.results import Pillar
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import BYTES_PER_GIB
from vramplan.models.memory.activations import Activations, activations
from vramplan.models.memory.model_states import ModelStates, model_states
from vramplan.models.memory.overhead import Overhead, overhead
from vramplan.models.memory.pipeline_buffers import keeps_receive_buffers


@dataclass(frozen=True)
class MemoryBreakdown:
    states: ModelStates
    activations: Activations
    overhead: Overhead
    capacity_bytes: int
    capacity_per_mille: int  # host RAM's bound (the capacity fraction)
    gpu_per_mille: int  # GPU memory's (Job.gpu_capacity_per_mille: the fraction, or over the range's top)
    host_bytes: int  # per instance (node): offloaded model states and activations
    host_capacity_bytes: int | None
    stage: int = 0  # the pipeline rank this breakdown is for: the most loaded one
    # Every checked pipeline rank (architecture/parallel.py candidate_stages) as (rank, total bytes).
    checked_ranks: tuple[tuple[int, int], ...] = ()

    @property
    def pillars(self) -> dict[Pillar, int]:
        return {
            "weights": self.states.weights_bytes,
            "gradients": self.states.gradients_bytes,
            "optimizer_states": self.states.optimizer_states_bytes,
            "activations": self.activations.total_bytes,
            "overhead": self.overhead.total_bytes,
        }

    @property
    def activation_peak_bytes(self) -> int:
        """The five pillars' sum: the rank at its activation peak (forward and backward)."""
        return sum(self.pillars.values())

    @property
    def step_peak_bytes(self) -> int:
        """The rank at the optimizer step: its states, the overhead and the fp32 gradient copies the
        step holds (ModelStates.step_grad_copy_bytes: Megatron with a 16-bit gradient buffer; DeepSpeed's
        flat fp32 cast of one step unit), with
        no activations (freed by the step; the copies by the next step's zero_grad before its
        forward). The overhead is counted whole, its pipeline p2p and ring-attention buffers with
        it, though those are transient (a few hidden states: an upper bound)."""
        return self.states.gpu_bytes + self.overhead.total_bytes + self.states.step_grad_copy_bytes

    @property
    def total_bytes(self) -> int:
        """The rank's peak: the larger of its activation peak and its step peak (the same as the
        activation peak wherever the step holds nothing more than the states)."""
        peak = self.activation_peak_bytes
        return peak if not self.states.step_grad_copy_bytes else max(peak, self.step_peak_bytes)

    @property
    def limit_bytes(self) -> int:
        return self.capacity_bytes * self.gpu_per_mille // 1000

    @property
    def gpu_fits(self) -> bool:
        return self.total_bytes * 1000 <= self.capacity_bytes * self.gpu_per_mille

    @property
    def host_limit_bytes(self) -> int | None:
        if self.host_capacity_bytes is None:
            return None
        return self.host_capacity_bytes * self.capacity_per_mille // 1000

    @property
    def host_fits(self) -> bool:
        if self.host_bytes == 0 or self.host_capacity_bytes is None:
            return True
        return self.host_bytes * 1000 <= self.host_capacity_bytes * self.capacity_per_mille

    @property
    def fits(self) -> bool:
        return self.gpu_fits and self.host_fits

    @property
    def dominant_pillar(self) -> Pillar:
        pillars = self.pillars
        return max(pillars, key=lambda name: pillars[name])


def gpus_per_node_used(plan: Plan, gpu: GpuSpec, offering: Offering | None) -> int:
    per_node = offering.num_gpus if offering is not None else gpu.gpus_per_node
    return min(plan.num_gpus, per_node)


def check_job(arch: Architecture, job: Job, precision: str) -> None:
    """Jobs no training stack runs, whatever the GPU; each is a one-line error naming the field."""
    if precision == "fp8" and job.method != "full":
        raise VramplanError("precision", "fp8", f"fp8 training (Transformer Engine) is modelled for method=full, not {job.method}")
    if job.recompute_layers is not None and job.recompute_layers > arch.num_layers:
        raise VramplanError("recompute_layers", job.recompute_layers, f"{arch.name} has {arch.num_layers} layers")
    if arch.learned_position_embeddings and job.seq_len > arch.max_position_embeddings:
        raise VramplanError(
            "seq_len", job.seq_len, f"{arch.name} has learned positions for at most {arch.max_position_embeddings} tokens"
        )
    if arch.alibi and job.attention == "flash":  # BloomAttention adds its ALiBi bias by baddbmm: no SDPA or flash path
        raise VramplanError("attention", "flash", f"{arch.name}'s ALiBi attention runs eager only (transformers' "
                                                  "BloomAttention); --attention eager")
    for refusal in (dense_moe_option_refusal(arch, job), dispatcher_refusal(arch, job),
                    linear_attention_refusal(arch, precision)):
        if refusal is not None:  # an MoE option on a dense model; a dispatcher the stack runs for other models only;
            raise refusal  # a precision a model's kernel refuses


def check_gpu_precision(gpu: GpuSpec, precision: str) -> None:
    if precision == "fp8" and not gpu.fp8_supported:
        raise VramplanError("precision", "fp8", f"GPU {gpu.name} has no fp8 support (fp8_supported=false)")
    if precision == "bf16" and gpu.bf16_dense_tflops <= 0:
        raise VramplanError("precision", "bf16", f"GPU {gpu.name} has no bf16 support; use fp16")


def check_compatible(
    arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, offering: Offering | None = None
) -> None:
    """Combinations no training stack runs; each is a one-line error naming the field."""
    check_gpu_precision(gpu, plan.precision)
    check_job(arch, job, plan.precision)
    check_layout(arch, job, plan, gpu, offering.domain_gpus if offering is not None else gpu.gpus_per_node)


def stage_memory(
    arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, offering: Offering | None, stage: int
) -> MemoryBreakdown:
    """The five pillars on pipeline rank `stage` (no validity checks: memory_per_gpu makes them);
    host_bytes: this rank's offloaded states and activations times the GPUs of a node."""
    states = model_states(arch, job, plan, stage)
    acts = activations(arch, job, plan, stage)
    host_bytes = (states.host_bytes_per_gpu + acts.offloaded_bytes) * gpus_per_node_used(plan, gpu, offering)
    host_capacity = round(offering.host_memory_gib * BYTES_PER_GIB) if offering is not None else None
    return MemoryBreakdown(
        states=states,
        activations=acts,
        overhead=overhead(arch, job, plan),
        capacity_bytes=gpu.memory_usable_bytes,
        capacity_per_mille=job.capacity_per_mille,
        gpu_per_mille=job.gpu_capacity_per_mille,
        host_bytes=host_bytes,
        host_capacity_bytes=host_capacity,
        stage=stage,
    )


def memory_per_gpu(
    arch: Architecture, job: Job, plan: Plan, gpu: GpuSpec, offering: Offering | None = None
) -> MemoryBreakdown:
    """Memory of the most loaded rank (the pipeline stage with the largest total; the lowest on
    ties), with host RAM per node = the most states any rank offloads + the most activations any
    rank offloads, times the node's GPUs: a node may hold any stage (the solver's tables take
    the same two maxima, solver/space_tables.py)."""
    check_compatible(arch, job, plan, gpu, offering)
    candidates = candidate_stages(arch, plan_split(arch, plan), keeps_receive_buffers(job))
    stages = [stage_memory(arch, job, plan, gpu, offering, s) for s in candidates]
    worst = max(stages, key=lambda m: (m.total_bytes, -m.stage))
    per_gpu = (max(m.states.host_bytes_per_gpu for m in stages) + max(m.activations.offloaded_bytes for m in stages))
    return replace(worst, host_bytes=per_gpu * gpus_per_node_used(plan, gpu, offering),
                   checked_ranks=tuple((m.stage, m.total_bytes) for m in stages))
