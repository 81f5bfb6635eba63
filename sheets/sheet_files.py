"""Spreadsheet files for `vramplan batch`: reading jobs and writing plans safely.

- Input: CSV (UTF-8, with or without a BOM; every cell is kept as the text it is), XLSX (first
  sheet, openpyxl) and Parquet (pyarrow), via pandas for the last two; JSON lines too.
- Output: CSV (UTF-8 with a BOM, for Excel), XLSX (frozen header row, autofilter, column
  widths), Parquet or JSON lines, rendered in memory and written by sheets/output_file.py
  (atomically over a regular file, directly to a device or pipe).
- Spreadsheet safety (OWASP CSV injection): in CSV and XLSX output a text cell starting with
  = + - @ tab or carriage return gets a leading apostrophe. This applies to every *text* cell,
  including a CSV input cell such as "-5" (CSV cells are text; no valid job field is negative, so
  only rows that are errors anyway are affected). Real numbers (the answer columns, numeric cells of
  XLSX/Parquet input) are never changed.

The resume journal lives in sheets/journal.py.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable
from datetime import date, datetime
from pathlib import Path
from typing import Any

from vramplan.models.core.errors import CommandFailure, VramplanError
from vramplan.sheets.formats import FORMATS  # noqa: F401  (re-exported)
from vramplan.sheets.output_file import OutputTarget, write_output
from vramplan.sheets.rows import ANSWER_TYPES, is_empty

SUFFIX_FORMATS = {".csv": "csv", ".txt": "csv", ".xlsx": "xlsx", ".xlsm": "xlsx",
                  ".parquet": "parquet", ".pq": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl"}
EXTRAS = {"xlsx": ("openpyxl", "xlsx"), "parquet": ("pyarrow", "parquet")}
INJECTION_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
PLAIN_NUMBER = re.compile(r"-?(0|[1-9][0-9]{0,14})(\.[0-9]{1,15})?")  # as Excel reads it; not 007 or 1e9
CSV_FIELD_LIMIT = 2**31 - 1  # the csv module's 131,072 would reject the whole sheet for one cell


# --- cells ----------------------------------------------------------------------------------------


def neutralise(text: str) -> str:
    """OWASP CSV-injection rule: text a spreadsheet would run as a formula gets a leading apostrophe."""
    return "'" + text if text.startswith(INJECTION_TRIGGERS) else text


def unneutralise(text: str) -> str:
    return text[1:] if text.startswith("'") and text[1:].startswith(INJECTION_TRIGGERS) else text


def plain(value: Any) -> Any:
    """A pandas/numpy cell as a plain Python value; missing values (None, NaN, NA, NaT) as None."""
    if value is None or isinstance(value, (str, int, float)):
        return None if isinstance(value, float) and math.isnan(value) else value
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:  # numpy scalars, not a 1-element array
        try:
            return plain(value.item())
        except (ValueError, AttributeError):
            pass
    import pandas

    try:
        if pandas.isna(value) is True:
            return None
    except (TypeError, ValueError):
        pass
    return value


# --- reading --------------------------------------------------------------------------------------


def format_of(path: Path, requested: str | None = None) -> str:
    return requested or SUFFIX_FORMATS.get(path.suffix.lower(), "csv")


def require_extra(fmt: str, action: str) -> None:
    if fmt in EXTRAS:
        module, extra = EXTRAS[fmt]
        try:
            __import__(module)
        except ImportError:
            raise CommandFailure(f"{action} {fmt} needs {module}: pip install 'vramplan[{extra}]'") from None


def _read_csv(path: Path, field: str) -> list[list[Any]]:
    """Every row as text; a quote left open (which would swallow the rows after it) is an error."""
    csv.field_size_limit(CSV_FIELD_LIMIT)  # one huge cell is that row's error (rows.py), not the sheet's
    started = 1
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle, strict=True)
            rows = []
            for row in reader:
                rows.append(row)
                started = reader.line_num + 1
            return rows
    except UnicodeDecodeError as error:
        byte = error.object[error.start]
        raise VramplanError(field, str(path), f"is not UTF-8 text (byte {error.start} is 0x{byte:02x}); "
                                               "save it as 'CSV UTF-8'") from None
    except csv.Error as error:
        if "unexpected end of data" in str(error):
            raise VramplanError(field, str(path), f"line {started}: a quoted cell starts on this line and its quote "
                                                   "is never closed") from None
        raise VramplanError(field, str(path), f"is not valid CSV: line {reader.line_num}: {error}") from None


# An XLSX is a zip of XML: a few kilobytes can unpack to gigabytes (a zip bomb hung `batch` past
# 300 s). A real job sheet of 100,000 rows x 60 columns unpacks to about 300 MB.
MAX_XLSX_UNPACKED_BYTES = 512 * 2**20


def check_xlsx_size(path: Path, field: str) -> None:
    """Refuse an XLSX whose parts unpack to more than MAX_XLSX_UNPACKED_BYTES, before any XML is parsed."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (OSError, zipfile.BadZipFile) as error:
        raise VramplanError(field, str(path), f"cannot be read as xlsx: {error}") from None
    if unpacked > MAX_XLSX_UNPACKED_BYTES:
        raise VramplanError(field, str(path), f"unpacks to {unpacked / 2**20:,.0f} MiB, more than the "
                                               f"{MAX_XLSX_UNPACKED_BYTES // 2**20} MiB a job sheet may hold")


