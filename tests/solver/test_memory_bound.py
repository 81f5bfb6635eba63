"""Planning against the top of the estimate's range (`--memory-bound upper`): every returned plan's
total x the stack's range top (models/core/fidelity_ranges.py) fits under the limit, both engines
agree, and a plan that fits its estimate with less room than the range leaves is no answer."""

from __future__ import annotations

import random

import pytest
from helpers.cli import invoke
from helpers.queries import random_query

from vramplan.models.core.fidelity_ranges import memory_range
from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery

# at most 4 GPUs: the cheapest plan is one GPU near its limit (on 8, ZeRO-2 over 8 GPUs is cheaper and roomier)
QUERY = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=8192), gpus=("h100-sxm-80gb",), max_gpus=4, top_k=3)


def _upper(query: SolveQuery) -> SolveQuery:
    return query.model_copy(update={"job": query.job.model_copy(update={"memory_bound": "upper"})})


def test_every_plan_fits_with_the_ranges_top(catalogue):
    high = memory_range("hf").high
    result = solve(catalogue, _upper(QUERY))
    assert result.status == "optimal" and result.plans
    for plan in result.plans:
        memory = plan.memory
        assert memory.memory_bound == "upper"
        assert memory.total_high_bytes <= memory.capacity_bytes * memory.capacity_fraction
        assert memory.total_high_bytes == pytest.approx(memory.total_bytes * high, rel=1e-6)


def test_the_upper_bound_never_plans_leaner_than_the_estimate(catalogue):
    """The same question planned against the range's top is never cheaper: its space is a subset."""
    estimate, upper = solve(catalogue, QUERY), solve(catalogue, _upper(QUERY))
    assert upper.plans[0].objective_value >= estimate.plans[0].objective_value
    tight = [p for p in estimate.plans if p.memory.total_high_bytes > p.memory.capacity_bytes * p.memory.capacity_fraction]
    assert tight and tight[0] == estimate.plans[0]  # the cheapest: 70.3 GiB fits 71.7, its top (x 1.09, hf's) does not
    assert all(p.plan not in [q.plan for q in upper.plans] for p in tight)


@pytest.mark.parametrize("seed", range(6))
def test_both_engines_agree_under_the_upper_bound(catalogue, seed):
    query = _upper(random_query(random.Random(1000 + seed)))
    cpsat = solve(catalogue, query, explain_infeasible=False)
    brute = solve(catalogue, query.model_copy(update={"engine": "brute", "time_limit_s": 600}), explain_infeasible=False)
    assert cpsat.status == brute.status
    if cpsat.plans:
        assert cpsat.plans[0].objective_value == pytest.approx(brute.plans[0].objective_value, rel=1e-9)


def test_every_output_shows_the_ranges():
    result = invoke("estimate", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb",
                    "--recompute", "full")
    assert "measured peaks range" in result.stdout and "tokens/s (range " in result.stdout
    assert "ranges: memory from" in result.stdout and "published hf runs" in result.stdout
    upper = invoke("solve", "--model", "llama-3.1-8b", "--seq-len", "4096", "--gpu", "h100-sxm-80gb",
                   "--memory-bound", "upper")
    assert upper.exit_code == 0 and "the range's top)" in upper.stdout
