"""What each training stack runs: its capability contract (catalogues/stack_capabilities.csv).

A plan names a stack; the stack's contract says which parallel degrees it runs (TP, Megatron
sequence parallelism, PP, interleaved virtual stages, CP, EP), which ZeRO/FSDP stages and offloads,
LoRA and QLoRA with which parallelism, on how many GPUs and nodes, and fp8. Each row cites the
stack's own code or docs at a named release in its `source` column (docs/stacks.md has the table).
`solve` searches only what the job's stack runs; `estimate` of anything else is bad input naming
the stack and the feature. The `custom` row allows every combination vramplan models.

The row itself (its columns and their encoding) is models/catalogue/stack_capabilities.py. A ZeRO
stage a stack runs only beside some layouts, offloads or methods (Megatron-FSDP's ZeRO-2/3: no
pipeline, no offload, full training) is a rule here, not a column. Not modelled yet (documented in
docs/known-limits.md): "sharded only" data parallelism for LoRA (litgpt, torchtune shard every
multi-GPU LoRA run; vramplan also offers them plain replicas, which hold more memory, not less).
"""

from __future__ import annotations

from vramplan.models.architecture.params import has_local_attention_shape
from vramplan.models.catalogue.stack_capabilities import ARCHITECTURE_PARTS, StackCapabilities
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.choices import NOT_IN_ANY
from vramplan.models.core.layout import Layout
from vramplan.models.core.layout_behaviours import AUTOEP_FOLDING_STACKS, SHARDED_MODEL_PARALLEL_STACKS
from vramplan.models.core.memory_behaviours import MEGATRON_FSDP_STACKS, runs_megatron_fsdp
from vramplan.models.core.setup import Job, Plan

# How a refusal names each of ARCHITECTURE_PARTS
_PART_WORDS = {"parallel_block": "a parallel block (attention and MLP reading one input)",
               "parameter_free_norm": "a LayerNorm without parameters", "clip_qkv": "q/k/v clamped in place (clip_qkv)",
               "gated_delta": "Gated DeltaNet linear attention",
               "sparse_indexer": "DeepSeek Sparse Attention (a lightning indexer choosing each query's keys)",
               "xielu": "the xIELU activation", "per_head_qk_norm": "a QK norm with its own weight per head",
               "local_attention_shape": "sliding-window layers with heads, a head width, a RoPE share, attention sinks or "
                                        "values of their own",
               "alibi": "ALiBi position biases"}


def architecture_parts(arch: Architecture) -> frozenset[str]:
    """Which of ARCHITECTURE_PARTS the architecture's layers have (what a stack's unbuilt_parts is held against)."""
    has = {"parallel_block": arch.parallel_attention_mlp,
           "parameter_free_norm": arch.norm_kind in ("layernorm_noparams", "rmsnorm_noparams"),
           "clip_qkv": arch.clip_qkv, "gated_delta": arch.has_linear_attention, "sparse_indexer": arch.has_indexer,
           "xielu": arch.mlp_kind == "xielu", "per_head_qk_norm": arch.qk_norm == "per_head",
           "local_attention_shape": has_local_attention_shape(arch), "alibi": arch.alibi}
    return frozenset(part for part in ARCHITECTURE_PARTS if has[part])


def model_refusal(caps: StackCapabilities, model_type: str, parts: frozenset[str] = frozenset()
                  ) -> tuple[str, object, str] | None:
    """The model's family where the stack has no model code for it (a stack review: torchtune v0.6.1
    was planned for Mixtral at TP 4 and wrote a recipe it has no builder for), or a part of its layers
    the stack has no form for (`parts`: architecture_parts; Megatron-Core builds no parallel block), or None."""
    if not ("all" in caps.model_types or model_type in caps.model_types):
        return "model", model_type, f"{model_type} models (it builds {', '.join(sorted(caps.model_types))})"
    unbuilt = sorted(parts & caps.unbuilt_parts, key=ARCHITECTURE_PARTS.index)
    if unbuilt:
        return "model", model_type, f"{_PART_WORDS[unbuilt[0]]}, which {model_type} has"
    return None


