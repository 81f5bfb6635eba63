"""Rows, not sheets, fail: a cell no output format can write (a lone surrogate from a JSON-lines
escape, a Parquet list cell) used to end the batch with `internal error: UnicodeEncodeError` after
every row was solved, with no output and no journal; XLSX output failed the same way on list cells."""

from __future__ import annotations

import csv
import decimal
import io
import json
from pathlib import Path

import pytest
from helpers.cli import invoke_batch
from helpers.sheets import write_csv

from vramplan.sheets.sheet_files import read_table, unneutralise


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


# --- every input format into every output format --------------------------------------------------

LONG = "-" + "x" * 39_999  # past an XLSX cell's 32,767 characters, and a formula trigger
JOB = {"model": "llama-3.1-8b", "seq_len": 2048, "gpus": "h100-sxm-80gb", "max_gpus": 8}
HOSTILE = {  # input format: cells no output format may fail on, after every row was solved
    "csv": {"notes": LONG, "ctrl\x01name": "a\x01b\x00c"},
    "jsonl": {"notes": LONG, "surrogate": "a\ud800", "huge": 10**400, "list": [1, {"a": None}], "nan": float("nan"),
              "key\ud800": "x", "ctrl": "a\x01b"},
    "parquet": {"notes": LONG, "bytes": b"\xff\x00ab", "list": ["a", "b"], "struct": {"a": 1}, "ctrl": "a\x01b"},
    "xlsx": {"notes": "-" + "x" * 32_766, "when": "2027-01-05T10:30:00", "flag": True},
}


def _write_hostile(path: Path, fmt: str) -> None:
    rows = [{"id": name, **JOB, **HOSTILE[fmt]} for name in ("a", "b")]
    if fmt == "csv":
        write_csv(path, [{k: str(v) for k, v in row.items()} for row in rows])
    elif fmt == "jsonl":  # the escapes of lone surrogates, as JSON writes them
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    else:
        pandas = pytest.importorskip("pandas")
        pytest.importorskip({"parquet": "pyarrow", "xlsx": "openpyxl"}[fmt])
        frame = pandas.DataFrame(rows)
        if fmt == "xlsx":
            frame["when"] = pandas.to_datetime(frame["when"])
            frame.to_excel(path, index=False)
        else:
            frame["decimal"] = [decimal.Decimal("2048.50")] * 2
            frame["stamp"] = pandas.Timestamp("2027-01-05 10:30", tz="Europe/Berlin")
            frame.to_parquet(path, index=False)


@pytest.mark.parametrize("target", ["csv", "xlsx", "parquet", "jsonl"])
@pytest.mark.parametrize("source", HOSTILE)
def test_every_input_format_is_written_to_every_output_format(tmp_path, source, target):
    """Before: bytes into XLSX (ValueError), an integer past float's range (OverflowError), a lone
    surrogate in a JSON-lines key (UnicodeEncodeError) failed the output after every row was
    solved, and a cell past 32,767 characters was cut silently in XLSX."""
    pytest.importorskip({"xlsx": "openpyxl", "parquet": "pyarrow"}.get(target, "json"))
    jobs, out = tmp_path / f"jobs.{source}", tmp_path / f"plans.{target}"
    _write_hostile(jobs, source)
    result = invoke_batch(str(jobs), "-o", str(out), quiet=True)
    assert result.exit_code == 0, result.stderr
    header, rows = read_table(out, target)
    assert [row[header.index("status")] for row in rows] == ["optimal", "optimal"]
    notes = rows[0][header.index("notes")]
    if target == "xlsx":
        assert all(len(str(cell)) <= 32_767 for row in rows for cell in row)
        assert notes.startswith("'-xxx") and notes.endswith(" characters; an XLSX cell holds 32,767]")
    else:  # CSV output neutralises the leading "-" (OWASP)
        assert unneutralise(notes) == HOSTILE[source]["notes"] and (target == "csv") == notes.startswith("'")
