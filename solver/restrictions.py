"""Which of the user's restrictions make a query infeasible: CP-SAT assumption literals.

The relaxed space drops every restriction the user can change (allowed GPUs and providers,
GPU and node limits, budget, deadline, pinned decisions); each restriction becomes a constraint
enforced by one assumption literal. Solving with all assumptions is the user's query; when it is
infeasible, CP-SAT's sufficient_assumptions_for_infeasibility names a set of restrictions that
cannot hold together.

Model: one literal per cluster, one per (shape, inner decisions) that fits the GPU, the inner
literals of a shape summing to its clusters' literals; pins, deadline and host RAM are clauses on
inner literals, cluster restrictions clauses on cluster literals, the budget clauses on pairs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from ortools.sat.python import cp_model

from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.solver.clusters import Cluster, Shape
from vramplan.solver.cpsat_model import LeanCpModel
from vramplan.solver.engine import SOLVE_WORK, STEP_WORK, Budget, replayed
from vramplan.solver.fitting import shape_table
from vramplan.solver.points import Inner, InnerMetrics
from vramplan.solver.query import DEFAULT_MAX_GPUS, Pins, SolveQuery
from vramplan.solver.space import SearchSpace
from vramplan.solver.space_build import build_space
from vramplan.solver.space_domains import in_place, place_labels


@dataclass(frozen=True)
class Restriction:
    label: str  # as the user would write it, e.g. "--num-gpus 2"


def restrictions_of(query: SolveQuery) -> list[Restriction]:
    labels = []
    if query.gpus:
        labels.append(f"--gpu {','.join(query.gpus)}")
    if query.providers:
        labels.append(f"--provider {','.join(query.providers)}")
    labels += place_labels(query)
    if query.max_gpus < unrestricted_max_gpus(query):
        labels.append(f"--max-gpus {query.max_gpus}")
    if query.max_nodes is not None:
        labels.append(f"--max-nodes {query.max_nodes}")
    if query.budget_usd is not None:
        labels.append(f"--budget-usd {query.budget_usd:g}")
    if query.deadline_hours is not None:
        labels.append(f"--deadline-hours {query.deadline_hours:g}")
    labels += efficiency_labels(query).values()
    for name, value in query.pins.model_dump().items():
        if value is not None and name != "precision":  # a pinned precision is part of the job
            labels.append(pin_label(name, value))
    return [Restriction(label) for label in labels]


def efficiency_labels(query: SolveQuery) -> dict[str, str]:
    """The efficiency restrictions in force (query field -> label): the MFU floor, and --max-days
    where no deadline replaces it (SearchSpace.mfu_bound_us, duration_bound_us)."""
    labels = {}
    if query.min_mfu:
        labels["min_mfu"] = f"--min-mfu {query.min_mfu:g}"
    if query.max_days and query.deadline_hours is None:
        labels["max_days"] = f"--max-days {query.max_days:g}"
    return labels


def pin_label(name: str, value) -> str:
    option = name.replace("_", "-")
    if isinstance(value, bool):
        return f"--{option}" if value else f"--no-{option}"
    return f"--{option} {value}"


def unrestricted_max_gpus(query: SolveQuery) -> int:
    """The GPU limit of the relaxed query: the default limit (or the global batch, when larger).
    Not the global batch alone: with tensor, pipeline and context parallelism a plan runs
    tp x pp x cp x dp GPUs, more than the global batch's dp, so a limit at the global batch is
    still a restriction (Llama 4 Scout at 8k with recompute pinned off fits on 512 GPUs, not on
    128: that pin alone is no conflict)."""
    return max(DEFAULT_MAX_GPUS, query.effective_global_batch)


def relaxed_query(query: SolveQuery) -> SolveQuery:
    """The query without the restrictions (a pinned precision stays: it is part of the job)."""
    return query.model_copy(
        update={
            "gpus": (), "providers": (), "regions": (), "countries": (), "jurisdiction": None,
            "max_gpus": max(query.max_gpus, unrestricted_max_gpus(query)),
            "max_nodes": None, "budget_usd": None, "deadline_hours": None, "min_mfu": 0.0, "max_days": 0.0,
            "pins": Pins(precision=query.pins.precision), "global_batch": query.effective_global_batch,
        }
    )


def only_restrictions(query: SolveQuery, labels: list[str]) -> SolveQuery:
    """The relaxed query with the named restrictions (restrictions_of labels) put back."""
    kept = set(labels)
    relaxed = relaxed_query(query)
    pins = {name: value for name, value in query.pins.model_dump().items()
            if value is not None and (name == "precision" or pin_label(name, value) in kept)}
    update: dict[str, object] = {"pins": Pins(**pins)}
    for label, field, value in ((f"--gpu {','.join(query.gpus)}", "gpus", query.gpus),
                                (f"--provider {','.join(query.providers)}", "providers", query.providers),
                                (f"--region {','.join(query.regions)}", "regions", query.regions),
                                (f"--country {','.join(query.countries)}", "countries", query.countries),
                                (f"--jurisdiction {query.jurisdiction}", "jurisdiction", query.jurisdiction),
                                (f"--max-gpus {query.max_gpus}", "max_gpus", query.max_gpus),
                                (f"--max-nodes {query.max_nodes}", "max_nodes", query.max_nodes),
                                (f"--budget-usd {query.budget_usd:g}" if query.budget_usd else "", "budget_usd",
                                 query.budget_usd),
                                (f"--deadline-hours {query.deadline_hours:g}" if query.deadline_hours else "",
                                 "deadline_hours", query.deadline_hours)):
        if label in kept:
            update[field] = value
    for field, label in efficiency_labels(query).items():
        if label in kept:
            update[field] = getattr(query, field)
    return relaxed.model_copy(update=update)


# What decides a query's plans besides its restrictions: equal in two queries, or neither space
# says anything of the other's (pricing and providers decide which offerings exist: an empty
# provider list is not all of them, as list/ rows need --provider list).
_SAME_SPACE_FIELDS = ("model", "job", "tokens", "pricing", "providers")


def within(query: SolveQuery, bound: SolveQuery) -> bool:
    """Whether every plan of `query` is a plan of `bound`: the same model, job, global batch,
    tokens, pricing and providers, and every restriction of `bound` held by `query` too (its GPUs
    among bound's, its GPU and node limits, budget and deadline at most bound's, bound's pins
    pinned alike). A query within one that nothing fits has nothing to fit either."""
    if any(getattr(query, name) != getattr(bound, name) for name in _SAME_SPACE_FIELDS):
        return False
    if query.effective_global_batch != bound.effective_global_batch:
        return False
    if bound.gpus and not (query.gpus and set(query.gpus) <= set(bound.gpus)):  # no GPUs named: all of them
        return False
    for name in ("regions", "countries"):  # none named: every place
        if getattr(bound, name) and not (getattr(query, name) and set(getattr(query, name)) <= set(getattr(bound, name))):
            return False
    if bound.jurisdiction is not None and query.jurisdiction != bound.jurisdiction:
        return False
    if query.max_gpus > bound.max_gpus:
        return False
    for name in ("max_nodes", "budget_usd"):
        limit = getattr(bound, name)
        if limit is not None and (getattr(query, name) is None or getattr(query, name) > limit):
            return False
    if _longest_hours(query) > _longest_hours(bound) or query.min_mfu < bound.min_mfu:
        return False
    pins = query.pins.model_dump()
    return all(value is None or pins[name] == value for name, value in bound.pins.model_dump().items())


def _longest_hours(query: SolveQuery) -> float:
    """The wall hours a query allows: its deadline, else --max-days, else no limit."""
    if query.deadline_hours is not None:
        return query.deadline_hours
    return query.max_days * 24 if query.max_days else float("inf")


def _pinned_fields(query: SolveQuery) -> dict[str, tuple[str, object]]:
    """The query's pins of inner decisions by restriction label: label -> (field, pinned value)."""
    pins = ((name, getattr(query.pins, name)) for name in PINNED_INNER_FIELDS)
    return {pin_label(name, value): (name, value) for name, value in pins if value is not None}