def _read_frame(path: Path, fmt: str, field: str) -> list[list[Any]]:
    require_extra(fmt, "reading")
    import pandas

    if fmt == "xlsx":
        check_xlsx_size(path, field)
    try:
        if fmt == "xlsx":
            frame = pandas.read_excel(path, header=None, dtype=object, engine="openpyxl")
            return [[plain(cell) for cell in row] for row in frame.itertuples(index=False)]
        frame = pandas.read_parquet(path)
    except MemoryError:
        raise VramplanError(field, str(path), f"cannot be read as {fmt}: it needs more memory than there is") from None
    except Exception as error:  # noqa: BLE001 - openpyxl, zipfile, XML and pyarrow raise many types
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise VramplanError(field, str(path), f"cannot be read as {fmt}: {reason}") from None
    header = [str(name) for name in frame.columns]
    return [header] + [[plain(cell) for cell in row] for row in frame.astype(object).itertuples(index=False)]


def _read_jsonl(path: Path, field: str) -> list[list[Any]]:
    """One object per line; the columns are every key of every record, in order of appearance."""
    records = []
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    records.append({})  # a blank row, counted like a CSV's
                    continue
                try:
                    record = json.loads(line)
                except (json.JSONDecodeError, RecursionError) as error:
                    reason = getattr(error, "msg", "nested too deeply")
                    raise VramplanError(field, str(path), f"line {number} is not JSON: {reason}") from None
                if not isinstance(record, dict):
                    raise VramplanError(field, str(path), f"line {number} is not a JSON object")
                records.append(record)
    except UnicodeDecodeError as error:
        raise VramplanError(field, str(path), f"is not UTF-8 text (byte {error.start} is "
                                               f"0x{error.object[error.start]:02x})") from None
    header = list(dict.fromkeys(key for record in records for key in record))
    return [header] + [[record.get(name) for name in header] for record in records]


def _writable(cell: Any) -> Any:
    """A cell every output format can write back: text that is not valid Unicode (a lone surrogate
    from a JSON-lines escape) keeps its escapes as text, and a list or object (Parquet list cells,
    nested JSON) becomes its JSON text. A job column holding either is that row's error when the
    row is read; the other rows are solved (before: every row solved, then no output at all)."""
    if isinstance(cell, str):
        try:
            cell.encode("utf-8")
        except UnicodeEncodeError:
            return cell.encode("utf-8", "backslashreplace").decode("utf-8")
        return cell
    if isinstance(cell, (list, tuple, dict)) or type(cell).__name__ == "ndarray":
        value = cell.tolist() if type(cell).__name__ == "ndarray" else cell
        return _writable(json.dumps(value, ensure_ascii=False, default=str))
    return cell


