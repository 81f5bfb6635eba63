"""The overhead pillar: what a training process holds besides model states and activations.

Fixed runtime reserve (configurable, `RuntimeReserve` in models/core/setup.py):
- CUDA context: about 300-400 MB with lazy module loading since CUDA 11.7 (PyTorch maintainers,
  pytorch/pytorch#107667 and #109888); default 600 MiB also covers cuDNN/cuBLAS handles and
  the caching allocator's first blocks.
- cuBLAS + cuBLASLt workspaces: PyTorch reserves 32 MiB per handle on Hopper
  (`CUBLAS_WORKSPACE_CONFIG` default `:4096:8`, aten/src/ATen/cuda/CublasHandlePool.cpp) plus
  the cuBLASLt workspace; default 64 MiB.
- NCCL: NCCL_BUFFSIZE is 4 MiB per channel and peer and protocol; a data-parallel job on 8 GPUs
  typically shows a few hundred MiB after init_process_group; default 512 MiB when num_gpus > 1.

Communication buffers:
- ZeRO-0/1/2: what each stack's data-parallel engine allocates besides the model states while the
  backward runs (models/memory/dp_buffers.py): torch DDP's bucket copy of the trainable gradients,
  DeepSpeed ZeRO-1/2's two IPG buffers of reduce_bucket_size (5e8, DeepSpeed's default: no config
  sets it) 16-bit elements, nothing for DeepSpeed's ZeRO-0 (it all-reduces after the backward) or
  Megatron (in place in its grad buffer), FSDP's unit gradient and reduce-scatter input under ZeRO-2.
- ZeRO-3 under DeepSpeed (and any stack whose ZeRO-3 is not torch FSDP): what DeepSpeed's parameter
  coordinator holds gathered at its peak over one step, replayed module by module with DeepSpeed's
  defaults (models/memory/zero3_live.py: each module fetches its own parameters, releases them
  unless reused within stage3_max_reuse_distance, and prefetches while fewer than
  stage3_max_live_parameters are gathered), the persistent parameters (norms, small LoRA matrices),
  a full fine-tune's gradient of the largest module, and the IPG reduce bucket of reduce_bucket_size
  elements, allocated whatever trains, with its reduce-scatter copy when it flushes mid-backward.
- The EP token dispatcher's own buffers: Megatron's flex dispatcher on DeepEP or HybridEP
  (models/memory/dispatcher_buffers.py), outside torch's allocator like the CUDA context.
- ZeRO-3 under torch FSDP (FSDP2_STACKS, FSDP1_STACKS): whole units, the root where it holds the
  embedding and lm_head, and no reduce bucket besides the units' reduce-scatter inputs
  (models/memory/fsdp.py working_set_bytes).
- ZeRO-2/3 under Megatron-FSDP (MEGATRON_FSDP_STACKS): the gathered ends and prefetch window, and
  the unsharded gradient buckets its reduce-scatter queue holds (models/memory/megatron_fsdp.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from vramplan.models.architecture.lora import trainable_params
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.memory_behaviours import runs_megatron_fsdp
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import BYTES_PER_MIB
from vramplan.models.memory.dispatcher_buffers import dispatcher_buffer_bytes
from vramplan.models.memory.dp_buffers import dp_buffer_bytes
from vramplan.models.memory.fsdp import fsdp_version, working_set_bytes
from vramplan.models.memory.megatron_fsdp import megatron_fsdp_buffers
from vramplan.models.memory.model_states import keeps_stage_gathered
from vramplan.models.memory.parallel_overhead import cp_buffer_bytes, num_communicators, pp_p2p_bytes, tp_buffer_bytes
from vramplan.models.memory.precision import weight_bytes_per_param
from vramplan.models.memory.zero3_live import zero3_live


@dataclass(frozen=True)
class Overhead:
    cuda_context_bytes: int
    cublas_workspace_bytes: int
    nccl_bytes: int
    comm_buckets_bytes: int
    zero3_live_params_bytes: int
    tp_buffers_bytes: int = 0  # models/memory/parallel_overhead.py
    pp_p2p_bytes: int = 0
    cp_buffers_bytes: int = 0
    dispatcher_buffers_bytes: int = 0  # models/memory/dispatcher_buffers.py: outside torch's allocator
    model_buffers_bytes: int = 0  # GPT-Neo's per-layer causal-mask buffers (Architecture.mask_buffers)

    @property
    def total_bytes(self) -> int:
        return (
            self.cuda_context_bytes
            + self.cublas_workspace_bytes
            + self.nccl_bytes
            + self.comm_buckets_bytes
            + self.zero3_live_params_bytes
            + self.tp_buffers_bytes
            + self.pp_p2p_bytes
            + self.cp_buffers_bytes
            + self.dispatcher_buffers_bytes
            + self.model_buffers_bytes
        )


def overhead(arch: Architecture, job: Job, plan: Plan) -> Overhead:
    reserve = job.reserve
    multi_gpu = plan.zero_group > 1  # data-parallel buckets exist only with more than one DP x CP rank
    # ZeRO-3's parameters come to the GPU module by module from the other ranks' shards, or from host
    # RAM with one rank: parameters offloaded must be copied to the GPU to compute, whatever the count
    fetched = multi_gpu or plan.offload == "optimizer+params"
    trainable = trainable_params(arch, job)
    weight_bytes = weight_bytes_per_param(plan.precision)

    buckets = Fraction(0)
    live = Fraction(0)
    if multi_gpu and runs_megatron_fsdp(job.stack, plan.zero):  # Megatron-FSDP's windows (models/memory/megatron_fsdp.py)
        fsdp = megatron_fsdp_buffers(arch, job, plan)
        live = Fraction(fsdp.live_params_bytes)
        buckets = Fraction(fsdp.grad_bytes)
    elif multi_gpu and plan.zero in (0, 1, 2):  # each stack's DDP / DeepSpeed / FSDP buffers
        buckets = Fraction(dp_buffer_bytes(arch, job, plan))
    elif plan.zero == 3 and fetched and fsdp_version(job) is not None:
        # torch FSDP: whole units gathered, no reduce bucket beyond the units' reduce-scatter inputs
        live = Fraction(working_set_bytes(arch, job, plan, stage_gathered=keeps_stage_gathered(job, plan)))
    elif plan.zero == 3 and not runs_megatron_fsdp(job.stack, plan.zero):
        # DeepSpeed's coordinator and IPG bucket (models/memory/zero3_live.py). With one rank the
        # bucket is still allocated (runtime/zero/stage3.py: `torch.empty(self.reduce_bucket_size, ...)`
        # under contiguous_gradients, whatever the world size: deepspeedai/DeepSpeed edaa7221 L731-735),
        # and a module's parameters are still fetched, as copies only where they live in host RAM
        # (partition_parameters.py _no_gather_coalesced -> NoGatherHandle: `param.data =
        # param.ds_tensor.data.to(device)`, the tensor itself when it is on the GPU already).
        held = zero3_live(arch, job, plan, int(weight_bytes), trainable)
        live = Fraction(held.live_params_bytes) if fetched else Fraction(0)
        buckets = Fraction(held.ipg_bucket_bytes)
    return Overhead(
        cuda_context_bytes=reserve.cuda_context_mib * BYTES_PER_MIB,
        cublas_workspace_bytes=reserve.cublas_workspace_mib * BYTES_PER_MIB,
        nccl_bytes=reserve.nccl_mib * BYTES_PER_MIB * num_communicators(plan),
        comm_buckets_bytes=math.ceil(buckets),
        zero3_live_params_bytes=math.ceil(live),
        tp_buffers_bytes=tp_buffer_bytes(arch, job, plan),
        pp_p2p_bytes=pp_p2p_bytes(arch, job, plan),
        cp_buffers_bytes=cp_buffer_bytes(arch, job, plan),
        dispatcher_buffers_bytes=dispatcher_buffer_bytes(arch, job, plan),
        model_buffers_bytes=model_buffer_bytes(arch),
    )


def model_buffer_bytes(arch: Architecture) -> int:
    """GPT-Neo's causal-mask buffers: each layer's GPTNeoSelfAttention registers torch.tril(torch.ones((max_positions,
    max_positions), dtype=bool)) (a local layer its banded copy), non-persistent and not a parameter, so no ZeRO stage
    or FSDP shards it; a pipeline rank holds its own layers' (counted as all of them: an upper bound)."""
    return arch.num_layers * arch.max_position_embeddings ** 2 if arch.mask_buffers else 0
