"""An interleaved pipeline pinned where its stack's schedule runs none of the micro-batch counts the
global batch leaves (models.architecture.parallel.interleaving_refusal): the explanation says so and
offers the plain pipeline, which fits."""

from __future__ import annotations

from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.query import Pins, SolveQuery


def test_no_micro_batch_count_megatron_interleaves_is_named_and_unpinning_vpp_fits(catalogue) -> None:
    """Llama 3.1 8B on 4 stages of 2 virtual stages, 6 sequences a step: every data-parallel degree
    leaves 1, 2, 3 or 6 micro-batches, none a multiple of 4, so Megatron runs none of them (before
    2026-12-06 vramplan planned m = 6, which Megatron's schedules.py refuses)."""
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096, stack="megatron"), global_batch=6, tokens=1e8,
                       gpus=("h100-sxm-80gb",), max_gpus=8, pins=Pins(pp=4, vpp=2))
    result = solve(catalogue, query)
    assert result.status == "infeasible" and not result.plans
    summary = result.explanation.summary
    assert "interleaved schedule (vpp 2)" in summary and "global batch 6" in summary and "a multiple of pp" in summary
    assert result.explanation.smallest_change == "no interleaved stages (unpin --vpp)"
    fix = next(m for m in result.explanation.mitigations if m.change == "no interleaved stages (unpin --vpp)")
    assert fix.fits and fix.plan.vpp == 1 and fix.plan.pp == 4
    # the same batch interleaves where a count runs: 8 sequences on 4 ranks of 2 virtual stages
    assert solve(catalogue, query.model_copy(update={"global_batch": 8})).status == "optimal"