def job_refusal(caps: StackCapabilities, job: Job) -> tuple[str, object, str] | None:
    """(field, value, what the stack does not run) for the job alone, or None."""
    allowed = caps.method_parallel(job.method)
    if allowed is not None and "none" in allowed:
        return "method", job.method, f"{job.method} training"
    if job.activation_offload and not caps.activation_offload:
        return "activation_offload", True, "activation offload"
    if job.activation_offload and job.stack == "unsloth" and job.seq_len < UNSLOTH_OFFLOAD_MIN_SEQ:
        # unsloth/models/_utils.py apply_unsloth_gradient_checkpointing: below 512 tokens its
        # checkpointing is plain and keeps the inputs on the GPU
        return "activation_offload", True, f"activation offload below {UNSLOTH_OFFLOAD_MIN_SEQ} tokens"
    if job.optimizer not in caps.optimizers:
        return "optimizer", job.optimizer, f"the {job.optimizer} optimizer"
    if job.optimizer_in_backward and job.method not in caps.optimizer_in_backward:
        return ("optimizer_in_backward", True, "the optimizer step in the backward"
                + (f" with {job.method} training" if caps.optimizer_in_backward else ""))
    if job.compile != "none" and not caps.compile:
        return "compile", job.compile, "torch.compile"
    if job.tp_overlap and caps.tp_overlap == "false":
        return "tp_overlap", True, "TP communication overlap"
    if job.tp_overlap and caps.tp_overlap == "compile" and job.compile == "none":
        return "tp_overlap", True, "async TP without torch.compile"
    if job.moe_dispatcher not in caps.moe_dispatchers:
        return "moe_dispatcher", job.moe_dispatcher, f"the {job.moe_dispatcher} MoE token dispatcher"
    if job.moe_a2a_overlap and not caps.moe_a2a_overlap:
        return "moe_a2a_overlap", True, "MoE all-to-all overlap"
    if job.cuda_graphs not in caps.cuda_graphs:
        return "cuda_graphs", job.cuda_graphs, f"{job.cuda_graphs} CUDA graphs"
    if job.cuda_graphs == "attn":
        return layer_graphs_job_refusal(job)
    if job.moe_a2a_overlap:
        return a2a_overlap_job_refusal(job)
    return None


def layer_graphs_job_refusal(job: Job) -> tuple[str, object, str] | None:
    """What of the job Megatron does not run beside per-layer CUDA graphs (Job.cuda_graphs "attn"):
    its layer-level activation offload (NVIDIA/Megatron-LM@d98e8a64 transformer_config.py L2800-2801:
    "CUDA graphs not supported with CPU offloading" but for full_iteration) and a partial full
    recompute (L2855-2858: full recompute only under the full-iteration graph)."""
    if job.activation_offload:
        return "activation_offload", True, "activation offload with per-layer CUDA graphs"
    if job.recompute_layers is not None:
        return "recompute_layers", job.recompute_layers, "a partial recompute with per-layer CUDA graphs"
    return None


def a2a_overlap_job_refusal(job: Job) -> tuple[str, object, str] | None:
    """What of the job Megatron does not run beside its MoE all-to-all overlap: a partial full
    recompute (transformer_config.py L3028-3029 asserts recompute_num_layers is None), and its
    layer-level activation offload, which the overlap's combined schedule bypasses without a word
    (it calls each layer's parts directly, megatron/core/models/common/model_chunk_schedule_plan.py
    and fine_grained_callables.py, while cpu_offloading runs inside TransformerBlock.forward): the
    run would hold every activation it was told to offload."""
    if job.recompute_layers is not None:
        return "recompute_layers", job.recompute_layers, "a partial recompute with MoE all-to-all overlap"
    if job.activation_offload:
        return "activation_offload", True, "activation offload with MoE all-to-all overlap"
    return None


