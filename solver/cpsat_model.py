"""The CP-SAT model: one literal per candidate plan, linear constraints and objectives.

Why this shape. A first model put the decisions (cluster, ZeRO x offload, recompute, precision,
micro-batch) in one-hot vectors and read memory and step time through element constraints on
mixed-radix indices; its LP relaxation was so weak that CP-SAT needed 6-8 s to prove the
headline query optimal. The space decomposes exactly instead: memory and step time depend on a
cluster's shape (GPU, count, whether traffic leaves the instance), never on its price, so each
shape's inner decisions are evaluated once (models/ numbers, integer tables), and for a fixed
cluster every objective orders its inner decisions by step time. Keeping, per cluster, the
`keep` best inner decisions that fit loses no optimum and no top-k plan. Over these candidates
the model is linear and its LP relaxation exact; CP-SAT proves optimality in milliseconds and
carries the budget, deadline and host-RAM constraints, the lexicographic tie-breaks, the no-good
cuts of top-k and the epsilon constraints of the Pareto sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from vramplan.solver.candidates import (
    Choice,
    Inner,
    InnerMetrics,
    Metrics,
    cluster_accepts,
    inner_metrics,
    metrics_of,
)
from vramplan.solver.space import SearchSpace
from vramplan.solver.table_memo import shared_shape_table


@dataclass(frozen=True)
class Candidate:
    choice: Choice
    metrics: Metrics
    host_mib_per_gpu: int


@dataclass
class Variables:
    candidates: list[Candidate]
    literals: list[cp_model.IntVar]
    step_us: cp_model.LinearExpr = 0
    cost_units: cp_model.LinearExpr = 0
    price_units: cp_model.LinearExpr = 0
    tie_key: cp_model.LinearExpr = 0
    cluster: dict[int, cp_model.IntVar] = field(default_factory=dict)


def inner_decisions(space: SearchSpace) -> list[Inner]:
    return [
        Inner(zf, r, p, b)
        for zf in range(len(space.zero_offloads))
        for r in range(len(space.recomputes))
        for p in range(len(space.precisions))
        for b in range(len(space.micro_batches))
    ]


def shape_table(space: SearchSpace) -> dict[tuple[int, int, int], list[tuple[Inner, InnerMetrics]]]:
    """Per shape, the inner decisions that fit the GPU, best step time first (ties in tie-key
    order: ZeRO x offload, recompute, larger micro-batch, precision). Built once per space kept
    by an active table memo (solver/table_memo.py)."""
    return shared_shape_table(space, _build_shape_table)


def _build_shape_table(space: SearchSpace) -> dict[tuple[int, int, int], list[tuple[Inner, InnerMetrics]]]:
    nb = len(space.micro_batches)
    table = {}
    fitting_by_gpu_count: dict[tuple[int, int], list[Inner]] = {}
    for shape in sorted({c.shape for c in space.clusters}):
        g, n, _ = shape
        if (g, n) not in fitting_by_gpu_count:  # memory does not depend on crossing: test it once
            limit = space.limit_mib[g]
            batches = [b for b in range(nb) if (n, b) in space.valid_count_batch]
            precisions = [p for p in range(len(space.precisions)) if (g, p) in space.valid_gpu_precision]
            fitting_by_gpu_count[g, n] = [
                Inner(zf, r, p, b)
                for zf in range(len(space.zero_offloads)) for p in precisions
                if (static := space.static_mib[zf, n, p]) <= limit
                for r in range(len(space.recomputes)) for b in batches
                if static + space.activation_mib[r, b, p] <= limit
            ]
        fitting = [(i, inner_metrics(space, shape, i, memory=False)) for i in fitting_by_gpu_count[g, n]]
        fitting.sort(key=lambda item: (item[1].step_us, item[0].zero_offload, item[0].recompute,
                                       nb - 1 - item[0].micro_batch, item[0].precision))
        table[shape] = fitting  # type: ignore[assignment]
    return table


def candidates(space: SearchSpace, keep: int) -> list[Candidate]:
    """Per cluster, the `keep` best inner decisions it accepts (host RAM, budget, deadline)."""
    table = shape_table(space)
    result = []
    for c, cluster in enumerate(space.clusters):
        kept = 0
        for inner, metrics in table[cluster.shape]:
            if kept == keep:
                break
            if cluster_accepts(space, c, metrics):
                choice = Choice(c, inner.zero_offload, inner.recompute, inner.precision, inner.micro_batch)
                result.append(Candidate(choice, metrics_of(space, choice, metrics), metrics.host_mib_per_gpu))
                kept += 1
    return within_integer_range(result)


OBJECTIVE_SUM_LIMIT = 2**60  # CP-SAT rejects a linear objective whose coefficient sum may overflow int64


def within_integer_range(result: list[Candidate]) -> list[Candidate]:
    """Drop the costliest candidates while the objectives' coefficient sums could overflow CP-SAT's
    int64 (offerings with 100 Mbps networks give multi-node step times of days: never an optimum
    while any sane candidate is left)."""
    cost = sum(c.metrics.cost_units for c in result)
    step = sum(c.metrics.step_us for c in result)
    if cost <= OBJECTIVE_SUM_LIMIT and step <= OBJECTIVE_SUM_LIMIT:
        return result
    kept = sorted(result, key=lambda c: (c.metrics.cost_units, c.metrics.step_us))
    while len(kept) > 1 and (cost > OBJECTIVE_SUM_LIMIT or step > OBJECTIVE_SUM_LIMIT):
        dropped = kept.pop()
        cost -= dropped.metrics.cost_units
        step -= dropped.metrics.step_us
    survivors = set(map(id, kept))
    return [c for c in result if id(c) in survivors]


def add_choice(model: cp_model.CpModel, v: Variables) -> None:
    v.literals = [model.new_bool_var(f"plan[{i}]") for i in range(len(v.candidates))]
    model.add_exactly_one(v.literals)
    by_cluster: dict[int, list[cp_model.IntVar]] = {}
    for candidate, literal in zip(v.candidates, v.literals, strict=True):
        by_cluster.setdefault(candidate.choice.cluster, []).append(literal)
    for cluster, literals in by_cluster.items():
        v.cluster[cluster] = model.new_bool_var(f"cluster[{cluster}]")
        model.add(v.cluster[cluster] == sum(literals))


def add_memory_fits(model: cp_model.CpModel, space: SearchSpace, v: Variables) -> None:
    """Per-GPU pillars (MiB, rounded up) within the limit (MiB, rounded down); host RAM per GPU
    within the instance's share. Candidates are generated fitting; the model states it anyway."""
    for candidate, literal in zip(v.candidates, v.literals, strict=True):
        m = candidate.metrics
        if m.memory_mib > m.limit_mib or candidate.host_mib_per_gpu > space.host_budget_mib_per_gpu[candidate.choice.cluster]:
            model.add(literal == 0)


def add_step_time_and_cost(v: Variables) -> None:
    pairs = list(zip(v.candidates, v.literals, strict=True))
    v.step_us = sum(c.metrics.step_us * lit for c, lit in pairs)
    v.cost_units = sum(c.metrics.cost_units * lit for c, lit in pairs)
    v.price_units = sum(c.metrics.price_units * lit for c, lit in pairs)
    v.tie_key = sum(c.metrics.tie_key * lit for c, lit in pairs)


def add_limits(model: cp_model.CpModel, space: SearchSpace, v: Variables) -> None:
    """The user's deadline and budget."""
    deadline, budget = space.deadline_bound_us, space.budget_bound_cost_units
    for candidate, literal in zip(v.candidates, v.literals, strict=True):
        m = candidate.metrics
        if (deadline is not None and m.step_us > deadline) or (budget is not None and m.step_us > budget // max(1, m.price_units)):
            model.add(literal == 0)


def build(space: SearchSpace, keep: int) -> tuple[cp_model.CpModel, Variables]:
    model = cp_model.CpModel()
    v = Variables(candidates=candidates(space, keep), literals=[])
    add_choice(model, v)
    add_memory_fits(model, space, v)
    add_step_time_and_cost(v)
    add_limits(model, space, v)
    return model, v
