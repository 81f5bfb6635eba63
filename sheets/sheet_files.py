"""Spreadsheet files for `vramplan batch` and `vramplan fleet`: reading sheets of jobs.

- Input: CSV (UTF-8, with or without a BOM; every cell is kept as the text it is), XLSX (first
  sheet: sheets/xlsx_read.py), Parquet (pyarrow, via pandas) and JSON lines.
- A row that cannot be read whole is that row's error, never the sheet's: a formula cell with no
  saved value, a CSV line with a field missing or one too many (read_table).
- Every cell is made writable by every output format as it is read (sheets/cells.py).

Writing plans is sheets/sheet_write.py, the cells' spreadsheet safety sheets/cells.py (both
re-exported here), the resume journal sheets/journal.py.
"""

from __future__ import annotations

import csv
import json
import math
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vramplan.models.core.errors import CommandFailure, VramplanError
from vramplan.sheets.cells import INJECTION_TRIGGERS, Unreadable, neutralise, plain, unneutralise, writable
from vramplan.sheets.formats import FORMATS
from vramplan.sheets.rows import COLUMN_NAME, is_empty
from vramplan.sheets.sheet_write import render_table, write_table
from vramplan.sheets.xlsx_read import read_xlsx

__all__ = ["FORMATS", "INJECTION_TRIGGERS", "UnreadableRow", "format_of", "neutralise", "plain", "read_table",
           "render_table", "require_extra", "unneutralise", "write_table"]

SUFFIX_FORMATS = {".csv": "csv", ".txt": "csv", ".xlsx": "xlsx", ".xlsm": "xlsx",
                  ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
EXTRAS = {"xlsx": ("openpyxl", "xlsx"), "parquet": ("pyarrow", "parquet")}
CSV_FIELD_LIMIT = 2**31 - 1  # the csv module's 131,072 would reject the whole sheet for one cell


# --- reading --------------------------------------------------------------------------------------


# Names of files that are no sheet: without --format they were read or written as CSV (`batch -o
# plans.json` wrote CSV under a JSON name, `fleet --pools-out pools.png` CSV under a picture's).
NOT_SHEETS = {".json": "a JSON file (a sheet of JSON is JSON lines, .jsonl)", ".xls": "an Excel 97-2003 file "
              "(save it as .xlsx)", ".png": "a picture", ".svg": "a picture", ".pdf": "a PDF",
              ".html": "a web page", ".htm": "a web page"}


def format_of(path: Path, requested: str | None = None, option: str | None = None, flag: str | None = None) -> str:
    """The sheet format of a file: `requested` (--format) wins; else its extension; any other name
    is CSV, but a name of a kind that is no sheet (NOT_SHEETS) is refused naming `option` (and the
    command's `flag` that would say the format)."""
    if requested:
        return requested
    suffix = path.suffix.lower()
    if option is not None and suffix in NOT_SHEETS:
        raise VramplanError(option, str(path), f"is named as {NOT_SHEETS[suffix]}, not a sheet: name it .csv, "
                                               ".xlsx, .parquet or .jsonl" + (f", or give {flag}" if flag else ""))
    return SUFFIX_FORMATS.get(suffix, "csv")


def require_extra(fmt: str, action: str) -> None:
    if fmt in EXTRAS:
        module, extra = EXTRAS[fmt]
        try:
            __import__(module)
        except ImportError:
            raise CommandFailure(f"{action} {fmt} needs {module}: pip install 'vramplan[{extra}]'") from None


def _read_csv(path: Path, field: str) -> list[list[Any] | UnreadableLine]:
    """Every row as text; a quote left open (which would swallow the rows after it) is the file's
    error, a line the csv module cannot split otherwise (text after a closing quote) its row's
    (UnreadableLine; the reader goes on at the next line), unless it is the header."""
    csv.field_size_limit(CSV_FIELD_LIMIT)  # one huge cell is that row's error (rows.py), not the sheet's
    started = 1
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, strict=True)
            rows: list[list[Any] | UnreadableLine] = []
            while True:
                try:
                    row = next(reader)
                except StopIteration:
                    return rows
                except csv.Error as error:
                    if not rows or "unexpected end of data" in str(error):
                        raise
                    rows.append(UnreadableLine(f"is not valid CSV (line {reader.line_num}: {error})"))
                else:
                    rows.append(row)
                started = reader.line_num + 1
    except UnicodeDecodeError as error:
        byte = error.object[error.start]
        raise VramplanError(field, str(path), f"is not UTF-8 text (byte {error.start} is 0x{byte:02x}); "
                                               "save it as 'CSV UTF-8'") from None
    except csv.Error as error:
        if "unexpected end of data" in str(error):
            raise VramplanError(field, str(path), f"line {started}: a quoted cell starts on this line and its quote "
                                                   "is never closed") from None
        raise VramplanError(field, str(path), f"is not valid CSV: line {reader.line_num}: {error}") from None


