"""The batch sheet's `compile` column: true / false or none / model / model+loss, empty = the stack's
(catalogues/stacks.csv), a stack without torch.compile answers its row with the refusal."""

from __future__ import annotations

import pytest
from helpers.sheets import job

from vramplan.batch.run import BatchOptions, run_batch
from vramplan.sheets.rows import INPUT_COLUMNS, parse_row


@pytest.mark.parametrize(("cell", "compile_"), [("", "none"), ("true", "model+loss"), ("FALSE", "none"), (True, "model+loss"),
                                               ("model", "model"), ("model+loss", "model+loss"), ("none", "none")])
def test_a_compile_cell_is_the_jobs_switch(cell, compile_):
    assert "compile" in INPUT_COLUMNS
    query = parse_row({"model": "llama-3.1-8b", "seq_len": "4096", "stack": "torchtitan", "compile": cell})
    assert query.job.compile == compile_


def test_an_empty_cell_takes_the_stacks_default():
    assert parse_row({"model": "llama-3.1-8b", "seq_len": "4096", "stack": "unsloth"}).job.compile == "model+loss"


def test_a_bad_cell_and_a_stack_without_compile_name_the_column(catalogue):
    rows = [(0, job("bad", compile="yes")), (1, job("megatron", stack="megatron", compile="true")),
            (2, job("torchtune", stack="torchtune", compile="true"))]
    answers = dict(run_batch(catalogue, rows, BatchOptions(backend="serial")))
    assert answers[0]["status"] == "error" and "compile='yes'" in answers[0]["error"]
    assert answers[1]["status"] == "error" and "stack='megatron'" in answers[1]["error"] and "torch.compile" in answers[1]["error"]
    assert answers[2]["status"] in ("optimal", "feasible")
