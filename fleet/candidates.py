"""Candidate plans of each job on each pool: the planner's best plan per cluster size.

A job can run smaller and longer or larger and shorter: per pool we ask `solver.api.solve` (which
re-checks every plan in exact bytes through models/) for the cheapest plan at each GPU count,
with the count pinned and the catalogue narrowed to the pool's offering (a market pool: to its
provider's offerings, plus the unpinned optimum, so one job on the market gets `vramplan
solve`'s own answer). Plans that another plan beats on GPUs, hours and cost at once are dropped.

Cache: for a fixed GPU count the best plan does not depend on the token budget (wall time and
cost are linear in it; the plan minimises step time x price), so plans are cached by the job's
query at a reference budget and scaled; a job with a budget or a deadline on its own plan (which
make the plan depend on tokens) is cached with its tokens. The plans per size that fit a pool are
cached per (job shape, pool) too, so a job like one seen before costs no solve and no pydantic
copy: its candidates keep the reference plan and the scale, and the scaled plan is made only for
the jobs that are scheduled (10,000 jobs of 8 shapes on 4 pools: 4.5 s instead of 30.7 s under
cProfile, docs/performance.md#fleet-time-limit).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from vramplan.fleet.clock import TimeUp, left
from vramplan.fleet.inputs import Pool
from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.models.core.catalogue_schema import Offering
from vramplan.models.core.errors import VramplanError
from vramplan.models.time.cost import num_instances
from vramplan.solver import SolvedPlan, SolveQuery, solve

log = logging.getLogger(__name__)

REFERENCE_TOKENS = 1e9
MARKET_MAX_GPUS_DEFAULT = 512
CANDIDATE_TIME_LIMIT_S = 10.0


@dataclass(frozen=True)
class Candidate:
    pool: int
    reference: SolvedPlan  # the plan at the cache's reference tokens (or the job's own)
    factor: float  # the job's tokens over the reference's
    gpus: int  # whole instances' GPUs: what the plan blocks in its pool
    hours: float
    usd_marginal: float  # 0 on a committed pool

    @property
    def plan(self) -> SolvedPlan:
        """The plan at the job's tokens."""
        return _scaled(self.reference, self.factor)


@dataclass
class CandidateCache:
    plans: dict[tuple, SolvedPlan | None] = field(default_factory=dict)  # (offerings, reference query, size)
    fitting: dict[tuple, list[tuple[SolvedPlan, int]]] = field(default_factory=dict)  # (shape, pool): (plan, GPUs)
    shapes: dict[SolveQuery, int] = field(default_factory=dict)  # reference query -> shape number
    calls: int = 0
    hits: int = 0
    solve_s: float = 0.0


def pool_offering(catalogue: Catalogue, pool: Pool) -> Offering:
    """The pool's offering, its price replaced by the pool's own where given."""
    offering = catalogue.offering(pool.offering or "")
    if pool.price_usd_per_gpu_hour is None:
        return offering
    per_instance = pool.price_usd_per_gpu_hour * offering.num_gpus
    return offering.model_copy(update={"price_usd_per_hour": per_instance, "spot_price_usd_per_hour": per_instance})


def _narrowed(catalogue: Catalogue, offerings: list[Offering]) -> Catalogue:
    return Catalogue(gpus=catalogue.gpus, offerings={o.name: o for o in offerings}, architectures=catalogue.architectures)


def pool_capacity(pool: Pool) -> int | None:
    return None if pool.windows is None else max((w.num_gpus for w in pool.windows), default=0)


def cluster_sizes(per_instance: int, most_gpus: int) -> list[int]:
    """1, 2, 4 ... up to one instance, then 1, 2, 4 ... whole instances, and the most that fits."""
    sizes = {n for n in (2**k for k in range(20)) if n <= min(per_instance, most_gpus)}
    instances = most_gpus // per_instance
    sizes |= {per_instance * k for k in (2**i for i in range(20)) if k <= instances}
    if instances:
        sizes.add(per_instance * instances)
    return sorted(sizes)


def _scaled(plan: SolvedPlan, factor: float) -> SolvedPlan:
    if factor == 1.0:
        return plan
    cost = plan.cost.model_copy(update={"tokens": plan.cost.tokens * factor, "hours": plan.cost.hours * factor,
                                        "days": plan.cost.days * factor, "usd_total": plan.cost.usd_total * factor})
    return plan.model_copy(update={"cost": cost, "objective_value": cost.usd_total})


def _reference(query: SolveQuery) -> SolveQuery:
    """The query the plans are cached by (module docstring)."""
    scalable = query.budget_usd is None and query.deadline_hours is None
    return query.model_copy(update={"tokens": REFERENCE_TOKENS}) if scalable else query


