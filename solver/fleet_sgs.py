"""The serial schedule-generation scheme: each job, in a given order, at its earliest start where
its pool has the GPUs for its whole duration. The brute-force oracle runs it over every order;
left_shift() runs it in the order of a CP-SAT schedule, so that no job waits needlessly (the cost
objective does not care when a job starts; a planner does)."""

from __future__ import annotations

from vramplan.solver.fleet_types import IntFleet, IntSchedule


def earliest_start(fleet: IntFleet, pool_index: int, placed: list[tuple[int, int, int]], release: int,
                   duration: int, gpus: int) -> int | None:
    """Earliest start >= release where `gpus` more GPUs fit for `duration` beside `placed` (start, end, gpus)."""
    pool = fleet.pools[pool_index]
    if pool.windows is None:
        return release
    bounds = {w.from_min for w in pool.windows} | {w.to_min for w in pool.windows}
    times = sorted({release, *(e for _, e, _ in placed), *(b for b in bounds if b >= release)})
    for t in times:
        if t < release or t + duration > fleet.horizon_min:
            continue
        checks = {t, *(s for s, _, _ in placed if t < s < t + duration), *(b for b in bounds if t < b < t + duration)}
        if all(sum(g for s, e, g in placed if s <= c < e) + gpus <= (pool.gpus_at(c) or 0) for c in checks):
            return t
    return None


def left_shift(fleet: IntFleet, schedule: IntSchedule) -> IntSchedule:
    """The same slots, each job started as early as the jobs before it (by start) allow.

    In start order every job's earliest start is at most its start in the given schedule, so ends
    only move earlier: deadlines, makespan and lateness can only improve. Should a job find no
    start (it cannot when the schedule is valid), the schedule is returned unchanged."""
    order = sorted((s, j) for j, s in enumerate(schedule.start_min) if s is not None and schedule.slot[j] is not None)
    placed: dict[int, list[tuple[int, int, int]]] = {}
    starts = list(schedule.start_min)
    for original, j in order:
        job = fleet.jobs[j]
        slot = job.slots[schedule.slot[j]]  # type: ignore[index]
        pool = placed.setdefault(slot.pool, [])
        start = earliest_start(fleet, slot.pool, pool, job.release_min, slot.duration_min, slot.gpus)
        if start is None or start > original:
            return schedule
        pool.append((start, start + slot.duration_min, slot.gpus))
        starts[j] = start
    return IntSchedule(slot=list(schedule.slot), start_min=starts, stages=schedule.stages,
                       interrupted=schedule.interrupted)


def greedy(fleet: IntFleet) -> IntSchedule:
    """A first schedule for CP-SAT's hint: required jobs first, then by deadline and priority; each
    takes its cheapest (then shortest) slot that the serial scheme can place in its window."""
    order = sorted(range(len(fleet.jobs)), key=lambda j: (
        not fleet.jobs[j].required, fleet.latest_end(fleet.jobs[j]), -fleet.jobs[j].weight, j))
    placed: dict[int, list[tuple[int, int, int]]] = {}
    slots: list[int | None] = [None] * len(fleet.jobs)
    starts: list[int | None] = [None] * len(fleet.jobs)
    for j in order:
        job = fleet.jobs[j]
        choices = sorted((s.cost_cents, s.duration_min, s.gpus, c) for c, s in enumerate(job.slots) if fleet.usable(job, s))
        for *_, c in choices:
            slot = job.slots[c]
            pool = placed.setdefault(slot.pool, [])
            start = earliest_start(fleet, slot.pool, pool, job.release_min, slot.duration_min, slot.gpus)
            if start is not None and start + slot.duration_min <= fleet.latest_end(job):
                pool.append((start, start + slot.duration_min, slot.gpus))
                slots[j], starts[j] = c, start
                break
    return IntSchedule(slot=slots, start_min=starts)