def _inner_values(relaxed: SearchSpace, inner: Inner, layout_fields: dict[int, dict] | None = None) -> dict:
    """The pinnable fields' values of inner decisions; `layout_fields` keeps each layout's
    plan fields for a caller that asks of many points."""
    zero, offload = relaxed.zero_offloads[inner.zero_offload]
    if layout_fields is None:
        fields = relaxed.layouts[inner.layout].plan_fields()
    elif inner.layout in layout_fields:
        fields = layout_fields[inner.layout]
    else:
        fields = layout_fields[inner.layout] = relaxed.layouts[inner.layout].plan_fields()
    recompute = relaxed.recomputes[inner.recompute]  # a pinned mode means every layer: partial is another value
    return {"zero": zero, "offload": offload, "recompute": recompute.mode if recompute.layers is None else recompute,
            "micro_batch": relaxed.micro_batches[inner.micro_batch], **fields}


def _cluster_checks(query: SolveQuery) -> dict[str, Callable[[Cluster], bool]]:
    """What each cluster restriction (restrictions_of's label) allows; restrictions not here
    allow every cluster."""
    return {
        f"--gpu {','.join(query.gpus)}": lambda cluster: cluster.offering.gpu in query.gpus,
        f"--provider {','.join(query.providers)}": lambda cluster: cluster.offering.provider in query.providers,
        **{label: _place_check(query, label) for label in place_labels(query)},
        f"--max-gpus {query.max_gpus}": lambda cluster: cluster.num_gpus <= query.max_gpus,
        f"--max-nodes {query.max_nodes}": lambda cluster: query.max_nodes is None or cluster.num_instances <= query.max_nodes,
        f"--num-gpus {query.pins.num_gpus}": lambda cluster: cluster.num_gpus == query.pins.num_gpus,
    }


