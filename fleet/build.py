"""The fleet's CP-SAT model (fleet/model.py solves it in stages) and its energy relaxation.

build(): per job one literal per usable slot (plan x pool) and an `unserved` literal, exactly one
true; a start and an end shared by the job's slots, each slot an optional interval over them; per
bounded pool `add_cumulative` of the slots' GPUs against its largest capacity, fixed intervals
taking away what a window does not have, and redundant energy cuts over sampled [release,
deadline) windows (no schedule can put more GPU-minutes in a window than the pool has there).
relaxed_assignment(): the same choice of slots with the energy cuts standing in for the
cumulative and no start times: a cheap hint, repaired into a real schedule by sgs.py.
"""

from __future__ import annotations

import math
import signal
import threading
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
from ortools.sat.python import cp_model

from vramplan.fleet.clock import check
from vramplan.fleet.domain import IntFleet, IntPool

ENERGY_CUTS_PER_SIDE = 16
# At most about this many terms in one pool's cuts: 16 x 16 windows up to 3,906 slots on a pool
# (every fleet of the benchmark); fewer windows above, where 10,000 jobs on 4 pools (24,000 slots
# each) spent 6.7 s of a 9 s build on 25M terms (docs/performance.md#fleet).
ENERGY_TERMS_PER_POOL = 1_000_000
CHECK_EVERY_JOBS = 64  # build() looks at the clock once per this many jobs


@dataclass
class Vars:
    literals: list[dict[int, cp_model.IntVar]]  # per job: slot index -> literal
    unserved: list[cp_model.IntVar]
    start: list[cp_model.IntVar]
    end: list[cp_model.IntVar]


def _blocks(pool: IntPool, horizon_min: int) -> list[tuple[int, int, int]]:
    """(start, end, GPUs taken away) where a pool has fewer GPUs than its largest window."""
    capacity = pool.capacity_gpus or 0
    points = sorted({0, horizon_min, *(w.from_min for w in pool.windows or ()), *(w.to_min for w in pool.windows or ())})
    blocks = []
    for start, end in pairwise(points):
        if start >= horizon_min:
            break
        missing = capacity - (pool.gpus_at(start) or 0)
        if missing > 0 and end > start:
            blocks.append((start, min(end, horizon_min), missing))
    return blocks


def _energy(pool: IntPool, start: int, end: int) -> int:
    """GPU-minutes a pool has over [start, end)."""
    return sum(w.gpus * max(0, min(end, w.to_min) - max(start, w.from_min)) for w in pool.windows or ())


