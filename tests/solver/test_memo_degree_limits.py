"""A family's queries that allow other GPUs search other layouts: with GB200 NVL72 trays allowed
(a 72-GPU NVLink domain) EP reaches 16 and beyond on every shape, without them 8
(solver/layouts.py degree_limit). Their per-unit work (bounds, unit CP-SAT models, fitting tables)
is kept per shape and degree limit (SearchSpace.unit_shape): read across limits, a unit model
made for the wider query raised KeyError on its EP 16 layouts in the narrower one (19 of the
batch benchmark's 1,468 sample rows ended in that internal error). Each row of a shared memo
answers as it does alone, whatever came before it."""

from __future__ import annotations

from vramplan.models.core.setup import Job
from vramplan.solver.api import solve
from vramplan.solver.query import SolveQuery
from vramplan.solver.space_build import build_space
from vramplan.solver.table_memo import TableMemo

WIDE = SolveQuery(model="llama-4-scout", job=Job(method="full", seq_len=1024), objective="time", max_gpus=512,
                  tokens=1e9)  # every GPU: GB200 NVL72 trays included
NARROW = WIDE.model_copy(update={"gpus": ("rtx-pro-6000-96gb", "a10g-24gb")})
OTHER = WIDE.model_copy(update={"gpus": ("mi355x-288gb",), "tokens": 1e10})


def _answer(result) -> tuple:
    return result.status, [p.plan for p in result.plans]


def test_rows_of_one_family_with_other_degree_limits_answer_as_alone(catalogue) -> None:
    alone = {q.model_dump_json(): _answer(solve(catalogue, q)) for q in (WIDE, NARROW, OTHER)}
    # the wide query searches layouts the others cannot take
    assert max(layout.ep for layout in build_space(catalogue, WIDE).layouts) == 16
    assert max(layout.ep for layout in build_space(catalogue, NARROW).layouts) == 8
    memo = TableMemo()
    for query in (WIDE, NARROW, OTHER):
        assert _answer(solve(catalogue, query, memo=memo)) == alone[query.model_dump_json()]
