"""Why a job went unserved, and the smallest change that would serve it.

For a job with usable slots, the change is found by re-solving the fleet with every job the
schedule serves still served and this job served too:
- a later deadline: the earliest end this job can have (deadline removed, capacity as is);
- more GPUs: per bounded pool of its slots, the fewest extra GPUs (whole instances, the same
  number at every minute) found by bisection; adding the GPUs of its smallest slot always works,
  so the bisection has an upper end.
The binding pool is the one with the smallest extra capacity, its window the job's own.
Every solve stops at the run's budget (`until`): one the budget cut short raises TimeUp rather than
count as "impossible", so an explanation is whole or says it ran out of time (fleet/planner.py).
"""

from __future__ import annotations

import time
from dataclasses import replace
from itertools import pairwise

from ortools.sat.python import cp_model

from vramplan.fleet.build import build
from vramplan.fleet.clock import TimeUp, left
from vramplan.fleet.domain import (
    MINUTES_PER_HOUR,
    IntFleet,
    IntJob,
    IntPool,
    IntSchedule,
    Window,
)

EXPLAIN_TIME_LIMIT_S = 2.0
MIN_SOLVE_S = 0.05  # less of the budget left than this: no solve starts


def _hours(minutes: int) -> str:
    return f"{minutes / MINUTES_PER_HOUR:g} h"


def _feasible(fleet: IntFleet, served: list[int], minimise_end_of: int | None = None,
              until: float | None = None) -> int | None:
    """With the jobs `served` all served: None if impossible (or unproven in EXPLAIN_TIME_LIMIT_S), else
    the job's end (or 0); TimeUp when the budget ends before the answer."""
    if left(until) < MIN_SOLVE_S:
        raise TimeUp
    model, v, _ = build(fleet, until)
    for j in served:
        model.add(v.unserved[j] == 0)
    if minimise_end_of is not None:
        model.minimize(v.end[minimise_end_of])
    solver = cp_model.CpSolver()
    limit = min(EXPLAIN_TIME_LIMIT_S, left(until))
    if limit < MIN_SOLVE_S:
        raise TimeUp
    solver.parameters.max_time_in_seconds = limit
    solver.parameters.num_workers = 1
    code = solver.solve(model)
    if code == cp_model.UNKNOWN and limit < EXPLAIN_TIME_LIMIT_S:
        raise TimeUp
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return solver.value(v.end[minimise_end_of]) if minimise_end_of is not None else 0


def _with_extra(pool: IntPool, extra_gpus: int, horizon_min: int) -> IntPool:
    """The pool with `extra_gpus` more over the windows it has (none where it has no GPUs: "+N GPUs of
    the pool" does not make it available after its last window ends)."""
    points = sorted({0, horizon_min, *(w.from_min for w in pool.windows or ()), *(w.to_min for w in pool.windows or ())})
    windows = tuple(Window(s, e, gpus + extra_gpus if gpus else 0)
                    for s, e in pairwise(points) if s < e for gpus in (pool.gpus_at(s) or 0,))
    return replace(pool, windows=windows)


def _stretches(pool: IntPool, gpus: int, start: int, end: int) -> list[tuple[int, int]]:
    """The maximal stretches [from, to) of [start, end) over which the pool has at least `gpus` GPUs
    (before any job takes them): a plan of that many GPUs needs its whole duration inside one."""
    if pool.windows is None:
        return [(start, end)]
    points = sorted({start, end, *(w.from_min for w in pool.windows if start < w.from_min < end),
                     *(w.to_min for w in pool.windows if start < w.to_min < end)})
    stretches: list[tuple[int, int]] = []
    for s, e in pairwise(points):
        if (pool.gpus_at(s) or 0) < gpus:
            continue
        if stretches and stretches[-1][1] == s:
            stretches[-1] = (stretches[-1][0], e)
        else:
            stretches.append((s, e))
    return stretches


def _longest_run_min(pool: IntPool, gpus: int, start: int, end: int) -> int:
    """The longest of the pool's stretches with `gpus` GPUs in [start, end)."""
    return max((e - s for s, e in _stretches(pool, gpus, start, end)), default=0)


def _earliest_end_min(pool: IntPool, gpus: int, duration: int, start: int, end: int) -> int | None:
    """The earliest minute a plan of `gpus` GPUs and `duration` minutes, started at or after `start`,
    ends by `end` inside one of the pool's stretches with those GPUs; None if none is long enough."""
    return next((s + duration for s, e in _stretches(pool, gpus, start, end) if e - s >= duration), None)


def _reaches_horizon(pool: IntPool, gpus: int, horizon_min: int) -> bool:
    """Whether the pool has `gpus` GPUs until the horizon: a longer horizon gives it more time
    (its windows do not end first)."""
    return pool.windows is None or (pool.gpus_at(horizon_min - 1) or 0) >= gpus


def _unavailable(fleet: IntFleet, job: IntJob, slots: list) -> str | None:
    """Why no plan can run whatever the other jobs do: every usable plan needs longer than its pool
    has its GPUs within the job's window (a pool whose windows end first); None otherwise."""
    end = fleet.latest_end(job)
    if any(_longest_run_min(fleet.pools[s.pool], s.gpus, job.release_min, end) >= s.duration_min for s in slots):
        return None
    fastest = min(slots, key=lambda s: s.duration_min)
    pool = fleet.pools[fastest.pool]
    longest = _longest_run_min(pool, fastest.gpus, job.release_min, end)
    more = ("a later deadline or a longer horizon (--horizon-days)" if _reaches_horizon(pool, fastest.gpus, fleet.horizon_min)
            else "more time in its windows (available_to)")
    return (f"no pool has a plan's GPUs for the whole of it within the window {_window_text(fleet, job)}: the fastest "
            f"needs {fastest.gpus} GPUs of pool {pool.name} for {_hours(fastest.duration_min)}, and the pool has them "
            f"for {_hours(longest)} at most there; {more} would serve it")


