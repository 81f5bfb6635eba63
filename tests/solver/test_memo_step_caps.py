"""The batch memo's unit models carry their step cap (--max-days over the tokens, --min-mfu): two
rows of one job with other tokens built other models, and the second reused the first's
(`SolverInternalError: CP-SAT chose ..., which the integer tables do not accept`, or a wrong
infeasible): 8 of the batch benchmark's 1,468 sample rows. A row's answer may not depend on the
rows a worker solved before it."""

from __future__ import annotations

from vramplan.solver.api import solve
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.table_memo import TableMemo


def _query(tokens: float):
    return query_from_fields({"model": "deepseek-v3", "method": "qlora", "seq_len": 512, "objective": "hourly",
                              "gpus": "b200-180gb", "max_gpus": 8, "tokens": tokens})


def test_rows_of_one_job_with_other_tokens_answer_as_alone(catalogue):
    alone = [solve(catalogue, _query(tokens)) for tokens in (1e8, 1e10)]
    memo = TableMemo()
    shared = []
    for tokens in (1e8, 1e10):
        shared.append(solve(catalogue, _query(tokens), memo=memo))
    for a, b in zip(alone, shared):
        assert (a.status, [p.plan for p in a.plans]) == (b.status, [p.plan for p in b.plans])
    assert alone[0].status == "optimal"  # the short run fits a year; the long one does not
