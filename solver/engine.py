"""What an engine returns: a status and the chosen points, best first."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from vramplan.solver.candidates import Choice

MAX_PARETO_POINTS = 25


class SolverInternalError(RuntimeError):
    """An engine's answer disagrees with the integer tables or with models/: a bug, never an answer."""


class TimeLimitReached(Exception):
    """The command's --time-limit passed before an explanation's next solve could start."""


def time_left_s(limit_s: float, deadline: float | None) -> float:
    """What a step of an explanation may spend: its own limit, at most what is left before
    `deadline` (time.perf_counter()); TimeLimitReached when nothing is."""
    left = limit_s if deadline is None else min(limit_s, deadline - time.perf_counter())
    if left <= 0:
        raise TimeLimitReached
    return left


@dataclass
class SearchStats:
    """What an engine did: CP-SAT models built and solved, brute-force points evaluated."""

    models_built: int = 0
    solves: int = 0
    points: int = 0


@dataclass
class EngineResult:
    status: str  # optimal | feasible | infeasible | unknown
    choices: list[Choice] = field(default_factory=list)
    pareto: list[Choice] = field(default_factory=list)
    best_bound: int | None = None  # CP-SAT bound of the primary objective when the time limit hit
    primary_value: int | None = None
    stats: SearchStats = field(default_factory=SearchStats)
