"""Reading and writing job sheets (sheets/sheet_files.py): JSON-lines columns are the union of all
records, resume keys follow what a row parses to, odd files are one line naming the file, odd
cells stay in their row, and cells that a spreadsheet would run as formulas are neutralised."""

from __future__ import annotations

import csv
import io
import json
import time
import zipfile
from pathlib import Path

import pytest
from helpers.cli import invoke_batch
from helpers.sheets import FAST, read_rows, write_csv, write_sheet

from vramplan.sheets import journal as batch_journal
from vramplan.sheets import sheet_files as batch_sheet
from vramplan.sheets import sheet_write
from vramplan.sheets.rows import MAX_CELL_CHARS

GOOD = {"model": "llama-3.1-8b", "seq_len": "2048", **FAST}


def test_jsonl_columns_are_every_records_keys(tmp_path):
    jobs = write_sheet(tmp_path / "jobs.jsonl", [{"id": "a", **GOOD}, {"id": "b", **GOOD, "num_gpus": 4}])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q")
    assert result.exit_code == 0, result.stderr
    rows = read_rows(tmp_path / "plans.csv")
    assert [row["num_gpus"] for row in rows] == ["", "4"]  # the pin of the second record is read
    assert rows[1]["plan_num_gpus"] == "4"


def test_a_misspelled_key_in_a_later_jsonl_record_is_reported(tmp_path):
    jobs = write_sheet(tmp_path / "jobs.jsonl", [GOOD, {**GOOD, "seqlen": 4096}])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 2
    assert result.stderr == "error: column='seqlen': unknown column; did you mean 'seq_len'?\n"


def test_resume_does_not_reuse_an_answer_for_a_cell_that_parses_differently(tmp_path):
    jobs, output = tmp_path / "jobs.csv", tmp_path / "plans.csv"
    write_csv(jobs, [{**GOOD, "global_batch": "1000"}])
    assert invoke_batch(str(jobs), "-o", str(output), "-q").exit_code == 0
    write_csv(jobs, [{**GOOD, "global_batch": "1e3"}])  # the same number as a float, not as an integer
    resumed = invoke_batch(str(jobs), "-o", str(output), "--resume", "-q")
    fresh_output = tmp_path / "fresh.csv"
    fresh = invoke_batch(str(jobs), "-o", str(fresh_output), "-q")
    assert resumed.exit_code == fresh.exit_code
    assert read_rows(output) == read_rows(fresh_output)


def test_an_oversized_cell_is_its_rows_error_only(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [{"id": "big", **GOOD, "gpus": "x" * (MAX_CELL_CHARS + 1)},
                                              {"id": "ok", **GOOD}])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q")
    assert result.exit_code == 3, result.stderr
    big, ok = read_rows(tmp_path / "plans.csv")
    assert big["status"] == "error" and f"{MAX_CELL_CHARS + 1:,} characters" in big["error"]
    assert len(big["error"]) < 200 and len(big["gpus"]) == MAX_CELL_CHARS + 1  # the cell is kept as it was
    assert ok["status"] == "optimal"