def _sample(values: set[int], most: int) -> list[int]:
    ordered = sorted(values)
    step = max(1, len(ordered) // most)
    return sorted(set(ordered[::step]) | ({ordered[-1]} if ordered else set()))


def add_energy_cuts(model: cp_model.CpModel, fleet: IntFleet, p: int,
                     items: list[tuple[int, int, cp_model.IntVar]], until: float | None = None) -> None:
    """Redundant linear cuts that give the LP what the cumulative implies: the GPU-minutes of the
    jobs that must run inside [r, d) (released at r or later, ending by d) fit in what the pool has
    there, for sampled releases r and latest ends d (ENERGY_CUTS_PER_SIDE each, fewer on pools of
    more than ENERGY_TERMS_PER_POOL / 16^2 slots). Demands are rounded down and capacities up to a unit that keeps each
    cut's coefficients below 2^30 (google/or-tools#5293), so the cuts stay valid relaxations."""
    pool = fleet.pools[p]
    per_side = max(2, min(ENERGY_CUTS_PER_SIDE, math.isqrt(ENERGY_TERMS_PER_POOL // max(1, len(items)))))
    literals = np.array([literal for _, _, literal in items], dtype=object)
    demands = [fleet.jobs[j].slots[c].gpus * fleet.jobs[j].slots[c].duration_min for j, c, _ in items]
    unit = max(1, -(-sum(demands) // 2**30))
    scaled = np.array([d // unit for d in demands], dtype=np.int64)
    ends = np.array([fleet.latest_end(fleet.jobs[j]) for j, _, _ in items], dtype=np.int64)
    releases = np.array([fleet.jobs[j].release_min for j, _, _ in items], dtype=np.int64)
    seen: set[bytes] = set()
    for r in _sample(set(releases.tolist()) | {0}, per_side):
        for d in _sample(set(ends[ends > r].tolist()) | {fleet.horizon_min}, per_side):
            check(until)
            inside = np.flatnonzero((releases >= r) & (ends <= d))
            if not inside.size or inside.tobytes() in seen:
                continue
            seen.add(inside.tobytes())
            terms = cp_model.LinearExpr.weighted_sum(literals[inside].tolist(), scaled[inside].tolist())
            model.add(terms <= -(-_energy(pool, r, d) // unit))


def build(fleet: IntFleet, until: float | None = None) -> tuple[cp_model.CpModel, Vars, dict[str, cp_model.LinearExprT]]:
    """The model (module docstring); TimeUp (fleet/clock.py) when `until` passes while it is built."""
    model = cp_model.CpModel()
    horizon = fleet.horizon_min
    literals, unserved, starts, ends = [], [], [], []
    per_pool: dict[int, list[tuple[cp_model.IntervalVar, int]]] = {}
    energy: dict[int, list[tuple[int, int, cp_model.IntVar]]] = {}
    for j, job in enumerate(fleet.jobs):
        if j % CHECK_EVERY_JOBS == 0:
            check(until)
        latest = max(job.release_min, fleet.latest_end(job))
        start = model.new_int_var(job.release_min, latest, f"start{j}")
        end = model.new_int_var(job.release_min, latest, f"end{j}")
        chosen: dict[int, cp_model.IntVar] = {}
        for c, slot in enumerate(job.slots):
            if not fleet.usable(job, slot):
                continue
            literal = model.new_bool_var(f"x{j}_{c}")
            interval = model.new_optional_interval_var(start, slot.duration_min, end, literal, f"i{j}_{c}")
            if fleet.pools[slot.pool].windows is not None:
                per_pool.setdefault(slot.pool, []).append((interval, slot.gpus))
                energy.setdefault(slot.pool, []).append((j, c, literal))
            chosen[c] = literal
        none = model.new_bool_var(f"unserved{j}")
        model.add_exactly_one([*chosen.values(), none])
        model.add(start == job.release_min).only_enforce_if(none)  # unserved jobs sit still
        literals.append(chosen)
        unserved.append(none)
        starts.append(start)
        ends.append(end)
    for p, items in per_pool.items():
        pool = fleet.pools[p]
        for s, e, gpus in _blocks(pool, horizon):
            items.append((model.new_fixed_size_interval_var(s, e - s, f"block{p}_{s}"), gpus))
        model.add_cumulative([i for i, _ in items], [g for _, g in items], pool.capacity_gpus)
        add_energy_cuts(model, fleet, p, energy[p], until)
    check(until)
    v = Vars(literals, unserved, starts, ends)
    return model, v, objectives(model, fleet, v)


def objectives(model: cp_model.CpModel, fleet: IntFleet, v: Vars) -> dict[str, cp_model.LinearExprT]:
    penalties = fleet.unserved_penalties()
    objectives: dict[str, cp_model.LinearExprT] = {
        "served": sum(p * u for p, u in zip(penalties, v.unserved)),
        "cost": sum(job.slots[c].cost_cents * lit for job, lits in zip(fleet.jobs, v.literals) for c, lit in lits.items()),
        "committed_gpu_hours": sum(job.slots[c].gpus * job.slots[c].duration_min * lit
                                   for job, lits in zip(fleet.jobs, v.literals) for c, lit in lits.items()
                                   if fleet.pools[job.slots[c].pool].committed),
    }
    if fleet.objective == "makespan":
        last = model.new_int_var(0, fleet.horizon_min, "makespan")
        for end, none in zip(v.end, v.unserved):
            model.add(last >= end).only_enforce_if(none.Not())
        objectives["makespan"] = last
    if fleet.objective == "tardiness":
        terms = []
        for j, job in enumerate(fleet.jobs):
            if job.deadline_min is None or job.weight == 0:
                continue
            late = model.new_int_var(0, fleet.horizon_min, f"late{j}")
            model.add(late >= v.end[j] - job.deadline_min).only_enforce_if(v.unserved[j].Not())
            terms.append(job.weight * late)
        objectives["tardiness"] = sum(terms)
    return objectives


def relaxed_assignment(fleet: IntFleet, served: int | None, limit_s: float, workers: int, seed: int,
                        hint: list[int | None], left_out: set[int], kept: set[int]) -> list[int | None] | None:
    """The cheapest slots (None: unserved) within the served penalty (or, when `served` is None,
    the slots of least unserved penalty), each bounded pool's energy cuts standing in for its
    cumulative, the jobs in `left_out` unserved and those in `kept` served; None when CP-SAT finds
    no assignment in time (or none exists)."""
    model = cp_model.CpModel()
    literals: list[dict[int, cp_model.IntVar]] = []
    energy: dict[int, list[tuple[int, int, cp_model.IntVar]]] = {}
    unserved = []
    for j, job in enumerate(fleet.jobs):
        chosen = {c: model.new_bool_var(f"x{j}_{c}") for c, slot in enumerate(job.slots) if fleet.usable(job, slot)}
        for c, literal in chosen.items():
            model.add_hint(literal, hint[j] == c)
            if fleet.pools[job.slots[c].pool].windows is not None:
                energy.setdefault(job.slots[c].pool, []).append((j, c, literal))
        none = model.new_bool_var(f"unserved{j}")
        model.add_hint(none, hint[j] is None)
        model.add_exactly_one([*chosen.values(), none])
        if j in left_out or j in kept:
            model.add(none == int(j in left_out))
        literals.append(chosen)
        unserved.append(none)
    penalty = sum(p * u for p, u in zip(fleet.unserved_penalties(), unserved))
    if served is not None:
        model.add(penalty <= served)
    for p, items in energy.items():
        add_energy_cuts(model, fleet, p, items)
    model.minimize(penalty if served is None else
                   sum(job.slots[c].cost_cents * lit for job, lits in zip(fleet.jobs, literals) for c, lit in lits.items()))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.max_time_in_seconds = max(0.01, limit_s)
    if solve_keeping_ctrl_c(solver, model) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return [next((c for c, lit in lits.items() if solver.boolean_value(lit)), None) for lits in literals]


def solve_keeping_ctrl_c(solver: cp_model.CpSolver, model: cp_model.CpModel,
                         callback: cp_model.CpSolverSolutionCallback | None = None):
    """solver.solve(model, callback), and Python's SIGINT handler back afterwards. CP-SAT stops a
    solve on Ctrl-C with its own handler and, done, leaves SIG_DFL behind: the next Ctrl-C (in the
    LNS, whose lanes leave SIGINT to Python) would kill the process before the best schedule so far
    was written (docs/performance.md#fleet-stages)."""
    if threading.current_thread() is not threading.main_thread():
        return solver.solve(model, callback)
    previous = signal.getsignal(signal.SIGINT)
    try:
        return solver.solve(model, callback)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
