"""Weights, gradients and optimizer states per GPU, in exact bytes, with ZeRO and offload.

ZeRO partitions across the N_d data-parallel ranks exactly as the ZeRO paper's Figure 1
(arXiv:1910.02054): stage 1 partitions optimizer states, stage 2 also gradients, stage 3 also
the parameters. A partition holds ceil(P / N_d) elements (DeepSpeed pads the flat buffer so
every rank holds the same count), so per-GPU bytes never fall below the exact share.

Offload (ZeRO-Offload arXiv:2101.06840, ZeRO-Infinity arXiv:2104.07857): `optimizer` keeps the
optimizer states (with the fp32 master) and, under ZeRO-2/3, the fp32 gradient partition in
host RAM; `optimizer+params` (ZeRO-3 only) keeps the 16-bit parameter partition there too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache

from vramplan.models.architecture.parallel import plan_split
from vramplan.models.architecture.quantization import (
    bnb4_quant_state,
    frozen_base_format,
    packed_4bit_bytes,
    quantised_lm_head_bytes,
    quantised_weight_bytes,
)
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import (
    DEEPSPEED_STEP_COPY_STACKS,
    HOOK_REDUCED_ZERO1_STACKS,
    STEP_FP32_GRAD_COPY_STACKS,
    UNSHARDED_ACCUMULATION_STACKS,
)
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.fsdp1_units import mixed_unit_gradient_bytes, mixes_flat_params
from vramplan.models.memory.parallel_states import (
    RankParams,
    rank_params,
    rank_trainable_params,
)
from vramplan.models.memory.precision import FP8_BYTES, FP32_BYTES, HALF_BYTES, params_bytes, weight_bytes_per_param
from vramplan.models.memory.recipe import (
    gradient_state_bytes_per_param,
    is_paged,
    largest_trainable_tensor_params,
    optimizer_state_bytes_per_param,
    pure_half,
    trainable_weight_bytes_per_param,
)


@dataclass(frozen=True)
class ModelStates:
    """Per-GPU bytes of the three model-state pillars, and host bytes per GPU when offloading."""

    weights_bytes: int
    gradients_bytes: int
    optimizer_states_bytes: int
    host_bytes_per_gpu: int
    num_trainable_params: int
    paged_bytes: int = 0  # paged optimizer states: unified memory outside the torch allocator (recipe.py)
    # fp32 gradient copies held from the optimizer step to the next step's zero_grad, beside the
    # states but not the activations (step_grad_copy_bytes); not in gpu_bytes
    step_grad_copy_bytes: int = 0

    @property
    def gpu_bytes(self) -> int:
        """Weights + gradients + optimizer states: what stays in GPU memory."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_states_bytes


def frozen_base_bytes(arch: Architecture, job: Job, precision: str, shard: RankParams | None = None,
                      holds_lm_head: bool = True) -> int:
    """Bytes of the frozen base of a LoRA/QLoRA job (0 for full fine-tuning, whose weights all train)
    on a rank holding `shard` (models/memory/parallel_states.py; default the whole model).

    The base's decoder matmul weights are held as models/architecture/quantization.py
    frozen_base_format says: as a GPTQ/AWQ/bitsandbytes checkpoint stores them, or as QLoRA's
    bitsandbytes quantisation of the 16-bit weights (NF4 with double quantisation, or LLM.int8),
    their bytes from its one function quantised_weight_bytes; else 16-bit. Embeddings, norms,
    biases and lm_head stay 16-bit, or become fp32 when PEFT's `prepare_model_for_kbit_training`
    prepares a QLoRA model (peft/utils/other.py: every fp16/bf16 parameter that is not `Params4bit`
    is cast with `param.data.to(torch.float32)`). Under Lightning Fabric's bitsandbytes plugin (litgpt)
    the lm_head is quantised too, and is a module of its own even where the checkpoint ties it
    (quantization.py LIGHTNING_BNB_STACKS, quantised_lm_head_bytes), on the rank that holds it.
    """
    if job.method == "full":
        return 0
    shard = rank_params(arch, 1, 1, 1, 0) if shard is None else shard
    half = weight_bytes_per_param(precision)  # type: ignore[arg-type]
    fmt = frozen_base_format(arch, job)
    if fmt is None:  # an unquantised base: as loaded (job.base_dtype fp32: PEFT's examples/sft under FSDP)
        return params_bytes(shard.total, Fraction(FP32_BYTES) if job.base_dtype == "fp32" else half)
    # The rank's decoder matmul weights (its TP/PP/EP share: what FP8 would copy, parallel_states.py).
    quantised, held = quantised_weight_bytes(arch, fmt, shard.fp8_matmul_dense, shard.fp8_matmul_expert)
    rest = Fraction(FP32_BYTES) if job.method == "qlora" and job.qlora_prep == "peft" else half
    lm_head = quantised_lm_head_bytes(arch, job) if holds_lm_head else 0
    if lm_head and not arch.tie_word_embeddings:  # the 16-bit lm_head of the count becomes the quantised one
        held += arch.logits_width * arch.hidden_size
    return quantised + lm_head + params_bytes(shard.total - held, rest)