def test_an_unterminated_quote_is_one_line_naming_the_line(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text('id,model,seq_len\na,llama-3.1-8b,2048\nb,"llama-3.1-8b,2048\nc,llama-3.1-8b,1024\n',
                    encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 2
    assert result.stderr == (f"error: jobs={str(jobs)!r}: line 3: a quoted cell starts on this line and its "
                             "quote is never closed\n")


def test_blank_rows_are_skipped_with_one_warning(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("model,seq_len,gpus,max_gpus\nllama-3.1-8b,2048,h100-sxm-80gb,8\n\n,,,\n"
                    "llama-3.1-8b,1024,h100-sxm-80gb,8\n,,,\n\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning")]
    assert warnings == [f"warning: {jobs}: 2 blank rows skipped (row 3, 4)"]  # trailing ones are not counted
    assert [row["seq_len"] for row in read_rows(tmp_path / "plans.csv")] == ["2048", "1024"]


def test_a_list_cell_is_written_to_xlsx_as_its_json(tmp_path):
    openpyxl = pytest.importorskip("openpyxl")
    jobs = write_sheet(tmp_path / "jobs.jsonl", [{"id": [1, {"a": 2}], **GOOD}])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.xlsx"), "-q")
    assert result.exit_code == 0, result.stderr
    sheet = openpyxl.load_workbook(tmp_path / "plans.xlsx").active
    assert sheet["A2"].value == '[1, {"a": 2}]'


def _xml_bomb(path: Path) -> None:
    pytest.importorskip("openpyxl")
    write_sheet(path, [GOOD])
    entities = '<!ENTITY a "aaaaaaaaaa">' + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(8))
    bomb = (f'<?xml version="1.0"?><!DOCTYPE worksheet [{entities}]>'
            '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
            '<row r="1"><c r="A1" t="inlineStr"><is><t>&i;</t></is></c></row></sheetData></worksheet>')
    with zipfile.ZipFile(path) as source:
        members = {name: source.read(name) for name in source.namelist()}
    members["xl/worksheets/sheet1.xml"] = bomb.encode()
    with zipfile.ZipFile(path, "w") as target:
        for name, data in members.items():
            target.writestr(name, data)


@pytest.mark.parametrize("case", ["not-a-zip", "xml-bomb", "latin-1", "binary", "latin-1-jsonl"])
def test_an_unreadable_jobs_file_is_one_line_naming_it_exit_2(tmp_path, case):
    suffix = {"not-a-zip": ".xlsx", "xml-bomb": ".xlsx", "latin-1-jsonl": ".jsonl"}.get(case, ".csv")
    jobs = tmp_path / f"jobs{suffix}"
    if case == "not-a-zip":
        jobs.write_bytes(b"PK\x03\x04 this is not a workbook")
    elif case == "xml-bomb":
        _xml_bomb(jobs)
    elif case == "latin-1":
        jobs.write_bytes("model,seq_len,id\nllama-3.1-8b,2048,Zürich\n".encode("latin-1"))
    elif case == "latin-1-jsonl":
        jobs.write_bytes('{"model": "llama-3.1-8b", "seq_len": 2048, "id": "Zürich"}\n'.encode("latin-1"))
    else:
        jobs.write_bytes(bytes(range(256)) * 4)
    started = time.monotonic()
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert time.monotonic() - started < 60
    assert result.exit_code == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"error: jobs={str(jobs)!r}: ")
    if case.startswith("latin-1"):
        assert "is not UTF-8 text (byte" in result.stderr
    assert not (tmp_path / "plans.csv").exists()



@pytest.mark.parametrize("text, safe", [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"),
    ("\rx", "'\rx"), ("-5", "'-5"), ("llama", "llama"), ("", ""), ("'=x", "'=x"),
])
def test_neutralise(text, safe):
    assert batch_sheet.neutralise(text) == safe
    assert batch_journal.canonical(batch_sheet.neutralise(text)) == batch_journal.canonical(text)


def test_csv_cells_keep_numbers_numeric():
    buffer = io.StringIO()
    csv.writer(buffer).writerow([sheet_write._csv_cell(v) for v in (-5, -2.5, None, True, "-5")])
    assert buffer.getvalue().strip() == "-5,-2.5,,true,'-5"


def test_a_parquet_index_that_is_named_is_a_column(tmp_path):
    """`df.set_index('id').to_parquet()` stores id as the index, which pandas restores as the index:
    the column was lost (every row's id empty). An unnamed index (a filtered frame's row numbers) is
    no column."""
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    frame = pandas.DataFrame([{"id": "a", **GOOD}, {"id": "b", **GOOD}, {"id": "c", **GOOD, "seq_len": "1024"}])
    frame.set_index("id").to_parquet(tmp_path / "named.parquet")
    frame[frame["id"] != "b"].to_parquet(tmp_path / "unnamed.parquet")  # index 0, 2: stored, but unnamed
    for name, ids in (("named", ["a", "b", "c"]), ("unnamed", ["a", "c"])):
        result = invoke_batch(str(tmp_path / f"{name}.parquet"), "-o", str(tmp_path / f"{name}.csv"), "-q")
        assert result.exit_code == 0, result.stderr
        rows = read_rows(tmp_path / f"{name}.csv")
        assert [row["id"] for row in rows] == ids and list(rows[0])[:2] == ["id", "model"]


