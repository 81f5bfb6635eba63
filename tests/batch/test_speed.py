"""The batch worker's table memo (solver/table_memo.py) changes how fast, never what: a mixed
sheet gets the same answers with and without it, and a second row of one (model, job, global
batch) computes no models/ value again. Timings live in bench/batch_bench.py, never here."""

from __future__ import annotations

import pytest

from vramplan.batch import worker as batch_worker
from vramplan.batch.run import plan_jobs
from vramplan.models.catalogue.catalogue import load_catalogue
from vramplan.models.core.setup import Job
from vramplan.sheets.rows import output_row, parse_row
from vramplan.solver import state_tables
from vramplan.solver.api import solve
from vramplan.solver.table_memo import TableMemo

SMALL = {"gpus": "h100-sxm-80gb;a100-sxm-80gb", "max_gpus": "8"}
MIXED = (
    [{"model": model, "seq_len": seq, "objective": objective, "tokens": tokens, **SMALL}
     for model in ("llama-3.1-8b", "gpt2-124m") for seq in ("1024", "4096")
     for objective in ("cost", "time", "hourly") for tokens in ("1e8", "1e10")]
    + [{"model": "llama-3.1-8b", "seq_len": "2048", "method": method, "zero": zero, "objective": objective, **SMALL}
       for method in ("lora", "qlora") for zero in ("", "3") for objective in ("cost", "throughput")]
    + [{"model": "llama-3.1-8b", "seq_len": "2048", "budget_usd": "50", "deadline_hours": "30", **SMALL}]
    # infeasible: explained (conflicting restrictions, closest miss, smallest change)
    + [{"model": "llama-3.1-8b", "seq_len": "8192", "gpus": "h100-sxm-80gb", "max_gpus": "1", "zero": "0",
        "recompute": "none", "objective": objective, "tokens": tokens}
       for objective in ("cost", "time") for tokens in ("1e8", "1e9")]
    + [{"model": "llama-3.1-70b", "seq_len": "4096", "gpus": "a10g-24gb", "max_gpus": "8", "objective": objective}
       for objective in ("cost", "time")]
)


@pytest.mark.slow
def test_answers_are_identical_with_and_without_the_memo(catalogue, monkeypatch):
    plan = plan_jobs(enumerate(MIXED))
    assert not plan.answered and len(plan.jobs) == len(MIXED)
    _, without = batch_worker.solve_chunk(catalogue, plan.jobs, memo=False)
    monkeypatch.setattr(batch_worker, "_tables", TableMemo())
    _, with_memo = batch_worker.solve_chunk(catalogue, plan.jobs, memo=True)
    statuses = [answer["status"] for answer in without]
    assert statuses.count("infeasible") == 7 and statuses.count("error") == 6  # gpt2-124m at 4096 tokens
    assert statuses.count("optimal") == len(MIXED) - 13
    assert with_memo == without
    assert all(answer["explanation"] for answer in without if answer["status"] == "infeasible")


def test_a_second_row_of_one_model_and_job_computes_no_model_value(catalogue, monkeypatch):
    calls = []
    real = state_tables.model_states_over_zero  # what the Tables evaluate model states with
    monkeypatch.setattr(state_tables, "model_states_over_zero", lambda *args: calls.append(args) or real(*args))
    memo = TableMemo()
    first = parse_row({"model": "llama-3.1-8b", "seq_len": "2048", "objective": "cost", **SMALL})
    wider = parse_row({"model": "llama-3.1-8b", "seq_len": "2048", "objective": "time", "tokens": "1e10",
                       "gpus": "h100-sxm-80gb", "max_gpus": "4"})
    solve(catalogue, first, memo=memo)
    after_first = len(calls)
    assert after_first > 0
    assert output_row(solve(catalogue, wider, memo=memo)) == output_row(solve(catalogue, wider))
    assert len(calls) > after_first  # (the memo-less solve did compute)
    calls.clear()
    solve(catalogue, wider, memo=memo)
    assert calls == []


def test_the_memo_forgets_the_least_recently_used_job(catalogue):
    memo = TableMemo(max_jobs=2)
    arch, job = catalogue.architecture("gpt2-124m"), Job(seq_len=512)

    def tables(owner, model):
        return memo.tables(owner, model, arch, job, 8)

    a = tables(catalogue, "a")
    tables(catalogue, "b")
    assert tables(catalogue, "a") is a  # used again: now the most recent
    b = tables(catalogue, "b")
    tables(catalogue, "c")  # drops a, the least recently used
    assert tables(catalogue, "b") is b and tables(catalogue, "a") is not a
    assert tables(load_catalogue(), "b") is not b  # another catalogue: other tables


# One family (model, job, global batch, pins) under different GPU limits and GPU lists: their layout
# domains differ (max_gpus bounds tp x pp x cp), so a unit's shared model numbers its layouts
# unlike the query reading it (solver/space.py UnitMemo, cpsat_engine.UnitSearch._here).
FAMILY = [{"model": "llama-3.1-70b", "seq_len": "4096", "objective": objective, "max_gpus": max_gpus, "gpus": gpus}
          for objective, max_gpus, gpus in (("time", "512", ""), ("cost", "64", "h100-sxm-80gb;mi300x-192gb"),
                                            ("throughput", "16", "h100-sxm-80gb"), ("cost", "512", ""))]


def test_rows_of_one_family_share_their_units_and_get_the_same_answers(catalogue):
    queries = [parse_row(row) for row in FAMILY]
    alone = [solve(catalogue, q) for q in queries]
    assert all(result.status == "optimal" for result in alone)
    built_alone = sum(result.search.cpsat_models for result in alone)
    for order in (list(range(len(queries))), list(reversed(range(len(queries))))):
        memo = TableMemo()
        shared = {i: solve(catalogue, queries[i], memo=memo) for i in order}
        assert [output_row(shared[i]) for i in range(len(queries))] == [output_row(r) for r in alone]
        assert sum(result.search.cpsat_models for result in shared.values()) < built_alone


def test_rows_whose_spaces_check_different_pipeline_ranks_share_the_family_memo(catalogue):
    """Gemma 2 alternates local and global attention, so how many pipeline ranks a space checks
    depends on the pipeline depths its GPU limit allows: with at most 8 GPUs fewer than with 512.
    A row of each in one memo gets the answers it gets alone (a per-rank value kept by the first
    row once came back one rank short for the second: IndexError on 7 rows of the benchmark's mix)."""
    rows = [{"model": "gemma-2-27b", "seq_len": "8192", "objective": objective, "max_gpus": most}
            for objective, most in (("throughput", "8"), ("cost", "512"))]
    queries = [parse_row(row) for row in rows]
    memo = TableMemo()
    shared = [output_row(solve(catalogue, query, memo=memo)) for query in queries]
    alone = [output_row(solve(catalogue, query)) for query in queries]
    assert [answer["status"] for answer in alone] == ["optimal", "optimal"]
    assert shared == alone
