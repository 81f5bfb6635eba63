"""The data-parallel communication buffers of ZeRO-0, -1 and -2, per stack, as each implementation
allocates them during the backward (the phase whose activations the other pillars add to).

What is model state is counted in models/memory/model_states.py (the 16-bit gradients, full under
ZeRO-0/1 and 1/N under ZeRO-2; the fp32 master and moments, 1/N from ZeRO-1); here only what the
stack allocates besides it, live while the backward runs. Buffers made after the backward (when the
activations are gone) are not counted, as models/memory/zero3_live.py leaves out the ZeRO-3 epilogue.

- torch DDP (ZeRO-0 of DDP_BUCKET_COPY_STACKS: hf's Trainer through accelerate, unsloth, torchtitan's
  `replicate`): the Reducer flattens every parameter that requires a gradient into buckets
  (bucket_cap_mb 25, the first 1 MB; torchtitan bucket_cap_mb=100) and allocates each bucket's flat
  `gradients` tensor when it is built (torch/csrc/distributed/c10d/reducer.cpp
  Reducer::initialize_buckets: "Allocate the bucket's flattened `gradients` tensor",
  `bucket.gradients = at::empty({bucketSize}, options)` in the parameters' dtype). Unless
  gradient_as_bucket_view=True the parameters' `.grad` stay tensors of their own and are copied in,
  so the buckets are a second copy of every trainable gradient, held all run (torch 2.13
  torch/nn/parallel/distributed.py L731-742: gradient_as_bucket_view "can reduce peak memory usage,
  where the saved memory size will be equal to the total gradients size", L828 default False).
  Nobody sets it: accelerate v1.14.0 utils/dataclasses.py L188 DistributedDataParallelKwargs
  `gradient_as_bucket_view: bool = False`; torchtitan v0.2.2 (73a0e69)
  torchtitan/models/llama3/infra/parallelize.py L363-373 apply_ddp `replicate(model,
  device_mesh=dp_mesh, bucket_cap_mb=100)`, which builds `DistributedDataParallel(self._param_list,
  **kwargs)` (torch 2.13 torch/distributed/_composable/replicate.py L116). Bytes: the rank's
  trainable parameters (its TP share) x the gradient's bytes.
- DeepSpeed ZeRO-1/2 (deepspeed, hf's ZeRO-1, any stack not named here; launch/deepspeed.py writes
  overlap_comm and contiguous_gradients true and no bucket sizes, so reduce_bucket_size = 5e8,
  models/memory/zero3_live.py): deepspeed/runtime/zero/stage_1_and_2.py, v0.19.5 setup_buckets
  L2467-2489 (v0.15.4: backward L2039-2052) allocates at the first gradient of each backward two
  IPG buffers of reduce_bucket_size elements in the optimizer's 16-bit dtype ("Use double buffers
  to avoid data access conflict when overlap_comm is enabled"), however few parameters train; each
  gradient is copied in and its own tensor freed (reduce_independent_p_g_buckets_and_remove_grads
  L1172-1229), and the epilogue frees both (_release_ipg_buffers L807-814). The partition's reduced
  16-bit gradients go to one flat buffer, `grads_in_partition` (copy_grads_in_partition
  L1623-1658): the ZeRO-2 gradient of the states. With overlap_comm stage 1 also reduces in the
  hooks (process_gradients L1731-1738: `if self.partition_gradients or self.overlap_comm`) and keeps
  only its partition's gradients the same way. A parameter larger than the bucket is reduced from
  its own gradient (`extra_large_param_to_reduce`, no copy). The updated partitions are all-gathered
  straight into the flat 16-bit groups (runtime/utils.py all_gather_dp_groups L1016-1019:
  all_gather_into_tensor_dp_groups, in place), so allgather_bucket_size allocates nothing; the
  `averaged_gradients` are views of `grads_in_partition` (get_flat_partition L2092,
  return_tensor_list=True; grad_accum_dtype = the model dtype, engine.py get_data_types L1444-1455).
  Bytes: 2 x 5e8 x the 16-bit (fp32 under fp32 training) bytes.
- DeepSpeed ZeRO-0 (bf16/fp16: engine.py _do_optimizer_sanity_check -> DDP_BFLOAT16 / FP16): the
  gradients are all-reduced after the backward (engine.py allreduce_gradients L2846-2868 ->
  buffered_allreduce_fallback L3738, allreduce_bucket L3613: a flat copy of up to 5e8 elements,
  MEMORY_OPT_ALLREDUCE_SIZE): nothing during the backward.
- Megatron (IN_PLACE_DP_BUFFER_STACKS): its DDP's contiguous grad buffer is the gradients (model
  state), and the bucket collectives run in place in it: the distributed optimizer's reduce-scatter
  writes the rank's shard view of bucket.grad_data, the plain DDP's all-reduce reduces
  bucket.grad_data (NVIDIA/Megatron-LM@d98e8a6 megatron/core/distributed/param_and_grad_buffer.py
  start_grad_sync L600, L718-724 `dist_reduce_scatter_func(local_data_view, bucket.grad_data, ...)`,
  L730-732 `all_reduce(bucket.grad_data, ...)`), and the parameter all-gather writes straight into
  the contiguous param buffer (start_param_sync L508-525 `dist_all_gather_func(bucket.param_data,
  local_data_view, ...)`). --ddp-bucket-size only splits those buffers into views: nothing besides.
- torch FSDP under ZeRO-2 (reshard_after_forward False: torchtitan's "never", torchtune's
  fsdp_reshard_after_forward False, hf's fsdp_config) and the stacks whose several GPUs always shard
  (ALWAYS_SHARDED_STACKS: a ZeRO-0 plan runs FSDP there): the gathered parameters are the states'
  whole 16-bit weights; besides them, while a unit runs its backward, its unsharded gradient in
  param_dtype and (FSDP2) the previous unit's reduce-scatter input in the reduce dtype
  (models/memory/fsdp.py units, the same terms as ZeRO-3's working set without the gathered
  parameters), plus the root's gradient where the root holds the lm_head. Under PP (torchtitan) the
  reduce-scatter waits for the last micro-batch: one unit's gradient
  (fsdp.working_set_bytes(stage_gathered=True)).
- hf (DP_ENGINE_BY_PLAN_STACKS) picks its engine by the plan (models/core/hf_engine.py): with TP over
  several replicas DeepSpeed at every stage (AutoTP); else ZeRO-0 is DDP (DeepSpeed's, which holds
  nothing in the backward, only with CP), ZeRO-1 DeepSpeed, ZeRO-2 FSDP2 or DeepSpeed with offload
  "optimizer" or EP. The solver's overhead term may not depend on the offload, CP or EP
  (solver/tables.py `_states_mib` key), so ZeRO-2 is bounded by the larger of FSDP's and
  DeepSpeed's buffers and ZeRO-0 by DDP's.
"""

