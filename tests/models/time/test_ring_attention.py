"""torch's ring attention (TORCH_RING_CP_STACKS: torchtitan; models/time/ring_attention.py): the
K/V it moves (the query heads', repeat_kv before SDPA), the all-gathers per forward and backward
and the fp32 dK/dV rotations, hidden behind each pass's first block eager and not at all in
compiled blocks; Megatron's TE ring unchanged. And the solver's mirror of it, cell for cell."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.parallel_grid import assert_the_four_terms, checked_grid

from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.flops import forward_flops_per_token
from vramplan.models.time.parallel_time import cp_exposed_s
from vramplan.models.time.ring_attention import ring_bytes_per_layer, ring_kv_bytes, ring_window_flops
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.space_build import build_space

CATALOGUE = packaged_catalogue()
LLAMA_8B = CATALOGUE.architecture("llama-3.1-8b")
H100 = CATALOGUE.gpu("h100-sxm-80gb")
SEQ = 262144
CP8 = {"gpu": H100.name, "num_gpus": 8, "cp": 8, "recompute": "full", "precision": "fp8"}
# Llama 3.1 8B, 256k over CP 8: a rank's 32,768 tokens x 32 query heads x 128 x K and V x 2 bytes.
KV_BYTES = 2 * 2 * 32768 * 32 * 128


def _job(stack: str, compile_: str = "model") -> Job:
    return Job(seq_len=SEQ, stack=stack, compile=compile_)


def test_the_ring_moves_the_query_heads_k_v_in_16_bits() -> None:
    assert ring_kv_bytes(LLAMA_8B, _job("torchtitan"), Plan(**CP8)) == KV_BYTES  # fp8: SDPA stays bf16
    tp2 = Plan(**{**CP8, "num_gpus": 16, "tp": 2})
    assert ring_kv_bytes(LLAMA_8B, _job("torchtitan"), tp2) == KV_BYTES // 2


def test_compiled_ring_gathers_twice_and_rotates_fp32_gradients_every_block() -> None:
    # forward all-gather, the recomputed forward's shared with the backward's (CSE): 2 x 7 shards;
    # 8 rotations of fp32 dK/dV (2 x the 16-bit shard each)
    assert ring_bytes_per_layer(LLAMA_8B, _job("torchtitan"), Plan(**CP8)) == 2 * 7 * KV_BYTES + 8 * 2 * KV_BYTES
    # without recompute the backward reuses the forward's gather
    plan = Plan(**{**CP8, "recompute": "none"})
    assert ring_bytes_per_layer(LLAMA_8B, _job("torchtitan"), plan) == 7 * KV_BYTES + 8 * 2 * KV_BYTES


def test_eager_ring_gathers_per_pass_and_hides_behind_the_first_blocks() -> None:
    eager = _job("torchtitan", "none")
    # forward, recomputed forward, backward: 3 x 7 shards, and the last rotation
    assert ring_bytes_per_layer(LLAMA_8B, eager, Plan(**CP8)) == 3 * 7 * KV_BYTES + 2 * KV_BYTES
    attention = forward_flops_per_token(LLAMA_8B, SEQ)[1]
    assert ring_window_flops(attention, eager, Plan(**CP8)) == attention // 8
    assert ring_window_flops(attention, _job("torchtitan"), Plan(**CP8)) == 0


def test_compiled_ring_is_exposed_whatever_the_compute() -> None:
    job, plan = _job("torchtitan"), Plan(**CP8)
    exposed = cp_exposed_s(LLAMA_8B, job, plan, H100, 8, 50.0, compute_s=1e6)
    assert exposed > 0 and exposed == cp_exposed_s(LLAMA_8B, job, plan, H100, 8, 50.0, compute_s=0.0)
    eager = _job("torchtitan", "none")
    assert cp_exposed_s(LLAMA_8B, eager, plan, H100, 8, 50.0, compute_s=1e6) == 0.0


def test_megatron_keeps_its_overlapped_kv_head_ring() -> None:
    job, plan = _job("megatron"), Plan(**CP8)
    assert cp_exposed_s(LLAMA_8B, job, plan, H100, 8, 50.0, compute_s=1e6) == 0.0
    exposed = cp_exposed_s(LLAMA_8B, job, plan, H100, 8, 50.0, compute_s=0.0)
    # 7 steps x (K/V forward + K/V and dK/dV backward) of the 8 KV heads' shard: a quarter of the query heads'
    torchtitan = cp_exposed_s(LLAMA_8B, _job("torchtitan"), plan, H100, 8, 50.0, compute_s=0.0)
    assert exposed / torchtitan == pytest.approx(7 * 3 * (KV_BYTES / 4) / (2 * 7 * KV_BYTES + 8 * 2 * KV_BYTES))


@pytest.mark.parametrize("compile_", ["model", "none"])
def test_parallel_seconds_equal_the_four_terms(compile_: str) -> None:
    job = _job("torchtitan", compile_)
    for plan in (Plan(**CP8), Plan(**{**CP8, "num_gpus": 64, "tp": 8, "sequence_parallel": True})):
        for compute in (0.0, 0.5, 30.0):
            assert_the_four_terms(LLAMA_8B, job, plan, H100, compute)


def test_the_solver_grid_is_the_scalar_function_to_the_bit() -> None:
    """parallel_seconds_grid (solver/bound_arrays.py) against Tables.parallel_s on a torchtitan
    space with CP (tests/solver/test_bound_arrays.py's check)."""
    space = build_space(CATALOGUE, query_from_fields({"tokens": 1e9, "model": "llama-3.1-8b", "seq_len": 32768,
                                                      "global_batch": 32, "max_gpus": 32, "stack": "torchtitan",
                                                      "gpus": "h100-sxm-80gb"}))
    cells, rows = checked_grid(space)
    assert cells > 20 and any(t.layouts[i].cp > 1 for t, i in rows)
