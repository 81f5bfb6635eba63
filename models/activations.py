"""The activations pillar: what is kept between forward and backward, plus the backward's peak.

kept = embedding + shared (RoPE cos/sin) + L x per-layer + output layer, where per-layer is
- recompute "none": every term of models/activation_terms.layer_terms;
- "selective": all but the attention core (Korthikanti sec. 5: sbh*34 for the GPT layer);
- "full": only the layer input, e*T*h (Korthikanti: 2sbh; HF gradient checkpointing measured the
  same); HF additionally keeps the 4-D eager attention mask (e*b*s^2) alive once for all layers.

The peak comes at the start of backward: on top of everything kept, the largest of
- the loss's gradient temporaries (activation_terms.loss_backward_extra_bytes), and
- one layer's backward: under recompute, the recomputed part of that layer is rebuilt (Chen et al.
  arXiv:1604.06174: the peak holds one segment being rebuilt) and its gradients are produced,
  which layer_backward_temporaries bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.activation_terms import (
    FP32,
    Shape,
    Term,
    embedding_terms,
    layer_terms,
    loss_backward_extra_bytes,
    output_terms,
    shared_terms,
)
from vramplan.models.catalogue_schema import Architecture
from vramplan.models.lora import adapted_modules
from vramplan.models.parallel import sequence_parallel_active, stage_layers
from vramplan.models.parallel_activations import inflight_chunks, shard_terms
from vramplan.models.precision import activation_bytes
from vramplan.models.setup import Job, Plan
from vramplan.models.units import ceil_div


@dataclass(frozen=True)
class Activations:
    per_layer_bytes: int
    layers_bytes: int
    embedding_bytes: int
    output_layer_bytes: int
    backward_peak_extra_bytes: int
    terms: tuple[Term, ...]  # one layer's no-recompute saved set, for explanations

    @property
    def total_bytes(self) -> int:
        return self.embedding_bytes + self.layers_bytes + self.output_layer_bytes + self.backward_peak_extra_bytes


def _sum(terms: list[Term]) -> int:
    return sum(term.num_bytes for term in terms)


def activation_shape(job: Job, plan: Plan) -> Shape:
    """One rank's micro-batch: context parallelism gives it seq_len / cp tokens of each sequence."""
    e = activation_bytes(plan.precision)
    autocast = job.kernels == "eager" and job.accounting == "hf" and plan.precision in ("bf16", "fp16")
    return Shape(b=plan.micro_batch, s=job.seq_len // plan.cp, e=e, autocast=autocast)


def layer_saved_terms(arch: Architecture, job: Job, plan: Plan) -> list[Term]:
    """One layer's saved tensors with no recompute (LoRA adapters included)."""
    x = activation_shape(job, plan)
    adapters = rank = 0
    if job.method != "full":
        used = arch.experts_per_token
        adapters = sum(used if m.copies_per_layer > 1 else 1 for m in adapted_modules(arch, job.lora_targets))
        rank = job.lora_rank
    return layer_terms(arch, job.kernels, job.attention, x, adapters, rank)


def layer_backward_temporaries(arch: Architecture, x: Shape, tp: int = 1, sequence_parallel: bool = False) -> int:
    """Gradients alive while one layer runs backward, beyond what it saved: the MLP backward holds
    the gradients of two f-wide tensors per routed token while producing them, and the norms'
    backward two fp32 h-wide gradients. An upper bound, checked against MemTracker peaks of HF
    Llama, Qwen2, Mixtral and Gemma2 layers (tests/test_saved_tensors.py). Under TP the f-wide
    gradients are / tp, the h-wide ones too with sequence parallelism."""
    mlp = ceil_div(2 * x.e * x.t * arch.experts_per_token * arch.intermediate_size, tp)
    norms = 2 * FP32 * x.t * arch.hidden_size
    return mlp + (ceil_div(norms, tp) if sequence_parallel else norms)


@dataclass(frozen=True)
class MicrobatchActivations:
    """One micro-batch on one rank, before pipelining: depends on tp, cp, sequence parallelism,
    recompute, micro-batch size and precision only (the solver tabulates it over those)."""

    per_layer_bytes: int  # kept per decoder layer
    shared_bytes: int  # kept once per model chunk forward (RoPE tables, HF's causal mask)
    embedding_bytes: int  # kept by the first rank
    output_layer_bytes: int  # kept by the last rank
    layer_peak_bytes: int  # one layer's backward working set (rebuilt part + gradient temporaries)
    loss_peak_bytes: int  # the loss's backward temporaries (last rank)
    terms: tuple[Term, ...]


def microbatch_activations(arch: Architecture, job: Job, plan: Plan) -> MicrobatchActivations:
    x = activation_shape(job, plan)
    tp, sp = plan.tp, sequence_parallel_active(plan)
    terms = shard_terms(layer_saved_terms(arch, job, plan), arch, tp, sp)
    full_layer = _sum(terms)
    layer_input = x.e * x.t * arch.hidden_size
    layer_input = ceil_div(layer_input, tp) if sp else layer_input
    if plan.recompute == "full":
        per_layer = layer_input
        rebuilt = full_layer
    elif plan.recompute == "selective":
        per_layer = _sum([t for t in terms if not t.attention_core])
        rebuilt = full_layer - per_layer
    else:
        per_layer = full_layer
        rebuilt = 0
    shared = _sum(shared_terms(arch, x))
    if plan.recompute == "full" and job.kernels == "eager" and job.attention == "eager":
        shared += x.e * x.b * x.s * x.s  # HF keeps the 4-D causal mask alive in the checkpoint closure
    return MicrobatchActivations(
        per_layer_bytes=per_layer,
        shared_bytes=shared,
        embedding_bytes=_sum(shard_terms(embedding_terms(arch, x), arch, tp, sp)),
        output_layer_bytes=_sum(shard_terms(output_terms(arch, job.kernels, x), arch, tp, sp)),
        layer_peak_bytes=rebuilt + layer_backward_temporaries(arch, x, tp, sp),
        loss_peak_bytes=ceil_div(loss_backward_extra_bytes(arch, job.kernels, x), tp),
        terms=tuple(terms),
    )


def stage_activations(
    micro: MicrobatchActivations, layers: int, chunks: int, vpp: int, first: bool, last: bool
) -> Activations:
    """A pipeline rank holding `layers` decoder layers in `vpp` chunks, `chunks` of which are in
    flight (parallel_activations.inflight_chunks); the first rank keeps the embedding's
    activations for the same micro-batches, the last one micro-batch's output layer."""
    return Activations(
        per_layer_bytes=micro.per_layer_bytes,
        layers_bytes=ceil_div(chunks * layers * micro.per_layer_bytes, vpp) + chunks * micro.shared_bytes,
        embedding_bytes=ceil_div(chunks * micro.embedding_bytes, vpp) if first else 0,
        output_layer_bytes=micro.output_layer_bytes if last else 0,
        backward_peak_extra_bytes=max(micro.loss_peak_bytes if last else 0, micro.layer_peak_bytes),
        terms=micro.terms,
    )


def activations(arch: Architecture, job: Job, plan: Plan, stage: int = 0) -> Activations:
    """Pipeline rank `stage`'s activations at its peak (models/parallel_activations.py: TP/SP
    shards of each term, s / cp tokens, the micro-batches 1F1B keeps in flight)."""
    micro = microbatch_activations(arch, job, plan)
    chunks = inflight_chunks(plan.pp, plan.grad_accum, plan.vpp, stage)
    layers = stage_layers(arch.num_layers, plan.pp)[stage]
    return stage_activations(micro, layers, chunks, plan.vpp, stage == 0, stage == plan.pp - 1)