def a2a_overlap_refusal(layout: Layout | None = None, recompute: str | None = None,
                        precision: str | None = None) -> tuple[str, object, str] | None:
    """What Megatron refuses beside --overlap-moe-expert-parallel-comm (Job.moe_a2a_overlap), of a
    layout, a recompute mode or a precision, or None (NVIDIA/Megatron-LM@d98e8a64
    megatron/core/transformer/transformer_config.py L3002-3046: expert_model_parallel_size > 1;
    virtual_pipeline_model_parallel_size set when pipeline_model_parallel_size > 1; no full
    recompute (recompute_granularity 'full', recompute_method, recompute_num_layers); a bf16 or fp16
    model, which fp8 training is too). The alltoall and flex dispatchers, every one vramplan models,
    run it."""
    if layout is not None and layout.ep == 1:
        return "ep", 1, "MoE all-to-all overlap without expert parallelism"
    if layout is not None and layout.pp > 1 and layout.vpp == 1:
        return "vpp", 1, "MoE all-to-all overlap in a pipeline without interleaved stages"
    if recompute == "full":
        return "recompute", "full", "full recompute with MoE all-to-all overlap"
    if precision == "fp32":
        return "precision", "fp32", "MoE all-to-all overlap in fp32"
    return None


def layout_refusal(caps: StackCapabilities, method: str, layout: Layout, activation_offload: bool = False,
                   a2a_overlap: bool = False, optimizer_in_backward: bool = False) -> tuple[str, object, str] | None:
    """(field, value, feature) of the first parallel degree the stack does not run (with the job's
    activation offload, MoE all-to-all overlap and optimizer in the backward, if it has them), or None."""
    features = (("tp", layout.tp > 1, caps.tp, "tensor parallelism"),
                ("sequence_parallel", layout.sp and layout.tp > 1, caps.sequence_parallel, "Megatron sequence parallelism"),
                ("pp", layout.pp > 1, caps.pp, "pipeline parallelism"),
                ("vpp", layout.vpp > 1, caps.vpp, "interleaved virtual pipeline stages"),
                ("stage_layers", layout.split is not None and layout.pp > 1, caps.uneven_split, "uneven pipeline splits"),
                ("cp", layout.cp > 1, caps.cp, "context parallelism"),
                ("ep", layout.ep > 1, caps.ep, "expert parallelism"))
    for field, used, runs, feature in features:
        if used and not runs:
            return field, _layout_value(layout, field), feature
    if activation_offload and layout.pp > 1 and "pp" in caps.activation_offload_excludes:
        return "pp", layout.pp, "pipeline parallelism with activation offload"
    if a2a_overlap and (refusal := a2a_overlap_refusal(layout=layout)) is not None:
        return refusal
    if optimizer_in_backward:
        for field, feature in (("pp", "pipeline parallelism"), ("ep", "expert parallelism")):
            if getattr(layout, field) > 1 and field not in caps.optimizer_in_backward:
                return field, getattr(layout, field), f"{feature} with the optimizer step in the backward"
    allowed = caps.method_parallel(method)
    if allowed is not None:
        for field in ("tp", "pp", "cp"):
            if getattr(layout, field) > 1 and field not in allowed:
                return field, getattr(layout, field), f"{method} with {field.upper()}"
    return None


def zero_layout_refusal(stack: str, zero: int, layout: Layout, num_gpus: int,
                        offload: str = "none") -> tuple[str, object, str] | None:
    """Megatron-FSDP beside a pipeline (MEGATRON_FSDP_STACKS). Model parallelism without FSDP
    sharding, where the stack runs it only beside FSDP (SHARDED_MODEL_PARALLEL_STACKS: torchtitan
    refuses DDP beside it, and without a shard group of more than one rank, dp x cp, turns mixed
    precision off: ParallelDims.fsdp_enabled is dp_shard > 1 or cp > 1); DeepSpeed AutoEP's folding
    rules (AUTOEP_FOLDING_STACKS). Per (ZeRO stage and offload, layout, GPU count), not per feature:
    the search forbids the combinations (solver SearchSpace.pair_allows)."""
    if stack in AUTOEP_FOLDING_STACKS and layout.ep > 1:
        if layout.tp > 1 and layout.cp > 1:
            return "cp", layout.cp, "Ulysses (CP) beside AutoTP (TP) under AutoEP (EP)"
        if layout.tp > 1 and zero == 3:
            return "zero", zero, "ZeRO-3 beside AutoTP (TP) under AutoEP (EP)"
        if layout.tp > 1 and offload != "none":
            return "offload", offload, "ZeRO offload beside AutoTP (TP) under AutoEP (EP)"
        if zero == 3 and layout.cp > 1:
            return "zero", zero, "ZeRO-3 beside Ulysses (CP) under AutoEP (EP)"
    if runs_megatron_fsdp(stack, zero) and layout.pp > 1:
        # megatron/training/arguments.py asserts no pipeline for torch FSDP2 and neither asserts nor
        # tests one for Megatron-FSDP, whose units vramplan counts on one stage
        return "zero", zero, f"Megatron-FSDP (ZeRO-{zero}) with pipeline parallelism"
    if stack not in SHARDED_MODEL_PARALLEL_STACKS or layout.model_parallel * layout.ep == 1:
        return None
    if zero < 2:
        return "zero", zero, "model parallelism (TP, PP, CP, EP) without FSDP (ZeRO-2/3)"
    if num_gpus // layout.model_parallel * layout.cp == 1:
        return "num_gpus", num_gpus, "model parallelism (TP, PP, EP) without a data-parallel rank to shard over (FSDP)"
    return None


