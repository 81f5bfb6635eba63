"""solve(): the Python API of `vramplan solve`. Takes a validated SolveQuery, returns a SolveResult."""

from __future__ import annotations

import logging
import time

from vramplan.models.catalogue.catalogue import Catalogue, load_stacks
from vramplan.models.catalogue.stack import restacked
from vramplan.models.core.errors import VramplanError
from vramplan.models.estimate import model_info
from vramplan.solver.brute import solve_brute
from vramplan.solver.collector import paced_collector
from vramplan.solver.cpsat_engine import solve_cpsat
from vramplan.solver.cpsat_exists import find_cpsat
from vramplan.solver.engine import (
    MAX_PARETO_POINTS,
    MILLI,
    Budget,
    EngineResult,
    SolverInternalError,
    TimeLimitReached,
    replayed,
)
from vramplan.solver.explain import closest_miss, explain
from vramplan.solver.points import Choice, Metrics, evaluate
from vramplan.solver.query import Explanation, ObjectiveReport, SearchReport, SolvedPlan, SolveQuery, SolveResult
from vramplan.solver.space import SearchSpace
from vramplan.solver.space_build import build_space
from vramplan.solver.stacks_explain import merged_explanation
from vramplan.solver.table_memo import TableMemo, memo_or_own
from vramplan.solver.verify import integer_to_user, objective_unit, verified_plan

log = logging.getLogger(__name__)


# A runner-up no cheaper, no faster and no leaner than a plan listed before it says nothing new
# (issue 31: recompute that saves 0.00 GiB at +12.5% cost): a top-k list is the first k distinct
# plans among the engine's best DISTINCT_OVERFETCH x k, so it may hold fewer than k.
DISTINCT_OVERFETCH = 3
LEANER_PERCENT = 1  # "leaner" is at least 1% less GPU memory (0.02 GiB of 165 saved by recompute is not)


def run_engine(space: SearchSpace, budget: Budget | None = None) -> EngineResult:
    """The query's engine on its space, within `budget` (default: the query's own)."""
    query = space.query
    engine = solve_cpsat if query.engine == "cpsat" else solve_brute
    budget = Budget.of(query) if budget is None else budget
    if query.top_k == 1:
        return engine(space, 1, query.pareto, MAX_PARETO_POINTS, budget)
    outcome = engine(space, query.top_k * DISTINCT_OVERFETCH, query.pareto, MAX_PARETO_POINTS, budget)
    outcome.choices = distinct_choices(space, outcome.choices)[:query.top_k]
    return outcome


def distinct_choices(space: SearchSpace, choices: list[Choice]) -> list[Choice]:
    """The choices (best first) without those that an earlier kept one matches or beats in cost and
    step time and that are not LEANER_PERCENT leaner in GPU memory (the engines' integers:
    points.Metrics)."""
    kept: list[tuple[Choice, Metrics]] = []
    for choice in choices:
        metrics = evaluate(space, choice)
        if metrics is None:
            raise SolverInternalError(f"engine returned {choice}, which breaks a constraint of the search space")
        if not any(m.cost_units <= metrics.cost_units and m.step_us <= metrics.step_us
                   and metrics.memory_mib * 100 >= m.memory_mib * (100 - LEANER_PERCENT) for _, m in kept):
            kept.append((choice, metrics))
    return [choice for choice, _ in kept]


def _objective_report(space: SearchSpace, outcome: EngineResult, value: float | None) -> ObjectiveReport:
    objective = space.query.objective
    report = ObjectiveReport(name=objective, value=value, unit=objective_unit(objective))
    if outcome.status == "feasible" and outcome.best_bound is not None and outcome.primary_value:
        # Out of time: the bound and the gap are those of the primary integer objective.
        report.gap = (outcome.primary_value - outcome.best_bound) / outcome.primary_value
        report.best_bound = integer_to_user(space, max(1, outcome.best_bound))
    return report


