"""The activations pillar: what is kept between forward and backward, plus the backward's peak.

kept = embedding + shared (RoPE cos/sin) + L x per-layer + output layer, where per-layer is
- recompute "none": every term of models/activation_terms.layer_terms;
- "selective": all but the attention core (Korthikanti sec. 5: sbh*34 for the GPT layer);
- "full": only the layer input, e*T*h (Korthikanti: 2sbh; HF gradient checkpointing measured the
  same); HF additionally keeps the 4-D eager attention mask (e*b*s^2) alive once for all layers;
- "op", partial full recompute and activation offloading: models/recompute.py.
The output layer and the loss (eager, chunked, fused) are models/loss.py; the fragmentation
reserve (a fraction of the largest transient block) is models/fragmentation.py.

The peak comes at the start of backward: on top of everything kept, the largest of
- the loss's gradient temporaries (models/loss.py), and
- one layer's backward: under recompute, the recomputed part of that layer is rebuilt (Chen et al.
  arXiv:1604.06174: the peak holds one segment being rebuilt) and its gradients are produced,
  which layer_backward_temporaries bounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.activation_terms import FP32, Shape, Term, embedding_terms, layer_terms, shared_terms
from vramplan.models.catalogue_schema import Architecture
from vramplan.models.fragmentation import fragmentation_reserve_bytes
from vramplan.models.lora import adapted_modules
from vramplan.models.loss import loss_cost
from vramplan.models.params import LayerGroup, layer_groups
from vramplan.models.precision import activation_bytes
from vramplan.models.recompute import layer_keep, offloaded_bytes
from vramplan.models.setup import Job, Plan


@dataclass(frozen=True)
class Activations:
    per_layer_bytes: int
    layers_bytes: int
    embedding_bytes: int
    output_layer_bytes: int
    backward_peak_extra_bytes: int
    terms: tuple[Term, ...]  # one layer's no-recompute saved set, for explanations
    fragmentation_reserve_bytes: int = 0  # models/fragmentation.py
    offloaded_bytes: int = 0  # saved activations in host memory (activation offloading)

    @property
    def total_bytes(self) -> int:
        return (self.embedding_bytes + self.layers_bytes + self.output_layer_bytes + self.backward_peak_extra_bytes
                + self.fragmentation_reserve_bytes)


def _sum(terms: list[Term]) -> int:
    return sum(term.num_bytes for term in terms)


def activation_shape(job: Job, plan: Plan) -> Shape:
    e = activation_bytes(plan.precision)
    fp32_weights = job.accounting == "hf" or (job.method == "qlora" and job.qlora_prep == "peft")
    autocast = job.kernels == "eager" and fp32_weights and plan.precision in ("bf16", "fp16")
    return Shape(b=plan.micro_batch, s=job.seq_len, e=e, autocast=autocast)


def layer_saved_terms(arch: Architecture, job: Job, plan: Plan, group: LayerGroup | None = None) -> list[Term]:
    """One layer's saved tensors with no recompute (LoRA adapters included); default the last layer's kind."""
    x = activation_shape(job, plan)
    adapters = rank = 0
    if job.method != "full":
        used = arch.experts_per_token
        modules = None if group is None else group.modules
        adapters = sum(used if m.copies_per_layer > 1 else 1 for m in adapted_modules(arch, job.lora_targets, modules))
        rank = job.lora_rank
    return layer_terms(arch, job.kernels, job.attention, x, adapters, rank, group)


def layer_backward_temporaries(arch: Architecture, x: Shape, group: LayerGroup | None = None) -> int:
    """Gradients alive while one layer runs backward, beyond what it saved: the MLP backward holds
    the gradients of two f-wide tensors per routed token while producing them, and the norms'
    backward two fp32 h-wide gradients. An upper bound, checked against MemTracker peaks of HF
    Llama, Qwen2, Mixtral and Gemma2 layers (tests/test_saved_tensors.py)."""
    if group is not None and not group.moe:
        widths = arch.dense_intermediate_size or arch.intermediate_size
    else:
        widths = arch.experts_per_token * arch.intermediate_size + arch.shared_expert_intermediate_size
    return 2 * x.e * x.t * widths + 2 * FP32 * x.t * arch.hidden_size


def _kept_and_rebuilt(terms: list[Term], layer_input: int, recompute: str) -> tuple[int, int]:
    """(bytes a layer keeps until backward, bytes its backward rebuilds) under a recompute mode."""
    full_layer = _sum(terms)
    if recompute == "full":
        return layer_input, full_layer
    if recompute == "selective":
        kept = _sum([t for t in terms if not t.attention_core])
        return kept, full_layer - kept
    return full_layer, 0


def activations(arch: Architecture, job: Job, plan: Plan) -> Activations:
    x = activation_shape(job, plan)
    kinds = []  # (group, its terms, what its layers keep, backward peak bytes) per kind of layer
    for group in layer_groups(arch):
        group_terms = layer_saved_terms(arch, job, plan, group)
        keep = layer_keep(arch, job, plan, group_terms, x, group)
        kinds.append((group, group_terms, keep, keep.rebuilt_bytes + layer_backward_temporaries(arch, x, group)))
    _, terms, largest_keep, _ = max(kinds, key=lambda kind: kind[2].per_layer_bytes)  # for explanations
    layer_peak = max(kind[3] for kind in kinds)
    kept_bytes = sum(keep.layers_bytes for _, _, keep, _ in kinds)
    offloaded = offloaded_bytes(job, arch.num_layers, kept_bytes, max(keep.largest_bytes for _, _, keep, _ in kinds))
    shared = _sum(shared_terms(arch, x))
    if plan.recompute == "full" and job.kernels == "eager" and job.attention == "eager":
        shared += x.e * x.b * x.s * x.s  # HF keeps the 4-D causal mask alive in the checkpoint closure
    loss = loss_cost(arch, job, x)
    extra = max(loss.backward_extra_bytes, layer_peak)
    return Activations(
        per_layer_bytes=largest_keep.per_layer_bytes,
        layers_bytes=kept_bytes - offloaded + shared,
        embedding_bytes=_sum(embedding_terms(arch, x)),
        output_layer_bytes=_sum(loss.kept),
        backward_peak_extra_bytes=extra,
        terms=tuple(terms),
        fragmentation_reserve_bytes=fragmentation_reserve_bytes(arch, job, x, loss.largest_transient_bytes),
        offloaded_bytes=offloaded,
    )
