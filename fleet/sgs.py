"""The serial schedule-generation scheme: each job, in a given order, at its earliest start where
its pool has the GPUs for its whole duration (fleet/profile.py). The brute-force oracle runs it
over every order; left_shift() runs it in the order of a CP-SAT schedule, so that no job waits
needlessly (the cost objective does not care when a job starts; a planner does)."""

from __future__ import annotations

import time

from vramplan.fleet.clock import left
from vramplan.fleet.domain import IntFleet, IntSchedule
from vramplan.fleet.profile import Profile

CHECK_EVERY_JOBS = 64  # greedy() and left_shift() look at the clock once per this many jobs


def earliest_start(fleet: IntFleet, pool_index: int, placed: list[tuple[int, int, int]], release: int,
                   duration: int, gpus: int) -> int | None:
    """Earliest start >= release where `gpus` more GPUs fit for `duration` beside `placed` (start, end, gpus)."""
    if fleet.pools[pool_index].windows is None:
        return release
    return Profile(fleet, pool_index, placed).earliest(release, duration, gpus)


class _Pools:
    """The profiles of the bounded pools as jobs are placed one by one."""

    def __init__(self, fleet: IntFleet) -> None:
        self.fleet = fleet
        self.profiles: dict[int, Profile] = {}

    def earliest(self, j: int, c: int, latest_end: int | None = None) -> int | None:
        job, fleet = self.fleet.jobs[j], self.fleet
        slot = job.slots[c]
        if fleet.pools[slot.pool].windows is None:
            return job.release_min if latest_end is None or job.release_min + slot.duration_min <= latest_end else None
        if slot.pool not in self.profiles:
            self.profiles[slot.pool] = Profile(fleet, slot.pool)
        return self.profiles[slot.pool].earliest(job.release_min, slot.duration_min, slot.gpus, latest_end)

    def take(self, j: int, c: int, start: int) -> None:
        slot = self.fleet.jobs[j].slots[c]
        if slot.pool in self.profiles:
            self.profiles[slot.pool].take(start, start + slot.duration_min, slot.gpus)


def left_shift(fleet: IntFleet, schedule: IntSchedule, until: float | None = None) -> IntSchedule:
    """The same slots, each job started as early as the jobs before it (by start) allow.

    In start order every job's earliest start is at most its start in the given schedule, so ends
    only move earlier: deadlines, makespan and lateness can only improve. Should a job find no
    start (it cannot when the schedule is valid), or `until` pass first, the schedule is returned
    unchanged."""
    order = sorted((s, j) for j, s in enumerate(schedule.start_min) if s is not None and schedule.slot[j] is not None)
    pools = _Pools(fleet)
    starts = list(schedule.start_min)
    for k, (original, j) in enumerate(order):
        c = schedule.slot[j]
        start = pools.earliest(j, c)  # type: ignore[arg-type]
        if start is None or start > original or k % CHECK_EVERY_JOBS == 0 and left(until) <= 0:
            return schedule
        pools.take(j, c, start)  # type: ignore[arg-type]
        starts[j] = start
    return IntSchedule(slot=list(schedule.slot), start_min=starts, stages=schedule.stages,
                       interrupted=schedule.interrupted)


def greedy(fleet: IntFleet, until: float | None = None) -> IntSchedule:
    """A first schedule for CP-SAT's hint: required jobs first, then by deadline and priority; each
    takes its cheapest (then shortest) slot that the serial scheme can place in its window. The
    jobs not reached when `until` passes stay unserved (the schedule is valid all the same)."""
    order = sorted(range(len(fleet.jobs)), key=lambda j: (
        not fleet.jobs[j].required, fleet.latest_end(fleet.jobs[j]), -fleet.jobs[j].weight, j))
    pools = _Pools(fleet)
    slots: list[int | None] = [None] * len(fleet.jobs)
    starts: list[int | None] = [None] * len(fleet.jobs)
    for k, j in enumerate(order):
        if k % CHECK_EVERY_JOBS == 0 and left(until) <= 0:
            break
        job = fleet.jobs[j]
        choices = sorted((s.cost_cents, s.duration_min, s.gpus, c) for c, s in enumerate(job.slots) if fleet.usable(job, s))
        for *_, c in choices:
            start = pools.earliest(j, c, fleet.latest_end(job))
            if start is not None:
                pools.take(j, c, start)
                slots[j], starts[j] = c, start
                break
    return IntSchedule(slot=slots, start_min=starts)


