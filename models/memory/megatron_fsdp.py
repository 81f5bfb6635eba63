"""Megatron-FSDP: what Megatron-LM's ZeRO-2 and ZeRO-3 hold beside the sharded states.

The megatron stack's ZeRO-2 and ZeRO-3 are Megatron-FSDP v1 (`--use-megatron-fsdp
--data-parallel-sharding-strategy optim_grads | optim_grads_params`, MEGATRON_FSDP_STACKS), read at
NVIDIA/Megatron-LM@d98e8a64 (MF = megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py,
PGB = .../param_and_grad_buffer.py, ADP = megatron/core/distributed/fsdp/mcore_fsdp_adapter.py):

- The states are ZeRO's (models/memory/model_states.py): the bf16 weight buffer sharded under ZeRO-3
  and whole under ZeRO-2, the fp32 main weights, the main gradients and Adam's moments sharded over
  the data-parallel x context-parallel group (PGB L2330-2345; ADP L366-368 `dp_cp`). The main
  gradients are the parameters' dtype unless `--megatron-fsdp-main-grads-dtype fp32` (PGB
  L2313-2322; `--accumulate-allreduce-grads-in-fp32` is not read by Megatron-FSDP), which the launch
  configuration writes where the job's accounting counts fp32 gradients (launch/configs.py).
- The units are the decoder layers (ADP L163-173: TransformerLayer, MoETransformerLayer); the
  embedding, the position embedding, the final norm and an untied output layer are no unit. Under
  ZeRO-3 their weights stay gathered in the compute dtype from the first forward on (PGB L4636-4642:
  `release_bucket` runs for units only; MF L1342-1347 and PGB L4359-4371 keep them `PRESERVED`).
- Without `--fsdp-double-buffer` (Megatron-LM's default, and the launch configuration's) the
  all-gather prefetches up to half and the reduce-scatter queue holds up to all of
  `suggested_communication_unit_size`, twice the mean unit under ZeRO-3, which MF L419-444 floors at
  1e9 elements (`max(1e9, ...)` under a "Cap to 1B elements" comment): at the backward's first unit the prefetch gathers the next
  units until 5e8 elements are in flight (PGB L4487-4516; a model of fewer unit parameters a rank
  gathers all of them), and each unit's unsharded gradient bucket stays allocated until the queue
  passes 1e9 elements or the backward ends (PGB L3924-3948, L4227-4256). The non-unit gradient
  bucket is allocated at the output layer's gradient and reduced only after the embedding's, at
  the end of the backward.

So the backward peaks at its start (every activation, the gathered window, the non-unit gradient
bucket) or at its end (the activations mostly freed, the queued gradient buckets): what this adds
to the activations is the larger of the two transients, an upper bound where the end's holds
(the activations still held there are not subtracted). The fp32 cast of a bf16 gradient shard
(PGB L3377-3381) lives from the end of the backward to the next zero-grad, when the activations are
gone, and is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramplan.models.architecture.params import layer_groups
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.parallel_states import embedding_shard, head_shard, layer_shard
from vramplan.models.memory.precision import gradient_bytes_per_param, weight_bytes_per_param

# MF L419-444 @ d98e8a64: suggested_communication_unit_size is twice the mean unit under ZeRO-3
# (optim_grads_params), else the bucket size (none: vramplan's launch writes no --overlap-grad-reduce)
# or 1e9, then floored at 1e9 (`max(1_000_000_000, ...)`); the all-gather prefetch window is half
# of it, the reduce-scatter queue all of it (MF L443-444).
COMMUNICATION_UNIT_ELEMENTS = 1_000_000_000


def communication_unit_elements(zero: int, unit_params: int, units: int) -> int:
    """MF's suggested_communication_unit_size for a rank of `units` units of `unit_params` in all."""
    return max(COMMUNICATION_UNIT_ELEMENTS, unit_params // units * 2 if zero == 3 else 0)


@dataclass(frozen=True)
class MegatronFsdpBuffers:
    """Bytes Megatron-FSDP holds on one rank beside the sharded states and the activations."""

    ends_bytes: int  # ZeRO-3: the non-unit weights, gathered from the first forward on
    gathered_bytes: int  # ZeRO-3: the unit weights gathered at the backward's start
    grad_bytes: int  # the unsharded gradient buckets at the larger of the backward's two peaks

    @property
    def live_params_bytes(self) -> int:
        return self.ends_bytes + self.gathered_bytes


def megatron_fsdp_buffers(arch: Architecture, job: Job, plan: Plan) -> MegatronFsdpBuffers:
    """The module docstring's transients of one rank (its TP and EP shard; the contract keeps
    Megatron-FSDP to one pipeline stage). A unit is a decoder layer, dense and expert parameters
    together (a MoE layer's two buckets, MF's unit)."""
    weight_bytes = int(weight_bytes_per_param(plan.precision))
    grad_bytes = int(gradient_bytes_per_param(plan.precision, job.accounting))
    units = [(group.count, shard.dense + shard.expert) for group in layer_groups(arch)
             for shard in [layer_shard(arch, plan.tp, plan.ep, group)]]
    unit_params = sum(count * size for count, size in units)
    largest = max(size for _, size in units)
    window = communication_unit_elements(plan.zero, unit_params, sum(count for count, _ in units))
    ends = embedding_shard(arch, plan.tp) + head_shard(arch, plan.tp, 1)
    gathered = 0
    if plan.zero == 3:  # the unit in backward and the prefetched ones, up to half the window (PGB L4487-4516)
        gathered = min(unit_params, largest + ceil_div(window // 2, largest) * largest)
    start = gathered * weight_bytes + ends * grad_bytes
    end = (ends + min(unit_params, window + 2 * largest)) * grad_bytes  # the queue holds the window
    return MegatronFsdpBuffers(ends_bytes=ends * weight_bytes if plan.zero == 3 else 0,
                               gathered_bytes=gathered * weight_bytes,
                               grad_bytes=max(start, end) - gathered * weight_bytes)