def resident_quant_state_bytes(arch: Architecture, job: Job, shard: RankParams) -> int:
    """The bitsandbytes 4-bit quant state (absmax, and with double quantisation its nested absmax) of
    the rank's quantised matrices, which ZeRO-3 / FSDP neither shards nor offloads: bitsandbytes
    quantises on the GPU and keeps the state as a module attribute beside the parameter
    (bitsandbytes@dcfb6f81 bitsandbytes/nn/modules.py L181-189 Params4bit._quantize:
    `self.module.quant_state = quant_state`; L268-274 Linear4bit.forward restores it after "the quant
    state got lost when the parameter got converted. This happens for example for fsdp"), while FSDP
    flattens, shards and offloads only the parameter's packed data and DeepSpeed ZeRO-3 partitions
    `param.data`. 1.09 GB for Llama 2 70B with double quantisation, on every rank. 0 for a torchao NF4
    base (TORCHAO_NF4_STACKS: FSDP2 shards its scalers with the data) and any other base."""
    fmt = bnb4_quant_state(arch, job)
    if fmt is None:
        return 0
    # every held matrix's state, the 16-bit ones llm_int8_skip_modules keeps included (they have none:
    # a bound above by under 2% of their 4-bit bytes; their own bytes are parameters FSDP shards)
    plain = replace(fmt, skips=False, skip_modules=())
    stored, held = quantised_weight_bytes(arch, plain, shard.fp8_matmul_dense, shard.fp8_matmul_expert)
    return stored - packed_4bit_bytes(held)


def fp8_weight_copy_bytes(num_matmul_weights: int, zero3_group: int = 1) -> int:
    """FP8 training (Transformer Engine) casts each linear weight to fp8 in row- and column-wise
    layouts (Hopper GEMMs need both for forward and dgrad) and keeps them for the step: 2 bytes per
    matmul weight of the rank's TP/PP/EP shard (models/memory/parallel_states.py), divided by the ZeRO-3
    group when the weights themselves are (fp8 all-gather of the sharded copy)."""
    return 2 * FP8_BYTES * ceil_div(num_matmul_weights, zero3_group)


def offload_host_buffers_bytes(partition_params: int, half_bytes: Fraction, zero: int) -> int:
    """Host buffers ZeRO-Offload allocates per rank beside the optimizer states (DeepSpeed
    deepspeed/runtime/zero/, read at edaa72212):
    - every stage: the fp32 gradient partition the CPU optimizer reads (stage_1_and_2.py
      initialize_optimizer_states `single_grad_partition`; stage3.py `subgroup_gradient_buffer`);
    - stages 1-2: a 16-bit copy of the partition for the updated parameters' way back
      (`param_buffer_of_bit16_for_cpu_offload_groups`) and, once a step accumulates, the gradient
      accumulator in the parameter's dtype (`accumulated_grads_in_cpu`, made at the first
      accumulation: counted always, which is 2 bytes/param high for runs that never accumulate);
    - stage 3: the flat gradient-partition buffer in the accumulation dtype, the model's 16-bit
      dtype by default (`grad_partitions_flat_buffer`, engine.get_data_types).
    Per parameter of the partition: 4 + 2 + 2 = 8 bytes (stages 1-2), 4 + 2 = 6 (stage 3), so with
    Adam's 12 the host holds 20 (18) bytes; DeepSpeed's estimator says 16 x 1.5 = 24
    (estimate_zero2/3_model_states_mem_needs, additional_buffer_factor 1.5): docs/memory-model.md."""
    fp32_grads = partition_params * FP32_BYTES
    half = params_bytes(partition_params, half_bytes)
    return fp32_grads + (half if zero == 3 else 2 * half)