def test_a_json_integer_past_pythons_digits_is_its_rows_error(tmp_path):
    """json.loads converts at most 4,300 digits: one longer integer ended the batch with
    `internal error: ValueError` before a row was solved."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"id": "big", "model": "llama-3.1-8b", "seq_len": ' + "1" * 5000 + "}\n"
                    + json.dumps({"id": "ok", **GOOD}) + "\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q")
    assert result.exit_code == 3, result.stderr
    big, ok = read_rows(tmp_path / "plans.csv")
    assert big["status"] == "error" and big["error"].startswith("seq_len='1111") and len(big["error"]) < 400
    assert big["seq_len"] == "1" * 5000 and ok["status"] == "optimal"


def test_a_jsonl_line_that_is_no_object_is_its_rows_error_only(tmp_path):
    """A list, a broken line or a key named twice stopped the whole batch (exit 2, no output), or
    kept the key's last value silently; a short CSV line was only its row's error."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("\n".join([json.dumps({"id": "a", **GOOD}), "[1, 2]", "{broken",
                               '{"id": "twice", "model": "llama-3.1-8b", "seq_len": 2048, "seq_len": 4096}',
                               json.dumps({"id": "b", **GOOD})]) + "\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q")
    assert result.exit_code == 3, result.stderr
    rows = read_rows(tmp_path / "plans.csv")
    assert [row["status"] for row in rows] == ["optimal", "error", "error", "error", "optimal"]
    assert [row["error"] for row in rows[1:4]] == [
        "row is not a JSON object (line 2)",
        "row is not JSON (line 3: Expecting property name enclosed in double quotes)",
        "row names the key 'seq_len' twice (line 4)"]


def test_a_jsonl_file_without_an_object_is_one_line(tmp_path):
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text("[1]\n{broken\n", encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 2
    assert result.stderr == (f"error: jobs='{jobs}': has no JSON object with a key; its first other line is not a "
                             "JSON object (line 1)\n")


def test_a_jsonl_row_is_numbered_by_its_line_and_a_byte_order_mark_is_read(tmp_path):
    """A JSON-lines file has no header line: "row 3 ... (line 2)" gave one line two numbers. A BOM,
    which CSV takes, made the first row "Unexpected UTF-8 BOM"."""
    inventory = tmp_path / "inv.jsonl"
    inventory.write_text('{"pool": "r", "offering": "aws/p5.48xlarge", "num_gpus": 16}\n[1]\n', encoding="utf-8")
    with pytest.raises(batch_sheet.VramplanError, match=r"row 2 is not a JSON object \(line 2\)"):
        batch_sheet.read_table(inventory, "jsonl", field="inventory")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_bytes(b"\xef\xbb\xbf" + json.dumps({"id": "a", **GOOD}).encode() + b"\n")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), "-q")
    assert result.exit_code == 0, result.stderr
    assert read_rows(tmp_path / "plans.csv")[0]["status"] == "optimal"


def test_a_jsonl_number_beyond_a_float_is_kept_as_written_and_the_output_is_strict_json(tmp_path):
    """1e400 read as infinity: the error said seq_len=inf and the JSON-lines output held `Infinity`,
    which strict parsers refuse."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"id": "huge", "model": "llama-3.1-8b", "seq_len": 1e400, "team": -1e400}\n', encoding="utf-8")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.jsonl"), "-q")
    assert result.exit_code == 3, result.stderr
    line = (tmp_path / "plans.jsonl").read_text(encoding="utf-8")

    def refuse(constant: str) -> float:
        raise ValueError(constant)

    row = json.loads(line, parse_constant=refuse)
    assert row["error"].startswith("seq_len='1e400'") and row["team"] == "-1e400"
    assert sheet_write._json_cell(float("inf")) == "inf"  # a Parquet input's infinite cell, as text