def _explanation(catalogue: Catalogue, query: SolveQuery, space: SearchSpace, budget: Budget):
    """Explain an infeasible answer; the solves it makes draw on the solve's `budget` and stop, as
    TimeLimitReached, once it is spent (a re-solve it cut short without a plan is not a "no")."""
    miss = closest_miss(space, budget)
    miss_plan = verified_plan(space, miss[0], must_fit=False) if miss is not None else None

    def one_plan(changed: SolveQuery) -> SolveQuery:
        return changed.model_copy(update={"top_k": 1, "pareto": False})

    def solve_one(changed: SolveQuery):
        try:
            result = _solve(catalogue, one_plan(changed), space.memo, explain_infeasible=False, budget=budget)
        except VramplanError:  # the change makes a job no stack runs (e.g. fp8 with LoRA)
            return None
        if result.status == "unknown":
            raise TimeLimitReached(budget.reached)
        return result.plans[0] if result.plans else None

    def fits(changed: SolveQuery) -> bool:
        try:
            return plan_exists(catalogue, one_plan(changed), budget, space.memo)
        except VramplanError:
            return False

    return explain(catalogue, query, space, miss_plan, miss[1] if miss else None, solve_one, budget, fits)


def check_job_runs(catalogue: Catalogue, query: SolveQuery) -> None:
    """Raise what a solve of the query raises whatever offerings it may use: the stack's refusals of
    the job, its recompute and its layouts, a job no precision runs (the space is built over no
    offering). fleet/sheet.py asks it of every job row, so a job its stack does not run is that row's
    `error`, as batch says, not `unserved` on every pool. A query over several stacks (`--stack any`)
    answers with the stacks that run it, so it is not checked here."""
    if len(query.stacks) > 1:
        return
    # what chooses offerings is the pools' business (a providers cell checked against no offering was
    # "provider='aws': no offering")
    unplaced = query.model_copy(update={"gpus": (), "providers": (), "regions": (), "countries": (), "jurisdiction": None})
    build_space(Catalogue(gpus=catalogue.gpus, offerings={}, architectures=catalogue.architectures), unplaced)


def plan_exists(catalogue: Catalogue, query: SolveQuery, budget: Budget | None = None,
                memo: TableMemo | None = None) -> bool:
    """Whether any plan of the query's space fits, without searching for the best: the first point
    the CP-SAT engine meets, re-checked in exact bytes like any plan (the brute-force engine
    answers by its full enumeration). TimeLimitReached when `budget` (default: the query's own)
    runs out before the answer is known (a "no" is never a guess). Rows of a batch ask the same
    questions of one job (the relaxed query, each subset of restrictions): answers are kept in
    `memo` (default: one of its own) by everything that decides them, not by the limits, with the
    work they took (engine.replayed)."""
    budget = Budget.of(query) if budget is None else budget
    with memo_or_own(memo) as kept:
        return replayed(budget, lambda measured: kept.result(
            catalogue, ("exists", query.feasibility_key(NOT_IN_EXISTS)), measured),
            lambda: _plan_exists(catalogue, query, budget, kept))


# What a yes/no answer does not depend on: the objective, the answer's shape, the limits it was
# given (running out raises instead of answering); the tokens only through the budget and deadline.
NOT_IN_EXISTS = frozenset({"objective", "top_k", "pareto", "num_workers", "random_seed", "time_limit_s", "work_limit"})


def _plan_exists(catalogue: Catalogue, query: SolveQuery, budget: Budget, memo: TableMemo) -> bool:
    space = build_space(catalogue, query, memo=memo)
    if query.engine == "cpsat":
        choice = find_cpsat(space, budget)
    else:
        outcome = run_engine(space, budget)
        if outcome.status == "unknown":
            raise TimeLimitReached(budget.reached)
        choice = outcome.choices[0] if outcome.choices else None
    if choice is None:
        return False
    verified_plan(space, choice)  # raises SolverInternalError unless it fits in exact bytes
    return True


def solve(catalogue: Catalogue, query: SolveQuery, explain_infeasible: bool = True,
          memo: TableMemo | None = None) -> SolveResult:
    """Search the query's space; plans are re-verified by models/; infeasible answers explained.

    `memo` (solver/table_memo.py) lets many solves share the models/ values behind their integer
    tables (a batch worker passes one); without one the solve makes its own, which its
    explanation's re-solves share. The answer is the same with or without it."""
    if not isinstance(query, SolveQuery):  # a dict reached deep code as an AttributeError
        raise VramplanError("query", type(query).__name__, "must be a vramplan.SolveQuery")
    if not isinstance(catalogue, Catalogue):
        raise VramplanError("catalogue", type(catalogue).__name__, "must be a vramplan.Catalogue (load_catalogue())")
    # the cyclic collector paced while the tables grow (solver/collector.py)
    with memo_or_own(memo) as kept, paced_collector():
        if len(query.stacks) > 1:
            return _solve_stacks(catalogue, query, kept, explain_infeasible)
        return _solve(catalogue, query, kept, explain_infeasible)


