"""The MoE token dispatcher's permutation passes: the kernels that reorder a MoE layer's routed token
copies around the expert GEMMs, each streaming whole hidden rows through HBM (memory-bound, beside
the GEMMs the compute time counts). Modelled for the stacks whose code runs them as passes of their
own (models/core/stack_behaviour.py TOKEN_PERMUTATION_STACKS: Megatron-Core) and the dispatchers
that do (PERMUTING_DISPATCHERS).

Read in Megatron-LM 92c8482e (the Megatron-Bridge 25.11 submodule, 3rdparty/Megatron-LM @ 5776a6d9)
with `moe_permute_fusion` on (the Bridge model providers' setting, e.g. qwen_provider.py L396,
deepseek_v3.py L266; Megatron-LM's own default is off: the unfused path, index_select / scatter_add
/ torch.cat, is not modelled) and Transformer Engine release_v2.9 @ 70f53666 (the Bridge 25.11
uv.lock pin), bf16 hidden rows throughout (the router's input: nothing is cast to fp8 before the
grouped GEMMs, which quantize their own inputs: models/time/fp8.py). A row is hidden x
activation_bytes; per MoE layer and micro-batch, T is the rank's tokens as the all-to-all's
(models/time/ep_time.py: s / cp, / tp under sequence parallelism), k the top-k:

- permute / unpermute (moe_utils.py L225 / L312 -> TE permutation.py _moe_permute_mask_map /
  _moe_unpermute_mask_map, Triton kernels triton/permutation.py _permute_kernel L291: each source
  row loaded once, stored once per routed copy; _unpermute_kernel L467: each copy loaded, one row
  stored). The alltoall dispatcher permutes the rank's T tokens into T k copies before the
  all-to-all (token_dispatcher.py L638) and unpermutes the combined copies after it (L834): forward
  T + T k rows each; the backward of each is the other kernel (permutation.py L319, L451), the same
  rows. DeepEP (flex dispatcher, _DeepepManager L1309 / L1321) runs the same kernels on the expert
  side, from the R rows its dispatch delivers (one per token and rank: moe_dispatch.py) to the
  rank's copies. 4 (copies + distinct rows) rows a micro-batch, forward and backward.
- chunk sort (alltoall only, when a rank holds several experts: L708 / L754): the received copies
  (T k tp, after the TP all-gather) are sorted by local expert and unsorted after the GEMMs
  (moe_sort_chunks_by_index, _sort_chunks_by_map_kernel L885: one load and one store a row,
  the backward the same): 8 rows per copy.
- fp8 padding (TEGroupedMLP, experts.py L819 / L862 / L978: TE Fp8Padding / Fp8Unpadding, the
  per-expert splits rounded up to 16 rows, 32 under MXFP8, by tex.fused_multi_row_padding, a copy
  of every row, and unpadding; each one's backward the other): 8 rows per copy. Skipped only when
  every split is already aligned (fp8_padding.py L121); under balanced routing (forced-balance
  random logits, router.py L566) that almost never happens, so it is charged. Megatron's
  moe_router_padding_for_quantization (off by default) would pad the routing map instead: not
  modelled. The pad rows themselves (< 16 or 32 a local expert) are left out.

A recomputed MoE layer (full recompute; Megatron's selective default, core_attn, leaves the MoE
layer alone) runs its forward passes again. Left out: the routing probabilities permuted beside
the rows (4 bytes a copy), the row-id maps (make_row_id_map: about 17 bytes per token and expert,
under 1% of the hidden rows' bytes). Per routed copy with k = 8, fp8 and several local experts:
2 x (2 (1 + 1/k) + 4 + 4) = 20.5 rows.

HybridEP (hybridep) is left at 0: its dispatch writes the rank's tokens into a buffer and, in the
release the Megatron-Bridge 25.11 container built (deepseek-ai/DeepEP hybrid-ep 1dddd19, 2025-11-18:
csrc/hybrid_ep/executor/executor.cu dispatch_postprocess permute_launcher, combine_preprocess
unpermute_launcher), permutes them to expert order, padded, in a kernel of its own (4 (copies +
rows) rows, no chunk sort or Fp8Padding); from DeepEP a0d27f1 (2026-03-31) that permute runs inside
the dispatch kernel when Megatron's moe_permute_fusion_into_hybridep asks for it (off by default;
Megatron-Bridge 3a9559f0 perf_recipes/qwen/h100/qwen3_moe.py L40 sets it). The `hybridep` choice
does not tell the two apart. Other stacks (0): torchtitan's reordering (models/moe/moe.py
TokenReorderer, the gather x[indices] and its index_put, expert_parallel.py's all-to-all and
generate_permute_indices) are aten / Triton ops that torch.compile may fuse with their neighbours,
Hugging Face's eager routing sits in its calibrated efficiency (compile_speed.py).

Time: the bytes stream at FP8_CAST_HBM_EFFICIENCY of the GPU's HBM bandwidth, the rate the fp8
casts' streaming kernels run at (models/time/rates.py hbm_stream_seconds, shared with fp8.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.choices import MoeDispatcher
from vramplan.models.core.setup import Job, Plan
from vramplan.models.core.stack_behaviour import TOKEN_PERMUTATION_STACKS
from vramplan.models.memory.precision import activation_bytes
from vramplan.models.memory.recompute import effective_mode, recomputed_fraction
from vramplan.models.time.moe_dispatch import miss_probability, routed_tokens
from vramplan.models.time.moe_gemm import moe_layers

# Dispatchers whose permutations are passes of their own (module docstring; hybridep: left at 0).
PERMUTING_DISPATCHERS: frozenset[MoeDispatcher] = frozenset({"alltoall", "deepep"})
# Rows read or written per row a kernel moves: one load and one store (sort, pad, their backward).
_COPY_ROWS = 2


def permute_rows_per_direction(arch: Architecture, job: Job, plan: Plan) -> float:
    """Hidden rows the dispatcher's passes read or write in one direction (the forward; the backward
    moves the same) of one MoE layer and micro-batch on the rank (module docstring); 0 where no
    separate pass runs."""
    if not arch.is_moe or job.stack not in TOKEN_PERMUTATION_STACKS or job.moe_dispatcher not in PERMUTING_DISPATCHERS:
        return 0.0
    k, tp, ep = arch.experts_per_token, plan.tp, plan.ep
    tokens = routed_tokens(job, plan)
    copies = tokens * k * tp  # the local experts' rows, after the TP all-gather (balanced routing)
    if job.moe_dispatcher == "deepep":
        # one row per token and rank it reaches, each to every TP rank of the EP rank (moe_dispatch.py)
        delivered = tokens * tp * ep * (1 - miss_probability(arch.num_experts, arch.num_experts // ep, k))
        rows = 2 * (copies + delivered)  # permute + unpermute on the expert side
    else:
        rows = 2 * (tokens * k + tokens)  # permute before the all-to-all + unpermute after the combine
        if arch.num_experts // ep > 1:  # sort by local expert + unsort
            rows += 2 * _COPY_ROWS * copies
    if plan.precision == "fp8":  # TEGroupedMLP's Fp8Padding + Fp8Unpadding
        rows += 2 * _COPY_ROWS * copies
    return rows


def permute_bytes(arch: Architecture, job: Job, plan: Plan) -> float:
    """HBM bytes one GPU's dispatcher passes move per optimizer step: its stage's MoE layers, every
    micro-batch, forward, backward and a recomputed forward's share (full recompute)."""
    return permute_bytes_over_recomputes(arch, job, (plan,))[0]


def permute_bytes_over_recomputes(arch: Architecture, job: Job, plans: Sequence[Plan],
                                  fractions: Sequence[float] | None = None) -> list[float]:
    """permute_bytes of plans that differ in their recompute alone: the rows once, the recomputed
    forward's share per plan (`fractions`: their recomputed_fraction, when the caller has them)."""
    first = plans[0]
    rows = permute_rows_per_direction(arch, job, first)
    if rows == 0:
        return [0.0] * len(plans)
    row_bytes = activation_bytes(first.precision) * arch.hidden_size
    layers = moe_layers(arch)
    known: Sequence[float | None] = [None] * len(plans) if fractions is None else fractions
    return [(2 + _reruns(arch, job, plan, fraction)) * rows * row_bytes * layers / plan.pp * plan.grad_accum
            for plan, fraction in zip(plans, known)]


def _reruns(arch: Architecture, job: Job, plan: Plan, fraction: float | None) -> float:
    """The share of the forward a recompute re-runs: full recompute's recomputed_fraction (`fraction`,
    when the caller has it); 0 for any other."""
    if effective_mode(job, plan) != "full":
        return 0.0
    return recomputed_fraction(arch, job, plan) if fraction is None else fraction
