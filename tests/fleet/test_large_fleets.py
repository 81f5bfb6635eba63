"""Large fleets within the time limit: the serial scheme's earliest start (fleet/profile.py)
against a minute-by-minute reference; greedy() and left_shift() on thousands of jobs; a session
whose model cannot be built in time answers with the greedy schedule; explanations and candidate
plans stop at the run's budget (fleet/clock.py) instead of answering from a cut-short solve.

The profile replaced a scan that tried every candidate start against every placed job: greedy()
took 34 s at 2,000 jobs and was past 10 minutes at 10,000, outside any --time-limit."""

from __future__ import annotations

import random
import time

import pytest
from helpers.fleets import check_schedule, random_fleet

from vramplan.fleet.candidates import CandidateCache, pool_candidates
from vramplan.fleet.clock import TimeUp
from vramplan.fleet.domain import IntFleet, IntJob, IntPool, IntSchedule, Slot, Window
from vramplan.fleet.explain import explain_unserved
from vramplan.fleet.inputs import Pool, PoolWindow
from vramplan.fleet.model import FleetSession
from vramplan.fleet.profile import Profile
from vramplan.fleet.sgs import greedy, left_shift, valid
from vramplan.models.core.setup import Job
from vramplan.solver import SolveQuery


def reference_earliest(fleet: IntFleet, p: int, placed: list[tuple[int, int, int]], release: int, duration: int,
                       gpus: int, latest_end: int | None) -> int | None:
    """Minute by minute: the first start whose every minute has the GPUs, ending by the limit."""
    pool = fleet.pools[p]
    limit = fleet.horizon_min if latest_end is None else min(fleet.horizon_min, latest_end)
    for start in range(release, limit - duration + 1):
        if all(sum(g for s, e, g in placed if s <= m < e) + gpus <= (pool.gpus_at(m) or 0)
               for m in range(start, start + duration)):
            return start
    return None


def test_the_earliest_start_is_the_first_minute_that_fits() -> None:
    """On 300 random pools with random placed jobs, placed one by one (take) or all at once."""
    for seed in range(300):
        rng = random.Random(seed)
        fleet = random_fleet(seed, "cost")
        p = 0
        placed = []
        for _ in range(rng.randint(0, 6)):
            start = rng.randint(0, fleet.horizon_min - 1)
            placed.append((start, min(fleet.horizon_min, start + rng.randint(1, 20)), rng.choice([1, 2, 4])))
        incremental = Profile(fleet, p)
        for start, end, gpus in placed:
            incremental.take(start, end, gpus)
        whole = Profile(fleet, p, placed)
        for _ in range(20):
            release, duration, gpus = rng.randint(0, 40), rng.randint(1, 30), rng.choice([1, 2, 4, 8])
            latest = rng.choice([None, rng.randint(1, 70)])
            expected = reference_earliest(fleet, p, placed, release, duration, gpus, latest)
            assert whole.earliest(release, duration, gpus, latest) == expected, (seed, release, duration, gpus, latest)
            assert incremental.earliest(release, duration, gpus, latest) == expected, seed


