"""The fleet's output rows (one per job row, in input order) and its per-pool summary."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from vramplan.fleet.inputs import Assignment, FleetResult, PoolUsage
from vramplan.sheets.rows import ANSWER_COLUMNS, output_row
from vramplan.solver.query import SolveResult

PLAN_ANSWER_COLUMNS = tuple(c for c in ANSWER_COLUMNS if c not in ("status", "error", "explanation"))
POOL_COLUMNS = ("pool", "offering", "committed", "num_jobs", "gpu_hours_available", "gpu_hours_used",
                "idle_gpu_hours", "utilisation", "usd_marginal")


def answer_columns(dated: bool) -> list[str]:
    times = ["start", "end"] if dated else []
    return ["status", "error", "pool", "start_hours", "end_hours", *times, *PLAN_ANSWER_COLUMNS, "usd_marginal",
            "late_hours", "explanation"]


def output_header(input_columns: list[str], dated: bool) -> list[str]:
    """Answer columns; one that an input column already names (a pin such as num_gpus) gets a plan_ prefix."""
    taken = set(input_columns)
    return input_columns + [f"plan_{name}" if name in taken else name for name in answer_columns(dated)]


def _stamp(start: datetime | None, hours: float | None) -> str | None:
    if start is None or hours is None:
        return None
    try:
        return (start + timedelta(hours=hours)).isoformat(timespec="minutes")
    except OverflowError:  # past year 9999: no calendar date to write
        return "after 9999-12-31"


def answer_cells(assignment: Assignment | None, error: str | None, start: datetime | None) -> list[Any]:
    answer: dict[str, Any] = dict.fromkeys(answer_columns(start is not None))
    if assignment is None:
        answer.update(status="error", error=error)
        return list(answer.values())
    if assignment.status == "unplanned":  # no answer at all: the reason is the row's error
        answer.update(status=assignment.status, error=assignment.explanation)
        return list(answer.values())
    answer.update(status=assignment.status, pool=assignment.pool, explanation=assignment.explanation,
                  usd_marginal=assignment.usd_marginal)
    if assignment.plan is not None:
        planned = output_row(SolveResult.model_construct(status="optimal", plans=[assignment.plan]))
        answer.update({name: planned[name] for name in PLAN_ANSWER_COLUMNS})
        answer.update(start_hours=round(assignment.start_hours or 0.0, 4), end_hours=round(assignment.end_hours or 0.0, 4),
                      late_hours=round(assignment.late_hours or 0.0, 4))
        if start is not None:
            answer.update(start=_stamp(start, assignment.start_hours), end=_stamp(start, assignment.end_hours))
    return list(answer.values())


def pool_rows(pools: list[PoolUsage]) -> list[list[Any]]:
    return [[getattr(pool, name) for name in POOL_COLUMNS] for pool in pools]


def _figure(value: float) -> str:
    """An objective for a line people read: hours and cents to two decimals (376.97, not 376.96666666666664)."""
    return f"{value:,.2f}" if isinstance(value, float) else f"{value:,}"


def summary_lines(result: FleetResult) -> list[str]:
    """The solve's status and each pool's use, for stderr."""
    unit = {"cost": "USD", "makespan": "hours", "tardiness": "priority-weighted hours late"}[result.objective]
    status = result.status + (" (interrupted)" if result.interrupted else "")
    value = "not computed" if result.objective_value is None else f"{_figure(result.objective_value)} {unit}"
    if result.objective == "cost" and result.objective_value is not None:
        # the integer model's cost: each job's marginal USD rounded up to whole cents (fleet/build.py
        # cost_cents), so it may read a few cents above the marginal sum beside it
        value += " (each job rounded up to whole cents)"
    line = f"fleet: {status}, {result.objective} = {value}"
    if result.status != "optimal" and result.best_bound is not None:
        line += f", bound {_figure(result.best_bound)}, gap {100 * (result.gap or 0):.2f}%"
    lines = [line + f"; marginal cost {result.usd_marginal_total:,.2f} USD; solve {result.solve_time_s:.2f} s, "
             f"planner {result.candidate_time_s:.2f} s for {result.num_candidates} candidate plans"]
    if result.num_unplanned:
        lines.append(f"fleet: {result.num_unplanned} jobs unplanned: the time limit ran out before their plans "
                     f"were computed (raise --time-limit)")
    for stage in result.stages:
        if stage.status not in ("optimal", "skipped"):
            lines.append(f"fleet: stage {stage.name} {stage.status}: value {stage.value}, bound {stage.bound}")
    for pool in result.pools:
        if pool.offering is not None and not pool.gpu_hours_available:  # was skipped as silently as a market pool
            lines.append(f"pool {pool.pool}: no GPUs before the horizon (num_gpus 0, or windows after it): it serves no job")
            continue
        if not pool.num_jobs and not pool.gpu_hours_available:  # an unused market provider, or a zero quota
            continue
        used = f"{pool.gpu_hours_used:,.0f} GPU-h used"
        if pool.gpu_hours_available is not None:
            used += f" of {pool.gpu_hours_available:,.0f} ({100 * (pool.utilisation or 0):.1f}%), " \
                    f"idle {pool.idle_gpu_hours:,.0f} GPU-h" + (" (committed)" if pool.committed else "")
        lines.append(f"pool {pool.pool}: {pool.num_jobs} jobs, {used}, {pool.usd_marginal:,.2f} USD marginal")
    return lines
