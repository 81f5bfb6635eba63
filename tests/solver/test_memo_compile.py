"""The batch memo keys every table by the whole job (solver/table_memo.py: Job.model_dump_json), so
two rows that differ only in `compile` never share tables, spaces or unit models: each answers as it
would alone (torch.compile changes the activations and, for torchtitan and torchtune, the speed)."""

from __future__ import annotations

from vramplan.solver.api import solve
from vramplan.solver.query_fields import query_from_fields
from vramplan.solver.table_memo import TableMemo, _family_key, _space_key


def _query(compile_: str):
    return query_from_fields({"model": "llama-3.1-8b", "seq_len": 8192, "stack": "torchtitan", "compile": compile_,
                              "gpus": "h100-sxm-80gb", "max_gpus": 8, "global_batch": 16, "objective": "time"})


def test_jobs_that_differ_only_in_compile_have_their_own_memo_entries(catalogue):
    eager, compiled = _query("none"), _query("model+loss")
    assert eager.job.model_copy(update={"compile": "model+loss"}) == compiled.job  # nothing else differs
    assert _space_key(eager) != _space_key(compiled) and _family_key(eager) != _family_key(compiled)
    memo = TableMemo()
    arch = catalogue.architecture("llama-3.1-8b")
    tables = [memo.tables(catalogue, "llama-3.1-8b", arch, q.job, q.effective_global_batch) for q in (eager, compiled)]
    assert tables[0] is not tables[1]


def test_rows_with_and_without_compile_answer_as_alone(catalogue):
    alone = [solve(catalogue, _query(c)) for c in ("none", "model+loss")]
    memo = TableMemo()
    shared = []
    for compile_ in ("none", "model+loss"):
        shared.append(solve(catalogue, _query(compile_), memo=memo))
    for a, b in zip(alone, shared):
        assert (a.status, [p.plan for p in a.plans]) == (b.status, [p.plan for p in b.plans])
        assert [p.performance.tokens_per_s for p in a.plans] == [p.performance.tokens_per_s for p in b.plans]
    assert alone[1].plans[0].performance.tokens_per_s > alone[0].plans[0].performance.tokens_per_s
