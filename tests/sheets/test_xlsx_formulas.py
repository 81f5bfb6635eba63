"""XLSX formulas (sheets/xlsx_read.py): a formula cell reads as the value the spreadsheet saved
with it; one with no saved value (a sheet written by openpyxl or an exporter that never computes
them) or an error value is that row's error naming the column, where before it read as an empty
cell (a budget or a GPU count silently dropped, the row solved without it)."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import assert_error_line, invoke, invoke_batch
from helpers.sheets import read_rows

from vramplan.sheets.sheet_files import read_table

openpyxl = pytest.importorskip("openpyxl")

NO_VALUE = ("a formula with no saved value (open and save the sheet in Excel or LibreOffice so its values "
            "are stored)")
HEADER = ["id", "model", "seq_len", "budget_usd", "gpus", "max_gpus"]


def write_xlsx(path: Path, rows: list[list[Any]], saved: dict[str, str | tuple[str, str]] | None = None) -> Path:
    """A workbook of `rows`; a text starting with = is a formula, written by openpyxl without a
    saved value, except in the cells `saved` names (A1 style), which get that value as Excel would
    save it: `<v>value</v>`, typed by t="e" for an error value (#DIV/0!) or by the kind given with
    it (("xy", "str") for text, ("1", "b") for a boolean)."""
    book = openpyxl.Workbook()
    for row in rows:
        book.active.append(row)
    book.save(path)
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    xml = parts["xl/worksheets/sheet1.xml"].decode()
    for ref, value in (saved or {}).items():
        value, kind = value if isinstance(value, tuple) else (value, "e" if value.startswith("#") else "")
        typed = f' t="{kind}"' if kind else ""
        xml, count = re.subn(rf'<c r="{ref}"><f>(.*?)</f><v ?/>', rf'<c r="{ref}"{typed}><f>\1</f><v>{value}</v>', xml)
        assert count == 1, ref
    parts["xl/worksheets/sheet1.xml"] = xml.encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path


def test_a_formula_without_a_saved_value_is_its_rows_error_naming_the_column(tmp_path):
    jobs = write_xlsx(tmp_path / "jobs.xlsx", [
        HEADER,
        ["budget", "llama-3.1-8b", 2048, "=2*1", "h100-sxm-80gb", 8],
        ["count", "llama-3.1-8b", 2048, None, "h100-sxm-80gb", "=4*2"],
        ["saved", "llama-3.1-8b", "=1024*2", None, "h100-sxm-80gb", "=4*2"],
        ["error", "llama-3.1-8b", 2048, "=1/0", "h100-sxm-80gb", 8],
        ["plain", "llama-3.1-8b", 4096, None, "h100-sxm-80gb", 8],
    ], saved={"C4": "2048", "F4": "8", "D5": "#DIV/0!"})
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 3, result.stderr
    rows = read_rows(tmp_path / "plans.csv")
    assert [(row["id"], row["status"], row["error"]) for row in rows] == [
        ("budget", "error", f"budget_usd: {NO_VALUE}"),
        ("count", "error", f"max_gpus: {NO_VALUE}"),
        ("saved", "optimal", ""),
        ("error", "error", "budget_usd: a formula whose saved value is an error (#DIV/0!)"),
        ("plain", "optimal", "")]
    assert (rows[2]["seq_len"], rows[2]["max_gpus"]) == ("2048", "8")  # saved values read as numbers
    assert rows[0]["budget_usd"] == ""  # the formula itself never reaches the output


def test_saved_values_keep_their_types(tmp_path):
    jobs = write_xlsx(tmp_path / "jobs.xlsx", [["model", "seq_len", "tokens", "id", "notes"],
                                               ["llama-3.1-8b", "=2048", "=2.5e9", "=1=1", '="x"&"y"']],
                      saved={"B2": "2048.0", "C2": "2500000000.5", "D2": ("1", "b"), "E2": ("xy", "str")})
    header, rows = read_table(jobs, "xlsx")
    assert rows == [["llama-3.1-8b", 2048, 2500000000.5, True, "xy"]]
    assert [type(cell) for cell in rows[0]] == [str, int, float, bool, str]  # a whole number is an int


def test_a_formula_in_the_header_is_one_line_naming_the_file(tmp_path):
    jobs = write_xlsx(tmp_path / "jobs.xlsx", [["model", '="seq"&"_len"'], ["llama-3.1-8b", 2048]])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 2
    assert_error_line(result, f"jobs={str(jobs)!r}: the header's column 2 is {NO_VALUE}")


def test_a_formula_in_a_fleet_inventory_is_one_line_naming_the_row(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("id,model,seq_len,tokens\na,llama-3.1-8b,4096,1e9\n", encoding="utf-8")
    inventory = write_xlsx(tmp_path / "inventory.xlsx", [["pool", "offering", "num_gpus"],
                                                         ["h100", "aws/p5.48xlarge", "=8*2"]])
    result = invoke("fleet", str(jobs), "--inventory", str(inventory), "-o", str(tmp_path / "schedule.csv"))
    assert result.exit_code == 2
    assert_error_line(result, f"inventory={str(inventory)!r}: row 2, num_gpus: {NO_VALUE}")