def zero_layout_rules_apply(stack: str, layouts: list[Layout]) -> bool:
    """Whether zero_layout_refusal can refuse any pair of a ZeRO stage and one of these layouts on
    this stack: the search asks it per combination only then (solver SearchSpace.pair_allows)."""
    return stack in SHARDED_MODEL_PARALLEL_STACKS or (
        stack in AUTOEP_FOLDING_STACKS and any(layout.ep > 1 for layout in layouts)) or (
        stack in MEGATRON_FSDP_STACKS and any(layout.pp > 1 for layout in layouts))


def _layout_value(layout: Layout, field: str) -> object:
    if field == "stage_layers":
        return ",".join(map(str, layout.split or ()))
    return getattr(layout, "sp" if field == "sequence_parallel" else field)


def states_refusal(caps: StackCapabilities, method: str, zero: int, offload: str,
                   optimizer: str = "adamw") -> tuple[str, object, str] | None:
    """(field, value, feature) of a ZeRO stage or offload the stack does not run (with the job's
    optimizer), or None."""
    if zero not in caps.zero_stages:
        return "zero", zero, f"ZeRO stage {zero}"
    if offload not in caps.offloads:
        return "offload", offload, f"offload {offload}"
    if offload != "none" and caps.offload_optimizers and optimizer not in caps.offload_optimizers:
        return "offload", offload, f"offload {offload} with the {optimizer} optimizer"
    allowed = caps.method_parallel(method)
    if allowed is not None and zero > 0 and "zero" not in allowed:
        return "zero", zero, f"{method} with sharded data parallelism"
    if runs_megatron_fsdp(caps.name, zero):
        # Megatron-FSDP (models/memory/megatron_fsdp.py): its distributed optimizer returns before
        # building the hybrid CPU optimizer's buffers (megatron/core/optimizer/distrib_optimizer.py
        # L704-706 @ d98e8a64), and Megatron-Bridge's PEFT recipes run the distributed optimizer
        if offload != "none":
            return "offload", offload, f"offload {offload} with Megatron-FSDP (ZeRO-{zero})"
        if method != "full":
            return "zero", zero, f"{method} with Megatron-FSDP (ZeRO-{zero})"
    return None


def count_refusal(caps: StackCapabilities, method: str, num_gpus: int, gpus_per_instance: int) -> tuple[str, object, str] | None:
    """(field, value, feature) when the stack does not run this many GPUs (for this method), or None."""
    if num_gpus > 1 and not caps.multi_gpu:
        return "num_gpus", num_gpus, "more than one GPU"
    if num_gpus > gpus_per_instance and not caps.multi_node:
        return "num_gpus", num_gpus, "more than one instance"
    allowed = caps.method_parallel(method)
    if allowed is not None and num_gpus > 1 and allowed <= {"single"}:
        return "num_gpus", num_gpus, f"{method} on more than one GPU"
    return None


