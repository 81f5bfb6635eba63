"""Activations of one rank under tensor, sequence, context and pipeline parallelism.

Tensor parallelism (Korthikanti et al. arXiv:2205.05198 sec. 4.2, Table 2). A layer's saved tensors
fall in two regions:
- the sequence region, h-wide tensors around the norms and the residual: norm inputs and
  statistics, the inputs of the column-parallel linears (q/k/v, MLP up/gate), the residual dropout
  masks, the embedding dropout mask, the MoE router's tensors. TP alone replicates them on every
  rank ("10 sbh" of the GPT layer); sequence parallelism splits them along the sequence (/t).
- the tensor region, between a column- and a row-parallel linear: q, k, v, the attention core,
  the attention output, the MLP intermediates: always / t (the heads and the MLP width are split).
  K/V keep kv_heads_per_rank heads (replicated groups when t > kv heads).
So the GPT layer is sbh(10 + 24/t + 5as/(ht)) with TP and sbh(34 + 5as/h)/t with SP, the paper's
Table 2. The output layer is vocab-parallel: the fp32 log-probabilities and logits / t; token ids,
targets and RoPE tables are replicated. Terms this module does not know stay replicated (never
under-counted). MoE: with expert-TP = t the tokens' h-wide copies (permuted input, expert output)
are replicated across the TP group, the f-wide ones / t; EP keeps T*K routed tokens per rank on
average (the all-to-all exchanges tokens, it does not reduce them).

Context parallelism (Megatron-Core / Transformer Engine ring attention) gives each rank s / cp of
every sequence: the activations are those of a micro-batch of s / cp tokens (FlashAttention only,
so no s x s term; K/V of other chunks are received for the computation and not saved).

Pipeline (Narayanan et al. 2021; Megatron-Core pipeline_parallel/schedules.py): under 1F1B rank r
runs pp - r - 1 warm-up forwards and one more before its first backward, so it holds
min(pp - r, m) micro-batches of its layers (m = grad_accum); interleaved (vpp chunks of
layers/vpp each) it runs 2(pp - r - 1) + (vpp - 1) pp warm-up chunk forwards, so rank 0 holds
pp*vpp + pp - 1 chunks = its layers x (1 + (pp - 1)/(pp vpp)) micro-batches, Korthikanti's factor.
"""

from __future__ import annotations

from dataclasses import replace

from vramplan.models.architecture.parallel import kv_heads_per_rank, microbatches_per_round
from vramplan.models.core.catalogue_schema import Architecture
from vramplan.models.core.units import ceil_div
from vramplan.models.memory.saved_tensors import Term

_TENSOR_REGION = frozenset({
    "attn.q", "attn.kv_repeated", "attn.k_repeated", "attn.v_repeated", "attn.qkv_copies", "attn.c_attn_output",
    "attn.qkv_output", "attn.output", "attn.output_copy", "attn.kv_b_output", "attn.logsumexp",
    "attn.softmax", "attn.softmax_cast", "attn.softcap_tanh", "attn.dropout_mask", "attn.dropout_output",
    "attn.clip_qkv_inputs", "attn.output_gate",
    "moe.fc1_output", "moe.fc2_input", "moe.gate_up_act_product",
    "loss.log_probs_fp32", "loss.softcap_tanh", "output.logits", "loss.logits",
})
_SEQUENCE_REGION = frozenset({
    "attn_residual.dropout_mask", "mlp_residual.dropout_mask", "embedding.dropout_mask",
    "moe.router_softmax_fp32", "moe.router_input_fp32", "moe.routing", "lm_head.input",
})
_KV_REGION = frozenset({"attn.kv", "attn.k", "attn.v"})  # K/V of the KV heads (GQA: kv_heads_per_rank)
_GATHERED_INPUTS = frozenset({"lm_head.input"})  # and every "*.linear_input"