def zero_partition(
    weights_full_bytes: int, num_trainable: int, grad_bytes: Fraction, optimizer_bytes: Fraction, zero: int, dp: int,
    gradients_partitioned: bool | None = None,
) -> tuple[int, int, int]:
    """Per-GPU (weights, gradients, optimizer states) bytes under ZeRO stage `zero` on dp ranks
    (ZeRO paper Fig. 1): stage >= 1 partitions optimizer states, >= 2 gradients, 3 parameters;
    `gradients_partitioned` overrides the stage's rule for the gradients (DeepSpeed's hook-reduced
    ZeRO-1: reduces_zero1_in_hooks)."""
    weights = ceil_div(weights_full_bytes, dp) if zero == 3 else weights_full_bytes
    partitioned = zero >= 2 if gradients_partitioned is None else gradients_partitioned
    gradients = params_bytes(ceil_div(num_trainable, dp) if partitioned else num_trainable, grad_bytes)
    optimizer = params_bytes(ceil_div(num_trainable, dp) if zero >= 1 else num_trainable, optimizer_bytes)
    return weights, gradients, optimizer


def model_states(arch: Architecture, job: Job, plan: Plan, stage: int = 0) -> ModelStates:
    """Model states of pipeline rank `stage` (models/memory/parallel_states.py: the rank's TP/PP/EP shard;
    ZeRO over DP x CP for dense parameters and over expert-DP for experts)."""
    return model_states_over_zero(arch, job, (plan,), stage)[0]


def model_states_over_zero(arch: Architecture, job: Job, plans: Sequence[Plan], stage: int = 0) -> list[ModelStates]:
    """model_states of plans that differ in their ZeRO stage and offload alone (the solver tabulates
    a rank's states over the job's ZeRO x offload choices): the rank's shard, its trainable
    parameters and their flat buffers (state_groups), and the recipe's bytes per parameter, once."""
    first = plans[0]
    split = plan_split(arch, first)
    shard = rank_params(arch, first.tp, split, first.ep, stage)
    trainable = rank_trainable_params(arch, job, first.tp, split, first.ep, stage)
    groups = state_groups(job, first, shard, trainable)  # the ZeRO and expert-DP groups: the plans' own
    recipe = recipe_state_bytes(job, first.precision)
    return [_zero_states(arch, job, plan, stage, shard, trainable, groups, recipe) for plan in plans]