def valid(fleet: IntFleet, schedule: IntSchedule) -> bool:
    """Every served job inside its window, and no pool over its GPUs at any start or window edge."""
    per_pool: dict[int, list[tuple[int, int, int]]] = {}
    for job, c, start in zip(fleet.jobs, schedule.slot, schedule.start_min):
        if c is None:
            continue
        slot = job.slots[c]
        if start is None or not fleet.usable(job, slot) or start < job.release_min or \
                start + slot.duration_min > fleet.latest_end(job):
            return False
        per_pool.setdefault(slot.pool, []).append((start, start + slot.duration_min, slot.gpus))
    for p, placed in per_pool.items():
        pool = fleet.pools[p]
        if pool.windows is None:
            continue
        checks = {s for s, _, _ in placed} | {w.from_min for w in pool.windows} | {w.to_min for w in pool.windows}
        if any(sum(g for s, e, g in placed if s <= t < e) > (pool.gpus_at(t) or 0) for t in checks):
            return False
    return True


class _Placement:
    """A schedule under construction: the jobs on each pool, for serial-scheme moves."""

    def __init__(self, fleet: IntFleet, schedule: IntSchedule) -> None:
        self.fleet = fleet
        self.slot, self.start = list(schedule.slot), list(schedule.start_min)
        self.on: dict[int, set[int]] = {}
        for j, c in enumerate(self.slot):
            if c is not None:
                self.on.setdefault(fleet.jobs[j].slots[c].pool, set()).add(j)

    def busy(self, pool: int, skip: tuple[int, ...] = ()) -> list[tuple[int, int, int]]:
        jobs = self.fleet.jobs
        return [(self.start[k], self.start[k] + jobs[k].slots[self.slot[k]].duration_min,  # type: ignore[index,operator]
                 jobs[k].slots[self.slot[k]].gpus) for k in self.on.get(pool, ()) if k not in skip]  # type: ignore[index]

    def fit(self, j: int, c: int, skip: tuple[int, ...] = (), extra: tuple[tuple[int, int, int], ...] = ()) -> int | None:
        job = self.fleet.jobs[j]
        slot = job.slots[c]
        start = earliest_start(self.fleet, slot.pool, self.busy(slot.pool, skip) + list(extra), job.release_min,
                               slot.duration_min, slot.gpus)
        return start if start is not None and start + slot.duration_min <= self.fleet.latest_end(job) else None

    def move(self, j: int, c: int | None, start: int | None) -> None:
        if self.slot[j] is not None:
            self.on[self.fleet.jobs[j].slots[self.slot[j]].pool].discard(j)  # type: ignore[index]
        self.slot[j], self.start[j] = c, start
        if c is not None:
            self.on.setdefault(self.fleet.jobs[j].slots[c].pool, set()).add(j)

    def cost(self, j: int) -> int:
        c = self.slot[j]
        return 0 if c is None else self.fleet.jobs[j].slots[c].cost_cents

    def schedule(self) -> IntSchedule:
        return IntSchedule(slot=list(self.slot), start_min=list(self.start))

    def usable(self, j: int) -> list[int]:
        job = self.fleet.jobs[j]
        return sorted((c for c, s in enumerate(job.slots) if self.fleet.usable(job, s)),
                      key=lambda c: (job.slots[c].cost_cents, job.slots[c].duration_min, c))

    def place_by_ejecting(self, j: int, slots: list[int], gain: float) -> bool:
        """Put job j on one of `slots` by moving one job k of that pool to another of k's slots,
        when k's extra cost is below `gain`; False (nothing changed) when no such pair exists."""
        jobs = self.fleet.jobs
        for c in slots:
            pool = jobs[j].slots[c].pool
            for k in sorted(self.on.get(pool, ()), key=lambda k: (self.cost(k), k)):
                start = self.fit(j, c, skip=(k, j))
                if start is None:
                    continue
                taken = ((start, start + jobs[j].slots[c].duration_min, jobs[j].slots[c].gpus),)
                for c2 in self.usable(k):
                    if c2 == self.slot[k] or jobs[k].slots[c2].cost_cents - self.cost(k) >= gain:
                        continue
                    start2 = self.fit(k, c2, skip=(k, j), extra=taken if jobs[k].slots[c2].pool == pool else ())
                    if start2 is not None:
                        self.move(j, c, start)
                        self.move(k, c2, start2)
                        return True
        return False


