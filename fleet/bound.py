"""A lower bound on the fleet's cost stage by column generation over machine schedules in buckets.

pricing.py turns each bounded pool into identical machines and each machine's jobs, in time
buckets, into a column (a pseudo-schedule). The master LP chooses fractions of columns (per pool
at most its machines, per partly available bucket at most the machines there), of each job
unserved (their penalties within the served stage's level) or on an unbounded pool, covering
each job once, at least cost: the time-indexed LP of the fleet, much stronger than the energy
cuts of CP-SAT's model (docs/performance.md#fleet-bound).

The bound is the Lagrangian value at any duals: each job's cover, the penalty and the partial
buckets' capacities relaxed, every machine takes its best pseudo-schedule (the DP) and the
penalty's multiplier is chosen exactly. It holds at every round, so the search may stop at any
time; the master's duals, smoothed towards the best point so far (Wentges), only steer it.
"""

from __future__ import annotations

import logging
import math
import threading
import time

import numpy as np
from ortools.linear_solver import pywraplp

from vramplan.fleet.domain import IntFleet, IntSchedule
from vramplan.fleet.pricing import Pricing, bucket_minutes, machine_items, pool_machines, unbounded_cost

log = logging.getLogger(__name__)

SMOOTHING = 0.8  # duals priced at this mix of the best point so far and the master's
SUPPORT_EVERY, SUPPORT_MIN = 10, 0.01  # rounds between snapshots of the master's slots; least share kept
SAFETY = 1e-9  # relative slack taken off the float Lagrangian value before rounding up
Column = list[tuple[int, int]]  # (item, end bucket) on one machine


def best_penalty_price(pi: np.ndarray, penalties: np.ndarray, market: np.ndarray, budget: float) -> float:
    """max over theta >= 0 of -theta budget + sum_j min(0, market_j - pi_j, theta penalty_j - pi_j): the
    unserved and market part of the Lagrangian. It is concave in theta; job j's term rises with
    slope penalty_j until theta reaches tau_j = (pi_j + min(0, market_j - pi_j)) / penalty_j, so the
    slope is -budget plus the penalties of the jobs with tau_j > theta, and the best theta is the
    largest tau_j at which those penalties reach the budget (0 when they never do)."""
    floor = np.minimum(0.0, market - pi)
    tau = np.maximum(0.0, (pi + floor) / penalties)
    order = np.argsort(-tau)
    reach = int(np.searchsorted(np.cumsum(penalties[order]), budget))
    candidates = [0.0] + [float(tau[order[k]]) for k in (reach - 1, reach, reach + 1) if 0 <= k < len(tau)]
    return max(-theta * budget + float(np.minimum(floor, theta * penalties - pi).sum()) for theta in candidates)