def _zero_states(arch: Architecture, job: Job, plan: Plan, stage: int, shard: RankParams, trainable: int,
                 groups: list[tuple[int, int]], recipe: tuple[Fraction, Fraction, Fraction]) -> ModelStates:
    """model_states of the plan from what its ZeRO stage and offload do not change
    (model_states_over_zero)."""
    w, g, k = recipe
    resident = 0  # held whole on the GPU under any ZeRO stage (resident_quant_state_bytes)

    # Weights: the trainable parameters' working copy plus the frozen base (LoRA/QLoRA: the rank's
    # TP/PP share of both, parallel_states.rank_trainable_params).
    if job.method != "full":
        weights_full = (frozen_base_bytes(arch, job, plan.precision, shard, holds_lm_head=stage == plan.pp - 1)
                        + params_bytes(trainable, w))
        if plan.zero == 3:  # the bitsandbytes quant state stays whole on the GPU, outside the partition
            resident = resident_quant_state_bytes(arch, job, shard)
            weights_full -= resident
    # One micro-batch: DeepSpeed's ZeRO-1 hooks keep only the partition's gradients (HOOK_REDUCED_ZERO1_STACKS)
    partitioned = plan.zero >= 2 or reduces_zero1_in_hooks(job, plan)
    weights, gradients, optimizer, host = resident, 0, 0, 0
    for params, group in groups:
        full = params_bytes(params, w) if job.method == "full" else weights_full
        part_w, part_g, part_o = zero_partition(full, params, g, k, plan.zero, group, partitioned)
        if job.optimizer_in_backward:  # one parameter's gradient at a time (recipe.py)
            part_g = min(part_g, params_bytes(largest_trainable_tensor_params(arch, job), g))
        if plan.offload == "optimizer+params":
            host += ceil_div(full, group)
            part_w = 0  # the 16-bit partition lives in host RAM; the live gathered layers are overhead
        if plan.offload != "none":
            host += part_o + offload_host_buffers_bytes(ceil_div(params, group), w, plan.zero)
            part_o = 0
            if partitioned:
                part_g = 0  # the reduced gradient partition goes straight to host memory
        weights += part_w
        gradients += part_g
        optimizer += part_o
    if mixes_flat_params(job, plan):  # the Block's whole FlatParameter gets a gradient, sharded after each micro-batch
        gradients = mixed_unit_gradient_bytes(arch, job, plan.model_copy(update={"grad_accum": 1}), stage)
    gradients += unsharded_accumulation_bytes(arch, job, plan, stage)
    if keeps_stage_gathered(job, plan):
        # The stage's 16-bit parameters stay gathered and its gradients accumulate unsharded, in
        # FSDP2's fp32 reduce dtype (torchtitan mixed_precision_reduce = float32), all step.
        if plan.zero == 3:  # ZeRO-2's partition already holds the whole parameters
            weights += params_bytes(shard.total, weight_bytes_per_param(plan.precision)) if job.method == "full" else weights_full
        gradients += trainable * FP32_BYTES
    paged = 0
    if is_paged(job) and plan.offload == "none":
        paged, optimizer = optimizer, 0
    if plan.precision == "fp8":
        zero3 = plan.zero == 3
        weights += fp8_weight_copy_bytes(shard.fp8_matmul_dense, plan.zero_group if zero3 else 1)
        weights += fp8_weight_copy_bytes(shard.fp8_matmul_expert, plan.expert_dp if zero3 else 1)
    copy = _step_copy_bytes(job, plan, groups, recipe)
    return ModelStates(weights, gradients, optimizer, host, trainable, paged, copy)


def state_groups(job: Job, plan: Plan, shard: RankParams, trainable: int) -> list[tuple[int, int]]:
    """(parameters, ZeRO group) of each flat buffer of the rank's trainable states: a full fine-tune's
    dense parameters over the ZeRO group and its experts over the expert-DP group (one buffer when the
    two are the same group, as without expert parallelism); a LoRA job's adapters over the ZeRO group."""
    if job.method != "full":
        return [(trainable, plan.zero_group)]
    if plan.expert_dp == plan.zero_group:
        return [(shard.total, plan.zero_group)]
    return [(shard.dense, plan.zero_group), (shard.expert, plan.expert_dp)]


def reduces_zero1_in_hooks(job: Job, plan: Plan) -> bool:
    """Whether the plan's ZeRO-1 is DeepSpeed's, which reduces in backward hooks at the step's last
    micro-batch and keeps the partition only (models/core/stack_behaviour.py HOOK_REDUCED_ZERO1_STACKS)."""
    return plan.zero == 1 and job.stack in HOOK_REDUCED_ZERO1_STACKS


