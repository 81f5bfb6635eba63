"""The CP-SAT engine: branch-and-bound over clusters, one small CP-SAT model per cluster and
branch (pipeline depth x TP degree, branch_of).

Memory and step time do not depend on the price, and for a fixed cluster every objective
(cost = price x step, time, hourly) orders its points by step time, then the inner tie. So the
search is exact as a branch-and-bound: clusters are visited in the order of a lower bound of
their objective (solver/cpsat_bounds.py: price x a step-time bound from the tables alone, refined
in tiers as a unit reaches the front), each cluster's CP-SAT model yields its points best first
under a step-time cutoff derived from the incumbent (the k-th best so far), and the search stops
at the first cluster whose bound exceeds the incumbent. The products (price x step) are formed
in Python integers, never inside CP-SAT, so no objective can overflow int64.

Top-k keeps the k best keys; the Pareto sweep repeats the search in (cost, step) order with
"strictly faster than the previous point" as a step cap. A cluster model keeps the points it
found and the cap under which it ran dry, so the sweep reuses the first search's work.
"""

from __future__ import annotations

import bisect
import heapq
import logging
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from vramplan.solver.cpsat_bounds import LAST_TIER, Branch, UnitBounds, branch_layouts, branch_of, huge, objective_bound
from vramplan.solver.cpsat_model import ClusterModel, build_cluster_model
from vramplan.solver.engine import (
    MODEL_WORK,
    SOLVE_WORK,
    STEP_WORK,
    Budget,
    EngineResult,
    SearchStats,
    SolverInternalError,
    TimeLimitReached,
)
from vramplan.solver.points import Choice, Inner, evaluate, objective_key, stage_twin_key, step_cap_us
from vramplan.solver.same_hardware import cheaper_twins, dominated
from vramplan.solver.space import SearchSpace

log = logging.getLogger(__name__)

_UNBOUNDED = None
# An uncapped unit model of this many table values (cpsat_model.table_cells) or more is presolved:
# over the batch benchmark's every-7th-row sample and solve_bench's queries, presolve cost more than
# it saved below ~300 values and paid from there, most on models with no point left
# (docs/performance.md#cp-sat-parameters-of-the-unit-models).
PRESOLVE_MIN_CELLS = 400


@dataclass
class _Seen:
    """What a search that shares no model with other queries would know of one: the points it found
    (a prefix of the model's, best first) and the step cap under which it ran dry."""

    found: int = 0
    dry_at: int | None = None


