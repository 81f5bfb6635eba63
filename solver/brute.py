"""The brute-force engine: every point of the SearchSpace, evaluated in the same integers as the
CP-SAT model. It is the oracle the CP-SAT engine is tested against, and a fallback engine."""

from __future__ import annotations

import heapq
from itertools import product

from vramplan.solver.candidates import Choice, Metrics, evaluate, objective_key
from vramplan.solver.engine import EngineResult
from vramplan.solver.space import SearchSpace


def feasible_points(space: SearchSpace, memory: bool = True, limits: bool = True) -> list[tuple[Choice, Metrics]]:
    points = []
    ranges = (range(len(space.clusters)), range(len(space.zero_offloads)), range(len(space.recomputes)),
              range(len(space.precisions)), range(len(space.micro_batches)))
    for indices in product(*ranges):
        choice = Choice(*indices)
        metrics = evaluate(space, choice, memory=memory, limits=limits)
        if metrics is not None:
            points.append((choice, metrics))
    return points


def pareto_front(space: SearchSpace, points: list[tuple[Choice, Metrics]], max_points: int) -> list[Choice]:
    """Cost-vs-time front: cheapest first; each next point is strictly faster."""
    ordered = sorted(points, key=lambda item: (item[1].cost_units, item[1].step_us, item[1].tie_key))
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
    best = heapq.nsmallest(top_k, points, key=lambda item: objective_key(space, item[1]))
    return EngineResult(
        status="optimal",
        choices=[choice for choice, _ in best],
        pareto=pareto_front(space, points, max_pareto_points) if pareto else [],
    )