def unsharded_accumulation_bytes(arch: Architecture, job: Job, plan: Plan, stage: int = 0) -> int:
    """What unsharded gradient accumulation adds on pipeline rank `stage` beyond the gradient
    model_states keeps for one micro-batch: under ZeRO-3, the rank's trainable gradients at full size
    less their shard (0 when the stack reduce-scatters every micro-batch, without accumulation, or on
    one ZeRO rank), under FSDP1's mixed units (mixes_flat_params) the whole units' gradient less its
    shard; under DeepSpeed's ZeRO-1 (reduces_zero1_in_hooks), whose hooks reduce nothing before the
    last micro-batch, every gradient whole less the partition it keeps (all of it with offload,
    where the partition goes to the host)."""
    if plan.grad_accum <= 1 or job.optimizer_in_backward:
        return 0
    if reduces_zero1_in_hooks(job, plan):
        split = plan_split(arch, plan)
        shard = rank_params(arch, plan.tp, split, plan.ep, stage)
        trainable = rank_trainable_params(arch, job, plan.tp, split, plan.ep, stage)
        grad_bytes = recipe_state_bytes(job, plan.precision)[1]
        kept = 0 if plan.offload != "none" else 1
        return sum(params_bytes(params, grad_bytes) - kept * params_bytes(ceil_div(params, group), grad_bytes)
                   for params, group in state_groups(job, plan, shard, trainable))
    if plan.zero != 3 or plan.zero_group <= 1 or plan.offload != "none":
        return 0
    if mixes_flat_params(job, plan):  # FSDP1's no_sync: every unit's whole gradient until the last micro-batch
        whole = mixed_unit_gradient_bytes(arch, job, plan, stage)
        return whole - mixed_unit_gradient_bytes(arch, job, plan.model_copy(update={"grad_accum": 1}), stage)
    if job.stack not in UNSHARDED_ACCUMULATION_STACKS:
        return 0
    trainable = rank_trainable_params(arch, job, plan.tp, plan_split(arch, plan), plan.ep, stage)
    full = params_bytes(trainable, recipe_state_bytes(job, plan.precision)[1])
    return full - ceil_div(full, plan.zero_group)


def step_grad_copy_bytes(arch: Architecture, job: Job, plan: Plan, stage: int = 0) -> int:
    """The fp32 gradient copies pipeline rank `stage` holds from the optimizer step to the next
    step's zero_grad, beside its model states (STEP_FP32_GRAD_COPY_STACKS: Megatron-LM; citations
    there). Its mixed-precision optimizers set each fp32 main parameter's .grad to
    `main_grad.float()` before optimizer.step(): Float16OptimizerWithFloat16Params (ZeRO-0) for every
    trainable parameter of the rank, the distributed optimizer (ZeRO-1) for its shard only, as it
    shards the optimizer states; the next train_step's zero_grad(set_to_none) frees them before its
    forward. With an fp32 gradient buffer (accounting "hf": bf16's default
    accumulate_allreduce_grads_in_fp32, or --fp16 with that flag) .float() returns the buffer
    itself: nothing. A 16-bit buffer (accounting "zero": --fp16 alone, --grad-reduce-in-bf16, what
    launch/configs.py writes) gives 4 bytes per parameter of the rank's optimizer share. The step
    holds no activations, so the rank's peak is its states, the overhead and the larger of its
    activations and this (models/memory/memory.py MemoryBreakdown.total_bytes).

    Megatron-FSDP (ZeRO-2/3, models/memory/megatron_fsdp.py) casts its 16-bit gradient shard the same
    way (megatron_fsdp/param_and_grad_buffer.py L3377-3381 @ d98e8a64: `optimizer_grad.to(param.dtype)`
    in update_main_grads, held in param.grad until zero_grad_buffer): 4 bytes per parameter of the
    shard.

    0 where the mechanism was not read: an offloaded optimizer (HybridDeviceOptimizer with the
    precision-aware optimizer, whose .decoupled_grad is the buffer's view), no fp32 master (pure
    16-bit), fp32 training (FP32Optimizer steps the buffer itself)."""
    return model_states(arch, job, plan, stage).step_grad_copy_bytes