@dataclass
class UnitSearch:
    space: SearchSpace
    budget: Budget
    stats: SearchStats = field(default_factory=SearchStats)
    models: dict[tuple, ClusterModel | None] = field(default_factory=dict)  # by (cluster, branch), or by value (model())
    # Work is charged for what this search would build and solve without the batch memo's models
    # (_Seen per model key), so a query spends the same work, and reaches --work-limit alike, whatever
    # the rows before it solved.
    seen: dict[tuple, _Seen] = field(default_factory=dict)
    shape_branches: dict[tuple, list[Branch]] = field(default_factory=dict)  # per shape (branches)
    dominance: dict[int, bool] = field(default_factory=dict)  # per cluster (dominated)
    bounds: UnitBounds = field(init=False)

    def __post_init__(self) -> None:
        self.bounds = UnitBounds(self.space)
        # Without a deadline or budget the models, and the points each found best first, are kept
        # by value (the cluster's shape, branch, host budget, its own step cap from --max-days and
        # --min-mfu, and the host budgets and caps of the cheaper same-hardware clusters it leaves
        # their points to) in the space's UnitMemo, for every query of the family.
        query = self.space.query
        self.shared_models = query.deadline_hours is None and query.budget_usd is None
        if self.shared_models:
            self.models = self.space.shared.cluster_models

    @property
    def timed_out(self) -> bool:
        """A limit cut the search short (a point it did not find is then not proven absent)."""
        return self.budget.reached is not None

    # -- one cluster's points, best first ---------------------------------------------------
    def model(self, unit: tuple[int, Branch]) -> tuple[tuple, ClusterModel | None]:
        """(the model's key, the model), built on first use; its work is charged on this search's first use."""
        c, branch = unit
        exclusions = cheaper_twins(self.space, c)
        key: tuple = unit
        if self.shared_models:
            space = self.space
            # The unit's own step cap is part of the model (--max-days over the tokens, --min-mfu):
            # two rows of one job with other tokens built other models, and shared one before
            # (`CP-SAT chose ... which the integer tables do not accept`, or a wrong infeasible).
            key = (space.unit_shape(space.clusters[c].shape), branch, space.host_budget_mib_per_gpu[c],
                   tuple(exclusions), step_cap_us(space, c))
        if key not in self.seen:
            self.budget.charge(MODEL_WORK)
            self.seen[key] = _Seen()
        if key not in self.models:
            space = self.space
            layouts = branch_layouts(space, space.clusters[c].shape, branch)
            self.models[key] = build_cluster_model(space, c, step_cap_us(space, c), exclusions, layouts)
            self.stats.models_built += self.models[key] is not None
        return key, self.models[key]

    def dominated(self, c: int) -> bool:
        """same_hardware.dominated, once per cluster: its models are empty on every branch, so
        they are neither built nor solved."""
        known = self.dominance.get(c)
        if known is None:
            known = self.dominance[c] = dominated(self.space, c)
        return known

    def point(self, unit: tuple[int, Branch], i: int, cap: int | None) -> tuple[Inner, int] | None:
        """The i-th best point of a cluster's branch if its step is within cap. A solve is charged
        where this search, sharing no model, would solve: its answer is the same."""
        key, m = self.model(unit)
        if m is None:
            return None
        seen = self.seen[key]
        solves = i >= seen.found and not (seen.dry_at is not None and cap is not None and cap <= seen.dry_at)
        if solves:
            self.budget.charge(SOLVE_WORK)
        found = self._point(m, i, cap)
        if solves and found is not None:
            seen.found = i + 1
        elif solves and not self.timed_out:
            seen.dry_at = cap if cap is not None else huge()
        return found

    def _point(self, m: ClusterModel, i: int, cap: int | None) -> tuple[Inner, int] | None:
        if i < len(m.points):
            found = m.points[i]
            return self._here(m, found) if cap is None or found[1] <= cap else None
        if m.exhausted_at_cap is not None and (cap is not None and cap <= m.exhausted_at_cap):
            return None
        found = self._next(m, cap)
        if found is None:
            if not self.timed_out:  # a cut-short solve proves nothing: the model (maybe the family's) stays open
                m.exhausted_at_cap = cap if cap is not None else huge()
            return None
        m.points.append(found)
        return self._here(m, found)

    def _here(self, m: ClusterModel, found: tuple[Inner, int]) -> tuple[Inner, int]:
        """A model's point in this space's indices (the model may be another query's)."""
        inner, step = found
        return self.space.renumber(inner, m.layouts), step

    def _next(self, m: ClusterModel, cap: int | None) -> tuple[Inner, int] | None:
        assumptions = []
        if cap is not None:
            within = m.model.new_bool_var("within_cap")
            m.model.add(m.step <= cap).only_enforce_if(within)
            assumptions.append(within)
        if m.single_objective:
            solver = self._solve(m, m.key, assumptions)
        else:
            solver = self._solve(m, m.step, assumptions)
            if solver is not None:
                fixed = m.model.new_bool_var("step_fixed")
                m.model.add(m.step == solver.value(m.step)).only_enforce_if(fixed)
                solver = self._solve(m, m.key, assumptions + [fixed])
        if solver is None:
            return None
        inner, step = m.inner(solver), solver.value(m.step)
        self._after(m, solver)
        return inner, step

    def _after(self, m: ClusterModel, solver: cp_model.CpSolver) -> None:
        """Later points come strictly after this one in (step, tie) order."""
        if m.single_objective:
            m.model.add(m.key >= solver.value(m.key) + 1)
            return
        later = m.model.new_bool_var("slower")
        m.model.add(m.step >= solver.value(m.step) + 1).only_enforce_if(later)
        m.model.add(m.step == solver.value(m.step)).only_enforce_if(later.Not())
        m.model.add(m.key >= solver.value(m.key) + 1).only_enforce_if(later.Not())

    def _solve(self, m: ClusterModel, objective, assumptions) -> cp_model.CpSolver | None:
        query = self.space.query
        m.model.clear_assumptions()
        m.model.add_assumptions(assumptions)
        m.model.minimize(objective)
        solver = cp_model.CpSolver()
        params = solver.parameters
        params.num_workers = query.num_workers
        params.random_seed = query.random_seed
        self.budget.limit_cpsat(params)  # the work left (deterministic time), the safety net's seconds
        # CP-SAT would install its own SIGINT handler for the solve and leave SIG_DFL behind, so
        # the next Ctrl-C would kill the process without Python's KeyboardInterrupt (no cleanup of
        # a batch's temporary files). A solve takes milliseconds: Python's handler stays.
        params.catch_sigint_signal = False
        # One cheap presolve pass and a fixed search order (docs/performance.md#cp-sat-parameters-of-the-unit-models).
        params.cp_model_probing_level = 0
        params.max_presolve_iterations = 1
        params.linearization_level = 0
        params.search_branching = cp_model.FIXED_SEARCH
        # No symmetry detection, SAT inprocessing or table compression either (same section).
        params.symmetry_level = 0
        params.use_sat_inprocessing = False
        params.table_compression_level = 0
        # Nor implied-bound and greater-than-at-least-one-of detection, which only strengthen propagation (same section).
        params.use_implied_bounds = False
        params.auto_detect_greater_than_at_least_one_of = False
        # Under a step cap one presolve pass proves most models empty at once; without one it pays
        # only on models of PRESOLVE_MIN_CELLS table values or more (same section).
        params.cp_model_presolve = bool(assumptions) or m.cells >= PRESOLVE_MIN_CELLS
        code = solver.solve(m.model)
        self.stats.solves += 1
        if code == cp_model.MODEL_INVALID:
            raise SolverInternalError(f"CP-SAT MODEL_INVALID: {m.model.validate()}")
        if code == cp_model.OPTIMAL:
            return solver
        if code in (cp_model.FEASIBLE, cp_model.UNKNOWN):
            self.budget.cpsat_stopped()
        return None

    # -- the branch-and-bound ---------------------------------------------------------------
    def branches(self, c: int) -> list[Branch]:
        """The (pp, tp) branches of a cluster's layouts, kept per shape (asked per cluster per search)."""
        space = self.space
        shape = space.clusters[c].shape
        if shape not in self.shape_branches:
            self.shape_branches[shape] = sorted({branch_of(space.layouts[li]) for li in space.cluster_layouts(shape)})
        return self.shape_branches[shape]

    def best(self, k: int, order: str, step_below: int | None = None) -> list[tuple[tuple, Choice]]:
        """The k best points in `order`, with step < step_below if given."""
        space = self.space
        # Lazy bounds in tiers (primary_bound): every (cluster, branch) enters with the cheap
        # compute-only bound and is refined, one tier at a time, when it reaches the front; a
        # refined bound is never below the one before, so popping in bound order stays exact, and
        # the memory tables of a (count, layout) are only filled for units that get that far.
        # A unit whose step-time bound already breaks the deadline or the budget (step_cap_us)
        # is dropped at the tier that shows it, without a model.
        caps: list[int | None] = list(space.step_caps_us)  # step_cap_us of each cluster
        if step_below is not None:
            caps = [step_below - 1 if cap is None else min(cap, step_below - 1) for cap in caps]
        heap = self._first_tier(order, caps)
        heapq.heapify(heap)
        kept: list[tuple[tuple, Choice]] = []
        twins: set[tuple] = set()  # stage_twin_key of every point kept (k > 1), as the brute-force engine's `seen`
        while heap:
            bound, tier, c, branch = heapq.heappop(heap)
            if len(kept) == k and bound > kept[-1][0][:len(bound)]:
                break  # every later cluster's bound is at least this one's
            try:
                self.budget.charge(STEP_WORK)
                if not branch:
                    for each in self.branches(c):
                        heapq.heappush(heap, (bound, 0, c, each))
                elif tier < LAST_TIER:
                    fine = self.bounds.primary_bound(c, branch, order, tier=tier + 1)
                    if fine is not None and (caps[c] is None or self.bounds.step_bound_us(c, branch, tier + 1) <= caps[c]):
                        heapq.heappush(heap, (fine, tier + 1, c, branch))
                else:
                    self._take(c, branch, order, k, step_below, kept, twins)
            except TimeLimitReached:
                break  # the best points so far (solve_cpsat reports the status)
        return kept

    def _first_tier(self, order: str, caps: list[int | None]) -> list[tuple]:
        """The heap's first entries: tier 0 is the same on every branch of a cluster, so one entry per
        cluster (branch ()), which sorts just before the cluster's branches and is replaced by them
        when it reaches the front: clusters the search never reaches cost no branch list and no heap
        entries. A cluster enters where it may fit (UnitBounds.may_fit), no cheaper same-hardware
        cluster takes its points (dominated: never, alone in its shape) and its least compute is within
        its cap; its bound is primary_bound's at tier 0, here from the placement's fields of every
        cluster at once (5 us a cluster through the calls: 9% of the batch sample's CPU)."""
        space, bounds = self.space, self.bounds
        least = space.least_compute_us
        heap = []
        for c, (fits, (g, n, price, alone)) in enumerate(zip(bounds.may_fit_each(), space.placement.tier0_fields)):
            if not fits or (not alone and self.dominated(c)):
                continue
            lower, cap = least[g, n], caps[c]  # compute_step_us(c), step_cap_us(c)
            if lower is None or (cap is not None and lower > cap):
                continue
            heap.append((objective_bound(price, lower, order), 0, c, ()))
        return heap

    def _take(self, c: int, branch: Branch, order: str, k: int, step_below: int | None,
              kept: list[tuple[tuple, Choice]], twins: set[tuple]) -> None:
        """Add the unit's points that enter the k best to `kept`, best first."""
        space = self.space
        i = taken = 0
        while taken < k:
            cap = self._cap(c, order, kept, k, step_below)
            if cap == "prune":
                break
            found = self.point((c, branch), i, cap)
            if found is None:
                break
            i += 1
            choice, metrics = checked_point(space, c, found)
            key = objective_key(space, metrics, order)
            if len(kept) == k and key >= kept[-1][0]:
                break
            if k > 1:  # a list shows a plan once, not under several ZeRO stages that change nothing
                # A twin comes after its least stage (the same unit, a larger inner tie); one
                # whose twin was pushed out of the list is past the list's end too (checked above).
                twin = stage_twin_key(space, choice, metrics)
                if twin in twins:
                    continue
                twins.add(twin)
            bisect.insort(kept, (key, choice))
            del kept[k:]
            taken += 1

    def _cap(self, c: int, order: str, kept, k: int, step_below: int | None):
        """The longest step time that can still enter the top k on this cluster."""
        caps = [] if step_below is None else [step_below - 1]
        if len(kept) == k:
            price = self.space.clusters[c].price_units
            worst = kept[-1][0]
            if order in ("cost", "pareto"):
                caps.append(worst[0] // max(1, price))
            elif order == "hourly":
                if price > worst[0]:
                    return "prune"
                if price == worst[0]:
                    caps.append(worst[1])
            else:
                caps.append(worst[0])
        return min(caps) if caps else _UNBOUNDED


def solve_cpsat(space: SearchSpace, top_k: int, pareto: bool, max_pareto_points: int,
                budget: Budget | None = None) -> EngineResult:
    """The k best points (and the front): "feasible" (or "unknown" without a point) when `budget`
    (default: the query's own) runs out first."""
    search = UnitSearch(space, Budget.of(space.query) if budget is None else budget)
    best = search.best(top_k, space.query.objective)
    result = EngineResult(status="optimal" if best else "infeasible", stats=search.stats)
    result.choices = [choice for _, choice in best]
    if pareto and best:
        result.pareto = _pareto(search, max_pareto_points)
    if search.timed_out:
        result.status = "feasible" if best else "unknown"
        if best:
            result.primary_value = best[0][0][0]
    return result


def checked_point(space: SearchSpace, c: int, found: tuple[Inner, int]):
    """The point CP-SAT found on cluster c, with its metrics re-read from the integer tables
    (they must accept it at the step time the model gave)."""
    choice = Choice(c, *found[0])
    metrics = evaluate(space, choice)
    if metrics is None or metrics.step_us != found[1]:
        raise SolverInternalError(f"CP-SAT chose {choice}, which the integer tables do not accept as it did")
    return choice, metrics


def _pareto(search: UnitSearch, max_points: int) -> list[Choice]:
    """Cheapest plan, then the cheapest strictly faster one, until none is faster."""
    front: list[Choice] = []
    step_below = None
    while len(front) < max_points:
        found = search.best(1, "pareto", step_below)
        if not found:
            break
        front.append(found[0][1])
        step_below = found[0][0][1]
    log.debug("pareto front: %d points", len(front))
    return front
