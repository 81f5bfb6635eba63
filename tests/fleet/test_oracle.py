"""CP-SAT's fleet model against the brute-force oracle, on random tiny fleets in integer units.

Each seeded fleet has at most 5 jobs, 2 pools (one bounded with two availability windows, one
bounded or unbounded) and 1-3 slots per job; both sides read the same IntFleet, so they share
the candidate sets and nothing else.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace

import pytest
from helpers.fleets import check_schedule, random_fleet

from vramplan.fleet import build as fleet_build
from vramplan.fleet import model as fleet_model
from vramplan.fleet.brute import brute_optimum
from vramplan.fleet.domain import (
    FLEET_OBJECTIVES,
    IntFleet,
    IntJob,
    IntPool,
    IntSchedule,
    Slot,
    Window,
)
from vramplan.fleet.model import FleetSession
from vramplan.fleet.sgs import cheapen, left_shift, repair, valid

SEEDS = range(120)


def solved_key(fleet: IntFleet) -> tuple[int, ...]:
    schedule = FleetSession(fleet, time_limit_s=20.0).run()
    assert schedule.status == "optimal", schedule.stages
    return tuple(stage.value for stage in schedule.stages)  # type: ignore[misc]


@pytest.mark.parametrize("objective", FLEET_OBJECTIVES)
def test_cpsat_equals_brute_force_on_random_tiny_fleets(objective: str) -> None:
    seeds = SEEDS if objective == "cost" else range(40)
    served_some = 0
    for seed in seeds:
        fleet = random_fleet(seed, objective)
        schedule = FleetSession(fleet, time_limit_s=20.0).run()
        assert schedule.status == "optimal", (seed, schedule.stages)
        check_schedule(fleet, schedule)
        shifted = left_shift(fleet, schedule)
        check_schedule(fleet, shifted)
        for _job, c, before, after in zip(fleet.jobs, schedule.slot, schedule.start_min, shifted.start_min):
            assert c is None or after <= before
        assert tuple(s.value for s in schedule.stages) == brute_optimum(fleet), seed
        served_some += any(c is not None for c in schedule.slot)
    assert served_some > len(seeds) // 2  # the fleets are not trivially empty


def test_the_oracle_sees_capacity() -> None:
    """Two 8-GPU jobs on an 8-GPU pool with deadlines that force overlap: only one can be served.
    Keys: (unserved penalty, cost in cents, GPU-minutes on committed pools: none here)."""
    pool = IntPool("a", (Window(0, 100, 8),))
    job = IntJob(release_min=0, deadline_min=10, weight=1, required=False, slots=(Slot(0, 8, 10, 5),))
    fleet = IntFleet(jobs=(job, job), pools=(pool,), horizon_min=100, objective="cost")
    assert brute_optimum(fleet) == (1, 5, 0) == solved_key(fleet)
    relaxed = IntJob(release_min=0, deadline_min=20, weight=1, required=False, slots=(Slot(0, 8, 10, 5),))
    fleet = IntFleet(jobs=(job, relaxed), pools=(pool,), horizon_min=100, objective="cost")
    assert brute_optimum(fleet) == (0, 10, 0) == solved_key(fleet)


def _grown(fleet: IntFleet, extra_gpus: int) -> IntFleet:
    pools = tuple(pool if pool.windows is None else replace(pool, windows=tuple(
        Window(w.from_min, w.to_min, w.gpus + extra_gpus) for w in pool.windows)) for pool in fleet.pools)
    return IntFleet(jobs=fleet.jobs, pools=pools, horizon_min=fleet.horizon_min, objective=fleet.objective)


def _later(fleet: IntFleet, extra_min: int) -> IntFleet:
    jobs = tuple(IntJob(j.release_min, None if j.deadline_min is None else j.deadline_min + extra_min, j.weight,
                        j.required, j.slots) for j in fleet.jobs)
    return IntFleet(jobs=jobs, pools=fleet.pools, horizon_min=fleet.horizon_min, objective=fleet.objective)


def test_more_gpus_and_later_deadlines_never_make_the_optimum_worse() -> None:
    """Lexicographically (unserved penalty, cost): more capacity may serve more jobs (costing more)
    but never serves fewer, and never costs more for the same service."""
    improved = 0
    for seed in range(60):
        fleet = random_fleet(seed, "cost")
        base = solved_key(fleet)
        for changed in (_grown(fleet, 4), _later(fleet, 10)):
            key = solved_key(changed)
            assert key <= base, seed
            improved += key < base
    assert improved > 0  # some fleets really were bound by capacity or deadlines


def test_the_energy_relaxation_never_costs_more_than_the_optimum() -> None:
    """The cost stage's hint starts from the model without start times, each pool's cumulative
    replaced by its energy cuts. Those cuts (also in the full model) must be valid: the relaxation
    at the optimal served penalty never costs more than the brute-force optimum. They must also
    bite: on some fleets the relaxation costs more than the same model without them."""
    bites = 0
    for seed in SEEDS:
        fleet = random_fleet(seed, "cost")
        penalty, cost, _ = brute_optimum(fleet)  # type: ignore[misc]
        none: list[int | None] = [None] * len(fleet.jobs)
        slots = fleet_build.relaxed_assignment(fleet, penalty, 20.0, 1, 0, none, set(), set())
        assert slots is not None, seed
        relaxed = sum(job.slots[c].cost_cents for job, c in zip(fleet.jobs, slots) if c is not None)
        assert relaxed <= cost, seed
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(fleet_build, "add_energy_cuts", lambda *args: None)
            loose = fleet_build.relaxed_assignment(fleet, penalty, 20.0, 1, 0, none, set(), set())
        bites += relaxed > sum(job.slots[c].cost_cents for job, c in zip(fleet.jobs, loose) if c is not None)
    assert bites > 0


class _ProbeNeverProves(FleetSession):
    """The served and cost stages' probes reported as stopped by the time limit, so that every tiny
    fleet takes the relaxation, repair and local-move hints before CP-SAT's second runs."""

    hints: list[IntSchedule]

    def _stage(self, name, limit_s):  # type: ignore[no-untyped-def]
        report = super()._stage(name, limit_s)
        probed = getattr(self, "probed", set())
        if name in ("served", "cost") and name not in probed:
            self.probed = probed | {name}
            if report.status == "optimal":
                report.status = "feasible"
                self.interrupted = False
        return report

    def _relaxed_hint(self, name, served, value, limit_s):  # type: ignore[no-untyped-def]
        before = self.best
        super()._relaxed_hint(name, served, value + 1, limit_s)  # accept a hint as good as the probe's too
        self.hints = getattr(self, "hints", []) + ([self.best] if self.best is not before else [])