def _place_check(query: SolveQuery, label: str) -> Callable[[Cluster], bool]:
    """The check of one place restriction (--region, --country or --jurisdiction) alone."""
    alone = query.model_copy(update={
        "regions": query.regions if label.startswith("--region") else (),
        "countries": query.countries if label.startswith("--country") else (),
        "jurisdiction": query.jurisdiction if label.startswith("--jurisdiction") else None})
    return lambda cluster: in_place(cluster.offering, alone)


def conflicting_restrictions(catalogue: Catalogue, query: SolveQuery, space: SearchSpace,
                             budget: Budget | None = None) -> list[str] | None:
    """Labels of a set of restrictions that cannot hold together; [] if nothing in the relaxed
    space fits at all (no restriction is to blame); None if the relaxed model is feasible with
    every restriction too (then the user's space was empty for another reason). `budget` (default:
    the query's own) pays for it; TimeLimitReached when it runs out first (nothing is kept then)."""
    budget = Budget.of(query) if budget is None else budget
    return replayed(budget, lambda measured: space.memo.result(
        catalogue, ("conflicts", query.feasibility_key(NOT_IN_CONFLICTS)), measured),
        lambda: _conflicting_restrictions(catalogue, query, space, budget))


# What the conflicts do not depend on: the objective, the answer's shape and the limits (an answer
# is kept only when proven; the tokens only through the budget and the deadline: SolveQuery.feasibility_key).
NOT_IN_CONFLICTS = frozenset({"objective", "top_k", "pareto", "engine", "num_workers", "random_seed", "work_limit",
                              "time_limit_s"})