from __future__ import annotations

from vramplan.models.architecture.lora import trainable_params
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import (
    ALWAYS_SHARDED_STACKS,
    DDP_BUCKET_COPY_STACKS,
    DP_ENGINE_BY_PLAN_STACKS,
    IN_PLACE_DP_BUFFER_STACKS,
)
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.fsdp import fsdp_version, units, working_set_bytes
from vramplan.models.memory.model_states import recipe_state_bytes
from vramplan.models.memory.precision import weight_bytes_per_param
from vramplan.models.memory.zero3_live import REDUCE_BUCKET_ELEMENTS

IPG_BUFFERS = 2  # stage_1_and_2.py setup_buckets: buf_0, and buf_1 under overlap_comm


def ddp_bucket_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    """torch DDP's bucket copy of the rank's trainable gradients (whole model / TP: a bound for a
    pipeline or expert rank, whose share the overhead's key does not carry)."""
    grad_bytes = recipe_state_bytes(job, plan.precision)[1]
    params = ceil_div(trainable_params(arch, job), plan.tp)
    return -(-params * grad_bytes.numerator // grad_bytes.denominator)


def deepspeed_ipg_bytes(plan: Plan) -> int:
    """DeepSpeed ZeRO-1/2's two IPG buffers of reduce_bucket_size elements in the 16-bit dtype."""
    return IPG_BUFFERS * REDUCE_BUCKET_ELEMENTS * int(weight_bytes_per_param(plan.precision))


def fsdp_gradient_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    """torch FSDP's unsharded gradient of the unit in backward plus (FSDP2) the previous unit's
    reduce-scatter input, and the root's gradient; one unit's gradient under PP."""
    if plan.pp > 1:
        return working_set_bytes(arch, job, plan, stage_gathered=True)
    version = fsdp_version(job)
    root, backward = units(arch, job, plan)
    held = max(unit.grad_bytes + (backward[i - 1].reduce_bytes if i > 0 and version == 2 else 0)
               for i, unit in enumerate(backward))
    return held + (root.grad_bytes if root is not None else 0)


def dp_buffer_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    """Bytes of the data-parallel buffers of ZeRO-0/1/2 live during the backward on a rank of a
    data-parallel group of more than one (the module docstring)."""
    if plan.zero_group <= 1 or plan.zero not in (0, 1, 2) or job.stack in IN_PLACE_DP_BUFFER_STACKS:
        return 0
    if job.stack in DP_ENGINE_BY_PLAN_STACKS and plan.tp > 1:  # models/core/hf_engine.py: DeepSpeed with AutoTP
        return deepspeed_ipg_bytes(plan) if plan.zero else 0
    sharded = job.stack in ALWAYS_SHARDED_STACKS or (plan.zero == 2 and fsdp_version(job) is not None)
    if plan.zero == 0 and not sharded:
        return ddp_bucket_bytes(arch, job, plan) if job.stack in DDP_BUCKET_COPY_STACKS else 0
    if not sharded:
        return deepspeed_ipg_bytes(plan)
    fsdp = fsdp_gradient_bytes(arch, job, plan)
    if plan.zero == 2 and job.stack in DP_ENGINE_BY_PLAN_STACKS:
        return max(fsdp, deepspeed_ipg_bytes(plan))
    return fsdp