def _read_parquet(path: Path, field: str) -> list[list[Any]]:
    """Every row of a Parquet file; named index levels (`df.set_index('id').to_parquet()` stores
    `id` as the index, which pandas restores as the index) are columns like the others."""
    require_extra("parquet", "reading")
    import pandas

    try:
        frame = pandas.read_parquet(path)
        named = [name for name in frame.index.names if name is not None]
        if named:
            frame = frame.reset_index(level=named, allow_duplicates=True)
        header = [str(name) for name in frame.columns]
        rows = [[plain(cell) for cell in row] for row in frame.astype(object).itertuples(index=False)]
        _keep_nan_cells(path, header, rows)
        return [header] + rows
    except MemoryError:
        raise VramplanError(field, str(path), "cannot be read as parquet: it needs more memory than there is") from None
    except Exception as error:  # noqa: BLE001 - pyarrow raises many types
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise VramplanError(field, str(path), f"cannot be read as parquet: {reason}") from None


def _keep_nan_cells(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    """A NaN a floating-point column holds (not a null) as the text `NaN`: pandas reads nulls and
    NaN alike as NaN, and an empty cell would take the column's default (a NaN budget solved with
    no budget). As text, a job column refuses it as JSON lines' `NaN` is refused (never a number,
    docs/input-rules.md); another column keeps it visible in the output."""
    import pyarrow.compute
    import pyarrow.parquet

    table = pyarrow.parquet.read_table(path)
    for name in table.column_names:
        column = table.column(name)
        if not pyarrow.types.is_floating(column.type) or header.count(name) != 1:
            continue
        at = header.index(name)
        nan = pyarrow.compute.fill_null(pyarrow.compute.is_nan(column), False)
        for row in (i for i, flag in enumerate(nan.to_pylist()) if flag):
            rows[row][at] = "NaN"


def _read_xlsx(path: Path, field: str) -> list[list[Any]]:
    require_extra("xlsx", "reading")
    return read_xlsx(path, field)


def _json_integer(digits: str) -> int | str:
    """A JSON integer, or its digits as text past the digits Python converts (4,300): then its
    row's error if a job column holds it (before: the whole sheet's `internal error: ValueError`)."""
    try:
        return int(digits)
    except ValueError:
        return digits


def _json_float(text: str) -> float | str:
    """A JSON number, or its text as written where it is beyond a float (1e400 reads as infinity):
    a job column's error then names the value the line holds, and the output stays strict JSON."""
    value = float(text)
    return value if math.isfinite(value) else text


@dataclass(frozen=True)
class UnreadableLine:
    """A JSON line that is not one JSON object (not JSON, a list, a key named twice): its row's
    error, the other lines are read (read_table)."""

    reason: str


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all distinct (a key named twice would keep its last value
    silently; a CSV column named twice is an error too)."""
    record = dict(pairs)
    if len(record) < len(pairs):
        twice = next(key for at, (key, _) in enumerate(pairs) if key in dict(pairs[:at]))
        raise _DuplicateKey(twice)
    return record


class _DuplicateKey(ValueError):
    pass


def _read_jsonl(path: Path, field: str) -> list[list[Any] | UnreadableLine]:
    """One object per line; the columns are every key of every record, in order of appearance. A
    line that is not one JSON object is its row's error (UnreadableLine); when no line is, the file's."""
    records: list[dict[str, Any] | UnreadableLine] = []
    try:
        with path.open(encoding="utf-8-sig") as handle:  # a byte-order mark, as CSV takes it
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    records.append({})  # a blank row, counted like a CSV's
                    continue
                try:
                    record = json.loads(line, parse_int=_json_integer, parse_float=_json_float,
                                        parse_constant=str, object_pairs_hook=_json_object)
                except (json.JSONDecodeError, RecursionError) as error:
                    reason = getattr(error, "msg", "nested too deeply")
                    records.append(UnreadableLine(f"is not JSON (line {number}: {reason})"))
                    continue
                except _DuplicateKey as twice:
                    records.append(UnreadableLine(f"names the key {str(twice)!r} twice (line {number})"))
                    continue
                records.append(record if isinstance(record, dict) else
                               UnreadableLine(f"is not a JSON object (line {number})"))
    except UnicodeDecodeError as error:
        raise VramplanError(field, str(path), f"is not UTF-8 text (byte {error.start} is "
                                               f"0x{error.object[error.start]:02x})") from None
    objects = [record for record in records if isinstance(record, dict)]
    bad = [record for record in records if isinstance(record, UnreadableLine)]
    if bad and not any(objects):  # no line to read a header from: the file's error
        raise VramplanError(field, str(path), f"has no JSON object with a key; its first other line {bad[0].reason}")
    header = list(dict.fromkeys(key for record in objects for key in record))
    return [header] + [record if isinstance(record, UnreadableLine) else [record.get(name) for name in header]
                       for record in records]


class UnreadableRow(VramplanError):
    """Why a row of the sheet cannot be read whole: a cell with no value (`column: reason`) or
    a row with more or fewer cells than the header (`row has 5 cells, the header 7`)."""

    def __init__(self, column: str | None, reason: str) -> None:
        super().__init__(column or "row", None, reason)
        self.column = column

    def __str__(self) -> str:
        return f"{self.column}: {self.reason}" if self.column else f"row {self.reason}"

    def in_file(self, number: int) -> str:
        """The reason as part of a file's one-line error: `row 3, budget_usd: ...`, `row 3 has ...`."""
        return f"row {number}, {self}" if self.column else f"row {number} {self.reason}"


def _column_label(header: list[str], at: int) -> str:
    name = header[at] if at < len(header) else ""
    return name if COLUMN_NAME.fullmatch(name) else f"column {at + 1}"


def _row_problem(row: list[Any], header: list[str], named: int | None) -> UnreadableRow | None:
    """A cell with no value to read, or (CSV, whose header has `named` columns up to its last
    name) a line with a field missing or one too many: its row's error. Empty cells after the
    last column are no cells (Excel exports them)."""
    for at, cell in enumerate(row):
        if isinstance(cell, Unreadable):
            return UnreadableRow(_column_label(header, at), cell.reason)
    if named is None:
        return None
    used = max((at + 1 for at, cell in enumerate(row) if not is_empty(cell)), default=0)
    if len(row) < named or used > len(header):
        return UnreadableRow(None, f"has {len(row) if len(row) < named else used} cells, the header {named}")
    return None


def _header(cells: list[Any], path: Path, field: str) -> list[str]:
    for at, cell in enumerate(cells):
        if isinstance(cell, Unreadable):
            raise VramplanError(field, str(path), f"the header's column {at + 1} is {cell.reason}")
    return ["" if is_empty(name) else str(writable(name)).strip() for name in cells]


def _refuse_device(path: Path, field: str) -> None:
    """A sheet is a file or a pipe (`/dev/stdin`, a FIFO): a device never ends (`batch /dev/zero` read
    forever) and a directory is no sheet."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # the reader says why it cannot open it
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise VramplanError(field, str(path), "is a device, not a sheet")
    if stat.S_ISDIR(mode):
        raise VramplanError(field, str(path), "is a directory, not a sheet")


def _read_cells(path: Path, fmt: str, field: str) -> list[Any]:
    """The header row, then the rows (a JSON line that is no object: its UnreadableLine)."""
    readers: dict[str, Callable[[Path, str], list[Any]]] = {"csv": _read_csv, "jsonl": _read_jsonl, "xlsx": _read_xlsx,
                                                            "parquet": _read_parquet}
    _refuse_device(path, field)
    try:
        table = readers[fmt](path, field)
    except OSError as error:
        raise VramplanError(field, str(path), f"cannot be read: {error.strerror or error}") from None
    while table and all(is_empty(cell) for cell in table[0]) and len(table) > 1 and fmt != "jsonl":
        table = table[1:]  # blank lines above the header
    if not table or not table[0]:
        raise VramplanError(field, str(path), "is empty (no header row)")
    return table


def _blank_rows_warning(path: Path, blank: list[int]) -> str:
    shown = ", ".join(str(n) for n in blank[:5]) + (", ..." if len(blank) > 5 else "")
    return f"{path}: {len(blank)} blank row{'s' if len(blank) > 1 else ''} skipped (row {shown})"


def read_table(path: Path, fmt: str, warnings: list[str] | None = None, field: str = "jobs",
               row_errors: dict[int, VramplanError] | None = None) -> tuple[list[str], list[list[Any]]]:
    """(header, rows): each row has exactly one cell per header column; errors name the file as
    `field` (the option or argument it came from: jobs, inventory).

    A row that cannot be read whole (a formula with no saved value, a CSV line with a field
    missing or one too many) is kept, its cells as read (missing ones empty), and its error put in
    `row_errors` under its index in the rows; without `row_errors` it is the file's error.
    Blank rows are skipped; those between rows of jobs are counted in one line appended to
    `warnings` (trailing ones, which spreadsheets export, are not)."""
    table = _read_cells(path, fmt, field)
    header = _header(table[0], path, field)
    # Only a CSV line can miss a cell: XLSX rows are padded, Parquet's are whole, JSON lines name theirs.
    named = max((at + 1 for at, name in enumerate(header) if name), default=0) if fmt == "csv" else None
    rows: list[list[Any]] = []
    blank: list[int] = []
    blank_before_last: list[int] = []
    for number, row in enumerate(table[1:], 1 if fmt == "jsonl" else 2):  # a JSON line's row is its line
        if isinstance(row, UnreadableLine):  # a JSON line that is no object: its row's error
            if row_errors is None:
                raise VramplanError(field, str(path), f"row {number} {row.reason}")
            row_errors[len(rows)] = UnreadableRow(None, row.reason)
            rows.append([None] * len(header))
            blank_before_last = list(blank)
            continue
        if all(is_empty(cell) for cell in row):
            blank.append(number)
            continue
        problem = _row_problem(row, header, named)
        if problem is not None:
            if row_errors is None:
                raise VramplanError(field, str(path), problem.in_file(number))
            row_errors[len(rows)] = problem
        cells = list(row[: len(header)]) + [None] * (len(header) - len(row))
        rows.append([None if isinstance(cell, Unreadable) else writable(cell) for cell in cells])
        blank_before_last = list(blank)
    if blank_before_last and warnings is not None:
        warnings.append(_blank_rows_warning(path, blank_before_last))
    # Columns with neither a name nor a value (Excel exports trailing ones) are not columns.
    keep = [i for i, name in enumerate(header) if name or any(not is_empty(row[i]) for row in rows)]
    for i in keep:
        if not header[i]:
            raise VramplanError("column", i + 1, "has values but no name in the header row")
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]