@pytest.mark.parametrize("relax", [True, False])
def test_the_relaxed_hint_keeps_the_optimum_and_every_schedule_valid(relax: bool, monkeypatch) -> None:
    """Through the two-run served and cost stages (the relaxation's hint, then the LNS; or the LNS
    alone, as the session runs) the answer is still the brute-force optimum, and every hint the
    repair and the local moves hand CP-SAT is itself a valid schedule."""
    monkeypatch.setattr(fleet_model, "LNS_RELAX", relax)
    hinted = 0
    for seed in SEEDS:
        fleet = random_fleet(seed, "cost")
        session = _ProbeNeverProves(fleet, time_limit_s=20.0)
        schedule = session.run()
        assert schedule.status == "optimal", (seed, schedule.stages)
        assert tuple(s.value for s in schedule.stages) == brute_optimum(fleet), seed
        check_schedule(fleet, schedule)
        for hint in getattr(session, "hints", []):
            check_schedule(fleet, hint)
            assert valid(fleet, hint)
            hinted += 1
    assert hinted > len(SEEDS) // 4 if relax else hinted == 0


def _checked(fleet: IntFleet, schedule: IntSchedule) -> bool:
    try:
        check_schedule(fleet, schedule)
    except AssertionError:
        return False
    return all(c is None or fleet.usable(job, job.slots[c]) for job, c in zip(fleet.jobs, schedule.slot))


def test_repair_cheapen_and_valid_on_random_assignments() -> None:
    """valid() agrees with the minute-by-minute check on random (mostly invalid) schedules; repair()
    of a random assignment and cheapen() of the result are valid, and cheapen() keeps every served
    job served at no higher cost."""
    agreed_invalid = 0
    for seed in range(200):
        fleet = random_fleet(seed, "cost")
        rng = random.Random(seed)
        slots = [rng.choice([None, *(c for c, s in enumerate(job.slots) if fleet.usable(job, s))])
                 for job in fleet.jobs]
        starts = [None if c is None else rng.randint(job.release_min, max(job.release_min, fleet.latest_end(job)
                                                                           - job.slots[c].duration_min))
                  for job, c in zip(fleet.jobs, slots)]
        random_schedule = IntSchedule(slot=slots, start_min=starts)
        assert valid(fleet, random_schedule) == _checked(fleet, random_schedule), seed
        agreed_invalid += not _checked(fleet, random_schedule)
        repaired = repair(fleet, slots, sum(fleet.unserved_penalties()), time.perf_counter() + 5)
        assert valid(fleet, repaired) and _checked(fleet, repaired), seed
        cheaper = cheapen(fleet, repaired, time.perf_counter() + 5)
        assert valid(fleet, cheaper) and _checked(fleet, cheaper), seed
        assert [c is None for c in cheaper.slot] == [c is None for c in repaired.slot], seed
        cost = [sum(job.slots[c].cost_cents for job, c in zip(fleet.jobs, s.slot) if c is not None)
                for s in (repaired, cheaper)]
        assert cost[1] <= cost[0], seed
    assert agreed_invalid > 20
