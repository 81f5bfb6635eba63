"""The brute-force engine: every point of the SearchSpace, evaluated in the same integers as the
CP-SAT model. It is the oracle the CP-SAT engine is tested against, and a fallback engine."""

from __future__ import annotations

from itertools import product

from vramplan.solver.candidates import (
    Choice,
    Metrics,
    evaluate,
    hardware_key,
    objective_key,
)
from vramplan.solver.engine import EngineResult, SearchStats
from vramplan.solver.space import SearchSpace


def feasible_points(space: SearchSpace, memory: bool = True, limits: bool = True) -> list[tuple[Choice, Metrics]]:
    points = []
    ranges = (range(len(space.clusters)), range(len(space.zero_offloads)), range(len(space.recomputes)),
              range(len(space.precisions)), range(len(space.micro_batches)), range(len(space.layouts)))
    for indices in product(*ranges):
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


def solve_brute(space: SearchSpace, top_k: int, pareto: bool, max_pareto_points: int) -> EngineResult:
    points = feasible_points(space)
    if not points:
        return EngineResult(status="infeasible")
    best: list[Choice] = []
    seen = set()
    for choice, _ in sorted(points, key=lambda item: objective_key(space, item[1])):
        if (hardware := hardware_key(space, choice)) in seen:
            continue  # the same plan at a higher price (another offering of the same hardware)
        seen.add(hardware)
        best.append(choice)
        if len(best) == top_k:
            break
    return EngineResult(
        status="optimal",
        choices=best,
        pareto=pareto_front(space, points, max_pareto_points) if pareto else [],
        stats=SearchStats(points=space.size),
    )
