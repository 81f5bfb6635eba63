"""Training stacks as data: the schema of catalogues/stacks.csv and how a preset fills a job.

A stack preset gives the default of every recipe option (master weights, loss, recompute and what
`selective` means, optimizer, optimizer-in-backward, activation offload, kernels, accounting,
attention, QLoRA preparation, fragmentation reserve, torch.compile, TP communication overlap) as that
stack runs by default, and facts that are not options: the kernel it runs MoE experts with (`moe_kernel`), the fp8 recipe it
trains fp8 with (`fp8_recipe`) and its fused attention kernel (`attention_kernel`); each row cites the stack's source in its `source` column
(catalogues/README.md documents the columns). An option the user gives explicitly always wins over
the preset. The default stack is `hf`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from vramplan.models.catalogue.stack_capabilities import StackCapabilities
from vramplan.models.catalogue.stack_contract import UNSLOTH_OFFLOAD_MIN_SEQ, runs_on_count
from vramplan.models.core.catalogue_row import CatalogueRow
from vramplan.models.core.errors import unknown_name_error
from vramplan.models.core.setup import (
    RECOMPUTES,
    Accounting,
    Attention,
    Compile,
    CudaGraphs,
    Job,
    Kernels,
    Loss,
    MasterWeights,
    MoeDispatcher,
    Optimizer,
    PartialRecompute,
    QloraPrep,
    Recompute,
    Selective,
    Stack,
)

DEFAULT_STACK: Stack = "hf"

# How a stack runs a MoE layer's routed experts (models/time/moe_gemm.py): one grouped GEMM per
# expert matrix over all local experts, or a Python loop launching each expert's GEMMs on its own.
MoeKernel = Literal["loop", "grouped"]

# Which fp8 training recipe the stack runs (models/time/fp8.py): Transformer Engine in Megatron-Core's
# fused modules, te.Linear swapped in per nn.Linear, or torchao's Float8Linear (tensorwise).
Fp8Recipe = Literal["te-megatron", "te-linear", "torchao"]

# Which fused attention kernel the stack runs (models/time/attention_kernel.py): a FlashAttention-2-class
# kernel (torch SDPA's flash backend, flash-attn 2), or cuDNN's fused attention (Transformer Engine).
AttentionKernel = Literal["flash2", "cudnn"]


class StackPreset(CatalogueRow):
    """One training stack's defaults (one row of catalogues/stacks.csv)."""

    name: Stack
    master_weights: MasterWeights
    loss: Loss
    loss_chunks: int = Field(ge=1, le=4096)
    recompute: Recompute = Field(description="default of `estimate --recompute` (solve still chooses)")
    selective: Selective
    partial_recompute: PartialRecompute = Field(description="which partial full recompute `solve` may choose")
    optimizer: Optimizer
    optimizer_in_backward: bool
    activation_offload: bool
    kernels: Kernels
    accounting: Accounting
    attention: Attention
    qlora_prep: QloraPrep
    fragmentation_fraction: float = Field(ge=0, le=4)
    compile: Compile = Field(description="torch.compile by default: none, model (the blocks) or model+loss")
    tp_overlap: bool = Field(default=False, description="TP communication overlapped with the GEMMs by default "
                             "(Megatron --tp-comm-overlap, torchtitan async TP): models/time/parallel_time.py")
    moe_dispatcher: MoeDispatcher = Field(default="alltoall", description="the EP token dispatcher by default: alltoall, "
                                          "deepep or hybridep (models/time/moe_dispatch.py)")
    moe_a2a_overlap: bool = Field(default=False, description="EP all-to-alls overlapped with another micro-batch's "
                                  "compute by default (Megatron --overlap-moe-expert-parallel-comm): models/time/ep_time.py")
    cuda_graphs: CudaGraphs = Field(default="none", description="CUDA graphs of the step by default: none, attn "
                                    "(per-layer attention / router graphs) or full-iteration: models/time/moe_host.py")
    moe_kernel: MoeKernel = Field(description="how the stack runs routed experts: grouped GEMM or a loop (not a Job field)")
    fp8_recipe: Fp8Recipe = Field(description="the fp8 training recipe the stack runs: its casts and fused GEMMs (not a Job field)")
    attention_kernel: AttentionKernel = Field(description="the fused attention kernel the stack runs: flash2 or cudnn (not a Job field)")
    description: str
    source: str


