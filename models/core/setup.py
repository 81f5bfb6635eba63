"""What the user trains (Job) and how one configuration trains it (Plan): the inputs of every formula.

A Job is fixed by the user's question; a Plan holds the decision variables the solver chooses.
Both are validated pydantic models, so an impossible value never reaches a formula.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# The domains' names, re-exported: models and the CLI import them from here or from models.choices.
from vramplan.models.core.choices import (  # noqa: F401
    BASE_DTYPES,
    COMPILES,
    CUBLAS_WORKSPACE_MIB,
    CUDA_CONTEXT_MIB,
    CUDA_GRAPHS,
    LOSSES,
    MASTER_WEIGHTS,
    MAX_GLOBAL_BATCH,
    MAX_GPUS,
    MAX_PLAN_GPUS,
    MEMORY_BOUNDS,
    METHODS,
    MOE_DISPATCHERS,
    NCCL_MIB,
    OFFLOADS,
    OPTIMIZERS,
    PRECISIONS,
    QLORA_PREPS,
    RECOMPUTES,
    SELECTIVES,
    STACKS,
    ZERO_STAGES,
    Accounting,
    Attention,
    BaseDtype,
    Compile,
    CudaGraphs,
    Kernels,
    Loss,
    MasterWeights,
    MemoryBound,
    Method,
    MoeDispatcher,
    Offload,
    Optimizer,
    PartialRecompute,
    Precision,
    QloraPrep,
    Recompute,
    Selective,
    Stack,
    ZeroStage,
)
from vramplan.models.core.errors import VramplanError
from vramplan.models.core.fidelity_ranges import memory_range
from vramplan.models.core.layout import Layout
from vramplan.models.core.numbers import Count, Real


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RuntimeReserve(_Frozen):
    """Per-GPU memory a training process holds besides tensors it allocates itself (MiB).

    Defaults and their sources are documented in models/memory/overhead.py and docs/memory-model.md#overhead.
    """

    cuda_context_mib: Count = Field(default=CUDA_CONTEXT_MIB, ge=0, le=65536)
    cublas_workspace_mib: Count = Field(default=CUBLAS_WORKSPACE_MIB, ge=0, le=65536)
    nccl_mib: Count = Field(default=NCCL_MIB, ge=0, le=65536, description="only when more than one GPU")


ADAPTER_FIELDS = ("lora_rank", "lora_dropout", "lora_targets", "base_dtype")  # LoRA's and QLoRA's alone


class Job(_Frozen):
    """The training job: what is trained and with which recipe choices the user fixed."""

    method: Method = "full"
    lora_rank: Count = Field(default=16, ge=1, le=65536)
    lora_dropout: Real = Field(default=0.0, ge=0, lt=1, allow_inf_nan=False,
                               description="PEFT LoraConfig.lora_dropout: > 0 saves each adapter's dropped-out input")
    lora_targets: tuple[str, ...] | None = Field(
        default=None, description="PEFT target_modules names; None = every linear module of the blocks"
    )
    qlora_bits: Literal[4, 8] = 4
    base_dtype: BaseDtype = Field(default="16bit", description="LoRA's unquantised frozen base: 16bit or fp32 as loaded")
    optimizer: Optimizer = "adamw"
    accounting: Accounting = "zero"
    attention: Attention = "flash"
    kernels: Kernels = "eager"
    seq_len: Count = Field(default=2048, ge=1, le=1_048_576)
    # At least 5%: the bound works in per-mille of the GPU's memory, and a fraction that rounds to 0
    # per-mille made every plan's limit 0 bytes (an answer of "nothing fits" for a typo).
    capacity_fraction: Real = Field(default=0.9, ge=0.05, le=1)
    # upper: plan so that the top of the estimate's range (models/core/fidelity_ranges.py, the
    # stack's published runs) fits under the limit, not the estimate itself.
    memory_bound: MemoryBound = "estimate"
    reserve: RuntimeReserve = RuntimeReserve()
    # Training-stack recipe choices; the defaults are the hf stack's preset (catalogues/stacks.csv).
    stack: Stack = Field(default="hf", description="the training stack whose preset filled the unset options")
    master_weights: MasterWeights = Field(default="fp32", description="none = pure 16-bit (bf16-true)")
    loss: Loss = Field(default="eager", description="eager = the --kernels' own loss; chunked; fused linear+CE")
    selective: Selective = Field(default="attention", description="what --recompute selective means")
    recompute_layers: Count | None = Field(default=None, ge=1, le=1024, description="layers full recompute covers "
                                         "in each pipeline stage's model chunk (none of them: recompute none)")
    optimizer_in_backward: bool = False
    activation_offload: bool = False
    qlora_prep: QloraPrep = Field(default="peft", description="peft = non-quantised parameters cast to fp32")
    fragmentation_fraction: Real = Field(default=1.0, ge=0, le=4, description="reserve x largest transient")
    loss_chunks: Count = Field(default=8, ge=1, le=4096, description="chunks of --loss chunked (torchtune: 8)")
    compile: Compile = Field(default="none", description="torch.compile: none, the decoder blocks (model), or "
                             "the blocks and the loss (model+loss); true/false read as model+loss/none")
    tp_overlap: bool = Field(default=False, description="TP communication overlapped with the GEMMs: Megatron "
                             "--tp-comm-overlap (TE userbuffers), torchtitan async TP (needs torch.compile); "
                             "with sequence parallelism only")
    moe_dispatcher: MoeDispatcher = Field(default="alltoall", description="the EP token dispatcher: alltoall (one "
                                          "copy per chosen expert), or Megatron's flex dispatcher on DeepEP or "
                                          "HybridEP (one copy per remote node, forwarded over NVLink): "
                                          "models/time/moe_dispatch.py")
    moe_a2a_overlap: bool = Field(default=False, description="Megatron's --overlap-moe-expert-parallel-comm: each "
                                  "MoE layer's forward runs beside another micro-batch's backward, hiding the EP "
                                  "all-to-alls behind the compute (needs EP > 1, interleaved stages under a "
                                  "pipeline, no full recompute): models/time/ep_time.py")
    cuda_graphs: CudaGraphs = Field(default="none", description="CUDA graphs of the step: none; attn = Transformer "
                                    "Engine's per-layer graphs of the attention, MoE router and preprocess; "
                                    "full-iteration = the forward-backward as one graph (Megatron --cuda-graph-impl). "
                                    "They shorten what a MoE layer waits for the host (models/time/moe_host.py); "
                                    "their memory pools and a MoE's capacity padding are not in the memory estimate")

    @field_validator("lora_targets")
    @classmethod
    def _some_targets(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """An empty list adapts nothing (a LoRA of 0 trainable parameters was solved 'optimal'), as the
        command line's --lora-targets '' is refused: None adapts every linear module."""
        if value is not None and not value:
            raise ValueError("names no module; leave it out (None) to adapt every linear module")
        return value

    @model_validator(mode="after")
    def _adapter_fields_need_an_adapter(self) -> Job:
        """LoRA's settings on a full fine-tune, and quantised bits on anything but QLoRA, mean nothing:
        as the command line and a batch row refuse them when given (solver/query_fields.py
        refuse_contradictions), the API's Job refuses a value other than the field's default (it
        solved them, ignored). Defaults, not the fields set, decide: a Job's model_dump() validated
        again sets every field."""
        fields = type(self).model_fields
        if self.method == "full":
            for name in ADAPTER_FIELDS:
                if getattr(self, name) != fields[name].default:
                    raise VramplanError(name, getattr(self, name), "applies to method lora or qlora; this job is method full")
        if self.method != "qlora" and self.qlora_bits != fields["qlora_bits"].default:
            raise VramplanError("qlora_bits", self.qlora_bits, f"applies to method qlora, not {self.method}")
        return self

    @field_validator("compile", mode="before")
    @classmethod
    def _compile_switch(cls, value: object) -> object:
        """--compile/--no-compile and a sheet's true/false: on means what torchtitan's `compile.enable`
        (components ["model", "loss"] by default) and torchtune's `compile: True` compile."""
        if isinstance(value, bool):
            return "model+loss" if value else "none"
        word = value.strip().lower() if isinstance(value, str) else value
        if word in ("true", "false"):
            return "model+loss" if word == "true" else "none"
        if word not in COMPILES:
            raise ValueError(f"must be true, false or one of {', '.join(COMPILES)}")
        return word

    def __hash__(self) -> int:
        """A few fields' hash (equal jobs have them equal, so this agrees with ==): the functools
        caches of models/ hash the job constantly, and pydantic's frozen-model hash hashes every
        field (docs/performance.md#hashes-of-domain-types)."""
        return hash((self.method, self.seq_len, self.optimizer, self.stack))

    @property
    def capacity_per_mille(self) -> int:
        """The capacity fraction as an integer per-mille, the form the integer bound uses (host RAM's)."""
        return round(self.capacity_fraction * 1000)

    @property
    def gpu_capacity_per_mille(self) -> int:
        """GPU memory's bound in per-mille: the capacity fraction, or with memory_bound=upper that
        fraction over the top of the stack's range (rounded down: the plan's total x high fits)."""
        if self.memory_bound == "estimate":
            return self.capacity_per_mille
        return math.floor(self.capacity_fraction * 1000 / memory_range(self.stack).high)


