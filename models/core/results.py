"""Result models: what `estimate` (and each plan of `solve`) reports. JSON round-trips through them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from vramplan.models.core.setup import Job, Plan

Pillar = Literal["weights", "gradients", "optimizer_states", "activations", "overhead"]
PILLARS: tuple[Pillar, ...] = ("weights", "gradients", "optimizer_states", "activations", "overhead")


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelInfo(_Result):
    name: str
    model_type: str
    num_params: int
    num_trainable_params: int
    num_active_params: int
    num_vision_params: int = 0  # of num_params: a multimodal checkpoint's vision tower and projector
    num_layers: int
    hidden_size: int
    vocab_size: int


class ActivationDetail(_Result):
    per_layer_bytes: int  # one layer as kept between forward and backward under the recompute mode
    layers_bytes: int  # all decoder layers
    embedding_bytes: int
    output_layer_bytes: int  # final norm, lm_head input, the loss's fp32 logits
    backward_peak_extra_bytes: int  # working memory of the backward's peak (layer rebuild, loss grads)
    fragmentation_reserve_bytes: int = 0  # fraction x the largest transient block (models/memory/fragmentation.py)
    offloaded_bytes: int = 0  # saved activations moved to host memory (not in the GPU total)


class OverheadDetail(_Result):
    cuda_context_bytes: int
    cublas_workspace_bytes: int
    nccl_bytes: int
    comm_buckets_bytes: int
    zero3_live_params_bytes: int
    tp_buffers_bytes: int = 0  # SP all-gather buffer (models/memory/parallel_overhead.py)
    pp_p2p_bytes: int = 0  # pipeline send/recv buffers
    cp_buffers_bytes: int = 0  # ring-attention K/V buffers
    dispatcher_buffers_bytes: int = 0  # DeepEP / HybridEP buffers (models/memory/dispatcher_buffers.py)


class RankTotal(_Result):
    """One checked pipeline rank: its decoder layers and the memory it holds."""

    rank: int
    layers: int
    total_bytes: int


class MemoryReport(_Result):
    weights_bytes: int
    gradients_bytes: int
    optimizer_states_bytes: int
    activations_bytes: int
    overhead_bytes: int
    total_bytes: int
    # Where the measured peak of such a run may land: total x the stack's range of measured /
    # predicted on published runs (models/core/fidelity_ranges.py), and what that range rests on.
    total_low_bytes: int
    total_high_bytes: int
    range_basis: str
    memory_bound: Literal["estimate", "upper"] = "estimate"  # what had to fit under limit_bytes
    capacity_bytes: int
    capacity_fraction: float
    limit_bytes: int
    fits: bool
    gpu_fits: bool
    headroom_bytes: int
    dominant_pillar: Pillar
    host_bytes: int  # host RAM per instance (node) for offloaded states; 0 without offload
    host_capacity_bytes: int | None
    host_limit_bytes: int | None
    host_fits: bool
    stage: int = 0  # the pipeline rank reported: the most loaded (0 = embedding, pp - 1 = lm_head + loss)
    num_stages: int = 1
    # The pipeline's split: decoder layers of each rank (Plan.stage_layers or the default), and the
    # memory of each checked rank (the first holding each distinct set of layers, and the last).
    stage_layers: list[int] = []
    rank_totals: list[RankTotal] = []
    activations: ActivationDetail
    overhead: OverheadDetail
    paged_bytes: int = 0  # paged optimizer states: unified memory outside the torch allocator, not in total
    # The fp32 gradient copies the optimizer step holds beside the states and the overhead, with no
    # activations (Megatron with a 16-bit gradient buffer: models/memory/model_states.py
    # step_grad_copy_bytes); not a pillar: total is the larger of the pillars' sum and
    # weights + gradients + optimizer states + overhead + this.
    step_grad_copy_bytes: int = 0


class PerformanceReport(_Result):
    tokens_per_s: float
    # The range of measured tokens/s around it (calibrated GPU or not: models/core/fidelity_ranges.py).
    tokens_per_s_low: float
    tokens_per_s_high: float
    range_basis: str
    mfu_fraction: float  # model FLOPs utilisation, 0..1 (tables show it in percent)
    hfu_fraction: float  # hardware FLOPs utilisation (recompute included), 0..1
    step_time_s: float
    compute_time_s: float
    communication_time_s: float
    exposed_communication_s: float
    optimizer_time_s: float
    model_parallel_time_s: float = 0.0  # exposed TP/PP/CP/EP time incl. the pipeline bubble
    pipeline_bubble_s: float = 0.0
    pipeline_imbalance_s: float = 0.0  # the slowest pipeline rank's work beyond the mean rank's
    moe_host_wait_s: float = 0.0  # of model_parallel_time_s: MoE forwards waiting for the host (models/time/moe_host.py)
    offload_exposed_s: float = 0.0  # activation-offload host transfer not hidden by compute
    tokens_per_step: int
    global_batch: int
    model_flops_per_token: int
    hardware_flops_per_token: int
    peak_tflops: float
    compute_efficiency: float
    # Whether compute_efficiency was calibrated on a published run of this GPU generation; if
    # not, the generation whose value it borrows (models/time/calibration.py) and why.
    efficiency_calibrated: bool
    efficiency_borrowed_from: str | None
    efficiency_source: str


class CostReport(_Result):
    offering: str
    pricing: Literal["on-demand", "spot", "1yr", "3yr"]
    num_instances: int
    # The interconnect the plan runs on: GPUs per instance, each GPU's bandwidth inside one
    # (NVLink / Infinity Fabric) and between instances (the offering's scale-out network), GB/s one way.
    gpus_per_instance: int
    intra_node_gb_per_s: float
    network_gb_per_s: float
    usd_per_hour: float
    tokens: float
    hours: float
    days: float
    usd_total: float


class FittingChange(_Result):
    """One change of a plan that does not fit that makes it fit (models/estimate_changes.py)."""

    change: str  # the options that differ, as the command line writes them: "--zero 3"
    plan: Plan  # the changed plan, on the offering its estimate chose
    total_bytes: int
    limit_bytes: int
    tokens_per_s: float
    usd_total: float


class EstimateResult(_Result):
    model: ModelInfo
    job: Job
    plan: Plan
    memory: MemoryReport
    performance: PerformanceReport
    cost: CostReport
    # What makes the plan one nobody would run, though it fits (models/estimate.py plan_warnings).
    warnings: list[str] = []
    # A plan that does not fit: the single changes that make it fit, least disruptive first (filled by
    # models/estimate.py estimate unless fitting_changes=False; empty when it fits or none does).
    fitting_changes: list[FittingChange] = []
