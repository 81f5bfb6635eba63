"""plan_fleet() with the real planner: one job on the market is `vramplan solve`; inventory,
deadlines and priorities act as a capacity planner expects; every scheduled plan fits."""

from __future__ import annotations

import pytest
from helpers.catalogue import packaged_catalogue

from vramplan.fleet.candidates import CandidateCache, cluster_sizes
from vramplan.fleet.inputs import FleetJob, FleetQuery, Pool, PoolWindow
from vramplan.fleet.planner import plan_fleet
from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery

CACHE = CandidateCache()  # shared: the same job shapes recur across these tests
H100 = "aws/p5.48xlarge"


def job(model: str = "llama-3.1-8b", tokens: float = 2e9, **fleet) -> FleetJob:
    return FleetJob(query=SolveQuery(model=model, job=Job(seq_len=4096), tokens=tokens, max_gpus=32), **fleet)


def pool(name: str = "h100", gpus: int = 16, committed: bool = True, **extra) -> Pool:
    return Pool(name=name, offering=H100, committed=committed, windows=(PoolWindow(num_gpus=gpus),), **extra)


def fleet(jobs, pools, **options):
    return plan_fleet(packaged_catalogue(), FleetQuery(jobs=tuple(jobs), pools=tuple(pools), time_limit_s=20, **options), CACHE)


def test_one_job_on_the_market_costs_what_solve_says(catalogue) -> None:
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096), tokens=3e9, max_gpus=64)
    providers = sorted({o.provider for o in catalogue.offerings.values()})
    market = [Pool(name=f"market:{p}", market_provider=p) for p in providers]
    result = fleet([FleetJob(query=query)], market)
    expected = solve(catalogue, query).plans[0]
    (assignment,) = result.assignments
    assert result.status == "optimal"
    assert assignment.plan is not None and assignment.plan.plan == expected.plan
    assert assignment.usd_marginal == pytest.approx(expected.cost.usd_total, abs=0.01)
    assert assignment.start_hours == 0 and assignment.end_hours == pytest.approx(expected.cost.hours, abs=1 / 60)


def test_cluster_sizes_cover_single_gpus_and_whole_instances() -> None:
    assert cluster_sizes(8, 64) == [1, 2, 4, 8, 16, 32, 64]
    assert cluster_sizes(8, 40) == [1, 2, 4, 8, 16, 32, 40]
    assert cluster_sizes(1, 5) == [1, 2, 4, 5]


def test_a_full_pool_sends_the_second_job_to_the_priced_pool() -> None:
    """Two jobs that each need the committed pool's 16 GPUs for their whole window: one runs on
    the committed pool for free, the other on the priced pool; nothing exceeds its GPUs."""
    first = job(tokens=4e9, deadline_hours=8)
    jobs = [first, first]
    result = fleet(jobs, [pool(gpus=16), pool("paid", gpus=16, committed=False)])
    assert result.status == "optimal"
    assert sorted(a.pool for a in result.assignments) == ["h100", "paid"]
    assert [a.status for a in result.assignments] == ["scheduled", "scheduled"]
    paid = next(a for a in result.assignments if a.pool == "paid")
    assert result.objective_value == pytest.approx(paid.usd_marginal, abs=0.01) and paid.usd_marginal > 0
    for a in result.assignments:
        assert a.plan is not None and a.plan.memory.fits and a.end_hours <= 8


def test_more_inventory_and_later_deadlines_never_raise_the_cost() -> None:
    jobs = [job(tokens=4e9, deadline_hours=8), job(tokens=4e9, deadline_hours=8), job(tokens=1e9, deadline_hours=6)]
    pools = [pool(gpus=16), pool("paid", gpus=32, committed=False)]
    base = fleet(jobs, pools).objective_value
    bigger = fleet(jobs, [pool(gpus=32), pools[1]]).objective_value
    later = fleet([j.model_copy(update={"deadline_hours": 20}) for j in jobs], pools).objective_value
    assert base is not None and bigger is not None and later is not None
    assert bigger <= base and later <= base
    assert bigger < base  # the property is not vacuous here: 32 committed GPUs hold all three


def test_unserved_job_says_what_extra_capacity_would_serve_it() -> None:
    jobs = [job(tokens=4e9, deadline_hours=8, priority=5), job(tokens=4e9, deadline_hours=8)]
    result = fleet(jobs, [pool(gpus=16)])
    served, unserved = result.assignments
    assert served.status == "scheduled" and unserved.status == "unserved"  # the heavier priority wins
    assert "+16 GPUs of pool h100" in (unserved.explanation or "")
    grown = fleet(jobs, [pool(gpus=32)])
    assert [a.status for a in grown.assignments] == ["scheduled", "scheduled"]


def test_tardiness_lets_jobs_run_late_and_weighs_them_by_priority() -> None:
    urgent = job(tokens=4e9, deadline_hours=8, priority=3)
    relaxed = job(tokens=4e9, deadline_hours=8, priority=1)
    result = fleet([relaxed, urgent], [pool(gpus=16)], objective="tardiness")
    late, on_time = result.assignments
    assert on_time.status == "scheduled" and late.status == "late"
    assert late.start_hours == pytest.approx(on_time.end_hours)  # left-shifted: no idle gap
    assert result.objective_value == pytest.approx(late.late_hours, abs=1 / 60)


def test_makespan_spreads_jobs_over_pools() -> None:
    jobs = [job(tokens=4e9), job(tokens=4e9)]
    one_pool = fleet(jobs, [pool(gpus=16)], objective="makespan").objective_value
    two_pools = fleet(jobs, [pool(gpus=16), pool("b", gpus=16)], objective="makespan").objective_value
    assert two_pools is not None and one_pool is not None and two_pools < one_pool


def test_a_pool_window_delays_the_job_and_a_price_override_prices_it() -> None:
    later = Pool(name="later", offering=H100, price_usd_per_gpu_hour=1.0,
                 windows=(PoolWindow(from_hours=10, num_gpus=8),))
    (assignment,) = fleet([job(tokens=1e9)], [later]).assignments
    assert assignment.start_hours == 10
    assert assignment.usd_marginal == pytest.approx(8 * 1.0 * (assignment.plan.cost.hours), abs=0.01)