def _best_plan(catalogue: Catalogue, offerings: list[Offering], reference: SolveQuery, num_gpus: int | None,
               cache: CandidateCache, until: float | None = None) -> SolvedPlan | None:
    """The cheapest plan at this size for the reference query; TimeUp when the run's budget
    (`until`) runs out before the planner answers in full (a solve the budget cut short is
    neither kept nor cached)."""
    key = (tuple((o.name, o.price_usd_per_hour, o.spot_price_usd_per_hour) for o in offerings), reference, num_gpus)
    if key in cache.plans:
        cache.hits += 1
    else:
        limit = min(CANDIDATE_TIME_LIMIT_S, left(until))
        if limit <= 0:
            raise TimeUp
        cache.calls += 1
        began = time.perf_counter()
        pins = reference.pins if num_gpus is None else reference.pins.model_copy(update={"num_gpus": num_gpus})
        changed = reference.model_copy(update={"objective": "cost", "top_k": 1, "pareto": False, "pins": pins,
                                               "time_limit_s": limit, "max_gpus": max(reference.max_gpus, num_gpus or 1)})
        try:
            result = solve(_narrowed(catalogue, offerings), SolveQuery.model_validate(changed.model_dump()),
                           explain_infeasible=False)
            if limit < CANDIDATE_TIME_LIMIT_S and result.status not in ("optimal", "infeasible"):
                raise TimeUp
            cache.plans[key] = result.plans[0] if result.plans else None
        except VramplanError as error:  # e.g. a precision this GPU cannot run
            log.info("no plan for %s on %s: %s", reference.model, [o.name for o in offerings], error)
            cache.plans[key] = None
        finally:
            cache.solve_s += time.perf_counter() - began
    return cache.plans[key]


def _undominated(candidates: list[Candidate]) -> list[Candidate]:
    """Drop a plan when another has no more GPUs, hours and cost (ties: keep the first, fewest GPUs)."""
    kept: list[Candidate] = []
    for c in sorted(candidates, key=lambda c: (c.gpus, c.hours, c.usd_marginal)):
        if not any(k.gpus <= c.gpus and k.hours <= c.hours and k.usd_marginal <= c.usd_marginal for k in kept):
            kept.append(c)
    return kept


def _allowed(query: SolveQuery, offering: Offering) -> bool:
    return (not query.gpus or offering.gpu in query.gpus) and (not query.providers or offering.provider in query.providers)


def pool_candidates(catalogue: Catalogue, query: SolveQuery, pool_index: int, pool: Pool,
                    cache: CandidateCache, until: float | None = None) -> list[Candidate]:
    """The job's undominated plans on one pool (empty when nothing fits it); TimeUp at `until`."""
    reference = _reference(query)
    key = (cache.shapes.setdefault(reference, len(cache.shapes)), pool)
    if key in cache.fitting:
        cache.hits += 1
    else:
        cache.fitting[key] = _fitting_plans(catalogue, reference, pool, cache, until)
    factor = query.tokens / reference.tokens
    return _undominated([Candidate(pool=pool_index, reference=plan, factor=factor, gpus=gpus,
                                   hours=plan.cost.hours * factor,  # as _scaled: the same floats as the plan's
                                   usd_marginal=0.0 if pool.committed else plan.cost.usd_total * factor)
                         for plan, gpus in cache.fitting[key]])


def _fitting_plans(catalogue: Catalogue, query: SolveQuery, pool: Pool, cache: CandidateCache,
                   until: float | None) -> list[tuple[SolvedPlan, int]]:
    """(plan, GPUs it blocks) per cluster size that fits the pool, at the reference query's tokens."""
    capacity = pool_capacity(pool)
    if pool.offering is not None:
        offerings = [pool_offering(catalogue, pool)]
        # an inventory pool is held, not rented by the job: its price is the pool's (or the offering's
        # on-demand one) and nothing preempts it, so the job's pricing and restart overhead are the market's
        query = query.model_copy(update={"pricing": "on-demand", "restart_overhead": 0.0})
    else:
        offerings = [o for o in catalogue.offerings.values() if o.provider == pool.market_provider]
    offerings = [o for o in offerings if _allowed(query, o)]
    if not offerings:
        return []
    most = min(query.max_gpus, capacity if capacity is not None else query.max_gpus)
    per_instance = min(o.num_gpus for o in offerings)
    sizes: list[int | None] = list(cluster_sizes(per_instance, most))
    if query.pins.num_gpus is not None:
        sizes = [query.pins.num_gpus] if query.pins.num_gpus <= most else []
    elif pool.offering is None:
        sizes.append(None)  # the planner's own optimum on this provider
    fitting = []
    for size in sizes:
        plan = _best_plan(catalogue, offerings, query, size, cache, until)
        if plan is None:
            continue
        offering = catalogue.offering(plan.plan.offering) if pool.offering is None else offerings[0]
        gpus = num_instances(plan.plan.num_gpus, offering) * offering.num_gpus
        if capacity is None or gpus <= capacity:
            fitting.append((plan, gpus))
    return fitting


def duration_min(hours: float) -> int:
    return max(1, math.ceil(hours * 60 - 1e-9))
