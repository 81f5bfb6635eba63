"""LoRA under FSDP1 with one unit per decoder layer whose FlatParameter mixes the frozen base with
the adapters (MIXED_FLAT_PARAM_STACKS: the `litgpt-fsdp1` stack): every unit's whole gradient,
frozen weights included, as models/memory/model_states.py counts it for those stacks."""

from __future__ import annotations

from fractions import Fraction

from vramplan.models.architecture.parallel import plan_split
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import MIXED_FLAT_PARAM_STACKS
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.parallel_states import layer_shard, rank_trainable_params, stage_layer_counts
from vramplan.models.memory.precision import FP32_BYTES, params_bytes, weight_bytes_per_param


def mixed_unit_gradient_bytes(arch: Architecture, job: Job, plan: Plan, stage: int = 0) -> int:
    """The gradient pillar of a LoRA job under FSDP1 (`FullyShardedDataParallel`, ZeRO-3 =
    FULL_SHARD) with `use_orig_params=True` and one FSDP unit per decoder layer, whose FlatParameter
    holds the layer's frozen base weights together with its adapters: the regime of lit-gpt 2023 to
    litgpt v0.5.7 (the rows marked `litgpt-fsdp1-frozen-grads` in tests/data/measured_peaks.csv).
    Not the `litgpt` stack's (litgpt v0.5.13 shards LoRA with FSDP2, whose frozen parameters get no
    gradient: UNSHARDED_ACCUMULATION_STACKS): the `litgpt-fsdp1` stack's (MIXED_FLAT_PARAM_STACKS).
    model_states holds its 1/N shard, unsharded_accumulation_bytes the rest under accumulation.

    What the code holds, read at lit-gpt 8641822, its pinned Lightning 71aed751 and torch 2.1:
    - finetune/lora.py L83-89: `FSDPStrategy(auto_wrap_policy={Block}, activation_checkpointing_policy=
      {Block}, ...)`, L130 `mark_only_lora_as_trainable(model)` (lit_gpt/lora.py L403-405: every
      parameter whose name lacks "lora_" gets requires_grad False), L215 `with
      fabric.no_backward_sync(model, enabled=is_accumulating)` for every micro-batch but a step's last;
    - Lightning src/lightning/fabric/strategies/fsdp.py L175 `self._fsdp_kwargs.setdefault(
      "use_orig_params", True)`, L157 FULL_SHARD, L773 no_backward_sync -> `module.no_sync()`;
    - torch/distributed/fsdp/flat_param.py (2.1) FlatParamHandle._validate_tensors_to_flatten: mixed
      requires_grad is refused only without use_orig_params, and `flat_param_requires_grad =
      flat_param_requires_grad or tensor.requires_grad`: one adapter makes the Block's whole
      FlatParameter require a gradient, so autograd computes one for the frozen weights' views too
      and accumulates it into `flat_param.grad` at the unit's unpadded unsharded size
      (prepare_gradient_for_backward keeps a `.grad` of `_unpadded_unsharded_size`); torch's own
      warning says it (_wrap_utils.py _validate_frozen_params: "the gradient memory usage will be
      higher than expected ({total} numel instead of {nonfrozen} numel before sharding via
      reduce-scatter)"; litgpt issues #1392, #1417, fixed by #1538 = 281510ab, v0.5.8, which wraps
      each torch.nn.Linear instead);
    - _runtime_utils.py (2.1) _post_backward_hook: `if not state._sync_gradients: ... return` before
      the reduce-scatter, so under no_sync every unit's unsharded gradient stays until the step's
      last micro-batch; the root unit (wte, ln_f and an lm_head without adapter, lit_gpt/lora.py
      L460-464 `r=(config.r if config.to_head else 0)`) is all frozen and gets none.
    So with accumulation the rank holds every decoder layer's whole gradient, frozen weights
    included, in the FlatParameter's one dtype (the base's); without it, that gradient's 1/N shard
    after each reduce-scatter. One unit's transient unsharded gradient (before its reduce-scatter,
    or added into the held one) is left out, as ZeRO-3's own per-layer transients are."""
    if job.method != "lora" or plan.zero != 3:
        raise ValueError("the mixed-unit FSDP1 regime is LoRA on an unquantised base under ZeRO-3 (FULL_SHARD)")
    split = plan_split(arch, plan)
    layers = 0
    for group, count in stage_layer_counts(arch, split, stage):
        layer = layer_shard(arch, plan.tp, plan.ep, group)
        layers += count * (layer.dense + layer.expert)
    units = layers + rank_trainable_params(arch, job, plan.tp, split, plan.ep, stage)
    held = units if plan.grad_accum > 1 else ceil_div(units, plan.zero_group)
    return params_bytes(held, _flat_param_bytes(job, plan))


def _flat_param_bytes(job: Job, plan: Plan) -> Fraction:
    """Bytes per parameter of an FSDP1 FlatParameter's gradient: its one dtype, the base's."""
    return Fraction(FP32_BYTES) if job.base_dtype == "fp32" else weight_bytes_per_param(plan.precision)


def mixes_flat_params(job: Job, plan: Plan) -> bool:
    """Whether the rank's gradients are mixed_unit_gradient_bytes' (the stack's FSDP1 units mix
    frozen weights with adapters: LoRA under ZeRO-3, nothing offloaded)."""
    return job.stack in MIXED_FLAT_PARAM_STACKS and job.method == "lora" and plan.zero == 3 and plan.offload == "none"
