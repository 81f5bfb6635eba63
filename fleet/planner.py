"""plan_fleet(): many training jobs on one finite GPU inventory (and optionally the market).

prepare() asks the planner for every job's candidate plans per pool and turns the question into
integers (fleet/domain.py); FleetSession (fleet/model.py) schedules them with
CP-SAT; finish() turns any schedule (the proven one, or the best so far on Ctrl-C) back into
hours, plans and dollars, explains the unserved jobs and sums each pool's use.

With a Budget (fleet/clock.py; plan_fleet and the command pass one) the three phases share the
time limit: jobs whose plans were not computed by the candidate phase's end are `unplanned`,
explanations stop at the end of the budget and say so.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from vramplan.fleet.candidates import (
    Candidate,
    CandidateCache,
    duration_min,
    pool_candidates,
)
from vramplan.fleet.clock import CANDIDATE_SHARE, SCHEDULE_SHARE, Budget, TimeUp, check, left
from vramplan.fleet.domain import (
    CENTS_PER_USD,
    MAX_JOB_CENTS,
    MINUTES_PER_HOUR,
    WEIGHT_SCALE,
    IntFleet,
    IntJob,
    IntPool,
    IntSchedule,
    Slot,
    Window,
    check_bounds,
)
from vramplan.fleet.explain import explain_unserved
from vramplan.fleet.inputs import (
    Assignment,
    FleetQuery,
    FleetResult,
    PoolUsage,
    StageSummary,
)
from vramplan.fleet.model import FleetSession
from vramplan.fleet.sgs import left_shift
from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.core.errors import VramplanError, unknown_name_error
from vramplan.solver import solve

log = logging.getLogger(__name__)


NOT_PLANNED = "not planned: the time limit ran out before this job's plans were computed (raise --time-limit)"
NOT_EXPLAINED = "not explained: the time limit ran out first"
NOT_SERVED = "not served by the best schedule found before the solve stopped"
MIN_EXPLAIN_S = 0.5  # an explanation's solve needs at least this much of the budget
PRICED_OUT = f"every plan costs more than the fleet's limit of {MAX_JOB_CENTS / CENTS_PER_USD:.0e} USD for one job"


@dataclass
class Prepared:
    query: FleetQuery
    candidates: list[list[Candidate]]  # per job
    no_plan: list[str | None]  # per job: why no pool runs it (None when some pool does, or unplanned)
    planned: list[bool]  # per job: its candidates were computed (False: the time limit ran out first)
    fleet: IntFleet
    pool_steps: list[int]  # GPUs per instance of each pool (the unit of extra capacity)
    candidate_time_s: float
    budget: Budget | None = None  # the run's time budget, shared by the phases (None: no bound but the stages')


def _minutes(hours: float, up: bool) -> int:
    value = hours * MINUTES_PER_HOUR
    return math.ceil(value - 1e-9) if up else math.floor(value + 1e-9)


def _int_pool(pool, horizon_min: int) -> IntPool:
    if pool.windows is None:
        return IntPool(pool.name, None)
    windows = tuple(Window(_minutes(w.from_hours, up=True),
                           horizon_min if w.to_hours is None else min(horizon_min, _minutes(w.to_hours, up=False)),
                           w.num_gpus) for w in pool.windows)
    return IntPool(pool.name, tuple(w for w in windows if w.to_min > w.from_min), committed=pool.committed)


def _cents(candidate: Candidate) -> int:
    return math.ceil(candidate.usd_marginal * CENTS_PER_USD - 1e-9)


def _no_plan_reasons(catalogue: Catalogue, query: FleetQuery, candidates: list[list[Candidate]], planned: list[bool],
                     priced_out: list[bool], until: float | None) -> list[str | None]:
    """Why no pool runs each planned job without candidates (jobs alike share one answer)."""
    reasons: dict[tuple, str] = {}
    texts: list[str | None] = []
    for j, job in enumerate(query.jobs):
        if candidates[j] or not planned[j] or priced_out[j]:
            texts.append(PRICED_OUT if priced_out[j] else None)
            continue
        key = (job.query, job.pools)
        if key not in reasons:
            try:
                reasons[key] = _no_plan_reason(catalogue, query, j, until)
            except VramplanError as error:  # e.g. a model that is neither a catalogue name nor a config
                reasons[key] = f"no plan: {error}"
        texts.append(reasons[key])
    return texts


def _no_plan_reason(catalogue: Catalogue, query: FleetQuery, j: int, until: float | None) -> str:
    """The planner's own explanation on the pools' offerings (or the whole market), in the time left."""
    if left(until) < MIN_EXPLAIN_S:
        return f"no plan fits any pool ({NOT_EXPLAINED})"
    job_query = query.jobs[j].query
    pools = [p for p in query.pools if not query.jobs[j].pools or p.name in query.jobs[j].pools]
    names = {p.offering for p in pools if p.offering is not None}
    providers = {p.market_provider for p in pools if p.market_provider is not None}
    offerings = {name: o for name, o in catalogue.offerings.items() if name in names or o.provider in providers}
    narrowed = Catalogue(gpus=catalogue.gpus, offerings=offerings, architectures=catalogue.architectures)
    limit = min(job_query.time_limit_s, left(until))
    result = solve(narrowed, job_query.model_copy(update={"objective": "cost", "top_k": 1, "pareto": False,
                                                          "time_limit_s": limit}))
    if result.explanation is None:
        return "no plan of this job fits any pool's GPUs" + (f" ({NOT_EXPLAINED})" if result.status == "unknown" else "")
    text = result.explanation.summary.rstrip(".")
    if result.explanation.smallest_change:
        text += f". Smallest change: {result.explanation.smallest_change}"
    return "no plan fits any pool: " + " ".join(text.split())


def _planning_order(query: FleetQuery) -> list[int]:
    """Required jobs first, then the others, each in input order: the candidate phase's order."""
    return sorted(range(len(query.jobs)), key=lambda j: (not query.jobs[j].required, j))