def _extra_gpus(fleet: IntFleet, served: list[int], j: int, p: int, step: int, until: float | None) -> int | None:
    job = fleet.jobs[j]
    upper = min(s.gpus for s in job.slots if s.pool == p and fleet.usable(job, s))
    low, high = 0, -(-upper // step)  # in instances; high always suffices
    while high - low > 1:
        middle = (low + high) // 2
        pools = list(fleet.pools)
        pools[p] = _with_extra(fleet.pools[p], middle * step, fleet.horizon_min)
        if _feasible(replace(fleet, pools=tuple(pools)), served + [j], until=until) is not None:
            high = middle
        else:
            low = middle
    return high * step


def _window_text(fleet: IntFleet, job: IntJob) -> str:
    return f"{job.release_min / MINUTES_PER_HOUR:g}-{_hours(fleet.latest_end(job))}"


def explain_unserved(fleet: IntFleet, schedule: IntSchedule, j: int, pool_steps: list[int],
                     budget_s: float = 10.0, until: float | None = None) -> str:
    """One line: the binding pool and window, and the smallest extra capacity or later deadline;
    TimeUp when the run's budget (`until`) ends first."""
    job = fleet.jobs[j]
    usable = [s for s in job.slots if fleet.usable(job, s)]
    if not usable:
        if job.release_min >= fleet.horizon_min:  # it read "the window 5000-2184 h is shorter than the fastest plan"
            return (f"the job's earliest start ({_hours(job.release_min)}) is at or after the end of the horizon "
                    f"({_hours(fleet.horizon_min)}): raise --horizon-days (horizon_hours) or start it earlier")
        fastest = min(job.slots, key=lambda s: s.duration_min)
        capacity = fleet.pools[fastest.pool].capacity_gpus
        if capacity is not None and all(s.gpus > (fleet.pools[s.pool].capacity_gpus or 0) for s in job.slots):
            smallest = min(job.slots, key=lambda s: s.gpus)
            return (f"every plan needs more GPUs than its pool has: the smallest takes {smallest.gpus} GPUs of "
                    f"pool {fleet.pools[smallest.pool].name} ({fleet.pools[smallest.pool].capacity_gpus} GPUs); "
                    f"add {smallest.gpus - (fleet.pools[smallest.pool].capacity_gpus or 0)} GPUs to it")
        shorter = (f"the window {_window_text(fleet, job)} is shorter than the fastest plan "
                   f"({_hours(fastest.duration_min)} on pool {fleet.pools[fastest.pool].name}, {fastest.gpus} GPUs)")
        # the earliest any plan can end, alone, where its pool has its GPUs throughout (windows and their gaps)
        ends = [(end, k) for k, slot in enumerate(job.slots)
                if (end := _earliest_end_min(fleet.pools[slot.pool], slot.gpus, slot.duration_min, job.release_min,
                                             fleet.horizon_min)) is not None]
        if ends:
            end, k = min(ends)
            slot = job.slots[k]
            return (f"{shorter}; a deadline of {_hours(end)} would fit it (on pool {fleet.pools[slot.pool].name}, "
                    f"{slot.gpus} GPUs, alone)")
        if any(_reaches_horizon(fleet.pools[slot.pool], slot.gpus, fleet.horizon_min) for slot in job.slots):
            return f"{shorter}, and no deadline fits it before the horizon ends: raise --horizon-days"
        longest = _longest_run_min(fleet.pools[fastest.pool], fastest.gpus, job.release_min, fleet.horizon_min)
        return (f"{shorter}, and no deadline fits it: the pool has those GPUs for {_hours(longest)} at most; more time "
                "in its windows (available_to) would serve it")
    unavailable = _unavailable(fleet, job, usable)
    if unavailable is not None:  # no extra GPUs in the windows, nor a later deadline inside them, serves it
        return unavailable
    started = time.perf_counter()
    served = [i for i, c in enumerate(schedule.slot) if c is not None]
    proven = bool(schedule.stages) and schedule.stages[0].name == "served" and schedule.stages[0].status == "optimal"
    if not proven and _feasible(fleet, served + [j], until=until) is not None:
        return ("it fits beside the scheduled jobs as they are: the solve stopped at its time limit before "
                "serving it; a longer --time-limit would")
    parts = []
    options = []
    for p in sorted({s.pool for s in usable if fleet.pools[s.pool].windows is not None}):
        if time.perf_counter() - started > budget_s:
            break
        extra = _extra_gpus(fleet, served, j, p, max(1, pool_steps[p]), until)
        if extra is not None:
            options.append((extra, p))
    if options:
        extra, p = min(options)
        parts.append(f"pool {fleet.pools[p].name} is full over the job's window {_window_text(fleet, job)}; "
                     f"+{extra} GPUs of pool {fleet.pools[p].name} would serve it")
    if job.deadline_min is not None and fleet.hard_deadlines and time.perf_counter() - started <= budget_s:
        relaxed = list(fleet.jobs)
        relaxed[j] = replace(job, deadline_min=None)
        end = _feasible(replace(fleet, jobs=tuple(relaxed)), served + [j], minimise_end_of=j, until=until)
        if end is not None:
            parts.append(f"or a deadline of {_hours(end)} (+{_hours(end - job.deadline_min)})")
    if not parts:
        return f"capacity over the window {_window_text(fleet, job)} is taken by jobs of higher priority"
    return "; ".join(parts)
