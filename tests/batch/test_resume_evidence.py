"""--resume reads the earlier output as evidence (commands/batch_run.py _answers_from_output): an
output that is corrupt, edited or not a sheet at all is one warning or a row not reused, never a
crash (before: `inf` or `1e400` in an integer answer column, or a JSON-lines integer past float's
range, ended --resume with `internal error: OverflowError`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import invoke_batch
from helpers.sheets import FAST, write_csv

from vramplan.sheets.sheet_files import format_of, read_table

ROWS = [{"id": "a", "model": "llama-3.1-8b", "seq_len": "2048", **FAST},
        {"id": "b", "model": "llama-3.1-8b", "seq_len": "4096", **FAST}]


def _replace_csv_cell(column: str, value: str):
    def spoil(path: Path) -> None:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
        at = lines[0].split(",").index(column)
        cells = lines[1].split(",")
        cells[at] = value
        lines[1] = ",".join(cells)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return spoil


def _replace_jsonl_cell(column: str, value: str):
    def spoil(path: Path) -> None:
        lines = path.read_text(encoding="utf-8").splitlines()
        record = json.loads(lines[0])
        lines[0] = json.dumps({**record, column: "@@"}).replace('"@@"', value)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return spoil


def _append(data: bytes):
    return lambda path: path.write_bytes(path.read_bytes() + data)


CORRUPTIONS = {  # name: (output suffix, how it is spoilt)
    "csv: inf in an integer column": (".csv", _replace_csv_cell("num_gpus", "inf")),
    "csv: 1e400 in an integer column": (".csv", _replace_csv_cell("num_gpus", "1e400")),
    "csv: a line cut short": (".csv", _append(b"b,llama-3.1-8b,4096\n")),
    "csv: not UTF-8": (".csv", _append(b"\xff\xfe,\x00\n")),
    "jsonl: an integer past float's range": (".jsonl", _replace_jsonl_cell("id", "1" + "0" * 400)),
    "jsonl: an integer answer past float's range": (".jsonl", _replace_jsonl_cell("num_gpus", "1" + "0" * 400)),
    "jsonl: a list answer": (".jsonl", _replace_jsonl_cell("num_gpus", "[8]")),
    "jsonl: nested 100,000 deep": (".jsonl", _append(b"[" * 100_000 + b"]" * 100_000 + b"\n")),
    "jsonl: not an object": (".jsonl", _append(b"[1, 2]\n")),
    "xlsx: not a workbook": (".xlsx", lambda path: path.write_bytes(b"PK\x03\x04 not a workbook")),
    "parquet: not parquet": (".parquet", lambda path: path.write_bytes(b"PAR1 garbage PAR1")),
}


@pytest.mark.parametrize("case", CORRUPTIONS)
def test_a_corrupt_earlier_output_never_crashes_resume(tmp_path, case):
    suffix, spoil = CORRUPTIONS[case]
    if suffix in (".xlsx", ".parquet"):
        pytest.importorskip({".xlsx": "openpyxl", ".parquet": "pyarrow"}[suffix])
    jobs, output = write_csv(tmp_path / "jobs.csv", ROWS), tmp_path / f"plans{suffix}"
    assert invoke_batch(str(jobs), "-o", str(output)).exit_code == 0
    spoil(output)
    result = invoke_batch(str(jobs), "-o", str(output), "--resume")
    assert result.exit_code == 0, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    fresh = tmp_path / f"fresh{suffix}"
    assert invoke_batch(str(jobs), "-o", str(fresh)).exit_code == 0
    fmt = format_of(output)
    assert read_table(output, fmt) == read_table(fresh, fmt)  # every row answered as a fresh run answers it