def _plan_jobs(catalogue: Catalogue, query: FleetQuery, cache: CandidateCache,
               until: float | None) -> tuple[list[list[Candidate]], list[bool]]:
    """Each job's candidates in planning order until `until`; the jobs not reached by then are unplanned."""
    candidates: list[list[Candidate]] = [[] for _ in query.jobs]
    planned = [False] * len(query.jobs)
    try:
        for j in _planning_order(query):
            check(until)
            job = query.jobs[j]
            candidates[j] = [c for p, pool in enumerate(query.pools) if not job.pools or pool.name in job.pools
                             for c in pool_candidates(catalogue, job.query, p, pool, cache, until)]
            planned[j] = True
    except TimeUp:
        log.info("fleet: the candidate phase ran out of time after %d of %d jobs", sum(planned), len(planned))
    return candidates, planned


def prepare(catalogue: Catalogue, query: FleetQuery, cache: CandidateCache | None = None,
            budget: Budget | None = None) -> Prepared:
    """Candidates and the integer fleet; with a budget the candidate phase stops at CANDIDATE_SHARE of it."""
    check_pools(catalogue, query)  # the command line prepares without plan_fleet()
    began = time.perf_counter()
    cache = cache or CandidateCache()
    horizon_min = _minutes(query.horizon_hours, up=False)
    until = None if budget is None else budget.at(CANDIDATE_SHARE)
    planned_candidates, planned = _plan_jobs(catalogue, query, cache, until)
    # A plan above the per-job cost limit (domain.py: the objectives stay in int64) is no candidate.
    candidates = [[c for c in found if _cents(c) <= MAX_JOB_CENTS] for found in planned_candidates]
    priced_out = [bool(found) and not kept for found, kept in zip(planned_candidates, candidates)]
    no_plan = _no_plan_reasons(catalogue, query, candidates, planned, priced_out, until)
    jobs = []
    for job, found in zip(query.jobs, candidates):
        slots = tuple(Slot(pool=c.pool, gpus=c.gpus, duration_min=duration_min(c.hours), cost_cents=_cents(c))
                      for c in found)
        deadline = None if job.deadline_hours is None else _minutes(job.deadline_hours, up=False)
        jobs.append(IntJob(release_min=_minutes(job.earliest_start_hours, up=True), deadline_min=deadline,
                           weight=round(job.priority * WEIGHT_SCALE), required=job.required, slots=slots))
    fleet = IntFleet(jobs=tuple(jobs), pools=tuple(_int_pool(p, horizon_min) for p in query.pools),
                     horizon_min=horizon_min, objective=query.objective)
    check_bounds(fleet)
    steps = [catalogue.offering(p.offering).num_gpus if p.offering else 1 for p in query.pools]
    return Prepared(query, candidates, no_plan, planned, fleet, steps, time.perf_counter() - began, budget)


