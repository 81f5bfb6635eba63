"""Large-neighbourhood search for the fleet: re-solve a few jobs at a time with CP-SAT, the rest fixed.

CP-SAT's own LNS on a whole 200-job model moves slowly (docs/performance.md#fleet-stages). Each
neighbourhood here is a model of some 20-40 jobs, every other job a fixed interval on its pool, so
presolve and search take a fraction of a second and most neighbourhoods are solved to optimality.

A neighbourhood is the jobs nearest a random instant on a random set of pools (the jobs running
there, and unserved jobs whose window covers the instant): the jobs that compete for the same
GPU-minutes. The freed jobs may take any of their slots on those pools, or go unserved while the
fleet's unserved penalty stays within the served stage's level. A result replaces the incumbent
only when it is strictly better and the whole schedule passes sgs.valid, so the incumbent
is always a valid schedule (the answer on Ctrl-C or at the time limit).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from itertools import pairwise

from ortools.sat.python import cp_model

from vramplan.fleet.domain import IntFleet, IntSchedule
from vramplan.fleet.sgs import valid

log = logging.getLogger(__name__)

FIRST_SIZE_JOBS = 16  # jobs per neighbourhood at first; grows while neighbourhoods are proven quickly
MIN_SIZE_JOBS, MAX_SIZE_JOBS = 8, 80
SUBSOLVE_S = 1.0  # each neighbourhood's CP-SAT limit
MAX_EMPTY_DRAWS = 100  # neighbourhoods in a row with no job in them before the search gives up
RESTRICTED_SHARE = 0.8  # of the neighbourhoods, when a support is given (improve)
QUICK_SHARE = 0.25  # a neighbourhood proven within this share of the limit grows the next one


@dataclass
class LnsStats:
    neighbourhoods: int = 0
    improved: int = 0
    proven: int = 0
    history: list[tuple[float, int]] = field(default_factory=list)  # (seconds, objective) per improvement


def objective_value(fleet: IntFleet, schedule: IntSchedule, name: str) -> int:
    if name == "served":
        return sum(p for p, c in zip(fleet.unserved_penalties(), schedule.slot) if c is None)
    return sum(job.slots[c].cost_cents for job, c in zip(fleet.jobs, schedule.slot) if c is not None)


def stage_key(fleet: IntFleet, schedule: IntSchedule, name: str) -> tuple[int, int]:
    """What a neighbourhood improves: the stage's value, then (served stage) the cost."""
    return objective_value(fleet, schedule, name), objective_value(fleet, schedule, "cost")