def _place_anywhere(placement: _Placement, j: int, deadline_s: float) -> None:
    """Job j on the first usable slot with room at some start, else (time allowing) on one made
    by moving one other job aside."""
    for c in placement.usable(j):
        start = placement.fit(j, c)
        if start is not None:
            placement.move(j, c, start)
            return
    if time.perf_counter() < deadline_s:
        placement.place_by_ejecting(j, placement.usable(j), float("inf"))


def _repair_once(fleet: IntFleet, slots: list[int | None], first: set[int], budget: int, latest_start: bool,
                 deadline_s: float) -> IntSchedule:
    placement = _Placement(fleet, IntSchedule(slot=[None] * len(fleet.jobs), start_min=[None] * len(fleet.jobs)))
    order = sorted((j for j, c in enumerate(slots) if c is not None), key=lambda j: (
        j not in first, fleet.latest_end(fleet.jobs[j]) - latest_start * fleet.jobs[j].slots[slots[j]].duration_min,
        fleet.jobs[j].release_min, j))
    failed = []
    for j in order:
        start = placement.fit(j, slots[j])  # type: ignore[arg-type]
        if start is not None:
            placement.move(j, slots[j], start)
        else:
            failed.append(j)
    for j in failed:
        _place_anywhere(placement, j, deadline_s)
    # Over the penalty budget: serve jobs the assignment left out instead (other jobs of the same
    # penalty may fit where the lost ones do not), the most penalised first.
    penalties = fleet.unserved_penalties()
    for j in sorted((j for j, c in enumerate(slots) if c is None), key=lambda j: (-penalties[j], j)):
        if sum(p for p, c in zip(penalties, placement.slot) if c is None) <= budget:
            break
        _place_anywhere(placement, j, deadline_s)
    return placement.schedule()


def repair(fleet: IntFleet, slots: list[int | None], budget: int, deadline_s: float, tries: int = 8) -> IntSchedule:
    """A schedule for an assignment that only respects capacity on average (the energy relaxation):
    jobs in order of latest end (and again by latest start), each on its assigned slot at its earliest start, else on its
    cheapest slot that fits, else by moving one job out of the way; while the unserved penalty is
    above `budget`, jobs the assignment left unserved are placed where they fit. Jobs that still do
    not fit go first in the next try; the try that leaves the least penalty unserved is returned."""
    penalties = fleet.unserved_penalties()
    best, best_key = None, None
    for latest_start in (False, True):
        first: set[int] = set()
        for _ in range(tries):
            schedule = _repair_once(fleet, slots, first, budget, latest_start, deadline_s)
            lost = [j for j, c in enumerate(slots) if c is not None and schedule.slot[j] is None]
            key = (max(budget, sum(p for p, c in zip(penalties, schedule.slot) if c is None)),
                   sum(fleet.jobs[j].slots[c].cost_cents for j, c in enumerate(schedule.slot) if c is not None))
            if best_key is None or key < best_key:
                best, best_key = schedule, key
            if key[0] <= budget or time.perf_counter() >= deadline_s or first >= set(lost):
                break
            first |= set(lost)
    return best  # type: ignore[return-value]


def cheapen(fleet: IntFleet, schedule: IntSchedule, deadline_s: float) -> IntSchedule:
    """Local search for the cost stage's hint: move a job to a cheaper slot where it fits beside the
    others, or where it fits once one job of that pool moves to a slot costing less extra than the
    move saves. Served jobs stay served; every move keeps the schedule valid."""
    placement = _Placement(fleet, schedule)
    improved = True
    while improved and time.perf_counter() < deadline_s:
        improved = False
        for j in sorted((j for j, c in enumerate(placement.slot) if c is not None), key=lambda j: -placement.cost(j)):
            if time.perf_counter() >= deadline_s:
                break
            current = placement.cost(j)
            cheaper = [c for c in placement.usable(j) if fleet.jobs[j].slots[c].cost_cents < current]
            start = next(((c, s) for c in cheaper if (s := placement.fit(j, c, skip=(j,))) is not None), None)
            if start is not None:
                placement.move(j, *start)
                improved = True
                continue
            for c in cheaper:
                if placement.place_by_ejecting(j, [c], current - fleet.jobs[j].slots[c].cost_cents):
                    improved = True
                    break
    return placement.schedule()