def session(prepared: Prepared) -> FleetSession:
    """The CP-SAT session: until SCHEDULE_SHARE of the budget, else for the query's time limit."""
    q = prepared.query
    limit = q.time_limit_s if prepared.budget is None else max(0.0, left(prepared.budget.at(SCHEDULE_SHARE)))
    return FleetSession(prepared.fleet, limit, num_workers=q.num_workers, random_seed=q.random_seed)


def _stage_value(name: str, value: int | None) -> float | None:
    if value is None:
        return None
    return value / CENTS_PER_USD if name == "cost" else value / MINUTES_PER_HOUR if name in (
        "makespan", "committed_gpu_hours") else (
        value / WEIGHT_SCALE / MINUTES_PER_HOUR if name == "tardiness" else value / WEIGHT_SCALE)


def _unserved_reason(prepared: Prepared, schedule: IntSchedule, j: int, explain: bool, until: float | None) -> str:
    if prepared.no_plan[j] is not None:
        return prepared.no_plan[j]  # type: ignore[return-value]
    if not explain:
        return NOT_SERVED
    try:
        return explain_unserved(prepared.fleet, schedule, j, prepared.pool_steps, until=until)
    except TimeUp:
        return NOT_EXPLAINED


def _assignment(prepared: Prepared, schedule: IntSchedule, j: int, explain: bool, until: float | None) -> Assignment:
    fleet = prepared.fleet
    c = schedule.slot[j]
    if not prepared.planned[j]:
        return Assignment(status="unplanned", explanation=NOT_PLANNED)
    if c is None:
        text = _unserved_reason(prepared, schedule, j, explain, until)
        if fleet.jobs[j].required:
            text = "required, but cannot be served: " + text
        return Assignment(status="unserved", explanation=text)
    candidate = prepared.candidates[j][c]
    start = schedule.start_min[j] or 0
    end = start + fleet.jobs[j].slots[c].duration_min
    deadline = fleet.jobs[j].deadline_min
    late = max(0, end - deadline) if deadline is not None else 0
    return Assignment(status="late" if late else "scheduled", pool=prepared.query.pools[candidate.pool].name,
                      start_hours=start / MINUTES_PER_HOUR, end_hours=end / MINUTES_PER_HOUR, plan=candidate.plan,
                      pool_gpus=candidate.gpus,
                      usd_marginal=round(candidate.usd_marginal, 2), late_hours=late / MINUTES_PER_HOUR)


def _pool_usage(prepared: Prepared, schedule: IntSchedule) -> list[PoolUsage]:
    usages = []
    for p, (pool, int_pool) in enumerate(zip(prepared.query.pools, prepared.fleet.pools)):
        chosen = [(j, c) for j, c in enumerate(schedule.slot) if c is not None and prepared.candidates[j][c].pool == p]
        used = sum(prepared.fleet.jobs[j].slots[c].gpus * prepared.fleet.jobs[j].slots[c].duration_min
                   for j, c in chosen) / MINUTES_PER_HOUR
        available = None if int_pool.windows is None else round(sum(
            w.gpus * (w.to_min - w.from_min) for w in int_pool.windows) / MINUTES_PER_HOUR, 2)
        usages.append(PoolUsage(
            pool=pool.name, offering=pool.offering or pool.market_provider, committed=pool.committed,
            gpu_hours_available=available, gpu_hours_used=round(used, 2),
            idle_gpu_hours=None if available is None else round(available - used, 2),
            utilisation=None if not available else round(used / available, 4), num_jobs=len(chosen),
            # the sum of the jobs' cells (each rounded to cents, _assignments), so the pool adds up to its rows
            usd_marginal=round(sum(round(prepared.candidates[j][c].usd_marginal, 2) for j, c in chosen), 2)))
    return usages


def _assignments(prepared: Prepared, schedule: IntSchedule, explain: bool, until: float | None) -> list[Assignment]:
    """One per job; the first explain_limit unserved jobs that have plans are explained (until `until`)."""
    assignments = []
    explained = 0
    for j in range(len(prepared.fleet.jobs)):
        may_explain = explain and explained < prepared.query.explain_limit
        explained += schedule.slot[j] is None and prepared.planned[j] and prepared.no_plan[j] is None and may_explain
        assignments.append(_assignment(prepared, schedule, j, may_explain, until))
    return assignments


