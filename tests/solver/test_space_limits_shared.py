"""The step caps (--max-days, --min-mfu, budget, deadline) and what only scales time (tokens, spot
restarts) are read from the query a kept space is bound to, not built into it
(solver/table_memo.py NOT_IN_SPACE): queries that differ only in them share one space, and each
answers as it does alone. An explanation asks its yes/no questions with and without --max-days
(the default 365 is a restriction too), so it builds one space for both."""

from __future__ import annotations

from vramplan.solver.api import solve
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.table_memo import TableMemo


def _query(**fields):
    # 3e12 tokens on at most 8 H100: the fastest plan takes about 470 days
    base = {"model": "llama-3.1-8b", "seq_len": 4096, "gpus": "h100-sxm-80gb", "max_gpus": 8, "global_batch": 16,
            "objective": "time", "tokens": 3e12}
    return query_from_fields({**base, **fields})


QUERIES = [_query(), _query(max_days=0), _query(max_days=500, restart_overhead=0.1, pricing="spot"),
           _query(max_days=0, min_mfu=0.6), _query(max_days=0, tokens=1e9, work_limit=1000)]


def test_limits_change_the_answer(catalogue):
    statuses = [solve(catalogue, q).status for q in QUERIES[:2]]
    assert statuses == ["infeasible", "optimal"]  # --max-days 365 alone rules every plan out


def test_queries_that_differ_in_limits_share_one_space_and_answer_as_alone(catalogue):
    alone = [solve(catalogue, q).model_dump(exclude={"search", "solve_time_s"}) for q in QUERIES]
    memo = TableMemo()
    shared = []
    for i, query in enumerate(QUERIES):
        if i:  # the first query's space (spot pricing aside: offerings' prices are in the space)
            assert (memo.space(catalogue, query) is not None) == (query.pricing == "on-demand")
        shared.append(solve(catalogue, query, memo=memo).model_dump(exclude={"search", "solve_time_s"}))
    assert shared == alone
    assert "--max-days 365" in alone[0]["explanation"]["summary"]
