"""The MoE dispatcher's permutation passes (models/time/moe_permute.py), against a hand count of the
rows Megatron-LM 92c8482e and Transformer Engine 2.9's kernels read and write for one shape, and the
dispatchers and stacks that run none.

Qwen3-30B-A3B (hidden 2048, 128 experts, top-8, 48 MoE layers), seq 4096, micro-batch 1, EP 8 (16
local experts), fp8, one micro-batch: T = 4096 tokens on the rank, T k = 32,768 routed copies.
Forward, in hidden rows (one load or one store of a row each):
- permute (TE _permute_kernel: each token loaded once, stored once per copy): 4,096 + 32,768
- sort by local expert (_sort_chunks_by_map_kernel: one load, one store a copy): 2 x 32,768
- Fp8Padding (tex.fused_multi_row_padding, a copy of every row): 2 x 32,768
- Fp8Unpadding of the GEMM output: 2 x 32,768
- unsort: 2 x 32,768
- unpermute (_unpermute_kernel: every copy loaded, one row stored): 32,768 + 4,096
= 335,872 rows; the backward runs each pass's mirror kernel over the same rows. Per routed copy:
2 x (2 (1 + 1/8) + 4 + 4) = 20.5 rows of 2 bytes x 2048.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.calibration import FP8_CAST_HBM_EFFICIENCY
from vramplan.models.time.ep_time import ep_seconds, ep_traffic
from vramplan.models.time.moe_permute import permute_bytes, permute_rows_per_direction
from vramplan.models.time.rates import hbm_stream_seconds

CAT = packaged_catalogue()
H100 = CAT.gpu("h100-sxm-80gb")
QWEN3_30B = CAT.architecture("qwen3-30b-a3b")
ROW_BYTES = 2 * 2048  # a bf16 hidden row
LAYERS = 48
T, K = 4096, 8


def _plan(**fields) -> Plan:
    return Plan(**{"gpu": H100.name, "num_gpus": 8, "zero": 1, "ep": 8, "micro_batch": 1, "grad_accum": 1,
                   "precision": "fp8", **fields})


def _job(**fields) -> Job:
    return Job(**{"seq_len": 4096, "stack": "megatron", **fields})


def test_the_alltoall_dispatcher_moves_the_hand_counted_rows() -> None:
    permute = (T + T * K) + (T * K + T)  # permute before the all-to-all, unpermute after the combine
    sort = 2 * (2 * T * K)  # sort and unsort by local expert
    pad = 2 * (2 * T * K)  # Fp8Padding and Fp8Unpadding
    assert permute_rows_per_direction(QWEN3_30B, _job(), _plan()) == permute + sort + pad == 335_872
    step = permute_bytes(QWEN3_30B, _job(), _plan())
    assert step == 2 * 335_872 * ROW_BYTES * LAYERS  # forward and backward, every MoE layer
    assert step / (T * K * ROW_BYTES * LAYERS) == pytest.approx(20.5)  # rows per routed copy


def test_bf16_skips_the_padding_and_one_expert_a_rank_the_sort() -> None:
    bf16 = permute_rows_per_direction(QWEN3_30B, _job(), _plan(precision="bf16"))
    assert bf16 == 2 * (T * K + T) + 4 * T * K
    one_each = _plan(precision="bf16", num_gpus=128, ep=128)  # 128 experts over EP 128: no chunk sort
    assert permute_rows_per_direction(QWEN3_30B, _job(), one_each) == 2 * (T * K + T)


def test_deepep_permutes_the_delivered_rows_and_pads() -> None:
    """Megatron's _DeepepManager: the rows DeepEP delivers (one per token and rank it reaches) are
    permuted to the rank's copies and back, then TEGroupedMLP pads them; no chunk sort."""
    hit = 1 - math.comb(128 - 16, K) / math.comb(128, K)  # a token reaches a rank holding 16 of the 128 experts
    delivered = T * 8 * hit  # from the 8 EP ranks' tokens
    rows = permute_rows_per_direction(QWEN3_30B, _job(moe_dispatcher="deepep"), _plan())
    assert rows == pytest.approx(2 * (T * K + delivered) + 4 * T * K)


@pytest.mark.parametrize("job", [_job(moe_dispatcher="hybridep"), _job(stack="torchtitan"), _job(stack="hf")])
def test_hybridep_and_other_stacks_are_not_charged(job: Job) -> None:
    """HybridEP's own permute depends on its release (a kernel of its own in the 25.11 container's,
    inside the dispatch since DeepEP a0d27f1): not modelled; other stacks' reordering is not
    Megatron's passes (models/time/moe_permute.py)."""
    assert permute_bytes(QWEN3_30B, job, _plan()) == 0.0


def test_dense_models_have_none() -> None:
    llama = CAT.architecture("llama-3.1-8b")
    assert permute_bytes(llama, _job(), _plan(ep=1)) == 0.0


def test_a_fully_recomputed_moe_layer_permutes_again() -> None:
    once = permute_bytes(QWEN3_30B, _job(), _plan())
    assert permute_bytes(QWEN3_30B, _job(), _plan(recompute="full")) == pytest.approx(once * 3 / 2)
    assert permute_bytes(QWEN3_30B, _job(), _plan(recompute="selective")) == once  # core_attn only


def test_sequence_parallel_permutes_a_shard_and_sorts_the_gathered_copies() -> None:
    """TP 2 with SP: the rank permutes its 2,048 tokens before the all-to-all; the TP all-gather
    hands its experts' slices all 32,768 copies to sort and pad."""
    plan = _plan(num_gpus=16, tp=2, sequence_parallel=True)
    shard = T // 2
    assert permute_rows_per_direction(QWEN3_30B, _job(), plan) == 2 * (shard * K + shard) + 8 * T * K


def test_the_passes_run_at_the_fp8_casts_streaming_rate_inside_the_ep_term() -> None:
    job, plan = _job(), _plan(grad_accum=4)
    traffic = ep_traffic(QWEN3_30B, job, plan)
    assert traffic.permute_bytes == permute_bytes(QWEN3_30B, job, plan) > 0
    seconds = hbm_stream_seconds(traffic.permute_bytes, H100)
    assert seconds == traffic.permute_bytes / (H100.hbm_bandwidth_gb_per_s * 1e9 * FP8_CAST_HBM_EFFICIENCY.value)
    without = ep_seconds(replace(traffic, permute_bytes=0.0), plan.layout, H100, 8, 50.0)
    assert ep_seconds(traffic, plan.layout, H100, 8, 50.0) == pytest.approx(without + seconds)
