"""Writing plans: CSV (UTF-8 with a BOM, for Excel), XLSX (frozen header row, autofilter, column
widths), Parquet or JSON lines, rendered in memory and written by sheets/output_file.py
(atomically over a regular file, directly to a device or pipe).

Spreadsheet safety (OWASP CSV injection): in CSV and XLSX output a text cell starting with
= + - @ tab or carriage return gets a leading apostrophe (sheets/cells.py). This applies to every
*text* cell, including a CSV input cell such as "-5" (CSV cells are text; no valid job field is
negative, so only rows that are errors anyway are affected). Real numbers (the answer columns,
numeric cells of XLSX/Parquet input) are never changed.

Every cell reaching these writers was made writable when the sheet was read (sheets/cells.py
writable): what is left here is each format's own limits (Excel's characters and cell length,
Parquet's one type per column).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, time, timedelta
from typing import Any

from vramplan.sheets.cells import neutralise, plain
from vramplan.sheets.output_file import OutputTarget, write_output
from vramplan.sheets.rows import ANSWER_TYPES

PLAIN_NUMBER = re.compile(r"-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,15})?")  # as Excel reads it; not 007 or 1e9
XLSX_MIN_WIDTH, XLSX_MAX_WIDTH = 6, 60  # characters; widths from the header and the first rows
XLSX_WIDTH_SAMPLE_ROWS = 200
XLSX_MAX_CELL_CHARS = 32_767  # Excel's limit on the characters of one cell
XLSX_EXACT_INTEGERS = 10**15  # Excel keeps 15 digits: a longer integer is written as its digits, as text


def _text(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (list, dict, tuple)):  # a JSON-lines cell: written as the JSON it was
        return json.dumps(value, ensure_ascii=False, default=str)
    return value


def _csv_cell(value: Any) -> str:
    value = _text(plain(value))
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    return neutralise(str(value))


def _write_csv(handle: io.BytesIO, header: list[str], rows: Iterable[list[Any]]) -> None:
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", newline="")
    writer = csv.writer(text)
    writer.writerow([_csv_cell(name) for name in header])
    writer.writerows([_csv_cell(cell) for cell in row] for row in rows)
    text.flush()
    text.detach()


def _xlsx_text(value: str) -> str:
    """Text as an XLSX cell holds it: without the control characters XML cannot carry, neutralised,
    and cut to Excel's 32,767 characters with a mark saying so (openpyxl cut it silently)."""
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    text = neutralise(ILLEGAL_CHARACTERS_RE.sub("", value))
    if len(text) <= XLSX_MAX_CELL_CHARS:
        return text
    mark = f" [cut: {len(value):,} characters; an XLSX cell holds {XLSX_MAX_CELL_CHARS:,}]"
    return text[: XLSX_MAX_CELL_CHARS - len(mark)] + mark


def _xlsx_cell(value: Any) -> Any:
    """A number stays a number (a CSV cell that is plainly one, like `2048` or `0.9`, becomes one,
    as Excel itself would read it; `007` or `1e9` stay text); text is neutralised."""
    value = _text(plain(value))
    if isinstance(value, int) and abs(value) >= XLSX_EXACT_INTEGERS:  # JSON lines allow any integer
        return _xlsx_text(str(value))
    if value is None or isinstance(value, (int, time, timedelta)):  # bool is an int
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)  # Excel has no inf/NaN numbers
    if isinstance(value, str) and PLAIN_NUMBER.fullmatch(value):
        return float(value) if "." in value else int(value)
    return _xlsx_text(str(value))


def _xlsx_width(cells: Iterable[Any]) -> int:
    longest = max((len(str(cell)) for cell in cells if cell is not None), default=0)
    return max(XLSX_MIN_WIDTH, min(XLSX_MAX_WIDTH, longest + 2))


def _write_xlsx(handle: io.BytesIO, header: list[str], rows: list[list[Any]]) -> None:
    """One sheet: a frozen header row with an autofilter, columns as wide as their content."""
    from openpyxl import Workbook
    from openpyxl.utils import get_column_letter

    book = Workbook(write_only=True)
    sheet = book.create_sheet("plans")
    cells = [[_xlsx_cell(cell) for cell in row] for row in rows]
    sample = cells[:XLSX_WIDTH_SAMPLE_ROWS]
    for i, name in enumerate(header):
        sheet.column_dimensions[get_column_letter(i + 1)].width = _xlsx_width([name] + [row[i] for row in sample])
    sheet.freeze_panes = "A2"
    if header:
        sheet.auto_filter.ref = f"A1:{get_column_letter(len(header))}{len(rows) + 1}"
    sheet.append([_xlsx_text(str(name)) for name in header])
    for row in cells:
        sheet.append(row)
    book.save(handle)


def _column_values(values: list[Any], kind: type | None) -> tuple[list[Any], str | None]:
    """Parquet needs one type per column: answers by their type; input columns as found, else text."""
    if kind is int:
        return values, "Int64"
    if kind is float:
        return [None if v is None else float(v) for v in values], "float64"
    if kind is bool:
        return [None if v is None else bool(v) for v in values], "boolean"
    present = [v for v in values if v is not None]
    # a Parquet input's NaN reads as the text NaN (sheet_files._keep_nan_cells): a float column again
    if present and all((isinstance(v, (int, float)) and not isinstance(v, bool)) or v == "NaN" for v in present):
        try:
            return [None if v is None else float(v) for v in values], "float64"
        except OverflowError:  # an integer past float's range (JSON lines allow any): kept as its digits
            pass
    return [None if v is None else str(_text(v)) for v in values], None


def _write_parquet(handle: io.BytesIO, header: list[str], rows: Iterable[list[Any]], answer_start: int) -> None:
    import pandas

    columns: list[Sequence[Any]] = list(zip(*[[plain(cell) for cell in row] for row in rows])) or [[] for _ in header]
    data = {}
    for i, name in enumerate(header):
        kind = list(ANSWER_TYPES.values())[i - answer_start] if i >= answer_start else None
        values, dtype = _column_values(list(columns[i]), kind)
        data[name] = pandas.Series(values, dtype=dtype if dtype else object)
    pandas.DataFrame(data).to_parquet(handle, index=False)


def _json_cell(cell: Any) -> Any:
    """A cell as strict JSON holds it: an infinite number (a Parquet input's) as its text, which
    JSON has no number for (json.dumps would write `Infinity`, which strict parsers refuse)."""
    value = plain(cell)
    return str(value) if isinstance(value, float) and not math.isfinite(value) else value


def _write_jsonl(handle: io.BytesIO, header: list[str], rows: Iterable[list[Any]]) -> None:
    for row in rows:
        record = dict(zip(header, (_json_cell(cell) for cell in row)))
        handle.write((json.dumps(record, ensure_ascii=False, default=str) + "\n").encode("utf-8"))


def render_table(fmt: str, header: list[str], rows: list[list[Any]], answer_start: int) -> bytes:
    """The whole output file's bytes (written by sheets/output_file.py, atomically or directly)."""
    handle = io.BytesIO()
    if fmt == "csv":
        _write_csv(handle, header, rows)
    elif fmt == "xlsx":
        _write_xlsx(handle, header, rows)
    elif fmt == "parquet":
        _write_parquet(handle, header, rows, answer_start)
    else:
        _write_jsonl(handle, header, rows)
    return handle.getvalue()


def write_table(target: OutputTarget, fmt: str, header: list[str], rows: list[list[Any]], answer_start: int) -> None:
    write_output(target, render_table(fmt, header, rows, answer_start))
