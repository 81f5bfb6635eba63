"""`vramplan batch` on one mixed spreadsheet: every row answered in order (good, infeasible, bad and
formula-like rows), spreadsheet-safe CSV, exit codes, and the same answers from XLSX, Parquet and
JSON-lines sheets.

Good rows restrict the search (one GPU type, at most 8 GPUs) so that each solves in ~10 ms.
"""

from __future__ import annotations

import json

import pytest
from helpers.cli import invoke_batch
from helpers.sheets import BAD_ROWS, HEADER, job, read_csv, write_csv, write_sheet

from vramplan.batch import worker as batch_worker
from vramplan.sheets import journal as batch_journal
from vramplan.sheets import sheet_files as batch_sheet
from vramplan.sheets.rows import ANSWER_COLUMNS

INJECTIONS = ['=HYPERLINK("http://evil.example","x")', "+1", "-2+3", "@SUM(A1:A2)", "\tTAB", "\rCR"]
MIXED = (
    [job("ok"), job("ok-gpt2", model="gpt2-124m", seq_len="1024", objective="time"), job("pinned", zero="3"),
     job("infeasible", model="llama-3.1-405b", seq_len="8192", gpus="a10g-24gb")]
    + [job(id_, **changes) for id_, changes, _ in BAD_ROWS]
    + [job(text) for text in INJECTIONS]
    + [job("Zürich-日本"), job("ok")]
)


def answer_header(columns: list[str]) -> list[str]:
    return [f"plan_{c}" if c in columns else c for c in ANSWER_COLUMNS]


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed")
    jobs = write_csv(folder / "jobs.csv", MIXED, HEADER)
    output = folder / "plans.csv"
    result = invoke_batch(str(jobs), "-o", str(output), workers=2)
    return result, output


# --- the CLI: one mixed spreadsheet ---------------------------------------------------------------


def test_mixed_batch_answers_every_row_in_order(mixed_run):
    result, output = mixed_run
    assert result.exit_code == 3, (result.stderr, result.exception)
    assert "Traceback" not in result.stderr and result.stdout == ""
    columns, rows = read_csv(output)
    assert columns == HEADER + answer_header(HEADER)
    assert "plan_zero" in columns  # the pin column keeps its name; the plan's stage is plan_zero
    assert len(rows) == len(MIXED)
    for row, given in zip(rows, MIXED):
        for name in HEADER:
            assert batch_sheet.unneutralise(row[name]) == given.get(name, "")
    by_id = {row["id"]: row for row in rows}
    assert by_id["ok"]["status"] == "optimal" and by_id["ok"]["gpu"] == "h100-sxm-80gb"
    assert by_id["ok-gpt2"]["status"] == "optimal"
    assert by_id["pinned"]["plan_zero"] == "3"
    assert by_id["infeasible"]["status"] == "infeasible" and by_id["infeasible"]["explanation"]
    for id_, _, fragment in BAD_ROWS:
        assert by_id[id_]["status"] == "error" and fragment in by_id[id_]["error"], by_id[id_]
    assert rows[-1]["status"] == "optimal" and {k: v for k, v in rows[-1].items() if k != "id"} == {
        k: v for k, v in rows[0].items() if k != "id"}
    assert not batch_journal.journal_path(output).exists()


def test_csv_output_is_spreadsheet_safe(mixed_run):
    _, output = mixed_run
    raw = output.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # UTF-8 BOM: Excel reads the non-ASCII text
    assert "Zürich-日本".encode() in raw
    columns, rows = read_csv(output)
    ids = [row["id"] for row in rows]
    for text in INJECTIONS:
        assert "'" + text in ids
    assert all(not cell.startswith(batch_sheet.INJECTION_TRIGGERS) for row in rows for cell in row.values())
    import pandas

    frame = pandas.read_csv(output, encoding="utf-8-sig")
    for column in ("num_gpus", "dp", "grad_accum", "total_gib", "limit_gib", "tokens_per_s", "mfu", "hours",
                   "usd_per_hour", "usd_total"):
        assert frame[column].dtype.kind in "if", column
    assert frame["total_gib"].notna().sum() == len(MIXED) - len(BAD_ROWS) - 1


