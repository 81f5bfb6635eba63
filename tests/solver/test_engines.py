"""CP-SAT against the brute-force oracle on random queries (TP, PP, CP and EP in their spaces),
and properties of the optimum."""

from __future__ import annotations

import random

import pytest
from helpers.queries import random_query

from vramplan.models.catalogue.catalogue import Catalogue
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery

NUM_RANDOM_QUERIES = 200


def _outcome(catalogue: Catalogue, query: SolveQuery, engine: str):
    # wall-clock limit far past either engine's need: a limit hit would make the statuses differ by load
    result = solve(catalogue, query.model_copy(update={"engine": engine, "time_limit_s": 600}), explain_infeasible=False)
    return result.status, [p.plan for p in result.plans], [p.objective_value for p in result.plans]


@pytest.mark.parametrize("seed", range(NUM_RANDOM_QUERIES))
def test_cpsat_agrees_with_brute_force(catalogue, seed: int) -> None:
    query = random_query(random.Random(seed))
    cpsat = _outcome(catalogue, query, "cpsat")
    brute = _outcome(catalogue, query, "brute")
    assert cpsat[0] == brute[0], query
    assert cpsat[2] == pytest.approx(brute[2], rel=1e-12), query
    assert cpsat[1] == brute[1], query  # same plans, same order: the tie-breaks are deterministic


@pytest.mark.parametrize("seed", range(40))
def test_more_gpus_or_money_or_memory_never_hurt(catalogue, seed: int) -> None:
    rng = random.Random(1000 + seed)
    query = random_query(rng).model_copy(update={"top_k": 1})
    base = solve(catalogue, query, explain_infeasible=False)
    looser = [
        query.model_copy(update={"max_gpus": query.max_gpus * 2}),
        query.model_copy(update={"budget_usd": None if query.budget_usd is None else query.budget_usd * 10}),
        query.model_copy(update={"deadline_hours": None}),
        query.model_copy(update={"job": query.job.model_copy(update={"capacity_fraction": 1.0})}),
    ]
    for loose_query in looser:
        loose = solve(catalogue, loose_query, explain_infeasible=False)
        if base.status == "optimal":
            assert loose.status == "optimal", loose_query
            if query.objective == "throughput":
                assert loose.objective.value >= base.objective.value * (1 - 1e-9)
            else:
                assert loose.objective.value <= base.objective.value * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(15))
def test_permuting_catalogue_rows_leaves_the_optimum_unchanged(catalogue, seed: int) -> None:
    rng = random.Random(2000 + seed)
    query = random_query(rng)
    shuffled_offerings = list(catalogue.offerings.items())
    shuffled_gpus = list(catalogue.gpus.items())
    rng.shuffle(shuffled_offerings)
    rng.shuffle(shuffled_gpus)
    permuted = Catalogue(gpus=dict(shuffled_gpus), offerings=dict(shuffled_offerings),
                         architectures=catalogue.architectures)
    a = solve(catalogue, query, explain_infeasible=False)
    b = solve(permuted, query, explain_infeasible=False)
    assert (a.status, [p.plan for p in a.plans]) == (b.status, [p.plan for p in b.plans])
