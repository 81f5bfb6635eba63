"""Trust, but verify: every plan an engine returns is re-evaluated by models/ in exact bytes and
floating-point time, and its objective recomputed; a disagreement is an internal error."""

from __future__ import annotations

from vramplan.models.core.results import EstimateResult
from vramplan.models.core.units import US_PER_S
from vramplan.models.estimate import estimate_plan
from vramplan.solver.clusters import PRICE_UNITS_PER_USD
from vramplan.solver.engine import SolverInternalError
from vramplan.solver.points import Choice, Metrics, evaluate
from vramplan.solver.query import PlanChoice, SolvedPlan
from vramplan.solver.space import SearchSpace
from vramplan.solver.step_time import STEP_ROUNDING_US


def objective_value(space: SearchSpace, result: EstimateResult) -> float:
    """The query's objective, in user units, from the reference model."""
    objective = space.query.objective
    if objective == "cost":
        return result.cost.usd_total
    if objective == "time":
        return result.cost.hours
    if objective == "throughput":
        return result.performance.tokens_per_s
    return result.cost.usd_per_hour


def objective_unit(objective: str) -> str:
    return {"cost": "USD", "time": "hours", "throughput": "tokens/s", "hourly": "USD/hour"}[objective]


def primary_integer(space: SearchSpace, metrics: Metrics) -> int:
    """The engine's integer form of the query's objective (minimised; throughput via step time)."""
    objective = space.query.objective
    if objective == "cost":
        return metrics.cost_units
    if objective == "hourly":
        return metrics.price_units
    return metrics.step_us


def integer_to_user(space: SearchSpace, value: int) -> float:
    """An engine integer of the primary objective in the user's units."""
    objective = space.query.objective
    if objective == "cost":
        return space.usd(value)
    if objective == "time":
        return space.hours(value)
    if objective == "throughput":
        return space.global_batch * space.job.seq_len / (value / US_PER_S)
    return value / PRICE_UNITS_PER_USD


def solver_objective_value(space: SearchSpace, metrics: Metrics) -> float:
    return integer_to_user(space, primary_integer(space, metrics))


def plan_choice(space: SearchSpace, result: EstimateResult) -> PlanChoice:
    plan, job = result.plan, result.job
    return PlanChoice(
        gpu=plan.gpu, offering=result.cost.offering, num_gpus=plan.num_gpus, dp=plan.dp, zero=plan.zero,
        recompute=plan.recompute, recompute_layers=plan.recompute_layers, precision=plan.precision,
        micro_batch=plan.micro_batch, grad_accum=plan.grad_accum, optimizer=job.optimizer, attention=job.attention,
        kernels=job.kernels, offload=plan.offload, method=job.method, stack=job.stack, seq_len=job.seq_len,
        **plan.layout.plan_fields(),
    )


def verified_plan(space: SearchSpace, choice: Choice, must_fit: bool = True) -> SolvedPlan:
    metrics = evaluate(space, choice, memory=must_fit, limits=must_fit)
    if metrics is None:
        raise SolverInternalError(f"engine returned {choice}, which breaks a constraint of the search space")
    plan = space.plan(choice.cluster, choice.zero_offload, choice.recompute, choice.precision, choice.micro_batch,
                      choice.layout)
    cluster = space.clusters[choice.cluster]
    gpu = space.gpus[cluster.gpu_index]
    query = space.query
    # Kept with the job's tables: rows of a batch that land on one plan (another objective, token
    # count or GPU limit) get the same re-evaluation
    # (docs/performance.md#verification).
    result = space.tables.kept(("estimate", plan, cluster.offering.name, query.tokens, query.pricing, query.restart_overhead),
                               lambda: estimate_plan(space.arch, space.job, plan, gpu, cluster.offering, query.tokens,
                                                     query.pricing, query.restart_overhead))
    if must_fit and not result.memory.fits:
        raise SolverInternalError(f"plan {plan} was accepted by the solver but does not fit in exact bytes")
    reference = objective_value(space, result)
    engine = solver_objective_value(space, metrics)
    # Relative resolution of the integers: step times to the microsecond, prices to 1e-4 USD/hour.
    step_resolution = STEP_ROUNDING_US / metrics.step_us
    price_resolution = 0.5 / max(1, metrics.price_units)
    tolerance = {"cost": step_resolution + price_resolution, "hourly": price_resolution}.get(
        space.query.objective, step_resolution) + 1e-9
    if abs(engine - reference) > tolerance * abs(reference):
        raise SolverInternalError(f"objective mismatch for {plan}: engine {engine!r}, reference {reference!r}")
    return SolvedPlan(plan=plan_choice(space, result), objective_value=reference, memory=result.memory,
                      performance=result.performance, cost=result.cost, warnings=result.warnings)
