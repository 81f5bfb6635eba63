"""Reading the first sheet of an XLSX job sheet (openpyxl, read-only), formulas included.

A cell holding a formula is read as the value the spreadsheet program saved with it. A file
written by a program that never computes formulas (openpyxl, many exporters) saves none: such a
cell is not an empty cell (a budget or a GPU count silently dropped) but its row's error, and so
is a cell whose saved value is an error (#DIV/0!, #N/A). The rows come back with an `Unreadable`
marker in those cells; sheets/sheet_files.py read_table turns it into the row's error.

The workbook is read streaming, once for the saved values and, when the worksheet's XML holds a
formula at all, once more for the formulas (openpyxl gives one or the other). Numbers stay
numbers (a whole number as an int, as pandas read them before), dates stay dates, and text is
text as written (pandas also read `NA`, `null` or `nan` text as an empty cell).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable
from itertools import zip_longest
from pathlib import Path
from typing import Any

from vramplan.models.core.errors import VramplanError
from vramplan.sheets.cells import Unreadable

# An XLSX is a zip of XML: a few kilobytes can unpack to gigabytes (a zip bomb hung `batch` past
# 300 s). A real job sheet of 100,000 rows x 60 columns unpacks to about 300 MB.
MAX_XLSX_UNPACKED_BYTES = 512 * 2**20
ERROR_CODES = ("#NULL!", "#DIV/0!", "#VALUE!", "#REF!", "#NAME?", "#NUM!", "#N/A")  # the only ones Excel has
FORMULA_TAG = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?f[\s>/]")
XML_CHUNK_BYTES = 1 << 20
NO_SAVED_VALUE = ("a formula with no saved value (open and save the sheet in Excel or LibreOffice so its values "
                  "are stored)")


def check_xlsx_size(path: Path, field: str) -> None:
    """Refuse an XLSX whose parts unpack to more than MAX_XLSX_UNPACKED_BYTES, before any XML is parsed."""
    try:
        with zipfile.ZipFile(path) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (OSError, zipfile.BadZipFile) as error:
        raise VramplanError(field, str(path), f"cannot be read as xlsx: {error}") from None
    if unpacked > MAX_XLSX_UNPACKED_BYTES:
        raise VramplanError(field, str(path), f"unpacks to {unpacked / 2**20:,.0f} MiB, more than the "
                                               f"{MAX_XLSX_UNPACKED_BYTES // 2**20} MiB a job sheet may hold")


def read_xlsx(path: Path, field: str) -> list[list[Any]]:
    """Every row of the first worksheet, as many cells as the widest row (a missing cell is empty)."""
    check_xlsx_size(path, field)
    from openpyxl import load_workbook

    books = []
    try:
        books.append(load_workbook(path, read_only=True, data_only=True, keep_links=False))
        if not books[0].worksheets:
            raise VramplanError(field, str(path), "has no worksheet")
        values = books[0].worksheets[0]
        formulas = None
        if _has_formulas(path, getattr(values, "_worksheet_path", None)):  # most sheets have none: one pass
            books.append(load_workbook(path, read_only=True, data_only=False, keep_links=False))
            formulas = books[1].worksheets[0]
        rows = _rows(values, formulas)
    except VramplanError:
        raise
    except MemoryError:
        raise VramplanError(field, str(path), "cannot be read as xlsx: it needs more memory than there is") from None
    except Exception as error:  # noqa: BLE001 - openpyxl, zipfile and XML raise many types
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise VramplanError(field, str(path), f"cannot be read as xlsx: {reason}") from None
    finally:
        for book in books:
            book.close()
    width = max((len(row) for row in rows), default=0)
    return [row + [None] * (width - len(row)) for row in rows]


def _has_formulas(path: Path, part: str | None) -> bool:
    """Whether the worksheet's XML holds a formula element (<f>, <f .../>, or prefixed: <x:f>),
    read in chunks that overlap by more than one tag (True when openpyxl does not say which part
    the worksheet is)."""
    if part is None:
        return True
    with zipfile.ZipFile(path) as archive, archive.open(part) as xml:
        tail = b""
        while chunk := xml.read(XML_CHUNK_BYTES):
            if FORMULA_TAG.search(tail + chunk):
                return True
            tail = chunk[-64:]
    return False


def _rows(values: Any, formulas: Any | None) -> list[list[Any]]:
    """The saved values, with an Unreadable marker where a formula saved none or saved an error.
    A sheet's declared dimensions can be wrong: both are read as far as their cells go."""
    values.reset_dimensions()
    if formulas is None:
        pairs: Iterable[tuple[Any, Any]] = ((cells, ()) for cells in values.iter_rows())
    else:
        formulas.reset_dimensions()
        pairs = zip_longest(values.iter_rows(), formulas.iter_rows(values_only=True), fillvalue=())
    rows = []
    for cells, written in pairs:
        row = [_cell(cell, formula) for cell, formula in zip_longest(cells, written)]
        while row and row[-1] is None:
            row.pop()  # trailing empty cells
        rows.append(row)
    return rows


def _cell(cell: Any, written: Any) -> Any:
    """One cell as pandas read it before (numbers whole where they are whole), or Unreadable."""
    value = getattr(cell, "value", None)
    if value is None:
        return Unreadable(NO_SAVED_VALUE) if written is not None else None
    if cell.data_type == "e":  # an error value
        code = f" ({value})" if value in ERROR_CODES else ""
        return Unreadable(f"a formula whose saved value is an error{code}")
    if cell.data_type == "n" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value