def _pick(fleet: IntFleet, schedule: IntSchedule, rng: random.Random, size: int,
          name: str) -> tuple[list[int], set[int]]:
    """The `size` jobs nearest a target on a set of pools. Half the time the target is a costly job
    (drawn by its cost; for the served stage an unserved job by its penalty) and its window, over
    every pool: the jobs that would have to make room for it on a cheaper pool. Otherwise it is a
    random instant on a random set of pools (all of them half the time)."""
    penalties = fleet.unserved_penalties()
    weights = [penalties[j] if c is None else 0 for j, c in enumerate(schedule.slot)] if name == "served" else \
        [0 if c is None else fleet.jobs[j].slots[c].cost_cents for j, c in enumerate(schedule.slot)]
    bounded = [p for p, pool in enumerate(fleet.pools) if pool.windows is not None]
    pools = set(range(len(fleet.pools)))
    if rng.random() < 0.5 and sum(weights) > 0:
        target = rng.choices(range(len(weights)), weights=weights)[0]
        c = schedule.slot[target]
        job = fleet.jobs[target]
        around = (job.release_min, fleet.latest_end(job))
    else:
        if rng.random() < 0.5 and len(bounded) > 2:
            pools = set(rng.sample(bounded, rng.randint(2, max(2, len(bounded) // 2))))
        instant = rng.randrange(fleet.horizon_min)
        around = (instant, instant)
    distance = []
    for j, (job, c, start) in enumerate(zip(fleet.jobs, schedule.slot, schedule.start_min)):
        if c is not None:
            if job.slots[c].pool not in pools:
                continue
            begin, end = start, start + job.slots[c].duration_min  # type: ignore[operator]
        elif any(s.pool in pools and fleet.usable(job, s) for s in job.slots):
            begin, end = job.release_min, fleet.latest_end(job)
        else:
            continue
        distance.append((max(0, begin - around[1], around[0] - end), rng.random(), j))
    return [j for *_, j in sorted(distance)[:size]], pools


def _solve_neighbourhood(fleet: IntFleet, schedule: IntSchedule, free: list[int], pools: set[int], name: str,
                         budget: int, limit_s: float, solver: cp_model.CpSolver, seed: int,
                         support: dict[int, frozenset[int]] | None = None) -> tuple[IntSchedule | None, bool]:
    """(better schedule or None, proven optimal) for the freed jobs, all others fixed;
    run in a lane's thread with one CP-SAT worker (`solver` is the main thread's, for stop_search)."""
    model = cp_model.CpModel()
    penalties = fleet.unserved_penalties()
    freed = set(free)
    per_pool: dict[int, list[tuple[cp_model.IntervalVar, int]]] = {}
    literals: dict[int, dict[int, cp_model.IntVar]] = {}
    starts: dict[int, cp_model.IntVar] = {}
    lost: list[cp_model.LinearExprT] = []
    cost: list[cp_model.LinearExprT] = []
    for j in free:
        job = fleet.jobs[j]
        latest = max(job.release_min, fleet.latest_end(job))
        start = model.new_int_var(job.release_min, latest, f"s{j}")
        end = model.new_int_var(job.release_min, latest, f"e{j}")
        chosen = {}
        for c, slot in enumerate(job.slots):
            if slot.pool not in pools or not fleet.usable(job, slot) or _narrowed_out(fleet, schedule, support, j, c):
                continue
            literal = model.new_bool_var(f"x{j}_{c}")
            interval = model.new_optional_interval_var(start, slot.duration_min, end, literal, f"i{j}_{c}")
            if fleet.pools[slot.pool].windows is not None:
                per_pool.setdefault(slot.pool, []).append((interval, slot.gpus))
            chosen[c] = literal
            cost.append(slot.cost_cents * literal)
            model.add_hint(literal, schedule.slot[j] == c)
        none = model.new_bool_var(f"u{j}")
        model.add_exactly_one([*chosen.values(), none])
        model.add(start == job.release_min).only_enforce_if(none)
        model.add_hint(none, schedule.slot[j] is None)
        model.add_hint(start, job.release_min if schedule.slot[j] is None else schedule.start_min[j])
        lost.append(penalties[j] * none)
        literals[j], starts[j] = chosen, start
    # Fixed jobs matter only where a freed job may run.
    first = min(fleet.jobs[j].release_min for j in free)
    last = max(fleet.latest_end(fleet.jobs[j]) for j in free)
    for j, (job, c, start) in enumerate(zip(fleet.jobs, schedule.slot, schedule.start_min)):
        if j in freed or c is None or job.slots[c].pool not in per_pool:
            continue
        if start >= last or start + job.slots[c].duration_min <= first:  # type: ignore[operator]
            continue
        slot = job.slots[c]
        per_pool[slot.pool].append((model.new_fixed_size_interval_var(start, slot.duration_min, f"f{j}"), slot.gpus))
    for p, items in per_pool.items():
        pool = fleet.pools[p]
        capacity = pool.capacity_gpus or 0
        edges = sorted({0, fleet.horizon_min, *(w.from_min for w in pool.windows or ()),
                        *(w.to_min for w in pool.windows or ())})
        for begin, end in pairwise(edges):
            missing = capacity - (pool.gpus_at(begin) or 0)
            if missing > 0 and end > begin and begin < last and end > first:
                items.append((model.new_fixed_size_interval_var(begin, end - begin, f"b{p}_{begin}"), missing))
        model.add_cumulative([i for i, _ in items], [g for _, g in items], capacity)
    fixed_lost = sum(penalties[j] for j, c in enumerate(schedule.slot) if c is None and j not in freed)
    if name == "served":
        # Lexicographic within the neighbourhood: penalty first, then cost (so the cost stage starts cheaper).
        scale = 1 + sum(max((fleet.jobs[j].slots[c].cost_cents for c in literals[j]), default=0) for j in free)
        model.minimize(scale * sum(lost) + sum(cost))
    else:
        model.add(sum(lost) <= budget - fixed_lost)
        model.minimize(sum(cost))
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = seed
    solver.parameters.max_time_in_seconds = limit_s
    solver.parameters.cp_model_probing_level = 0
    # Lanes solve at once: CP-SAT's own SIGINT handler, installed and restored by each solve, would
    # be left behind by the overlapping ones; Ctrl-C reaches the main thread instead (improve()).
    solver.parameters.catch_sigint_signal = False
    code = solver.solve(model)
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, False
    slot, start_min = list(schedule.slot), list(schedule.start_min)
    for j in free:
        slot[j] = next((c for c, lit in literals[j].items() if solver.boolean_value(lit)), None)
        start_min[j] = solver.value(starts[j]) if slot[j] is not None else None
    return IntSchedule(slot=slot, start_min=start_min), code == cp_model.OPTIMAL


def _merged(best: IntSchedule, candidate: IntSchedule, free: list[int]) -> IntSchedule:
    """The incumbent with a neighbourhood's freed jobs as the candidate has them (the candidate
    itself when the incumbent is the schedule the neighbourhood was drawn from)."""
    slot, start_min = list(best.slot), list(best.start_min)
    for j in free:
        slot[j], start_min[j] = candidate.slot[j], candidate.start_min[j]
    return IntSchedule(slot=slot, start_min=start_min)


def _narrowed_out(fleet: IntFleet, schedule: IntSchedule, support: dict[int, frozenset[int]] | None, j: int,
                  c: int) -> bool:
    """Whether a narrowed neighbourhood leaves out job j's slot c: a slot of a bounded pool that is
    neither in the LP solution's support for the job nor the job's current slot."""
    return bool(support) and j in support and c not in support[j] and c != schedule.slot[j] and \
        fleet.pools[fleet.jobs[j].slots[c].pool].windows is not None


def improve(fleet: IntFleet, schedule: IntSchedule, name: str, budget: int, deadline_s: float, workers: int = 1,
            seed: int = 0, stats: LnsStats | None = None, on_better=None,
            max_neighbourhoods: int | None = None, bound: int | None = None,
            support: Callable[[], dict[int, frozenset[int]] | None] | None = None) -> tuple[IntSchedule, bool, bool]:
    """(the best schedule found, interrupted, proven optimal): neighbourhoods until `deadline_s`, or
    until the stage's value reaches `bound`, or until one neighbourhood holding every job and every
    pool is solved to optimality (then that is the stage's optimum); `on_better` sees every new
    incumbent (the session keeps it as its answer so far).

    `workers` neighbourhoods are solved at once, each by one CP-SAT worker in its own thread (the
    solve releases the GIL): one worker per neighbourhood proves as many as two, so two lanes solve
    about twice as many (docs/performance.md#fleet-stages). Each is drawn from the incumbent of its
    start; a result is merged into the incumbent of its end (its freed jobs as it placed them) and
    kept only if the merged schedule is strictly better and passes sgs.valid, so a lane whose
    jobs or pools another lane changed meanwhile can only be dropped, never make the schedule invalid."""
    stats = stats if stats is not None else LnsStats()
    rng = random.Random(seed)
    best, value = schedule, stage_key(fleet, schedule, name)
    size = FIRST_SIZE_JOBS
    began = time.perf_counter()
    optimal = bound is not None and value[0] <= bound
    empty, started = 0, 0
    running: dict[futures.Future, tuple[list[int], set[int], cp_model.CpSolver, float, float, bool]] = {}
    with futures.ThreadPoolExecutor(max(1, workers)) as lanes:
        try:
            while True:
                while not optimal and len(running) < max(1, workers) and empty <= MAX_EMPTY_DRAWS and \
                        (left := deadline_s - time.perf_counter()) > 0.05 and started != max_neighbourhoods:
                    free, pools = _pick(fleet, best, rng, size, name)
                    if not free:  # pools nobody uses (inventory dearer than the market): draw again, within reason
                        empty += 1
                        continue
                    empty, started = 0, started + 1
                    solver, limit = cp_model.CpSolver(), min(SUBSOLVE_S, left)
                    # `support()`: per job the slots of bound.py's LP solution; RESTRICTED_SHARE of the
                    # neighbourhoods offer a freed job only those (and its own), so CP-SAT proves them faster.
                    restricted = support() if support is not None and rng.random() < RESTRICTED_SHARE else None
                    task = lanes.submit(_solve_neighbourhood, fleet, best, free, pools, name, budget, limit, solver,
                                        rng.randrange(2**31), restricted)
                    running[task] = (free, pools, solver, limit, time.perf_counter(), restricted is not None)
                if not running:
                    break
                done, _ = futures.wait(running, return_when=futures.FIRST_COMPLETED)
                for task in done:
                    free, pools, _, limit, solved, narrowed = running.pop(task)
                    candidate, proven = task.result()
                    stats.neighbourhoods += 1
                    stats.proven += proven
                    quick = time.perf_counter() - solved < QUICK_SHARE * limit
                    size = min(MAX_SIZE_JOBS, size + 1) if proven and quick else size if proven else \
                        max(MIN_SIZE_JOBS, size - 2)
                    whole = proven and not narrowed and len(free) == len(fleet.jobs) and len(pools) == len(fleet.pools)
                    if candidate is None:
                        optimal = optimal or whole
                        continue
                    candidate = _merged(best, candidate, free)
                    new_value = stage_key(fleet, candidate, name)
                    if new_value < value and objective_value(fleet, candidate, "served") <= max(
                            budget, objective_value(fleet, best, "served")) and valid(fleet, candidate):
                        best, value = candidate, new_value
                        stats.improved += 1
                        stats.history.append((time.perf_counter() - began, value[0]))
                        if on_better is not None:
                            on_better(best)
                    optimal = optimal or whole or bound is not None and value[0] <= bound
        except KeyboardInterrupt:  # Ctrl-C: the incumbent stands
            for _, _, solver, *_ in running.values():
                solver.stop_search()
            return best, True, False
    log.info("fleet lns %s: %d neighbourhoods (%d proven, %d improving), value %s, last size %d", name,
             stats.neighbourhoods, stats.proven, stats.improved, value, size)
    return best, False, optimal