def finish(prepared: Prepared, schedule: IntSchedule, solve_time_s: float, explain: bool = True) -> FleetResult:
    """The answer: the schedule left-shifted and explained, both within the budget (when there is one)."""
    until = None if prepared.budget is None else prepared.budget.explain_until(len(prepared.fleet.jobs))
    schedule = left_shift(prepared.fleet, schedule, until)
    assignments = _assignments(prepared, schedule, explain and not schedule.interrupted, until)
    unplanned = prepared.planned.count(False)
    primary = next((s for s in schedule.stages if s.name == prepared.query.objective), None)
    stages = [StageSummary(name=s.name, status=s.status, value=_stage_value(s.name, s.value),
                           bound=_stage_value(s.name, s.bound), gap=s.gap, wall_s=round(s.wall_s, 3),
                           first_solution_s=s.first_solution_s) for s in schedule.stages]
    primary_summary = next((s for s in stages if s.name == prepared.query.objective), None)
    return FleetResult(
        status="feasible" if unplanned and schedule.status == "optimal" else schedule.status,  # type: ignore[arg-type]
        objective=prepared.query.objective,
        objective_value=primary_summary.value if primary_summary else None,
        best_bound=primary_summary.bound if primary_summary else None,
        gap=primary.gap if primary else None,
        interrupted=schedule.interrupted,
        num_unplanned=unplanned,
        stages=stages,
        assignments=assignments,
        pools=_pool_usage(prepared, schedule),
        usd_marginal_total=round(sum(a.usd_marginal or 0.0 for a in assignments), 2),
        num_candidates=sum(len(c) for c in prepared.candidates),
        candidate_time_s=round(prepared.candidate_time_s, 3),
        solve_time_s=round(solve_time_s, 3),
    )


def _check_kinds(catalogue: Catalogue, query: FleetQuery) -> None:
    """The arguments are a Catalogue and a FleetQuery (a dict query was an AttributeError)."""
    if not isinstance(query, FleetQuery):
        raise VramplanError("query", type(query).__name__, "must be a vramplan.FleetQuery")
    if not isinstance(catalogue, Catalogue):
        raise VramplanError("catalogue", type(catalogue).__name__, "must be a vramplan.Catalogue (load_catalogue())")


def check_pools(catalogue: Catalogue, query: FleetQuery) -> None:
    """The query is a FleetQuery whose market pools name providers of the catalogue and whose offering
    pools name its offerings, one VramplanError naming the field (an unknown provider left the job
    unserved: 'no provider has on-demand prices (use --pricing on-demand)')."""
    _check_kinds(catalogue, query)
    providers = sorted({o.provider for o in catalogue.offerings.values()})
    for pool in query.pools:
        if pool.market_provider is not None and pool.market_provider not in providers:
            raise unknown_name_error("market_provider", pool.market_provider, providers)
        if pool.offering is not None:
            offering = catalogue.offering(pool.offering)  # an unknown offering is one line naming it
            # a plan blocks whole instances: 12 GPUs of 8-GPU instances ran one 8-GPU plan at a time
            # and counted 4 idle GPUs nobody could use
            odd = next((w for w in pool.windows or () if w.num_gpus % offering.num_gpus), None)
            if odd is not None:
                raise VramplanError("num_gpus", odd.num_gpus, f"pool {pool.name!r}: is not a whole number of "
                                                              f"{offering.name}'s {offering.num_gpus}-GPU instances")


def plan_fleet(catalogue: Catalogue, query: FleetQuery, cache: CandidateCache | None = None) -> FleetResult:
    """Candidates, the CP-SAT schedule, explanations: the whole fleet answer in one call, within
    query.time_limit_s (fleet/clock.py; jobs the candidate phase did not reach are unplanned)."""
    _check_kinds(catalogue, query)  # before query.time_limit_s is read; prepare() checks the pools
    prepared = prepare(catalogue, query, cache, Budget.of(query.time_limit_s))
    began = time.perf_counter()
    schedule = session(prepared).run()
    return finish(prepared, schedule, time.perf_counter() - began)