def _region(term: Term) -> str:
    """'tensor' (/ t), 'kv' (/ t by KV heads), 'sequence' (/ t under SP) or 'replicated'."""
    module = term.name.split(".")[0]
    if term.name in _KV_REGION:
        return "kv"
    if term.name.endswith(".linear_input") or term.name in _SEQUENCE_REGION or module.endswith("norm"):
        return "sequence"
    if term.name in _TENSOR_REGION or module == "mlp":
        return "tensor"
    return "replicated"


def shard_term(term: Term, arch: Architecture, tp: int, sequence_parallel: bool, gathered_inputs: bool = False) -> Term:
    """One saved tensor as held by one TP rank; gathered_inputs: the stack's SP saves the all-gathered
    input of its column-parallel linears (GATHERED_SP_INPUT_STACKS)."""
    if tp == 1:
        return term
    if gathered_inputs and (term.name.endswith(".linear_input") or term.name in _GATHERED_INPUTS):
        return term
    region = _region(term)
    if region == "tensor":
        size = ceil_div(term.num_bytes, tp)
    elif region == "kv":
        size = term.num_bytes * kv_heads_per_rank(arch.num_kv_heads, tp) // arch.num_kv_heads
    elif region == "sequence" and sequence_parallel:
        size = ceil_div(term.num_bytes, tp)
    else:
        return term  # held whole, not copied (docs/performance.md#layout-plans)
    return replace(term, num_bytes=size)


def shard_terms(terms: list[Term], arch: Architecture, tp: int, sequence_parallel: bool,
                gathered_inputs: bool = False) -> list[Term]:
    return [shard_term(term, arch, tp, sequence_parallel, gathered_inputs) for term in terms]


def inflight_chunks(pp: int, grad_accum: int, vpp: int, stage: int, torch_rounds: bool = False) -> int:
    """Model chunks (layers/vpp of the rank's layers each) whose activations rank `stage` holds at
    its peak (the first backward). vpp = 1: micro-batches. Interleaved, the warm-up runs vpp - 1
    rounds of forwards before the rank's first backward: Megatron's rounds are pp micro-batches
    (schedules.py get_pp_rank_microbatches, microbatch_group_size_per_vp_stage = pp); torch's
    (`torch_rounds`: TORCH_PIPELINING_STACKS) are microbatches_per_round, which is pp where m is a
    multiple of pp and m alone where m < pp (ScheduleInterleaved1F1B._get_warmup_ops:
    (n_local_stages - 1) x microbatches_per_round + 2 (pp - 1 - rank); checked against its order in
    tests/models/memory/test_pipeline_buffers.py)."""
    if vpp == 1:
        return min(pp - stage, grad_accum)
    per_round = microbatches_per_round(pp, grad_accum) if torch_rounds else pp
    return min(2 * (pp - stage - 1) + (vpp - 1) * per_round + 1, grad_accum * vpp)


def first_stage_inflight(pp: int, vpp: int, micro_batches: int, torch_rounds: bool = False) -> int:
    """Micro-batches in flight on the pipeline's first stage at the first rank's peak: the
    embedding outputs it keeps, and (torch) its in-flight inputs that are no receive buffers.
    One stage per rank: 1F1B's min(pp, m), every chunk in flight. Interleaved: min(m, 2 r) for r
    micro-batches a round. The rank's first round fills the stage, and the forwards of its next
    round refill it as 1F1B runs, before that stage's first backward; the rank's in-flight total
    stays at its peak meanwhile. torch (`torch_rounds`, as inflight_chunks): r = microbatches_per_round,
    counted from ScheduleInterleaved1F1B's order (models/memory/pipeline_buffers.py). Megatron: r = pp, its
    groups (get_model_chunk_id: forward k on chunk (k mod pp vpp) // pp, backward j on vpp - 1 -
    that), m a multiple of pp (PP_GROUPED_INTERLEAVING_STACKS), where the same formula gives 2 pp
    (tests/models/memory/test_pipeline_buffers.py replays both orders). It was ceil(w / vpp)
    before, 10 where Megatron holds 16 at pp 8, vpp 4."""
    if vpp == 1:
        return min(pp, micro_batches)
    per_round = microbatches_per_round(pp, micro_batches) if torch_rounds else pp
    return min(micro_batches, 2 * per_round)
