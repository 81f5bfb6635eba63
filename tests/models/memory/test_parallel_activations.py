"""Activations under TP / SP / CP / PP against Korthikanti et al. (arXiv:2205.05198) Table 2.

GPT-3 175B layer (s = 2048, h = 12288, a = 96, t = 8, b = 1), 16-bit activations, bytes per
layer: TP sbh(10 + 24/t + 5as/(ht)) = 552 MiB, TP+SP sbh(34 + 5as/h)/t = 342 MiB, TP+selective
sbh(10 + 24/t) = 312 MiB, TP+SP+selective 34sbh/t = 102 MiB, full recompute 2sbh = 48 MiB (the
project's reference notes, sec. 2, computed from Table 2). The fused-kernel term model adds the
fp32 LayerNorm mean and rstd (2 norms x 8 bytes per token), which the paper neglects: replicated
under TP alone, split with SP.
"""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.core.setup import Job, Plan
from vramplan.models.memory.activations import activations
from vramplan.models.memory.parallel_activations import inflight_chunks, shard_term
from vramplan.models.memory.saved_tensors import Term

GPT3 = packaged_catalogue().architecture("gpt3-175b")
S, H, A, TP = 2048, 12288, 96, 8
SBH = S * H
MIB = 2**20
JOB = Job(seq_len=S, kernels="fused", attention="eager")
NORM_STATS = 2 * 2 * 4 * S


def per_layer(**plan: object) -> int:
    fields = dict(gpu="a100-sxm-80gb", num_gpus=TP, tp=TP)
    return activations(GPT3, JOB, Plan(**(fields | plan))).per_layer_bytes


