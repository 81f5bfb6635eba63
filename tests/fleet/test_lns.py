"""fleet_lns.improve on random tiny fleets: every incumbent valid, never worse, and the optimum.

The fleets are the oracle's (tests/helpers/fleets.py, as in fleet/test_oracle.py); the LNS starts from the greedy schedule.
"""

from __future__ import annotations

import time

import pytest
from helpers.fleets import check_schedule, random_fleet

from vramplan.fleet import lns as fleet_lns
from vramplan.fleet.brute import brute_optimum
from vramplan.fleet.domain import IntSchedule
from vramplan.fleet.lns import LnsStats, improve, objective_value
from vramplan.fleet.sgs import greedy, valid


@pytest.mark.parametrize("lanes", [1, 2])
def test_every_incumbent_is_valid_and_the_served_stage_never_gets_worse(lanes: int) -> None:
    """From the greedy schedule or from nothing served: each new incumbent valid and strictly better,
    with one neighbourhood at a time and with two at once (a lane's result is merged into the
    incumbent another lane may have changed meanwhile: it must be re-checked, never trusted)."""
    improved = 0
    for seed in range(60):
        fleet = random_fleet(seed, "cost")
        start = greedy(fleet) if seed % 2 else IntSchedule(slot=[None] * len(fleet.jobs), start_min=[None] * len(fleet.jobs))
        seen: list[IntSchedule] = []
        best, stopped, _ = improve(fleet, start, "served", objective_value(fleet, start, "served"),
                                   time.perf_counter() + 5, lanes, seed=seed, on_better=seen.append, max_neighbourhoods=6)
        assert not stopped
        for schedule in [best, *seen]:
            assert valid(fleet, schedule)
            check_schedule(fleet, schedule)
        key = [fleet_lns.stage_key(fleet, s, "served") for s in (start, *seen)]
        assert key == sorted(key, reverse=True) and len(set(key)) == len(key), seed  # strictly better each time
        improved += len(seen) > 0
    assert improved > 20


@pytest.mark.parametrize("lanes", [1, 2])
def test_a_whole_fleet_neighbourhood_finds_and_proves_the_brute_force_optimum(lanes: int) -> None:
    """With every job in the neighbourhood the LNS solves the cost stage at the optimal penalty;
    it says so (proven) only when the neighbourhood held every job and pool, and the cost it proves
    is the brute force's. A wrong budget or a cost counted wrongly would fail here."""
    proven = 0
    for seed in range(60):
        fleet = random_fleet(seed, "cost")
        penalty, cost, _ = brute_optimum(fleet)  # type: ignore[misc]
        schedule = greedy(fleet)
        if objective_value(fleet, schedule, "served") > penalty:
            schedule, _, _ = improve(fleet, schedule, "served", 0, time.perf_counter() + 5, seed=seed,
                                     max_neighbourhoods=20)
        if objective_value(fleet, schedule, "served") > penalty:
            continue
        stats = LnsStats()
        best, _, optimal = improve(fleet, schedule, "cost", penalty, time.perf_counter() + 5, lanes, seed=seed,
                                   stats=stats, max_neighbourhoods=20)
        assert valid(fleet, best) and objective_value(fleet, best, "served") <= penalty, seed
        assert objective_value(fleet, best, "cost") >= cost, seed  # never below the true optimum
        if optimal:
            assert objective_value(fleet, best, "cost") == cost, seed
            proven += 1
    assert proven > 30


def test_restricted_neighbourhoods_keep_jobs_on_their_support_and_prove_nothing(monkeypatch) -> None:
    """Neighbourhoods narrowed to fleet_bound's support (here: no slot at all) may only keep a job
    on its own slot, move it to an unbounded pool or leave it unserved; they never prove the stage,
    even when they hold every job and pool, and every incumbent stays valid."""
    monkeypatch.setattr(fleet_lns, "RESTRICTED_SHARE", 1.0)
    for seed in range(40):
        fleet = random_fleet(seed, "cost")
        start = greedy(fleet)
        budget = objective_value(fleet, start, "served")
        seen: list[IntSchedule] = []
        best, _, optimal = improve(fleet, start, "cost", budget, time.perf_counter() + 5, 2, seed=seed,
                                   on_better=seen.append, max_neighbourhoods=10,
                                   support=lambda fleet=fleet: {j: frozenset() for j in range(len(fleet.jobs))})
        assert not optimal, seed
        for schedule in [best, *seen]:
            assert valid(fleet, schedule)
            for j, (before, after) in enumerate(zip(start.slot, schedule.slot)):
                moved = after is not None and after != before
                assert not moved or fleet.pools[fleet.jobs[j].slots[after].pool].windows is None, seed