def offload_refusal(zero: int, offload: str) -> str | None:
    """Why this offload cannot run at this ZeRO stage (None: it can): the one rule the Plan and the
    solver's ZeRO x offload domain share."""
    if offload == "optimizer" and zero == 0:
        return "needs ZeRO stage >= 1 (DeepSpeed offload_optimizer)"
    if offload == "optimizer+params" and zero != 3:
        return "needs ZeRO stage 3 (DeepSpeed offload_param)"
    return None


def recompute_label(mode: str, layers: int | None, pp: int = 1) -> str:
    """A recompute as tables and sentences show it: the mode, and the layers a partial full
    recompute checkpoints (in each pipeline stage when there are several)."""
    return mode if layers is None else f"{mode} ({layers} layers{' per stage' if pp > 1 else ''})"


class Plan(_Frozen):
    """One training configuration on one kind of GPU: the solver's decision variables."""

    gpu: str
    offering: str | None = Field(default=None, description="provider/instance_type, None = no price")
    num_gpus: Count = Field(default=1, ge=1, le=MAX_PLAN_GPUS)
    zero: ZeroStage = 0
    recompute: Recompute = "none"
    # Megatron --recompute-num-layers (block) as a decision: the first N layers of each model chunk
    # (models/memory/recompute.py recompute_block); the solver's partial recompute; None = the job's
    # recompute_layers (every layer when that is None too).
    recompute_layers: Count | None = Field(default=None, ge=0, le=1024,
                                         description="layers full recompute covers in each model chunk")
    precision: Precision = "bf16"
    micro_batch: Count = Field(default=1, ge=1, le=MAX_GLOBAL_BATCH)
    grad_accum: Count = Field(default=1, ge=1, le=MAX_GLOBAL_BATCH)
    offload: Offload = "none"
    # Model parallelism (models/architecture/parallel.py): tensor, pipeline, context, expert degrees, virtual
    # pipeline stages per rank (interleaved 1F1B) and Megatron sequence parallelism with TP.
    tp: Count = Field(default=1, ge=1, le=1024)
    pp: Count = Field(default=1, ge=1, le=1024)
    cp: Count = Field(default=1, ge=1, le=1024)
    ep: Count = Field(default=1, ge=1, le=1024)
    vpp: Count = Field(default=1, ge=1, le=1024)
    sequence_parallel: bool = False
    # Decoder layers of each pipeline rank, summed over its virtual chunks (Megatron's
    # --decoder-first/last-pipeline-num-layers or --pipeline-model-parallel-layout, torchtitan's
    # module_fqns_per_model_part); None = the default split (models/architecture/parallel.py stage_layers).
    stage_layers: tuple[int, ...] | None = Field(default=None, description="layers per pipeline rank; None = even")

    @property
    def recompute_label(self) -> str:
        return recompute_label(self.recompute, self.recompute_layers, self.pp)

    @property
    def layout(self) -> Layout:
        """The parallel degrees as the one type the solver and the time model use."""
        return Layout.of(self)

    @property
    def dp(self) -> int:
        """Data-parallel degree: num_gpus = tp * pp * cp * dp (Megatron's rank layout)."""
        return self.num_gpus // (self.tp * self.pp * self.cp)

    @property
    def zero_group(self) -> int:
        """Ranks ZeRO / the distributed optimizer shard dense states over: DP x CP (Megatron-Core
        builds its distributed optimizer on the data-parallel group with context parallelism)."""
        return self.dp * self.cp

    @property
    def expert_dp(self) -> int:
        """Expert-data-parallel degree: EP is carved from the DP x CP ranks (Megatron-Core
        parallel_state: expert_data_parallel = world / (expert_tp * ep * pp), expert_tp = tp)."""
        return self.dp * self.cp // self.ep

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.grad_accum * self.dp

    @field_validator("zero", mode="before")
    @classmethod
    def _zero_is_no_boolean(cls, value: object) -> object:
        return refuse_boolean("zero", value)

    @model_validator(mode="after")
    def _split_fits_the_pipeline(self) -> Plan:
        if self.stage_layers is not None:
            shown = ",".join(map(str, self.stage_layers))
            if len(self.stage_layers) != self.pp:
                raise VramplanError("stage_layers", shown, f"names {len(self.stage_layers)} pipeline ranks; pp is {self.pp}")
            if min(self.stage_layers) < max(1, self.vpp):
                raise VramplanError("stage_layers", shown, f"gives a rank fewer than {max(1, self.vpp)} layers "
                                                           f"(each rank holds at least one per virtual stage)")
        return self

    @model_validator(mode="after")
    def _offload_needs_zero(self) -> Plan:
        reason = offload_refusal(self.zero, self.offload)
        if reason is not None:
            raise VramplanError("offload", self.offload, reason)
        return self

    @model_validator(mode="after")
    def _degrees_divide(self) -> Plan:
        model_parallel = self.layout.model_parallel
        if self.num_gpus % model_parallel:
            raise VramplanError(
                "num_gpus", self.num_gpus, f"must be a multiple of tp*pp*cp = {self.tp}*{self.pp}*{self.cp} = {model_parallel}"
            )
        if (self.dp * self.cp) % self.ep:
            raise VramplanError("ep", self.ep, f"must divide dp*cp = {self.dp * self.cp} (EP is carved from the DP x CP ranks)")
        if self.vpp > 1 and self.pp == 1:
            raise VramplanError("vpp", self.vpp, "virtual pipeline stages need pp > 1")
        return self


def refuse_boolean(field: str, value: object) -> object:
    """A ZeRO stage is a number, never a boolean (Literal[0, 1, 2, 3] took True as ZeRO-1)."""
    if isinstance(value, bool):
        raise ValueError(f"{field}={value}: is a boolean, not a number")
    return value