# Preset columns that are Job fields (recompute is a Plan decision: see plan_recompute).
PRESET_JOB_FIELDS = ("master_weights", "loss", "loss_chunks", "selective", "optimizer", "optimizer_in_backward",
                     "activation_offload", "kernels", "accounting", "attention", "qlora_prep",
                     "fragmentation_fraction", "compile", "tp_overlap", "moe_dispatcher", "moe_a2a_overlap", "cuda_graphs")


def with_preset(fields: Mapping[str, Any], presets: Mapping[str, StackPreset]) -> dict[str, Any]:
    """The flat fields with every unset (None) recipe field taken from the chosen stack's preset."""
    resolved = dict(fields)
    name = resolved.get("stack") or DEFAULT_STACK
    if name not in presets:
        raise unknown_name_error("stack", name, presets)
    preset = presets[name]
    resolved["stack"] = name
    for field in PRESET_JOB_FIELDS:
        if resolved.get(field) is None:
            resolved[field] = getattr(preset, field)
            if field == "activation_offload" and name == "unsloth" and _short(resolved.get("seq_len")):
                # Unsloth's "unsloth" checkpointing is plain below 512 tokens (_utils.py
                # apply_unsloth_gradient_checkpointing): its default offloads nothing there
                resolved[field] = False
    return resolved


def _short(seq_len: Any) -> bool:
    """Below the tokens from which Unsloth's checkpointing offloads (a cell may be text)."""
    try:
        return int(seq_len) < UNSLOTH_OFFLOAD_MIN_SEQ
    except (TypeError, ValueError):
        return False


def restacked(job: Job, stack: str, presets: Mapping[str, StackPreset]) -> Job:
    """The job on another stack: each recipe field still at its stack's default takes the other
    stack's default (as `--stack` would fill it); a field the user set keeps its value."""
    old, new = presets[job.stack], presets[stack]
    update = {field: getattr(new, field) for field in PRESET_JOB_FIELDS if getattr(job, field) == getattr(old, field)}
    return job.model_copy(update={**update, "stack": stack})


def recompute_layers_conflict(recompute: str | None) -> str | None:
    """Why a count of recompute layers means nothing beside this recompute mode (None: it does: the mode
    is full, or free, where the count makes it full)."""
    return None if recompute in (None, "full") else f"the recompute is {recompute}"


def plan_recompute(fields: Mapping[str, Any], presets: Mapping[str, StackPreset],
                   capabilities: Mapping[str, StackCapabilities] | None = None) -> Recompute:
    """`estimate`'s recompute: the explicit option, else full where --recompute-layers is given (it
    names how many layers full recompute covers: left at the stack's none it was ignored), else the
    stack's default, or, where the stack
    does not run that on `num_gpus` GPUs (litgpt checkpoints every block on several and none on
    one: StackCapabilities.single_gpu_only), the first mode it runs there."""
    if fields.get("recompute") is not None:
        return fields["recompute"]
    if fields.get("recompute_layers") is not None:  # N layers of full recompute (Megatron's block method)
        return "full"
    stack = fields.get("stack") or DEFAULT_STACK
    default = presets[stack].recompute
    if capabilities is None:
        return default
    caps, num_gpus = capabilities[stack], fields.get("num_gpus") or 1
    if runs_on_count(caps, num_gpus, "recompute", default):
        return default
    return next((mode for mode in RECOMPUTES if mode in caps.recomputes and runs_on_count(caps, num_gpus, "recompute", mode)),
                default)


def plan_zero(fields: Mapping[str, Any], capabilities: Mapping[str, StackCapabilities]) -> int:
    """`estimate`'s ZeRO stage: the explicit option, else 0, or, on several GPUs of a stack that
    shards every multi-GPU run (torchtune, litgpt: single_gpu_only zero=0), its fullest stage."""
    if fields.get("zero") is not None:
        return int(fields["zero"])
    caps, num_gpus = capabilities[fields.get("stack") or DEFAULT_STACK], fields.get("num_gpus") or 1
    return 0 if runs_on_count(caps, num_gpus, "zero", 0) else max(caps.zero_stages)