def read_table(path: Path, fmt: str, warnings: list[str] | None = None,
               field: str = "jobs") -> tuple[list[str], list[list[Any]]]:
    """(header, rows): each row has exactly one cell per header column; errors name the file as
    `field` (the option or argument it came from: jobs, inventory).

    Blank rows are skipped; those between rows of jobs are counted in one line appended to
    `warnings` (trailing ones, which spreadsheets export, are not)."""
    readers = {"csv": _read_csv, "jsonl": _read_jsonl}
    try:
        table = readers[fmt](path, field) if fmt in readers else _read_frame(path, fmt, field)
    except OSError as error:
        raise VramplanError(field, str(path), f"cannot be read: {error.strerror or error}") from None
    while table and all(is_empty(cell) for cell in table[0]) and len(table) > 1 and fmt != "jsonl":
        table = table[1:]  # blank lines above the header
    if not table or not table[0]:
        raise VramplanError(field, str(path), "is empty (no header row)")
    header = ["" if is_empty(name) else str(name).strip() for name in table[0]]
    rows, blank, blank_before_last = [], [], []
    for number, row in enumerate(table[1:], 2):
        cells = list(row) + [None] * (len(header) - len(row))
        if any(not is_empty(cell) for cell in cells[len(header):]):
            raise VramplanError(field, str(path), f"row {number} has more cells than the header's {len(header)}")
        cells = cells[: len(header)]
        if any(not is_empty(cell) for cell in cells):
            rows.append(cells)
            blank_before_last = list(blank)
        else:
            blank.append(number)
    interior = blank_before_last if rows else []
    if interior and warnings is not None:
        shown = ", ".join(str(n) for n in interior[:5]) + (", ..." if len(interior) > 5 else "")
        warnings.append(f"{path}: {len(interior)} blank row{'s' if len(interior) > 1 else ''} skipped (row {shown})")
    rows = [[_writable(cell) for cell in row] for row in rows]
    # Columns with neither a name nor a value (Excel exports trailing ones) are not columns.
    keep = [i for i, name in enumerate(header) if name or any(not is_empty(row[i]) for row in rows)]
    for i in keep:
        if not header[i]:
            raise VramplanError("column", i + 1, "has values but no name in the header row")
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]


# --- writing --------------------------------------------------------------------------------------

XLSX_MIN_WIDTH, XLSX_MAX_WIDTH = 6, 60  # characters; widths from the header and the first rows
XLSX_WIDTH_SAMPLE_ROWS = 200


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
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    return neutralise(ILLEGAL_CHARACTERS_RE.sub("", value))


def _xlsx_cell(value: Any) -> Any:
    """A number stays a number (a CSV cell that is plainly one, like `2048` or `0.9`, becomes one,
    as Excel itself would read it; `007` or `1e9` stay text); text is neutralised."""
    value = _text(plain(value))
    if isinstance(value, str):
        if PLAIN_NUMBER.fullmatch(value):
            return float(value) if "." in value else int(value)
        return _xlsx_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # Excel has no inf/NaN numbers
    return value


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
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return [None if v is None else float(v) for v in values], "float64"
    return [None if v is None else str(_text(v)) for v in values], None


def _write_parquet(handle: io.BytesIO, header: list[str], rows: Iterable[list[Any]], answer_start: int) -> None:
    import pandas

    columns = list(zip(*[[plain(cell) for cell in row] for row in rows])) or [[] for _ in header]
    data = {}
    for i, name in enumerate(header):
        kind = list(ANSWER_TYPES.values())[i - answer_start] if i >= answer_start else None
        values, dtype = _column_values(list(columns[i]), kind)
        data[name] = pandas.Series(values, dtype=dtype if dtype else object)
    pandas.DataFrame(data).to_parquet(handle, index=False)


def _write_jsonl(handle: io.BytesIO, header: list[str], rows: Iterable[list[Any]]) -> None:
    for row in rows:
        record = dict(zip(header, (plain(cell) for cell in row)))
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