def accumulation_refusal(job: Job, grad_accum: int) -> tuple[str, object, str] | None:
    """Gradient accumulation beside the optimizer stepped in the backward: each parameter's step
    frees its gradient at once, so nothing accumulates; torchtune refuses it ("Gradient accumulation
    is not supported with optimizer in bwd": recipes/full_finetune_single_device.py and
    full_finetune_distributed.py, v0.6.1), and the memory model's one-gradient-at-a-time counts only
    what that run holds."""
    if job.optimizer_in_backward and grad_accum > 1:
        return "grad_accum", grad_accum, "gradient accumulation with the optimizer in the backward"
    return None


# Unsloth's offloaded ("unsloth") checkpointing under DDP (unslothai/unsloth@015bdef): FastLanguageModel
# loads these model types through its own classes (unsloth/models/loader.py L828-890), which keep it;
# every other type, full fine-tuning and 8-bit loading go to FastModel (loader.py L487-495, L891+), whose
# post_patch_model unpatches it when distributed (unsloth/models/vision.py L2185-2191; unsloth#3713), so
# the checkpointed layer inputs stay on the GPU.
UNSLOTH_OFFLOAD_MIN_SEQ = 512  # _utils.py apply_unsloth_gradient_checkpointing: "unsloth" below it is plain checkpointing
UNSLOTH_OWN_CLASSES = frozenset({"llama", "mistral", "gemma", "gemma2", "qwen2", "qwen3"})


def distributed_offload_refusal(job: Job, model_type: str, num_gpus: int) -> tuple[str, object, str] | None:
    """(field, value, feature) when the job's stack drops its activation offload on this many GPUs
    for this model and method (the plan would count on the host what stays on the GPU), or None."""
    if job.stack != "unsloth" or not job.activation_offload or num_gpus == 1:
        return None
    own = model_type in UNSLOTH_OWN_CLASSES and (job.method == "lora" or (job.method == "qlora" and job.qlora_bits == 4))
    if own:
        return None
    return ("activation_offload", True, f"activation offload on more than one GPU for a {model_type} {job.method} job "
                                        "(its FastModel path drops it under DDP; --no-activation-offload plans without it)")


def recompute_refusal(caps: StackCapabilities, recompute: str, activation_offload: bool = False,
                      a2a_overlap: bool = False, cuda_graphs: str = "none") -> tuple[str, object, str] | None:
    """A recompute mode the stack has no switch for (hf's checkpointing is whole layers), or does
    not run beside the job's activation offload, MoE all-to-all overlap or per-layer CUDA graphs
    (Megatron: full recompute only under the full-iteration graph, transformer_config.py
    L2855-2858), or None."""
    if recompute not in caps.recomputes:
        return "recompute", recompute, f"{recompute} recompute"
    if activation_offload and f"recompute={recompute}" in caps.activation_offload_excludes:
        return "recompute", recompute, f"{recompute} recompute with activation offload"
    if cuda_graphs == "attn" and recompute == "full":
        return "recompute", recompute, "full recompute with per-layer CUDA graphs"
    if a2a_overlap:
        return a2a_overlap_refusal(recompute=recompute)
    return None


def count_choice_refusal(caps: StackCapabilities, num_gpus: int, offload: str, recompute: str, zero: int | None = None
                         ) -> tuple[str, object, str] | None:
    """An offload, recompute mode or ZeRO stage the stack runs only on one GPU, or only on several,
    used on the other (torchtune's optimizer-only offload is single-device; litgpt checkpoints every
    block on several GPUs and none on one; both shard every multi-GPU run: ZeRO-0 on one GPU only),
    or None."""
    for field, value in (("offload", offload), ("recompute", recompute), ("zero", zero)):
        if value is None:
            continue
        if not runs_on_count(caps, num_gpus, field, value):
            label = f"ZeRO-{value}" if field == "zero" else f"{field} {value}"
            return field, value, f"{label} on {'more than one GPU' if num_gpus > 1 else 'one GPU'}"
    return None


def runs_on_count(caps: StackCapabilities, num_gpus: int, field: str, value: object) -> bool:
    """Whether the stack runs this offload, recompute or ZeRO choice on num_gpus GPUs."""
    return f"{field}={value}" not in (caps.single_gpu_only if num_gpus > 1 else caps.multi_gpu_only)


