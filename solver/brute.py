"""The brute-force engine: every point of the SearchSpace, evaluated in the same integers as the
CP-SAT model. It is the oracle the CP-SAT engine is tested against, and a fallback engine."""

from __future__ import annotations

from itertools import product
from math import prod

from vramplan.solver.engine import POINT_WORK, Budget, EngineResult, SearchStats, TimeLimitReached
from vramplan.solver.points import (
    Choice,
    Metrics,
    evaluate,
    hardware_key,
    objective_key,
    stage_twin_key,
)
from vramplan.solver.space import SearchSpace

CHECK_EVERY = 4096  # points charged to the budget at once (one look at the clock each)


class OutOfTime(Exception):
    """The enumeration ran out of its budget; `points` are those found so far."""

    def __init__(self, points: list[tuple[Choice, Metrics]]) -> None:
        super().__init__("time limit")
        self.points = points


def feasible_points(space: SearchSpace, memory: bool = True, limits: bool = True,
                    budget: Budget | None = None) -> list[tuple[Choice, Metrics]]:
    """Every point that passes the constraints; OutOfTime when `budget` runs out first (each
    CHECK_EVERY points are charged before they are evaluated)."""
    points = []
    ranges = (range(len(space.clusters)), range(len(space.zero_offloads)), range(len(space.recomputes)),
              range(len(space.precisions)), range(len(space.micro_batches)), range(len(space.layouts)))
    total = prod(len(r) for r in ranges)
    for count, indices in enumerate(product(*ranges)):
        if budget is not None and count % CHECK_EVERY == 0:
            try:
                budget.charge(POINT_WORK * min(CHECK_EVERY, total - count))
            except TimeLimitReached:
                raise OutOfTime(points) from None
        choice = Choice(*indices)
        metrics = evaluate(space, choice, memory=memory, limits=limits)
        if metrics is not None:
            points.append((choice, metrics))
    return points


def pareto_front(space: SearchSpace, points: list[tuple[Choice, Metrics]], max_points: int) -> list[Choice]:
    """Cost-vs-time front: cheapest first; each next point is strictly faster."""
    ordered = sorted(points, key=lambda item: objective_key(space, item[1], "pareto"))
    front: list[Choice] = []
    best_step = None
    for choice, metrics in ordered:
        if best_step is None or metrics.step_us < best_step:
            front.append(choice)
            best_step = metrics.step_us
            if len(front) == max_points:
                break
    return front


def solve_brute(space: SearchSpace, top_k: int, pareto: bool, max_pareto_points: int,
                budget: Budget | None = None) -> EngineResult:
    """Enumerate within `budget` (default: the query's own): when it runs out, the best points seen
    so far come back as "feasible" (not proven), or "unknown" when none was seen, as CP-SAT reports it."""
    status = "optimal"
    try:
        points = feasible_points(space, budget=Budget.of(space.query) if budget is None else budget)
    except OutOfTime as out:
        points, status = out.points, "feasible"
        if not points:
            return EngineResult(status="unknown", stats=SearchStats(points=space.size))
    if not points:
        return EngineResult(status="infeasible")
    best: list[Choice] = []
    seen = set()
    for choice, metrics in sorted(points, key=lambda item: objective_key(space, item[1])):
        if (hardware := hardware_key(space, choice)) in seen:
            continue  # the same plan at a higher price (another offering of the same hardware)
        if (twin := stage_twin_key(space, choice, metrics)) in seen:
            continue  # the same plan under a higher ZeRO stage that changes nothing
        seen.update((hardware, twin))
        best.append(choice)
        if len(best) == top_k:
            break
    return EngineResult(
        status=status,
        choices=best,
        pareto=pareto_front(space, points, max_pareto_points) if pareto else [],
        stats=SearchStats(points=space.size),
    )
