"""Rows, not sheets, fail: a cell no output format can write (a lone surrogate from a JSON-lines
escape, a Parquet list cell) used to end the batch with `internal error: UnicodeEncodeError` after
every row was solved, with no output and no journal; XLSX output failed the same way on list cells."""

from __future__ import annotations

import csv
import io

import pytest
from helpers.cli import invoke_batch


def test_a_lone_surrogate_is_kept_as_its_escape_and_only_its_row_fails(tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"id": "a\\ud800", "model": "llama-3.1-8b", "method": "lora", "seq_len": 2048}\n'
                    '{"id": "b", "model": "llama\\ud800", "seq_len": 2048}\n'
                    '{"id": "c", "model": "llama-3.1-8b", "method": "lora", "seq_len": 2048}\n', encoding="utf-8")
    out = tmp_path / "plans.csv"
    result = invoke_batch(str(jobs), "-o", str(out), quiet=True)
    assert result.exit_code == 3, result.stderr  # one row is an error; the sheet is written
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8-sig"))))
    assert [(r["id"], r["status"]) for r in rows] == [("a\\ud800", "optimal"), ("b", "error"), ("c", "optimal")]


def test_a_parquet_list_cell_is_written_as_json_text_to_xlsx(tmp_path):
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    openpyxl = pytest.importorskip("openpyxl")
    jobs = tmp_path / "jobs.parquet"
    pandas.DataFrame({"id": ["x", "y"], "model": ["llama-3.1-8b"] * 2, "method": ["lora"] * 2, "seq_len": [2048, 2048],
                      "tags": [["a", "b"], ["c"]]}).to_parquet(jobs)
    out = tmp_path / "plans.xlsx"
    result = invoke_batch(str(jobs), "-o", str(out), quiet=True)
    assert result.exit_code == 0, result.stderr
    sheet = openpyxl.load_workbook(out).active
    header = [cell.value for cell in sheet[1]]
    assert [row[header.index("tags")].value for row in sheet.iter_rows(min_row=2)] == ['["a", "b"]', '["c"]']
