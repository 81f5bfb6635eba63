"""Solving the CP-SAT model: lexicographic objectives, top-k by no-good cuts, the Pareto sweep.

Temporary bounds (a lexicographic stage's "keep the optimum of the previous objective", the
Pareto sweep's "strictly faster") are enforced by fresh literals passed as assumptions, so each
re-solve starts from the same model plus its permanent no-good cuts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from vramplan.solver import cpsat_model
from vramplan.solver.candidates import Choice, evaluate
from vramplan.solver.engine import EngineResult, SolverInternalError
from vramplan.solver.space import SearchSpace

log = logging.getLogger(__name__)


_STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.UNKNOWN: "unknown",
}


@dataclass
class _Session:
    space: SearchSpace
    model: cp_model.CpModel
    v: cpsat_model.Variables
    deadline: float

    def solve(self, objective: cp_model.LinearExpr, assumptions: list[cp_model.IntVar]) -> tuple[str, cp_model.CpSolver]:
        query = self.space.query
        self.model.clear_assumptions()
        self.model.add_assumptions(assumptions)
        self.model.minimize(objective)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = query.num_workers
        solver.parameters.random_seed = query.random_seed
        solver.parameters.max_time_in_seconds = max(0.01, self.deadline - time.monotonic())
        code = solver.solve(self.model)
        if code == cp_model.MODEL_INVALID:
            raise SolverInternalError(f"CP-SAT MODEL_INVALID: {self.model.validate()}")
        return _STATUS[code], solver

    def bound(self, expr: cp_model.LinearExpr, value: int) -> cp_model.IntVar:
        literal = self.model.new_bool_var("stage")
        self.model.add(expr <= value).only_enforce_if(literal)
        return literal

    def choice(self, solver: cp_model.CpSolver) -> Choice:
        chosen = [i for i, lit in enumerate(self.v.literals) if solver.boolean_value(lit)]
        if len(chosen) != 1:
            raise SolverInternalError(f"CP-SAT chose {len(chosen)} plans")
        choice = self.v.candidates[chosen[0]].choice
        metrics = evaluate(self.space, choice)
        if metrics is None or metrics.step_us != solver.value(self.v.step_us):
            raise SolverInternalError(f"CP-SAT chose {choice}, which the integer tables do not accept as it did")
        return choice

    def forbid(self, choice: Choice) -> None:
        """No-good cut: this exact combination of decisions may not be chosen again."""
        for candidate, literal in zip(self.v.candidates, self.v.literals, strict=True):
            if candidate.choice == choice:
                self.model.add(literal == 0)

    def lexicographic(self, objectives: list[cp_model.LinearExpr], extra: list[cp_model.IntVar]) -> tuple[str, Choice | None, cp_model.CpSolver | None]:
        """Minimise the objectives in order, each keeping the previous ones at their optimum."""
        assumptions = list(extra)
        status, solver, first = "unknown", None, None
        for stage, objective in enumerate(objectives):
            status_stage, solver_stage = self.solve(objective, assumptions)
            if stage == 0:
                status, first = status_stage, solver_stage
                if status not in ("optimal", "feasible"):
                    return status, None, solver_stage
                if status == "feasible":  # out of time: report the incumbent as it is
                    return status, self.choice(solver_stage), solver_stage
            elif status_stage != "optimal":
                break  # keep the previous stage's solution
            solver = solver_stage
            assumptions.append(self.bound(objective, round(solver_stage.objective_value)))
        return status, self.choice(solver), first


def _objectives(v: cpsat_model.Variables, objective: str) -> list[cp_model.LinearExpr]:
    if objective == "cost":
        return [v.cost_units, v.tie_key]
    if objective == "hourly":
        return [v.price_units, v.step_us, v.tie_key]
    return [v.step_us, v.tie_key]


def solve_cpsat(space: SearchSpace, top_k: int, pareto: bool, max_pareto_points: int) -> EngineResult:
    model, v = cpsat_model.build(space, keep=top_k)
    session = _Session(space, model, v, time.monotonic() + space.query.time_limit_s)
    objectives = _objectives(v, space.query.objective)
    status, best, first = session.lexicographic(objectives, [])
    result = EngineResult(status=status)
    if best is None:
        return result
    if status == "feasible" and first is not None:
        result.best_bound = round(first.best_objective_bound)
        result.primary_value = round(first.objective_value)
    result.choices.append(best)
    if status == "optimal":
        for _ in range(top_k - 1):
            session.forbid(result.choices[-1])
            status_k, choice, _solver = session.lexicographic(objectives, [])
            if choice is None or status_k != "optimal":
                break
            result.choices.append(choice)
    if pareto and status == "optimal":
        result.pareto = _pareto(space, max_pareto_points)
    return result


def _pareto(space: SearchSpace, max_points: int) -> list[Choice]:
    """Epsilon-constraint sweep on a fresh model: cheapest plan, then the cheapest strictly faster
    one, until none is faster."""
    model, v = cpsat_model.build(space, keep=1)  # within a cluster, cost and time both follow step time
    session = _Session(space, model, v, time.monotonic() + space.query.time_limit_s)
    front: list[Choice] = []
    faster: list[cp_model.IntVar] = []
    while len(front) < max_points:
        status, choice, solver = session.lexicographic([v.cost_units, v.step_us, v.tie_key], faster)
        if choice is None or status != "optimal":
            break
        front.append(choice)
        step = evaluate(space, choice).step_us  # type: ignore[union-attr]
        faster = [session.bound(v.step_us, step - 1)]
    log.debug("pareto front: %d points", len(front))
    return front
