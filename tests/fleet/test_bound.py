"""The cost stage's column-generation bound (fleet/bound.py) against the brute-force oracle.

A bound is only worth reporting if it is a relaxation: on every seeded tiny fleet (the oracle
tests' fleets: a pool with two windows, one of them maybe empty, and a bounded or unbounded
second pool) it never exceeds the optimal cost at the optimal served penalty, for one-minute
buckets and for coarser ones (whose floored durations and windows must stay a relaxation), at
every round and not only at convergence. It must also bite: on some fleets it proves more than
the trivial bound and often it proves the optimum itself.
"""

from __future__ import annotations

import math
import time

import numpy as np
from helpers.fleets import random_fleet

from vramplan.fleet.bound import CostBound, best_penalty_price
from vramplan.fleet.brute import brute_optimum
from vramplan.fleet.domain import IntFleet, IntJob, IntPool, IntSchedule, Slot, Window
from vramplan.fleet.sgs import greedy

SEEDS = range(150)


def _bounds(fleet: IntFleet, penalty: int, bucket_min: int, schedule: IntSchedule | None) -> list[int]:
    """The bound after every round until convergence."""
    bounder = CostBound(fleet, penalty, schedule=schedule, bucket_min=bucket_min)
    found = []
    while bounder.rounds < 200:
        going = bounder.step()
        found.append(bounder.bound())
        if not going:
            break
    return [b for b in found if b is not None]


def test_the_bound_never_exceeds_the_brute_force_optimum() -> None:
    exact = bitten = 0
    for seed in SEEDS:
        fleet = random_fleet(seed, "cost")
        penalty, cost, _ = brute_optimum(fleet)  # type: ignore[misc]
        for bucket_min in (1, 3, 7):
            found = _bounds(fleet, penalty, bucket_min, greedy(fleet) if seed % 2 else None)
            assert found, (seed, bucket_min)
            assert max(found) <= cost, (seed, bucket_min, found, cost)
            assert found == sorted(found)  # the best point so far only improves
            if bucket_min == 1:
                exact += max(found) == cost
                bitten += max(found) > 0
    assert exact > len(SEEDS) // 2
    assert bitten > len(SEEDS) // 4


def test_a_tighter_budget_never_lowers_the_bound() -> None:
    """The Lagrangian points priced for one budget bound every smaller budget at least as high:
    the cost stage may start the search before the served stage has its final level."""
    for seed in range(40):
        fleet = random_fleet(seed, "cost")
        penalty, cost, _ = brute_optimum(fleet)  # type: ignore[misc]
        bounder = CostBound(fleet, penalty + 5)
        bounder.run(time.perf_counter() + 20)
        loose = bounder.bound()
        assert loose is not None and bounder.bound(penalty) >= loose
        assert bounder.bound(penalty) <= cost
        bounder.set_budget(penalty)
        bounder.run(time.perf_counter() + 20)
        assert loose <= bounder.bound() <= cost  # type: ignore[operator]


def test_one_machine_pool_counts_whole_jobs_in_its_windows() -> None:
    """Three 8-GPU jobs of 40 minutes, each due by minute 90, on one 8-GPU free pool: only two fit
    there, so one pays its priced slot (30 cents); the energy of the window alone (90 of 120
    GPU-minutes needed... 720 of 960) would let the LP squeeze in 2.25 jobs and pay 22.5 cents."""
    free = IntPool("free", (Window(0, 200, 8),), committed=True)
    priced = IntPool("priced", (Window(0, 200, 8),))
    job = IntJob(release_min=0, deadline_min=90, weight=1, required=False,
                 slots=(Slot(0, 8, 40, 0), Slot(1, 8, 40, 30)))
    fleet = IntFleet(jobs=(job, job, job), pools=(free, priced), horizon_min=200, objective="cost")
    assert brute_optimum(fleet) == (0, 30, 2 * 8 * 40)
    bounder = CostBound(fleet, 0, schedule=greedy(fleet))
    assert bounder.run(time.perf_counter() + 20) == 30
    # The master's solution, as the search's restricted neighbourhoods see it: all three jobs, on their usable slots.
    assert set(bounder.support) == {0, 1, 2} and all(slots <= {0, 1} for slots in bounder.support.values())


def test_the_penalty_price_is_the_best_multiplier() -> None:
    """best_penalty_price maximises the concave unserved part over theta: no theta on a fine grid beats it."""
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(1, 8))
        pi = rng.uniform(0, 100, n)
        penalties = rng.integers(1, 5, n).astype(float)
        market = np.where(rng.random(n) < 0.3, rng.uniform(0, 100, n), math.inf)
        budget = float(rng.integers(0, 10))
        best = best_penalty_price(pi, penalties, market, budget)
        for theta in np.linspace(0, 120, 481):
            value = -theta * budget + np.minimum(0, np.minimum(market - pi, theta * penalties - pi)).sum()
            assert value <= best + 1e-9