def many_jobs(num_jobs: int, seed: int = 0) -> IntFleet:
    """A quarter, 4 pools of 64-128 GPUs, jobs of 1-64 GPUs and 2-40 days: most cannot all fit."""
    rng = random.Random(seed)
    horizon = 91 * 24 * 60
    pools = tuple(IntPool(f"p{p}", (Window(0, horizon, rng.choice([64, 128])),)) for p in range(4))
    jobs = []
    for _ in range(num_jobs):
        release = rng.randint(0, horizon // 2)
        slots = tuple(Slot(pool=p, gpus=g, duration_min=rng.randint(2, 40) * 1440 // g * 8, cost_cents=rng.randint(0, 10**6))
                      for p in range(4) for g in (8, 16, 64))
        jobs.append(IntJob(release_min=release, deadline_min=release + rng.randint(10, 60) * 1440, weight=100,
                           required=False, slots=slots))
    return IntFleet(jobs=tuple(jobs), pools=pools, horizon_min=horizon, objective="cost")


def test_greedy_and_left_shift_on_thousands_of_jobs_are_valid_and_quick() -> None:
    fleet = many_jobs(3000)
    began = time.perf_counter()
    schedule = greedy(fleet)
    shifted = left_shift(fleet, schedule)
    assert time.perf_counter() - began < 20  # 34 s for greedy alone at 2,000 jobs with the former scan
    assert valid(fleet, schedule) and valid(fleet, shifted)
    assert 0 < sum(c is not None for c in schedule.slot) < len(fleet.jobs)
    assert all(b <= a for a, b in zip(schedule.start_min, shifted.start_min) if a is not None)


def test_greedy_stops_at_its_time_limit_with_a_valid_schedule() -> None:
    """Past `until` the jobs not reached stay unserved; what was placed stands."""
    fleet = many_jobs(3000)
    assert greedy(fleet, until=time.perf_counter() - 1).slot == [None] * 3000
    began = time.perf_counter()
    partial = greedy(fleet, until=began + 0.3)
    assert time.perf_counter() - began < 2.0
    assert valid(fleet, partial)


def test_greedy_and_left_shift_on_the_oracle_fleets() -> None:
    for seed in range(200):
        fleet = random_fleet(seed, "cost")
        schedule = greedy(fleet)
        check_schedule(fleet, schedule)
        check_schedule(fleet, left_shift(fleet, schedule))
        if any(c is not None for c in schedule.slot):  # past its time limit, left_shift leaves the schedule as is
            assert left_shift(fleet, schedule, until=time.perf_counter() - 1) is schedule


def test_a_session_whose_model_cannot_be_built_in_time_answers_with_the_greedy_schedule() -> None:
    """10,000 jobs on 4 pools took 9 s to build (12 s under load): past a small limit the build
    stops (TimeUp) and the greedy schedule is the answer, its served stage feasible."""
    fleet = many_jobs(3000)
    began = time.perf_counter()
    session = FleetSession(fleet, time_limit_s=0.3)
    schedule = session.run()
    assert time.perf_counter() - began < 0.3 + 5
    assert not session.built
    assert valid(fleet, schedule) and any(c is not None for c in schedule.slot)
    assert [s.status for s in schedule.stages] == ["feasible", "feasible", "skipped"]  # served, cost (the greedy's)
    assert schedule.status == "feasible"


def two_jobs_one_fits() -> tuple[IntFleet, IntSchedule]:
    """Two jobs that each need the pool's 8 GPUs over the same hours: one is served."""
    pool = IntPool("p", (Window(0, 600, 8),))
    job = IntJob(release_min=0, deadline_min=120, weight=100, required=False, slots=(Slot(0, 8, 100, 0),))
    fleet = IntFleet(jobs=(job, job), pools=(pool,), horizon_min=600, objective="cost")
    return fleet, IntSchedule(slot=[0, None], start_min=[0, None])


def test_an_explanation_past_the_budget_raises_time_up_instead_of_a_wrong_answer() -> None:
    """A solve cut short by the budget used to count as 'impossible', so the extra GPUs found by
    bisection could be more than needed; now the explanation stops and says so."""
    fleet, schedule = two_jobs_one_fits()
    assert "+8 GPUs of pool p would serve it" in explain_unserved(fleet, schedule, 1, [8])
    with pytest.raises(TimeUp):
        explain_unserved(fleet, schedule, 1, [8], until=time.perf_counter() - 1)


def test_candidate_plans_past_the_budget_raise_time_up_and_cache_nothing(catalogue) -> None:
    pool = Pool(name="h100", offering="aws/p5.48xlarge", windows=(PoolWindow(num_gpus=16),))
    query = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096), tokens=1e9, max_gpus=16)
    cache = CandidateCache()
    with pytest.raises(TimeUp):
        pool_candidates(catalogue, query, 0, pool, cache, until=time.perf_counter() - 1)
    assert cache.plans == {} and cache.fitting == {}
    assert pool_candidates(catalogue, query, 0, pool, cache)  # with time: the plans
