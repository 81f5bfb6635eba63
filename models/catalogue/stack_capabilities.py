"""One row of catalogues/stack_capabilities.csv: what a training stack runs, read and checked
(the refusals built on it: models/catalogue/stack_contract.py).

Encoding of the LoRA columns: `dp` plain data-parallel replicas, `zero` sharded data parallelism,
`tp`/`pp`/`cp` adapters under that model parallelism; `single` one GPU only; `none` the stack does
not train that method.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Literal

from pydantic import ValidationInfo, field_validator

from vramplan.models.core.catalogue_row import CatalogueRow
from vramplan.models.core.choices import CUDA_GRAPHS, OPTIMIZERS
from vramplan.models.core.setup import MOE_DISPATCHERS, OFFLOADS, RECOMPUTES, ZERO_STAGES, Stack

PARALLEL_WORDS = ("dp", "zero", "tp", "pp", "cp")
# Parts of a decoder layer a stack may not build (the `unbuilt_parts` column; stack_contract.architecture_parts
# names an architecture's): attention and MLP reading one input, a LayerNorm without parameters, q/k/v
# clamped in place, Gated DeltaNet linear attention, DeepSeek Sparse Attention, xIELU, QK norms with a weight per head,
# sliding layers with KV heads or sinks of their own, ALiBi position biases.
ARCHITECTURE_PARTS = ("parallel_block", "parameter_free_norm", "clip_qkv", "gated_delta", "sparse_indexer", "xielu",
                      "per_head_qk_norm", "local_attention_shape", "alibi")
TpOverlapSupport = Literal["false", "true", "compile"]
LORA_WORDS = frozenset(PARALLEL_WORDS) | {"single", "none"}


def _words(value: Any, allowed: Collection[str], field: str) -> frozenset[str]:
    # a cell's text, or a collection (a row built in Python, or dumped and read back: zero stages as ints)
    words = frozenset(str(w) for w in value) if isinstance(value, (frozenset, set, tuple, list)) else frozenset(str(value).split())
    unknown = sorted(words - set(allowed))
    if unknown:
        raise ValueError(f"{field}: unknown {unknown[0]!r} (one of {', '.join(sorted(allowed))})")
    return words


_COUNT_SCOPED = (tuple(f"offload={o}" for o in OFFLOADS) + tuple(f"recompute={r}" for r in RECOMPUTES)
                 + tuple(f"zero={z}" for z in ZERO_STAGES))
# The columns of words: (what an empty cell reads as, the words a cell may hold).
_WORD_COLUMNS: dict[str, tuple[str, Collection[str]]] = {
    "offloads": ("", OFFLOADS),
    "unbuilt_parts": ("", ARCHITECTURE_PARTS),
    "optimizers": ("", OPTIMIZERS),
    "offload_optimizers": ("", OPTIMIZERS),
    "moe_dispatchers": ("alltoall", MOE_DISPATCHERS),
    "cuda_graphs": ("none", CUDA_GRAPHS),
    "activation_offload_excludes": ("", ("pp",) + tuple(f"recompute={r}" for r in RECOMPUTES)),
    "optimizer_in_backward": ("", ("full", "lora", "qlora", "pp", "ep")),
    "recomputes": ("", RECOMPUTES),
    "single_gpu_only": ("", _COUNT_SCOPED),
    "multi_gpu_only": ("", _COUNT_SCOPED),
    "lora_parallel": ("", LORA_WORDS),
    "qlora_parallel": ("", LORA_WORDS),
}


class StackCapabilities(CatalogueRow):
    """One row of catalogues/stack_capabilities.csv."""

    name: Stack
    # the config.json model_types the stack builds ({"all"}: every family vramplan reads)
    model_types: frozenset[str] = frozenset({"all"})
    # the layer parts it has no form for, whatever the family (ARCHITECTURE_PARTS; empty: it builds them all)
    unbuilt_parts: frozenset[str] = frozenset()
    tp: bool
    sequence_parallel: bool
    pp: bool
    vpp: bool
    cp: bool
    ep: bool
    zero_stages: frozenset[int]
    offloads: frozenset[str]
    optimizers: frozenset[str]  # what --optimizer the stack builds (Megatron-LM: Adam and SGD; torchtitan v0.2.2: AdamW)
    # the optimizers its optimizer offload runs with (empty: every one it builds): Megatron's CPU offload
    # needs its precision-aware optimizer, which is Adam only; torchtune's CPUOffloadOptimizer wraps AdamW
    offload_optimizers: frozenset[str] = frozenset()
    activation_offload: bool
    # What the stack's activation offload does not run beside: "pp", "recompute=<mode>" (Megatron's
    # layer-level cpu_offloading refuses pipelines and any recompute: NVIDIA/Megatron-LM@d98e8a64
    # megatron/core/transformer/transformer_config.py L1891-1899).
    activation_offload_excludes: frozenset[str] = frozenset()
    # The optimizer stepped in the backward (Job.optimizer_in_backward): the methods it runs with
    # (full, lora, qlora) and the parallelism it runs beside (pp, ep); empty where the stack has none
    # (torchtune's full-finetune recipes' optimizer_in_bwd; torchtitan's early_step_in_backward, which
    # raises under PP and EP).
    optimizer_in_backward: frozenset[str] = frozenset()
    recomputes: frozenset[str]
    single_gpu_only: frozenset[str] = frozenset()  # "offload=optimizer", "zero=0": a choice the stack runs on one GPU only
    multi_gpu_only: frozenset[str] = frozenset()  # "recompute=full": ... on several GPUs only
    lora_parallel: frozenset[str]
    qlora_parallel: frozenset[str]
    multi_gpu: bool
    multi_node: bool
    fp8: bool
    compile: bool = True  # a torch.compile switch (megatron and litgpt's finetune scripts have none)
    # TP communication overlapped with the GEMMs (Job.tp_overlap): "true" runs it (Megatron's
    # --tp-comm-overlap), "compile" only with torch.compile of the blocks (torchtitan's async TP is an
    # Inductor pass: distributed/tensor_parallel.py maybe_enable_async_tp raises without it), "false" none.
    tp_overlap: TpOverlapSupport = "false"
    uneven_split: bool = False  # a pipeline's layers per rank given (Megatron's first/last rank counts, torchtitan's model parts)
    # EP token dispatchers the stack runs (Job.moe_dispatcher, models/time/moe_dispatch.py): alltoall
    # everywhere; Megatron's flex dispatcher on DeepEP / HybridEP, torchtitan's DeepEP backend.
    moe_dispatchers: frozenset[str] = frozenset({"alltoall"})
    # Job.moe_a2a_overlap: Megatron's --overlap-moe-expert-parallel-comm, with what it refuses beside
    # it (a2a_overlap_refusal).
    moe_a2a_overlap: bool = False
    # Job.cuda_graphs the stack runs: Megatron-Core's Transformer Engine per-layer graphs and its
    # full-iteration graph (NVIDIA/Megatron-LM@d98e8a64 transformer_config.py L1075-1106 cuda_graph_impl,
    # cuda_graph_modules); none elsewhere.
    cuda_graphs: frozenset[str] = frozenset({"none"})
    source: str

    @field_validator("zero_stages", mode="before")
    @classmethod
    def _stages(cls, value: Any) -> frozenset[int]:
        return frozenset(int(w) for w in _words(value, tuple(str(z) for z in ZERO_STAGES), "zero_stages"))

    @field_validator(*_WORD_COLUMNS, mode="before")
    @classmethod
    def _word_column(cls, value: Any, info: ValidationInfo) -> frozenset[str]:
        """A column of words (_WORD_COLUMNS: what an empty cell means and the words it may hold)."""
        field = str(info.field_name)  # always set for a field validator
        empty, allowed = _WORD_COLUMNS[field]
        return _words(value or empty, allowed, field)

    @field_validator("model_types", mode="before")
    @classmethod
    def _model_types(cls, value: Any) -> frozenset[str]:
        from vramplan.models.catalogue.hf_families import FAMILIES  # the families vramplan reads

        return _words(value or "all", ("all", *FAMILIES), "model_types")

    def method_parallel(self, method: str) -> frozenset[str] | None:
        """The parallelism this stack trains `method` with (None: every kind, full training)."""
        return {"lora": self.lora_parallel, "qlora": self.qlora_parallel}.get(method)