class CostBound:
    """Column generation for the cost stage; `bound(budget)` only ever rises as rounds are added."""

    def __init__(self, fleet: IntFleet, budget: int, schedule: IntSchedule | None = None,
                 bucket_min: int | None = None) -> None:
        bucket_min = bucket_min or bucket_minutes(fleet)
        self.fleet, self.budget, self.bucket_min = fleet, budget, bucket_min
        self.buckets = fleet.horizon_min // bucket_min
        self.machines = pool_machines(fleet, bucket_min, self.buckets)
        self.items = machine_items(fleet, self.machines, bucket_min)
        self.pricing = Pricing(self.items, self.machines, self.buckets)
        self.penalties = np.array(fleet.unserved_penalties(), dtype=float)
        self.market = np.array(unbounded_cost(fleet))
        self.counts = np.array([m.count for m in self.machines], dtype=float)
        self.partial = [(k, int(b)) for k, m in enumerate(self.machines)
                        for b in np.flatnonzero((m.capacity > 0) & (m.capacity < m.count))]
        costs = [s.cost_cents for job in fleet.jobs for s in job.slots if s.cost_cents > 0]
        # GLOP in units of the mean slot cost (in cents some masters were IMPRECISE), penalties in the largest's.
        self.scale = max(1.0, sum(costs) / len(costs)) if costs else 1.0
        self.penalty_unit = float(max(1.0, budget, *self.penalties))
        self.points: list[tuple[float, np.ndarray]] = []  # (value without the penalty part, cover duals)
        self.center: tuple[np.ndarray, np.ndarray] | None = None
        self.best = -math.inf
        self.rounds = self.rebuilds = 0
        self.support: dict[int, frozenset[int]] = {}  # per job, the slots of the master's last solution
        self.kept: list[tuple[int, Column]] = []
        self._master()
        for machine, column in self._columns_of(schedule) if schedule is not None else ():
            self._add_column(machine, column)

    # --- the master LP ------------------------------------------------------------------------

    def _master(self) -> None:
        lp = pywraplp.Solver.CreateSolver("GLOP")
        # Any duals give a valid bound: a looser check than GLOP's default, which left some masters
        # without duals (docs/performance.md#fleet-bound).
        lp.SetSolverSpecificParametersAsString("solution_feasibility_tolerance: 1e-4")
        self.lp = lp
        self.column_vars: list[pywraplp.Variable] = []
        self.cover = [lp.Constraint(1.0, lp.infinity()) for _ in self.fleet.jobs]
        self.penalty_row = lp.Constraint(-lp.infinity(), self.budget / self.penalty_unit)
        self.machine_rows = [lp.Constraint(-lp.infinity(), float(m.count)) for m in self.machines]
        self.partial_rows = [lp.Constraint(-lp.infinity(), float(self.machines[k].capacity[b])) for k, b in self.partial]
        objective = lp.Objective()
        # Slack on the penalty row keeps the master feasible before it has columns; dearer than any slot.
        slack = lp.NumVar(0, lp.infinity(), "")
        self.penalty_row.SetCoefficient(slack, -1.0 / self.penalty_unit)
        objective.SetCoefficient(slack, (1.0 + max((s.cost_cents for job in self.fleet.jobs for s in job.slots),
                                                   default=0)) / self.scale)
        for j in range(len(self.fleet.jobs)):
            unserved = lp.NumVar(0, 1, "")
            self.cover[j].SetCoefficient(unserved, 1.0)
            self.penalty_row.SetCoefficient(unserved, float(self.penalties[j]) / self.penalty_unit)
            if math.isfinite(self.market[j]):
                market = lp.NumVar(0, 1, "")
                self.cover[j].SetCoefficient(market, 1.0)
                objective.SetCoefficient(market, float(self.market[j]) / self.scale)
        objective.SetMinimization()

    def _add_column(self, machine: int, column: Column) -> None:
        items = self.items
        var = self.lp.NumVar(0, self.lp.infinity(), "")
        self.kept.append((machine, column))
        self.column_vars.append(var)
        cover: dict[int, float] = {}
        busy: dict[int, int] = {}
        cost = 0.0
        for i, end in column:
            j = int(items.job[i])
            cover[j] = cover.get(j, 0.0) + 1.0 / int(items.copies[i])
            cost += items.cost[i] / items.copies[i]
            if self.partial:
                for b in range(end - int(items.length[i]), end):
                    busy[b] = busy.get(b, 0) + 1
        for j, share in cover.items():
            self.cover[j].SetCoefficient(var, share)
        self.machine_rows[machine].SetCoefficient(var, 1.0)
        for row, (k, b) in zip(self.partial_rows, self.partial):
            if k == machine and b in busy:
                row.SetCoefficient(var, float(busy[b]))
        self.lp.Objective().SetCoefficient(var, cost / self.scale)

    def _solve_master(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(cover duals, partial-bucket prices, machine prices) in cents, or None when GLOP fails twice."""
        if self.lp.Solve() != pywraplp.Solver.OPTIMAL:
            self.rebuilds += 1
            kept, self.kept = self.kept, []  # a cold solve of the same columns: a warm start can fail where it does not
            self._master()
            for machine, column in kept:
                self._add_column(machine, column)
            if self.lp.Solve() != pywraplp.Solver.OPTIMAL:
                return None
        return (self.scale * np.maximum(0.0, [row.dual_value() for row in self.cover]),
                self.scale * np.maximum(0.0, [-row.dual_value() for row in self.partial_rows]),
                -self.scale * np.array([row.dual_value() for row in self.machine_rows]))

    def _columns_of(self, schedule: IntSchedule) -> list[tuple[int, Column]]:
        """A valid schedule's machines as columns: each pool's copies coloured onto its machines in
        start order (an interval graph: the machines in use never exceed the pool's most)."""
        index = {(int(j), int(c)): n for n, (j, c) in enumerate(zip(self.items.job, self.items.slot))}
        columns = []
        for k, m in enumerate(self.machines):
            runs = sorted((schedule.start_min[j], j, c) for j, c in enumerate(schedule.slot)  # type: ignore[type-var]
                          if c is not None and self.fleet.jobs[j].slots[c].pool == m.pool)
            free_at = [0] * m.count
            lanes: list[Column] = [[] for _ in range(m.count)]
            for start, j, c in runs:
                slot = self.fleet.jobs[j].slots[c]
                for lane in [lane for lane in range(m.count) if free_at[lane] <= start][:slot.gpus // m.unit_gpus]:
                    free_at[lane] = start + slot.duration_min
                    lanes[lane].append((index[(j, c)], start // self.bucket_min + slot.duration_min // self.bucket_min))
            columns.extend((k, lane) for lane in lanes if lane)
        return columns

    # --- the Lagrangian -----------------------------------------------------------------------

    def _busy(self, prices: np.ndarray) -> np.ndarray:
        busy = np.zeros((len(self.machines), self.buckets))
        for (k, b), price in zip(self.partial, prices):
            busy[k, b] = price
        return busy

    def _price(self, pi: np.ndarray, prices: np.ndarray) -> tuple[float, list[Column]]:
        """The Lagrangian value at (pi, prices) less its penalty part, and each machine's best column."""
        items = self.items
        values, columns = self.pricing.run((pi[items.job] - items.cost) / items.copies, self._busy(prices))
        caps = sum(price * self.machines[k].capacity[b] for (k, b), price in zip(self.partial, prices))
        return float(pi.sum() - caps - self.counts @ np.maximum(values, 0.0)), columns

    def bound(self, budget: int | None = None) -> int | None:
        """The best proven lower bound (cents) on the cost at this served penalty (the session's budget by
        default): every point priced so far, its penalty multiplier chosen for this budget."""
        if not self.points:
            return None
        budget = self.budget if budget is None else budget
        value = max(base + best_penalty_price(pi, self.penalties, self.market, budget) for base, pi in self.points)
        return math.ceil(value - SAFETY * max(1.0, abs(value)) - 1e-6)

    def set_budget(self, budget: int) -> None:
        """A lower served penalty (the served stage improved): the same columns, a tighter master."""
        self.budget = budget
        self.penalty_row.SetUb(budget / self.penalty_unit)
        self.best = max(base + best_penalty_price(pi, self.penalties, self.market, budget) for base, pi in self.points) \
            if self.points else -math.inf

    def _evaluate(self, pi: np.ndarray, prices: np.ndarray) -> list[Column]:
        base, columns = self._price(pi, prices)
        self.points.append((base, pi))
        value = base + best_penalty_price(pi, self.penalties, self.market, self.budget)
        if value > self.best:
            self.best, self.center = value, (pi, prices)
        return columns

    def _reduced_profit(self, machine: int, column: Column, duals: tuple) -> float:
        """What the column gains at the master's duals beyond its machine's price (> 0: it improves the master)."""
        items = self.items
        pi, prices, machine_price = duals
        busy = self._busy(prices)[machine] if len(prices) else None
        gain = sum((pi[items.job[i]] - items.cost[i]) / items.copies[i] for i, _ in column)
        if busy is not None:
            gain -= sum(busy[end - items.length[i]:end].sum() for i, end in column)
        return gain - machine_price[machine]

    def step(self) -> bool:
        """One round: the master, then the DP at the smoothed duals (and at the master's own when the
        smoothed ones find no improving column). False once the master is optimal or fails."""
        self.rounds += 1
        duals = self._solve_master()
        if duals is None:
            return False
        master = self.scale * self.lp.Objective().Value()
        if self.rounds % SUPPORT_EVERY == 1:
            self.support = self._support()
        points = [duals[:2]]
        if self.center is not None:
            points.insert(0, tuple(SMOOTHING * c + (1 - SMOOTHING) * x for c, x in zip(self.center, duals[:2])))
        for pi, prices in points:
            columns = self._evaluate(pi, prices)
            improving = [(m, c) for m, c in enumerate(columns) if c and self._reduced_profit(m, c, duals) > 1e-6]
            for machine, column in improving:
                self._add_column(machine, column)
            if improving:
                return master - self.best > max(1.0, 1e-7 * abs(master))
        return False

    def _support(self) -> dict[int, frozenset[int]]:
        """Per job the slots the master's solution uses (its share above SUPPORT_MIN): the search's
        restricted neighbourhoods (lns.improve) offer a job only these and its own."""
        share: dict[tuple[int, int], float] = {}
        items = self.items
        for (_, column), var in zip(self.kept, self.column_vars):
            y = var.solution_value()
            if y > 1e-9:
                for i, _ in column:
                    key = (int(items.job[i]), int(items.slot[i]))
                    share[key] = share.get(key, 0.0) + y / int(items.copies[i])
        support: dict[int, set[int]] = {}
        for (j, c), value in share.items():
            if value > SUPPORT_MIN:
                support.setdefault(j, set()).add(c)
        return {j: frozenset(slots) for j, slots in support.items()}

    def run(self, deadline_s: float, max_rounds: int | None = None) -> int | None:
        """Rounds until `deadline_s` (time.perf_counter), convergence or `max_rounds`; the bound."""
        while time.perf_counter() < deadline_s and (max_rounds is None or self.rounds < max_rounds):
            if not self.step():
                break
        return self.bound()


STOP_WAIT_S = 1.0


class BackgroundBound:
    """CostBound's rounds in a daemon thread beside the session's search, from a valid schedule at
    its served penalty; `set_budget` passes the served stage's newer (lower) level to it, `bound`
    reads the best bound so far for a budget, `stop` ends it. A failure only leaves no bound."""

    def __init__(self, fleet: IntFleet, budget: int, schedule: IntSchedule, deadline_s: float) -> None:
        self.bounder: CostBound | None = None
        self._budget = budget
        self._wake, self._stopped = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._work, args=(fleet, schedule, deadline_s), daemon=True)
        self._thread.start()

    def _work(self, fleet: IntFleet, schedule: IntSchedule, deadline_s: float) -> None:
        try:
            bounder = CostBound(fleet, self._budget, schedule=schedule)
            self.bounder = bounder
            while not self._stopped.is_set() and time.perf_counter() < deadline_s:
                if self._budget != bounder.budget:
                    bounder.set_budget(self._budget)
                if not bounder.step() and self._budget == bounder.budget:  # converged: wait for a new budget
                    self._wake.wait(max(0.0, deadline_s - time.perf_counter()))
                    self._wake.clear()
            log.info("fleet bound: %d rounds, %d columns, bound %s at penalty %s", bounder.rounds, len(bounder.kept),
                     bounder.bound(), bounder.budget)
        except Exception:  # the bound is optional: the session keeps CP-SAT's
            log.exception("fleet bound failed")

    def set_budget(self, budget: int) -> None:
        self._budget = budget
        self._wake.set()

    def bound(self, budget: int) -> int | None:
        return None if self.bounder is None else self.bounder.bound(budget)

    def support(self) -> dict[int, frozenset[int]] | None:
        """The master's latest slots per job (a snapshot, replaced whole), None before any."""
        return None if self.bounder is None or not self.bounder.support else self.bounder.support

    def stop(self) -> None:
        """Ask the thread to end and wait for it at most STOP_WAIT_S: a round under way on a large
        fleet would otherwise hold the answer past the time limit (the daemon thread ends after it)."""
        self._stopped.set()
        self._wake.set()
        self._thread.join(STOP_WAIT_S)