def _conflicting_restrictions(catalogue: Catalogue, query: SolveQuery, space: SearchSpace,
                              budget: Budget) -> list[str] | None:
    budget.charge(STEP_WORK)
    relaxed = build_space(catalogue, relaxed_query(query), memo=space.memo)
    restrictions = restrictions_of(query)
    model = LeanCpModel()
    cluster_lits = [model.new_bool_var(f"cluster[{c}]") for c in range(len(relaxed.clusters))]
    model.add_exactly_one(cluster_lits)
    assumption = {r.label: model.new_bool_var(r.label) for r in restrictions}
    checks = _cluster_checks(query)
    for c, lit in enumerate(cluster_lits):
        for label, a in assumption.items():
            check = checks.get(label)
            if check is not None and not check(relaxed.clusters[c]):
                model.add_bool_or([a.Not(), lit.Not()])
    step_bound_us, budget_units = space.deadline_bound_us, space.budget_bound_cost_units
    duration_bound_us = space.duration_bound_us
    # else no clause reads a step time
    timed = any(x is not None for x in (step_bound_us, budget_units, duration_bound_us)) or query.min_mfu > 0
    limits = StepLimits(step_bound_us, budget_units, duration_bound_us, query.min_mfu)
    pinned = _pinned_fields(query)
    clauses = _InnerClauses(model, relaxed, pinned, query, cluster_lits, assumption, limits)
    for shape, all_fitting in shape_table(relaxed, timed).items():
        budget.charge(STEP_WORK)  # building the model over many offerings takes seconds
        members = relaxed.clusters_of_shape(shape)
        fitting = _representatives(relaxed, pinned, shape, timed, all_fitting)
        prefix = f"inner{shape}"
        inner_lits = [model.new_bool_var(f"{prefix}[{i}]") for i in range(len(fitting))]
        model.add(sum(inner_lits) == sum(cluster_lits[c] for c in members))
        for (inner, metrics), lit in zip(fitting, inner_lits, strict=True):
            clauses.add(members, inner, metrics, lit)
    model.add_assumptions(list(assumption.values()))
    budget.charge(SOLVE_WORK)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    budget.limit_cpsat(solver.parameters)
    solver.parameters.catch_sigint_signal = False  # keep Python's Ctrl-C (see cpsat_engine)
    # One presolve pass and light probing: most of this model's solve was presolve (docs/performance.md#explanations).
    solver.parameters.max_presolve_iterations = 1
    solver.parameters.cp_model_probing_level = 1
    status = solver.solve(model)
    if status == cp_model.UNKNOWN:
        raise budget.cpsat_stopped()  # out of work or time before a conflict was proven
    budget.charge_cpsat(solver.deterministic_time)  # a model made afresh: the same time with or without the memo
    if status != cp_model.INFEASIBLE:
        return None
    core = solver.sufficient_assumptions_for_infeasibility()
    index_to_label = {a.index: label for label, a in assumption.items()}
    return sorted(index_to_label[i] for i in core if i in index_to_label)


PINNED_INNER_FIELDS = ("zero", "offload", "recompute", "micro_batch", "tp", "pp", "cp", "ep", "vpp", "sequence_parallel")


def _representatives(relaxed: SearchSpace, pinned_fields: dict[str, tuple[str, object]], shape: Shape, timed: bool,
                     fitting: list[tuple[Inner, InnerMetrics]]) -> list[tuple[Inner, InnerMetrics]]:
    """Inner decisions that differ in what a restriction can see: grouped by the values of the
    pinned fields, and within a group only those not dominated in (step time, host RAM), which
    are all the deadline, budget and host bounds look at. Exact for feasibility, and it keeps the
    assumption model small enough to prove infeasible in milliseconds. Kept on the relaxed space
    (`fitting` is its shape_table's, which depends on the shape and `timed` alone) per which
    fields are pinned: the batch rows of one job share the relaxed space."""
    pinned = [name for name, _ in pinned_fields.values()]  # _pinned_fields: in PINNED_INNER_FIELDS order
    key = (shape, timed, tuple(pinned))
    if key not in relaxed.on_use.representatives:
        relaxed.on_use.representatives[key] = _undominated(relaxed, pinned, fitting)
    return relaxed.on_use.representatives[key]


