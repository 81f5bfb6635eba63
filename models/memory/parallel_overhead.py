"""Overhead terms of model parallelism: communication buffers that TP, PP and CP add to a rank.

- Pipeline p2p (Megatron-Core pipeline_parallel/p2p_communication.py): each send/recv moves one
  micro-batch's hidden states, tensor_shape = (s / cp, b, h), s / tp more with sequence
  parallelism (schedules.get_tensor_shapes), in the activation dtype. 1F1B posts a forward and a
  backward receive (2 buffers); the interleaved schedule with overlapped p2p posts them for two
  chunks at once (4).
- Tensor parallel with sequence parallelism: the all-gathered input of each column-parallel linear
  is built in Megatron-Core's global memory buffer (utils.GlobalMemoryBuffer, one s x b x h
  tensor reused by every layer; tensor_parallel/layers.py linear_with_grad_accumulation_and_async_allreduce).
  Without SP the all-reduce runs in place.
- Context parallel ring attention (Transformer Engine AttnFuncWithCPAndKVP2P): two p2p buffers of
  the local K and V chunk (s / cp tokens, the rank's KV heads), double-buffered.
- NCCL: every process group of more than one rank has its own communicator with its own buffers
  (NCCL_BUFFSIZE 4 MiB per channel and peer); we charge RuntimeReserve.nccl_mib once per group
  the rank communicates in (data-parallel x context, tensor, pipeline, expert).
"""

from __future__ import annotations

from vramplan.models.architecture.parallel import kv_heads_per_rank, sequence_parallel_active
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.pipeline_buffers import keeps_receive_buffers
from vramplan.models.memory.precision import activation_bytes


def _hidden_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    """One micro-batch's hidden states on one rank (s / cp tokens; / tp under SP)."""
    e = activation_bytes(plan.precision)
    full = e * plan.micro_batch * (job.seq_len // plan.cp) * arch.hidden_size
    return ceil_div(full, plan.tp) if sequence_parallel_active(plan) else full


def pp_p2p_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    """Megatron's p2p buffers; 0 where torch's pipelining keeps its receive buffers per micro-batch,
    counted with the rank's activations (models/memory/pipeline_buffers.py)."""
    if plan.pp == 1 or keeps_receive_buffers(job):
        return 0
    buffers = 4 if plan.vpp > 1 else 2
    return buffers * _hidden_bytes(arch, job, plan)


def tp_buffer_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    if not sequence_parallel_active(plan):
        return 0
    return _hidden_bytes(arch, job, plan) * plan.tp  # the all-gathered (full-sequence) input


def cp_buffer_bytes(arch: Architecture, job: Job, plan: Plan) -> int:
    if plan.cp == 1:
        return 0
    e = activation_bytes(plan.precision)
    kv = 2 * e * plan.micro_batch * (job.seq_len // plan.cp) * kv_heads_per_rank(arch.num_kv_heads, plan.tp) * arch.head_dim
    return 2 * kv


def num_communicators(plan: Plan) -> int:
    """Process groups of more than one rank this rank talks in (0 on a single GPU)."""
    groups = [plan.dp * plan.cp, plan.tp, plan.pp]
    if plan.ep > 1:
        groups.append(plan.ep)
    return sum(1 for size in groups if size > 1)
