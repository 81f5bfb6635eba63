"""What a stack's code overlaps of its model-parallel traffic (models/core/stack_behaviour.py,
models/time/parallel_time.py):
- SERIAL_TP_BACKWARD_STACKS (torchtitan): DTensor's backward redistributes run between the GEMMs,
  so the backward's TP collectives are exposed like the forward's; Megatron's run beside the
  backward GEMMs (LinearWithGradAccumulationAndAsyncCommunication).
- OVERLAPPED_P2P_STACKS (megatron): with an interleaved schedule, --overlap-p2p-communication (on
  by default) runs the 1F1B steady state's p2p beside the compute, exposed only beyond it (the
  warmup's and cool-down's block: left out). Without interleaving Megatron batches them, blocking.
And the solver's numpy mirror (solver/bound_arrays.py parallel_seconds_grid) of both, cell for cell."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue
from helpers.parallel_grid import assert_the_four_terms, checked_grid

from vramplan.models.core.setup import Job, Plan
from vramplan.models.time.parallel_time import (
    overlaps_p2p,
    pp_p2p_s,
    tp_time_s,
)
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.space_build import build_space

CATALOGUE = packaged_catalogue()
LLAMA_70B = CATALOGUE.architecture("llama-3.1-70b")
H100 = CATALOGUE.gpu("h100-sxm-80gb")
TP8 = {"gpu": H100.name, "num_gpus": 8, "tp": 8, "sequence_parallel": True, "grad_accum": 4}
INTERLEAVED = {"gpu": H100.name, "num_gpus": 64, "tp": 4, "pp": 8, "vpp": 5, "sequence_parallel": True, "grad_accum": 64}


def test_torchtitan_exposes_the_backward_tp_collectives() -> None:
    titan, megatron = Job(seq_len=8192, stack="torchtitan"), Job(seq_len=8192, stack="megatron")
    plan = Plan(**TP8)
    exposed = tp_time_s(LLAMA_70B, titan, plan, H100, compute_s=100.0)
    assert exposed == tp_time_s(LLAMA_70B, titan, plan, H100, compute_s=0.0)  # no compute hides any of it
    assert exposed == pytest.approx(2 * tp_time_s(LLAMA_70B, megatron, plan, H100, compute_s=100.0))  # 2 of 4 collectives


def test_only_megatron_interleaved_pipelines_overlap_their_p2p() -> None:
    megatron = Job(seq_len=8192, stack="megatron")
    assert overlaps_p2p(megatron, Plan(**INTERLEAVED))
    assert not overlaps_p2p(megatron, Plan(**{**INTERLEAVED, "vpp": 1}))  # batched, blocking p2p
    assert not overlaps_p2p(Job(seq_len=8192, stack="torchtitan"), Plan(**INTERLEAVED))


def test_megatron_hides_the_interleaved_p2p_behind_the_compute() -> None:
    megatron, plan = Job(seq_len=8192, stack="megatron"), Plan(**INTERLEAVED)
    all_exposed = pp_p2p_s(LLAMA_70B, megatron, plan, H100, True, 50.0, compute_s=0.0)
    assert all_exposed > 0
    assert all_exposed == pp_p2p_s(LLAMA_70B, Job(seq_len=8192), plan, H100, True, 50.0, 100.0)  # hf: blocking
    assert pp_p2p_s(LLAMA_70B, megatron, plan, H100, True, 50.0, compute_s=100.0) == 0.0
    assert pp_p2p_s(LLAMA_70B, megatron, plan, H100, True, 50.0, all_exposed / 4) == pytest.approx(0.75 * all_exposed)


@pytest.mark.parametrize("stack", ["megatron", "torchtitan"])
def test_parallel_seconds_equal_the_four_terms(stack: str) -> None:
    job = Job(seq_len=8192, stack=stack)
    for plan in (Plan(**TP8), Plan(**INTERLEAVED), Plan(**{**INTERLEAVED, "vpp": 1})):
        for compute in (0.0, 0.5, 30.0):
            assert_the_four_terms(LLAMA_70B, job, plan, H100, compute)


@pytest.mark.parametrize("stack", ["megatron", "torchtitan"])
def test_the_solver_grid_is_the_scalar_function_to_the_bit(stack: str) -> None:
    """parallel_seconds_grid (solver/bound_arrays.py) against Tables.parallel_s on every cell of a
    dense Llama space with TP, and on megatron interleaved pipelines (vpp 2 pinned: the solver searches
    vpp 1 otherwise) (tests/solver/test_bound_arrays.py's check)."""
    pins = {"vpp": 2} if stack == "megatron" else {}
    space = build_space(CATALOGUE, query_from_fields({"tokens": 1e9, "model": "llama-3.1-70b", "seq_len": 8192,
                                                      "global_batch": 128, "max_gpus": 128, "stack": stack,
                                                      "gpus": "h100-sxm-80gb", **pins}))
    cells, rows = checked_grid(space)
    overlapped = sum(bool(t.cells(space.tables)[1]["pp_overlapped_bytes"][i].any()) for t, i in rows)
    tp = sum(t.layouts[i].tp > 1 for t, i in rows)
    assert cells > 40 and tp and (overlapped or stack != "megatron")
