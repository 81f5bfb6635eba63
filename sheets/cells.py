"""Cells of a sheet: spreadsheet safety (OWASP CSV injection), pandas values as plain Python, and
cells every output format can write.

- In CSV and XLSX output a text cell starting with = + - @ tab or carriage return gets a leading
  apostrophe (`neutralise`); reading an output back removes it (`unneutralise`).
- `writable` is applied to every cell when a sheet is read (sheets/sheet_files.py read_table): the
  output is written after every row was solved, so a cell it could not write would cost them all.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

INJECTION_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
KEPT_TYPES = (bool, int, float, datetime, date, time, timedelta)  # cells every writer writes as they are


@dataclass(frozen=True)
class Unreadable:
    """A cell with no value to read (an XLSX formula with no saved value): its row's error.
    `reason` is fixed text, never the cell's content."""

    reason: str


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


def writable(cell: Any) -> Any:
    """A cell every output format can write back, made so when the sheet is read (the output is
    written after every row was solved: a cell it cannot write would cost them all). Numbers,
    booleans, dates and times stay; text that is not valid Unicode (a lone surrogate from a
    JSON-lines escape) keeps its escapes as text; bytes (a Parquet binary column) become text with
    escapes for what is not UTF-8; a list or object (Parquet list cells, nested JSON) becomes its
    JSON text; anything else (a Parquet decimal) its text. A job column holding such a cell is
    that row's error when the row is parsed; the other rows are solved."""
    if cell is None or isinstance(cell, KEPT_TYPES):
        return cell
    if isinstance(cell, str):
        try:
            cell.encode("utf-8")
        except UnicodeEncodeError:
            return cell.encode("utf-8", "backslashreplace").decode("utf-8")
        return cell
    if isinstance(cell, (bytes, bytearray, memoryview)):
        return bytes(cell).decode("utf-8", "backslashreplace")
    if isinstance(cell, (list, tuple, dict)) or type(cell).__name__ == "ndarray":
        value = cell.tolist() if type(cell).__name__ == "ndarray" else cell
        return writable(json.dumps(value, ensure_ascii=False, default=str))
    return writable(str(cell))
