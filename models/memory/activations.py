"""The activations pillar: what is kept between forward and backward, plus the backward's peak.

kept = embedding + shared (RoPE cos/sin) + L x per-layer + output layer, where per-layer is
- recompute "none": every term of models/activation_terms.layer_terms;
- "selective": all but the attention core (Korthikanti sec. 5: sbh*34 for the GPT layer);
- "full": only the layer input, e*T*h (Korthikanti: 2sbh; HF gradient checkpointing measured the
  same); HF additionally keeps the 4-D eager attention mask (e*b*s^2) alive once for all layers;
- "op", partial full recompute and activation offloading: models/memory/recompute.py.
The output layer and the loss (eager, chunked, fused) are models/memory/loss.py; the fragmentation
reserve (a fraction of the largest transient block) is models/memory/fragmentation.py.

The peak comes at the start of backward: on top of everything kept, the largest of
- the loss's gradient temporaries (models/memory/loss.py), and
- one layer's backward: under recompute, the recomputed part of that layer is rebuilt (Chen et al.
  arXiv:1604.06174: the peak holds one segment being rebuilt) and its gradients are produced,
  which beyond_saved.layer_backward_temporaries bounds;
and, with a bitsandbytes / NF4 frozen base, the 16-bit copy of the largest quantised matrix being
multiplied (models/architecture/quantization.py dequantised_weight_bytes): in a layer's backward,
or the lm_head's where the stack quantises it. Under litgpt's QLoRA the previous micro-batch's
quantised-linear inputs are kept on top (beyond_saved.held_inputs_bytes). Where the training loop drops its
reference to the logits (LOGITS_RELEASED_STACKS: torchtune's `del logits`), the loss's backward
frees what the output layer kept before any layer's backward runs, so a layer's backward stacks on
the layers' activations only (stage_activations).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from vramplan.models.architecture.lora import adapted_modules
from vramplan.models.architecture.module_names import module_name
from vramplan.models.architecture.parallel import Split, plan_split, sequence_parallel_active, stage_layer_kinds
from vramplan.models.architecture.params import LayerGroup, LayerKey, layer_architecture, layer_groups
from vramplan.models.architecture.quantization import dequantised_weight_bytes, unquantised_experts
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import (
    FUSED_QKV_DROPOUT_STACKS,
    GATHERED_SP_INPUT_STACKS,
    LOGITS_RELEASED_STACKS,
)
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.activation_terms import (
    embedding_terms,
    layer_terms,
    shared_terms,
    stored_kv_terms,
)
from vramplan.models.memory.beyond_saved import held_inputs_bytes, layer_backward_temporaries
from vramplan.models.memory.fragmentation import fragmentation_reserve_bytes
from vramplan.models.memory.loss import loss_cost, loss_parallel_backward_extra_bytes
from vramplan.models.memory.parallel_activations import first_stage_inflight, inflight_chunks, shard_terms
from vramplan.models.memory.pipeline_buffers import keeps_receive_buffers, pipeline_buffer_units, retains_input_grads
from vramplan.models.memory.precision import activation_bytes
from vramplan.models.memory.recompute import OFFLOAD_RESIDENT_LAYERS, effective_mode, layer_keep, rank_recomputed, recompute_block
from vramplan.models.memory.saved_tensors import FP32, Shape, Term
from vramplan.models.memory.sparse_attention_terms import causal_mask_bytes, indexer_transient_bytes


@dataclass(frozen=True)
class Activations:
    per_layer_bytes: int
    layers_bytes: int
    embedding_bytes: int
    output_layer_bytes: int
    backward_peak_extra_bytes: int
    terms: tuple[Term, ...]  # one layer's no-recompute saved set, for explanations
    fragmentation_reserve_bytes: int = 0  # models/memory/fragmentation.py
    offloaded_bytes: int = 0  # saved activations in host memory (activation offloading)
    pipeline_buffers_bytes: int = 0  # torch pipelining's receive buffers and kept outputs (pipeline_buffers.py)

    @property
    def total_bytes(self) -> int:
        return (self.embedding_bytes + self.layers_bytes + self.output_layer_bytes + self.backward_peak_extra_bytes
                + self.fragmentation_reserve_bytes + self.pipeline_buffers_bytes)


def _sum(terms: list[Term]) -> int:
    return sum(term.num_bytes for term in terms)


def activation_shape(job: Job, plan: Plan) -> Shape:
    """One rank's micro-batch: context parallelism gives it seq_len / cp tokens of each sequence."""
    e = activation_bytes(plan.precision)
    fp32_weights = job.accounting == "hf" or (job.method == "qlora" and job.qlora_prep == "peft")
    autocast = job.kernels == "eager" and fp32_weights and plan.precision in ("bf16", "fp16")
    return Shape(b=plan.micro_batch, s=job.seq_len // plan.cp, e=e, autocast=autocast)


def layer_saved_terms(arch: Architecture, job: Job, plan: Plan, group: LayerGroup | None = None) -> list[Term]:
    """One layer's saved tensors with no recompute (LoRA adapters included); default the last layer's kind."""
    x = activation_shape(job, plan)
    if x.autocast and unquantised_experts(arch, job):  # QLoRA's fp32-prepared 16-bit experts
        x = replace(x, expert_e=FP32)
    adapters = rank = dropout_inputs = 0
    if job.method != "full":
        used = arch.experts_per_token
        modules = None if group is None else group.modules
        adapted = adapted_modules(arch, job.lora_targets, modules)
        adapters = sum(used if m.copies_per_layer > 1 else 1 for m in adapted)
        rank = job.lora_rank
        if job.lora_dropout > 0:
            dropout_inputs = _dropout_inputs(arch, job, adapted)
    return layer_terms(arch, job.kernels, job.attention, x, adapters, rank, group, dropout_inputs,
                       compiled=job.compile != "none")


def _dropout_inputs(arch: Architecture, job: Job, adapted: tuple) -> int:
    """The input widths each LoRA dropout keeps a dropped-out copy of: one per adapted module
    (PEFT), with a fused q/k/v projection's adapters sharing one (FUSED_QKV_DROPOUT_STACKS)."""
    used = arch.experts_per_token
    widths = [(used if m.copies_per_layer > 1 else 1) * m.in_features for m in adapted]
    if job.stack in FUSED_QKV_DROPOUT_STACKS:
        qkv = {module_name(arch, role) for role in ("q", "k", "v")}
        fused = [m.in_features for m in adapted if m.name in qkv]
        widths = [w for w, m in zip(widths, adapted) if m.name not in qkv] + fused[:1]
    return sum(widths)


def _indexer_rebuilt_bytes(arch: Architecture, job: Job, plan: Plan, terms: list[Term], x: Shape) -> int:
    """What a layer's full recompute has rebuilt when its DeepSeek Sparse Attention indexer runs: its terms
    before the attention's q (the norm, MLA's latents and their linear inputs), with the layer's output
    gradient in flight (measured: tests/models/memory/test_saved_tensors_sparse_attention.py). 0 without
    an indexer or full recompute (the forward's peak then sits on the layers' kept activations)."""
    if not arch.has_indexer or effective_mode(job, plan) != "full":
        return 0
    names = [t.name for t in terms]
    first = names.index("attn.q") if "attn.q" in names else len(terms)
    return sum(t.num_bytes for t in terms[:first]) + x.e * x.t * arch.hidden_size


@dataclass(frozen=True)
class MicrobatchActivations:
    """One micro-batch on one rank, before pipelining: depends on tp, cp, sequence parallelism,
    recompute, micro-batch size, precision and the job's recipe only (the solver tabulates it)."""

    per_layer_bytes: int  # kept per decoder layer (the kind of layer that keeps the most)
    shared_bytes: int  # kept once per model chunk forward (RoPE tables, HF's causal mask)
    embedding_bytes: int  # kept by the first rank
    output_layer_bytes: int  # kept by the last rank
    layer_peak_bytes: int  # one layer's backward working set (rebuilt part + gradient temporaries)
    loss_peak_bytes: int  # the loss's backward temporaries (last rank)
    terms: tuple[Term, ...]
    # Per kind of layer (models.parallel.stage_layer_kinds' key): its layers in the model, what they
    # keep together (before offloading), and what one of them keeps checkpointed and not (full recompute).
    kinds: tuple[tuple[LayerKey, int, int, int, int], ...] = ()
    recompute_block: int | None = None  # full recompute of the first N layers of each model chunk (recompute_block)
    largest_layer_bytes: int = 0  # the most one layer keeps (what offloading leaves resident)
    activation_offload: bool = False
    fragmentation_bytes: int = 0  # reserve on a rank without the loss (models/memory/fragmentation.py)
    last_fragmentation_bytes: int = 0  # reserve on the last rank (the loss's transient included)
    # kept from the previous micro-batch through this one's forward (held_inputs_bytes), or of the next
    # one through this one's backward (a2a_pair_bytes)
    held_bytes: int = 0
    single_stage_loss_peak_bytes: int | None = None  # loss_peak_bytes without pipelining (loss_parallel)
    # The output layer's and the loss's saved tensors are freed before the layers' backward
    # (LOGITS_RELEASED_STACKS): a layer's backward peak does not stack on them.
    output_released: bool = False
    # One micro-batch's stage-boundary hidden state, where the stack's pipeline keeps receive buffers
    # per micro-batch (models/memory/pipeline_buffers.py; 0 elsewhere), and whether input gradients stay.
    stage_unit_bytes: int = 0
    input_grads_kept: bool = False


def a2a_pair_bytes(job: Job, per_layer_bytes: int) -> int:
    """What Megatron's MoE all-to-all overlap (Job.moe_a2a_overlap, models/time/ep_time.py
    a2a_overlapped) keeps beyond the schedule's in-flight chunks: it runs one micro-batch's forward
    beside another's backward layer by layer, forward layer i with backward layer n - 1 - i
    (NVIDIA/Megatron-LM@d98e8a64 megatron/core/models/common/model_chunk_schedule_plan.py run), and
    a backward layer releases its state after the pair (`b_layer.release_state()`), so while a pair
    runs the rank holds one layer of the forward's micro-batch more than the chunks it holds between
    steps; the extra warm-up micro-batch of the interleaved schedule (schedules.py L966-969) is what
    the paired backward consumes, so the in-flight chunks at the peak do not change (replayed in
    tests/models/memory/test_pipeline_buffers.py). The job alone decides: every plan the stack contract
    admits with the overlap has EP > 1 (stack_contract.a2a_overlap_refusal), and a micro-batch's
    activations do not depend on the EP degree (the solver tabulates them without it)."""
    return per_layer_bytes if job.moe_a2a_overlap else 0


def microbatch_activations(arch: Architecture, job: Job, plan: Plan) -> MicrobatchActivations:
    x = activation_shape(job, plan)
    tp, sp = plan.tp, sequence_parallel_active(plan)
    # Under autocast with fp32 weights (x.autocast: the HF Trainer's fp32 model, or PEFT's
    # prepare_model_for_kbit_training, which casts every parameter that is not Params4bit to fp32,
    # the embedding included: huggingface/peft@8bafdb112 src/peft/utils/other.py L135-140) the
    # embedding's output is fp32 and so is the residual stream (fp32 + the blocks' 16-bit outputs),
    # so every checkpointed layer input is fp32 (measured: tests/models/memory/test_kbit_autocast.py).
    layer_input = (FP32 if x.autocast else x.e) * x.t * arch.hidden_size
    layer_input = ceil_div(layer_input, tp) if sp else layer_input
    kinds = []  # (its sharded terms, what its layers keep, backward peak bytes) per kind of layer
    gathered = sp and job.stack in GATHERED_SP_INPUT_STACKS  # DTensor SP saves gathered linear inputs
    dequant_layer, dequant_head = dequantised_weight_bytes(arch, job, x.e, plan.precision)
    dequant_layer = ceil_div(dequant_layer, tp)  # the rank's TP shard of the matrix
    # HF keeps the 4-D causal mask alive in the checkpoint closures: the eager one, and the one a DeepSeek
    # Sparse Attention model always builds (models/memory/sparse_attention_terms.py)
    closure_mask = plan.recompute == "full" and (causal_mask_bytes(arch, job.attention, x) > 0
                                                 or (job.kernels == "eager" and job.attention == "eager"))
    # a DeepSeek Sparse Attention layer's indexer holds its fp32 scores in its forward (and its recompute),
    # whole on every TP rank (transformers' tp_plan leaves the indexer replicated)
    indexer = indexer_transient_bytes(arch, job.attention, x, mask_counted=closure_mask)
    # Gemma 4's store layers keep their recomputed keys and values (and what made them) from their recompute to the
    # end of the backward, beside the backward of every layer before them (HF gradient checkpointing)
    stored = 0
    if plan.recompute == "full" and job.kernels == "eager":
        stored = sum(_sum(shard_terms(stored_kv_terms(arch, job.kernels, x, local), layer_architecture(arch, local), tp, sp,
                                      gathered)) for local in sorted({g.local for g in layer_groups(arch)}))
    for group in layer_groups(arch):
        # a sliding layer's own KV heads shard as its heads do (layer_architecture: MiMo-V2-Flash)
        group_terms = shard_terms(layer_saved_terms(arch, job, plan, group), layer_architecture(arch, group.local), tp, sp,
                                  gathered)
        keep = layer_keep(arch, job, plan, group_terms, x, group, layer_input=layer_input)
        peak = keep.rebuilt_bytes + layer_backward_temporaries(arch, x, group, tp, sp) + dequant_layer + stored
        if group.indexed:  # the layers that reuse another layer's top-k run no indexer
            peak = max(peak, indexer + _indexer_rebuilt_bytes(arch, job, plan, group_terms, x))
        kinds.append((group_terms, keep, peak))
    terms, largest_keep, _ = max(kinds, key=lambda kind: kind[1].per_layer_bytes)  # for explanations
    shared = _sum(shared_terms(arch, x, job.kernels))
    if closure_mask:
        shared += causal_mask_bytes(arch, job.attention, x) or x.e * x.b * x.s * x.s
    loss = loss_cost(arch, job, x)
    # torch's loss_parallel backward (models/memory/loss.py), with the stage output kept under PP and
    # the logits deleted without it: a micro-batch's terms do not know pp, stage_activations picks
    loss_extra = single_stage_extra = loss.backward_extra_bytes
    kept = loss_parallel_backward_extra_bytes(arch, job, x, logits_deleted=False)
    deleted = loss_parallel_backward_extra_bytes(arch, job, x, logits_deleted=True)
    if tp > 1 and kept is not None and deleted is not None:
        loss_extra, single_stage_extra = kept, deleted
    # The output layer is vocab-parallel: the loss's temporaries are / tp, and so (like the layers'
    # f-wide gradients) are the transient blocks the fragmentation reserve is sized from.
    return MicrobatchActivations(
        per_layer_bytes=largest_keep.per_layer_bytes,
        shared_bytes=shared,
        embedding_bytes=_sum(shard_terms(embedding_terms(arch, x), arch, tp, sp)),
        output_layer_bytes=_sum(shard_terms(list(loss.kept), arch, tp, sp, gathered)),
        layer_peak_bytes=max(kind[2] for kind in kinds),
        loss_peak_bytes=max(ceil_div(loss_extra, tp), ceil_div(dequant_head, tp)),
        single_stage_loss_peak_bytes=max(ceil_div(single_stage_extra, tp), ceil_div(dequant_head, tp)),
        terms=tuple(terms),
        kinds=tuple((g.key, g.count, keep.layers_bytes, keep.per_layer_bytes, keep.rebuilt_bytes)
                    for g, (_, keep, _) in zip(layer_groups(arch), kinds)),
        recompute_block=recompute_block(job, plan) if effective_mode(job, plan) == "full" else None,
        largest_layer_bytes=max(keep.largest_bytes for _, keep, _ in kinds),
        activation_offload=job.activation_offload,
        fragmentation_bytes=fragmentation_reserve_bytes(arch, job, x, 0, tp),
        last_fragmentation_bytes=fragmentation_reserve_bytes(arch, job, x, loss.largest_transient_bytes, tp),
        # litgpt QLoRA: one GPU, no TP/PP (stack capabilities); Megatron's MoE all-to-all overlap
        held_bytes=held_inputs_bytes(arch, job, x) + a2a_pair_bytes(job, largest_keep.per_layer_bytes),
        output_released=job.stack in LOGITS_RELEASED_STACKS,
        stage_unit_bytes=layer_input if keeps_receive_buffers(job) else 0,
        input_grads_kept=retains_input_grads(job),
    )


def _loss_peak(micro: MicrobatchActivations, first: bool, last: bool) -> int:
    """The last rank's loss peak: a rank both first and last runs without pipelining."""
    if first and last and micro.single_stage_loss_peak_bytes is not None:
        return micro.single_stage_loss_peak_bytes
    return micro.loss_peak_bytes


def stage_activations(
    micro: MicrobatchActivations, chunks: int, vpp: int, first: bool, last: bool,
    held: tuple[tuple[LayerKey, int], ...], micro_batches: int = 0, on_first_stage: int = 0,
) -> Activations:
    """A pipeline rank holding the decoder layers `held` (per kind: models.parallel.stage_layer_kinds)
    in `vpp` chunks, `chunks` of which are in flight (parallel_activations.inflight_chunks); the
    first rank keeps the embedding's activations for the same micro-batches, the last one
    micro-batch's output layer. The rank's layers of each kind keep their share of what the
    model's layers of that kind keep. Kinds differ a lot: Llama 4 Maverick's MoE layers (HF runs
    every expert on every token) keep ~2x its average layer, so a rank of 3 of its 48 layers
    holding two of them keeps 20% more than the average share said. Activation offloading then
    leaves the layer in use and the one being prefetched on the GPU. With `micro_batches` a step (0:
    no pipeline) a stack whose pipeline keeps receive buffers per micro-batch holds them too
    (models/memory/pipeline_buffers.py). On the first rank `on_first_stage` of the in-flight
    micro-batches are on the pipeline's first stage (parallel_activations.first_stage_inflight):
    the embedding outputs it keeps."""
    layers_bytes = _rank_layers_bytes(micro, vpp, held)
    kept = ceil_div(chunks * layers_bytes.numerator, vpp * layers_bytes.denominator)
    offloaded = 0
    if micro.activation_offload:
        layers = sum(n for _, n in held)
        offloaded = max(0, kept - min(layers, OFFLOAD_RESIDENT_LAYERS) * micro.largest_layer_bytes)
    output = micro.output_layer_bytes if last else 0
    # Where the loop drops the logits (output_released), the loss's backward frees what the output
    # layer kept before the last layer's backward starts: that peak is the layer's working set on
    # top of the layers' activations alone.
    layer_peak = max(0, micro.layer_peak_bytes - output) if micro.output_released else micro.layer_peak_bytes
    return Activations(
        per_layer_bytes=micro.per_layer_bytes,
        layers_bytes=kept - offloaded + chunks * micro.shared_bytes + micro.held_bytes,
        embedding_bytes=on_first_stage * micro.embedding_bytes if first else 0,
        output_layer_bytes=output,
        backward_peak_extra_bytes=max(_loss_peak(micro, first, last) if last else 0, layer_peak),
        terms=micro.terms,
        fragmentation_reserve_bytes=micro.last_fragmentation_bytes if last else micro.fragmentation_bytes,
        offloaded_bytes=offloaded,
        pipeline_buffers_bytes=micro.stage_unit_bytes * pipeline_buffer_units(micro_batches, chunks, vpp, first, last,
                                                                               micro.input_grads_kept, on_first_stage),
    )


def _rank_layers_bytes(micro: MicrobatchActivations, vpp: int,
                       held: tuple[tuple[LayerKey, int], ...]) -> Fraction:
    """What a rank's decoder layers `held` keep for one micro-batch through all its vpp chunks.
    Under partial full recompute (micro.recompute_block = N) the rank checkpoints its first N
    layers per chunk (recompute.rank_recomputed), each kind its share of them rounded down (fewer
    checkpointed keep more: never an underestimate); otherwise each kind keeps its share of what
    the model's layers of that kind keep (the same per layer)."""
    by_kind = {kind: rest for kind, *rest in micro.kinds}
    if micro.recompute_block is not None:
        layers = sum(n for _, n in held)
        recomputed = rank_recomputed(layers, vpp, micro.recompute_block)
        total = 0
        for kind, n in held:
            _, _, checkpointed_bytes, full_bytes = by_kind[kind]
            checkpointed = recomputed * n // layers
            total += checkpointed * checkpointed_bytes + (n - checkpointed) * full_bytes
        return Fraction(total)
    return sum((Fraction(n * by_kind[kind][1], by_kind[kind][0]) for kind, n in held), Fraction(0))


def microbatch_offload_bytes(micro: MicrobatchActivations, vpp: int,
                             held: tuple[tuple[LayerKey, int], ...]) -> int:
    """What activation offloading moves to host memory of one micro-batch on a rank holding the
    layers `held`: one micro-batch through all vpp chunks of the rank, all but the resident layers."""
    return stage_activations(micro, vpp, vpp, False, False, held).offloaded_bytes


def offload_transfer_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    """Bytes activation offloading moves over the host link per optimizer step on the first
    pipeline rank (the one holding the most layers): each micro-batch's offloaded activations go
    out during the forward and come back during the backward (torchtune's OffloadActivations, the
    Unsloth checkpoint offload: one copy each way)."""
    if not job.activation_offload:
        return 0
    held = stage_layer_kinds(arch, plan_split(arch, plan), 0)
    return 2 * plan.grad_accum * microbatch_offload_bytes(microbatch_activations(arch, job, plan), plan.vpp, held)


def activations(arch: Architecture, job: Job, plan: Plan, stage: int = 0) -> Activations:
    """Pipeline rank `stage`'s activations at its peak (models/memory/parallel_activations.py: TP/SP
    shards of each term, s / cp tokens, the micro-batches 1F1B keeps in flight)."""
    return rank_activations(arch, job, plan, microbatch_activations(arch, job, plan), stage)


def rank_chunks(job: Job, plan: Plan, stage: int) -> int:
    """parallel_activations.inflight_chunks of the plan's rank `stage`, in the schedule the job's
    stack runs (torch's interleaved rounds under TORCH_PIPELINING_STACKS)."""
    return inflight_chunks(plan.pp, plan.grad_accum, plan.vpp, stage, keeps_receive_buffers(job))


def stage_place(arch: Architecture, pipeline: int | Split, pp: int, vpp: int, accum: int, stage: int,
                torch_pipelining: bool) -> tuple:
    """stage_activations' arguments after the micro-batch for pipeline rank `stage` of `pipeline`
    (pp ranks, or their layers) at `accum` micro-batches a step: the chunks in flight, vpp, whether
    it is the first and the last rank, its layers by kind, the step's micro-batches where torch's
    pipelining keeps receive buffers per micro-batch (else 0), and the first rank's micro-batches
    on the first stage. The estimate and the solver's rank places (solver/choice_keys.py) both read it."""
    return (inflight_chunks(pp, accum, vpp, stage, torch_pipelining), vpp, stage == 0, stage == pp - 1,
            stage_layer_kinds(arch, pipeline, stage), accum if torch_pipelining and pp > 1 else 0,
            first_stage_inflight(pp, vpp, accum, torch_pipelining) if stage == 0 else 0)


def rank_activations(arch: Architecture, job: Job, plan: Plan, micro: MicrobatchActivations, stage: int) -> Activations:
    """stage_activations of one micro-batch's terms on the plan's pipeline rank `stage`."""
    return stage_activations(micro, *stage_place(arch, plan_split(arch, plan), plan.pp, plan.vpp, plan.grad_accum, stage,
                                                 keeps_receive_buffers(job)))
