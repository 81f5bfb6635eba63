"""The brute-force engine: every point of the SearchSpace, evaluated in the same integers as the
CP-SAT model. It is the oracle the CP-SAT engine is tested against, and a fallback engine."""

from __future__ import annotations

import time
from itertools import product

from vramplan.solver.candidates import (
    Choice,
    Metrics,
    evaluate,
    hardware_key,
    objective_key,
    stage_twin_key,
)
from vramplan.solver.engine import EngineResult, SearchStats
from vramplan.solver.space import SearchSpace

CHECK_EVERY = 4096  # points between two looks at the clock


class OutOfTime(Exception):
    """The enumeration passed its deadline; `points` are those found so far."""

    def __init__(self, points: list[tuple[Choice, Metrics]]) -> None:
        super().__init__("time limit")
        self.points = points


def feasible_points(space: SearchSpace, memory: bool = True, limits: bool = True,
                    deadline: float | None = None) -> list[tuple[Choice, Metrics]]:
    """Every point that passes the constraints; past `deadline` (time.monotonic()), OutOfTime."""
    points = []
    ranges = (range(len(space.clusters)), range(len(space.zero_offloads)), range(len(space.recomputes)),
              range(len(space.precisions)), range(len(space.micro_batches)), range(len(space.layouts)))
    for count, indices in enumerate(product(*ranges)):
        if deadline is not None and count % CHECK_EVERY == 0 and time.monotonic() > deadline:
            raise OutOfTime(points)
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
    """Enumerate within --time-limit: past it, the best points seen so far come back as
    "feasible" (not proven), or "unknown" when none was seen, as CP-SAT reports a time-out."""
    status = "optimal"
    try:
        points = feasible_points(space, deadline=time.monotonic() + space.query.time_limit_s)
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