def _step_copy_bytes(job: Job, plan: Plan, groups: list[tuple[int, int]],
                     recipe: tuple[Fraction, Fraction, Fraction]) -> int:
    """step_grad_copy_bytes from the rank's flat buffers (state_groups) and the recipe's bytes."""
    deepspeed = runs_deepspeed_step(job, plan)
    if (job.stack not in STEP_FP32_GRAD_COPY_STACKS and not deepspeed) or plan.offload != "none":
        return 0
    if plan.precision == "fp32" or pure_half(job, plan.precision) or recipe[1] != HALF_BYTES:
        return 0  # no master copy, or an fp32 gradient buffer that .float() returns as it is
    if deepspeed:
        # one step unit at a time (DEEPSPEED_STEP_COPY_STACKS): a group's partition, under ZeRO-3 a
        # sub-group of it of at most sub_group_size elements; its 16-bit flat copy and the fp32 cast
        largest = max((ceil_div(params, group) for params, group in groups), default=0)
        if plan.zero == 3:
            largest = min(largest, DEEPSPEED_SUB_GROUP_ELEMENTS)
        return largest * (HALF_BYTES + FP32_BYTES)
    return sum(FP32_BYTES * (ceil_div(params, group) if plan.zero >= 1 else params) for params, group in groups)


DEEPSPEED_SUB_GROUP_ELEMENTS = 10**9  # runtime/zero/config.py sub_group_size's default (launch/deepspeed.py sets none)


def runs_deepspeed_step(job: Job, plan: Plan) -> bool:
    """Whether the plan's optimizer step is DeepSpeed's ZeRO optimizer (DEEPSPEED_STEP_COPY_STACKS):
    the deepspeed stack at ZeRO-1 to 3. hf runs DeepSpeed for some plans only (models/core/hf_engine.py:
    by the GPU count, TP, EP and CP, which the solver's model-states keys do not carry), so its step
    is not counted (docs/fidelity.md)."""
    return plan.zero >= 1 and job.stack in DEEPSPEED_STEP_COPY_STACKS


def keeps_stage_gathered(job: Job, plan: Plan) -> bool:
    """torchtitan's FSDP (ZeRO-2 and ZeRO-3) under pipeline parallelism: torch.distributed.pipelining's
    stage runs every backward but the last micro-batch's with set_requires_gradient_sync(False) and
    set_reshard_after_backward(False) (stage.py backward_maybe_with_nosync), whatever the reshard
    policy, so the stage's gradients accumulate unsharded and the reduce-scatter waits for the last
    one, and the backward leaves the stage gathered (its default policy does not reshard after
    forward either when PP is on: torchtitan/distributed/fsdp.py get_fsdp_reshard_after_forward_policy,
    "default" -> `not pp_enabled`, read at b5bcd76; ZeRO-2, `fsdp_reshard_after_forward = "never"`, holds
    whole parameters anyway). Measured peaks were 2-4x the sharded estimate without this (issue 32);
    ZeRO-2 counted its gradients sharded and read below ZeRO-3 (a metamorphic review: qwen3-32b PP 4,
    4.0 against 36.0 GiB of gradients). Counted whenever pp > 1, also for a single micro-batch, whose
    forward leaves the parameters gathered too."""
    return job.stack in ("torchtitan", "torchtitan-root-fsdp") and plan.zero >= 2 and plan.pp > 1


@lru_cache(maxsize=1024)
def recipe_state_bytes(job: Job, precision: str) -> tuple[Fraction, Fraction, Fraction]:
    """(weight, gradient, optimizer-state) bytes per trainable parameter under the job's recipe
    (kept per job and precision: the solver's tables ask it for every ZeRO stage, offload and
    pipeline rank, and its Fractions cost more than model_states' integer arithmetic)."""
    if job.method == "qlora" and job.qlora_prep == "peft":  # fp32 adapters: no master copy needed
        return Fraction(FP32_BYTES), Fraction(FP32_BYTES), optimizer_state_bytes_per_param(job, "fp32")
    return (trainable_weight_bytes_per_param(job, precision), gradient_state_bytes_per_param(job, precision),  # type: ignore[arg-type]
            optimizer_state_bytes_per_param(job, precision))  # type: ignore[arg-type]
