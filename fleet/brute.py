"""Brute-force oracle for tiny fleets: every choice of slot per job, every order per pool.

Built only from the IntFleet (not from the CP-SAT model): for each assignment of jobs to slots
(or to nobody), each pool is scheduled independently by the serial schedule-generation scheme
(each job in a given order at its earliest start where the pool has its GPUs for its whole
duration). Over all orders the serial scheme produces every active schedule, and an active
schedule is optimal for any regular objective (makespan, weighted tardiness, feasibility under
deadlines; Kolisch 1996, "Serial and parallel resource-constrained project scheduling methods
revisited"). The answer is the lexicographic optimum the model's stages minimise.
"""

from __future__ import annotations

from functools import cache
from itertools import permutations, product

from vramplan.fleet.domain import IntFleet
from vramplan.fleet.sgs import earliest_start


def _pool_best(fleet: IntFleet, pool_index: int, items: tuple[tuple[int, int], ...]) -> tuple[int, int] | None:
    """(makespan, weighted tardiness) minimised over orders for the (job, slot) pairs on one pool,
    lexicographically in the order of the fleet's objective; None if no order meets the deadlines."""
    best = None
    for order in permutations(items):
        placed: list[tuple[int, int, int]] = []
        late = 0
        for j, c in order:
            job = fleet.jobs[j]
            slot = job.slots[c]
            start = earliest_start(fleet, pool_index, placed, job.release_min, slot.duration_min, slot.gpus)
            if start is None or start + slot.duration_min > fleet.latest_end(job):
                break
            placed.append((start, start + slot.duration_min, slot.gpus))
            if job.deadline_min is not None:
                late += job.weight * max(0, start + slot.duration_min - job.deadline_min)
        else:
            makespan = max((e for _, e, _ in placed), default=0)
            key = (late, makespan) if fleet.objective == "tardiness" else (makespan, late)
            best = key if best is None or key < best else best
    if best is None:
        return None
    return (best[1], best[0]) if fleet.objective == "tardiness" else best


def brute_optimum(fleet: IntFleet) -> tuple[int, ...] | None:
    """The lexicographic optimum (unserved penalty, primary objective, tie-break) over all schedules."""
    penalties = fleet.unserved_penalties()

    @cache
    def pool_best(pool_index: int, items: tuple[tuple[int, int], ...]) -> tuple[int, int] | None:
        return _pool_best(fleet, pool_index, items)

    options = [[None] + [c for c, slot in enumerate(job.slots) if fleet.usable(job, slot)] for job in fleet.jobs]
    best: tuple[int, ...] | None = None
    for combo in product(*options):
        penalty = sum(p for p, c in zip(penalties, combo) if c is None)
        cost = sum(job.slots[c].cost_cents for job, c in zip(fleet.jobs, combo) if c is not None)
        makespan = tardiness = 0
        feasible = True
        for p in range(len(fleet.pools)):
            items = tuple((j, c) for j, c in enumerate(combo) if c is not None and fleet.jobs[j].slots[c].pool == p)
            if not items:
                continue
            result = pool_best(p, items)
            if result is None:
                feasible = False
                break
            makespan, tardiness = max(makespan, result[0]), tardiness + result[1]
        if not feasible:
            continue
        committed = sum(job.slots[c].gpus * job.slots[c].duration_min for job, c in zip(fleet.jobs, combo)
                        if c is not None and fleet.pools[job.slots[c].pool].committed)
        key = {"cost": (penalty, cost, committed), "makespan": (penalty, makespan, cost),
               "tardiness": (penalty, tardiness, cost)}[fleet.objective]
        best = key if best is None or key < best else best
    return best