def precision_refusal(caps: StackCapabilities, precision: str, a2a_overlap: bool = False) -> tuple[str, object, str] | None:
    """fp8 training on a stack without it, fp32 beside MoE all-to-all overlap, or None."""
    if precision == "fp8" and not caps.fp8:
        return "precision", "fp8", "fp8 training"
    return a2a_overlap_refusal(precision=precision) if a2a_overlap else None


def plan_refusal(caps: StackCapabilities, job: Job, plan: Plan, gpus_per_instance: int,
                 model_type: str, parts: frozenset[str] = frozenset()) -> tuple[str, object, str] | None:
    """The first thing of this job and plan the stack does not run, or None (the whole contract;
    `model_type`, the HF config's, where the stack's paths depend on it; `parts`, architecture_parts)."""
    # a stack without the overlap is refused it by job_refusal, the rest by what Megatron refuses beside it
    offloading, overlap = job.activation_offload, job.moe_a2a_overlap and caps.moe_a2a_overlap
    # The GPU count before the ZeRO stage: litgpt's QLoRA on 2 GPUs is refused for its count, not
    # for the sharding estimate's default gives several GPUs there (plan_zero).
    return (model_refusal(caps, model_type, parts) or precision_refusal(caps, plan.precision, overlap) or job_refusal(caps, job)
            or layout_refusal(caps, job.method, plan.layout, offloading, overlap, job.optimizer_in_backward)
            or count_refusal(caps, job.method, plan.num_gpus, gpus_per_instance)
            or distributed_offload_refusal(job, model_type, plan.num_gpus)
            or accumulation_refusal(job, plan.grad_accum)
            or states_refusal(caps, job.method, plan.zero, plan.offload, job.optimizer)
            or zero_layout_refusal(job.stack, plan.zero, plan.layout, plan.num_gpus, plan.offload)
            or recompute_refusal(caps, plan.recompute, offloading, overlap, job.cuda_graphs)
            or count_choice_refusal(caps, plan.num_gpus, plan.offload, plan.recompute, plan.zero))


LAYOUT_FEATURES = ("tp", "sequence_parallel", "pp", "vpp", "cp", "ep")


def broader_stacks(capabilities: dict[str, StackCapabilities], current: str, model_type: str | None = None,
                   parts: frozenset[str] = frozenset()) -> list[str]:
    """Real stacks (not custom) running every parallel feature `current` runs and more, and building
    the model's family and its layers' parts, the broadest first: what an explanation tries when nothing
    fits the job's own stack."""
    def features(name: str) -> frozenset[str]:
        return frozenset(f for f in LAYOUT_FEATURES if getattr(capabilities[name], f))

    mine = features(current)
    broader = [name for name in capabilities if name != current and name not in NOT_IN_ANY and features(name) > mine
               and (model_type is None or model_refusal(capabilities[name], model_type, parts) is None)]
    # the most parallel features first, then what holds the least on the GPU: the deepest offload
    # (parameters, then the optimizer), the most ZeRO stages, the most offloads (stable: catalogue order)
    return sorted(broader, key=lambda name: (-len(features(name)), -_offload_depth(capabilities[name]),
                                             -len(capabilities[name].zero_stages), -len(capabilities[name].offloads)))


def _offload_depth(caps: StackCapabilities) -> int:
    """2 where the stack offloads the parameters too, 1 the optimizer alone, 0 nothing."""
    return 2 if "optimizer+params" in caps.offloads else 1 if "optimizer" in caps.offloads else 0


OVERLAP = "MoE all-to-all overlap"  # the feature's words in every refusal of or beside it


def refusal_message(stack: str, refusal: tuple[str, object, str]) -> str:
    field, value, feature = refusal
    where = f"does not run {feature} ({field}={value}; catalogues/stack_capabilities.csv, docs/stacks.md); "
    if OVERLAP in feature and feature != OVERLAP:  # Megatron's rules beside it, which --stack custom keeps
        return where + f"drop --moe-a2a-overlap or the {field} it refuses"
    if field == "grad_accum":  # no stack accumulates beside it (accumulation_refusal)
        return where + "drop --optimizer-in-backward, or plan one micro-batch per GPU a step (grad_accum 1)"
    return where + "choose a stack that does, or --stack custom for a what-if"