SPENT = 1e-9  # work units: what is left of a limit below this is none


def _solve_stacks(catalogue: Catalogue, query: SolveQuery, memo: TableMemo, explain_infeasible: bool) -> SolveResult:
    """The search over several stacks: each solved on its own space (its contract, the job's
    recipe defaults restacked), the plans merged best first; every plan names its stack. The work
    and time limits are the whole solve's: each stack gets what the stacks before it left (they
    were each stack's: a 5 s limit over ten stacks ran 29 s), and the stacks past a spent limit are
    not searched (limit_reached says which). A stack the job cannot run on (QLoRA on megatron) is
    left out; when none has a plan, every searched stack's explanation is merged into one
    (solver/stacks_explain.py), in the work the search left."""
    started = time.perf_counter()
    presets = load_stacks()
    results: list[SolveResult] = []
    searched: list[str] = []
    work_left, spent = query.work_limit, None
    for stack in query.stacks:
        single = _one_stack(query, stack, presets, work_left, started)
        if single is None:
            spent = "work" if work_left <= SPENT else "time"
            break
        try:
            results.append(_solve(catalogue, single, memo, explain_infeasible=False))
        except VramplanError as refused:
            if refused.field != "stack":
                raise
            continue
        searched.append(stack)
        work_left -= results[-1].search.work
    answered = [r for r in results if r.plans]
    if not answered:
        if not searched or not explain_infeasible:
            first = query.model_copy(update={"stacks": (), "job": restacked(query.job, query.stacks[0], presets)})
            return _solve(catalogue, first, memo, explain_infeasible)
        return _explain_stacks(catalogue, query, memo, searched, results, started, spent)
    plans = merged_plans([p for r in answered for p in r.plans], query.objective, query.top_k)
    best = next(r for r in answered if r.plans[0] is plans[0])
    statuses = {r.status for r in answered}
    return best.model_copy(update={
        # a stack cut short or left unsearched leaves the merged best unproven
        "status": "optimal" if statuses == {"optimal"} and spent is None and not any(r.limit_reached for r in results)
        else "feasible",
        "plans": plans,
        "pareto": pareto_front([p for r in answered for p in r.pareto]),
        "space_size": sum(r.space_size for r in results),
        "search": best.search.model_copy(update={"work": sum(r.search.work for r in results)}),
        "solve_time_s": time.perf_counter() - started,
        "limit_reached": next((r.limit_reached for r in results if r.limit_reached), spent),
    })


def _one_stack(query: SolveQuery, stack: str, presets: dict, work_left: float, started: float) -> SolveQuery | None:
    """The query on one of its stacks (the job's recipe defaults restacked) with what the limits
    left of the whole solve's, or None where they are spent (the stacks' work sums in floats: 100 -
    100 left 1e-14)."""
    time_left = query.time_limit_s - (time.perf_counter() - started)
    if work_left <= SPENT or time_left <= 0:
        return None
    return query.model_copy(update={"stacks": (), "job": restacked(query.job, stack, presets),
                                    "work_limit": work_left, "time_limit_s": time_left})


def _explain_stacks(catalogue: Catalogue, query: SolveQuery, memo: TableMemo, searched: list[str],
                    results: list[SolveResult], started: float, unsearched: str | None) -> SolveResult:
    """No searched stack has a plan: each explains its own infeasible search (`results`, one per
    `searched` stack, their spaces kept in `memo`) in what the limits left, and the explanations
    merge (solver/stacks_explain.py). With stacks left unsearched (`unsearched`: the limit that
    stopped the search) nothing is proven: the status is unknown."""
    presets = load_stacks()
    work_left = query.work_limit - sum(r.search.work for r in results)
    explained: list[tuple[str, Explanation]] = []
    reached = unsearched
    for stack in searched:
        single = _one_stack(query, stack, presets, work_left, started)
        if single is None:
            reached = reached or ("work" if work_left <= SPENT else "time")
            break
        budget = Budget.of(single)
        explained.append((stack, _explanation(catalogue, single, build_space(catalogue, single, memo=memo), budget)))
        work_left -= budget.spent / MILLI
        reached = reached or budget.reached
    first = results[0]
    return first.model_copy(update={
        "status": "unknown" if unsearched else first.status,
        "explanation": merged_explanation(tuple(query.stacks), explained, query.objective, tuple(searched)),
        "space_size": sum(r.space_size for r in results),
        "search": first.search.model_copy(update={"work": query.work_limit - work_left}),
        "solve_time_s": time.perf_counter() - started,
        "limit_reached": reached,
    })