def _undominated(relaxed: SearchSpace, pinned: list[str],
                 fitting: list[tuple[Inner, InnerMetrics]]) -> list[tuple[Inner, InnerMetrics]]:
    """_representatives' points: per pinned-field values, those not dominated in (step, host RAM)."""

    layout_fields: dict[int, dict] = {}

    def signature(inner: Inner) -> tuple:
        if not pinned:  # one group: no restriction reads an inner value
            return ()
        values = _inner_values(relaxed, inner, layout_fields)
        return tuple(values[name] for name in pinned)

    kept: list[tuple[Inner, InnerMetrics]] = []
    lowest_host: dict[tuple, int] = {}
    for inner, metrics in sorted(fitting, key=lambda item: (item[1].step_us, item[1].host_mib_per_gpu)):
        key = signature(inner)
        if key not in lowest_host or metrics.host_mib_per_gpu < lowest_host[key]:
            lowest_host[key] = metrics.host_mib_per_gpu
            kept.append((inner, metrics))
    return kept


class StepLimits(NamedTuple):
    """What caps a point's step time in the user's query: the deadline, the budget (cost units),
    --max-days and the MFU floor (SearchSpace's bounds)."""

    deadline_us: int | None
    budget_units: int | None
    duration_us: int | None
    min_mfu: float


class _InnerClauses:
    """The clauses of each inner literal: a pinned inner value the literal breaks excludes it with
    that pin's assumption; a step above the deadline or --max-days with theirs; on each member
    cluster, host RAM above its budget with the cluster's literal, a step above the budget's or the
    MFU floor's cap with their assumption and the cluster's literal. The negated literals, each
    cluster's caps and each layout's fields are taken once per model (they were taken per clause);
    the clauses are the same, in the same order (tests/solver/test_explain_conflict_model.py)."""

    def __init__(self, model: LeanCpModel, relaxed: SearchSpace, pinned: dict[str, tuple[str, object]],
                 query: SolveQuery, cluster_lits: list, assumption: dict, limits: StepLimits) -> None:
        self.model, self.relaxed, self.limits = model, relaxed, limits
        self.negated = {label: a.Not() for label, a in assumption.items()}
        # The inner pins in the assumptions' order (no other restriction excludes an inner point).
        self.pins = [(self.negated[label], *pinned[label]) for label in assumption if label in pinned]
        self.labels = (f"--deadline-hours {query.deadline_hours:g}" if query.deadline_hours is not None else "",
                       f"--max-days {query.max_days:g}",
                       f"--budget-usd {query.budget_usd:g}" if query.budget_usd is not None else "",
                       f"--min-mfu {query.min_mfu:g}")
        self.cluster_lits = cluster_lits
        self.clusters: dict[int, tuple] = {}  # c -> (negated literal, host budget, budget cap, MFU cap)
        self.layout_fields: dict[int, dict] = {}

    def _cluster(self, c: int) -> tuple:
        found = self.clusters.get(c)
        if found is None:
            relaxed, limits = self.relaxed, self.limits
            price = relaxed.clusters[c].price_units
            found = self.clusters[c] = (
                self.cluster_lits[c].Not(), relaxed.host_budget_mib_per_gpu[c],
                limits.budget_units // max(1, price) if limits.budget_units is not None else None,
                relaxed.mfu_bound_us(c, limits.min_mfu) if limits.min_mfu else None)
        return found

    def add(self, members: list[int], inner: Inner, metrics: InnerMetrics, lit) -> None:
        model, limits, step = self.model, self.limits, metrics.step_us
        deadline, days, budget, mfu = self.labels
        not_lit = lit.Not()
        if self.pins:
            values = _inner_values(self.relaxed, inner, self.layout_fields)
            for not_pin, name, value in self.pins:
                if values[name] != value:
                    model.add_bool_or([not_pin, not_lit])
        if limits.deadline_us is not None and step > limits.deadline_us:
            model.add_bool_or([self.negated[deadline], not_lit])
        if limits.duration_us is not None and step > limits.duration_us:
            model.add_bool_or([self.negated[days], not_lit])
        for c in members:
            not_cluster, host_mib, budget_cap, mfu_cap = self._cluster(c)
            if metrics.host_mib_per_gpu > host_mib:
                model.add_bool_or([not_cluster, not_lit])
            if budget_cap is not None and step > budget_cap:
                model.add_bool_or([self.negated[budget], not_cluster, not_lit])
            if mfu_cap is not None and step > mfu_cap:
                model.add_bool_or([self.negated[mfu], not_cluster, not_lit])
