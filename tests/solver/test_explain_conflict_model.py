"""The conflict-set model's clauses (restrictions._InnerClauses) take the negated literals, each
cluster's caps and each layout's fields once per model: the model must be the one the clause-by-
clause construction made, variable for variable and constraint for constraint in the same order,
so CP-SAT names the same restrictions (its core depends on the model as written)."""

from __future__ import annotations

import random

import pytest
from helpers.queries import random_query
from ortools.sat.python import cp_model

from vramplan.models.core.setup import Job
from vramplan.solver import restrictions
from vramplan.solver.engine import Budget
from vramplan.solver.fitting import shape_table
from vramplan.solver.query import Pins, SolveQuery
from vramplan.solver.restrictions import (
    StepLimits,
    _cluster_checks,
    _inner_values,
    _pinned_fields,
    _representatives,
    conflicting_restrictions,
    relaxed_query,
    restrictions_of,
)
from vramplan.solver.space_build import build_space
from vramplan.solver.table_memo import TableMemo


def _clause_by_clause(catalogue, query: SolveQuery, space) -> str:
    """The model as the construction before made it: every clause's literals negated where it is
    added, each cluster's caps and each point's pinned values asked per clause (the oracle)."""
    relaxed = build_space(catalogue, relaxed_query(query), memo=space.memo)
    model = cp_model.CpModel()
    cluster_lits = [model.new_bool_var(f"cluster[{c}]") for c in range(len(relaxed.clusters))]
    model.add_exactly_one(cluster_lits)
    assumption = {r.label: model.new_bool_var(r.label) for r in restrictions_of(query)}
    checks = _cluster_checks(query)
    for c, lit in enumerate(cluster_lits):
        for label, a in assumption.items():
            check = checks.get(label)
            if check is not None and not check(relaxed.clusters[c]):
                model.add_bool_or([a.Not(), lit.Not()])
    limits = StepLimits(space.deadline_bound_us, space.budget_bound_cost_units, space.duration_bound_us, query.min_mfu)
    timed = any(x is not None for x in limits[:3]) or query.min_mfu > 0
    pinned = _pinned_fields(query)
    for shape, all_fitting in shape_table(relaxed, timed).items():
        members = relaxed.clusters_of_shape(shape)
        fitting = _representatives(relaxed, pinned, shape, timed, all_fitting)
        inner_lits = [model.new_bool_var(f"inner{shape}[{i}]") for i in range(len(fitting))]
        model.add(sum(inner_lits) == sum(cluster_lits[c] for c in members))
        for (inner, metrics), lit in zip(fitting, inner_lits, strict=True):
            for label, a in assumption.items():
                if label in pinned and _inner_values(relaxed, inner)[pinned[label][0]] != pinned[label][1]:
                    model.add_bool_or([a.Not(), lit.Not()])
            if limits.deadline_us is not None and metrics.step_us > limits.deadline_us:
                model.add_bool_or([assumption[f"--deadline-hours {query.deadline_hours:g}"].Not(), lit.Not()])
            if limits.duration_us is not None and metrics.step_us > limits.duration_us:
                model.add_bool_or([assumption[f"--max-days {query.max_days:g}"].Not(), lit.Not()])
            for c in members:
                cluster = relaxed.clusters[c]
                if metrics.host_mib_per_gpu > relaxed.host_budget_mib_per_gpu[c]:
                    model.add_bool_or([cluster_lits[c].Not(), lit.Not()])
                if limits.budget_units is not None and metrics.step_us > limits.budget_units // max(1, cluster.price_units):
                    model.add_bool_or([assumption[f"--budget-usd {query.budget_usd:g}"].Not(), cluster_lits[c].Not(),
                                       lit.Not()])
                mfu_cap = relaxed.mfu_bound_us(c, limits.min_mfu) if limits.min_mfu else None
                if mfu_cap is not None and metrics.step_us > mfu_cap:
                    model.add_bool_or([assumption[f"--min-mfu {query.min_mfu:g}"].Not(), cluster_lits[c].Not(),
                                       lit.Not()])
    model.add_assumptions(list(assumption.values()))
    return str(model.proto)


QUERIES = [random_query(random.Random(seed)) for seed in (0, 5, 12)] + [
    # Every clause kind: inner pins (ZeRO, recompute, micro-batch), the deadline, the budget, the MFU floor.
    SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096), global_batch=32, tokens=1e9, gpus=("l4-24gb",), max_gpus=4,
               budget_usd=20.0, deadline_hours=5.0, min_mfu=0.2, pins=Pins(zero=0, recompute="none", micro_batch=2)),
    # --max-days in force (no deadline), offload pinned off.
    SolveQuery(model="mistral-7b", job=Job(seq_len=8192), global_batch=16, tokens=2e10, gpus=("a10g-24gb",), max_gpus=2,
               max_days=3.0, pins=Pins(offload="none", zero=1)),
]


@pytest.mark.parametrize("query", QUERIES, ids=range(len(QUERIES)))
def test_the_model_is_the_clause_by_clause_one(catalogue, monkeypatch, query: SolveQuery) -> None:
    assert len(restrictions_of(query)) > 4  # what the conflict-set model is asked of
    built: list[str] = []

    class Recording(cp_model.CpSolver):
        def solve(self, model, *args, **kwargs):
            built.append(str(model.proto))
            return super().solve(model, *args, **kwargs)

    monkeypatch.setattr(restrictions.cp_model, "CpSolver", Recording)
    space = build_space(catalogue, query, memo=TableMemo())
    conflicting_restrictions(catalogue, query, space, Budget.of(query))
    assert len(built) == 1
    assert built[0] == _clause_by_clause(catalogue, query, space)
