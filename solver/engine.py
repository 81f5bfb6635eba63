"""What an engine returns (a status and the chosen points, best first), and what a solve may spend:
its Budget of deterministic work, with wall-clock seconds as an outer safety net."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeVar

from vramplan.solver.points import Choice

if TYPE_CHECKING:
    from vramplan.solver.query import SolveQuery

MAX_PARETO_POINTS = 25
T = TypeVar("T")

# Work units (docs/input-rules.md#time-limits): what a solve does is counted, never timed, so the
# answer does not depend on the machine's load. A unit is a millisecond of CP-SAT's deterministic
# time, and each other step is charged about what it costs beside that on the 2-core reference
# machine, about a millisecond of CPU a unit (docs/performance.md#work-limit). Kept in thousandths:
# integers, so a sum of charges is the same in whatever groups it was added (engine.replayed).
MILLI = 1000
STEP_WORK = 50  # a branch-and-bound unit refined or expanded, a branch asked, a shape an explanation scans
MODEL_WORK = 1000  # a unit's CP-SAT model built
SOLVE_WORK = 1000  # a CP-SAT solve
POINT_WORK = 3  # a point the brute-force engine evaluates
DTIME_WORK = 1_000_000  # a deterministic second of CP-SAT, charged where it is the same with or without the memo

Limit = Literal["work", "time"]


class SolverInternalError(RuntimeError):
    """An engine's answer disagrees with the integer tables or with models/: a bug, never an answer."""


class TimeLimitReached(Exception):
    """The solve's work limit (or, first, its --time-limit) was reached before the next step could
    start; `limit` says which ("work" or "time")."""

    def __init__(self, limit: Limit | None = None) -> None:
        super().__init__(f"{limit or 'time'} limit reached")
        self.limit = limit


@dataclass
class Budget:
    """What one solve (its search and its explanation's solves) may spend: `limit` thousandths of a
    work unit (SolveQuery.work_limit), which decide the answer, and until `deadline`
    (time.monotonic(): SolveQuery.time_limit_s from the start) of wall-clock time, the safety net.
    A step is charged before it runs; once either limit is reached every later charge raises."""

    limit: int
    deadline: float
    spent: int = 0
    reached: Limit | None = None

    @classmethod
    def of(cls, query: SolveQuery) -> Budget:
        return cls(round(query.work_limit * MILLI), time.monotonic() + query.time_limit_s)

    def charge(self, work: int) -> None:
        """Spend `work` thousandths; TimeLimitReached instead when they pass the work limit (the
        budget is then spent) or the clock has passed the deadline."""
        if self.reached is None:
            if self.spent + work > self.limit:
                self.spent, self.reached = self.limit, "work"
            elif time.monotonic() > self.deadline:
                self.reached = "time"
            else:
                self.spent += work
                return
        raise TimeLimitReached(self.reached)

    def limit_cpsat(self, params) -> None:
        """One CP-SAT solve's own limits: the deterministic time the work left buys, the seconds left."""
        params.max_deterministic_time = max(0, self.limit - self.spent) / DTIME_WORK
        params.max_time_in_seconds = max(0.01, self.deadline - time.monotonic())

    def cpsat_stopped(self) -> TimeLimitReached:
        """CP-SAT stopped at one of limit_cpsat's limits: the clock's when it has passed the deadline,
        else the work's (the budget is then spent)."""
        if self.reached is None:
            self.reached = "time" if time.monotonic() > self.deadline else "work"
            if self.reached == "work":
                self.spent = self.limit
        return TimeLimitReached(self.reached)

    def charge_cpsat(self, deterministic_s: float) -> None:
        self.charge(math.ceil(deterministic_s * DTIME_WORK))

    @property
    def work(self) -> float:
        """Work units spent."""
        return self.spent / MILLI


def replayed(budget: Budget, kept: Callable[[Callable[[], tuple[T, int]]], tuple[T, int]],
             compute: Callable[[], T]) -> T:
    """compute() under `budget`, through `kept` (TableMemo.result: the answer and the work it
    took, kept by the batch memo); an answer kept earlier charges that work again, so a question
    costs the same work, and runs out of it alike, with or without the memo."""
    fresh = False

    def measured() -> tuple[T, int]:
        nonlocal fresh
        fresh, before = True, budget.spent
        return compute(), budget.spent - before

    answer, work = kept(measured)
    if not fresh:
        budget.charge(work)
    return answer


def limit_label(limit: Limit | None, query: SolveQuery) -> str:
    """The option that ran out, as the user would write it."""
    return f"--work-limit {query.work_limit:g}" if limit == "work" else f"--time-limit {query.time_limit_s:g} s"


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
    best_bound: int | None = None  # CP-SAT bound of the primary objective when a limit hit
    primary_value: int | None = None
    stats: SearchStats = field(default_factory=SearchStats)
