"""Issue 35: a SearchSpace keeps the query's domains, its clusters and what is derived from them
when it is built, and nothing of it fills in later. The tables the search tabulates on first read
(each count's and layout's memory, each shape's step terms, the explanations' grids) are its
`on_use` (solver/space_fills.py), the one part that grows; the models/ values behind them are the
memo services' (the job's Tables, the family's UnitMemo, the TableMemo that keeps spaces).

A solve with runners-up and the Pareto front, and an infeasible one with its explanation (its
relaxed space and its questions), run on spaces built beforehand: every other field of each space
is the value it had when it was built."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery
from vramplan.solver.restrictions import relaxed_query
from vramplan.solver.space import SearchSpace
from vramplan.solver.space_build import build_space
from vramplan.solver.table_memo import TableMemo

RUNNER_UPS = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9, top_k=3, pareto=True)
INFEASIBLE = SolveQuery(model="llama-3.1-70b", job=Job(seq_len=8192), global_batch=64, tokens=2e9,
                        gpus=("rtx4090-24gb",), max_gpus=4)
PIPELINED = SolveQuery(model="llama-3.1-8b", job=Job(seq_len=4096, stack="megatron"), global_batch=256, tokens=1e9,
                       gpus=("h100-sxm-80gb",), max_gpus=64)
# The memo services a space is handed (they grow by design) and the one table that fills on use.
SERVICES = {"tables", "memo", "shared", "on_use"}


def values(space: SearchSpace) -> dict:
    return {f.name: copy.deepcopy(getattr(space, f.name)) for f in dataclasses.fields(space) if f.name not in SERVICES}


@pytest.mark.parametrize("query", [RUNNER_UPS, INFEASIBLE, PIPELINED], ids=["runner-ups", "infeasible", "pipelined"])
def test_a_solve_changes_nothing_of_its_space_but_what_fills_on_use(catalogue, query):
    memo = TableMemo()
    spaces = [build_space(catalogue, query, memo=memo)]
    if query is INFEASIBLE:  # the explanation's relaxed space, kept in the same memo
        spaces.append(build_space(catalogue, relaxed_query(query), memo=memo))
    before = [values(space) for space in spaces]
    result = solve(catalogue, query, memo=memo)
    assert (result.status == "infeasible") == (query is INFEASIBLE)
    assert any(space.on_use.filled_states for space in spaces)  # the search did read (and fill) its tables
    assert [values(space) for space in spaces] == before


def test_a_space_bound_to_an_equivalent_query_shares_its_filled_tables(catalogue):
    memo = TableMemo()
    space = build_space(catalogue, RUNNER_UPS, memo=memo)
    solve(catalogue, RUNNER_UPS, memo=memo)
    cheaper = RUNNER_UPS.model_copy(update={"top_k": 1, "pareto": False})
    bound = build_space(catalogue, cheaper, memo=memo)
    assert bound is not space and bound.query is cheaper
    assert bound.on_use.space.query is cheaper and space.on_use.space.query is RUNNER_UPS  # each its own space's
    assert bound.on_use.static_mib is space.on_use.static_mib and bound.on_use.timing is space.on_use.timing