def test_every_row_solved_exits_0(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [job("a"), job("b", seq_len="1024")], HEADER)
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), quiet=True)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""  # -q: no summary; no terminal: no progress bar
    assert [row["status"] for row in read_csv(tmp_path / "plans.csv")[1]] == ["optimal", "optimal"]


def test_unknown_column_stops_before_anything_runs(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [{"model": "llama-3.1-8b", "seq-len": "2048"}], ["model", "seq-len"])
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"), workers=None)
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: column='seq-len': unknown column; did you mean 'seq_len'?"
    assert list(tmp_path.iterdir()) == [jobs]


def test_a_batch_that_cannot_run_exits_1(tmp_path, monkeypatch):
    jobs = write_csv(tmp_path / "jobs.csv", [job("a")], HEADER)
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "missing" / "plans.csv"), workers=None)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1 and "cannot write" in result.stderr
    monkeypatch.setattr(batch_worker, "package_version", lambda: "9.9.9")
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.csv"))
    assert result.exit_code == 1 and "version mismatch" in result.stderr


# --- XLSX, Parquet, JSON lines --------------------------------------------------------------------


def test_xlsx_output_is_neutralised_and_numeric(tmp_path, mixed_run):
    openpyxl = pytest.importorskip("openpyxl")
    jobs = write_csv(tmp_path / "jobs.csv", MIXED, HEADER)
    output = tmp_path / "plans.xlsx"
    result = invoke_batch(str(jobs), "-o", str(output), workers=2, quiet=True)
    assert result.exit_code == 3, result.stderr
    sheet = openpyxl.load_workbook(output).active
    header = [cell.value for cell in sheet[1]]
    assert header == HEADER + answer_header(HEADER)
    cells = {row[0].value: row for row in sheet.iter_rows(min_row=2)}
    for text in INJECTIONS:
        cell = cells["'" + text.replace("\r", "\n")][0]  # XML reads a stored CR back as LF
        assert cell.data_type == "s" and cell.value.startswith("'")
    assert all(cell.data_type != "f" for row in sheet.iter_rows() for cell in row)  # no formula anywhere
    ok = cells["ok"]
    assert ok[header.index("num_gpus")].data_type == "n" and isinstance(ok[header.index("usd_total")].value, float)
    _, csv_rows = read_csv(mixed_run[1])
    assert sheet.max_row - 1 == len(csv_rows)


def test_xlsx_and_parquet_input_give_the_same_answers(tmp_path):
    pytest.importorskip("openpyxl")
    pytest.importorskip("pyarrow")
    import pandas

    rows = [job("a"), job("b", seq_len="1024"), job("c", seq_len="abc")]
    frame = pandas.DataFrame(rows)
    frame["seq_len"] = [2048, 1024, "abc"]  # numbers stay numbers in a spreadsheet
    write_sheet(tmp_path / "jobs.xlsx", frame)
    write_sheet(tmp_path / "jobs.parquet", frame.astype(str))
    write_csv(tmp_path / "jobs.csv", rows, HEADER)
    statuses = {}
    for name in ("jobs.csv", "jobs.xlsx", "jobs.parquet"):
        output = tmp_path / f"{name}.out.parquet"
        result = invoke_batch(str(tmp_path / name), "-o", str(output), quiet=True)
        assert result.exit_code == 3, result.stderr
        plans = pandas.read_parquet(output)
        assert list(plans.columns[: len(frame.columns)]) == list(frame.columns) and len(plans) == 3
        assert plans["num_gpus"].dtype.name == "Int64" and plans["usd_total"].dtype.kind == "f"
        statuses[name] = plans[["status", "gpu", "usd_total"]].astype(str).values.tolist()
    assert statuses["jobs.csv"] == statuses["jobs.xlsx"] == statuses["jobs.parquet"]
    assert [s[0] for s in statuses["jobs.csv"]] == ["optimal", "optimal", "error"]


def test_jsonl_output(tmp_path):
    jobs = write_csv(tmp_path / "jobs.csv", [job("=1+1"), job("b", seq_len="abc")], HEADER)
    result = invoke_batch(str(jobs), "-o", str(tmp_path / "plans.jsonl"), quiet=True)
    assert result.exit_code == 3
    records = [json.loads(line) for line in (tmp_path / "plans.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in records] == ["=1+1", "b"]  # JSON is not a spreadsheet: text as given
    assert records[0]["status"] == "optimal" and isinstance(records[0]["num_gpus"], int)

