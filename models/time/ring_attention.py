"""What torch's ring attention (torch.distributed.tensor.experimental context_parallel, the context
parallelism of TORCH_RING_CP_STACKS: torchtitan) moves per step and what of it the compute hides.

Read in torch 2.13's torch/distributed/tensor/experimental/_context_parallel/_attention.py and a
stored 2025 copy of torch/distributed/tensor/experimental/_attention.py (the same loops and options),
as the proxy of torch 1963fc8 (2024-12-23), which torchtitan 9dec370's benchmarks ran:

- What travels: the K and V that F.scaled_dot_product_attention receives. torchtitan's Attention
  repeats the KV heads before it (pytorch/torchtitan@9dec370 torchtitan/models/llama/model.py
  Attention.forward: `keys = repeat_kv(xk, self.n_rep)`), so each rank's K/V shard has
  num_attention_heads / tp heads, not the KV heads, of s / cp tokens, in the activations' 16 bits
  (Float8 converts only the linears).
- Forward (_templated_ring_attention): the rotater is torchtitan's default 'allgather'
  (config_manager.py @9dec370 --experimental.context_parallel_rotate_method, set_rotate_method):
  one all-gather of the cp shards per call (_AllGatherRotater.exchange_buffers, issued before the
  first block), each rank receiving (cp - 1) shards. The causal load balancer (enable_load_balance,
  round-robin: rank r holds chunks r and 2cp-1-r) makes every block the same size: the local causal
  block first, then for each other rank either every query against the first half of its K/V or
  the second half of the queries against all of it; no block is skipped. The partial outputs are
  merged through their logsumexp in fp32 (_SDPAMerger, convert_to_f32=True): element-wise, fused by
  the compiled block, not counted.
- Backward (_templated_ring_attention_backward): the same K/V all-gather, then cp rotations of
  dK/dV, accumulated in fp32 (accum_dtype), to the next rank by all_to_all (dkv_rotater =
  _RotateMethod.ALL_TO_ALL, permute_tensor): 2 x 4 bytes per element of a K/V shard each, the last
  waited on after the loop.
- Full activation recompute (ptd_checkpoint_wrapper) re-runs the ring forward in the backward.

When the collectives wait. Eager, a functional collective is waited on at its first use
(torch/distributed/_functional_collectives.py _maybe_wrap_tensor: AsyncCollectiveTensor): the
all-gather at the second block, so it hides only behind the first (1/cp of a pass's attention);
each dK/dV rotation behind the next block, the last one not at all. Traced, `_maybe_wrap_tensor`
calls wait_tensor right after the collective, and torchtitan compiles each block with the ring
inside (parallelize_llama.py apply_compile: torch.compile(transformer_block, fullgraph=True), the
CP dispatch traced into it), whose order Inductor keeps (torch/_inductor/config.py
reorder_for_compute_comm_overlap = False; as SERIAL_TP_BACKWARD_STACKS): every collective is
exposed (its peak-memory reordering, reorder_for_peak_memory, may place an independent block between
a collective and its wait: not modelled). Compiled, the backward's all-gather is the recomputed
forward's: AOTAutograd's CSE (torch 2.13 torch/_functorch/partitioners.py
min_cut_rematerialization_partition, `config.cse`: compile_utils.fx_graph_cse) merges the two
identical all_gather_into_tensor calls of the joint graph, so the backward gathers once.

Per layer and micro-batch, kv = one rank's K/V shard bytes, f = the share of layers whose ring
forward re-runs in the backward:
- compiled: (1 + f) (cp - 1) kv gathered + cp x 2 kv of fp32 dK/dV, none hidden;
- eager: (2 + f) (cp - 1) kv gathered + the last 2 kv rotation, behind the first blocks of the
  (2 + f) passes (1/cp of the attention compute); the other cp - 1 rotations run behind a block
  each (2 kv against a backward block of twice a forward block: hidden while the all-gather's
  per-shard time is under the block's). The single window lets a pass's spare first block hide
  another pass's all-gather, which the ring does not: a lower bound there.
What exceeds the hiding compute lengthens each micro-batch, and the pipeline bubble with it
(models/time/pipeline_schedule.py stage_time_s).
"""

from __future__ import annotations

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import TORCH_RING_CP_STACKS
from vramplan.models.memory.precision import FP32_BYTES, activation_bytes
from vramplan.models.memory.recompute import effective_mode, recomputed_fraction


def torch_ring(job: Job) -> bool:
    """Whether the job's context parallelism is torch's ring attention (TORCH_RING_CP_STACKS)."""
    return job.stack in TORCH_RING_CP_STACKS


def compiled_ring(job: Job) -> bool:
    """Whether the ring runs inside torch.compile'd blocks (its collectives waited on at once)."""
    return job.compile != "none"


def ring_kv_bytes(arch: Architecture, job: Job, plan: Plan) -> float:
    """One rank's K/V shard of one layer and micro-batch as the ring moves it: the query heads'
    count (repeat_kv before SDPA) over TP, s / cp tokens, 16-bit."""
    heads = arch.num_attention_heads // plan.tp
    return 2 * activation_bytes(plan.precision) * plan.micro_batch * (job.seq_len // plan.cp) * heads * arch.head_dim


def ring_reruns(arch: Architecture, job: Job, plan: Plan) -> float:
    """Share of the layers whose ring forward the backward re-runs: full recompute's layers, every
    layer under attention recompute, none under op SAC (it saves the SDPA outputs) or none."""
    mode = effective_mode(job, plan)
    if mode == "full":
        return recomputed_fraction(arch, job, plan)
    return 1.0 if mode == "selective" else 0.0


def ring_bytes_per_layer(arch: Architecture, job: Job, plan: Plan) -> float:
    """Bytes one rank receives per layer and micro-batch that only the window (ring_window_flops)
    hides: the compiled ring's all-gathers and every dK/dV rotation; eager, the all-gathers and the
    last rotation (the others hide behind the following block)."""
    kv = ring_kv_bytes(arch, job, plan)
    dkv = kv * FP32_BYTES / activation_bytes(plan.precision)  # dK/dV accumulated and rotated in fp32
    reruns = ring_reruns(arch, job, plan)
    if compiled_ring(job):
        return (1 + reruns) * (plan.cp - 1) * kv + plan.cp * dkv
    return (2 + reruns) * (plan.cp - 1) * kv + dkv


def ring_window_flops(attention_flops: int, job: Job, plan: Plan) -> int:
    """The forward attention FLOPs per token whose compute the ring hides behind (in
    parallel_time._cp_seconds' units: their share of the step's compute): none compiled, each
    pass's first block (1/cp of it) eager."""
    return 0 if compiled_ring(job) else attention_flops // plan.cp