_OFFLOAD_RANK = {"none": 0, "optimizer": 1, "optimizer+params": 2}
_RECOMPUTE_RANK = {"none": 0, "selective": 1, "op": 2, "full": 3}


def plan_tie_key(plan: SolvedPlan) -> tuple:
    """The engines' tie-breaks (docs/solver.md#objectives-ties-top-k-and-pareto) on a verified plan,
    for plans of different spaces (stacks), whose integer keys do not compare: fewer GPUs, fewer
    instances, the least model parallelism, the lower ZeRO stage, no offload, less recompute, the
    larger micro-batch, bf16, the lower price, the offering's name; then the stack's name, so the
    order of `--stack a,b` changes nothing."""
    c = plan.plan
    recompute = (_RECOMPUTE_RANK.get(c.recompute, 3), c.recompute_layers if c.recompute_layers is not None else 10**9)
    return (c.num_gpus, plan.cost.num_instances, c.tp * c.pp * c.cp * c.ep, c.zero, _OFFLOAD_RANK.get(c.offload, 3),
            recompute, -c.micro_batch, c.precision != "bf16", plan.cost.usd_per_hour, c.offering, c.stack)


def merged_plans(plans: list[SolvedPlan], objective: str, top_k: int) -> list[SolvedPlan]:
    """Several stacks' plans, best first by the objective and then plan_tie_key, without a plan that an
    earlier kept one matches or beats in cost and time while not LEANER_PERCENT leaner in GPU memory
    (distinct_choices' rule: hf and deepspeed on one GPU with ZeRO-0 are the same plan twice)."""
    sign = -1 if objective == "throughput" else 1
    kept: list[SolvedPlan] = []
    for plan in sorted(plans, key=lambda p: (sign * p.objective_value, plan_tie_key(p))):
        if not any(k.cost.usd_total <= plan.cost.usd_total and k.cost.hours <= plan.cost.hours
                   and plan.memory.total_bytes * 100 >= k.memory.total_bytes * (100 - LEANER_PERCENT) for k in kept):
            kept.append(plan)
        if len(kept) == top_k:
            break
    return kept


def pareto_front(plans: list[SolvedPlan]) -> list[SolvedPlan]:
    """Cost-vs-time front of plans: cheapest first, each next strictly faster (equal points in
    plan_tie_key's order, whatever order the stacks were searched in)."""
    front: list[SolvedPlan] = []
    for plan in sorted(plans, key=lambda p: (p.cost.usd_total, p.cost.hours, plan_tie_key(p))):
        if not front or plan.cost.hours < front[-1].cost.hours:
            front.append(plan)
    return front


def _solve(catalogue: Catalogue, query: SolveQuery, memo: TableMemo, explain_infeasible: bool,
           budget: Budget | None = None) -> SolveResult:
    """One stack's solve within `budget` (default: the query's own, which its explanation shares)."""
    started = time.perf_counter()
    budget = Budget.of(query) if budget is None else budget
    before = budget.spent
    space = build_space(catalogue, query, memo=memo)
    outcome = run_engine(space, budget)
    plans = [verified_plan(space, choice) for choice in outcome.choices]
    pareto = [verified_plan(space, choice) for choice in outcome.pareto]
    explanation = None
    if outcome.status == "infeasible" and explain_infeasible:
        explanation = _explanation(catalogue, query, space, budget)
    value = plans[0].objective_value if plans else None
    return SolveResult(
        status=outcome.status,
        objective=_objective_report(space, outcome, value),
        model=model_info(space.arch, space.job),
        global_batch=space.global_batch,
        tokens=query.tokens,
        engine=query.engine,
        space_size=space.size,
        search=SearchReport(combinations=space.size, evaluations=space.evaluations,
                            cpsat_models=outcome.stats.models_built, cpsat_solves=outcome.stats.solves,
                            work=(budget.spent - before) / MILLI),
        solve_time_s=time.perf_counter() - started,
        plans=plans,
        pareto=pareto,
        explanation=explanation,
        limit_reached=budget.reached,
    )