@pytest.mark.parametrize(("plan", "korthikanti_bytes", "stats", "mib"), [
    ({}, SBH * 10 + SBH * 24 // TP + 5 * A * S * S // TP, NORM_STATS, 552),
    ({"sequence_parallel": True}, (SBH * 34 + 5 * A * S * S) // TP, NORM_STATS // TP, 342),
    ({"recompute": "selective"}, SBH * 10 + SBH * 24 // TP, NORM_STATS, 312),
    ({"recompute": "selective", "sequence_parallel": True}, SBH * 34 // TP, NORM_STATS // TP, 102),
    ({"recompute": "full"}, 2 * SBH, 0, 48),
    ({"recompute": "full", "sequence_parallel": True}, 2 * SBH // TP, 0, 6),
])
def test_korthikanti_table_2_under_tensor_parallelism(plan: dict, korthikanti_bytes: int, stats: int, mib: int) -> None:
    got = per_layer(**plan)
    assert got == korthikanti_bytes + stats
    assert round(korthikanti_bytes / MIB) == mib


def test_sequence_parallel_is_off_without_tensor_parallelism() -> None:
    # Megatron arguments.py disables --sequence-parallel when tp == 1.
    one = dict(gpu="a100-sxm-80gb", num_gpus=1)
    assert activations(GPT3, JOB, Plan(**one)) == activations(GPT3, JOB, Plan(**one, sequence_parallel=True))


def test_kv_heads_replicate_when_tp_exceeds_them(catalogue) -> None:
    llama = catalogue.architecture("llama-3.1-70b")  # 8 KV heads
    kv = Term("attn.kv", 2 * 2 * S * 8 * 128)
    assert shard_term(kv, llama, 4, False).num_bytes == kv.num_bytes // 4
    assert shard_term(kv, llama, 8, False).num_bytes == kv.num_bytes // 8
    assert shard_term(kv, llama, 16, False).num_bytes == kv.num_bytes // 8  # one replicated group per rank


def test_unknown_terms_stay_replicated() -> None:
    term = Term("something.new", 12345)
    assert shard_term(term, GPT3, 8, True).num_bytes == 12345


def test_context_parallel_divides_the_sequence(catalogue) -> None:
    llama = catalogue.architecture("llama-3.1-8b")
    job = Job(seq_len=8192, kernels="fused")
    one = activations(llama, job.model_copy(update={"seq_len": 2048}), Plan(gpu="h100-sxm-80gb", num_gpus=4))
    cp4 = activations(llama, job, Plan(gpu="h100-sxm-80gb", num_gpus=4, cp=4))
    assert cp4.per_layer_bytes == one.per_layer_bytes
    assert cp4.output_layer_bytes == one.output_layer_bytes


@pytest.mark.parametrize(("pp", "accum", "vpp", "stage", "chunks"), [
    (1, 16, 1, 0, 1),  # no pipeline: one micro-batch at a time
    (8, 64, 1, 0, 8),  # 1F1B: rank 0 warms up pp - 1 forwards, holds pp
    (8, 64, 1, 7, 1),  # the last rank runs backward right after each forward
    (8, 4, 1, 0, 4),  # fewer micro-batches than stages
    (8, 64, 3, 0, 31),  # interleaved: 2(p-1) + (v-1)p + 1 chunks
    (8, 64, 3, 7, 17),
    (4, 2, 2, 0, 4),  # capped by the m * vpp chunks that exist
])
def test_inflight_chunks_follow_megatron_schedules(pp: int, accum: int, vpp: int, stage: int, chunks: int) -> None:
    assert inflight_chunks(pp, accum, vpp, stage) == chunks


def test_last_stage_holds_the_logits_first_stage_the_embedding(catalogue) -> None:
    llama = catalogue.architecture("llama-3.1-8b")
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=8, pp=4, grad_accum=8)
    first, last = activations(llama, JOB, plan, 0), activations(llama, JOB, plan, 3)
    assert first.output_layer_bytes == 0 and first.embedding_bytes > 0
    assert last.output_layer_bytes > 0 and last.embedding_bytes == 0
    assert first.layers_bytes == 4 * last.layers_bytes  # 4 micro-batches vs 1 of 8 layers each


def test_vocab_parallel_logits_split_by_tp(catalogue) -> None:
    llama = catalogue.architecture("llama-3.1-8b")
    one = activations(llama, JOB, Plan(gpu="h100-sxm-80gb", num_gpus=8)).output_layer_bytes
    tp8 = activations(llama, JOB, Plan(gpu="h100-sxm-80gb", num_gpus=8, tp=8, sequence_parallel=True)).output_layer_bytes
    log_probs = 4 * S * llama.vocab_size
    assert one - tp8 >= log_probs * 7 // 8


def test_a_rank_keeps_its_own_layers_activations_kind_by_kind(catalogue) -> None:
    """Llama 4 Maverick alternates dense and MoE layers (HF runs every expert on every token, so a
    MoE layer keeps about twice the model's average layer). At pp 16 (3 layers a rank) ranks of the
    same size hold different kinds: per micro-batch in flight each keeps the sum of its own layers,
    not 3/48 of the whole model (which left rank 1 20% of its memory short)."""
    from vramplan.models.architecture.parallel import stage_layer_kinds
    from vramplan.models.memory.activations import microbatch_activations

    arch, job = catalogue.architecture("llama-4-maverick"), Job(seq_len=4096)
    plan = Plan(gpu="h100-sxm-80gb", num_gpus=16, pp=16, grad_accum=32)
    micro = microbatch_activations(arch, job, plan)
    per_layer = {kind: kept // count for kind, count, kept, *_ in micro.kinds}
    average = sum(kind[2] for kind in micro.kinds) / sum(kind[1] for kind in micro.kinds)
    assert max(per_layer.values()) > 1.9 * average  # the kinds differ
    shares = {}
    for stage in range(1, 15):  # middle ranks: no embedding, no output layer
        held = stage_layer_kinds(arch, 16, stage)
        chunks = inflight_chunks(16, 32, 1, stage)
        acts = activations(arch, job, plan, stage)
        kept = acts.layers_bytes - chunks * micro.shared_bytes
        assert kept == chunks * sum(n * per_layer[kind] for kind, n in held)
        shares[held] = kept // chunks
    assert len(shares) == 3 and max(shares.values()) > 1.9 * min(shares.values())  # one MoE layer or two


@pytest.mark.parametrize(("split", "block"), [((12,) * 8, 5), ((11,) + (12,) * 6 + (13,), 12), ((10,) + (12,) * 6 + (14,), 3)])
def test_block_recompute_checkpoints_the_first_n_layers_of_each_stage(split: tuple, block: int) -> None:
    """Megatron's --recompute-method block --recompute-num-layers N (megatron/core/recompute.py:
    the first N layers of each TransformerBlock, one per model chunk) on GPT-3 175B (96 layers),
    TP 8 + SP, pp 8: every rank keeps min(N, its layers) checkpointed inputs 2sbh/t and the full
    Korthikanti layer sbh(34 + 5as/h)/t (+ the fp32 norm statistics) for the rest, per micro-batch
    in flight (1F1B: pp - rank). A stage with fewer layers than N checkpoints all of its own."""
    plan = Plan(gpu="a100-sxm-80gb", num_gpus=64, tp=TP, pp=8, sequence_parallel=True, grad_accum=16,
                recompute="full", recompute_layers=block, stage_layers=split)
    full_layer = (SBH * 34 + 5 * A * S * S) // TP + NORM_STATS // TP
    checkpointed = 2 * SBH // TP
    for rank, layers in enumerate(split):
        held = min(block, layers)
        acts = activations(GPT3, JOB, plan, rank)
        # GPT-3 has learned positions: no RoPE tables shared by the layers
        assert acts.layers_bytes == (8 - rank) * (held * checkpointed + (layers - held) * full_layer)
    from vramplan.models.memory.recompute import stage_recomputed
    assert stage_recomputed(GPT3, JOB, plan) == tuple(min(block, layers) for layers in split)
